//! The `tracker` binary's own promises: configuration errors stop it before anything is opened,
//! a data file from a newer release is refused untouched, and `default-config` is the example.

use std::process::{Command, Output};

fn tracker(dir: &std::path::Path, config: &str, args: &[&str]) -> Output {
    let config_path = dir.join("tracker.toml");
    std::fs::write(&config_path, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config_path)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_config_error_names_the_key_and_opens_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (config, key) in [
        ("dedup_windw = \"1h\"\n", "dedup_windw"),
        ("max_event_age = \"forever\"\n", "max_event_age"),
        ("rate_limit = \"fast\"\n", "rate_limit"),
    ] {
        let out = tracker(dir.path(), config, &["serve", "--listen", "127.0.0.1:0"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(key), "the error names {key}: {stderr}");
        assert!(
            !dir.path().join("tracker.redb").exists(),
            "no data file was created"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tracker"))
        .args(["--config", "/nonexistent/tracker.toml", "space", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_data_file_from_a_newer_release_is_refused_untouched() {
    use redb::ReadableDatabase as _;
    let dir = tempfile::tempdir().unwrap();
    let out = tracker(dir.path(), "", &["space", "create", "default"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = dir.path().join("tracker.redb");
    {
        let db = redb::Database::open(&data).unwrap();
        let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
        let version = db
            .begin_read()
            .unwrap()
            .open_table(meta)
            .unwrap()
            .get("schema_version")
            .unwrap()
            .unwrap()
            .value();
        assert_eq!(version, tracker::storage::schema::SCHEMA_VERSION);
        let txn = db.begin_write().unwrap();
        txn.open_table(meta)
            .unwrap()
            .insert("schema_version", version + 1)
            .unwrap();
        txn.commit().unwrap();
    }
    let before = std::fs::read(&data).unwrap();
    for args in [
        &["space", "list"][..],
        &["serve", "--listen", "127.0.0.1:0"][..],
    ] {
        let out = tracker(dir.path(), "", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must refuse the file");
        assert!(stderr.contains("newer"), "{stderr}");
        assert_eq!(
            std::fs::read(&data).unwrap(),
            before,
            "the file was touched"
        );
    }
}

#[test]
fn default_config_prints_the_commented_example() {
    let out = Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("default-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, tracker::config::EXAMPLE);
    assert!(
        text.parse::<toml::Table>()
            .unwrap()
            .contains_key("rotation_grace")
    );
}

#[test]
fn first_start_prints_the_credentials_once_with_a_curl_line() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tracker.toml");
    std::fs::write(&config, "").unwrap();
    let start = || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tracker"))
            .arg("--config")
            .arg(&config)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut printed = String::new();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            printed.push_str(&line);
            printed.push('\n');
            if line.starts_with("listening on http://") {
                break;
            }
        }
        let killed = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        assert!(killed.unwrap().success());
        assert!(child.wait().unwrap().success(), "SIGTERM exits 0");
        printed
    };
    let first = start();
    assert!(
        first.contains("trk_sk_") && first.contains("trk_it_"),
        "{first}"
    );
    assert!(
        first.contains("curl -s -X POST http://127.0.0.1:"),
        "{first}"
    );
    let second = start();
    assert!(
        !second.contains("trk_sk_"),
        "credentials are shown only once: {second}"
    );
}
