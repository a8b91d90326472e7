//! What the command line writes: control characters that came from outside (a visitor's link,
//! a destination's answer) are printed escaped, never as the terminal commands they are; and
//! `tracker export --out` creates a new file of its owner's alone, never through a link.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::receiver::{Receiver, Reply};
use crate::support::{
    Request, TrackerProcess, assert_queued, assert_succeeded, post_json_status, run_cli, send,
};

fn stdout_of(out: &std::process::Output) -> String {
    assert_succeeded(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `utm_campaign=%1B%5B2J` (ESC [2J, clear the screen) on a link visit: `tracker stats` shows
/// the campaign as `\u{1b}[2J`, with no ESC byte in what it prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_with_an_escape_sequence_is_shown_escaped_by_stats() {
    let dir = tempfile::tempdir().unwrap();
    let mut process = TrackerProcess::start(dir.path());
    let space = process.created.take().expect("first start");
    post_json_status(
        process.addr,
        &space.secret,
        "/links",
        r#"{"slug":"spring","bot":"shop_bot"}"#,
        201,
    )
    .await;
    let r = send(
        process.addr,
        &Request::get("/l/spring?utm_campaign=%1B%5B2J").header(
            "User-Agent",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)",
        ),
    )
    .await;
    assert_eq!(r.status, 302, "{}", r.text());
    let data = dir.path().join("t.redb");
    let text = stdout_of(&run_cli(dir.path(), &data, ["stats", "default"]));
    assert!(text.contains("\\u{1b}[2J"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    crate::support::stop_cleanly(process);
}

/// A destination that answers with an escape sequence in its body: `tracker destination list`
/// shows its last error escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destinations_last_error_is_shown_escaped() {
    let receiver = Receiver::start().await;
    receiver.always(Reply::Status(
        500,
        Vec::new(),
        "down\u{1b}]0;owned\u{7}\u{9b}2J\u{7f}".into(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")],
    );
    let space = process.created.take().expect("first start");
    post_json_status(
        process.addr,
        &space.secret,
        "/destinations",
        &json!({"name": "hook", "kind": "webhook", "url": receiver.url("/hook")}).to_string(),
        201,
    )
    .await;
    let r = send(
        process.addr,
        &Request::post(
            "/events",
            Some(&space.secret),
            r#"{"event":"contact","uid":"u-1"}"#,
        ),
    )
    .await;
    assert_queued(&r);
    receiver.wait_for(1, Duration::from_secs(20)).await;
    let data = dir.path().join("t.redb");
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = stdout_of(&run_cli(
            dir.path(),
            &data,
            ["destination", "list", "default"],
        ));
        if text.contains("last error") {
            break text;
        }
        assert!(Instant::now() < deadline, "{text}");
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        text.contains("down\\u{1b}]0;owned\\u{7}\\u{9b}2J\\u{7f}"),
        "{text}"
    );
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    crate::support::stop_cleanly(process);
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// `tracker export --out FILE`: a new file with mode `0600`; a file already there, or a link
/// (even one to a file that does not exist yet), is refused and left as it was.
#[test]
fn export_creates_a_private_file_and_never_follows_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start(dir.path());
    crate::support::stop_cleanly(process);
    let data = dir.path().join("t.redb");
    let out = dir.path().join("events.ndjson");
    stdout_of(&run_cli(
        dir.path(),
        &data,
        ["export", "default", "--out", out.to_str().unwrap()],
    ));
    assert_eq!(mode_of(&out), 0o600);
    // Already there: refused, untouched.
    std::fs::write(&out, "mine").unwrap();
    let again = run_cli(
        dir.path(),
        &data,
        ["export", "default", "--out", out.to_str().unwrap()],
    );
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
    // A link, to a file and to a name not yet there: refused, nothing written through it.
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "target").unwrap();
    let missing = dir.path().join("missing.txt");
    for (link, to) in [("to-file", &target), ("to-nothing", &missing)] {
        let link = dir.path().join(link);
        std::os::unix::fs::symlink(to, &link).unwrap();
        let r = run_cli(
            dir.path(),
            &data,
            ["export", "default", "--out", link.to_str().unwrap()],
        );
        assert!(!r.status.success(), "{}", link.display());
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "target");
    assert!(!missing.exists());
}
