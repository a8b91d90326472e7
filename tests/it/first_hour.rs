//! A newcomer's first hour with the binary: the first start hands over what the examples need
//! (lines to paste, the admin page), a taken address fails before anything is made, commands
//! other than `serve` refuse a missing data file, and the messages say what to do.

use std::io::BufRead as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::RecvTimeoutError;

use crate::support::{IO_TIMEOUT, rows_in};

/// `tracker --config DIR/tracker.toml ARGS`, in `dir`, with the `TRACKER_*` settings of `env`
/// (and none inherited).
fn tracker(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let config = dir.join("tracker.toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_tracker"));
    command
        .arg("--config")
        .arg(&config)
        .args(args)
        .current_dir(dir);
    for (key, _) in std::env::vars() {
        if key.starts_with("TRACKER_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    command
}

fn run(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    tracker(dir, env, args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A text-mode server started in `dir` on `listen`: what it printed up to its ready lines (or
/// everything, if it exited), and the running child, if it did not exit.
fn start(dir: &Path, env: &[(&str, &str)], listen: &str) -> (String, Option<Child>) {
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut child = tracker(dir, env, &["serve", "--listen", listen])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if send.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut printed = String::new();
    loop {
        match lines.recv_timeout(IO_TIMEOUT) {
            Ok(line) => {
                printed.push_str(&line);
                printed.push('\n');
                if line.starts_with("Admin page: ") {
                    return (printed, Some(child));
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                assert!(!child.wait().unwrap().success(), "{printed}");
                return (printed, None);
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no \"Admin page: \" line; printed:\n{printed}");
            }
        }
    }
}

fn stop(mut child: Child) {
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(killed.unwrap().success());
    assert!(child.wait().unwrap().success(), "SIGTERM exits 0");
}

/// The address of a start's `listening on http://ADDR` line.
fn listening_on(printed: &str) -> &str {
    printed
        .lines()
        .find_map(|l| l.strip_prefix("listening on http://"))
        .unwrap_or_else(|| panic!("the listening line in {printed}"))
}

/// The lines a person pastes: every `export` line and the "Try it" request under it.
fn pasted(printed: &str) -> String {
    let mut lines = printed.lines().map(str::trim);
    let mut script: Vec<&str> = lines.clone().filter(|l| l.starts_with("export ")).collect();
    lines.find(|l| l.starts_with("Try it"));
    script.push(lines.next().expect("a request under \"Try it\""));
    script.join("\n")
}

/// The first start prints `export` lines for the names the examples use, whose request works
/// as printed against the server; every address in it is the one bound (never port 0); a
/// restart prints neither credentials nor password, and still the admin page's address.
#[test]
fn the_first_start_prints_lines_to_paste_and_every_start_the_admin_page() {
    let dir = tempfile::tempdir().unwrap();
    let (first, child) = start(dir.path(), &[], "127.0.0.1:0");
    let child = child.unwrap_or_else(|| panic!("did not start: {first}"));
    let addr = listening_on(&first).to_owned();
    assert!(!addr.ends_with(":0"), "{first}");
    assert!(!first.contains(":0/") && !first.contains(":0 "), "{first}");
    for line in [
        format!("export TRACKER=http://{addr}"),
        "export SECRET=trk_sk_".to_owned(),
        "export INGEST_TOKEN=trk_it_".to_owned(),
        format!("Admin page: http://{addr}/admin/  user admin  password "),
    ] {
        assert!(first.contains(&line), "{line:?} in:\n{first}");
    }
    let data = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("tracker.redb");
    assert!(
        first.contains(&format!("Created the data file {}", data.display())),
        "{first}"
    );
    // The lines as a person pastes them, in a shell without the variables set.
    let answer = Command::new("sh")
        .arg("-c")
        .arg(pasted(&first))
        .env_remove("TRACKER")
        .env_remove("SECRET")
        .env_remove("INGEST_TOKEN")
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&answer.stdout);
    assert!(body.contains("\"status\":\"queued\""), "{body}");
    stop(child);
    // The log's last line says the stop is done, not only that it began.
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(
        log.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.contains("the data file is closed; stopped")),
        "{log}"
    );

    let (second, child) = start(dir.path(), &[], "127.0.0.1:0");
    stop(child.unwrap_or_else(|| panic!("did not restart: {second}")));
    assert!(
        !second.contains("trk_sk_") && !second.contains("password "),
        "credentials and password are shown once: {second}"
    );
    let addr = listening_on(&second);
    assert!(
        second.contains(&format!("Admin page: http://{addr}/admin/  user admin")),
        "{second}"
    );
}

/// Listening on every interface without `public_url`, the addresses printed are loopback's (one
/// a person can paste and use), and a line says to set `public_url` for visitors; with it set,
/// no such line.
#[test]
fn an_address_of_every_interface_prints_loopback_and_asks_for_public_url() {
    let dir = tempfile::tempdir().unwrap();
    let (first, child) = start(dir.path(), &[], "0.0.0.0:0");
    let child = child.unwrap_or_else(|| panic!("did not start: {first}"));
    let port = listening_on(&first)
        .strip_prefix("0.0.0.0:")
        .unwrap_or_else(|| panic!("every interface in {first}"))
        .to_owned();
    for line in [
        format!("export TRACKER=http://127.0.0.1:{port}"),
        format!("Admin page: http://127.0.0.1:{port}/admin/"),
        format!(
            "public_url is not set: tracking links and the addresses shown use \
             http://127.0.0.1:{port}, which only this machine reaches"
        ),
    ] {
        assert!(first.contains(&line), "{line:?} in:\n{first}");
    }
    assert!(
        first
            .lines()
            .filter(|l| !l.starts_with("listening on "))
            .all(|l| !l.contains("0.0.0.0")),
        "only the listening line names the address bound: {first}"
    );
    let answer = Command::new("sh")
        .arg("-c")
        .arg(pasted(&first))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&answer.stdout);
    assert!(body.contains("\"status\":\"queued\""), "{body}");
    stop(child);

    std::fs::write(
        dir.path().join("tracker.toml"),
        "public_url = \"https://t.example.com\"\n",
    )
    .unwrap();
    let (second, child) = start(dir.path(), &[], "0.0.0.0:0");
    stop(child.unwrap_or_else(|| panic!("did not restart: {second}")));
    assert!(
        second.contains("Admin page: https://t.example.com/admin/"),
        "{second}"
    );
    assert!(!second.contains("public_url is not set"), "{second}");
}

/// A taken address fails the start before the data file, a credential or the password is
/// made, and says how to choose another; the next start, on a free one, makes and prints them.
#[test]
fn a_taken_port_makes_nothing_and_the_next_start_prints_the_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap();
    let (printed, child) = start(dir.path(), &[], &at.to_string());
    assert!(child.is_none(), "{printed}");
    assert!(printed.is_empty(), "nothing printed: {printed}");
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains(&format!("cannot listen on {at}")), "{log}");
    let other = format!("--listen 127.0.0.1:{}", at.port() + 1);
    assert!(log.contains(&other), "{log}");
    assert!(log.contains("`listen` in the config file"), "{log}");
    assert!(!dir.path().join("tracker.redb").exists(), "no data file");

    // The metrics address is bound before anything is made too.
    let env = [("TRACKER_METRICS_LISTEN", &*at.to_string())];
    let (printed, child) = start(dir.path(), &env, "127.0.0.1:0");
    assert!(child.is_none(), "{printed}");
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(
        log.contains(&format!("cannot listen for metrics on {at}")),
        "{log}"
    );
    assert!(log.contains("metrics_listen"), "{log}");
    assert!(!dir.path().join("tracker.redb").exists(), "no data file");

    drop(taken);
    let (printed, child) = start(dir.path(), &[], &at.to_string());
    stop(child.unwrap_or_else(|| panic!("did not start: {printed}")));
    assert!(
        printed.contains("export SECRET=trk_sk_") && printed.contains("user admin  password "),
        "{printed}"
    );
}

/// Every command but `serve` and `init` refuses a missing data file, naming it (from the root)
/// and how to make one, and makes nothing: no data file, no backup. With the file made, the
/// same commands work.
#[test]
fn commands_other_than_serve_refuse_a_missing_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("tracker.redb");
    let commands: [&[&str]; 7] = [
        &["space", "list"],
        &["link", "list", "default"],
        &["backup", "copy.redb"],
        &["check"],
        &["compact"],
        &["export", "default"],
        &["space", "create", "other"],
    ];
    for args in commands {
        let out = run(dir.path(), &[], args);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains(&format!("there is no data file at {}", data.display())),
            "{args:?}: {said}"
        );
        assert!(said.contains("`tracker serve` creates"), "{args:?}: {said}");
        assert!(!data.exists(), "{args:?} made a data file");
        assert!(!dir.path().join("copy.redb").exists(), "{args:?}");
    }
    // `admin password` refuses before it asks for the password.
    let out = tracker(dir.path(), &[], &["admin", "password"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("there is no data file at"),
        "{}",
        stderr(&out)
    );
    assert!(!data.exists());

    // Just inside: with the file made, each works.
    let out = run(dir.path(), &[], &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for args in commands {
        let out = run(dir.path(), &[], args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
}

/// A new data file is made at the current schema at once: one log line naming it, none per
/// schema version.
#[test]
fn a_new_data_file_is_made_with_one_line_not_one_per_version() {
    let dir = tempfile::tempdir().unwrap();
    let (printed, child) = start(dir.path(), &[], "127.0.0.1:0");
    stop(child.unwrap_or_else(|| panic!("did not start: {printed}")));
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert_eq!(log.matches("created a new data file").count(), 1, "{log}");
    let data = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("tracker.redb");
    assert!(log.contains(&format!("path={}", data.display())), "{log}");
    assert!(!log.contains("schema migrated"), "{log}");
}

/// A data file in a directory that does not exist: the path once, and the command that makes
/// the directory; nothing made.
#[test]
fn a_missing_directory_is_named_once_with_the_mkdir_that_makes_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = std::fs::canonicalize(dir.path()).unwrap().join("var");
    let data = missing.join("tracker.redb");
    let out = run(
        dir.path(),
        &[("TRACKER_DATA", &*data.to_string_lossy())],
        &["serve", "--listen", "127.0.0.1:0"],
    );
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_eq!(said.matches(&*data.to_string_lossy()).count(), 1, "{said}");
    assert!(
        said.contains(&format!("create it with `mkdir -p {}`", missing.display())),
        "{said}"
    );
    assert!(!missing.exists());
}

/// `log_level` must name a level; a mistyped one stops any command with the accepted values.
#[test]
fn a_mistyped_log_level_is_refused_with_the_accepted_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[("TRACKER_LOG_LEVEL", "verbose")], &["check"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("off, error, warn, info, debug, trace"),
        "{said}"
    );
    assert!(said.contains("got \"verbose\""), "{said}");
    assert!(!dir.path().join("tracker.redb").exists());
}

/// A syntax error in the config file names the file, the line and the column.
#[test]
fn a_config_syntax_error_names_the_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tracker.toml"),
        "listen = \"127.0.0.1:0\"\nlog_level = \"info\nrate_limit = 5\n",
    )
    .unwrap();
    let out = run(dir.path(), &[], &["space", "list"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("tracker.toml"), "{said}");
    assert!(said.contains("line 2, column"), "{said}");
}

/// `backup` and `check` say the same number of rows for the same file: every row of every
/// table, as redb counts them.
#[test]
fn backup_and_check_count_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[], &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for args in [
        &["link", "create", "default", "spring", "--bot", "my_bot"][..],
        &["space", "create", "second"],
    ] {
        let out = run(dir.path(), &[], args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run(dir.path(), &[], &[&["--json"], args].concat());
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)))
    };
    let backed_up = json(&["backup", "copy.redb"])["rows"].as_u64().unwrap();
    let checked = json(&["check"])["rows"].as_u64().unwrap();
    let in_file = rows_in(&dir.path().join("tracker.redb"));
    assert_eq!((backed_up, checked), (in_file, in_file));
    let text = run(dir.path(), &[], &["check"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains(&format!(" {in_file} rows")),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
}

/// With `--json` the ready line carries the admin page's address at every start, and the
/// password only on the start that made it.
#[test]
fn the_json_ready_line_has_the_admin_url_at_every_start() {
    let dir = tempfile::tempdir().unwrap();
    for start in 0..2 {
        let process = crate::support::TrackerProcess::start(dir.path());
        assert_eq!(
            process.admin_url,
            format!("http://{}/admin/", process.addr),
            "start {start}"
        );
        assert_eq!(
            process.admin_password.is_some(),
            start == 0,
            "start {start}"
        );
        crate::support::stop_cleanly(process);
    }
}

/// `tracker init` makes the file with the `default` space and the admin password, printed
/// once with the lines to paste; a second `init` refuses the file it made, changing nothing.
#[test]
fn init_makes_the_file_once_and_prints_what_a_first_start_prints() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[], &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    for line in [
        "export TRACKER=http://127.0.0.1:8080",
        "export SECRET=trk_sk_",
        "export INGEST_TOKEN=trk_it_",
        "Admin page: http://127.0.0.1:8080/admin/  user admin  password ",
    ] {
        assert!(printed.contains(line), "{line:?} in:\n{printed}");
    }
    let data = dir.path().join("tracker.redb");
    let before = std::fs::read(&data).unwrap();
    let out = run(dir.path(), &[], &["init"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("there is already a data file at"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&data).unwrap(),
        before,
        "the file is untouched"
    );
    // The server started on it prints no credentials and no password.
    let (printed, child) = start(dir.path(), &[], "127.0.0.1:0");
    stop(child.unwrap_or_else(|| panic!("did not start: {printed}")));
    assert!(
        !printed.contains("trk_sk_") && !printed.contains("password "),
        "{printed}"
    );
    // A later space's lines say they replace the first's, not that the README uses them.
    let out = run(dir.path(), &[], &["space", "create", "shop2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("export SECRET=trk_sk_")
            && printed.contains("To work with this space")
            && !printed.contains("the README's examples use them"),
        "{printed}"
    );
}
