//! Backups off the machine (`[backup_s3]`), against a real S3 implementation: moto in server
//! mode on 127.0.0.1, installed from `PyPI` by `.ci/moto` into `target/`. Scheduled backups
//! arrive in the bucket and only `backup_keep` stay; an endpoint that is down is logged and
//! counted while the server goes on; `tracker backup s3://` and `tracker restore s3://` carry
//! a data file to an empty directory with the same feed; a restore refuses a running server's
//! file and a damaged copy, changing nothing; an upload during a throttle longer than ten tries
//! arrives within `retry_for`.
//!
//! Without moto (no Python or no `PyPI`) the tests that need it print why and pass, except under
//! `CI=true`, where they fail.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracker::config::{BackupSchedule, S3Settings};
use tracker::s3::Bucket;
use tracker::workers::backups::{backup_name, backup_time};

use crate::support::{
    DAY_MS, IO_TIMEOUT, NOW_MS, Request, TestServer, TrackerProcess, assert_queued, send,
};

const SECRET_KEY: &str = "moto-secret-key-never-logged";

/// A moto server, stopped when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Moto {
    /// Starts moto on a free loopback port; `None` (with the reason printed) when it cannot be
    /// installed outside CI.
    fn start() -> Option<Moto> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/moto");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run .ci/moto");
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if !out.status.success() {
            assert!(
                !ci,
                "CI=true and .ci/moto could not install moto: {:?}",
                out.status
            );
            eprintln!("skipped: moto[server] is not available (.ci/moto says why above)");
            return None;
        }
        let server = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + IO_TIMEOUT;
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen");
            // Waiting for another process to listen; not a time rule of the tracker.
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Moto {
            child,
            endpoint: format!("http://{addr}"),
        })
    }

    /// Creates `bucket` (moto takes an unsigned `PUT /bucket`).
    fn create_bucket(&self, bucket: &str) {
        self.ask("PUT", &format!("/{bucket}"));
    }

    /// `method target` sent to moto unsigned, with no body; its whole answer, which must be
    /// `200`.
    fn ask(&self, method: &str, target: &str) -> String {
        let addr = self.endpoint.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        answer
    }

    fn settings(&self, bucket: &str, prefix: &str) -> S3Settings {
        s3_settings(&self.endpoint, bucket, prefix)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3_settings(endpoint: &str, bucket: &str, prefix: &str) -> S3Settings {
    S3Settings {
        endpoint: endpoint.to_owned(),
        region: "us-east-1".into(),
        bucket: bucket.into(),
        prefix: prefix.into(),
        access_key_id: "testing".into(),
        secret_access_key: SECRET_KEY.into(),
        secret_file: None,
        retry_for: Duration::from_secs(2),
    }
}

/// A configuration file with `[backup_s3]` for the command line (the secret comes from the
/// environment, as it must).
fn config_file(dir: &Path, endpoint: &str, bucket: &str) -> PathBuf {
    let path = dir.join("s3.toml");
    std::fs::write(
        &path,
        format!(
            "[backup_s3]\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\nbucket = \
             \"{bucket}\"\nprefix = \"tracker\"\naccess_key_id = \"testing\"\nretry_for = \"2s\"\n"
        ),
    )
    .unwrap();
    path
}

/// Runs `tracker --config <config> --data <data> <args>` to its end.
fn tracker(config: &Path, data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(config)
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("TRACKER_LISTEN")
        .env_remove("TRACKER_DATA")
        .env("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("TRACKER_LOG_LEVEL", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run tracker")
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &std::process::Output) -> String {
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A test server that backs up once a day (on its clock) to `s3` only, keeping `keep`.
async fn uploading_daily(s3: &S3Settings, keep: u32) -> TestServer {
    let configured = s3.clone();
    TestServer::start_with(move |s| {
        s.backups = Some(BackupSchedule {
            dir: None,
            every: Duration::from_secs(86_400),
            keep,
            s3: Some(configured),
        });
    })
    .await
}

/// The scheduled backups under `prefix`, oldest first.
async fn uploaded(s3: &S3Settings) -> Vec<String> {
    Bucket::new(s3, None)
        .unwrap()
        .backups(&s3.prefix, tracker::workers::backups::PREFIX, backup_time)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, key)| key)
        .collect()
}

async fn uploaded_when(s3: &S3Settings, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let keys = uploaded(s3).await;
        if ready(&keys) {
            return keys;
        }
        assert!(Instant::now() < deadline, "uploaded: {keys:?}");
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many events the backup under `key` holds: downloaded and opened.
async fn events_in(s3: &S3Settings, key: &str) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copy.redb");
    let mut file = std::fs::File::create(&path).unwrap();
    Bucket::new(s3, None)
        .unwrap()
        .download(key, &mut file)
        .await
        .unwrap();
    drop(file);
    let options = tracker::storage::StoreOptions::default();
    let (store, created) = tracker::storage::Store::open(&path, &options).unwrap();
    assert!(!created);
    store.usage().await.unwrap().0
}

/// Scheduled backups with `[backup_s3]` and no `backup_dir`: each is uploaded as ingest goes on,
/// only the newest `backup_keep` stay under the prefix (an object of another name there is
/// never deleted), no local copy is left, and `/metrics` counts the uploads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_backups_arrive_in_the_bucket_and_only_backup_keep_stay() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("scheduled");
    // A prefix with a character a URL escapes: the keys uploaded are the keys listed.
    let s3 = moto.settings("scheduled", "tracker~prod/");
    let foreign = "tracker~prod/tracker-notes.txt";
    // In a folder under the prefix, a key the client cannot read (an empty folder name): the
    // listing reads only what is directly under the prefix.
    moto.ask("PUT", "/scheduled/tracker~prod/elsewhere//odd.bin");
    let notes = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(notes.path(), "kept").unwrap();
    Bucket::new(&s3, None)
        .unwrap()
        .upload(notes.path(), foreign)
        .await
        .unwrap();
    // Staging copies of uploads cut short by a kill: one begun two days before the first backup
    // is deleted by a rotation; one begun an hour before the last backup is kept (an upload of
    // another server may still be sending it).
    let staging = |begun: u64| format!("tracker~prod/{}.staging-7-{begun}", backup_name(begun));
    let (stale, young) = (
        staging(NOW_MS - 2 * DAY_MS),
        staging(NOW_MS + 3 * DAY_MS - 3_600_000),
    );
    for key in [&stale, &young] {
        Bucket::new(&s3, None)
            .unwrap()
            .upload(notes.path(), key)
            .await
            .unwrap();
    }
    let server = uploading_daily(&s3, 2).await;
    let key = |day: u64| format!("tracker~prod/{}", backup_name(NOW_MS + day * DAY_MS));
    uploaded_when(&s3, |k| k == [key(0)]).await;
    for day in 1..=3u64 {
        for i in 0..4 {
            let body = format!(r#"{{"event":"deposit","eid":"d{day}-{i}","value":"1"}}"#);
            assert_queued(&server.post_event(&body).await);
        }
        server.clock.advance(DAY_MS);
        // Uploaded, then the oldest deleted: both done.
        let keys = uploaded_when(&s3, |k| k.last() == Some(&key(day)) && k.len() == 2).await;
        assert_eq!(keys, vec![key(day - 1), key(day)], "day {day}");
        assert_eq!(events_in(&s3, &key(day)).await, 4 * day);
    }
    let bucket = Bucket::new(&s3, None).unwrap();
    assert!(bucket.exists(foreign).await.unwrap());
    assert!(!bucket.exists(&stale).await.unwrap(), "{stale} left");
    assert!(bucket.exists(&young).await.unwrap(), "{young} deleted");
    let text = server.metrics_text();
    assert!(
        text.contains("tracker_backup_uploads_total{outcome=\"uploaded\"} 4\n"),
        "{text}"
    );
    assert!(
        text.contains("tracker_backup_uploads_total{outcome=\"failed\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("tracker_backup_upload_last_success_timestamp_seconds "),
        "{text}"
    );
    let folder = server.store.path().parent().unwrap().to_owned();
    let left: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".upload"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    server.stop().await;
}

/// A restart with backups already in the bucket: until this process uploads one, the newest's
/// time is the last success in `/metrics`, so an alert on its age does not go quiet, and the
/// schedule waits `backup_every` after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_newest_backup_in_the_bucket_is_the_last_success() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("restarted");
    let s3 = moto.settings("restarted", "tracker/");
    let made = NOW_MS - 3_600_000;
    let copy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(copy.path(), "an earlier process's backup").unwrap();
    let bucket = Bucket::new(&s3, None).unwrap();
    // And one named a year ahead by a clock that ran ahead: not taken for the last success.
    for at in [made - DAY_MS, made, NOW_MS + 365 * DAY_MS] {
        let key = format!("tracker/{}", backup_name(at));
        bucket.upload(copy.path(), &key).await.unwrap();
    }
    let server = uploading_daily(&s3, 7).await;
    assert_eq!(made % 1000, 0, "a backup's name is to the second");
    let line = format!(
        "tracker_backup_upload_last_success_timestamp_seconds {}.0\n",
        made / 1000
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.metrics_text().contains(&line) {
        assert!(
            Instant::now() < deadline,
            "{line}: {}",
            server.metrics_text()
        );
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = server.metrics_text();
    assert!(
        text.contains("tracker_backup_uploads_total{outcome=\"uploaded\"} 0\n"),
        "{text}"
    );
    assert_eq!(
        uploaded(&s3).await.len(),
        3,
        "nothing uploaded before its time"
    );
    server.stop().await;
}

/// The real binary with `[backup_s3]` pointing at a port nobody listens on: a warning in the
/// log (without the secret key), `failed` counted in `/metrics`, and ingest goes on.
#[test]
fn an_endpoint_that_is_down_is_logged_and_counted_while_the_server_goes_on() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    // Copies left by processes killed during an upload (this version's, naming a process id
    // none has, and an earlier version's): deleted at the start.
    for left in [
        ".tracker-20261124T031500Z.redb.upload-4194305",
        ".tracker-20261124T031500Z.redb.upload",
    ] {
        std::fs::write(dir.path().join(left), left).unwrap();
    }
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_METRICS_LISTEN", "127.0.0.1:0"),
            ("TRACKER_BACKUP_S3_ENDPOINT", &endpoint),
            ("TRACKER_BACKUP_S3_REGION", "us-east-1"),
            ("TRACKER_BACKUP_S3_BUCKET", "nowhere"),
            ("TRACKER_BACKUP_S3_ACCESS_KEY_ID", "testing"),
            ("TRACKER_BACKUP_S3_RETRY_FOR", "1s"),
            ("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY", SECRET_KEY),
        ],
    );
    let created = process.created.take().expect("first start");
    let log = process.log_when(|l| l.contains("uploading a scheduled backup failed"));
    let line = log
        .lines()
        .find(|l| l.contains("uploading a scheduled backup failed"))
        .unwrap_or_else(|| panic!("no upload failure in the log:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("s3://nowhere/tracker-"), "{line}");
    assert!(!log.contains(SECRET_KEY), "{log}");
    let text = crate::support::events_still_queue(&process, &created.secret, "while-down");
    assert!(
        text.contains("tracker_backup_uploads_total{outcome=\"failed\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("tracker_backup_uploads_total{outcome=\"uploaded\"} 0\n"),
        "{text}"
    );
    assert!(
        log.contains("deleted a backup copy a stopped process left"),
        "{log}"
    );
    // The local copy made for the upload is not left behind, nor those the killed ones left.
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".upload"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    crate::support::stop_cleanly(process);
}

/// The feed of a space as `GET /events` answers it, every page.
async fn feed(addr: SocketAddr, secret: &str) -> Vec<Value> {
    let r = send(
        addr,
        &Request::get("/events?limit=1000").header("authorization", format!("Bearer {secret}")),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let page = r.json();
    assert!(page["next"].is_null(), "{page}");
    page["events"].as_array().unwrap().clone()
}

/// `tracker backup s3://` from a running server, then `tracker restore s3://` onto an empty
/// directory: the server started there answers the same feed.
#[test]
fn a_restore_from_s3_onto_an_empty_directory_gives_the_same_feed() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("carried");
    let old = tempfile::tempdir().unwrap();
    let mut process = TrackerProcess::start(old.path());
    let space = process.created.take().expect("first start");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = runtime.block_on(async {
        for i in 0..12 {
            let body = format!(r#"{{"event":"deposit","eid":"carried-{i}","value":"{i}.50"}}"#);
            assert_queued(
                &send(
                    process.addr,
                    &Request::post("/events", Some(&space.secret), &body),
                )
                .await,
            );
        }
        feed(process.addr, &space.secret).await
    });
    assert_eq!(before.len(), 12);
    let config = config_file(old.path(), &moto.endpoint, "carried");
    let address = "s3://carried/moved/tracker.redb";
    let out = ok(&tracker(
        &config,
        &old.path().join("t.redb"),
        &["backup", address],
    ));
    assert!(out.contains(address), "{out}");
    // Never over an object already there.
    let again = refused(&tracker(
        &config,
        &old.path().join("t.redb"),
        &["backup", address],
    ));
    assert!(again.contains("already exists"), "{again}");
    crate::support::stop_cleanly(process);

    let new = tempfile::tempdir().unwrap();
    let config = config_file(new.path(), &moto.endpoint, "carried");
    let out = ok(&tracker(
        &config,
        &new.path().join("t.redb"),
        &["restore", address],
    ));
    assert!(
        out.contains("restored s3://carried/moved/tracker.redb into"),
        "{out}"
    );
    let names: Vec<String> = std::fs::read_dir(new.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("t.redb"))
        .collect();
    assert_eq!(names, ["t.redb"], "nothing but the data file is left");
    let mode = std::fs::metadata(new.path().join("t.redb"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let process = TrackerProcess::start(new.path());
    assert!(
        process.created.is_none(),
        "the restored file, not a new one"
    );
    let after = runtime.block_on(feed(process.addr, &space.secret));
    assert_eq!(after, before);
    crate::support::stop_cleanly(process);
}

/// The data file's bytes and the names in its folder, to show nothing changed.
fn state_of(dir: &Path) -> (Vec<u8>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("stderr"))
        .collect();
    names.sort();
    (std::fs::read(dir.join("t.redb")).unwrap(), names)
}

/// A restore over the file a running server has open is refused, and the file and its folder
/// are as they were; stopped, the same restore works and keeps the replaced file.
#[test]
fn a_restore_over_a_running_servers_file_refuses_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut process = TrackerProcess::start(dir.path());
    let space = process.created.take().expect("first start");
    let config = dir.path().join("empty-restore.toml");
    std::fs::write(&config, "").unwrap();
    let data = dir.path().join("t.redb");
    let backups = tempfile::tempdir().unwrap();
    let backup = backups.path().join("b.redb");
    ok(&tracker(
        &config,
        &data,
        &["backup", backup.to_str().unwrap()],
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = runtime.block_on(async {
        let body = r#"{"event":"contact","eid":"after-the-backup"}"#;
        assert_queued(
            &send(
                process.addr,
                &Request::post("/events", Some(&space.secret), body),
            )
            .await,
        );
        feed(process.addr, &space.secret).await
    });
    let names_before = state_of(dir.path()).1;
    let e = refused(&tracker(
        &config,
        &data,
        &["restore", backup.to_str().unwrap()],
    ));
    assert!(e.contains("a server has"), "{e}");
    assert!(e.contains("nothing was changed"), "{e}");
    assert_eq!(state_of(dir.path()).1, names_before);
    assert_eq!(runtime.block_on(feed(process.addr, &space.secret)), before);
    crate::support::stop_cleanly(process);
    // Stopped: the restore goes through, and the file it replaced is kept.
    let out = ok(&tracker(
        &config,
        &data,
        &["restore", backup.to_str().unwrap()],
    ));
    assert!(out.contains("the file it replaced is kept as"), "{out}");
    let kept: Vec<String> = state_of(dir.path())
        .1
        .into_iter()
        .filter(|n| n.starts_with("t.redb.replaced-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let process = TrackerProcess::start(dir.path());
    assert_eq!(
        runtime.block_on(feed(process.addr, &space.secret)).len(),
        before.len() - 1
    );
    crate::support::stop_cleanly(process);
}

/// A backup damaged on its way (bytes overwritten, or cut short) is refused after it is
/// downloaded and checked: the data file and its folder are as they were.
#[test]
fn a_damaged_download_changes_nothing() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("damaged");
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start(dir.path());
    crate::support::stop_cleanly(process);
    let data = dir.path().join("t.redb");
    let config = config_file(dir.path(), &moto.endpoint, "damaged");
    let copies = tempfile::tempdir().unwrap();
    let good = copies.path().join("good.redb");
    ok(&tracker(
        &config,
        &data,
        &["backup", good.to_str().unwrap()],
    ));
    let bytes = std::fs::read(&good).unwrap();
    // Bytes of a page that holds rows (the space's name is in it), not of free space.
    let at = bytes
        .windows(7)
        .position(|w| w == b"default")
        .expect("the space's name in the file");
    let mut overwritten = bytes.clone();
    for b in &mut overwritten[at - 16..at + 16] {
        *b ^= 0x5a;
    }
    // One byte of a record: the page reads, but its checksum no longer fits.
    let mut one_byte = bytes.clone();
    one_byte[at + 1] ^= 0x01;
    // A sound redb file whose record does not decode: only the tracker's own check finds it.
    let undecodable = copies.path().join("undecodable.redb");
    std::fs::copy(&good, &undecodable).unwrap();
    {
        let db = redb::Database::open(&undecodable).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(tracker::storage::schema::INBOX)
            .unwrap()
            .insert((1, 3), [0xff_u8, 1, 2].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let damaged = [
        ("undecodable", std::fs::read(&undecodable).unwrap()),
        ("one-byte", one_byte),
        ("overwritten", overwritten),
        ("cut", bytes[..bytes.len() / 3].to_vec()),
        ("not-redb", b"not a data file at all".to_vec()),
    ];
    let s3 = moto.settings("damaged", "");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = state_of(dir.path());
    for (name, content) in damaged {
        let file = copies.path().join(name);
        std::fs::write(&file, content).unwrap();
        runtime
            .block_on(Bucket::new(&s3, None).unwrap().upload(&file, name))
            .unwrap();
        let e = refused(&tracker(
            &config,
            &data,
            &["restore", &format!("s3://damaged/{name}")],
        ));
        assert!(e.contains("nothing was changed"), "{name}: {e}");
        if name == "undecodable" {
            assert!(e.contains("is damaged ("), "{e}");
            assert!(e.contains("inbox [space 1, inbox_id 3]"), "{e}");
        }
        assert!(
            state_of(dir.path()) == before,
            "{name}: the data file or its folder changed"
        );
    }
    // Just inside: the undamaged copy restores.
    runtime
        .block_on(Bucket::new(&s3, None).unwrap().upload(&good, "good"))
        .unwrap();
    ok(&tracker(&config, &data, &["restore", "s3://damaged/good"]));
}

/// A file larger than a part goes up as a multipart upload and comes back byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_backup_is_uploaded_in_parts_and_comes_back_whole() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("large");
    let s3 = moto.settings("large", "");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.bin");
    let size = 2 * tracker::s3::PART_BYTES + 12_345;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, &bytes).unwrap();
    let bucket = Bucket::new(&s3, None).unwrap();
    assert_eq!(
        bucket.upload(&path, "a/large.bin").await.unwrap(),
        Some(size as u64)
    );
    let back = dir.path().join("back.bin");
    let mut file = std::fs::File::create(&back).unwrap();
    assert_eq!(
        bucket.download("a/large.bin", &mut file).await.unwrap(),
        size as u64
    );
    assert!(std::fs::read(&back).unwrap() == bytes);
}

/// In front of moto: until `until`, each request is read and answered `503 SlowDown` as S3
/// throttles (and the connection closed); after it, connections are passed through to moto.
/// Answers the proxy and the count of requests throttled.
async fn throttling_proxy(
    moto: &str,
    until: Instant,
) -> (
    crate::support::loopback::Listening,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::AsyncWriteExt as _;
    let moto = moto.trim_start_matches("http://").to_owned();
    let throttled = Arc::new(AtomicU64::new(0));
    let count = throttled.clone();
    let listening = crate::support::loopback::listen(move |mut stream| {
        let (moto, count) = (moto.clone(), count.clone());
        async move {
            if Instant::now() < until {
                let mut buf = Vec::new();
                if crate::support::loopback::read_request(&mut stream, &mut buf)
                    .await
                    .is_some()
                {
                    count.fetch_add(1, Ordering::Relaxed);
                    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown\
                        </Code><Message>Please reduce your request rate.</Message></Error>";
                    let answer = format!(
                        "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
                return;
            }
            if let Ok(mut upstream) = tokio::net::TcpStream::connect(&moto).await {
                let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
            }
        }
    })
    .await;
    (listening, throttled)
}

/// S3 throttles with `503 SlowDown` for longer than ten tries take (about 5 s): the upload is
/// tried again until `retry_for` and arrives once the throttle ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_during_a_throttle_arrives_within_retry_for() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("slow");
    let throttle = Duration::from_secs(12);
    let until = Instant::now() + throttle;
    let (proxy, throttled) = throttling_proxy(&moto.endpoint, until).await;
    let mut s3 = s3_settings(&format!("http://{}", proxy.addr), "slow", "");
    s3.retry_for = Duration::from_secs(60);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.bin");
    let bytes = b"a backup made while S3 throttles".repeat(100);
    std::fs::write(&path, &bytes).unwrap();
    let bucket = Bucket::new(&s3, None).unwrap();
    let sent = bucket
        .upload(&path, "during-throttle.bin")
        .await
        .expect("uploaded once the throttle ended");
    assert_eq!(sent, Some(bytes.len() as u64));
    assert!(Instant::now() >= until, "arrived during the throttle");
    let tries = throttled.load(std::sync::atomic::Ordering::Relaxed);
    assert!(tries >= 2, "throttled {tries} times");
    let direct = Bucket::new(&moto.settings("slow", ""), None).unwrap();
    let back = dir.path().join("back.bin");
    let mut file = std::fs::File::create(&back).unwrap();
    direct
        .download("during-throttle.bin", &mut file)
        .await
        .unwrap();
    assert!(std::fs::read(&back).unwrap() == bytes);
}

/// What [`proxy`] does with a request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Passed to moto, and its answer back.
    Passed,
    /// Answered `500 InternalError`, as S3 answers a failure of its own.
    Refused,
    /// Passed to moto, and its answer dropped with the connection, as a network that fails
    /// after the request arrived.
    AnswerLost,
}

/// In front of moto, a request a connection: each one's [`Fate`] is what `fate` says.
async fn proxy(
    moto: &str,
    fate: impl Fn(&crate::support::loopback::Incoming) -> Fate + Clone + Send + Sync + 'static,
) -> crate::support::loopback::Listening {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let moto = moto.trim_start_matches("http://").to_owned();
    crate::support::loopback::listen(move |mut stream| {
        let (moto, fate) = (moto.clone(), fate.clone());
        async move {
            let mut buf = Vec::new();
            let Some(request) = crate::support::loopback::read_request(&mut stream, &mut buf).await
            else {
                return;
            };
            let fate = fate(&request);
            if fate == Fate::Refused {
                let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\
                            InternalError</Code><Message>We encountered an internal error. \
                            Please try again.</Message></Error>";
                let answer = format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                return;
            }
            let Ok(mut upstream) = tokio::net::TcpStream::connect(&moto).await else {
                return;
            };
            let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.target);
            for (name, value) in request.headers.iter().filter(|(n, _)| n != "connection") {
                head.push_str(name);
                head.push_str(": ");
                head.push_str(value);
                head.push_str("\r\n");
            }
            head.push_str("connection: close\r\n\r\n");
            let mut sent = head.into_bytes();
            sent.extend_from_slice(&request.body);
            let mut answer = Vec::new();
            if upstream.write_all(&sent).await.is_ok()
                && upstream.read_to_end(&mut answer).await.is_ok()
                && fate == Fate::Passed
            {
                let _ = stream.write_all(&answer).await;
            }
        }
    })
    .await
}

/// A multipart upload whose last part fails (after the retries) is aborted at the store: no
/// parts are left to be billed, and no object is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multipart_upload_whose_last_part_fails_leaves_no_parts() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("parts");
    let proxy = proxy(&moto.endpoint, |r| {
        if r.method == "PUT" && r.target.contains("partNumber=3") {
            Fate::Refused
        } else {
            Fate::Passed
        }
    })
    .await;
    let mut s3 = s3_settings(&format!("http://{}", proxy.addr), "parts", "");
    s3.retry_for = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("three-parts.bin");
    std::fs::write(&path, vec![7_u8; 2 * tracker::s3::PART_BYTES + 12_345]).unwrap();
    let failed = Bucket::new(&s3, None)
        .unwrap()
        .upload(&path, "three-parts.bin")
        .await
        .unwrap_err();
    assert!(
        failed.0.contains("s3://parts/three-parts.bin"),
        "{failed:?}"
    );
    // ListMultipartUploads: the uploads begun and neither completed nor aborted.
    let listing = moto.ask("GET", "/parts?uploads");
    assert!(
        listing.contains("ListMultipartUploadsResult") && !listing.contains("<Upload>"),
        "{listing}"
    );
    let direct = Bucket::new(&moto.settings("parts", ""), None).unwrap();
    assert!(!direct.exists("three-parts.bin").await.unwrap());
}

/// `[backup_s3]` with plain `http://` to another machine is refused unless `allow_http` says it
/// is meant (backups hold password hashes and platform tokens); to a loopback address it is
/// taken. A `secret_access_key_file` other users may read is warned about, as the data file is.
#[test]
fn plain_http_to_another_machine_and_a_readable_secret_file_are_not_taken_silently() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let secret = dir.path().join("s3-secret");
    std::fs::write(&secret, format!("{SECRET_KEY}\n")).unwrap();
    let run = |endpoint: &str, extra: &str| {
        let config = dir.path().join("s3.toml");
        std::fs::write(
            &config,
            format!(
                "[backup_s3]\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\nbucket = \
                 \"bk1\"\naccess_key_id = \"testing\"\nsecret_access_key_file = \"{}\"\n{extra}",
                secret.display()
            ),
        )
        .unwrap();
        Command::new(env!("CARGO_BIN_EXE_tracker"))
            .arg("--config")
            .arg(&config)
            .arg("--data")
            .arg(&data)
            .args(["space", "list"])
            .env_remove("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY")
            .env("TRACKER_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run tracker")
    };
    let config_error = |out: &std::process::Output| out.status.code() == Some(2);
    let refused = run("http://s3.example.com", "");
    assert!(config_error(&refused), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("allow_http"),
        "{refused:?}"
    );
    for taken in [
        run("http://s3.example.com", "allow_http = true\n"),
        run("http://127.0.0.1:9000", ""),
        run("http://localhost:9000", ""),
        run("http://[::1]:9000", ""),
        run("https://s3.example.com", ""),
    ] {
        assert!(!config_error(&taken), "{taken:?}");
    }
    let readable = "can be read by other users";
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let private = run("https://s3.example.com", "");
    assert!(!String::from_utf8_lossy(&private.stderr).contains(readable));
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
    let shared = run("https://s3.example.com", "");
    assert!(
        String::from_utf8_lossy(&shared.stderr).contains(readable),
        "{shared:?}"
    );
}

/// Keys directly under the prefix that the client cannot read (`..`, an empty folder, a control
/// character), put there by someone else: the listing of the schedule's backups still answers,
/// so the rotation goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_keys_under_the_prefix_do_not_stop_the_listing() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("odd");
    let s3 = moto.settings("odd", "tracker/");
    let backup = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(backup.path(), "a backup").unwrap();
    let key = format!("tracker/{}", backup_name(NOW_MS));
    let bucket = Bucket::new(&s3, None).unwrap();
    bucket.upload(backup.path(), &key).await.unwrap();
    for odd in [
        "/odd/tracker//x",
        "/odd/tracker/%2E%2E",
        "/odd/tracker/a%01b",
    ] {
        moto.ask("PUT", odd);
    }
    assert_eq!(uploaded(&s3).await, [key]);
}

/// An S3 error whose text holds a line end and a terminal's escape sequence (remote text, as
/// the service's `<Message>` is) is logged escaped, as a delivery's error is: no forged second
/// line, no escape reaching a terminal. The stand-in answers every request as S3 refuses one
/// (<https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html>: "`<Error>
/// <Code>NoSuchKey</Code> <Message>The resource you requested does not exist</Message> ...
/// </Error>`", with the HTTP status of the error, here `403 AccessDenied`).
#[test]
fn remote_text_in_an_s3_error_is_logged_escaped() {
    use tokio::io::AsyncWriteExt as _;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stand_in = runtime.block_on(crate::support::loopback::listen(|mut stream| async move {
        let mut buf = Vec::new();
        while crate::support::loopback::read_request(&mut stream, &mut buf)
            .await
            .is_some()
        {
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code>\
                        <Message>denied\n2026-01-01T00:00:00Z ERROR forged line\u{1b}[2J</Message>\
                        </Error>";
            let answer = format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    }));
    let endpoint = format!("http://{}", stand_in.addr);
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_BACKUP_S3_ENDPOINT", &endpoint),
            ("TRACKER_BACKUP_S3_REGION", "us-east-1"),
            ("TRACKER_BACKUP_S3_BUCKET", "denied"),
            ("TRACKER_BACKUP_S3_ACCESS_KEY_ID", "testing"),
            ("TRACKER_BACKUP_S3_RETRY_FOR", "1s"),
            ("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY", SECRET_KEY),
        ],
    );
    let log = process.log_when(|l| l.contains("uploading a scheduled backup failed"));
    assert!(
        log.contains("forged line"),
        "the remote text is there: {log}"
    );
    assert!(!log.contains('\u{1b}'), "{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01T00:00:00Z")),
        "a forged line: {log}"
    );
    crate::support::stop_cleanly(process);
}

/// With the S3 endpoint down and `retry_for` long, SIGTERM still stops the server within
/// seconds (the upload retrying on its thread is cut off), and the retries leave no line each.
#[test]
fn sigterm_stops_within_seconds_while_an_upload_retries() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_BACKUP_S3_ENDPOINT", &endpoint),
            ("TRACKER_BACKUP_S3_REGION", "us-east-1"),
            ("TRACKER_BACKUP_S3_BUCKET", "nowhere"),
            ("TRACKER_BACKUP_S3_ACCESS_KEY_ID", "testing"),
            ("TRACKER_BACKUP_S3_RETRY_FOR", "5m"),
            ("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY", SECRET_KEY),
        ],
    );
    let _ = process.log_when(|l| l.contains("automatic backups on"));
    // Into the upload's retries.
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    let log_before = process.stderr();
    let status = process.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(8),
        "stopped after {:?}",
        asked.elapsed()
    );
    assert!(
        !log_before.contains("object_store"),
        "a line per retry:\n{log_before}"
    );
}

/// With `backup_dir`, an upload cut short (the process killed while the endpoint refused it)
/// is sent at the next start, once the endpoint takes it: the backup arrives in the bucket
/// under its own name, and its mark of an upload begun is gone.
#[test]
fn an_upload_cut_short_by_a_kill_is_sent_at_the_next_start() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("resumed");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let backups = dir.path().join("backups");
    let env = |endpoint: &str| {
        [
            ("TRACKER_BACKUP_DIR", backups.to_str().unwrap().to_owned()),
            ("TRACKER_BACKUP_S3_ENDPOINT", endpoint.to_owned()),
            ("TRACKER_BACKUP_S3_REGION", "us-east-1".to_owned()),
            ("TRACKER_BACKUP_S3_BUCKET", "resumed".to_owned()),
            ("TRACKER_BACKUP_S3_PREFIX", "tracker/".to_owned()),
            ("TRACKER_BACKUP_S3_ACCESS_KEY_ID", "testing".to_owned()),
            ("TRACKER_BACKUP_S3_RETRY_FOR", "5m".to_owned()),
            ("TRACKER_BACKUP_S3_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
        ]
    };
    let start = |endpoint: &str| {
        let env = env(endpoint);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        TrackerProcess::start_with_env(dir.path(), &pairs)
    };
    let marks = || -> Vec<String> {
        std::fs::read_dir(&backups).map_or_else(
            |_| Vec::new(),
            |d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".to-upload"))
                    .collect()
            },
        )
    };
    let process = start(&down);
    let deadline = Instant::now() + Duration::from_secs(20);
    while marks().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no upload begun:\n{}",
            process.stderr()
        );
        // Waiting for the server's first backup; not a time rule of the tracker.
        std::thread::sleep(Duration::from_millis(50));
    }
    let name = marks()[0]
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".to-upload"))
        .unwrap()
        .to_owned();
    assert!(backup_time(&name).is_some(), "{name}");
    process.kill_hard();
    assert_eq!(marks().len(), 1, "the mark outlives the kill");

    let process = start(&moto.endpoint);
    let s3 = moto.settings("resumed", "tracker/");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let key = format!("tracker/{name}");
    let keys = runtime.block_on(uploaded_when(&s3, |keys| keys.contains(&key)));
    assert_eq!(
        keys,
        [key],
        "only the backup cut short: the next is a day away"
    );
    let log = process.log_when(|l| l.contains("scheduled backup uploaded"));
    assert!(
        log.contains("whose upload a stopped process cut short"),
        "{log}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marks().is_empty() {
        assert!(Instant::now() < deadline, "the mark stays: {:?}", marks());
        // Waiting for the server to delete the mark after the upload.
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::support::stop_cleanly(process);
}

/// An upload never replaces an object (S3's `If-None-Match: *`, which moto honours as S3
/// does): a file of one part and one sent in parts (just past a part) are each refused at a
/// key already taken, the object there is left byte for byte, and no staging copy of the parts
/// is left in the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_never_replaces_an_object_whether_one_request_or_parts() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("taken");
    let s3 = moto.settings("taken", "");
    let bucket = Bucket::new(&s3, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (key, size) in [
        ("one.bin", tracker::s3::PART_BYTES),
        ("parts.bin", tracker::s3::PART_BYTES + 1),
    ] {
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::write(&first, vec![1_u8; size]).unwrap();
        std::fs::write(&second, vec![2_u8; size]).unwrap();
        assert_eq!(bucket.upload(&first, key).await.unwrap(), Some(size as u64));
        assert_eq!(bucket.upload(&second, key).await.unwrap(), None, "{key}");
        let back = dir.path().join("back");
        let mut file = std::fs::File::create(&back).unwrap();
        bucket.download(key, &mut file).await.unwrap();
        assert!(
            std::fs::read(&back).unwrap() == vec![1_u8; size],
            "{key} replaced"
        );
    }
    let listing = moto.ask("GET", "/taken");
    assert!(!listing.contains("staging"), "{listing}");
    let uploads = moto.ask("GET", "/taken?uploads");
    assert!(!uploads.contains("<Upload>"), "{uploads}");
}

/// The answer to an upload's `PUT` (one request) or to its copy into place (parts) is lost after
/// S3 wrote the object: the request is tried again and refused, since the key is now taken, yet
/// the object is the file's own bytes, so the upload reads as arrived. Another file's object
/// under the key still reads as taken. (moto answers a completion tried again as it answered the
/// first, so the parts case passes there even without the comparison; S3 may not.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_whose_answer_was_lost_reads_as_arrived() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("lossy");
    let lost_once = Arc::new(AtomicBool::new(false));
    let lost = lost_once.clone();
    let proxy = proxy(&moto.endpoint, move |r| {
        // The single PUT, or the completion (a POST) of the copy into place of a staged upload,
        // made by parts copied from the staging key.
        let completes = r.method == "POST" && r.target.contains("uploadId");
        let writes_the_key = !r.target.contains("staging")
            && ((r.method == "PUT" && !r.target.contains("uploadId")) || completes);
        if writes_the_key && !lost.swap(true, Ordering::SeqCst) {
            Fate::AnswerLost
        } else {
            Fate::Passed
        }
    })
    .await;
    let bucket = Bucket::new(
        &s3_settings(&format!("http://{}", proxy.addr), "lossy", ""),
        None,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (key, size) in [
        ("one.bin", tracker::s3::PART_BYTES),
        ("parts.bin", tracker::s3::PART_BYTES + 1),
    ] {
        lost_once.store(false, Ordering::SeqCst);
        let path = dir.path().join(key);
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            bucket.upload(&path, key).await.unwrap(),
            Some(size as u64),
            "{key}"
        );
        assert!(
            lost_once.load(Ordering::SeqCst),
            "{key}: no answer was lost"
        );
        // The same size, one byte other: taken by something else.
        let other = dir.path().join("other");
        let mut changed = bytes.clone();
        changed[size / 2] ^= 1;
        std::fs::write(&other, &changed).unwrap();
        assert_eq!(bucket.upload(&other, key).await.unwrap(), None, "{key}");
    }
}
