//! `tracker compact` through the real binary: refused while a server has the file open, saying
//! to stop it; on a stopped server's file it shrinks a file with free space, prints the sizes,
//! and leaves a file that passes `tracker check` and serves what it held.

use std::process::Output;

use redb::ReadableDatabase;
use serde_json::Value;
use tracker::storage::schema::ADMIN;

use crate::support::{
    Request, TrackerProcess, assert_queued, assert_succeeded, first_start, run_cli, send,
    stop_cleanly,
};

fn run_compact(dir: &std::path::Path) -> Output {
    run_cli(dir, &dir.join("t.redb"), ["--json", "compact"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_needs_the_server_stopped_and_then_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let (process, creds) = first_start(dir.path());
    for i in 0..20 {
        let body = format!(r#"{{"event":"deposit","eid":"order-{i}","value":"1"}}"#);
        assert_queued(
            &send(
                process.addr,
                &Request::post("/events", Some(&creds.secret), &body),
            )
            .await,
        );
    }
    let refused = run_compact(dir.path());
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("stop the server"), "{stderr}");
    stop_cleanly(process);

    // Free space: 8 MiB written and deleted again.
    {
        let db = redb::Database::open(&data).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(ADMIN).unwrap();
            let blob = vec![7u8; 64 * 1024];
            for i in 0..128 {
                t.insert(format!("junk-{i}").as_str(), blob.as_slice())
                    .unwrap();
            }
        }
        txn.commit().unwrap();
        // A row after the junk, kept until the compaction: redb trims free pages at the end of
        // the file when it commits, so without it the junk's pages could leave the file before
        // the compaction has anything to do.
        let txn = db.begin_write().unwrap();
        txn.open_table(ADMIN)
            .unwrap()
            .insert("ballast", vec![9u8; 64 * 1024].as_slice())
            .unwrap();
        txn.commit().unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(ADMIN)
            .unwrap()
            .retain(|k, _| !k.starts_with("junk-"))
            .unwrap();
        txn.commit().unwrap();
        assert!(
            db.begin_read()
                .unwrap()
                .open_table(ADMIN)
                .unwrap()
                .get("junk-1")
                .unwrap()
                .is_none()
        );
    }
    let before = data.metadata().unwrap().len();
    assert!(
        before > 8 << 20,
        "the junk's pages are still in the file: {before} bytes"
    );
    let out = run_compact(dir.path());
    assert_succeeded(&out);
    let sizes: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sizes["bytes_before"], before, "{sizes}");
    let after = data.metadata().unwrap().len();
    assert_eq!(sizes["bytes_after"], after, "{sizes}");
    assert!(after < before / 2, "{before} -> {after} bytes");
    {
        let db = redb::Database::open(&data).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(ADMIN).unwrap().remove("ballast").unwrap();
        txn.commit().unwrap();
    }

    let checked = crate::check::run_check(&data, None, false, dir.path());
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let process = TrackerProcess::start(dir.path());
    let again = send(
        process.addr,
        &Request::post(
            "/events",
            Some(&creds.secret),
            r#"{"event":"deposit","eid":"order-3","value":"1"}"#,
        ),
    )
    .await;
    crate::support::assert_duplicate_of(&again, 4);
    stop_cleanly(process);
}
