//! Credential lifecycle (`docs/api.md#authentication`): rotation with grace and revocation while the server runs,
//! racing admin commands, the control socket's protection, and no credential in logs or on disk.
//!
//! The server runs in-process with a manual clock; admin commands go through the real `tracker`
//! binary, which reaches the server over its control socket, so rotation times come from the
//! server's clock and grace expiry is tested by moving it, not by sleeping.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::support::assert_succeeded;
use serde_json::Value;
use tracker::app::App;
use tracker::clock::{Clock, ManualClock};
use tracker::config::Settings;
use tracker::storage::{Store, StoreOptions};

const START_MS: u64 = 1_800_000_000_000;
const GRACE_MS: u64 = 60_000;

/// An in-process server on port 0 with a manual clock, stopped on drop.
struct Server {
    addr: SocketAddr,
    data: PathBuf,
    clock: ManualClock,
    secret: String,
    token: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("t.redb");
        let clock = ManualClock::new(START_MS);
        let (store, _) = Store::open(&data, &StoreOptions::default()).unwrap();
        let store = Arc::new(store);
        let created = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(crate::support::app_on(&store, clock.now_ms()).create_space("default"))
            .unwrap();
        let mut settings = Settings::with_data(data.clone());
        settings.rotation_grace = Duration::from_millis(GRACE_MS);
        let app = Arc::new(App::new(settings, store, Arc::new(clock.clone())));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tracker::server::serve(app, listener, async {
                    let _ = rx.await;
                })
                .await
                .expect("a clean stop");
            });
        });
        let server = Server {
            addr,
            data,
            clock,
            secret: created.secret,
            token: created.ingest_token,
            shutdown: Some(tx),
            thread: Some(thread),
            _dir: dir,
        };
        // The control socket is created when serving starts.
        for _ in 0..200 {
            if tracker::control::socket_path(&server.data).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }

    /// `GET /e` with `token`: the HTTP status.
    fn get_e(&self, token: &str) -> u16 {
        self.request(&format!(
            "GET /e?token={token}&event=contact HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ))
        .0
    }

    /// `POST /events` with `secret` as bearer: the HTTP status.
    fn post_event(&self, secret: &str) -> u16 {
        let body = r#"{"event":"contact"}"#;
        self.request(&format!(
            "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
        .0
    }

    fn request(&self, raw: &str) -> (u16, String) {
        http(self.addr, raw)
    }

    /// Runs the `tracker` binary against this server's data file.
    fn cli(&self, args: &[&str]) -> Value {
        let out = cli(&self.data, args);
        assert!(
            out.status.success(),
            "tracker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn http(addr: SocketAddr, raw: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// `tracker --config <empty> --data <data> --json ARGS`.
fn cli(data: &Path, args: &[&str]) -> Output {
    let config = data.with_extension("toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(data)
        .arg("--json")
        .args(args)
        .env("TRACKER_LOG_LEVEL", "warn")
        .output()
        .unwrap()
}

fn rotate(server: &Server, kind: &str) -> (String, Option<u64>) {
    let v = server.cli(&["keys", "rotate", "default", "--kind", kind]);
    (
        v["credential"].as_str().unwrap().to_owned(),
        v["previous_valid_until_ms"].as_u64(),
    )
}

#[test]
fn rotated_secret_works_at_once_and_the_old_one_until_its_grace_ends() {
    let server = Server::start();
    let old = server.secret.clone();
    let (new, until) = rotate(&server, "secret");
    assert!(new.starts_with("trk_sk_") && new != old);
    assert_eq!(until, Some(START_MS + GRACE_MS));
    assert_eq!(server.post_event(&new), 200, "the new secret works at once");
    assert_eq!(
        server.post_event(&old),
        200,
        "the old one works inside the grace"
    );
    server.clock.advance(GRACE_MS - 1);
    assert_eq!(server.post_event(&old), 200, "1 ms before the deadline");
    server.clock.advance(1);
    assert_eq!(server.post_event(&old), 401, "refused at the deadline");
    assert_eq!(server.post_event(&new), 200);
}

#[test]
fn rotated_ingest_token_has_the_same_grace() {
    let server = Server::start();
    let old = server.token.clone();
    let (new, until) = rotate(&server, "ingest");
    assert!(new.starts_with("trk_it_"));
    assert_eq!(until, Some(START_MS + GRACE_MS));
    assert_eq!((server.get_e(&new), server.get_e(&old)), (200, 200));
    server.clock.advance(GRACE_MS);
    assert_eq!((server.get_e(&new), server.get_e(&old)), (200, 401));
    // The secret was not touched by rotating the ingest token.
    assert_eq!(server.post_event(&server.secret), 200);
}

#[test]
fn two_rotations_inside_one_grace_keep_their_own_deadlines() {
    let server = Server::start();
    let first = server.secret.clone();
    let (second, _) = rotate(&server, "secret");
    server.clock.advance(10_000);
    let (third, until) = rotate(&server, "secret");
    assert_eq!(until, Some(START_MS + 10_000 + GRACE_MS));
    for s in [&first, &second, &third] {
        assert_eq!(server.post_event(s), 200);
    }
    server.clock.set(START_MS + GRACE_MS);
    assert_eq!(
        server.post_event(&first),
        401,
        "first ends one grace after the first rotation"
    );
    assert_eq!(
        server.post_event(&second),
        200,
        "second ends one grace after the second"
    );
    server.clock.set(START_MS + 10_000 + GRACE_MS);
    assert_eq!(server.post_event(&second), 401);
    assert_eq!(server.post_event(&third), 200);
}

#[test]
fn revocation_refuses_at_once_including_a_credential_in_grace() {
    let server = Server::start();
    let old = server.secret.clone();
    let (new, _) = rotate(&server, "secret");
    let v = server.cli(&["keys", "revoke", "default", "--kind", "secret"]);
    assert_eq!(v["revoked"], 2);
    assert_eq!(
        (server.post_event(&new), server.post_event(&old)),
        (401, 401)
    );
    assert_eq!(
        server.get_e(&server.token),
        200,
        "the ingest token is another kind"
    );
    let (newest, until) = rotate(&server, "secret");
    assert_eq!(until, None, "nothing was active, so nothing is in grace");
    assert_eq!(server.post_event(&newest), 200);
}

fn active_per_kind(list: &Value) -> (usize, usize) {
    let creds = list[0]["credentials"].as_array().unwrap();
    let active = |kind: &str| {
        creds
            .iter()
            .filter(|c| {
                c["kind"] == kind && c["valid_until_ms"].is_null() && c["revoked_at_ms"].is_null()
            })
            .count()
    };
    (active("secret"), active("ingest"))
}

/// Runs one `keys rotate` per kind in `kinds`, all at once, against `data`; each must succeed.
fn race_rotations(data: &Path, kinds: &[&'static str]) {
    let racers: Vec<_> = kinds
        .iter()
        .map(|&kind| {
            let data = data.to_owned();
            std::thread::spawn(move || cli(&data, &["keys", "rotate", "default", "--kind", kind]))
        })
        .collect();
    for r in racers {
        let out = r.join().unwrap();
        assert_succeeded(&out);
    }
}

#[test]
fn racing_rotations_through_the_server_leave_one_active_credential_per_kind() {
    let server = Server::start();
    race_rotations(&server.data, &["secret", "ingest", "secret", "ingest"]);
    let list = server.cli(&["space", "list"]);
    assert_eq!(active_per_kind(&list), (1, 1), "{list}");
    assert_eq!(list[0]["credentials"].as_array().unwrap().len(), 6);
}

#[test]
fn racing_rotations_without_a_server_leave_one_active_credential_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let out = cli(&data, &["init"]);
    assert_succeeded(&out);
    race_rotations(&data, &["secret"; 4]);
    let out = cli(&data, &["space", "list"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(active_per_kind(&list), (1, 1), "{list}");
}

#[test]
fn space_list_shows_prefixes_and_last_use_but_never_a_credential() {
    let server = Server::start();
    assert_eq!(server.post_event(&server.secret), 200);
    let (new, _) = rotate(&server, "secret");
    let list = server.cli(&["space", "list"]);
    let text = list.to_string();
    for c in [&server.secret, &server.token, &new] {
        assert!(
            !text.contains(&c[11..]),
            "space list shows a credential: {text}"
        );
    }
    let creds = list[0]["credentials"].as_array().unwrap();
    let old = creds
        .iter()
        .find(|c| c["prefix"] == server.secret[..11])
        .unwrap();
    assert_eq!(old["last_used_ms"], START_MS);
    assert_eq!(old["valid_until_ms"], START_MS + GRACE_MS);
}

#[test]
fn the_control_socket_is_private_to_the_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let server = Server::start();
    let socket = tracker::control::socket_path(&server.data);
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), std::fs::metadata("/proc/self").unwrap().uid());

    // Another user, where we can become one: let it reach the directory, then try the socket.
    let setpriv = Path::new("/usr/bin/setpriv");
    let is_root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    if !(is_root && setpriv.exists()) {
        eprintln!("skipping the other-user half: needs root and setpriv");
        return;
    }
    let dir = server.data.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg("/dev/null")
        .arg("--data")
        .arg(&server.data)
        .args(["space", "create", "intruder"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "another user reached the control socket"
    );
    let list = server.cli(&["space", "list"]);
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "nothing was created: {list}"
    );
}

/// Runs the real binary with every log level on, sends every kind of credential (valid, wrong
/// kind, in the URL, rotated, malformed), and checks the log and the data file hold none of them.
#[test]
fn no_credential_reaches_the_log_or_the_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let config = dir.path().join("empty.toml");
    std::fs::write(&config, "").unwrap();
    let log = dir.path().join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(&data)
        .args(["--json", "serve", "--listen", "127.0.0.1:0"])
        .env("TRACKER_LOG_LEVEL", "trace")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let created: Value = serde_json::from_str(&line).unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap();
    let addr: SocketAddr = listening["listening"].as_str().unwrap().parse().unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    let token = created["ingest_token"].as_str().unwrap().to_owned();

    let post = |auth: &str| {
        let body = r#"{"event":"deposit","uid":"u1","value":"1"}"#;
        http(
            addr,
            &format!(
                "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            ),
        )
        .0
    };
    let get = |query: &str| {
        http(
            addr,
            &format!("GET /e?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
        .0
    };
    assert_eq!(post(&format!("Bearer {secret}")), 200);
    assert_eq!(post(&format!("Bearer {token}")), 401);
    assert_eq!(post("Bearer trk_sk_notarealsecretatall00000000"), 401);
    assert_eq!(get(&format!("token={token}&event=contact&uid=u1")), 200);
    assert_eq!(get(&format!("token={secret}&event=contact")), 401);
    assert_eq!(get(&format!("event=nope&token={token}")), 422);
    let rotated = cli(&data, &["keys", "rotate", "default", "--kind", "secret"]);
    assert!(rotated.status.success());
    let new_secret = serde_json::from_slice::<Value>(&rotated.stdout).unwrap()["credential"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(post(&format!("Bearer {new_secret}")), 200);

    let term = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(term.success());
    assert!(child.wait().unwrap().success(), "clean exit on SIGTERM");

    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("/events"), "the access log was captured");
    let on_disk = std::fs::read(&data).unwrap();
    for credential in [&secret, &token, &new_secret] {
        let hidden = &credential[11..];
        assert!(!logged.contains(hidden), "a credential reached the log");
        assert!(
            !on_disk
                .windows(hidden.len())
                .any(|w| w == hidden.as_bytes()),
            "a credential is stored in the data file"
        );
    }
}

/// A space name that is taken is `409 conflict` naming the field, and changes nothing: the
/// space keeps its credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_space_name_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&dir.path().join("t.redb"), &StoreOptions::default()).unwrap();
    let app = crate::support::app_on(&Arc::new(store), START_MS);
    let first = app.create_space("shop").await.unwrap();
    let again = app.create_space("shop").await.unwrap_err();
    assert_eq!(again.code, tracker::error::Code::Conflict, "{again:?}");
    assert_eq!(again.field, Some("space"));
    assert!(
        again.message.contains("already exists"),
        "{}",
        again.message
    );
    let spaces = app.spaces().await.unwrap();
    assert_eq!(spaces.len(), 1);
    let prefixes: Vec<&str> = spaces[0]
        .credentials
        .iter()
        .map(|c| c.prefix.as_str())
        .collect();
    assert!(
        prefixes.iter().any(|p| first.secret.starts_with(p)),
        "{prefixes:?}"
    );
    app.store.close();
}
