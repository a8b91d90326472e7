//! A full disk, for real: the real binary on a small filesystem this test
//! mounts (a tmpfs of a few MiB, or where tmpfs cannot be mounted a loop-mounted ext4 image),
//! filled with a file until a write fails with `ENOSPC`. Fault injection (`tests/it/dedup.rs`)
//! proves the writer's logic; this proves that redb and the kernel behave as that logic assumes.
//!
//! Mounting needs root. Where neither mount works the test says so and passes, except under
//! `CI=true`, where it fails: CI must run it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{
    Connection, Request, Response, TrackerProcess, assert_duplicate_of, assert_error, event_answer,
    first_start, send,
};

/// The filesystem's size: room for the data file and its growth, small enough to fill in a moment.
const SIZE_MIB: u64 = 8;
/// How long the tracker may take to notice by itself that space has returned (its longest pause
/// between tries is 5 s).
const RECOVERY: Duration = Duration::from_secs(30);

/// A small filesystem mounted on a temporary directory, unmounted when dropped.
struct SmallFilesystem {
    mount_point: tempfile::TempDir,
    /// The loop image, if tmpfs could not be mounted.
    _image: Option<tempfile::TempDir>,
}

impl SmallFilesystem {
    /// Mounts a tmpfs of [`SIZE_MIB`], or else an ext4 image of that size on a loop device.
    fn mount() -> Result<SmallFilesystem, String> {
        let mount_point = tempfile::tempdir().map_err(|e| e.to_string())?;
        let at = mount_point
            .path()
            .to_str()
            .expect("a UTF-8 temp path")
            .to_owned();
        let size = format!("size={SIZE_MIB}m");
        let tmpfs = run("mount", &["-t", "tmpfs", "-o", &size, "tmpfs", &at]);
        if tmpfs.is_ok() {
            return Ok(SmallFilesystem {
                mount_point,
                _image: None,
            });
        }
        let image_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = image_dir.path().join("disk.img");
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        file.set_len(SIZE_MIB << 20).map_err(|e| e.to_string())?;
        let image = image.to_str().expect("a UTF-8 temp path");
        run("mkfs.ext4", &["-q", "-F", image])
            .and_then(|()| run("mount", &["-o", "loop", image, &at]))
            .map_err(|loop_error| format!("tmpfs: {tmpfs:?}; loop image: {loop_error}"))?;
        Ok(SmallFilesystem {
            mount_point,
            _image: Some(image_dir),
        })
    }

    /// [`SmallFilesystem::mount`], or `None` with why, outside CI, where it must mount.
    fn mount_or_skip() -> Option<SmallFilesystem> {
        match SmallFilesystem::mount() {
            Ok(fs) => Some(fs),
            Err(why) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "the full-disk tests need a small filesystem they can mount (run as root): \
                     {why}"
                );
                eprintln!("SKIPPED: no small filesystem could be mounted ({why})");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.mount_point.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Writes a file until the filesystem answers `ENOSPC`.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).expect("create the filler");
        let chunk = vec![0xA5_u8; 64 * 1024];
        let mut written = 0;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.raw_os_error() == Some(ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // A short last write may leave a few bytes; a byte at a time takes them.
        while file.write(&[0]).is_ok_and(|n| n == 1) {}
        assert!(
            written > 0,
            "nothing could be written: the disk was full already"
        );
        // Into the filesystem, so it is counted as used.
        let _ = file.sync_all();
    }

    /// Gives the space back.
    fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove the filler");
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let at = self
            .mount_point
            .path()
            .to_str()
            .unwrap_or_default()
            .to_owned();
        let _ = run("umount", &["-l", &at]);
    }
}

/// The error number of "No space left on device".
const ENOSPC: i32 = 28;

/// Runs `program args` to its end; `Err` with what it said if it failed.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// An event body with a long `eid`, so that each takes room in the file.
fn event_body(label: &str, n: usize, uid: Option<&str>) -> String {
    let eid = format!("{label}-{n}-{}", "x".repeat(200));
    match uid {
        Some(uid) => {
            format!(r#"{{"event":"deposit","eid":"{eid}","uid":"{uid}","value":"{n}.5"}}"#)
        }
        None => format!(r#"{{"event":"deposit","eid":"{eid}","value":"{n}"}}"#),
    }
}

/// What the test keeps of each acknowledged event: its body and its `inbox_id`.
type Acked = Vec<(String, u64)>;

/// Posts new events until one is refused, keeping those acknowledged on the way (redb may still
/// find room in pages the file already has); answers the refusal.
async fn post_until_refused(
    conn: &mut Connection,
    secret: &str,
    label: &str,
    acked: &mut Acked,
) -> Response {
    for n in 0..5000 {
        let body = event_body(label, n, None);
        let r = conn
            .send(&Request::post("/events", Some(secret), &body))
            .await
            .expect("an answer on a full disk");
        if r.status != 200 {
            return r;
        }
        let answer = event_answer(&r);
        assert!(!answer.duplicate, "{answer:?}");
        acked.push((body, answer.inbox_id));
    }
    panic!("5000 new events were stored on a full {SIZE_MIB} MiB disk");
}

/// Asserts that every acknowledged event is answered `duplicate` with its own `inbox_id`.
async fn assert_all_duplicates(addr: std::net::SocketAddr, secret: &str, acked: &Acked) {
    let mut conn = Connection::open(addr).await.expect("connect");
    for (body, inbox_id) in acked {
        let r = conn
            .send(&Request::post("/events", Some(secret), body))
            .await
            .expect("an answer");
        assert_duplicate_of(&r, *inbox_id);
    }
}

/// Asserts `/healthz` answers 503 naming storage as unwritable.
async fn assert_unwritable(addr: std::net::SocketAddr) {
    let health = send(addr, &Request::get("/healthz")).await;
    let body = assert_error(&health, 503, "unavailable", None);
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("unwritable")),
        "{body}"
    );
}

/// Asserts that `GET /events` answers with `events` events.
async fn assert_feed_holds(addr: std::net::SocketAddr, secret: &str, events: usize) {
    let page = send(
        addr,
        &Request::get("/events?limit=1000").header("Authorization", format!("Bearer {secret}")),
    )
    .await
    .json();
    assert_eq!(
        page["events"].as_array().map(Vec::len),
        Some(events),
        "{page}"
    );
}

/// A first start whose data file is on `fs`: the log and the config stay on the real disk (a
/// full one would fail the log's writes) in the directory answered.
fn started_on(
    fs: &SmallFilesystem,
) -> (
    tempfile::TempDir,
    TrackerProcess,
    crate::support::FirstStart,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(fs.path().join("t.redb"), dir.path().join("t.redb"))
        .expect("link the data file");
    let (process, creds) = first_start(dir.path());
    (dir, process, creds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_new_writes_keeps_every_acknowledged_one_and_recovers_by_itself() {
    let Some(fs) = SmallFilesystem::mount_or_skip() else {
        return;
    };
    let (dir, process, creds) = started_on(&fs);
    let secret = creds.secret;
    let addr = process.addr;
    let mut conn = Connection::open(addr).await.expect("connect");
    let mut acked = Acked::new();
    let click = send(
        addr,
        &Request::post("/clicks", Some(&secret), r#"{"fbclid":"full-disk"}"#),
    )
    .await
    .json();
    let uid = click["uid"].as_str().expect("uid").to_owned();
    let bind = format!(r#"{{"uid":"{uid}","tg_id":4242}}"#);
    let bound = send(addr, &Request::post("/bind", Some(&secret), &bind))
        .await
        .json();
    assert_eq!(bound["matched"].as_bool(), Some(true), "{bound}");
    for n in 0..100 {
        let body = event_body("before", n, (n % 2 == 0).then_some(uid.as_str()));
        let r = conn
            .send(&Request::post("/events", Some(&secret), &body))
            .await
            .expect("answer");
        acked.push((body, event_answer(&r).inbox_id));
    }

    fs.fill();
    // (a) New events are refused with 503 and Retry-After.
    let refused = post_until_refused(&mut conn, &secret, "full", &mut acked).await;
    assert_error(&refused, 503, "unavailable", None);
    assert!(
        refused.header("retry-after").is_some(),
        "{:?}",
        refused.headers
    );
    // (c) /healthz says so, and keeps saying so while the disk stays full, across the writer's
    // own tries (after 50 ms, 100 ms, 200 ms, ...).
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(1500) {
        assert_unwritable(addr).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // (b) A re-sent event that was acknowledged is a duplicate with its inbox_id, disk full or not.
    assert_all_duplicates(addr, &secret, &acked).await;
    assert_unwritable(addr).await;
    // Reads need no write either: the feed still answers, with what was acknowledged.
    assert_feed_holds(addr, &secret, acked.len()).await;

    // (d) Space returns: the tracker finds out by itself, and takes writes again.
    fs.free();
    let freed = Instant::now();
    while send(addr, &Request::get("/healthz")).await.status != 200 {
        assert!(
            freed.elapsed() < RECOVERY,
            "storage did not recover by itself"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("recovered {:?} after the space returned", freed.elapsed());
    let mut conn = Connection::open(addr).await.expect("connect");
    for n in 0..20 {
        let body = event_body("after", n, Some(&uid));
        let r = conn
            .send(&Request::post("/events", Some(&secret), &body))
            .await
            .expect("answer");
        let answer = event_answer(&r);
        assert!(!answer.duplicate && answer.matched, "{answer:?}");
        acked.push((body, answer.inbox_id));
    }
    assert_all_duplicates(addr, &secret, &acked).await;

    // (e) Full again, then a crash, then a start on the still-full disk.
    fs.fill();
    let mut conn = Connection::open(addr).await.expect("connect");
    let refused = post_until_refused(&mut conn, &secret, "again", &mut acked).await;
    assert_error(&refused, 503, "unavailable", None);
    process.kill_hard();
    assert_a_start_on_the_full_disk_exits_and_says_why(dir.path());
    fs.free();
    let process = TrackerProcess::start(dir.path());
    assert_all_duplicates(process.addr, &secret, &acked).await;
    let bound = send(process.addr, &Request::post("/bind", Some(&secret), &bind))
        .await
        .json();
    assert_eq!(
        bound,
        serde_json::json!({"ok": true, "matched": true, "tg_id": 4242})
    );
    println!("full disk: {} acknowledged events kept", acked.len());
    crate::support::stop_cleanly(process);
}

/// redb repairs a file that was not closed cleanly as it opens, and the tracker derives the
/// dedup entries its buffer held again; both write new pages, so on a full disk the process
/// cannot come up. It exits and says which file, how much is free and how much it needs.
fn assert_a_start_on_the_full_disk_exits_and_says_why(dir: &Path) {
    let data = dir.join("t.redb");
    match TrackerProcess::try_start_with_env(dir, &[]) {
        Ok(process) => panic!(
            "the tracker came up on a full disk after a crash: test what it answers now\n{}",
            process.stderr()
        ),
        Err(log) => {
            let said = format!(
                "cannot open the data file {}: no space left",
                data.display()
            );
            assert!(log.contains(&said), "{log}");
            assert!(
                log.contains("0 bytes free") && log.contains("it needs up to about"),
                "{log}"
            );
            assert!(!log.contains("panicked"), "{log}");
        }
    }
}

/// A backup onto the data file's own small filesystem, where the copy would leave it less than
/// the room it needs to grow, is refused before anything is written, and events still go in; a
/// backup to another filesystem is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_that_would_leave_the_data_file_no_room_is_refused() {
    let Some(fs) = SmallFilesystem::mount_or_skip() else {
        return;
    };
    let (dir, process, creds) = started_on(&fs);
    let data = dir.path().join("t.redb");
    let beside = fs.path().join("copy.redb");
    let out = crate::support::run_cli(dir.path(), &data, ["backup", beside.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("no room for a copy on the data file's own disk")
            && said.contains("backup_dir"),
        "{said}"
    );
    assert!(!beside.exists(), "nothing written");
    let elsewhere = dir.path().join("copy.redb");
    let out = crate::support::run_cli(dir.path(), &data, ["backup", elsewhere.to_str().unwrap()]);
    crate::support::assert_succeeded(&out);
    assert!(elsewhere.exists());
    let r = send(
        process.addr,
        &Request::post(
            "/events",
            Some(&creds.secret),
            &event_body("after-the-refused-backup", 0, None),
        ),
    )
    .await;
    crate::support::assert_queued(&r);
    crate::support::stop_cleanly(process);
}
