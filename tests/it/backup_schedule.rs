//! Automatic backups: on `backup_every` the server writes a dated, consistent
//! copy into `backup_dir` and keeps the newest `backup_keep` of its own files, touching no
//! other; each copy passes `check` and holds every event acknowledged before it began; a backup
//! that fails is logged and counted while ingest goes on, and is tried again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tracker::config::BackupSchedule;
use tracker::storage::{Store, StoreOptions};
use tracker::workers::backups::backup_name;

use crate::support::{DAY_MS, NOW_MS, TestServer, TrackerProcess, assert_queued};

/// Waits until `ready` holds for the names in `dir`, and answers them, sorted.
async fn names_when(dir: &Path, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut names: Vec<String> = std::fs::read_dir(dir).map_or_else(
            |_| Vec::new(),
            |d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            },
        );
        names.sort();
        if ready(&names) {
            return names;
        }
        assert!(
            Instant::now() < deadline,
            "backups in {}: {names:?}",
            dir.display()
        );
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many events a backup holds, and whether `check` passes on it, on a copy (opening a file
/// derives its buffered dedup entries, which writes).
async fn events_in(backup: &Path) -> u64 {
    let report = tracker::storage::check::check_file(
        backup,
        false,
        tracker::config::Settings::with_data(backup.to_owned()).dedup_expiry(NOW_MS),
    )
    .unwrap();
    assert!(report.clean(), "{}: {report:#?}", backup.display());
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.redb");
    std::fs::copy(backup, &copy).unwrap();
    let (store, created) = Store::open(&copy, &StoreOptions::default()).unwrap();
    assert!(!created);
    store.usage().await.unwrap().0
}

/// A test server that backs up into `dir` once a day (on its clock), keeping `keep`.
async fn backing_up_daily(dir: &Path, keep: u32) -> TestServer {
    let dir = dir.to_owned();
    TestServer::start_with(|s| {
        s.backups = Some(BackupSchedule {
            dir: Some(dir),
            every: Duration::from_secs(86_400),
            keep,
            s3: None,
        });
    })
    .await
}

async fn post_events(server: &TestServer, round: u64, n: u64) {
    for i in 0..n {
        let body = format!(r#"{{"event":"deposit","eid":"r{round}-{i}","value":"1"}}"#);
        assert_queued(&server.post_event(&body).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_backups_appear_rotate_and_hold_what_was_acknowledged() {
    let backups = tempfile::tempdir().unwrap();
    let dir = backups.path().to_owned();
    // Files the schedule did not name: never deleted.
    let foreign = [
        "notes.txt",
        "tracker-manual.redb",
        "tracker-20200101T000000Z.redb.old",
    ];
    for name in foreign {
        std::fs::write(dir.join(name), name).unwrap();
    }
    let server = backing_up_daily(&dir, 2).await;
    let own = |names: &[String]| {
        names
            .iter()
            .filter(|n| !foreign.contains(&n.as_str()))
            .cloned()
            .collect::<Vec<_>>()
    };
    // No backup yet in the directory: the first is made at start.
    let first = backup_name(NOW_MS);
    names_when(&dir, |n| n.contains(&first)).await;
    assert_eq!(events_in(&dir.join(&first)).await, 0);
    for round in 1..=3u64 {
        post_events(&server, round, 5).await;
        let acknowledged = 5 * round;
        server.clock.advance(DAY_MS);
        let name = backup_name(NOW_MS + round * DAY_MS);
        let names = names_when(&dir, |n| n.contains(&name) && own(n).len() == 2).await;
        // Every event acknowledged before the backup began, and nothing half-written: the
        // writer is idle here, so exactly those.
        assert_eq!(events_in(&dir.join(&name)).await, acknowledged, "{name}");
        let mut want = vec![backup_name(NOW_MS + (round - 1) * DAY_MS), name];
        want.extend(foreign.iter().map(|s| (*s).to_owned()));
        want.sort();
        assert_eq!(names, want, "round {round}");
    }
    // A restart does not make one at once: the schedule follows the newest backup's time.
    let server = server.restart().await;
    server.clock.advance(DAY_MS / 2);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let newest = backup_name(NOW_MS + 3 * DAY_MS);
    let names = names_when(&dir, |_| true).await;
    assert_eq!(own(&names).last(), Some(&newest), "{names:?}");
    server.clock.advance(DAY_MS / 2);
    let next = backup_name(NOW_MS + 4 * DAY_MS);
    let names = names_when(&dir, |n| n.contains(&next) && own(n).len() == 2).await;
    assert_eq!(own(&names), vec![newest, next]);
    server.stop().await;
    for name in foreign {
        assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), name);
    }
}

/// Backups named in the future by a clock that was ahead: a backup is made at the start all the
/// same, and each new one is kept while the future ones go in their turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_named_in_the_future_hold_back_no_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let future: Vec<String> = (0..2)
        .map(|i| backup_name(NOW_MS + (365 + i) * DAY_MS))
        .collect();
    for name in &future {
        std::fs::write(dir.path().join(name), "made by a clock a year ahead").unwrap();
    }
    let server = backing_up_daily(dir.path(), 2).await;
    // The rotation follows the backup's write: wait for both, not for the new file alone (on a
    // loaded machine the file appeared before the oldest was deleted).
    let first = [backup_name(NOW_MS), future[1].clone()];
    names_when(dir.path(), |n| n == first).await;
    server.clock.advance(DAY_MS);
    // The future ones gone, the new ones kept.
    let second = [backup_name(NOW_MS), backup_name(NOW_MS + DAY_MS)];
    names_when(dir.path(), |n| n == second).await;
    server.stop().await;
}

/// A backup directory that is not there: the backup fails, ingest goes on, and once the
/// directory exists the next try (ten minutes later) writes the backup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_backup_is_tried_again_while_ingest_goes_on() {
    let parent = tempfile::tempdir().unwrap();
    let dir: PathBuf = parent.path().join("not-yet");
    let server = backing_up_daily(&dir, 3).await;
    let failed = "tracker_scheduled_backups_total{status=\"failed\"} 1\n";
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.metrics_text().contains(failed) {
        assert!(Instant::now() < deadline, "{}", server.metrics_text());
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    post_events(&server, 1, 3).await;
    std::fs::create_dir(&dir).unwrap();
    // Not before the retry is due.
    server.clock.advance(9 * 60_000);
    post_events(&server, 2, 2).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(names_when(&dir, |_| true).await.is_empty());
    server.clock.advance(60_000);
    let name = backup_name(NOW_MS + 10 * 60_000);
    names_when(&dir, |n| n.contains(&name)).await;
    assert_eq!(events_in(&dir.join(&name)).await, 5);
    let text = server.metrics_text();
    assert!(text.contains(failed), "{text}");
    assert!(
        text.contains("tracker_scheduled_backups_total{status=\"written\"} 1\n"),
        "{text}"
    );
    server.stop().await;
}

/// The real binary with a `backup_dir` that does not exist: the folder is made at the start,
/// for the owner alone, and the first backup lands in it; events still `queued`.
#[test]
fn a_missing_backup_dir_is_made_at_start_for_the_owner_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let backup_dir = dir.path().join("not-yet").join("backups");
    let backup_dir_text = backup_dir.display().to_string();
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_BACKUP_DIR", backup_dir_text.as_str()),
            ("TRACKER_METRICS_LISTEN", "127.0.0.1:0"),
        ],
    );
    let created = process.created.take().expect("first start");
    let mode = std::fs::metadata(&backup_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let text = crate::support::events_still_queue(&process, &created.secret, "after-start");
    assert!(
        text.contains("tracker_scheduled_backups_total{status=\"failed\"} 0\n"),
        "{text}"
    );
    let log = process.log_when(|l| l.contains("scheduled backup written"));
    assert!(!log.contains("scheduled backup failed"), "{log}");
    crate::support::stop_cleanly(process);
}

/// A `backup_dir` that cannot be made (a path under a regular file) refuses the start, naming
/// it, rather than failing every backup while the log says "automatic backups on".
#[test]
fn a_backup_dir_that_cannot_be_made_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let backup_dir = blocker.join("backups");
    let backup_dir_text = backup_dir.display().to_string();
    let Err(refused) =
        TrackerProcess::try_start_with_env(dir.path(), &[("TRACKER_BACKUP_DIR", &backup_dir_text)])
    else {
        panic!("the server started with a backup_dir it cannot make");
    };
    assert!(refused.contains("backup_dir"), "{refused}");
    assert!(refused.contains(&backup_dir_text), "{refused}");
    assert!(!dir.path().join("t.redb").exists(), "nothing is created");
}
