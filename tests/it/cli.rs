//! The `tracker` binary's own promises: configuration errors stop it before anything is opened,
//! a data file from a newer release is refused untouched, and `default-config` is the example.

use crate::support::assert_succeeded;
use std::io::Write as _;
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
    let out = tracker(dir.path(), "", &["init"]);
    assert_succeeded(&out);
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
        &["check"][..],
        &["check", "--repair"][..],
        &["compact"][..],
        &["backup", "copy.redb"][..],
    ] {
        let out = tracker(dir.path(), "", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must refuse the file");
        assert!(stderr.contains("newer"), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read(&data).unwrap(),
            before,
            "{args:?} touched the file"
        );
        assert!(!dir.path().join("copy.redb").exists(), "{args:?}");
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

fn bare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tracker"))
        .args(args)
        .output()
        .unwrap()
}

/// `--version` names the release and the commit the binary was built from, the one `git`
/// says this checkout is at.
#[test]
fn version_names_the_release_and_the_commit() {
    let out = bare(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8(o.stdout).unwrap().trim().to_owned(),
        );
    assert_eq!(
        text.trim(),
        format!("tracker {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
}

/// The bash completion script completes subcommands in a real bash, and the zsh and fish
/// scripts are those shells' formats.
#[test]
fn completions_complete_subcommands_in_bash() {
    let script = String::from_utf8(bare(&["completions", "bash"]).stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tracker.bash");
    std::fs::write(&path, &script).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(tracker ex); COMP_CWORD=1; COMP_LINE='tracker ex'; \
             COMP_POINT=10; _tracker tracker ex tracker; echo \"${{COMPREPLY[@]}}\"",
            path.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "export",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let zsh = String::from_utf8(bare(&["completions", "zsh"]).stdout).unwrap();
    assert!(zsh.starts_with("#compdef tracker"), "{zsh:.200}");
    let fish = String::from_utf8(bare(&["completions", "fish"]).stdout).unwrap();
    assert!(fish.contains("complete -c tracker"), "{fish:.200}");
    let out = bare(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

/// `tracker man` is a manual page `groff` renders, naming every subcommand.
#[test]
fn the_manual_page_renders_and_lists_the_commands() {
    let out = bare(&["man"]);
    assert!(out.status.success());
    let roff = String::from_utf8(out.stdout).unwrap();
    assert!(roff.contains(".TH tracker 1"), "{roff:.300}");
    let mut groff = match Command::new("groff")
        .args(["-man", "-Tutf8"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "groff is needed to check the manual page: {e}"
            );
            eprintln!("SKIPPED rendering the manual page: groff not found ({e})");
            return;
        }
    };
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(roff.as_bytes())
        .unwrap();
    let page = groff.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&page.stdout);
    for command in [
        "serve",
        "space",
        "keys",
        "link",
        "backup",
        "export",
        "completions",
    ] {
        assert!(text.contains(command), "{command} missing from:\n{text}");
    }
}
