//! `TikTok`'s Events API as a destination (`docs/api.md#tiktoks-events-api`), sent for real to a
//! stand-in on loopback that speaks its documented protocol: a click with a `ttclid` that
//! converts arrives with its ids and a converted currency; a throttle is retried; a token it no
//! longer takes pauses the destination until a new one is given; one bad event never sinks
//! the others of its batch, which never holds more than `TikTok`'s 1000 events.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::deliveries::{
    WAIT, assert_paused, bound_click, deliveries, delivery_in, destination, listed,
    new_token_delivers, patch, private_server, retried_no_sooner_than_60_s, three_deposits,
};
use crate::support::tiktok::{MAX_EVENTS, TRACK_PATH, TiktokApi};
use crate::support::{NOW_MS, TestServer, assert_queued};

const PIXEL: &str = "C4ABCDEFGHIJ12345678";
const TOKEN: &str = "tt-access-token-wxyz";

/// A `tiktok_events` destination of space `a` sending to `api` with `token`.
async fn tiktok_destination(s: &TestServer, api: &TiktokApi, token: &str) -> Value {
    destination(
        s,
        &s.a,
        &json!({"name": "tiktok", "kind": "tiktok_events", "pixel_code": PIXEL,
                "access_token": token, "api_url": api.url(),
                "currency_rates": {"XTR": "0.013 USD"}}),
    )
    .await
}

/// A click with a `ttclid`, bound to Telegram user `tg`; answers its uid.
async fn tiktok_click(s: &TestServer, ttclid: &str, tg: u64) -> String {
    bound_click(s, "ttclid", ttclid, tg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttclid_click_that_converts_reaches_tiktok_with_its_ids_and_a_converted_value() {
    let s = private_server().await;
    let api = TiktokApi::start(PIXEL, TOKEN).await;
    let created = destination(
        &s,
        &s.a,
        &json!({"name": "tiktok", "kind": "tiktok_events", "pixel_code": PIXEL,
                "access_token": TOKEN, "test_event_code": "TEST123", "api_url": api.url(),
                "currency_rates": {"XTR": "0.013 USD"}}),
    )
    .await;
    assert_eq!(created["kind"], "tiktok_events", "{created}");
    assert_eq!(created["pixel_code"], PIXEL, "{created}");
    assert_eq!(created["api_url"], api.url(), "{created}");
    assert_eq!(created["access_token"], "…wxyz", "{created}");
    assert!(
        !created.to_string().contains(TOKEN),
        "write-only: {created}"
    );

    let uid = tiktok_click(&s, "E.C.P.tt-1", 777_000_111).await;
    let deposit = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"order-1","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    let answered = s
        .post_event(&format!(r#"{{"event":"registration","uid":"{uid}"}}"#))
        .await;
    let registration = assert_queued(&answered);
    let registration_id = answered.json()["event_id"].as_str().unwrap().to_owned();
    // Without a ttclid, TikTok cannot match it to an ad: no delivery.
    let plain = s
        .click(&s.a, r#"{"link_slug":"ad","fbclid":"IwAR-1"}"#)
        .await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{plain}"}}"#))
            .await,
    );
    delivery_in(&s, deposit, "delivered").await;
    delivery_in(&s, registration, "delivered").await;
    assert_eq!(deliveries(&s, &s.a, "?limit=1000").await.len(), 2);

    let got = api.received();
    assert!(got.iter().all(|r| r.code == 0), "{got:#?}");
    let request = &got[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, TRACK_PATH);
    assert_eq!(request.access_token.as_deref(), Some(TOKEN));
    assert_eq!(request.body["event_source"], "web");
    assert_eq!(request.body["event_source_id"], PIXEL);
    assert_eq!(request.body["test_event_code"], "TEST123");
    assert!(request.body.get("access_token").is_none(), "a header only");
    let taken = api.taken();
    let paid = taken
        .iter()
        .find(|e| e["event"] == "CompletePayment")
        .unwrap_or_else(|| panic!("{taken:#?}"));
    assert_eq!(paid["user"]["ttclid"], "E.C.P.tt-1");
    assert_eq!(
        paid["user"]["external_id"],
        hex::encode(Sha256::digest(b"777000111"))
    );
    // The payment's own id, under which TikTok deduplicates it with the pixel's.
    assert_eq!(paid["event_id"], "order-1");
    assert_eq!(paid["event_time"], NOW_MS / 1000);
    assert_eq!(paid["properties"], json!({"value": 1.3, "currency": "USD"}));
    let registered = taken
        .iter()
        .find(|e| e["event"] == "CompleteRegistration")
        .unwrap_or_else(|| panic!("{taken:#?}"));
    assert_eq!(registered["event_id"], registration_id.as_str());
    assert!(registered.get("properties").is_none(), "{registered}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_is_retried_no_sooner_than_60_s_later_and_then_delivered() {
    let s = private_server().await;
    let api = TiktokApi::start(PIXEL, TOKEN).await;
    tiktok_destination(&s, &api, TOKEN).await;
    let uid = tiktok_click(&s, "E.C.P.tt-1", 777_000_111).await;
    api.throttle(3);
    retried_no_sooner_than_60_s(&s, &uid, "Too many requests", || api.received().len()).await;
    assert_eq!(api.taken().len(), 1);
    s.stop().await;
}

/// `TikTok` answers `40105` to a token it does not take: the destination is paused (nothing
/// dead, nothing more sent) and says why; a `PATCH` with a new token delivers what waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_pauses_and_a_new_token_delivers_everything() {
    let s = private_server().await;
    let api = TiktokApi::start(PIXEL, "tt-new-token-9876").await;
    tiktok_destination(&s, &api, TOKEN).await;
    let uid = tiktok_click(&s, "E.C.P.tt-1", 777_000_111).await;
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let d = delivery_in(&s, first, "paused").await;
    assert!(d["last_answer"].as_str().unwrap().contains("40105"), "{d}");
    let mut waiting = vec![first];
    waiting.extend(three_deposits(&s, &uid).await);
    s.app.as_ref().unwrap().delivery_wake.notify_waiters();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        api.received().len(),
        1,
        "a paused destination sends nothing"
    );
    assert_paused(&s, "access token is invalid", 4).await;

    new_token_delivers(&s, "tiktok", "tt-new-token-9876", &waiting).await;
    let m = &listed(&s).await[0];
    assert_eq!(m["deliveries"]["delivered"], 4, "{m}");
    assert_eq!(m["deliveries"]["dead"], 0, "{m}");
    let last = api.received().last().unwrap().clone();
    assert_eq!(last.access_token.as_deref(), Some("tt-new-token-9876"));
    assert_eq!(api.taken().len(), 4);
    s.stop().await;
}

/// 1001 events wait while the destination is paused, one of them an event `TikTok` refuses
/// (naming none): once resumed they go in requests of at most 1000, the bad one is dead with
/// `TikTok`'s message, and every other one is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_event_never_sinks_its_batch_of_at_most_1000() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = WAIT;
    })
    .await;
    let api = TiktokApi::start(PIXEL, "tt-right-token-1234").await;
    tiktok_destination(&s, &api, TOKEN).await;
    api.refuse_event("bad-500");
    let uid = tiktok_click(&s, "E.C.P.tt-1", 777_000_111).await;
    let first = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"d-first","value":"1","currency":"USD"}}"#
        ))
        .await,
    );
    delivery_in(&s, first, "paused").await;
    let mut good = vec![first];
    let mut bad = 0;
    for i in 0..1000 {
        let eid = if i == 500 {
            "bad-500".to_owned()
        } else {
            format!("d-{i}")
        };
        let id = assert_queued(
            &s.post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","eid":"{eid}","value":"100","currency":"XTR"}}"#
            ))
            .await,
        );
        if i == 500 {
            bad = id;
        } else {
            good.push(id);
        }
    }
    let patched = patch(&s, "tiktok", r#"{"access_token":"tt-right-token-1234"}"#).await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let dead = delivery_in(&s, bad, "dead").await;
    let answer = dead["last_answer"].as_str().unwrap();
    assert!(
        answer.contains("Invalid value for param") && answer.contains("40002"),
        "{dead}"
    );
    // The log lists the newest 1000: the counts say the rest.
    let deadline = tokio::time::Instant::now() + WAIT;
    let m = loop {
        let m = listed(&s).await[0].clone();
        if m["deliveries"]["delivered"] == 1000 || tokio::time::Instant::now() > deadline {
            break m;
        }
        s.app.as_ref().unwrap().delivery_wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(m["deliveries"]["delivered"], 1000, "{m}");
    assert_eq!(m["deliveries"]["dead"], 1, "{m}");
    assert_eq!(good.len(), 1000);
    let got = api.received();
    let sizes: Vec<usize> = got.iter().map(|r| r.events().len()).collect();
    assert!(sizes.iter().all(|n| *n <= MAX_EVENTS), "{sizes:?}");
    assert_eq!(sizes.iter().max(), Some(&MAX_EVENTS), "{sizes:?}");
    // The paused request, the batch of 1000, at most 11 to find the bad one, the last event.
    assert!(got.len() <= 14, "{sizes:?}");
    assert_eq!(api.taken().len(), 1000);
    s.stop().await;
}

/// Each rule of a `tiktok_events` destination's fields through `POST /destinations` and
/// `PATCH`, with a value just inside and one just outside it; a refusal stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_checks_each_field_at_its_bounds() {
    let s = TestServer::start().await;
    let body = |extra: Value| {
        let mut b = json!({"name": "tiktok", "kind": "tiktok_events", "pixel_code": PIXEL,
                           "access_token": TOKEN});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };
    for (extra, code, field) in [
        (
            json!({"pixel_code": "A".repeat(65)}),
            "invalid_field",
            "pixel_code",
        ),
        (
            json!({"pixel_code": "C4AB-12"}),
            "invalid_field",
            "pixel_code",
        ),
        (json!({"pixel_code": null}), "missing_field", "pixel_code"),
        (
            json!({"access_token": "t".repeat(1025)}),
            "invalid_field",
            "access_token",
        ),
        (
            json!({"access_token": null}),
            "missing_field",
            "access_token",
        ),
        (
            json!({"api_url": "http://business-api.tiktok.com"}),
            "invalid_field",
            "api_url",
        ),
        (
            json!({"test_event_code": "TEST 1"}),
            "invalid_field",
            "test_event_code",
        ),
        (
            json!({"pixel_id": "1234567890"}),
            "invalid_field",
            "pixel_id",
        ),
        (
            json!({"graph_url": "https://graph.facebook.com"}),
            "invalid_field",
            "graph_url",
        ),
        (
            json!({"currency_rates": {"XTR": "0.013"}}),
            "invalid_field",
            "currency_rates",
        ),
    ] {
        let r = s.post_as(&s.a, "/destinations", &body(extra.clone())).await;
        crate::support::assert_error(&r, 422, code, Some(field));
        assert!(!r.text().contains(TOKEN), "{extra}: {}", r.text());
    }
    assert!(listed(&s).await.is_empty(), "a refusal stores nothing");
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            &body(
                json!({"pixel_code": "A".repeat(64), "access_token": "t".repeat(1024),
                         "api_url": "https://business-api.tiktok.com/",
                         "test_event_code": "TEST12345"}),
            ),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let d = r.json()["destination"].clone();
    assert_eq!(d["api_url"], "https://business-api.tiktok.com", "{d}");
    assert_eq!(d["access_token"], "…tttt", "{d}");
    assert!(
        d.get("pixel_id").is_none() && d.get("graph_url").is_none(),
        "{d}"
    );

    s.stop().await;
}

/// A `PATCH` of a `tiktok_events` destination: its rules again, the kind's own fields only, its
/// token kept unless given; a test needs a test code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_checked_by_the_same_rules_and_keeps_the_token() {
    let s = TestServer::start().await;
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            &json!({"name": "tiktok", "kind": "tiktok_events", "pixel_code": PIXEL,
                    "access_token": TOKEN, "test_event_code": "TEST12345"})
            .to_string(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = patch(&s, "tiktok", r#"{"pixel_code":null}"#).await;
    crate::support::assert_error(&r, 422, "invalid_field", Some("pixel_code"));
    let r = patch(&s, "tiktok", r#"{"api_version":"v25.0"}"#).await;
    crate::support::assert_error(&r, 422, "invalid_field", Some("api_version"));
    let r = patch(
        &s,
        "tiktok",
        r#"{"api_url":null,"test_event_code":null,"pixel_code":"C4NEW"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let d = r.json()["destination"].clone();
    assert_eq!(d["pixel_code"], "C4NEW", "{d}");
    assert_eq!(d["api_url"], "https://business-api.tiktok.com", "{d}");
    assert!(d.get("test_event_code").is_none(), "{d}");
    assert_eq!(d["access_token"], "…wxyz", "the token stays: {d}");
    // A test without a test code would count as a real payment: refused, nothing sent.
    let r = s.post_as(&s.a, "/destinations/tiktok/test", "").await;
    crate::support::assert_error(&r, 409, "conflict", Some("test_event_code"));
    assert!(r.text().contains("TikTok's Events Manager"), "{}", r.text());
    s.stop().await;
}

/// `tracker destination create --kind tiktok_events` reads the access token from standard
/// input (never a flag) and creates the destination the API would.
#[test]
fn the_command_line_creates_a_tiktok_destination() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    for args in [&["init"][..], &["space", "create", "shop"]] {
        let out = crate::support::run_cli(dir.path(), &data, args);
        assert!(out.status.success(), "{args:?}");
    }
    let config = dir.path().join("empty-cli.toml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(&data)
        .args(["--json", "destination", "create", "shop", "tiktok"])
        .args(["--kind", "tiktok_events", "--pixel-code", PIXEL])
        .args(["--rate", "XTR=0.013 USD"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{TOKEN}").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(created["kind"], "tiktok_events", "{created}");
    assert_eq!(created["pixel_code"], PIXEL, "{created}");
    assert_eq!(created["access_token"], "…wxyz", "{created}");
    assert_eq!(created["currency_rates"], json!({"XTR": "0.013 USD"}));
    assert!(!stdout.contains(TOKEN), "{stdout}");
    let out = crate::support::run_cli(dir.path(), &data, ["destination", "list", "shop"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tiktok_events") && text.contains(PIXEL),
        "{text}"
    );
}

/// SIGKILL while the search by halves for a refused event is on its way (a half sent, its answer
/// not back), then a restart: the refused event is dead, and every other acknowledged event is
/// taken, none lost with the halves that were in memory only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_during_the_search_by_halves_loses_no_event() {
    use crate::support::{TrackerProcess, first_start, send};

    let dir = tempfile::tempdir().unwrap();
    let env = [("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")];
    let (first, space) = first_start(dir.path());
    first.kill_hard();
    let process = TrackerProcess::start_with_env(dir.path(), &env);
    let api = TiktokApi::start(PIXEL, "tt-right-token-1234").await;
    api.refuse_event("bad-500");
    let bad = paused_with_a_batch_behind(&process, &space, &api).await;

    // The paused request and the whole batch are answered; the first half is kept.
    api.hold_from(Some(2));
    let resume = send(
        process.addr,
        &crate::support::Request::patch(
            "/destinations/tiktok",
            Some(&space.secret),
            r#"{"access_token":"tt-right-token-1234"}"#,
        ),
    )
    .await;
    assert_eq!(resume.status, 200, "{}", resume.text());
    let got = api.wait_for(3, WAIT).await;
    assert_eq!(got[1].events().len(), MAX_EVENTS, "the whole batch first");
    assert_ne!(got[1].code, 0, "refused whole");
    assert!(!got[2].answered && got[2].events().len() < MAX_EVENTS);
    process.kill_hard();
    assert_eq!(api.taken().len(), 0, "nothing taken before the kill");

    api.hold_from(None);
    let process = TrackerProcess::start_with_env(dir.path(), &env);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let counts = loop {
        let r = send(
            process.addr,
            &crate::support::Request::get("/destinations")
                .header("Authorization", format!("Bearer {}", space.secret)),
        )
        .await;
        let counts = r.json()["destinations"][0]["deliveries"].clone();
        if counts["delivered"] == 1000 && counts["dead"] == 1 {
            break counts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all delivered after the restart: {counts}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(counts["retrying"], 0, "{counts}");
    let taken: std::collections::BTreeSet<String> = api
        .taken()
        .iter()
        .map(|e| e["event_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        taken.len(),
        1000,
        "every acknowledged event but the bad one"
    );
    assert!(!taken.contains("bad-500"));
    let log = send(
        process.addr,
        &crate::support::Request::get("/deliveries?limit=1000")
            .header("Authorization", format!("Bearer {}", space.secret)),
    )
    .await
    .json();
    let dead: Vec<&Value> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["state"] == "dead")
        .collect();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["inbox_id"], bad, "{dead:?}");
    crate::support::stop_cleanly(process);
}

/// A `tiktok_events` destination of `process` with a token `api` does not take, paused by its
/// first deposit, and a batch of 1000 deposits waiting behind it, the 501st `bad-500`; answers
/// that one's `inbox_id`.
async fn paused_with_a_batch_behind(
    process: &crate::support::TrackerProcess,
    space: &crate::support::Space,
    api: &TiktokApi,
) -> Value {
    use crate::support::{post_json, post_json_status};
    // A token the stand-in does not take: the first event pauses the destination, and the
    // batch waits behind it.
    post_json_status(
        process.addr,
        &space.secret,
        "/destinations",
        &json!({"name": "tiktok", "kind": "tiktok_events", "pixel_code": PIXEL,
                "access_token": TOKEN, "api_url": api.url(),
                "currency_rates": {"XTR": "0.013 USD"}})
        .to_string(),
        201,
    )
    .await;
    let click = post_json(
        process.addr,
        &space.secret,
        "/clicks",
        r#"{"link_slug":"ad","ttclid":"E.C.P.tt-1","campaign_name":"c"}"#,
    )
    .await;
    let uid = click["uid"].as_str().unwrap().to_owned();
    post_json(
        process.addr,
        &space.secret,
        "/bind",
        &format!(r#"{{"uid":"{uid}","tg_id":777000111}}"#),
    )
    .await;
    let deposit = |eid: &str| json!({"event": "deposit", "uid": uid, "eid": eid, "value": "100", "currency": "XTR"});
    let first_event = post_json(
        process.addr,
        &space.secret,
        "/events",
        &deposit("d-first").to_string(),
    )
    .await;
    assert_eq!(first_event["status"], "queued", "{first_event}");
    api.wait_for(1, WAIT).await;
    let events: Vec<Value> = (0..1000)
        .map(|i| {
            deposit(&if i == 500 {
                "bad-500".into()
            } else {
                format!("d-{i}")
            })
        })
        .collect();
    let batch = post_json(
        process.addr,
        &space.secret,
        "/events/batch",
        &json!({ "events": events }).to_string(),
    )
    .await;
    let results = batch["results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["status"] == "queued"), "{batch}");
    results[500]["inbox_id"].clone()
}
