//! Deduplication, attribution and the commit path (`docs/api.md#deduplication`, `#durability`): each dedup rule,
//! `matched`, concurrent identical requests, inbox order, and a commit the disk refuses.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::Barrier;
use tracker::clock::Clock as _;
use tracker::storage::fault;

use crate::support::{
    Connection, DAY_MS, NOW_MS, Request, Response, TestServer, assert_duplicate_of, assert_error,
    assert_queued, contact_at, event_answer,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_eid_over_post_and_get_is_one_event() {
    let s = TestServer::start().await;
    let posted = event_answer(
        &s.post_event(r#"{"event":"deposit","eid":"order-1","value":"9.99","uid":"u1"}"#)
            .await,
    );
    assert_eq!((posted.duplicate, posted.dedup.as_str()), (false, "eid"));
    // With an eid, uid and value do not matter.
    let got = s.get_e("event=deposit&eid=order-1&value=1&uid=other").await;
    assert_duplicate_of(&got, posted.inbox_id);
    assert_eq!(event_answer(&got).dedup, "eid");
    // The key is (event, eid): the same eid on another event kind is another event.
    assert_queued(&s.get_e("event=registration&eid=order-1").await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn milestones_count_once_per_uid_and_event() {
    let s = TestServer::start().await;
    let contact = event_answer(&s.post_event(r#"{"event":"contact","uid":"m1"}"#).await);
    assert_eq!(
        (contact.duplicate, contact.dedup.as_str()),
        (false, "milestone")
    );
    assert_duplicate_of(&s.get_e("event=contact&uid=m1").await, contact.inbox_id);
    // A later time does not make it a new milestone.
    s.clock.advance(30 * DAY_MS);
    assert_duplicate_of(
        &s.post_event(r#"{"event":"contact","uid":"m1"}"#).await,
        contact.inbox_id,
    );
    let subscribed = assert_queued(&s.post_event(r#"{"event":"subscribed","uid":"m1"}"#).await);
    let registration = assert_queued(&s.post_event(r#"{"event":"registration","uid":"m1"}"#).await);
    assert!(contact.inbox_id < subscribed && subscribed < registration);
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"m2"}"#).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_fingerprint_compares_amounts_not_spellings() {
    let s = TestServer::start().await;
    let first = event_answer(
        &s.post_event(r#"{"event":"deposit","uid":"d1","value":7}"#)
            .await,
    );
    assert_eq!(
        (first.duplicate, first.dedup.as_str()),
        (false, "fingerprint")
    );
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","uid":"d1","value":"7.00"}"#)
            .await,
        first.inbox_id,
    );
    assert_duplicate_of(
        &s.get_e("event=deposit&uid=d1&value=7.0").await,
        first.inbox_id,
    );
    for other in [
        r#"{"event":"deposit","uid":"d1","value":"7.01"}"#,
        r#"{"event":"deposit","uid":"d1","value":7,"currency":"EUR"}"#,
        r#"{"event":"deposit","uid":"d2","value":7}"#,
        r#"{"event":"deposit","uid":"d1","value":-7}"#,
    ] {
        assert_queued(&s.post_event(other).await);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_with_a_supplied_time_is_permanent_and_distinct_per_time() {
    let s = TestServer::start().await;
    let t = NOW_MS - DAY_MS;
    let deposit =
        |at: u64| format!(r#"{{"event":"deposit","uid":"t1","value":5,"occurred_at_ms":{at}}}"#);
    let first = event_answer(&s.post_event(&deposit(t)).await);
    assert_eq!(
        (first.duplicate, first.dedup.as_str()),
        (false, "fingerprint")
    );
    assert_duplicate_of(
        &s.get_e(&format!("event=deposit&uid=t1&value=5&t={t}"))
            .await,
        first.inbox_id,
    );
    // Far past the dedup window (but inside max_event_age for `t`), still the same deposit.
    s.clock.advance(30 * DAY_MS);
    assert_duplicate_of(&s.post_event(&deposit(t)).await, first.inbox_id);
    // One millisecond apart is another deposit, and it too is permanent.
    let next = assert_queued(&s.post_event(&deposit(t + 1)).await);
    assert_duplicate_of(&s.post_event(&deposit(t + 1)).await, next);
    // A supplied time and no time are different keys.
    assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"t1","value":5}"#)
            .await,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_without_time_is_a_duplicate_only_inside_the_window() {
    let s = TestServer::start().await;
    let window_ms = 86_400_000; // the default dedup_window, 24h
    let body = r#"{"event":"deposit","uid":"w1","value":"20.00"}"#;
    let first = assert_queued(&s.post_event(body).await);
    s.clock.advance(window_ms - 1);
    assert_duplicate_of(&s.post_event(body).await, first);
    assert_duplicate_of(&s.get_e("event=deposit&uid=w1&value=20").await, first);
    // The window counts from the first event, not from its duplicates.
    s.clock.set(NOW_MS + window_ms);
    let second = assert_queued(&s.post_event(body).await);
    assert!(second > first);
    // And a new window starts at the new one.
    s.clock.advance(window_ms - 1);
    assert_duplicate_of(&s.post_event(body).await, second);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_follows_the_configured_dedup_window() {
    let s = TestServer::start_with(|settings| {
        settings.dedup_window = std::time::Duration::from_secs(60);
    })
    .await;
    let body = r#"{"event":"deposit","uid":"w2","value":1}"#;
    let first = assert_queued(&s.post_event(body).await);
    s.clock.advance(59_999);
    assert_duplicate_of(&s.post_event(body).await, first);
    s.clock.advance(1);
    assert_queued(&s.post_event(body).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_with_neither_uid_nor_eid_are_never_duplicates() {
    let s = TestServer::start().await;
    let body = r#"{"event":"deposit","value":5,"currency":"USD"}"#;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let a = event_answer(&s.post_event(body).await);
        assert_eq!((a.duplicate, a.dedup.as_str()), (false, "none"), "{a:?}");
        ids.push(a.inbox_id);
        let g = event_answer(&s.get_e("event=contact").await);
        assert_eq!((g.duplicate, g.dedup.as_str()), (false, "none"), "{g:?}");
        ids.push(g.inbox_id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 6);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_keys_never_cross_spaces() {
    let s = TestServer::start().await;
    for body in [
        r#"{"event":"deposit","eid":"shared-eid"}"#,
        r#"{"event":"contact","uid":"shared-uid"}"#,
        r#"{"event":"deposit","uid":"shared-uid","value":3}"#,
    ] {
        let in_a = assert_queued(&s.post_as(&s.a, "/events", body).await);
        let in_b = assert_queued(&s.post_as(&s.b, "/events", body).await);
        assert_ne!(in_a, in_b);
        assert_duplicate_of(&s.post_as(&s.a, "/events", body).await, in_a);
        assert_duplicate_of(&s.post_as(&s.b, "/events", body).await, in_b);
    }
    let a = assert_queued(&s.get_as(&s.a, "/e", "event=deposit&eid=g-1").await);
    let b = assert_queued(&s.get_as(&s.b, "/e", "event=deposit&eid=g-1").await);
    assert_ne!(a, b);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matched_is_true_only_for_a_click_of_the_same_space() {
    let s = TestServer::start().await;
    let uid_a = s.click(&s.a, r#"{"link_slug":"promo"}"#).await;
    let uid_b = s.click(&s.b, r#"{"link_slug":"promo"}"#).await;
    let matched = event_answer(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid_a}"}}"#))
            .await,
    );
    assert!(matched.matched && !matched.duplicate, "{matched:?}");
    // A duplicate still says whether it matched.
    let again = event_answer(&s.get_e(&format!("event=contact&uid={uid_a}")).await);
    assert!(again.matched && again.duplicate, "{again:?}");
    for unmatched in [
        format!(r#"{{"event":"deposit","uid":"{uid_b}","value":1}}"#),
        r#"{"event":"contact","uid":"no-such-click"}"#.to_owned(),
        r#"{"event":"contact"}"#.to_owned(),
        format!(
            r#"{{"event":"deposit","eid":"x","uid":"{}"}}"#,
            uid_a.to_lowercase()
        ),
    ] {
        let a = event_answer(&s.post_event(&unmatched).await);
        assert!(!a.matched && !a.duplicate, "{unmatched}: {a:?}");
    }
    // Space b's own click matches there.
    let in_b = event_answer(
        &s.post_as(
            &s.b,
            "/events",
            &format!(r#"{{"event":"contact","uid":"{uid_b}"}}"#),
        )
        .await,
    );
    assert!(in_b.matched, "{in_b:?}");
    // A dry run reports the match too.
    let dry = s
        .post_event(&format!(
            r#"{{"event":"subscribed","uid":"{uid_a}","dry_run":true}}"#
        ))
        .await
        .json();
    assert_eq!(dry["matched"].as_bool(), Some(true), "{dry}");
    s.stop().await;
}

/// Sends `request` from `n` tasks at once, each on its own connection, released together.
async fn send_concurrently(s: &TestServer, n: usize, request: &Request<'_>) -> Vec<Response> {
    let barrier = Arc::new(Barrier::new(n));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let barrier = barrier.clone();
        let addr = s.addr;
        let method = request.method.to_owned();
        let target = request.target.to_owned();
        let headers: Vec<(String, String)> = request
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let body = request.body.map(<[u8]>::to_vec);
        tasks.push(tokio::spawn(async move {
            let mut conn = Connection::open(addr).await.expect("connect");
            let request = Request {
                method: &method,
                target: &target,
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.clone()))
                    .collect(),
                body: body.as_deref(),
            };
            barrier.wait().await;
            conn.send(&request).await.expect("response")
        }));
    }
    let mut responses = Vec::with_capacity(n);
    for t in tasks {
        responses.push(t.await.expect("task"));
    }
    responses
}

/// Exactly one `queued`, the rest `duplicate`, all naming one `inbox_id`.
#[track_caller]
fn assert_one_queued(responses: &[Response]) {
    let answers: Vec<_> = responses.iter().map(event_answer).collect();
    let queued = answers.iter().filter(|a| !a.duplicate).count();
    let ids: std::collections::BTreeSet<u64> = answers.iter().map(|a| a.inbox_id).collect();
    assert_eq!(
        (queued, answers.len() - queued, ids.len()),
        (1, responses.len() - 1, 1),
        "queued / duplicate / distinct inbox ids; ids: {ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_identical_posts_store_one_event() {
    let s = TestServer::start().await;
    let secret = s.a.secret.clone();
    let request = Request::post(
        "/events",
        Some(&secret),
        r#"{"event":"deposit","eid":"burst-post","value":"10.00"}"#,
    );
    let responses = send_concurrently(&s, 100, &request).await;
    assert_one_queued(&responses);
    // The milestone rule under the same load.
    let request = Request::post(
        "/events",
        Some(&secret),
        r#"{"event":"contact","uid":"burst"}"#,
    );
    assert_one_queued(&send_concurrently(&s, 100, &request).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_identical_gets_store_one_event() {
    let s = TestServer::start().await;
    let target = format!(
        "/e?token={}&event=deposit&uid=burst-get&value=4.50",
        s.a.ingest_token
    );
    let responses = send_concurrently(&s, 100, &Request::get(&target)).await;
    assert_one_queued(&responses);
    assert_eq!(event_answer(&responses[0]).dedup, "fingerprint");
    s.stop().await;
}

/// The `i`-th event of the ordering test: POSTs in either space and GETs, alternating.
async fn send_sequence_event(s: &TestServer, i: usize) -> Response {
    if i.is_multiple_of(2) {
        let space = if i.is_multiple_of(4) { &s.a } else { &s.b };
        let body = format!(r#"{{"event":"deposit","eid":"seq-{i}"}}"#);
        s.post_as(space, "/events", &body).await
    } else {
        s.get_e(&format!("event=contact&uid=seq-{i}")).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_ids_increase_in_commit_order() {
    let s = TestServer::start().await;
    let mut last = 0;
    for i in 0..40 {
        let id = assert_queued(&send_sequence_event(&s, i).await);
        assert!(id > last, "inbox id {id} after {last}");
        last = id;
        if i % 5 == 0 {
            // A duplicate answers the earlier id and takes no new one.
            assert_duplicate_of(&send_sequence_event(&s, i).await, id);
        }
    }
    s.stop().await;
}

/// A failed flush is fatal: after a failed fsync the kernel may have dropped
/// the pages, so only a new process that reads the file knows what is in it. The batch is
/// answered 503, `/healthz` says so, every later write is refused, and the serve loop ends with
/// the failure (so the process exits non-zero). Started again, the file holds the failed commit
/// or not; either way a retry counts for dedup exactly once.
///
/// This replaces `a_commit_whose_flush_failed_counts_for_dedup_once_the_file_is_reopened`, which
/// tested the in-process reopen after a failed flush that this behaviour removes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_stops_the_store_and_a_restart_counts_the_retry_once() {
    let mut s = TestServer::start().await;
    let window_ms = 86_400_000; // the default dedup_window
    let body = r#"{"event":"deposit","uid":"flush-fail","value":"7"}"#;
    let first = assert_queued(&s.post_event(body).await);
    assert_eq!(s.send(&Request::get("/healthz")).await.status, 200);
    // The window has passed: this one is new, replaces the dedup entry, and its flush fails.
    s.clock.advance(window_ms + 1);
    refused_as_storage_fails(&s, fault::FAIL_SYNC, body).await;
    // Even with the disk working again, nothing more is accepted by this process.
    assert_stopped_for_good(&mut s, "flush").await;
    assert!(
        matches!(s.store.health(), tracker::storage::Health::Failed(_)),
        "{:?}",
        s.store.health()
    );

    let s = s.start_again().await;
    let other = assert_queued(&s.post_event(r#"{"event":"contact"}"#).await);
    let retry = event_answer(&s.post_event(body).await);
    if other == first + 2 {
        // The failed commit reached the file (id first + 1): the retry duplicates it.
        assert!(retry.duplicate, "{retry:?}");
        assert_eq!(retry.inbox_id, first + 1, "{retry:?}");
    } else {
        // It did not: the retry is the new event.
        assert_eq!(other, first + 1);
        assert!(!retry.duplicate, "{retry:?}");
    }
    s.stop().await;
}

/// Makes the store fail as `fault` says, then posts `body`: it is refused `503 unavailable`.
async fn refused_as_storage_fails(s: &TestServer, fault: u8, body: &str) -> Response {
    s.fault.store(fault, Ordering::SeqCst);
    let refused = s.post_event(body).await;
    assert_error(&refused, 503, "unavailable", None);
    refused
}

/// With the disk working again, the serve loop has ended with a failure that names `cause`,
/// and the store refuses every write: the process must be restarted to recover from the file
/// (after a failed flush, or a writer that died).
async fn assert_stopped_for_good(s: &mut TestServer, cause: &str) {
    s.fault.store(fault::WORKS, Ordering::SeqCst);
    let failed = s.serve_loop_ends().await;
    let reason = failed
        .expect_err("the serve loop ends with the failure")
        .to_string();
    assert!(reason.contains(cause), "{reason}");
    assert!(
        s.store
            .record_event(1, contact_at(s.clock.now_ms()), None)
            .await
            .is_err(),
        "a write after the store stopped for good must be refused"
    );
}

/// redb can fail a commit after its header is flushed (shrinking the file comes after): the
/// commit is on disk, but its dedup entries are in neither the writer's buffer nor the table.
/// Such a failure stops the store like a failed flush, so a retry is never stored twice: not by
/// this process, and the restart's redo counts it as the duplicate it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_fails_after_its_flush_stops_the_store_and_the_retry_is_a_duplicate() {
    let mut s = TestServer::start().await;
    let first = assert_queued(&s.post_event(r#"{"event":"contact"}"#).await);
    let body = r#"{"event":"deposit","eid":"after-flush","value":"7"}"#;
    refused_as_storage_fails(&s, fault::FAIL_AFTER_SYNC, body).await;
    // The same process takes nothing more, so it cannot store the retry a second time.
    assert_stopped_for_good(&mut s, "after a flush").await;

    let s = s.start_again().await;
    let retry = event_answer(&s.post_event(body).await);
    assert!(retry.duplicate, "{retry:?}");
    assert_eq!(retry.inbox_id, first + 1, "{retry:?}");
    s.stop().await;
}

/// `/healthz` answers 503 once storage has failed for good, with the error body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_503_after_a_failed_flush() {
    let mut s = TestServer::start().await;
    refused_as_storage_fails(&s, fault::FAIL_SYNC, r#"{"event":"contact","eid":"x"}"#).await;
    // The listener closes as the serve loop ends; ask before that, through a connection opened
    // now, or accept that the port is already closed.
    let health = s.store.health();
    assert!(
        matches!(health, tracker::storage::Health::Failed(_)),
        "{health:?}"
    );
    if let Ok(mut c) = crate::support::Connection::open(s.addr).await
        && let Ok(r) = c.send(&Request::get("/healthz")).await
    {
        assert_error(&r, 503, "unavailable", None);
    }
    assert!(s.serve_loop_ends().await.is_err());
}

/// A bug that kills the writer thread (a panic) is visible: writes are
/// refused with 503, `/healthz` goes 503, and the serve loop ends with an error instead of a
/// clean stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writer_refuses_writes_and_ends_the_serve_loop_with_an_error() {
    let mut s = TestServer::start().await;
    let boom = r#"{"event":"contact","eid":"boom"}"#;
    refused_as_storage_fails(&s, fault::PANIC_ON_WRITE, boom).await;
    assert_stopped_for_good(&mut s, "panicked").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_answers_503_and_stores_nothing() {
    let s = TestServer::start().await;
    let before = assert_queued(
        &s.post_event(r#"{"event":"deposit","eid":"before-fault"}"#)
            .await,
    );
    let body = r#"{"event":"deposit","eid":"during-fault","value":"1.00"}"#;
    let click = s.click(&s.a, r#"{"link_slug":"fault"}"#).await;
    let bind = |tg_id: u64| format!(r#"{{"uid":"{click}","tg_id":{tg_id}}}"#);

    let failed = refused_as_storage_fails(&s, fault::FAIL_ALL, body).await;
    assert!(
        failed.header("retry-after").is_some(),
        "{:?}",
        failed.headers
    );
    // Every write path fails the same way while the disk does.
    let r = s.get_e("event=contact&uid=during-fault").await;
    assert_error(&r, 503, "unavailable", None);
    let r = s
        .post_as(&s.a, "/clicks", r#"{"fbclid":"during-fault"}"#)
        .await;
    assert_error(&r, 503, "unavailable", None);
    let r = s.post_as(&s.a, "/bind", &bind(111)).await;
    assert_error(&r, 503, "unavailable", None);
    // A write that fails before the flush (a full disk) is recoverable: no restart needed, and
    // meanwhile /healthz says that storage is unwritable.
    let health = s.send(&Request::get("/healthz")).await;
    let health = assert_error(&health, 503, "unavailable", None);
    assert!(
        health["error"].as_str().unwrap().contains("unwritable"),
        "{health}"
    );

    s.fault.store(fault::WORKS, Ordering::SeqCst);
    // The tracker finds out by itself, without a request, within its longest pause (5 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while s.send(&Request::get("/healthz")).await.status != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "storage did not recover by itself"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let stored = assert_queued(&s.post_event(body).await);
    assert!(stored > before);
    assert_duplicate_of(&s.post_event(body).await, stored);
    // What was committed before the failure is still there.
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","eid":"before-fault"}"#)
            .await,
        before,
    );
    assert_queued(&s.get_e("event=contact&uid=during-fault").await);
    // The refused click and binding left nothing behind either.
    let r = s
        .post_as(&s.a, "/clicks", r#"{"fbclid":"during-fault"}"#)
        .await
        .json();
    assert_eq!(r["created"].as_bool(), Some(true), "{r}");
    let r = s.post_as(&s.a, "/bind", &bind(222)).await.json();
    assert_eq!(
        r,
        serde_json::json!({"ok": true, "matched": true, "tg_id": 222})
    );
    s.stop().await;
}

/// A full write queue is `unavailable` like a failing disk: 503 with `Retry-After`, and the
/// refused request left nothing behind, while every one answered 200 was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_write_queue_answers_503_and_stores_nothing_for_it() {
    let s = TestServer::start_with_queue(1, |_| {}).await;
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (addr, secret) = (s.addr, s.a.secret.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!(r#"{{"event":"deposit","eid":"queue-{i}"}}"#);
            let r =
                crate::support::send(addr, &Request::post("/events", Some(&secret), &body)).await;
            (body, r)
        }));
    }
    let mut answered = Vec::new();
    for t in tasks {
        answered.push(t.await.expect("task"));
    }
    let mut refused = 0;
    for (body, r) in &answered {
        if r.status == 503 {
            assert_error(r, 503, "unavailable", None);
            assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
            refused += 1;
            assert_queued(&s.post_event(body).await);
        } else {
            assert_duplicate_of(&s.post_event(body).await, assert_queued(r));
        }
    }
    println!("write queue of 1: {refused} of 60 concurrent requests refused");
    s.stop().await;
}

/// A failure stays the size of its cause: a request whose stored record does
/// not decode is answered `500 internal`, and the unrelated requests of its batch commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_decode_fails_only_its_own_request() {
    use tracker::storage::{self, Store, StoreOptions, schema};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    // A click record whose version byte no release writes.
    {
        let db = storage::open_database(&path, None, tracker::storage::SERVER_CACHE_BYTES)
            .unwrap()
            .db;
        let txn = db.begin_write().unwrap();
        txn.open_table(schema::CLICKS)
            .unwrap()
            .insert((1, "damaged"), [0xEEu8, 1, 2, 3].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
    let store = Arc::new(store);
    let now = NOW_MS;
    // The bind and many events go to the writer at once, so they share batches.
    let events: Vec<_> = (0..200)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut event = contact_at(now);
                event.eid = Some(format!("batch-{i}"));
                let key = tracker::domain::dedup::dedup_key(&event, DAY_MS);
                store.record_event(1, event, key).await
            })
        })
        .collect();
    let bind = {
        let store = store.clone();
        tokio::spawn(async move { store.write(move |t| t.bind(1, "damaged", 42, now)).await })
    };
    let bound = bind
        .await
        .unwrap()
        .expect_err("an undecodable click cannot be bound");
    assert_eq!(bound.code, tracker::error::Code::Internal, "{bound:?}");
    for e in events {
        let outcome = e.await.unwrap().expect("an unrelated event commits");
        assert!(!outcome.duplicate);
    }
    assert_eq!(store.health(), tracker::storage::Health::Serving);
    let (stored, _) = store.usage().await.unwrap();
    assert_eq!(stored, 200);
}
