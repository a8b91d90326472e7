//! `POST /events/batch` through the real server (`docs/api.md#post-eventsbatch`): one result per
//! event in order, each what `POST /events` answers for it; the bounds of 1000 events and 1 MiB;
//! and, against the `tracker` binary, a SIGKILL under batch load that loses nothing acknowledged.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    Connection, NOW_MS, Request, TestServer, TrackerProcess, assert_error, first_start,
    stop_cleanly,
};

/// `POST /events/batch` as space `a` with `events`; the answer's status and JSON.
async fn post_batch(s: &TestServer, events: &[Value]) -> (u16, Value) {
    let body = json!({ "events": events }).to_string();
    let r = s.post_as(&s.a, "/events/batch", &body).await;
    (r.status, r.json())
}

/// The results of a batch answered `200`.
#[track_caller]
fn results(answer: &(u16, Value)) -> Vec<Value> {
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["ok"], true, "{}", answer.1);
    answer.1["results"].as_array().expect("results").clone()
}

/// Every event of space `a`'s feed.
async fn feed(s: &TestServer) -> Vec<Value> {
    let r = s.read_as(&s.a, "/events?limit=1000").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["events"].as_array().expect("events").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_answers_each_event_in_order_and_stores_the_valid_new_ones() {
    let s = TestServer::start().await;
    let stored = s
        .post_event(r#"{"event":"deposit","eid":"tx-1","value":"5"}"#)
        .await
        .json();
    let events = [
        json!({"event": "registration", "uid": "u1"}),
        json!({"event": "deposit", "value": "12,5"}),
        json!({"event": "deposit", "eid": "tx-1", "value": "5"}),
        json!({"event": "registration", "uid": "u1"}),
        json!("not an event"),
        json!({"event": "contact", "occured_at_ms": NOW_MS}),
        json!({"event": "deposit", "eid": "tx-2", "value": "7.10", "currency": "usdt"}),
        json!({"event": "contact", "dry_run": true}),
    ];
    let got = results(&post_batch(&s, &events).await);
    assert_eq!(got.len(), events.len());
    let first = got[0]["inbox_id"].as_str().unwrap().to_owned();
    assert_eq!(got[0]["status"], "queued", "{}", got[0]);
    assert_eq!(got[0]["dedup"], "milestone");
    assert_eq!(
        (&got[1]["status"], &got[1]["field"]),
        (&json!("invalid_value"), &json!("value"))
    );
    assert_eq!(got[1]["ok"], false);
    assert_eq!(got[2]["status"], "duplicate");
    assert_eq!(got[2]["inbox_id"], stored["inbox_id"]);
    assert_eq!(
        got[3]["status"], "duplicate",
        "inside the batch: {}",
        got[3]
    );
    assert_eq!(got[3]["inbox_id"].as_str(), Some(first.as_str()));
    assert_eq!(got[4]["status"], "invalid_json");
    assert_eq!(
        got[5]["status"], "invalid_json",
        "an unknown field: {}",
        got[5]
    );
    assert!(got[5]["error"].as_str().unwrap().contains("occured_at_ms"));
    assert_eq!(got[6]["status"], "queued");
    assert_eq!(
        (&got[7]["status"], &got[7]["field"]),
        (&json!("invalid_field"), &json!("dry_run"))
    );

    // Exactly the three new valid events are stored, in the batch's order.
    let feed = feed(&s).await;
    let eids: Vec<_> = feed.iter().map(|e| e["eid"].clone()).collect();
    assert_eq!(eids, [json!("tx-1"), Value::Null, json!("tx-2")]);
    assert_eq!(feed[1]["inbox_id"].as_str(), Some(first.as_str()));
    assert_eq!(feed[2]["value"], "7.10");
    assert_eq!(feed[2]["currency"], "USDT");
    // The refusals are in the rejection log, named by their place, once a commit (of another
    // space) has written the log's pending entries.
    let r = s.post_as(&s.b, "/events", r#"{"event":"contact"}"#).await;
    assert_eq!(r.status, 200);
    let log = s.read_as(&s.a, "/rejections").await.json();
    let log = log.to_string();
    assert!(log.contains("events[1]"), "{log}");
    assert!(log.contains("events[7]"), "{log}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_result_is_what_post_events_answers() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, r#"{"fbclid":"fb-1"}"#).await;
    let uid_b = s.click(&s.b, r#"{"fbclid":"fb-1"}"#).await;
    let cases = |uid: &str| {
        vec![
            json!({"event": "contact", "uid": uid}),
            json!({"event": "deposit", "uid": uid, "value": "10"}),
            json!({"event": "deposit", "uid": uid, "value": "10"}),
            json!({"event": "deposit", "tg_id": 42}),
            json!({"event": "lead"}),
            json!({"event": "deposit", "occurred_at_ms": 1_800_000}),
        ]
    };
    let batch = results(&post_batch(&s, &cases(&uid)).await);
    // The same events one by one, in space b: the same answers but for the ids.
    for (event, in_batch) in cases(&uid_b).iter().zip(&batch) {
        let single = s.post_as(&s.b, "/events", &event.to_string()).await.json();
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("inbox_id");
                o.remove("event_id");
            }
            v
        };
        assert_eq!(strip(in_batch), strip(&single), "{event}");
    }
    assert_eq!(batch[0]["matched"], true);
    assert_eq!(batch[0]["attributed_by"], "uid");
    // The first deposit of the click is its first, the second its duplicate.
    let feed = feed(&s).await;
    assert_eq!(feed[1]["first_deposit"], true, "{}", feed[1]);
    assert_eq!(batch[2]["status"], "duplicate");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_holds_1000_events_and_not_1001() {
    let s = TestServer::start().await;
    let events: Vec<Value> = (0..1001)
        .map(|n| json!({"event": "contact", "eid": format!("e{n}")}))
        .collect();
    let over = post_batch(&s, &events).await;
    assert_eq!(over.0, 413, "{}", over.1);
    assert_eq!(over.1["status"], "payload_too_large");
    assert!(
        over.1["error"].as_str().unwrap().contains("1000"),
        "{}",
        over.1
    );
    assert!(feed(&s).await.is_empty(), "a refused batch stores nothing");
    let full = results(&post_batch(&s, &events[..1000]).await);
    assert_eq!(full.len(), 1000);
    assert!(full.iter().all(|r| r["status"] == "queued"));
    assert_eq!(feed(&s).await.len(), 1000);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_body_is_at_most_1_mib() {
    let s = TestServer::start().await;
    let limit = 1 << 20;
    // Padded with spaces, which JSON allows between tokens.
    let body = |size: usize| {
        let head = r#"{"events":[{"event":"contact"}]"#;
        format!("{head}{}}}", " ".repeat(size - head.len() - 1))
    };
    let r = s.post_as(&s.a, "/events/batch", &body(limit)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"][0]["status"], "queued");
    let r = s.post_as(&s.a, "/events/batch", &body(limit + 1)).await;
    let e = assert_error(&r, 413, "payload_too_large", None);
    assert!(e["error"].as_str().unwrap().contains("1048576"), "{e}");
    assert_eq!(feed(&s).await.len(), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_is_not_one_is_refused_whole() {
    let s = TestServer::start().await;
    for (body, http, code, field) in [
        ("[]", 400, "invalid_json", None),
        (r#"{"events":{}}"#, 400, "invalid_json", None),
        (r#"{"events":[],"extra":1}"#, 400, "invalid_json", None),
        ("{}", 422, "missing_field", Some("events")),
    ] {
        let r = s.post_as(&s.a, "/events/batch", body).await;
        assert_error(&r, http, code, field);
    }
    let r = s
        .send(&Request::post("/events/batch", None, r#"{"events":[]}"#))
        .await;
    assert_eq!(r.status, 401);
    let empty = results(&post_batch(&s, &[]).await);
    assert!(empty.is_empty());
    s.stop().await;
}

/// Batches of 100 from four connections, SIGKILL after 20 acknowledged; after a restart, every
/// event of every acknowledged batch is there: sent again, each is a duplicate of its own id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_batches_survive_a_sigkill_under_load() {
    const SENDERS: usize = 4;
    const KILL_AFTER_BATCHES: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let acked = Arc::new(AtomicUsize::new(0));
    let kill = Arc::new(tokio::sync::Notify::new());
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (secret, acked, kill) = (creds.secret.clone(), acked.clone(), kill.clone());
            let addr = process.addr;
            tokio::spawn(async move {
                let mut acks: Vec<(String, Value)> = Vec::new();
                let Ok(mut conn) = Connection::open(addr).await else {
                    return acks;
                };
                for n in 0..1000 {
                    let events: Vec<Value> = (0..100)
                        .map(|i| json!({"event": "deposit", "eid": format!("s{sender}-{n}-{i}"), "value": "1"}))
                        .collect();
                    let body = json!({ "events": events }).to_string();
                    let Ok(r) = conn
                        .send(&Request::post("/events/batch", Some(&secret), &body))
                        .await
                    else {
                        break;
                    };
                    assert_eq!(r.status, 200, "{}", r.text());
                    acks.push((body, r.json()["results"].clone()));
                    if acked.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER_BATCHES {
                        kill.notify_one();
                    }
                }
                acks
            })
        })
        .collect();
    let _ = tokio::time::timeout(Duration::from_secs(60), kill.notified()).await;
    process.kill_hard();
    let mut acks = Vec::new();
    for s in senders {
        acks.extend(s.await.expect("sender"));
    }
    assert!(acks.len() >= KILL_AFTER_BATCHES, "{} batches", acks.len());

    let process = TrackerProcess::start(dir.path());
    let mut conn = Connection::open(process.addr).await.expect("connect");
    for (body, answered) in &acks {
        let r = conn
            .send(&Request::post("/events/batch", Some(&creds.secret), body))
            .await
            .expect("answer after restart");
        let again = r.json()["results"].clone();
        for (first, second) in answered
            .as_array()
            .unwrap()
            .iter()
            .zip(again.as_array().unwrap())
        {
            assert_eq!(first["status"], "queued", "{first}");
            assert_eq!(second["status"], "duplicate", "{second}");
            assert_eq!(first["inbox_id"], second["inbox_id"]);
        }
    }
    println!(
        "batch crash test: {} batches of 100 acknowledged before SIGKILL, all kept",
        acks.len()
    );
    stop_cleanly(process);
}

/// The writer adds a batch's counts up by the groups they fall in before it spreads them over
/// the stats rows: two deposits of one batch on one click and quarter count twice, and a third
/// on a click of another campaign counts in that campaign alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_one_batch_on_one_click_each_count_in_the_stats() {
    let s = TestServer::start().await;
    let spring = s
        .click(&s.a, r#"{"campaign_name":"spring","link_slug":"l1"}"#)
        .await;
    let autumn = s.click(&s.a, r#"{"campaign_name":"autumn"}"#).await;
    let events = [
        json!({"event": "deposit", "uid": spring, "eid": "d-1", "value": "12.50", "occurred_at_ms": NOW_MS}),
        json!({"event": "deposit", "uid": spring, "eid": "d-2", "value": "0.75", "occurred_at_ms": NOW_MS + 1}),
        json!({"event": "deposit", "uid": autumn, "eid": "d-3", "value": "3", "occurred_at_ms": NOW_MS}),
    ];
    let got = results(&post_batch(&s, &events).await);
    assert!(got.iter().all(|r| r["status"] == "queued"), "{got:?}");
    let r = s.read_as(&s.a, "/stats?by=campaign_name").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    let group = |name: &str| {
        answer["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .unwrap_or_else(|| panic!("no {name} in {answer}"))
            .clone()
    };
    let (spring, autumn) = (group("spring"), group("autumn"));
    assert_eq!(spring["events"]["deposit"], 2, "{spring}");
    assert_eq!(spring["deposits"], json!({"USD": "13.25"}), "{spring}");
    assert_eq!(spring["clicks"], 1, "{spring}");
    assert_eq!(autumn["events"]["deposit"], 1, "{autumn}");
    assert_eq!(autumn["deposits"], json!({"USD": "3"}), "{autumn}");
    let link = s.read_as(&s.a, "/stats?by=link_slug").await.json();
    let l1 = link["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "l1")
        .unwrap_or_else(|| panic!("no l1 in {link}"))
        .clone();
    assert_eq!(l1["events"]["deposit"], 2, "{l1}");
}
