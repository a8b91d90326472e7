//! Data files written by earlier releases (`tests/fixtures/v<N>.redb`, one per schema version,
//! made by `tests/fixtures/make-fixture.sh`) open with this build, migrate to its schema version,
//! and still deduplicate against what they hold.

use std::path::PathBuf;

use tracker::domain::dedup::dedup_key;
use tracker::domain::event::{EventKind, ValidEvent};
use tracker::storage::schema::SCHEMA_VERSION;
use tracker::storage::{Store, StoreOptions};

use crate::support::DAY_MS;

fn fixtures() -> Vec<(u64, PathBuf)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let version = name
                .strip_prefix('v')?
                .strip_suffix(".redb")?
                .parse()
                .ok()?;
            Some((version, path))
        })
        .collect();
    found.sort();
    found
}

/// Every schema version before this build's has its fixture: a new version must commit the
/// file of the one before it.
#[test]
fn every_earlier_schema_version_has_a_fixture() {
    let versions: Vec<u64> = fixtures().into_iter().map(|(v, _)| v).collect();
    // Versions 0 (no file) and 1 (never released with data) have none; 2 is the first.
    let expected: Vec<u64> = (2..SCHEMA_VERSION.max(3)).collect();
    assert_eq!(versions, expected, "fixtures found in tests/fixtures");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_opens_migrates_and_still_deduplicates() {
    for (version, fixture) in fixtures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(&fixture, &path).unwrap();
        let (store, created) = Store::open(&path, &StoreOptions::default())
            .unwrap_or_else(|e| panic!("v{version} fixture does not open: {e}"));
        assert!(!created);
        let (events, _) = store.usage().await.unwrap();
        assert_eq!(events, 8, "v{version}: events in the fixture");
        let spaces = tracker::admin::list(&store).await.unwrap();
        let names: Vec<_> = spaces.iter().map(|s| s.space.as_str()).collect();
        assert!(
            names.contains(&"default") && names.contains(&"second"),
            "{names:?}"
        );
        // The fixture's third event: a deposit with eid `order-1` in space 1 (`default`).
        let now = tracker::clock::Clock::now_ms(&tracker::clock::SystemClock);
        let again = ValidEvent {
            kind: EventKind::Deposit,
            uid: None,
            value: None,
            currency: "USD".into(),
            eid: Some("order-1".into()),
            occurred_at_ms: now,
            time_supplied: false,
            received_at_ms: now,
        };
        let key = dedup_key(&again, DAY_MS);
        let outcome = store.record_event(1, again, key).await.unwrap();
        assert!(outcome.duplicate, "v{version}: {outcome:?}");
        assert_eq!(outcome.inbox_id, 3, "v{version}");
        drop(store);
        let db = tracker::storage::open::open_database(&path, None)
            .unwrap()
            .db;
        let stored = redb::ReadableDatabase::begin_read(&db)
            .unwrap()
            .open_table(tracker::storage::schema::META)
            .unwrap()
            .get(tracker::storage::schema::META_SCHEMA_VERSION)
            .unwrap()
            .map(|v| v.value());
        assert_eq!(stored, Some(SCHEMA_VERSION), "v{version} migrated");
    }
}
