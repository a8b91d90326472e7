//! `tracker serve --ephemeral` (`docs/api.md#command-line`): the data in memory only, the `default`
//! space's credentials from `TRACKER_DEV_SECRET` / `TRACKER_DEV_INGEST_TOKEN`, for test suites.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::support::{Request, assert_queued, assert_succeeded, send};

/// A credential pair the tracker made, from a scratch data file elsewhere.
fn known_credentials() -> (String, String) {
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tracker"))
        .args(["--config", "/dev/null", "--json", "--data"])
        .arg(scratch.path().join("s.redb"))
        .arg("init")
        .output()
        .unwrap();
    assert_succeeded(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["secret"].as_str().unwrap().to_owned(),
        v["ingest_token"].as_str().unwrap().to_owned(),
    )
}

/// Starts an ephemeral server in `dir` (its working directory) and reads its ready line.
fn start(dir: &std::path::Path, secret: &str, token: &str) -> (Child, SocketAddr, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracker"))
        .args(["--config", "/dev/null", "--json", "--data"])
        // Where a data file and its socket would go, if anything were written.
        .arg(dir.join("t.redb"))
        .args(["serve", "--ephemeral", "--listen", "127.0.0.1:0"])
        .env("TRACKER_DEV_SECRET", secret)
        .env("TRACKER_DEV_INGEST_TOKEN", token)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a ready line").unwrap();
    let ready: Value = serde_json::from_str(&first).unwrap();
    let addr = ready["listening"]
        .as_str()
        .expect("the address")
        .parse()
        .unwrap();
    (child, addr, vec![first])
}

fn stop(mut child: Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_server_takes_known_keys_writes_no_file_and_forgets_at_exit() {
    let (secret, token) = known_credentials();
    let dir = tempfile::tempdir().unwrap();
    let (child, addr, printed) = start(dir.path(), &secret, &token);
    assert_eq!(printed.len(), 1, "one machine-readable line: {printed:?}");
    assert!(
        !printed[0].contains(&secret),
        "known keys are not printed again"
    );
    let r = send(
        addr,
        &Request::post("/events", Some(&secret), r#"{"event":"contact"}"#),
    )
    .await;
    assert_queued(&r);
    let r = send(
        addr,
        &Request::get(&format!("/e?token={token}&event=deposit&value=5")),
    )
    .await;
    assert_queued(&r);
    let feed = send(
        addr,
        &Request::get("/events").header("Authorization", format!("Bearer {secret}")),
    )
    .await
    .json();
    assert_eq!(feed["events"].as_array().unwrap().len(), 2, "{feed}");
    stop(child);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "an ephemeral server writes no file: {left:?}"
    );

    let (child, addr, _) = start(dir.path(), &secret, &token);
    let feed = send(
        addr,
        &Request::get("/events").header("Authorization", format!("Bearer {secret}")),
    )
    .await
    .json();
    assert_eq!(
        feed["events"].as_array().unwrap().len(),
        0,
        "everything was lost at exit"
    );
    stop(child);
}

#[test]
fn malformed_known_keys_are_refused_loudly() {
    let (secret, token) = known_credentials();
    let mut typo = secret.clone();
    typo.pop();
    typo.push(if secret.ends_with('A') { 'B' } else { 'A' });
    for (s, t, says) in [
        (typo.as_str(), token.as_str(), "TRACKER_DEV_SECRET"),
        (secret.as_str(), secret.as_str(), "TRACKER_DEV_INGEST_TOKEN"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tracker"))
            .args(["--config", "/dev/null", "serve", "--ephemeral"])
            .args(["--listen", "127.0.0.1:0"])
            .env("TRACKER_DEV_SECRET", s)
            .env("TRACKER_DEV_INGEST_TOKEN", t)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(says), "{stderr}");
    }
}
