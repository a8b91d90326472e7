//! `contrib/`: the systemd units pass `systemd-analyze verify` without a warning (an unknown or
//! misspelt hardening key is only a warning, so the test reads what it prints), and the
//! Caddyfile is one Caddy accepts. `.ci/run` installs both; outside CI a missing tool skips.

use crate::support::assert_succeeded;
use std::path::{Path, PathBuf};
use std::process::Command;

fn contrib() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contrib")
}

/// Copies the units to `dir` with `ExecStart` pointing at this build's binary (verify checks
/// that the program exists).
fn units_in(dir: &Path) -> Vec<PathBuf> {
    [
        "tracker.service",
        "tracker-backup.service",
        "tracker-backup.timer",
    ]
    .iter()
    .map(|name| {
        let text = std::fs::read_to_string(contrib().join(name)).unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            text.replace("/usr/local/bin/tracker", env!("CARGO_BIN_EXE_tracker")),
        )
        .unwrap();
        path
    })
    .collect()
}

#[test]
fn the_systemd_units_verify_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let units = units_in(dir.path());
    let out = match Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "systemd-analyze is needed to check contrib/*.service: {e}"
            );
            eprintln!("SKIPPED: systemd-analyze not found ({e}); contrib/ units not verified");
            return;
        }
    };
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    // The check reads a misspelt key: a unit with one must not pass.
    let service = &units[0];
    let text = std::fs::read_to_string(service).unwrap();
    std::fs::write(service, text.replace("NoNewPrivileges=", "NoNewPrivilege=")).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(service)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("NoNewPrivilege"));
}

#[test]
fn the_caddyfile_is_valid_where_caddy_is_installed() {
    let Ok(out) = Command::new("caddy")
        .args(["validate", "--adapter", "caddyfile", "--config"])
        .arg(contrib().join("Caddyfile"))
        .output()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "caddy is needed to check contrib/Caddyfile (.ci/run installs it)"
        );
        eprintln!("SKIPPED: caddy is not installed (apt-get install caddy); Caddyfile not checked");
        return;
    };
    assert_succeeded(&out);
}

/// The VPS guide (docs/vps.md) makes the data file and its admin password before it starts the
/// service: a first start without them prints the keys and a generated password, which under
/// systemd go to the journal. It works on a minimal Debian image, which has no `sudo`; it says
/// what to clone instead of leaving a placeholder; and its data file is an absolute path.
#[test]
fn the_vps_guide_makes_the_password_before_the_service_starts() {
    let guide =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/vps.md"))
            .unwrap();
    let init = guide
        .find("tracker-admin init")
        .expect("the guide makes the data file with `init`");
    let start = guide
        .find("systemctl enable --now tracker")
        .expect("the guide starts the service");
    assert!(init < start, "the guide starts the service before `init`");
    assert!(
        !guide.contains("sudo "),
        "minimal Debian images have no sudo"
    );
    assert!(
        !guide.contains("<this repository>"),
        "a placeholder to guess"
    );
    assert!(
        guide.contains(r#"s|^data = .*|data = "/var/lib/tracker/tracker.redb"|"#),
        "the configuration names the data file by an absolute path"
    );
}

/// The set-up lines in `tracker.service`'s comment, run as written (with /etc/tracker and
/// /var/lib/tracker moved into a temporary directory, and without the steps that need root):
/// the config file names the data file `ExecStart` names, `init` makes it, and the comment's
/// command with only `--config` then reads that file.
#[test]
fn the_service_files_setup_lines_work_as_written() {
    let unit = std::fs::read_to_string(contrib().join("tracker.service")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    std::fs::create_dir_all(dir.path().join("etc/tracker")).unwrap();
    std::fs::create_dir_all(dir.path().join("var/lib/tracker")).unwrap();
    let moved = |line: &str| {
        line.replace("/etc/tracker", &format!("{root}/etc/tracker"))
            .replace("/var/lib/tracker", &format!("{root}/var/lib/tracker"))
    };
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let data = exec
        .split_whitespace()
        .skip_while(|w| *w != "--data")
        .nth(1)
        .expect("ExecStart names --data");
    // Without root, as the caller: `runuser -u tracker --` is what the server needs.
    let commands: Vec<String> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .map(|l| l.trim_start_matches("runuser -u tracker -- "))
        .filter(|l| l.starts_with("tracker "))
        .map(moved)
        .collect();
    assert_eq!(commands.len(), 3, "{commands:?}");
    let mut printed = Vec::new();
    for command in &commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("PATH", path_with_tracker())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        printed.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(
        Path::new(&moved(data)).is_file(),
        "init made ExecStart's data file"
    );
    assert!(
        printed[1].contains("export SECRET=trk_sk_"),
        "{}",
        printed[1]
    );
    assert!(printed[2].contains("default"), "{}", printed[2]);
}

/// `PATH` with this build's `tracker` first.
fn path_with_tracker() -> std::ffi::OsString {
    let bin = Path::new(env!("CARGO_BIN_EXE_tracker")).parent().unwrap();
    let mut dirs = vec![bin.to_owned()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}
