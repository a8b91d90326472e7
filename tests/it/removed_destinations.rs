//! Removed destinations do not stay in the file for ever: once `delivery_retention` has passed
//! since the removal and none of their deliveries is left, retention deletes their rows, so
//! making and removing destinations in a loop cannot grow the file.

use std::time::Duration;

use serde_json::json;
use tracker::clock::Clock as _;

use crate::deliveries::{delivery_in, destination};
use crate::support::receiver::Receiver;
use crate::support::{DAY_MS, Request, TestServer, assert_queued};

/// The rows of the `destinations` and `delivery_states` tables.
async fn destination_rows(s: &TestServer) -> (u64, u64) {
    use redb::ReadableTableMetadata as _;
    use tracker::storage::schema::{DELIVERY_STATES, DESTINATIONS};
    s.store
        .read(|snapshot| {
            let txn = snapshot.txn();
            Ok((
                txn.open_table(DESTINATIONS)?.len()?,
                txn.open_table(DELIVERY_STATES)?.len()?,
            ))
        })
        .await
        .expect("read")
}

async fn remove(s: &TestServer, name: &str) {
    let target = format!("/destinations/{name}");
    let r = s
        .send(
            &Request {
                method: "DELETE",
                ..Request::get(&target)
            }
            .header("Authorization", format!("Bearer {}", s.a.secret)),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_destination_s_row_goes_once_its_deliveries_are_gone() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.retention = Duration::from_secs(30 * 86_400);
    })
    .await;
    let r = Receiver::start().await;
    // One with a delivery, delivered before it is removed; nine that never sent anything.
    destination(
        &s,
        &s.a,
        &json!({"name": "sent", "kind": "webhook", "url": r.url("/hook")}),
    )
    .await;
    let id = assert_queued(&s.post_event(r#"{"event":"contact","uid":"u1"}"#).await);
    delivery_in(&s, id, "delivered").await;
    for n in 0..9 {
        destination(
            &s,
            &s.a,
            &json!({"name": format!("idle-{n}"), "kind": "webhook", "url": r.url("/hook")}),
        )
        .await;
    }
    let removed_at = s.clock.now_ms();
    remove(&s, "sent").await;
    for n in 0..9 {
        remove(&s, &format!("idle-{n}")).await;
    }
    let retention = s.app.as_ref().unwrap().retention();
    let sweep = || tracker::workers::retention::sweep_deliveries(&retention);
    // Just inside the retention: every row stays.
    s.clock.set(removed_at + 30 * DAY_MS - 1);
    sweep().await.unwrap();
    assert_eq!(destination_rows(&s).await, (10, 10));
    // Just past it: the delivery goes, and with it every removed destination's rows.
    s.clock.set(removed_at + 30 * DAY_MS + 1);
    sweep().await.unwrap();
    assert_eq!(destination_rows(&s).await, (0, 0));
    s.stop().await;
}
