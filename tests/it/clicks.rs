//! Clicks and bindings through the real server (`docs/api.md#post-clicks`, `#post-bind`): field bounds, the
//! generated uid, fbclid back-fill, Telegram id bounds, first-binding-wins, and space isolation.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{Connection, Request, TestServer, assert_error, event_answer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn click_fields_are_bounded_strings() {
    let s = TestServer::start().await;
    for (field, max) in [
        ("link_slug", 128),
        ("fbclid", 512),
        ("campaign_name", 256),
        ("raw_query", 4096),
    ] {
        let inside = json!({ field: "a".repeat(max) }).to_string();
        let r = s.post_as(&s.a, "/clicks", &inside).await;
        assert_eq!(r.status, 200, "{field} of {max}: {}", r.text());
        let outside = json!({ field: "a".repeat(max + 1) }).to_string();
        let r = s.post_as(&s.a, "/clicks", &outside).await;
        let body = assert_error(&r, 422, "invalid_field", Some(field));
        assert!(body["error"].as_str().unwrap().contains(field), "{body}");
        for wrong in [json!(7), json!(true), json!(["a"]), json!({"a": 1})] {
            let r = s
                .post_as(&s.a, "/clicks", &json!({ field: wrong }).to_string())
                .await;
            assert_error(&r, 400, "invalid_json", Some(field));
        }
    }
    for unknown in [
        r#"{"uid":"x"}"#,
        r#"{"fbclid":"f","campaign":"c"}"#,
        "[]",
        "nope",
    ] {
        let r = s.post_as(&s.a, "/clicks", unknown).await;
        assert_error(&r, 400, "invalid_json", None);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_uid_is_at_most_32_alphanumerics_and_unique() {
    let s = TestServer::start().await;
    let mut uids = BTreeSet::new();
    for i in 0..20 {
        let body = if i % 2 == 0 {
            "{}".to_owned()
        } else {
            json!({"link_slug": "s", "fbclid": format!("fb-{i}"), "campaign_name": "c",
                   "raw_query": "utm_source=fb&x=1"})
            .to_string()
        };
        let r = s.post_as(&s.a, "/clicks", &body).await;
        let answer = r.json();
        assert_eq!(
            (r.status, answer["created"].as_bool()),
            (200, Some(true)),
            "{answer}"
        );
        let uid = answer["uid"].as_str().expect("uid").to_owned();
        // At least 128 random bits in base62 need 22 characters.
        assert!(
            (22..=32).contains(&uid.len()) && uid.bytes().all(|b| b.is_ascii_alphanumeric()),
            "uid {uid:?} does not fit a Telegram start parameter"
        );
        uids.insert(uid);
    }
    assert_eq!(uids.len(), 20, "every click has its own uid");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_back_fill_with_the_same_fbclid_answers_the_same_click() {
    let s = TestServer::start().await;
    let back_fill = |slug: &str| {
        let body = format!(r#"{{"fbclid":"IwAR0same","link_slug":"{slug}"}}"#);
        let s = &s;
        async move { s.post_as(&s.a, "/clicks", &body).await.json() }
    };
    let first = back_fill("one").await;
    let again = back_fill("two").await;
    assert_eq!(first["uid"], again["uid"], "{first} {again}");
    assert_eq!(
        (first["created"].as_bool(), again["created"].as_bool()),
        (Some(true), Some(false))
    );
    // Without an fbclid, every back-fill is a new click.
    let x = s.click(&s.a, r#"{"link_slug":"one"}"#).await;
    let y = s.click(&s.a, r#"{"link_slug":"one"}"#).await;
    assert_ne!(x, y);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_back_fills_with_one_fbclid_make_one_click() {
    let s = TestServer::start().await;
    for round in 0..5 {
        let body = json!({ "fbclid": format!("IwAR-race-{round}") }).to_string();
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let (addr, secret, body) = (s.addr, s.a.secret.clone(), body.clone());
            tasks.push(tokio::spawn(async move {
                let mut conn = Connection::open(addr).await.expect("connect");
                let r = conn
                    .send(&Request::post("/clicks", Some(&secret), &body))
                    .await
                    .expect("response");
                r.json()
            }));
        }
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.unwrap());
        }
        assert_eq!(answers[0]["uid"], answers[1]["uid"], "{answers:?}");
        let created = answers
            .iter()
            .filter(|a| a["created"] == json!(true))
            .count();
        assert_eq!(created, 1, "{answers:?}");
    }
    s.stop().await;
}

/// `POST /bind` with `tg_id` as given (raw JSON).
async fn post_bind(s: &TestServer, uid: &str, tg_id_json: &str) -> crate::support::Response {
    s.post_as(
        &s.a,
        "/bind",
        &format!(r#"{{"uid":"{uid}","tg_id":{tg_id_json}}}"#),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tg_id_is_a_positive_integer_up_to_2_pow_53_minus_1() {
    let s = TestServer::start().await;
    for (sent, stored) in [
        ("1", 1_u64),
        ("9007199254740991", 9_007_199_254_740_991),
        (r#""42""#, 42),
        (r#""9007199254740991""#, 9_007_199_254_740_991),
    ] {
        let uid = s.click(&s.a, "{}").await;
        let r = post_bind(&s, &uid, sent).await;
        assert_eq!(
            (r.status, r.json()),
            (200, json!({"ok": true, "matched": true, "tg_id": stored})),
            "tg_id {sent}"
        );
    }
    for (tg, stored) in [("1", 1_u64), ("9007199254740991", 9_007_199_254_740_991)] {
        let uid = s.click(&s.a, "{}").await;
        let r = s.get_as(&s.a, "/bind", &format!("uid={uid}&tg={tg}")).await;
        assert_eq!(
            (r.status, r.json()),
            (200, json!({"ok": true, "matched": true, "tg_id": stored})),
            "tg={tg}"
        );
    }
    let uid = s.click(&s.a, "{}").await;
    for bad in [
        "0",
        "9007199254740992",
        "18446744073709551616",
        "-1",
        "1.5",
        "1e3",
        r#""12a""#,
        r#""-3""#,
        r#""1.0""#,
        r#"" 7""#,
    ] {
        let r = post_bind(&s, &uid, bad).await;
        assert_error(&r, 422, "invalid_tg_id", Some("tg_id"));
    }
    for bad in ["0", "9007199254740992", "-1", "1.5", "12a", "%7Buser_id%7D"] {
        let r = s
            .get_as(&s.a, "/bind", &format!("uid={uid}&tg={bad}"))
            .await;
        assert_error(&r, 422, "invalid_tg_id", Some("tg"));
    }
    // None of the refused ids bound the click: the first valid one still wins.
    let r = post_bind(&s, &uid, "77").await;
    assert_eq!(r.json(), json!({"ok": true, "matched": true, "tg_id": 77}));
    s.stop().await;
}

/// A field of the wrong JSON type is `invalid_json`, as it is for every
/// other body field (`"value": true` on /events, `"fbclid": 7` on /clicks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tg_id_of_the_wrong_json_type_is_invalid_json() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, "{}").await;
    for wrong in ["true", "[1]", r#"{"id":1}"#] {
        let r = post_bind(&s, &uid, wrong).await;
        assert_error(&r, 400, "invalid_json", Some("tg_id"));
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_requires_uid_and_the_telegram_id() {
    let s = TestServer::start().await;
    for (body, field) in [
        (r#"{"tg_id":5}"#, "uid"),
        (r#"{"uid":"","tg_id":5}"#, "uid"),
        (r#"{"uid":"abc"}"#, "tg_id"),
        (r#"{"uid":"abc","tg_id":""}"#, "tg_id"),
        ("{}", "uid"),
    ] {
        let r = s.post_as(&s.a, "/bind", body).await;
        assert_error(&r, 422, "missing_field", Some(field));
    }
    for (query, field) in [
        ("tg=5", "uid"),
        ("uid=&tg=5", "uid"),
        ("uid=abc", "tg"),
        ("uid=abc&tg=", "tg"),
        ("x=1", "uid"),
    ] {
        let r = s.get_as(&s.a, "/bind", query).await;
        assert_error(&r, 422, "missing_field", Some(field));
    }
    let r = s
        .post_as(&s.a, "/bind", r#"{"uid":"abc","tg_id":5,"extra":1}"#)
        .await;
    assert_error(&r, 400, "invalid_json", None);
    let r = s
        .post_as(
            &s.a,
            "/bind",
            &format!(r#"{{"uid":"{}","tg_id":5}}"#, "u".repeat(129)),
        )
        .await;
    assert_error(&r, 422, "invalid_uid", Some("uid"));
    let r = s.get_as(&s.a, "/bind", "uid=%7Bclickid%7D&tg=5").await;
    assert_error(&r, 422, "invalid_uid", Some("uid"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_an_unknown_uid_stores_nothing() {
    let s = TestServer::start().await;
    let unmatched = json!({"ok": true, "matched": false});
    assert_eq!(post_bind(&s, "no-such-click", "5").await.json(), unmatched);
    let r = s.get_as(&s.a, "/bind", "uid=no-such-click&tg=6").await;
    assert_eq!((r.status, r.json()), (200, unmatched.clone()));
    // Still unknown afterwards: binding did not create a click.
    assert_eq!(post_bind(&s, "no-such-click", "7").await.json(), unmatched);
    let event = event_answer(
        &s.post_event(r#"{"event":"contact","uid":"no-such-click"}"#)
            .await,
    );
    assert!(!event.matched, "{event:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_binding_wins_and_a_retry_is_harmless() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, r#"{"fbclid":"cas"}"#).await;
    let bound = json!({"ok": true, "matched": true, "tg_id": 111});
    assert_eq!(post_bind(&s, &uid, "111").await.json(), bound);
    assert_eq!(post_bind(&s, &uid, r#""111""#).await.json(), bound);
    let get = s.get_as(&s.a, "/bind", &format!("uid={uid}&tg=111")).await;
    assert_eq!(get.json(), bound);
    let conflict = json!({"ok": true, "matched": true, "tg_id": 111, "conflict": true});
    let r = post_bind(&s, &uid, "222").await;
    assert_eq!((r.status, r.json()), (200, conflict.clone()));
    // The ingest token is not told the other id.
    let r = s.get_as(&s.a, "/bind", &format!("uid={uid}&tg=333")).await;
    let without_id = json!({"ok": true, "matched": true, "conflict": true});
    assert_eq!((r.status, r.json()), (200, without_id));
    // Nothing changed: the original id is still the one.
    assert_eq!(post_bind(&s, &uid, "111").await.json(), bound);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_binds_of_one_click_have_one_winner() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, "{}").await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(40));
    let mut tasks = Vec::new();
    for tg_id in 1000..1040_u64 {
        let (addr, barrier) = (s.addr, barrier.clone());
        let (secret, token, uid) = (s.a.secret.clone(), s.a.ingest_token.clone(), uid.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Connection::open(addr).await.expect("connect");
            barrier.wait().await;
            // Half over POST, half over GET: both paths share one compare-and-set.
            let r = if tg_id % 2 == 0 {
                let body = format!(r#"{{"uid":"{uid}","tg_id":{tg_id}}}"#);
                conn.send(&Request::post("/bind", Some(&secret), &body))
                    .await
            } else {
                let target = format!("/bind?token={token}&uid={uid}&tg={tg_id}");
                conn.send(&Request::get(&target)).await
            };
            (tg_id, r.expect("response").json())
        }));
    }
    let mut answers: Vec<(u64, Value)> = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    // A conflict answered to the ingest token (odd ids, over GET) names no id.
    let winners: BTreeSet<u64> = answers
        .iter()
        .filter_map(|(asked, a)| match a["tg_id"].as_u64() {
            None => {
                assert!(asked % 2 == 1 && a["conflict"] == json!(true), "{a}");
                None
            }
            id => id,
        })
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "answers name several winners: {answers:?}"
    );
    let winner = *winners.first().unwrap();
    let unconflicted: Vec<u64> = answers
        .iter()
        .filter(|(_, a)| a.get("conflict").is_none())
        .map(|(asked, _)| *asked)
        .collect();
    assert_eq!(unconflicted, vec![winner], "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(_, a)| a["matched"] == json!(true) && a["ok"] == json!(true)),
        "{answers:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_of_one_space_is_unknown_to_another() {
    let s = TestServer::start().await;
    let uid_a = s.click(&s.a, r#"{"fbclid":"same-fbclid"}"#).await;
    let unmatched = json!({"ok": true, "matched": false});
    let r = s
        .post_as(&s.b, "/bind", &format!(r#"{{"uid":"{uid_a}","tg_id":5}}"#))
        .await;
    assert_eq!(r.json(), unmatched);
    let r = s.get_as(&s.b, "/bind", &format!("uid={uid_a}&tg=5")).await;
    assert_eq!(r.json(), unmatched);
    let event = event_answer(
        &s.get_as(&s.b, "/e", &format!("event=contact&uid={uid_a}"))
            .await,
    );
    assert!(!event.matched, "{event:?}");
    // The same fbclid in space b is another click.
    let uid_b = s.click(&s.b, r#"{"fbclid":"same-fbclid"}"#).await;
    assert_ne!(uid_a, uid_b);
    // Space b's attempts left space a's click unbound.
    let r = s
        .post_as(&s.a, "/bind", &format!(r#"{{"uid":"{uid_a}","tg_id":9}}"#))
        .await;
    assert_eq!(r.json(), json!({"ok": true, "matched": true, "tg_id": 9}));
    s.stop().await;
}
