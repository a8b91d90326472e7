//! Conversions out (`docs/api.md#conversions-out`), sent for real to a receiver on loopback:
//! Meta's request as Meta documents it, batched; postback macros; signed webhooks; retries with
//! backoff and `Retry-After`, dead deliveries and their retry; addresses refused when they
//! resolve to private ones.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::support::receiver::{Receiver, Reply};
use crate::support::{DAY_MS, NOW_MS, Space, TestServer, assert_duplicate_of, assert_queued};

pub(crate) const WAIT: Duration = Duration::from_secs(20);

pub(crate) async fn private_server() -> TestServer {
    TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = Duration::from_millis(500);
    })
    .await
}

pub(crate) async fn destination(s: &TestServer, space: &Space, body: &Value) -> Value {
    let r = s.post_as(space, "/destinations", &body.to_string()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["destination"].clone()
}

pub(crate) async fn deliveries(s: &TestServer, space: &Space, query: &str) -> Vec<Value> {
    s.list_as(space, &format!("/deliveries{query}"), "deliveries")
        .await
}

/// Webhook `hook` of space `a`, sent to `r`'s `/hook`; answers it as created.
async fn webhook(s: &TestServer, r: &Receiver) -> Value {
    destination(
        s,
        &s.a,
        &json!({"name": "hook", "kind": "webhook", "url": r.url("/hook")}),
    )
    .await
}

/// Waits until the delivery of `inbox_id` is in `state`, and answers it.
pub(crate) async fn delivery_in(s: &TestServer, inbox_id: u64, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let all = deliveries(s, &s.a, "?limit=1000").await;
        if let Some(d) = all
            .iter()
            .find(|d| d["inbox_id"].as_str() == Some(&*inbox_id.to_string()) && d["state"] == state)
        {
            return d.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "delivery of {inbox_id} never became {state}: {all:#?}"
        );
        // Wakes the senders, as a step of the clock does not.
        s.app.as_ref().unwrap().delivery_wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a request is signed under `secret` as Standard Webhooks specifies, checked by the
/// `standardwebhooks` crate (its own check of the time is against the real clock, which the
/// tests' manual clock is not, so the signature is computed by it and compared).
pub(crate) fn verify(secret: &str, req: &crate::support::receiver::Received, body: &[u8]) -> bool {
    let (Some(id), Some(ts), Some(header)) = (
        req.header("webhook-id"),
        req.header("webhook-timestamp")
            .and_then(|t| t.parse::<i64>().ok()),
        req.header("webhook-signature"),
    ) else {
        return false;
    };
    let expected = standardwebhooks::Webhook::new(secret)
        .unwrap()
        .sign(id, ts, body)
        .unwrap();
    header.split(' ').any(|s| s == expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_each_new_event_once_signed_as_the_feed_shows_it() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let hook = webhook(&s, &r).await;
    let secret = hook["signing_secret"].as_str().unwrap().to_owned();
    let first = assert_queued(
        &s.post_event(r#"{"event":"deposit","eid":"o-1","value":"12.50","currency":"USD"}"#)
            .await,
    );
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","eid":"o-1","value":"12.50","currency":"USD"}"#)
            .await,
        first,
    );
    let dry = s
        .post_event(r#"{"event":"contact","uid":"x","dry_run":true}"#)
        .await;
    assert_eq!(dry.status, 200, "{}", dry.text());
    let second = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u-2"}"#).await);
    // Another space's events are not this destination's.
    assert_queued(
        &s.post_as(&s.b, "/events", r#"{"event":"contact","uid":"b-1"}"#)
            .await,
    );
    delivery_in(&s, second, "delivered").await;
    delivery_in(&s, first, "delivered").await;
    let got = r.received();
    assert_eq!(got.len(), 2, "one request per new event: {got:#?}");

    let feed = s.read_as(&s.a, "/events").await.json();
    for req in &got {
        let event = feed["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["inbox_id"] == req.json()["inbox_id"])
            .unwrap();
        assert_eq!(
            (req.method.as_str(), req.target.as_str()),
            ("POST", "/hook")
        );
        assert_eq!(&req.json(), event, "the event as GET /events shows it");
        assert!(secret.starts_with("whsec_"), "{secret}");
        assert!(verify(&secret, req, &req.body), "{:?}", req.headers);
        let mut changed = req.body.clone();
        changed[10] ^= 1;
        assert!(!verify(&secret, req, &changed), "one byte changed");
        assert!(!verify("whsec_b3RoZXI=", req, &req.body));
        assert_eq!(
            req.header("webhook-timestamp"),
            Some((NOW_MS / 1000).to_string().as_str())
        );
        assert_eq!(
            req.header("webhook-id"),
            event["event_id"].as_str(),
            "{:?}",
            req.headers
        );
    }
    // The delivery log names each delivery's event by the id its receiver saw.
    let mut logged: Vec<(Value, Value)> = deliveries(&s, &s.a, "")
        .await
        .iter()
        .map(|d| (d["inbox_id"].clone(), d["event_id"].clone()))
        .collect();
    let mut sent: Vec<(Value, Value)> = got
        .iter()
        .map(|req| {
            (
                req.json()["inbox_id"].clone(),
                req.json()["event_id"].clone(),
            )
        })
        .collect();
    logged.sort_by_key(|p| p.0.to_string());
    sent.sort_by_key(|p| p.0.to_string());
    assert_eq!(logged, sent);
    let listed = s.read_as(&s.a, "/destinations").await.json();
    assert_eq!(listed["destinations"][0]["deliveries"]["delivered"], 2);
    s.stop().await;
}

/// A click with an fbclid, bound to Telegram user `tg`; answers its uid.
async fn click(s: &TestServer, fbclid: &str, tg: u64) -> String {
    bound_click(s, "fbclid", fbclid, tg).await
}

/// A click of link `ad` in campaign `c` with the ad platform's click id `name` set to `id`,
/// bound to Telegram user `tg`; answers its uid.
pub(crate) async fn bound_click(s: &TestServer, name: &str, id: &str, tg: u64) -> String {
    let uid = s
        .click(
            &s.a,
            &format!(r#"{{"link_slug":"ad","{name}":"{id}","campaign_name":"c"}}"#),
        )
        .await;
    assert_eq!(s.bind(&s.a, &uid, tg).await.status, 200);
    uid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_gets_the_documented_request_batched_with_only_clicks_it_can_match() {
    // The held request must outlast the posts below on a loaded machine.
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = WAIT;
    })
    .await;
    let meta = meta_sending_to(
        &s,
        json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1234567890",
                "access_token": "EAAB-token-wxyz", "test_event_code": "TEST123"}),
    )
    .await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    // Held: the events after this one wait for it, then go in one request.
    meta.then([Reply::Held]);
    let held = assert_queued(
        &s.post_event(&format!(r#"{{"event":"registration","uid":"{uid}"}}"#))
            .await,
    );
    meta.wait_for(1, WAIT).await;
    let mut batched = Vec::new();
    for i in 0..20 {
        batched.push(assert_queued(
            &s.post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","eid":"d-{i}","value":"12.50","currency":"usd"}}"#
            ))
            .await,
        ));
    }
    // Without an fbclid, Meta cannot match it: no delivery.
    let plain = s.click(&s.a, r#"{"link_slug":"ad"}"#).await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{plain}"}}"#))
            .await,
    );
    // Older than 7 days: never put in a request.
    let old = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"contact","uid":"{uid}","occurred_at_ms":{}}}"#,
            NOW_MS - 8 * DAY_MS
        ))
        .await,
    );
    meta.release();
    for id in &batched {
        delivery_in(&s, *id, "delivered").await;
    }
    delivery_in(&s, held, "delivered").await;
    let dead = delivery_in(&s, old, "dead").await;
    assert!(
        dead["last_answer"].as_str().unwrap().contains("7 days"),
        "{dead}"
    );
    let got = meta.received();
    assert_eq!(got.len(), 2, "the held request, then one batch: {got:#?}");
    let body = got[1].json();
    assert_eq!(body["data"].as_array().unwrap().len(), 20, "{body}");
    assert_eq!(body["access_token"], "EAAB-token-wxyz");
    assert_eq!(body["test_event_code"], "TEST123");
    assert_eq!(got[1].target, "/v25.0/1234567890/events");
    let e = &body["data"][0];
    assert_eq!(e["event_name"], "Purchase");
    // The payment's own id, under which Meta deduplicates it with the pixel's.
    assert_eq!(e["event_id"], "d-0");
    assert_eq!(e["event_time"], NOW_MS / 1000);
    assert_eq!(e["action_source"], "chat");
    let fbc = format!("fb.1.{NOW_MS}.IwAR-1");
    let clicked = s.read_as(&s.a, "/events?limit=1").await.json();
    assert_eq!(
        e["user_data"]["fbc"], clicked["events"][0]["fbc"],
        "the feed's fbc ({fbc} or the click's own time)"
    );
    assert_eq!(
        e["user_data"]["external_id"],
        json!([hex::encode(Sha256::digest(b"777000111"))])
    );
    assert_eq!(e["custom_data"], json!({"value": 12.5, "currency": "USD"}));
    assert_eq!(
        got[0].json()["data"][0]["event_name"],
        "CompleteRegistration"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postback_macros_are_filled_percent_encoded() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let template = r.url(
        "/pb?e={event}&x={eid}&v={value}&c={currency}&u={uid}&t={tg_id}&i={inbox_id}\
         &f={fbclid}&n={campaign_name}&s={link_slug}&o={occurred_at_ms}",
    );
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback", "url": template}),
    )
    .await;
    let uid = s
        .click(
            &s.a,
            r#"{"link_slug":"ad","fbclid":"fb 1","campaign_name":"Осень & co=50%"}"#,
        )
        .await;
    assert_eq!(s.bind(&s.a, &uid, 42).await.status, 200);
    let id = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"a&b=c","value":"1.5","currency":"EUR"}}"#
        ))
        .await,
    );
    // Unattributed: not sent (a postback takes only attributed events by default).
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"nobody"}"#).await);
    delivery_in(&s, id, "delivered").await;
    let got = r.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].method, "GET");
    assert_eq!(
        got[0].target,
        format!(
            "/pb?e=deposit&x=a%26b%3Dc&v=1.5&c=EUR&u={uid}&t=42&i={id}\
             &f=fb%201&n=%D0%9E%D1%81%D0%B5%D0%BD%D1%8C%20%26%20co%3D50%25&s=ad&o={NOW_MS}"
        )
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_back_off_honour_retry_after_and_end_dead_until_retried() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = Duration::from_millis(300);
        c.delivery.max_age = Duration::from_secs(3600);
    })
    .await;
    let r = Receiver::start().await;
    webhook(&s, &r).await;
    r.then([
        Reply::Status(500, vec![], "down".into()),
        Reply::Status(429, vec![("Retry-After", "120".into())], "slow down".into()),
        Reply::Hang,
        Reply::Status(404, vec![], "no such hook".into()),
    ]);
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u"}"#).await);

    // 500: tried again after about 10 s (8 to 12 with the jitter).
    let d = delivery_in(&s, id, "retrying").await;
    assert_eq!(
        (d["attempts"].clone(), d["last_status"].clone()),
        (json!(1), json!(500))
    );
    assert_eq!(d["last_answer"], "down");
    let next = d["next_attempt_at_ms"].as_u64().unwrap();
    assert!((NOW_MS + 8_000..=NOW_MS + 12_000).contains(&next), "{d}");
    // Not before its time.
    s.clock.set(next - 1);
    s.app.as_ref().unwrap().delivery_wake.notify_waiters();
    assert_eq!(r.received().len(), 1);

    // 429 with Retry-After: 120 s, more than the backoff's 20 s.
    s.clock.set(next);
    r.wait_for(2, WAIT).await;
    // The receiver has the request before the sender has stored its answer: look until the
    // second attempt is recorded (a busy machine takes more than a moment).
    let deadline = tokio::time::Instant::now() + WAIT;
    let d = loop {
        let d = delivery_in(&s, id, "retrying").await;
        if d["attempts"] != 1 || tokio::time::Instant::now() > deadline {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(d["last_status"], 429, "{d}");
    assert_eq!(d["next_attempt_at_ms"], next + 120_000);

    // A hang, cut by delivery_timeout.
    s.clock.set(next + 120_000);
    r.wait_for(3, WAIT).await;
    let d = loop {
        let d = delivery_in(&s, id, "retrying").await;
        if d["attempts"] == 3 {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(d["last_status"], Value::Null);
    assert!(
        d["last_answer"].as_str().unwrap().contains("timed out"),
        "{d}"
    );

    // 404: refused for good.
    s.clock.set(d["next_attempt_at_ms"].as_u64().unwrap());
    let d = delivery_in(&s, id, "dead").await;
    assert_eq!(
        (d["attempts"].clone(), d["last_status"].clone()),
        (json!(4), json!(404))
    );
    let listed = s.read_as(&s.a, "/destinations").await.json();
    let hook = &listed["destinations"][0];
    assert_eq!(hook["deliveries"]["dead"], 1, "{hook}");
    assert_eq!(hook["last_error"]["status"], 404, "{hook}");
    assert_eq!(hook["last_error"]["answer"], "no such hook");

    // Retried by hand: due now, delivered.
    let retried = s
        .post_as(&s.a, "/deliveries/retry", r#"{"destination":"hook"}"#)
        .await;
    assert_eq!(retried.json()["retried"], 1, "{}", retried.text());
    let d = delivery_in(&s, id, "delivered").await;
    assert_eq!(d["attempts"], 5);
    assert_eq!(r.received().len(), 5);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_still_failing_after_delivery_max_age_is_dead() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.max_age = Duration::from_secs(60);
    })
    .await;
    let r = Receiver::start().await;
    r.always(Reply::Status(503, vec![], "down".into()));
    webhook(&s, &r).await;
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u"}"#).await);
    let d = delivery_in(&s, id, "retrying").await;
    // Retried while its next attempt is within the 60 s ...
    s.clock.set(d["next_attempt_at_ms"].as_u64().unwrap());
    r.wait_for(2, WAIT).await;
    // ... and dead once the next would come after them.
    let mut last = d;
    while last["state"] == "retrying" {
        s.clock.set(last["next_attempt_at_ms"].as_u64().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
        s.app.as_ref().unwrap().delivery_wake.notify_waiters();
        last = deliveries(&s, &s.a, "").await[0].clone();
    }
    assert_eq!(last["state"], "dead", "{last}");
    assert!(
        last["last_attempt_at_ms"].as_u64().unwrap() <= NOW_MS + 60_000,
        "{last}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_to_a_private_address_is_never_dialled() {
    let s = TestServer::start_with(|c| c.delivery.timeout = Duration::from_secs(5)).await;
    let r = Receiver::start().await;
    // A name passes at creation: it is checked when it resolves, before each connection.
    destination(
        &s,
        &s.a,
        &json!({"name": "hook", "kind": "webhook",
                "url": format!("https://localhost:{}/hook", r.addr.port())}),
    )
    .await;
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u"}"#).await);
    let d = delivery_in(&s, id, "retrying").await;
    let answer = d["last_answer"].as_str().unwrap();
    assert!(
        answer.contains("not a public address") && answer.contains("127.0.0.1"),
        "{d}"
    );
    assert!(r.received().is_empty());
    // The test button says the same.
    let t = s.post_as(&s.a, "/destinations/hook/test", "").await;
    assert_eq!(t.status, 200, "{}", t.text());
    let t = t.json();
    assert_eq!(
        (t["delivered"].clone(), t["status"].clone()),
        (json!(false), Value::Null)
    );
    assert!(
        t["answer"]
            .as_str()
            .unwrap()
            .contains("not a public address"),
        "{t}"
    );
    assert!(r.received().is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_button_answers_what_the_remote_answered() {
    let s = private_server().await;
    let meta = meta_sending_to(
        &s,
        json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1", "access_token": "tok-1234",
                "test_event_code": "TEST9"}),
    )
    .await;
    let t = s.post_as(&s.a, "/destinations/meta/test", "").await.json();
    assert_eq!(
        (t["ok"].clone(), t["delivered"].clone(), t["status"].clone()),
        (json!(true), json!(true), json!(200)),
        "{t}"
    );
    let got = meta.received();
    assert_eq!(got[0].json()["test_event_code"], "TEST9");
    meta.then([Reply::Status(
        400,
        vec![],
        r#"{"error":{"message":"Invalid parameter","code":100}}"#.into(),
    )]);
    let t = s.post_as(&s.a, "/destinations/meta/test", "").await.json();
    assert_eq!(
        (t["delivered"].clone(), t["status"].clone()),
        (json!(false), json!(400))
    );
    assert!(
        t["answer"].as_str().unwrap().contains("Invalid parameter"),
        "{t}"
    );
    let r = s.post_as(&s.a, "/destinations/nothing/test", "").await;
    assert_eq!(r.status, 404);
    // Each test is a new event to Meta.
    let ids: Vec<Value> = meta
        .received()
        .iter()
        .map(|r| r.json()["data"][0]["event_id"].clone())
        .collect();
    assert_ne!(ids[0], ids[1], "{ids:?}");
    // Without a test code, Meta is sent nothing: it would count as a real purchase.
    destination(
        &s,
        &s.a,
        &json!({"name": "live", "kind": "meta_capi", "pixel_id": "2", "access_token": "tok-5678",
                "graph_url": meta.url("")}),
    )
    .await;
    let before = meta.received().len();
    let r = s.post_as(&s.a, "/destinations/live/test", "").await;
    let e = crate::support::assert_error(&r, 409, "conflict", Some("test_event_code"));
    assert!(
        e["error"].as_str().unwrap().contains("Events Manager"),
        "{e}"
    );
    assert_eq!(meta.received().len(), before, "nothing sent");
    let r = s
        .post_as(
            &s.a,
            "/destinations/live/test",
            r#"{"test_event_code":"TEST 1"}"#,
        )
        .await;
    crate::support::assert_error(&r, 422, "invalid_field", Some("test_event_code"));
    assert_eq!(meta.received().len(), before, "nothing sent");
    let t = s
        .post_as(
            &s.a,
            "/destinations/live/test",
            r#"{"test_event_code":"TEST42"}"#,
        )
        .await;
    assert_eq!(t.json()["delivered"], true, "{}", t.text());
    assert_eq!(meta.received()[before].json()["test_event_code"], "TEST42");
    // Nothing was recorded.
    assert!(deliveries(&s, &s.a, "").await.is_empty());
    s.stop().await;
}

/// A webhook's secret rotated: the new one is shown once; for 24 hours each request carries a
/// signature under each secret, verified by the `standardwebhooks` crate, then only the new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_webhook_secret_signs_beside_the_old_one_for_24_hours() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let hook = webhook(&s, &r).await;
    let old = hook["signing_secret"].as_str().unwrap().to_owned();
    let rotated = s
        .post_as(&s.a, "/destinations/hook/rotate-secret", "")
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    let rotated = rotated.json()["destination"].clone();
    let new = rotated["signing_secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old, "{rotated}");
    assert_eq!(
        rotated["previous_secret_until_ms"],
        NOW_MS + DAY_MS,
        "{rotated}"
    );
    assert!(
        listed(&s).await[0].get("signing_secret").is_none(),
        "shown once"
    );
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u1"}"#).await);
    delivery_in(&s, id, "delivered").await;
    let got = &r.received()[0];
    assert_eq!(
        got.header("webhook-signature").unwrap().split(' ').count(),
        2,
        "{got:?}"
    );
    assert!(verify(&new, got, &got.body), "signed by the new secret");
    assert!(
        verify(&old, got, &got.body),
        "and by the old one in its grace"
    );
    // The grace ends.
    s.clock.set(NOW_MS + DAY_MS);
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u2"}"#).await);
    delivery_in(&s, id, "delivered").await;
    let got = &r.received()[1];
    assert_eq!(
        got.header("webhook-signature").unwrap().split(' ').count(),
        1
    );
    assert!(verify(&new, got, &got.body));
    assert!(!verify(&old, got, &got.body));
    // Only a webhook has a secret.
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback", "url": r.url("/pb")}),
    )
    .await;
    let r = s.post_as(&s.a, "/destinations/pb/rotate-secret", "").await;
    crate::support::assert_error(&r, 409, "conflict", None);
    s.stop().await;
}

/// A postback's `{first_deposit}`, `{status}` (the destination's words, else the networks'),
/// `{event_id}` and `{q.NAME}`: a parameter of the click's own query, as a tracker in front put it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postback_statuses_first_deposits_and_the_click_s_own_query() {
    let s = private_server().await;
    let r = Receiver::start().await;
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback",
                "url": r.url("/pb?s={status}&f={first_deposit}&sub={q.subid}&k={q.clickid}&n={q.none}"),
                "statuses": {"registration": "reg", "deposit": "sale", "first_deposit": "ftd"}}),
    )
    .await;
    // Without words of its own, a postback says what Keitaro and Binom call them.
    destination(
        &s,
        &s.a,
        &json!({"name": "network", "kind": "postback", "url": r.url("/net?s={status}")}),
    )
    .await;
    let link = s
        .post_as(&s.a, "/links", r#"{"slug":"ad","bot":"shop_bot"}"#)
        .await;
    assert_eq!(link.status, 201, "{}", link.text());
    let uid = visit(&s, "ad", "fb-1&subid=abc%20d&clickid=k%2B1").await;
    let mut ids = Vec::new();
    for body in [
        format!(r#"{{"event":"registration","uid":"{uid}"}}"#),
        format!(r#"{{"event":"deposit","uid":"{uid}","eid":"d1","value":"5","currency":"USD"}}"#),
        format!(r#"{{"event":"deposit","uid":"{uid}","eid":"d2","value":"5","currency":"USD"}}"#),
        format!(r#"{{"event":"contact","uid":"{uid}"}}"#),
    ] {
        let id = assert_queued(&s.post_event(&body).await);
        delivery_in(&s, id, "delivered").await;
        ids.push(id);
    }
    // Each event is delivered to both: the four above waited for one of them.
    let received = r.wait_for(8, WAIT).await;
    // Sorted: the two destinations' senders need not keep pace with each other.
    let targets = |prefix: &str| -> Vec<String> {
        let mut them: Vec<String> = received
            .iter()
            .map(|g| g.target.clone())
            .filter(|t| t.starts_with(prefix))
            .collect();
        them.sort();
        them
    };
    assert_eq!(
        targets("/net?"),
        [
            "/net?s=contact",
            "/net?s=lead",
            "/net?s=sale",
            "/net?s=sale"
        ]
    );
    assert_eq!(
        targets("/pb?"),
        [
            "/pb?s=contact&f=0&sub=abc%20d&k=k%2B1&n=",
            "/pb?s=ftd&f=1&sub=abc%20d&k=k%2B1&n=",
            "/pb?s=reg&f=0&sub=abc%20d&k=k%2B1&n=",
            "/pb?s=sale&f=0&sub=abc%20d&k=k%2B1&n=",
        ]
    );
    s.stop().await;
}

/// A `token=` in a postback's URL is the network's credential: `GET /destinations` shows it
/// redacted, and the postback carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_a_postback_url_is_shown_redacted_and_sent() {
    let s = private_server().await;
    let r = Receiver::start().await;
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback", "only_attributed": false,
                "url": r.url("/pb?token=netSECRET99&c={uid}")}),
    )
    .await;
    let shown = listed(&s).await;
    assert!(!format!("{shown:?}").contains("netSECRET99"), "{shown:?}");
    let url = shown[0]["url"].as_str().unwrap();
    assert!(url.ends_with("/pb?token=[redacted]&c={uid}"), "{url}");
    // The shown URL sent back, edited, is not a token: refused, the stored one kept.
    let edited = url.replace("c={uid}", "sub={uid}");
    let changed = patch(&s, "pb", &json!({"url": edited}).to_string()).await;
    let e = crate::support::assert_error(&changed, 422, "invalid_field", Some("url"));
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("give the token itself"),
        "{e}"
    );
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u-1"}"#).await);
    delivery_in(&s, id, "delivered").await;
    let targets: Vec<String> = r.received().iter().map(|g| g.target.clone()).collect();
    assert_eq!(targets, ["/pb?token=netSECRET99&c=u-1"]);
    s.stop().await;
}

/// A postback's URL once filled may pass the template's 2048 bytes (each macro's value
/// percent-encoded), and is sent; `{q.NAME}` finds the click ids the visit kept in fields of
/// their own (`gclid`, `fbclid`) and takes the first value that is not empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_filled_postback_is_sent_with_the_click_s_ids() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let template = "/pb?g={q.gclid}&f={q.fbclid}&k={q.k}&sub={q.subid}&c={campaign_name}";
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback", "url": r.url(template)}),
    )
    .await;
    let link = s
        .post_as(&s.a, "/links", r#"{"slug":"ad","bot":"shop_bot"}"#)
        .await;
    assert_eq!(link.status, 201, "{}", link.text());
    let zh = |n: usize| "%D0%B6".repeat(n);
    let query = format!(
        "fb-1&gclid=CjwK123&k=&k=7&subid={}&utm_campaign={}",
        zh(150),
        zh(256)
    );
    let uid = visit(&s, "ad", &query).await;
    let id = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    delivery_in(&s, id, "delivered").await;
    let targets: Vec<String> = r.received().iter().map(|g| g.target.clone()).collect();
    let expected = format!("/pb?g=CjwK123&f=fb-1&k=7&sub={}&c={}", zh(150), zh(256));
    assert!(r.url(&expected).len() > 2048, "{}", expected.len());
    assert_eq!(targets, [expected]);
    s.stop().await;
}

/// Delivered rows are deleted once `delivery_retention` has passed since their delivery, and
/// not a moment sooner; the destination's counts stay, and dead ones stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_rows_are_pruned_after_delivery_retention_and_counts_stay() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.retention = Duration::from_secs(30 * 86_400);
    })
    .await;
    let r = Receiver::start().await;
    webhook(&s, &r).await;
    r.then([Reply::Status(404, vec![], "gone".into())]);
    let dead = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u0"}"#).await);
    delivery_in(&s, dead, "dead").await;
    let delivered = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u1"}"#).await);
    let d = delivery_in(&s, delivered, "delivered").await;
    let at = d["last_attempt_at_ms"].as_u64().unwrap();
    let app = s.app.as_ref().unwrap();
    s.clock.set(at + 30 * DAY_MS - 1);
    assert_eq!(
        tracker::workers::retention::sweep_deliveries(&app.retention())
            .await
            .unwrap(),
        0
    );
    assert_eq!(deliveries(&s, &s.a, "").await.len(), 2);
    s.clock.set(at + 30 * DAY_MS + 1);
    assert_eq!(
        tracker::workers::retention::sweep_deliveries(&app.retention())
            .await
            .unwrap(),
        1
    );
    let left = deliveries(&s, &s.a, "").await;
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["state"], "dead");
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["delivered"], 1, "counts stay: {m}");
    assert_eq!(m["deliveries"]["dead"], 1, "{m}");
    s.stop().await;
}

/// Sends new events (`contact`, unique eids) from one connection until the process is gone;
/// answers each acknowledged event's eid and `inbox_id`.
async fn send_until_killed(
    addr: std::net::SocketAddr,
    secret: String,
    sender: usize,
    acked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<(String, u64)> {
    use crate::support::{Connection, Request};
    let mut acks = Vec::new();
    let Ok(mut conn) = Connection::open(addr).await else {
        return acks;
    };
    for n in 0.. {
        let eid = format!("k-{sender}-{n}");
        let body = format!(r#"{{"event":"contact","uid":"u-{sender}-{n}","eid":"{eid}"}}"#);
        let Ok(r) = conn
            .send(&Request::post("/events", Some(&secret), &body))
            .await
        else {
            break;
        };
        if r.status != 200 {
            break;
        }
        acks.push((eid, assert_queued(&r)));
        acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    acks
}

/// SIGKILL while deliveries wait and while a batch is in flight, then a restart: every
/// acknowledged event reaches the receiver at least once, and sending an acknowledged event
/// again adds no delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_event_is_delivered_across_sigkill() {
    use crate::support::{TrackerProcess, first_start};
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let env = [("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")];
    let (first, space) = first_start(dir.path());
    first.kill_hard();
    let process = TrackerProcess::start_with_env(dir.path(), &env);
    let r = Receiver::start().await;
    // Nothing is answered before the kill: the first batch is in flight when it comes.
    r.always(Reply::Held);
    let created = crate::support::post_json_status(
        process.addr,
        &space.secret,
        "/destinations",
        &json!({"name": "hook", "kind": "webhook", "url": r.url("/hook")}).to_string(),
        201,
    )
    .await;
    assert!(created["destination"]["signing_secret"].is_string());

    let acked = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..4)
        .map(|n| {
            tokio::spawn(send_until_killed(
                process.addr,
                space.secret.clone(),
                n,
                acked.clone(),
            ))
        })
        .collect();
    r.wait_for(1, WAIT).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while acked.load(Ordering::SeqCst) < 300 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    process.kill_hard();
    let mut acks = Vec::new();
    for s in senders {
        acks.extend(s.await.unwrap());
    }
    assert!(acks.len() >= 300, "{} acknowledged", acks.len());
    let in_flight = r.received().len();
    assert!(in_flight >= 1);

    r.always(Reply::ok());
    let process = TrackerProcess::start_with_env(dir.path(), &env);
    let want: BTreeSet<String> = acks.iter().map(|(_, id)| id.to_string()).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got: BTreeSet<String> = r.received()[in_flight..]
            .iter()
            .filter_map(|req| req.json()["inbox_id"].as_str().map(str::to_owned))
            .collect();
        let missing: Vec<&String> = want.difference(&got).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} acknowledged events never delivered after the restart, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Sent again, each is a duplicate and adds no delivery.
    let count = async || {
        let r = crate::support::send(
            process.addr,
            &crate::support::Request::get("/destinations")
                .header("Authorization", format!("Bearer {}", space.secret)),
        )
        .await;
        let c = r.json()["destinations"][0]["deliveries"].clone();
        ["pending", "delivered", "retrying", "dead", "cancelled"]
            .iter()
            .map(|s| c[s].as_u64().unwrap())
            .sum::<u64>()
    };
    let before = count().await;
    assert!(before >= acks.len() as u64, "{before} deliveries");
    for (eid, id) in acks.iter().take(50) {
        let n = eid.trim_start_matches("k-");
        let body = format!(r#"{{"event":"contact","uid":"u-{n}","eid":"{eid}"}}"#);
        let r = crate::support::send(
            process.addr,
            &crate::support::Request::post("/events", Some(&space.secret), &body),
        )
        .await;
        assert_duplicate_of(&r, *id);
    }
    assert_eq!(count().await, before);
    crate::support::stop_cleanly(process);
}

/// A visit of `/l/<slug>` with an fbclid; answers the click's uid.
async fn visit(s: &TestServer, slug: &str, fbclid: &str) -> String {
    let target = format!("/l/{slug}?fbclid={fbclid}");
    let r = s
        .send(&crate::support::Request::get(&target).header("User-Agent", "Mozilla/5.0 (Test)"))
        .await;
    assert_eq!(r.status, 302, "{}", r.text());
    let location = r.header("location").unwrap();
    location.rsplit_once("start=").unwrap().1.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hints_are_kept_only_where_asked_and_only_for_7_days() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.max_age = Duration::from_secs(3600);
    })
    .await;
    let meta = meta_sending_to(
        &s,
        json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1", "access_token": "t-1234"}),
    )
    .await;
    let link = s
        .post_as(&s.a, "/links", r#"{"slug":"ad","bot":"shop_bot"}"#)
        .await;
    assert_eq!(link.status, 201);
    // Off by default: nothing but the fbc.
    let off = visit(&s, "ad", "fb-off").await;
    let id = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{off}"}}"#))
            .await,
    );
    delivery_in(&s, id, "delivered").await;
    let user = meta.received()[0].json()["data"][0]["user_data"].clone();
    assert!(user.get("client_ip_address").is_none(), "{user}");

    let patch = crate::support::Request {
        method: "PATCH",
        ..crate::support::Request::post(
            "/space",
            Some(&s.a.secret),
            r#"{"meta_client_hints":true}"#,
        )
    };
    assert_eq!(s.send(&patch).await.status, 200);
    let on = visit(&s, "ad", "fb-on").await;
    let id = assert_queued(
        &s.post_event(&format!(r#"{{"event":"registration","uid":"{on}"}}"#))
            .await,
    );
    delivery_in(&s, id, "delivered").await;
    let user = meta.received()[1].json()["data"][0]["user_data"].clone();
    // The visit came from loopback: a proxy's address, never the visitor's, so never sent.
    assert_eq!(user["client_ip_address"], Value::Null, "{user}");
    assert_eq!(user["client_user_agent"], "Mozilla/5.0 (Test)");

    // Retention deletes them once they are 7 days old (Meta's window), not before, whatever
    // delivery_max_age says.
    let app = s.app.clone().unwrap();
    let kept = tracker::domain::click::HINTS_KEPT_MS;
    s.clock.set(NOW_MS + kept);
    assert_eq!(
        tracker::workers::retention::sweep_hints(&app.retention())
            .await
            .unwrap(),
        0
    );
    s.clock.set(NOW_MS + kept + 1);
    assert_eq!(
        tracker::workers::retention::sweep_hints(&app.retention())
            .await
            .unwrap(),
        1
    );
    s.clock.set(NOW_MS);
    let id = assert_queued(
        &s.post_event(&format!(r#"{{"event":"subscribed","uid":"{on}"}}"#))
            .await,
    );
    delivery_in(&s, id, "delivered").await;
    let user = meta.received()[2].json()["data"][0]["user_data"].clone();
    assert!(user.get("client_ip_address").is_none(), "{user}");
    s.stop().await;
}

/// A redirect is never followed (it could lead to any address): it is a refusal, and the
/// address it names is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    r.then([Reply::Status(
        307,
        vec![("Location", elsewhere.url("/metadata"))],
        String::new(),
    )]);
    destination(
        &s,
        &s.a,
        &json!({"name": "pb", "kind": "postback", "url": r.url("/pb?u={uid}"),
                "only_attributed": false}),
    )
    .await;
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u"}"#).await);
    let d = delivery_in(&s, id, "dead").await;
    assert_eq!(d["last_status"], 307, "{d}");
    assert_eq!(r.received().len(), 1);
    assert!(elsewhere.received().is_empty());
    s.stop().await;
}

/// The senders run on a thread of their own at a lower CPU priority than the threads that
/// answer requests and commit them: a nice of 19 where the server's threads have 0.
#[test]
fn the_senders_yield_the_cpu_to_ingest() {
    use crate::support::TrackerProcess;
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start(dir.path());
    let pid = process.child.id();
    // Field 19 of a `stat` file is the thread's nice value; the name in field 2 (in
    // parentheses) may hold spaces, so fields are counted after its closing parenthesis.
    let nice_in = |stat: &str| -> i64 {
        stat[stat.rfind(')').unwrap() + 2..]
            .split(' ')
            .nth(16)
            .unwrap()
            .parse()
            .unwrap()
    };
    let nice_of = |name: &str| -> Vec<i64> {
        let mut found = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
            let path = task.unwrap().path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if comm.trim() == name {
                found.push(nice_in(
                    &std::fs::read_to_string(path.join("stat")).unwrap(),
                ));
            }
        }
        found
    };
    let deadline = std::time::Instant::now() + WAIT;
    while nice_of("sender").is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(nice_of("sender"), vec![19], "the senders' thread");
    let main_nice = nice_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap());
    assert_eq!(main_nice, 0, "the server's main thread");
    crate::support::stop_cleanly(process);
}

/// Destinations made while `allow_private_destinations` was on, then the server restarted with
/// it off: each delivery owed after is dead without a request, saying why: an `http://` URL by
/// the scheme's rule, an `https://` one at a loopback address by the address's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_address_allowed_once_is_not_sent_to_once_it_is_not() {
    let s = private_server().await;
    let r = Receiver::start().await;
    let hook = r.url("/hook");
    let tls = hook.replacen("http://", "https://", 1);
    for body in [
        json!({"name": "hook", "kind": "webhook", "url": hook}),
        json!({"name": "back", "kind": "postback", "url": format!("{hook}?uid={{uid}}"), "only_attributed": false}),
        // Never sent to while allowed: it takes deposits only, and the first one comes after.
        json!({"name": "tls", "kind": "webhook", "url": tls, "events": ["deposit"]}),
    ] {
        destination(&s, &s.a, &body).await;
    }
    // Allowed: both plain ones are sent to.
    let before = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u-1"}"#).await);
    let sent = r.wait_for(2, WAIT).await;
    assert_eq!(sent.len(), 2, "{sent:#?}");
    delivery_in(&s, before, "delivered").await;

    let s = s
        .restart_with(|c| c.delivery.allow_private_destinations = false)
        .await;
    let after = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"u-2","value":"5","currency":"USD"}"#)
            .await,
    );
    let id = after.to_string();
    for (name, why) in [
        ("hook", "must be an https:// URL"),
        ("back", "must be an https:// URL"),
        ("tls", "a loopback, private or link-local address"),
    ] {
        let deadline = tokio::time::Instant::now() + WAIT;
        let d = loop {
            let all = deliveries(&s, &s.a, &format!("?destination={name}&state=dead")).await;
            if let Some(d) = all.iter().find(|d| d["inbox_id"].as_str() == Some(&*id)) {
                break d.clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "{name}: {all:#?}");
            s.app.as_ref().unwrap().delivery_wake.notify_waiters();
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let answer = d["last_answer"].as_str().unwrap();
        assert!(answer.starts_with("not sent: "), "{name}: {answer}");
        assert!(answer.contains(why), "{name}: {answer}");
        assert_eq!(d["last_status"], Value::Null, "{name}: {d}");
    }
    assert_eq!(r.received().len(), 2, "nothing more reached the receiver");
    s.stop().await;
}

/// Meta's stand-in, and destination `meta` of space `a` (pixel `1234567890`) sending to it.
async fn meta_destination(s: &TestServer) -> Receiver {
    meta_sending_to(
        s,
        json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1234567890",
                "access_token": "EAAB-token-wxyz"}),
    )
    .await
}

/// Meta's stand-in, and the Meta destination `fields` of space `a` sending to it.
async fn meta_sending_to(s: &TestServer, mut fields: Value) -> Receiver {
    let meta = Receiver::meta(NOW_MS).await;
    fields["graph_url"] = json!(meta.url(""));
    destination(s, &s.a, &fields).await;
    meta
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_in_a_currency_meta_does_not_take_never_sinks_its_batch() {
    // Long enough for the held request to outlast the posting of 1000 events.
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = WAIT;
    })
    .await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    // Held: the next 1000 events wait for it, then go in one batch.
    meta.then([Reply::Held]);
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    meta.wait_for(1, WAIT).await;
    let mut usd = Vec::new();
    let mut stars = 0;
    for i in 0..1000 {
        let currency = if i == 500 { "XTR" } else { "USD" };
        let id = assert_queued(
            &s.post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","eid":"d-{i}","value":"100","currency":"{currency}"}}"#
            ))
            .await,
        );
        if i == 500 {
            stars = id;
        } else {
            usd.push(id);
        }
    }
    meta.release();
    let dead = delivery_in(&s, stars, "dead").await;
    assert!(
        dead["last_answer"]
            .as_str()
            .unwrap()
            .contains("no rate for XTR"),
        "{dead}"
    );
    assert_eq!(dead["attempts"], 1, "{dead}");
    delivery_in(&s, *usd.last().unwrap(), "delivered").await;
    let got = meta.received();
    assert_eq!(got.len(), 2, "the held request, then one batch");
    let data = got[1].json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 999);
    assert!(data.iter().all(|e| e["custom_data"]["currency"] == "USD"));
    let listed = s.read_as(&s.a, "/destinations").await.json();
    assert_eq!(listed["destinations"][0]["deliveries"]["delivered"], 1000);
    assert_eq!(listed["destinations"][0]["deliveries"]["dead"], 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_answered_as_400_is_retried_no_sooner_than_60_s_later() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    meta.then([
        Reply::meta_throttled(),
        Reply::meta_throttled(),
        Reply::meta_throttled(),
    ]);
    retried_no_sooner_than_60_s(&s, &uid, "limit reached", || meta.received().len()).await;
    s.stop().await;
}

/// Posts a contact of `uid` and follows its delivery through three throttled attempts, each
/// answered as `answer` says: the next is due no sooner than 60 s after the last, is not sent a
/// moment sooner (`sent` counts the stand-in's requests), and is sent then. The fourth is
/// delivered.
pub(crate) async fn retried_no_sooner_than_60_s(
    s: &TestServer,
    uid: &str,
    answer: &str,
    sent: impl Fn() -> usize,
) {
    let id = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    for tried in 1..=3 {
        let d = loop {
            let d = delivery_in(s, id, "retrying").await;
            if d["attempts"] == tried {
                break d;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let last = d["last_attempt_at_ms"].as_u64().unwrap();
        let next = d["next_attempt_at_ms"].as_u64().unwrap();
        assert!(next >= last + 60_000, "retried too soon: {d}");
        assert!(d["last_answer"].as_str().unwrap().contains(answer), "{d}");
        // Not a moment sooner.
        s.clock.set(next - 1);
        s.app.as_ref().unwrap().delivery_wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(sent(), usize::try_from(tried).unwrap());
        s.clock.set(next);
        let deadline = tokio::time::Instant::now() + WAIT;
        while sent() <= usize::try_from(tried).unwrap() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "attempt {tried} not sent again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let d = delivery_in(s, id, "delivered").await;
    assert_eq!(d["attempts"], 4, "{d}");
}

/// The destinations of space `a` as `GET /destinations` lists them.
pub(crate) async fn listed(s: &TestServer) -> Vec<Value> {
    s.list_as(&s.a, "/destinations", "destinations").await
}

/// `PATCH /destinations/<name>` of space `a`.
pub(crate) async fn patch(s: &TestServer, name: &str, body: &str) -> crate::support::Response {
    s.patch_as(&s.a, &format!("/destinations/{name}"), body)
        .await
}

/// Asserts that space `a`'s only destination is paused, saying why (`reason` is part of it),
/// with `paused` deliveries waiting and none dead, and that `/metrics` counts it.
pub(crate) async fn assert_paused(s: &TestServer, reason: &str, paused: u64) {
    let m = &listed(s).await[0];
    assert_eq!(m["state"], "paused", "{m}");
    assert!(m["paused_reason"].as_str().unwrap().contains(reason), "{m}");
    assert_eq!(m["deliveries"]["paused"], paused, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    assert_eq!(
        metric(s, "tracker_destinations_paused").as_deref(),
        Some("1")
    );
}

/// Posts deposits `p-0` to `p-2` of `uid`; answers their inbox ids.
pub(crate) async fn three_deposits(s: &TestServer, uid: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(assert_queued(
            &s.post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","eid":"p-{i}","value":"5","currency":"USD"}}"#
            ))
            .await,
        ));
    }
    ids
}

/// Gives destination `name` of space `a` the access token `token` (`<prefix>-<last 4>`): it is
/// active again, shows only the token's last 4 characters, and delivers `waiting`.
pub(crate) async fn new_token_delivers(s: &TestServer, name: &str, token: &str, waiting: &[u64]) {
    let patched = patch(s, name, &format!(r#"{{"access_token":"{token}"}}"#)).await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let m = patched.json()["destination"].clone();
    let (prefix, last4) = token.rsplit_once('-').unwrap();
    assert_eq!(m["state"], "active", "{m}");
    assert_eq!(m["access_token"], format!("…{last4}"), "{m}");
    assert!(!patched.text().contains(prefix), "write-only");
    for id in waiting {
        delivery_in(s, *id, "delivered").await;
    }
}

/// The value of a series of `/metrics` without labels.
pub(crate) fn metric(s: &TestServer, name: &str) -> Option<String> {
    s.metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_owned))
}

/// Meta's stand-in answers code 190 for a token it no longer takes: the destination is paused
/// (nothing dead, nothing more sent), says why everywhere, and a `PATCH` with a new token
/// delivers everything that waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_pauses_the_destination_and_a_new_token_delivers_all() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    meta.revoke("EAAB-token-wxyz");
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let d = delivery_in(&s, first, "paused").await;
    assert!(
        d["last_answer"]
            .as_str()
            .unwrap()
            .contains("Error validating access token"),
        "{d}"
    );
    assert_eq!(d["next_attempt_at_ms"], Value::Null, "{d}");
    assert_paused(&s, "Error validating access token", 1).await;

    // While paused, nothing is sent, however long it waits: more events wait with it.
    let mut waiting = vec![first];
    waiting.extend(three_deposits(&s, &uid).await);
    s.clock.set(NOW_MS + 4 * DAY_MS);
    s.app.as_ref().unwrap().delivery_wake.notify_waiters();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        meta.received().len(),
        1,
        "a paused destination sends nothing"
    );
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["paused"], 4, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    let paused = deliveries(&s, &s.a, "?state=paused").await;
    assert_eq!(paused.len(), 4, "{paused:#?}");

    // A bad change changes nothing, and the destination stays paused.
    let bad = patch(&s, "meta", r#"{"access_token":"has space"}"#).await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    assert_eq!(listed(&s).await[0]["state"], "paused");

    new_token_delivers(&s, "meta", "EAAB-new-token-9876", &waiting).await;
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["delivered"], 4, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    assert_eq!(
        m["last_error"],
        Value::Null,
        "cleared once all was delivered: {m}"
    );
    let last = meta.received().last().unwrap().json();
    assert_eq!(last["access_token"], "EAAB-new-token-9876");
    assert_eq!(
        metric(&s, "tracker_destinations_paused").as_deref(),
        Some("0")
    );
    s.stop().await;
}

/// A receiver that asks every request of a batch to wait (`429` with `Retry-After: 120`) is sent
/// no next batch before then: the other events wait in the file, and go once the wait is over
/// and the receiver takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_holds_the_destination_not_only_its_batch() {
    let s = private_server().await;
    let r = Receiver::start().await;
    r.always(Reply::Status(
        429,
        vec![("retry-after", "120".into())],
        "slow down".into(),
    ));
    webhook(&s, &r).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    for i in 0..300 {
        assert_queued(
            &s.post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","eid":"t-{i}","value":"5","currency":"USD"}}"#
            ))
            .await,
        );
    }
    let distinct = || {
        let mut ids: Vec<String> = r
            .received()
            .iter()
            .filter_map(|q| q.header("webhook-id").map(str::to_owned))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    r.wait_for(1, WAIT).await;
    // The first batch's requests, 32 at a time, until they stop coming.
    let mut held = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = r.received().len();
        if now == held {
            break;
        }
        held = now;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.received().len(), held, "nothing more is sent while held");
    assert!(held < 300, "only the first batch went: {held}");
    r.always(Reply::ok());
    s.clock.set(NOW_MS + 121_000);
    let deadline = tokio::time::Instant::now() + WAIT;
    while distinct() < 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "after the wait every event is sent: {} of 300",
            distinct()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.stop().await;
}

/// A destination paused longer than `delivery_max_age` (4 days against 72 h): once it is given
/// a new token, a throttle at its first request leaves every waiting delivery its retries (one
/// that was already retrying before the pause too), and all of them arrive; the age counts
/// from the first attempt after the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_longer_than_the_max_age_kills_nothing_after_it() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    // One already retrying when the pause comes, and not in the batch that pauses it.
    meta.then([Reply::Status(503, Vec::new(), "down".into())]);
    let mut waiting = vec![assert_queued(
        &s.post_event(&format!(r#"{{"event":"registration","uid":"{uid}"}}"#))
            .await,
    )];
    delivery_in(&s, waiting[0], "retrying").await;
    meta.revoke("EAAB-token-wxyz");
    waiting.push(assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    ));
    delivery_in(&s, waiting[1], "paused").await;
    waiting.extend(three_deposits(&s, &uid).await);
    let resumed_at = NOW_MS + 4 * DAY_MS;
    s.clock.set(resumed_at);
    meta.then([Reply::meta_throttled()]);
    let patched = patch(&s, "meta", r#"{"access_token":"EAAB-new-token-9876"}"#).await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    for id in &waiting {
        // The held one shows `retrying` due at once until the sender has tried it again.
        let d = loop {
            let d = delivery_in(&s, *id, "retrying").await;
            if d["last_attempt_at_ms"] == resumed_at {
                break d;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(
            d["next_attempt_at_ms"].as_u64().unwrap() >= resumed_at + 60_000,
            "{d}"
        );
    }
    assert_eq!(listed(&s).await[0]["deliveries"]["dead"], 0);
    s.clock.set(resumed_at + 3_600_000);
    for id in &waiting {
        delivery_in(&s, *id, "delivered").await;
    }
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["delivered"], 5, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    s.stop().await;
}

/// A new token given while a request with the old one is on its way: Meta's `190` to that
/// request no longer pauses the destination, and the delivery it held goes with the new token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_the_old_token_does_not_pause_a_new_one() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    meta.then([Reply::HeldThen(Box::new(Reply::meta_token_revoked()))]);
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    meta.wait_for(1, Duration::from_secs(10)).await;
    let patched = patch(&s, "meta", r#"{"access_token":"EAAB-new-token-9876"}"#).await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    meta.release();
    delivery_in(&s, first, "delivered").await;
    let m = &listed(&s).await[0];
    assert_eq!(m["state"], "active", "{m}");
    assert_eq!(m["deliveries"]["delivered"], 1, "{m}");
    let got = meta.received();
    assert_eq!(got.len(), 2, "sent again once, with the new token");
    assert_eq!(got[1].json()["access_token"], "EAAB-new-token-9876");
    s.stop().await;
}

/// Meta answers `2635` to an API version it no longer serves: that is the destination's fault,
/// not the events', so it pauses with nothing dead, and a new `api_version` delivers what waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_version_meta_no_longer_serves_pauses_until_changed() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    meta.then([Reply::Status(
        400,
        Vec::new(),
        json!({"error": {"message": "(#2635) You are calling a deprecated version of the Ads \
            API. Please update to the latest version: v26.0.", "type": "OAuthException",
            "code": 2635, "fbtrace_id": "stand-in"}})
        .to_string(),
    )]);
    let mut waiting = vec![assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    )];
    delivery_in(&s, waiting[0], "paused").await;
    assert_paused(&s, "deprecated version", 1).await;
    waiting.extend(three_deposits(&s, &uid).await);
    let patched = patch(&s, "meta", r#"{"api_version":"v26.0"}"#).await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    for id in &waiting {
        delivery_in(&s, *id, "delivered").await;
    }
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["delivered"], 4, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    let last = meta.received().last().unwrap().target.clone();
    assert!(last.starts_with("/v26.0/"), "{last}");
    s.stop().await;
}

/// Meta's `190` may quote the token it refused ("Malformed access token ..."): the token is cut
/// out of what the delivery, the destination and the test button show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_meta_quotes_back_is_never_shown() {
    let s = private_server().await;
    let meta = meta_destination(&s).await;
    let quoting = || {
        Reply::Status(
            400,
            Vec::new(),
            json!({"error": {"message": "Malformed access token EAAB-token-wxyz",
                "type": "OAuthException", "code": 190, "fbtrace_id": "stand-in"}})
            .to_string(),
        )
    };
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    meta.then([quoting()]);
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let d = delivery_in(&s, first, "paused").await;
    assert_eq!(
        d["last_answer"].as_str().unwrap(),
        "Meta: Malformed access token [redacted] (code 190)",
        "{d}"
    );
    assert_paused(&s, "Malformed access token [redacted]", 1).await;
    meta.then([quoting()]);
    let t = s
        .post_as(
            &s.a,
            "/destinations/meta/test",
            r#"{"test_event_code":"TEST1"}"#,
        )
        .await;
    assert!(
        t.text().contains("Malformed access token [redacted]"),
        "{}",
        t.text()
    );
    for shown in [
        t.text(),
        s.get_as(&s.a, "/destinations", "").await.text(),
        s.get_as(&s.a, "/deliveries", "").await.text(),
    ] {
        assert!(!shown.contains("token-wxyz"), "{shown}");
    }
    s.stop().await;
}

/// A Meta destination's stored settings: `{"XTR": "0.013 USD"}` converts a Stars deposit to
/// dollars, and a first deposit is sent by its own event name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_converts_stars_and_a_first_deposit_has_its_own_name() {
    let s = private_server().await;
    let meta = meta_sending_to(
        &s,
        json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1234567890",
                "access_token": "EAAB-token-wxyz",
                "currency_rates": {"XTR": "0.013 USD"},
                "event_names": {"first_deposit": "FirstDeposit"}}),
    )
    .await;
    let uid = click(&s, "IwAR-1", 777_000_111).await;
    let first = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"s-1","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    delivery_in(&s, first, "delivered").await;
    let second = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"s-2","value":"10","currency":"USD"}}"#
        ))
        .await,
    );
    delivery_in(&s, second, "delivered").await;
    let sent: Vec<Value> = meta
        .received()
        .iter()
        .flat_map(|r| r.json()["data"].as_array().unwrap().clone())
        .collect();
    assert_eq!(sent[0]["event_name"], "FirstDeposit", "{sent:#?}");
    assert_eq!(
        sent[0]["custom_data"],
        json!({"value": 1.3, "currency": "USD"})
    );
    assert_eq!(sent[1]["event_name"], "Purchase", "{sent:#?}");
    let m = &listed(&s).await[0];
    assert_eq!(m["currency_rates"], json!({"XTR": "0.013 USD"}), "{m}");
    assert_eq!(
        m["event_names"],
        json!({"first_deposit": "FirstDeposit"}),
        "{m}"
    );
    s.stop().await;
}
