//! Retention: the windowed dedup rule's entries that can no longer match are
//! pruned, exactly those, in small steps; a redo after a crash does not bring back a wrong
//! decision; the `dedup` table does not grow from them; and the server does it by itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tracker::domain::dedup::{Expiry, dedup_key};
use tracker::domain::event::{EventKind, ValidEvent};
use tracker::domain::outcome::EventOutcome;
use tracker::storage::Store;
use tracker::storage::schema::{DEDUP, META, META_DEDUP_REDO_FROM};

use crate::support::{DAY_MS, NOW_MS, TestServer, contact_at, store_at};

const W: u64 = DAY_MS;

fn event(kind: EventKind, uid: &str, eid: Option<&str>, value: &str, at_ms: u64) -> ValidEvent {
    ValidEvent {
        kind,
        uid: Some(uid.into()),
        value: Some(tracker::domain::decimal::Decimal::parse(value).unwrap()),
        eid: eid.map(Into::into),
        ..contact_at(at_ms)
    }
}

/// A deposit with `uid`, no `eid` and no time: the windowed rule.
fn deposit(uid: &str, at_ms: u64) -> ValidEvent {
    event(EventKind::Deposit, uid, None, "5", at_ms)
}

fn entry_key(space: u32, e: &ValidEvent) -> (u32, u8, u128) {
    let k = dedup_key(e, W).unwrap();
    (space, k.rule, k.digest)
}

/// Closes `store` cleanly, which writes every buffered dedup entry to the table.
fn close(store: Arc<Store>) {
    store.close();
    drop(store);
}

async fn record(store: &Store, space: u32, e: ValidEvent) -> EventOutcome {
    let key = dedup_key(&e, W);
    store.record_event(space, e, key).await.unwrap()
}

/// The `dedup` table of a closed data file: each key's entry in the newest generation that has
/// one, as a look-up finds it.
fn dedup_table(path: &Path) -> BTreeMap<(u32, u8, u128), (u64, u64)> {
    use redb::{ReadableDatabase as _, ReadableTable as _};
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(DEDUP).unwrap();
    table
        .iter()
        .unwrap()
        .map(|e| {
            let (k, v) = e.unwrap();
            let (_generation, space, rule, digest) = k.value();
            ((space, rule, digest), v.value())
        })
        .collect()
}

/// A whole sweep in steps of `limit`, as `retention::sweep` makes it: answers (scanned, removed).
async fn sweep(store: &Store, now_ms: u64, limit: usize) -> (u64, u64) {
    let expiry = Expiry {
        now_ms,
        window_ms: W,
    };
    let (mut after, mut scanned, mut removed, mut steps) = (None, 0, 0, 0);
    loop {
        let step = store.prune_dedup(after, expiry, limit).await.unwrap();
        assert!(step.scanned <= limit as u64, "{step:?}");
        steps += 1;
        assert!(steps < 1000, "the sweep does not end");
        scanned += step.scanned;
        removed += step.removed;
        match step.next {
            Some(next) => after = Some(next),
            None => return (scanned, removed),
        }
    }
}

fn check(path: &Path, now_ms: u64) -> tracker::storage::check::Report {
    let expiry = Expiry {
        now_ms,
        window_ms: W,
    };
    tracker::storage::check::check_file(path, false, expiry).unwrap()
}

/// Two spaces, each with a windowed deposit received just outside the window, one exactly at
/// its edge and one just inside, and old entries of every permanent rule.
struct Setup {
    outside: ValidEvent,
    edge: ValidEvent,
    inside: ValidEvent,
    permanent: Vec<ValidEvent>,
}

fn setup() -> Setup {
    let old = NOW_MS - 10 * W;
    let mut timed = deposit("u-timed", old);
    timed.time_supplied = true;
    Setup {
        outside: deposit("u-out", NOW_MS - 1),
        edge: deposit("u-edge", NOW_MS),
        inside: deposit("u-in", NOW_MS + 1),
        permanent: vec![
            event(EventKind::Deposit, "u-eid", Some("order-1"), "9", old),
            event(EventKind::Contact, "u-milestone", None, "0", old),
            timed,
        ],
    }
}

/// Stores the setup's events in spaces 1 and 2 of a new file; answers the file.
async fn stored(dir: &Path, s: &Setup) -> std::path::PathBuf {
    let events: Vec<&ValidEvent> = [&s.outside, &s.edge, &s.inside]
        .into_iter()
        .chain(&s.permanent)
        .collect();
    stored_in_two_spaces(dir, &events).await
}

/// Stores `events`, each new, in spaces `a` (1) and `b` (2) of a new file; answers the file.
async fn stored_in_two_spaces(dir: &Path, events: &[&ValidEvent]) -> std::path::PathBuf {
    let path = dir.join("t.redb");
    let store = store_at(&path);
    for name in ["a", "b"] {
        crate::support::app_on(&store, NOW_MS)
            .create_space(name)
            .await
            .unwrap();
    }
    for space in [1, 2] {
        for e in events {
            assert!(!record(&store, space, (*e).clone()).await.duplicate);
        }
    }
    close(store);
    path
}

/// Opens the file at `path`, sweeps it at `now_ms` in steps of `limit`, and closes it: answers
/// the entries scanned and removed.
async fn swept(path: &Path, now_ms: u64, limit: usize) -> (u64, u64) {
    let store = store_at(path);
    let counts = sweep(&store, now_ms, limit).await;
    close(store);
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_removes_exactly_the_entries_that_can_no_longer_match() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup();
    let path = stored(dir.path(), &s).await;
    let before = dedup_table(&path);
    assert_eq!(before.len(), 12);

    // One window after the edge entry: it and the one before it can never match again.
    let now = NOW_MS + W;
    // Steps of two entries, so that a step ends inside a space and between spaces.
    assert_eq!(swept(&path, now, 2).await, (6, 4));
    let after = dedup_table(&path);
    let mut want = before.clone();
    for space in [1, 2] {
        want.remove(&entry_key(space, &s.outside));
        want.remove(&entry_key(space, &s.edge));
    }
    assert_eq!(after, want);
    for space in [1, 2] {
        assert!(after.contains_key(&entry_key(space, &s.inside)));
        for e in &s.permanent {
            assert!(after.contains_key(&entry_key(space, e)), "{e:?}");
        }
    }

    // `check` forgives exactly what retention may remove: at `now` the file is clean; a
    // millisecond earlier the edge entries could still match, and their absence is named.
    assert!(check(&path, now).clean(), "{:#?}", check(&path, now));
    let early = check(&path, now - 1);
    let missing: Vec<_> = early.findings.iter().map(|f| f.problem.as_str()).collect();
    // The edge events: inbox_id 2 in space 1, 8 in space 2.
    assert_eq!(missing.len(), 2, "{missing:#?}");
    assert!(missing[0].contains("space 1, inbox_id 2 "), "{missing:#?}");
    assert!(missing[1].contains("space 2, inbox_id 8 "), "{missing:#?}");

    // The decisions are those of the window, as before the pruning.
    let store = store_at(&path);
    let inside = record(&store, 1, deposit("u-in", now)).await;
    assert!(inside.duplicate, "{inside:?}");
    assert_eq!(inside.inbox_id, 3);
    assert!(!record(&store, 1, deposit("u-edge", now)).await.duplicate);
    assert!(!record(&store, 1, deposit("u-out", now)).await.duplicate);
    let milestone = record(&store, 1, s.permanent[1].clone()).await;
    assert!(milestone.duplicate, "permanent entries stay: {milestone:?}");
    close(store);
}

/// After a crash the open derives the entries of the events from `dedup_redo_from` on again,
/// pruned ones included: each key must end with its newest event's entry, the decisions must
/// be the window's, and a later sweep takes what came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redo_after_pruning_keeps_each_keys_newest_entry() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup();
    let path = stored(dir.path(), &s).await;
    let now = NOW_MS + W;
    let store = store_at(&path);
    assert_eq!(sweep(&store, now, 1024).await.1, 4);
    // The pruned outside key gets a new event (a new window), stored as new.
    let again = record(&store, 1, deposit("u-out", now)).await;
    assert!(!again.duplicate);
    close(store);

    // A crash before the writer wrote the new entry out: the table lacks it, and the redo
    // starts at the first event.
    let k_out = entry_key(1, &s.outside);
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let (space, rule, digest) = k_out;
        // A few events: all in the first generation.
        let mut dedup = txn.open_table(DEDUP).unwrap();
        assert!(dedup.remove((0, space, rule, digest)).unwrap().is_some());
        drop(dedup);
        txn.open_table(META)
            .unwrap()
            .insert(META_DEDUP_REDO_FROM, 1)
            .unwrap();
        txn.commit().unwrap();
    }
    let store = store_at(&path);
    close(store);
    let table = dedup_table(&path);
    assert_eq!(
        table.get(&k_out),
        Some(&(again.inbox_id, now)),
        "the key names its newest event, not the pruned one"
    );
    // The pruned edge entries came back (their events are after the redo point): expired, they
    // decide nothing, `check` is clean, and the next sweep takes them again.
    assert!(table.contains_key(&entry_key(1, &s.edge)));
    assert!(check(&path, now).clean(), "{:#?}", check(&path, now));
    let store = store_at(&path);
    let out = record(&store, 1, deposit("u-out", now + 1)).await;
    assert!(out.duplicate && out.inbox_id == again.inbox_id, "{out:?}");
    assert!(
        !record(&store, 1, deposit("u-edge", now + 1))
            .await
            .duplicate
    );
    // Space 1's edge came back; space 2's events were before the redo point too.
    let (_, removed) = sweep(&store, now, 1024).await;
    assert_eq!(
        removed, 3,
        "space 1's and 2's edge and space 2's outside came back"
    );
    close(store);
}

/// Windowed deposits arrive window after window; with a sweep after each, the `dedup` table
/// holds one window's entries at most, not every window's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dedup_table_does_not_grow_from_expired_entries() {
    const PER_WINDOW: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    let store = store_at(&path);
    crate::support::app_on(&store, NOW_MS)
        .create_space("a")
        .await
        .unwrap();
    close(store);
    let mut sizes = Vec::new();
    for round in 0..4u64 {
        let at = NOW_MS + round * 2 * W;
        let store = store_at(&path);
        let recorded = (0..PER_WINDOW).map(|i| {
            let store = store.clone();
            async move { record(&store, 1, deposit(&format!("u-{round}-{i}"), at)).await }
        });
        let outcomes = futures_util::future::join_all(recorded).await;
        assert!(outcomes.iter().all(|o| !o.duplicate));
        close(store);
        // Written out by the clean close; a window later the sweep takes them all.
        let store = store_at(&path);
        let (scanned, removed) = sweep(&store, at + W, 1024).await;
        assert_eq!((scanned, removed), (PER_WINDOW as u64, PER_WINDOW as u64));
        let (events, usage) = store.usage().await.unwrap();
        assert_eq!(events, (round + 1) * PER_WINDOW as u64);
        let dedup = usage.iter().find(|u| u.table == "dedup").unwrap();
        assert_eq!(dedup.entries, 0, "round {round}");
        sizes.push(dedup.leaf_pages + dedup.branch_pages);
        close(store);
    }
    assert!(sizes.iter().all(|&pages| pages <= 1), "{sizes:?}");
}

/// The server sweeps by itself: after the window, the margin and the first sweep's delay have
/// passed on its clock, the expired entries leave the table, and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_prunes_in_the_background() {
    use crate::support::assert_queued;
    let server = TestServer::start().await;
    for uid in ["u1", "u2", "u3"] {
        let body = format!(r#"{{"event":"deposit","uid":"{uid}","value":"5"}}"#);
        assert_queued(&server.post_event(&body).await);
    }
    // A permanent one beside them.
    assert_queued(&server.post_event(r#"{"event":"contact","uid":"u1"}"#).await);
    // A clean restart writes the buffered entries out to the table.
    let server = server.restart().await;
    let dedup_entries = |usage: &[tracker::storage::read::TableUsage]| {
        usage.iter().find(|u| u.table == "dedup").unwrap().entries
    };
    assert_eq!(dedup_entries(&server.store.usage().await.unwrap().1), 4);
    let wait = tracker::workers::retention::FIRST_SWEEP_AFTER.as_secs() * 1000;
    server
        .clock
        .advance(W + tracker::workers::retention::MARGIN_MS + wait);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let entries = dedup_entries(&server.store.usage().await.unwrap().1);
        if entries == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not prune: {entries} entries"
        );
        // Time goes on: the sweep task may have read the clock for its first delay only after
        // the advance above (a busy machine runs it late).
        server.clock.advance(wait);
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    server.stop().await;
}

/// A deposit naming Telegram user `tg_id`, no uid, no `eid` and no time: the Telegram id's
/// windowed rule.
fn deposit_by_tg(tg_id: u64, at_ms: u64) -> ValidEvent {
    ValidEvent {
        uid: None,
        tg_id: Some(tg_id),
        ..deposit("unused", at_ms)
    }
}

/// Both windowed rules expire: a sweep (in steps of one, so that a step ends between the rules
/// of a space and between spaces) removes the expired entries of the uid's rule and of the
/// Telegram id's, and keeps the ones still in their window and a Telegram milestone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_the_telegram_ids_windowed_deposits_too() {
    let dir = tempfile::tempdir().unwrap();
    let milestone = ValidEvent {
        kind: EventKind::Contact,
        ..deposit_by_tg(7, NOW_MS - 10 * W)
    };
    let expired = [deposit("u-old", NOW_MS - 1), deposit_by_tg(7, NOW_MS - 1)];
    let kept = [deposit("u-new", NOW_MS + 1), deposit_by_tg(8, NOW_MS + 1)];
    let events: Vec<&ValidEvent> = expired.iter().chain(&kept).chain([&milestone]).collect();
    let path = stored_in_two_spaces(dir.path(), &events).await;
    let before = dedup_table(&path);
    assert_eq!(before.len(), 10);

    let now = NOW_MS + W;
    assert_eq!(swept(&path, now, 1).await, (8, 4));
    let mut want = before;
    for space in [1, 2] {
        for e in &expired {
            assert!(want.remove(&entry_key(space, e)).is_some(), "{e:?}");
        }
    }
    assert_eq!(dedup_table(&path), want);
    assert!(check(&path, now).clean(), "{:#?}", check(&path, now));
    // The decisions are the window's: the expired user's deposit is new, the other's is not.
    let store = store_at(&path);
    assert!(!record(&store, 1, deposit_by_tg(7, now)).await.duplicate);
    assert!(record(&store, 1, deposit_by_tg(8, now)).await.duplicate);
    assert!(record(&store, 2, milestone).await.duplicate);
    close(store);
}
