//! `tracker backup DEST` through the real binary: a copy made while the server is under load
//! (through the control socket) and one made with no server (opening the file directly) are each
//! a normal data file holding exactly the commits before one snapshot, with every dedup entry,
//! click, binding and credential; an existing path is never overwritten; no credential is in the
//! copy in clear.
//!
//! The newest dedup entries live only in the writer's memory (`storage/index/dedup_buffer.rs`), so a
//! copy taken while serving lacks them in its `DEDUP` table: opening the copy must derive them
//! again from the inbox. The "duplicate with its original `inbox_id`" checks below are what
//! prove it does.

use std::ffi::OsStr;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{
    Connection, EventAnswer, FirstStart, Request, Response, TrackerProcess, assert_duplicate_of,
    assert_queued, assert_succeeded, dedup_entries_derived, event_answer, first_start, post_json,
    rows_in, run_cli, send, stop_cleanly,
};

/// Concurrent senders of unique events while the backup runs (the suite runs on 2 cores).
const SENDERS: usize = 8;
/// The backup starts once this many events are acknowledged.
const ACKS_BEFORE_BACKUP: usize = 300;
/// A bound on the load, whatever happens to the backup.
const MAX_EVENTS: usize = 3000;
/// `META` rows of a file the writer has committed to: `schema_version`, `inbox_seq`,
/// `space_seq`, `dedup_redo_from` (storage/schema.rs).
const META_ROWS: u64 = 4;
/// How long the backup may take before the test fails instead of hanging.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// The binary

/// `tracker --config <empty> --data <data> [--json] backup <dest>`, run in `cwd`.
fn run_backup(data: &Path, dest: &Path, json: bool, cwd: &Path) -> Output {
    let mut args: Vec<&OsStr> = Vec::new();
    if json {
        args.push("--json".as_ref());
    }
    args.extend(["backup".as_ref(), dest.as_os_str()]);
    run_cli(cwd, data, args)
}

/// [`run_backup`] off the async workers, so the server's clients keep running meanwhile.
async fn run_backup_async(data: PathBuf, dest: PathBuf, json: bool, cwd: PathBuf) -> Output {
    let task = tokio::task::spawn_blocking(move || run_backup(&data, &dest, json, &cwd));
    tokio::time::timeout(BACKUP_TIMEOUT, task)
        .await
        .expect("the backup finishes in time")
        .expect("backup task")
}

/// Asserts a successful `--json` backup to `dest` and returns its `rows`.
#[track_caller]
fn assert_backed_up(out: &Output, dest: &Path) -> u64 {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "backup failed: {stderr}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "--json output is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let size = std::fs::metadata(dest).expect("the backup file").len();
    assert_eq!(answer["bytes"].as_u64(), Some(size), "{answer}");
    let keys: Vec<&str> = answer
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["bytes", "rows"], "{answer}");
    answer["rows"].as_u64().expect("rows")
}

/// Asserts the file holds neither credential in clear. The first 11 characters are skipped: they
/// are the prefix `space list` shows, stored on purpose (see credentials.rs).
#[track_caller]
fn assert_no_credential_in(path: &Path, creds: &FirstStart) {
    let bytes = std::fs::read(path).expect("read the backup");
    for credential in [&creds.secret, &creds.ingest_token] {
        let hidden = &credential.as_bytes()[11..];
        assert!(
            !bytes.windows(hidden.len()).any(|w| w == hidden),
            "{} holds a credential in clear",
            path.display()
        );
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

// ---------------------------------------------------------------------------------------------
// Requests

/// A click with an fbclid, bound to `tg_id`: returns its uid.
async fn bound_click(addr: SocketAddr, secret: &str, fbclid: &str, tg_id: u64) -> String {
    let clicked = post_json(
        addr,
        secret,
        "/clicks",
        &format!(r#"{{"fbclid":"{fbclid}","link_slug":"bk"}}"#),
    )
    .await;
    assert_eq!(clicked["created"], json!(true), "{clicked}");
    let uid = clicked["uid"].as_str().expect("uid").to_owned();
    let bound = post_json(
        addr,
        secret,
        "/bind",
        &format!(r#"{{"uid":"{uid}","tg_id":{tg_id}}}"#),
    )
    .await;
    assert_eq!(bound, json!({"ok": true, "matched": true, "tg_id": tg_id}));
    uid
}

/// Asserts the click of `fbclid` is `uid`, bound to `tg_id`, on the copy at `addr`: a back-fill
/// answers the same uid, and a `GET /bind` (with the ingest token) to another id is a conflict.
async fn assert_click_bound(
    addr: SocketAddr,
    creds: &FirstStart,
    fbclid: &str,
    uid: &str,
    tg_id: u64,
) {
    let again = post_json(
        addr,
        &creds.secret,
        "/clicks",
        &format!(r#"{{"fbclid":"{fbclid}"}}"#),
    )
    .await;
    assert_eq!(
        (again["uid"].as_str(), again["created"].as_bool()),
        (Some(uid), Some(false)),
        "the click is in the copy: {again}"
    );
    let rebind = post_json(
        addr,
        &creds.secret,
        "/bind",
        &format!(r#"{{"uid":"{uid}","tg_id":7}}"#),
    )
    .await;
    assert_eq!(
        rebind,
        json!({"ok": true, "matched": true, "tg_id": tg_id, "conflict": true}),
        "the binding is in the copy"
    );
}

/// A server started by [`started_with_each_rule`], and where a backup of it goes.
struct Started {
    /// The server's folder, holding its data file `data`.
    dir: tempfile::TempDir,
    data: PathBuf,
    /// The backup's folder, and the backup `dest` in it: named as `TrackerProcess` expects, so
    /// the copy can be served as it is.
    copy_dir: tempfile::TempDir,
    dest: PathBuf,
    /// The first space's credentials.
    creds: FirstStart,
    /// The bound click: its fbclid, its Telegram user and its uid.
    fbclid: &'static str,
    tg_id: u64,
    uid: String,
    /// The events of each dedup rule, as [`events_of_each_rule`] answers them.
    by_rule: Vec<(String, u64)>,
}

/// The real server started for the first time in a new folder, with a click of `fbclid` bound
/// to Telegram user `tg_id` and an event of each dedup rule.
async fn started_with_each_rule(fbclid: &'static str, tg_id: u64) -> (TrackerProcess, Started) {
    let dir = tempfile::tempdir().unwrap();
    let copy_dir = tempfile::tempdir().unwrap();
    let (data, dest) = (dir.path().join("t.redb"), copy_dir.path().join("t.redb"));
    let (process, creds) = first_start(dir.path());
    let uid = bound_click(process.addr, &creds.secret, fbclid, tg_id).await;
    let by_rule = events_of_each_rule(process.addr, &creds.secret, &uid).await;
    let started = Started {
        dir,
        data,
        copy_dir,
        dest,
        creds,
        fbclid,
        tg_id,
        uid,
        by_rule,
    };
    (process, started)
}

impl Started {
    /// `POST /events` of `body` as the first space, to the server at `addr`.
    async fn post_event(&self, addr: SocketAddr, body: &str) -> Response {
        send(
            addr,
            &Request::post("/events", Some(&self.creds.secret), body),
        )
        .await
    }

    /// Asserts that the server at `addr` (a copy) has the click with its binding, both
    /// credentials, and the events of each dedup rule.
    async fn assert_served_by(&self, addr: SocketAddr) {
        assert_click_bound(addr, &self.creds, self.fbclid, &self.uid, self.tg_id).await;
        for (body, id) in &self.by_rule {
            let r = self.post_event(addr, body).await;
            assert_duplicate_of(&r, *id);
        }
    }
}

/// One event of each rule without an eid, for `uid`: `(body, inbox_id)`. Their dedup entries
/// are derived from different fields, so each is a separate check of the re-derivation.
async fn events_of_each_rule(addr: SocketAddr, secret: &str, uid: &str) -> Vec<(String, u64)> {
    let t = now_ms() - 60_000;
    let bodies = [
        // Milestone: (event, uid).
        format!(r#"{{"event":"contact","uid":"{uid}"}}"#),
        // Fingerprint with a supplied time: permanent.
        format!(r#"{{"event":"deposit","uid":"{uid}","value":"10.50","occurred_at_ms":{t}}}"#),
        // Fingerprint without a time: a duplicate within `dedup_window`.
        format!(r#"{{"event":"deposit","uid":"{uid}","value":"3.25","currency":"usdt"}}"#),
    ];
    let mut stored = Vec::new();
    for body in bodies {
        let r = send(addr, &Request::post("/events", Some(secret), &body)).await;
        let a = event_answer(&r);
        assert!(!a.duplicate && a.matched, "{body}: {a:?}");
        stored.push((body, a.inbox_id));
    }
    stored
}

// ---------------------------------------------------------------------------------------------
// Backup while serving, under load

/// What the senders share.
#[derive(Default)]
struct Load {
    sent: AtomicUsize,
    acked: AtomicUsize,
    /// Set just before the backup command is started.
    backup_started: AtomicBool,
    /// Set once the backup command has returned.
    stop: AtomicBool,
    ready_for_backup: Notify,
}

/// One acknowledged event.
#[derive(Debug, Clone)]
struct Ack {
    eid: String,
    inbox_id: u64,
    /// The answer came back before the backup command started: the copy must hold it.
    before_backup: bool,
}

/// Sends unique events on one keep-alive connection until told to stop.
async fn send_events(addr: SocketAddr, secret: String, sender: usize, load: Arc<Load>) -> Vec<Ack> {
    let mut conn = Connection::open(addr).await.expect("connect");
    let mut acks = Vec::new();
    for n in 0.. {
        if load.stop.load(Ordering::SeqCst)
            || load.sent.fetch_add(1, Ordering::SeqCst) >= MAX_EVENTS
        {
            break;
        }
        let eid = format!("bk-{sender}-{n}");
        let body = format!(r#"{{"event":"deposit","eid":"{eid}","value":"{n}.{sender:02}"}}"#);
        let r = conn
            .send(&Request::post("/events", Some(&secret), &body))
            .await
            .expect("the server answers");
        let inbox_id = assert_queued(&r);
        // Read after the answer: `false` means it was complete before the backup started.
        let before_backup = !load.backup_started.load(Ordering::SeqCst);
        acks.push(Ack {
            eid,
            inbox_id,
            before_backup,
        });
        if load.acked.fetch_add(1, Ordering::SeqCst) + 1 == ACKS_BEFORE_BACKUP {
            load.ready_for_backup.notify_one();
        }
    }
    acks
}

/// Re-sends every acknowledged event to the copy at `addr` (with another value: with an eid it
/// must not matter) and returns each with the copy's answer.
async fn resend(addr: SocketAddr, secret: &str, acks: Vec<Ack>) -> Vec<(Ack, EventAnswer)> {
    let acks = Arc::new(acks);
    let checkers: Vec<_> = (0..SENDERS)
        .map(|part| {
            let (acks, secret) = (acks.clone(), secret.to_owned());
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await.expect("connect to the copy");
                let mut answers = Vec::new();
                for ack in acks.iter().skip(part).step_by(SENDERS) {
                    let body = format!(r#"{{"event":"deposit","eid":"{}","value":"1"}}"#, ack.eid);
                    let r = conn
                        .send(&Request::post("/events", Some(&secret), &body))
                        .await
                        .expect("the copy answers");
                    answers.push((ack.clone(), event_answer(&r)));
                }
                answers
            })
        })
        .collect();
    let mut answers = Vec::new();
    for c in checkers {
        answers.extend(c.await.expect("checker"));
    }
    answers.sort_by_key(|(ack, _)| ack.inbox_id);
    answers
}

/// Asserts the copy's answers to the re-sent load: every event acknowledged before the backup
/// started is a duplicate of its original `inbox_id`; the copy holds every event up to its last
/// one (no hole: one snapshot, nothing half-written); and those after it were stored anew with
/// the ids that follow. Returns that last id and how many came after it.
#[track_caller]
fn assert_a_prefix_of_the_commits(answers: &[(Ack, EventAnswer)]) -> (u64, usize) {
    for (ack, answer) in answers {
        if ack.before_backup {
            assert!(
                answer.duplicate && answer.inbox_id == ack.inbox_id,
                "{} was acknowledged as {} before the backup started; the copy answered {answer:?}",
                ack.eid,
                ack.inbox_id
            );
        }
    }
    let cutoff = answers
        .iter()
        .filter(|(_, a)| a.duplicate)
        .map(|(ack, _)| ack.inbox_id)
        .max()
        .expect("the copy holds some of the load");
    let mut new_ids = Vec::new();
    for (ack, answer) in answers {
        if ack.inbox_id <= cutoff {
            assert!(
                answer.duplicate && answer.inbox_id == ack.inbox_id,
                "a hole in the snapshot: {} (inbox_id {}) is missing though {cutoff} is there: \
                 {answer:?}",
                ack.eid,
                ack.inbox_id
            );
        } else {
            new_ids.push(answer.inbox_id);
        }
    }
    new_ids.sort_unstable();
    let expected: Vec<u64> = (cutoff + 1..).take(new_ids.len()).collect();
    assert_eq!(
        new_ids, expected,
        "new ids on the copy continue after {cutoff}"
    );
    (cutoff, new_ids.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_is_a_consistent_snapshot_with_every_acknowledged_write() {
    let (process, setup) = started_with_each_rule("IwAR-backup", 4242).await;
    let addr = process.addr;

    let load = Arc::new(Load::default());
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            tokio::spawn(send_events(
                addr,
                setup.creds.secret.clone(),
                s,
                load.clone(),
            ))
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(20), load.ready_for_backup.notified())
        .await
        .expect("the load reaches the backup point");
    load.backup_started.store(true, Ordering::SeqCst);
    let out = run_backup_async(
        setup.data.clone(),
        setup.dest.clone(),
        true,
        setup.dir.path().to_owned(),
    )
    .await;
    load.stop.store(true, Ordering::SeqCst);
    let mut acks = Vec::new();
    for s in senders {
        acks.extend(s.await.expect("sender"));
    }
    let rows = assert_backed_up(&out, &setup.dest);
    assert_no_credential_in(&setup.dest, &setup.creds);
    let during = acks.iter().filter(|a| !a.before_backup).count();
    assert!(
        during > 0,
        "no event was answered after the backup started: the test did not load the server"
    );
    let log = process.log_when(|log| log.contains("control command"));
    assert!(
        log.contains("control command"),
        "the backup went through the server's control socket:\n{log}"
    );
    stop_cleanly(process);
    // The copy made under load keeps every rule of `tracker check`, before anything opens it.
    let checked = crate::check::run_check(&setup.dest, None, false, setup.copy_dir.path());
    assert!(
        checked.status.success(),
        "the backup fails tracker check: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let copy = TrackerProcess::start(setup.copy_dir.path());
    assert!(
        copy.created.is_none(),
        "the copy has the default space, so nothing is created on its first start"
    );
    let addr = copy.addr;
    let log = copy.log_when(|log| dedup_entries_derived(log).is_some());
    assert!(
        dedup_entries_derived(&log).is_some(),
        "opening the copy must derive the dedup entries that were only in memory:\n{log}"
    );

    // The click, the binding, both credentials, and the events of each dedup rule.
    setup.assert_served_by(addr).await;

    // Every event acknowledged before the backup started is in the copy with its inbox_id; the
    // copy holds a prefix of the commits (no hole), and nothing after it.
    let total = acks.len();
    let answers = resend(addr, &setup.creds.secret, acks).await;
    assert_eq!(answers.len(), total);
    let (cutoff, after_snapshot) = assert_a_prefix_of_the_commits(&answers);
    let next = assert_queued(&setup.post_event(addr, r#"{"event":"registration"}"#).await);
    assert_eq!(next, cutoff + after_snapshot as u64 + 1);
    let ingest = send(
        addr,
        &Request::get(&format!(
            "/e?token={}&event=subscribed",
            setup.creds.ingest_token
        )),
    )
    .await;
    assert_eq!(
        assert_queued(&ingest),
        next + 1,
        "the ingest token works on the copy"
    );

    // Rows: META, the space, its 2 credentials, the click with its 2 index rows, and each event
    // in the copy once in INBOX and at most once in DEDUP (the rest were in memory).
    let in_copy = (answers.len() - after_snapshot + setup.by_rule.len()) as u64;
    let fixed = META_ROWS + 1 + 2 + 3;
    assert!(
        (fixed + in_copy..=fixed + 2 * in_copy).contains(&rows),
        "{rows} rows for {in_copy} events"
    );
    println!(
        "backup under load: {in_copy} events in the copy, {after_snapshot} after it, {during} \
         answered after the backup started"
    );
    stop_cleanly(copy);
}

// ---------------------------------------------------------------------------------------------
// Backup with no server

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_with_no_server_running_opens_the_data_file_itself() {
    let (process, setup) = started_with_each_rule("IwAR-offline", 99).await;
    let addr = process.addr;
    let mut eids = Vec::new();
    for n in 0..20 {
        let body = format!(r#"{{"event":"deposit","eid":"offline-{n}","value":"{n}"}}"#);
        let r = setup.post_event(addr, &body).await;
        eids.push((body, assert_queued(&r)));
    }
    stop_cleanly(process);
    let socket = tracker::control::socket_path(&setup.data);
    assert!(!socket.exists(), "a clean stop removes the control socket");

    // The text form: one line for a person.
    let out = tokio::task::spawn_blocking({
        let (data, dest, cwd) = (
            setup.data.clone(),
            setup.dest.clone(),
            setup.dir.path().to_owned(),
        );
        move || run_backup(&data, &dest, false, &cwd)
    })
    .await
    .unwrap();
    assert_succeeded(&out);
    // A clean stop wrote every dedup entry: each of the 23 events is one INBOX and one DEDUP row,
    // beside the stats rows and the first deposits the writer keeps; every row of every table is
    // in the copy.
    let events = (eids.len() + setup.by_rule.len()) as u64;
    let rows = rows_in(&setup.data);
    let derived_rows = rows - (META_ROWS + 1 + 2 + 3 + 2 * events);
    // (Each group the events count in has a quarter, a day and a block row.)
    assert!(
        (1..=30).contains(&derived_rows),
        "{derived_rows} stats and first deposit rows"
    );
    let bytes = std::fs::metadata(&setup.dest)
        .expect("the backup file")
        .len();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "backed up {rows} rows ({bytes} bytes) to {}\n",
            setup.dest.display()
        )
    );
    assert_no_credential_in(&setup.dest, &setup.creds);
    assert!(!socket.exists(), "the direct path opens no socket");

    let copy = TrackerProcess::start(setup.copy_dir.path());
    assert!(copy.created.is_none(), "the copy has the default space");
    let addr = copy.addr;
    setup.assert_served_by(addr).await;
    for (body, id) in &eids {
        let r = setup.post_event(addr, body).await;
        assert_duplicate_of(&r, *id);
    }
    let last = eids.last().expect("events").1;
    let next = assert_queued(&setup.post_event(addr, r#"{"event":"registration"}"#).await);
    assert_eq!(
        next,
        last + 1,
        "ids on the copy continue after the copied ones"
    );
    stop_cleanly(copy);

    // The original is untouched by the backup and still opens.
    let again = TrackerProcess::start(setup.dir.path());
    assert!(again.created.is_none());
    let r = setup.post_event(again.addr, &eids[0].0).await;
    assert_duplicate_of(&r, eids[0].1);
    stop_cleanly(again);
}

// ---------------------------------------------------------------------------------------------
// Refusals

/// Asserts the backup was refused because `dest` exists, with nothing on stdout.
#[track_caller]
fn assert_refused_as_existing(out: &Output, dest: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(&format!("{} already exists", dest.display())),
        "the error names the path and why: {stderr:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_never_overwrites_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let existing = dir.path().join("yesterday.redb");
    let kept = b"yesterday's backup: must survive today's\n".to_vec();
    std::fs::write(&existing, &kept).unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    let body = r#"{"event":"deposit","eid":"keep-1","value":"5"}"#;
    let id = assert_queued(&send(addr, &Request::post("/events", Some(&creds.secret), body)).await);

    // Through the server: an unrelated file, and the data file itself.
    let cwd = dir.path().to_owned();
    for dest in [&existing, &data] {
        let out = run_backup_async(data.clone(), dest.clone(), true, cwd.clone()).await;
        assert_refused_as_existing(&out, dest);
    }
    assert_eq!(std::fs::read(&existing).unwrap(), kept);
    // The server was not disturbed.
    assert_duplicate_of(
        &send(addr, &Request::post("/events", Some(&creds.secret), body)).await,
        id,
    );
    stop_cleanly(process);

    // With no server. The command opens the data file itself here (as every admin command
    // does, which writes to it), so the data file is checked by what it holds, not its bytes.
    for dest in [&existing, &data] {
        let out = run_backup_async(data.clone(), dest.clone(), false, cwd.clone()).await;
        assert_refused_as_existing(&out, dest);
    }
    assert_eq!(std::fs::read(&existing).unwrap(), kept);
    let again = TrackerProcess::start(dir.path());
    assert!(again.created.is_none(), "the data file still has its space");
    assert_duplicate_of(
        &send(
            again.addr,
            &Request::post("/events", Some(&creds.secret), body),
        )
        .await,
        id,
    );
    stop_cleanly(again);
}

// ---------------------------------------------------------------------------------------------
// Where a relative DEST goes

/// A `tracker serve` child in `cwd`, killed on drop.
struct ServeIn {
    child: Child,
}

impl ServeIn {
    fn start(cwd: &Path, data: &Path) -> ServeIn {
        let config = cwd.join("empty.toml");
        std::fs::write(&config, "").expect("write empty config");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tracker"))
            .arg("--config")
            .arg(&config)
            .arg("--json")
            .arg("--data")
            .arg(data)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(cwd)
            .env_remove("TRACKER_LISTEN")
            .env_remove("TRACKER_DATA")
            .env("TRACKER_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tracker");
        let stdout = child.stdout.take().expect("stdout");
        // The credentials line, then the address. A command sent before the control socket
        // listens finds the file in use and tries the socket again (cli.rs `admin_command`).
        let listening = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("\"listening\""));
        assert!(listening, "tracker serve did not start");
        ServeIn { child }
    }
}

impl Drop for ServeIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tracker backup nightly.redb` means `./nightly.redb` in the shell that ran it, as with `cp`,
/// whichever directory the server was started in.
#[test]
fn a_relative_dest_is_relative_to_the_commands_directory_while_a_server_runs() {
    let data_dir = tempfile::tempdir().unwrap();
    let server_cwd = tempfile::tempdir().unwrap();
    let shell_cwd = tempfile::tempdir().unwrap();
    let data = data_dir.path().join("t.redb");
    let server = ServeIn::start(server_cwd.path(), &data);
    let out = run_backup(&data, Path::new("nightly.redb"), true, shell_cwd.path());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    drop(server);
    let in_server_cwd = server_cwd.path().join("nightly.redb").exists();
    assert!(out.status.success(), "backup failed: {stderr}");
    assert!(
        shell_cwd.path().join("nightly.redb").exists() && !in_server_cwd,
        "the copy was written relative to the server's directory ({in_server_cwd}), not the \
         command's"
    );
}

/// The move to a new machine with a newer release: `tracker restore` of a backup that every
/// earlier schema version wrote (the committed fixtures) migrates the copy, then checks it,
/// and a server opens what it restored.
#[test]
fn a_backup_of_every_older_release_restores_migrated() {
    for (version, fixture) in crate::fixtures::fixtures() {
        let dir = tempfile::tempdir().unwrap();
        let backup = dir.path().join(format!("tracker-v{version}.redb"));
        std::fs::copy(&fixture, &backup).unwrap();
        let data = dir.path().join("t.redb");
        let out = run_cli(
            dir.path(),
            &data,
            [
                OsStr::new("--json"),
                OsStr::new("restore"),
                backup.as_os_str(),
            ],
        );
        assert!(
            out.status.success(),
            "v{version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let restored: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let migrated = restored["migrated_from"].as_u64();
        let current = tracker::storage::schema::SCHEMA_VERSION;
        assert_eq!(
            migrated,
            (version < current).then_some(version),
            "v{version}: {restored}"
        );
        assert!(
            restored["rows"].as_u64().unwrap() > 0,
            "v{version}: {restored}"
        );
        let checked = run_cli(dir.path(), &data, ["check"]);
        assert_succeeded(&checked);
    }
}

/// A copy is at most as large as the data file, as the room check and docs/backups.md count:
/// a small file's copy once took a fresh redb file's whole first megabyte (1,056,768 bytes
/// against 315,392), and is compacted now.
#[test]
fn a_copy_of_a_small_data_file_is_no_larger_than_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tracker.redb");
    assert_succeeded(&run_cli(dir.path(), &data, ["init"]));
    let dest = dir.path().join("copy.redb");
    let out = run_backup(&data, &dest, true, dir.path());
    assert_backed_up(&out, &dest);
    let (file, copy) = (
        std::fs::metadata(&data).unwrap().len(),
        std::fs::metadata(&dest).unwrap().len(),
    );
    assert!(copy <= file, "a copy of {copy} bytes of a {file}-byte file");
    assert_succeeded(&run_cli(dir.path(), &dest, ["check"]));
}
