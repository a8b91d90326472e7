//! Every event's identity, its `event_id` (`docs/api.md#event-ids`): a UUID made when the event
//! is stored, answered, shown in the feed and exports, sent to receivers, and never the same
//! for two events: not after a restore from a backup, not in another data file, where the
//! `inbox_id` counts from 1 again.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::receiver::{Received, Receiver};
use crate::support::{NOW_MS, TestServer, app_on, assert_succeeded, contact_at, run_cli, store_at};

const WAIT: Duration = Duration::from_secs(20);

/// A UUID of version 4 in lowercase: 8-4-4-4-12 hex, `4` first in the third group, `8` to `b`
/// first in the fourth.
#[track_caller]
fn assert_uuid_v4(id: &str) {
    let groups: Vec<&str> = id.split('-').collect();
    let hex = |g: &&str| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    assert!(
        groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
            && groups.iter().all(hex)
            && groups[2].starts_with('4')
            && groups[3].starts_with(['8', '9', 'a', 'b']),
        "{id:?} is no UUID of version 4"
    );
}

/// The answer's `event_id`, checked to be a UUID.
#[track_caller]
fn event_id_of(answer: &Value) -> String {
    let id = answer["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no event_id: {answer}"));
    assert_uuid_v4(id);
    id.to_owned()
}

/// The `event_id` the answer, a duplicate's answer, `GET /e`'s answer and the feed give for the
/// same events agree, and differ between events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_id_is_answered_and_shown_in_the_feed() {
    let s = TestServer::start().await;
    let body = r#"{"event":"deposit","eid":"o-1","value":"5"}"#;
    let first = s.post_event(body).await.json();
    let id = event_id_of(&first);
    let again = s.post_event(body).await.json();
    assert_eq!(again["status"], "duplicate", "{again}");
    assert_eq!(
        event_id_of(&again),
        id,
        "a duplicate answers the earlier event's"
    );
    let by_get = s.get_e("event=contact&uid=u-1").await.json();
    let get_id = event_id_of(&by_get);
    assert_ne!(get_id, id);
    // A dry run of a new event stores nothing and has no id; of a duplicate, the earlier one's.
    let dry = s
        .post_event(r#"{"event":"contact","uid":"u-2","dry_run":true}"#)
        .await
        .json();
    assert_eq!(dry["event_id"], Value::Null, "{dry}");
    let dry = s
        .post_event(r#"{"event":"deposit","eid":"o-1","value":"5","dry_run":true}"#)
        .await
        .json();
    assert_eq!(dry["event_id"], json!(id), "{dry}");
    let feed = s.read_as(&s.a, "/events").await.json();
    let shown: Vec<(&str, &str)> = feed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["inbox_id"].as_str().unwrap(),
                e["event_id"].as_str().unwrap(),
            )
        })
        .collect();
    let (first_inbox, get_inbox) = (
        first["inbox_id"].as_str().unwrap(),
        by_get["inbox_id"].as_str().unwrap(),
    );
    assert_eq!(
        shown,
        [(first_inbox, id.as_str()), (get_inbox, get_id.as_str())]
    );
    // The same after a restart: the id is stored, not made when read.
    let s = s.restart().await;
    let feed_again = s.read_as(&s.a, "/events").await.json();
    assert_eq!(feed_again["events"], feed["events"]);
    s.stop().await;
}

/// The first event of one data file and of another both have `inbox_id` 1, and different
/// `event_id`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_data_files_first_event_has_another_event_id() {
    let one = TestServer::start().await;
    let two = TestServer::start().await;
    let body = r#"{"event":"contact","uid":"u-1"}"#;
    let (a, b) = (
        one.post_event(body).await.json(),
        two.post_event(body).await.json(),
    );
    assert_eq!(
        (a["inbox_id"].as_str(), b["inbox_id"].as_str()),
        (Some("1"), Some("1"))
    );
    assert_ne!(event_id_of(&a), event_id_of(&b));
    one.stop().await;
    two.stop().await;
}

/// The webhook's requests so far, once `n` have arrived.
async fn webhooks(r: &Receiver, s: &TestServer, n: usize) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = r.received();
        if got.len() >= n {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} webhooks never arrived: {got:#?}"
        );
        s.app.as_ref().unwrap().delivery_wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After a backup, an event, a restore of that backup and another event, the two events share
/// their `inbox_id` and nothing else: their `event_id`s differ, and so do the `webhook-id`s a
/// receiver deduplicates by, which then keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_before_and_after_a_restore_have_different_ids() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = Duration::from_millis(500);
    })
    .await;
    let r = Receiver::start().await;
    let made = s
        .post_as(
            &s.a,
            "/destinations",
            &json!({"name": "hook", "kind": "webhook", "url": r.url("/hook")}).to_string(),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("backup.redb");
    s.store.backup(backup.clone()).await.unwrap();

    let before = s
        .post_event(r#"{"event":"deposit","uid":"u-1","value":"10"}"#)
        .await
        .json();
    let first = webhooks(&r, &s, 1).await;
    // The restore: the server starts again on a copy of the backup.
    let restored = dir.path().join("restored.redb");
    std::fs::copy(&backup, &restored).unwrap();
    let s = s.restart_with(|c| c.data = restored).await;
    let after = s
        .post_event(r#"{"event":"deposit","uid":"u-1","value":"25"}"#)
        .await
        .json();
    let both = webhooks(&r, &s, 2).await;

    assert_eq!(
        before["inbox_id"], after["inbox_id"],
        "the counter started again"
    );
    let (before_id, after_id) = (event_id_of(&before), event_id_of(&after));
    assert_ne!(before_id, after_id);
    let hook_ids: Vec<Option<&str>> = both.iter().map(|q| q.header("webhook-id")).collect();
    assert_eq!(
        hook_ids,
        [Some(before_id.as_str()), Some(after_id.as_str())],
        "each webhook-id is its event's event_id"
    );
    assert_eq!(first[0].json()["event_id"], json!(before_id));
    assert_eq!(both[1].json()["event_id"], json!(after_id));
    assert_eq!(both[1].json()["value"], "25");
    s.stop().await;
}

/// `tracker export` writes each event's `event_id`, in NDJSON and in CSV (a column of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_carry_the_event_id() {
    use tracker::domain::event::ValidEvent;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tracker.redb");
    let ids = {
        let store = store_at(&path);
        app_on(&store, NOW_MS)
            .create_space("default")
            .await
            .unwrap();
        let mut ids = Vec::new();
        for uid in ["u-1", "u-2"] {
            let event = ValidEvent {
                uid: Some(uid.into()),
                ..contact_at(NOW_MS)
            };
            let outcome = store.record_event(1, event, None).await.unwrap();
            ids.push(outcome.event_id.to_string());
        }
        store.close();
        ids
    };
    let ndjson = run_cli(dir.path(), &path, ["export", "default"]);
    assert_succeeded(&ndjson);
    let lines: Vec<Value> = String::from_utf8_lossy(&ndjson.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let exported: Vec<&str> = lines
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(exported, ids);
    let csv = run_cli(dir.path(), &path, ["export", "default", "--format", "csv"]);
    assert_succeeded(&csv);
    let text = String::from_utf8_lossy(&csv.stdout);
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let column = header
        .iter()
        .position(|h| *h == "event_id")
        .expect("an event_id column");
    let values: Vec<&str> = rows.map(|r| r.split(',').nth(column).unwrap()).collect();
    assert_eq!(values, ids);
}
