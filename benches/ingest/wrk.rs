//! Running `wrk` and reading its report. `wrk` is installed from Debian's packages when it is
//! missing and the benchmark runs as root; otherwise the in-repo client is used.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What one `wrk` run reported.
pub struct Report {
    /// Completed responses (any status). Requests still in flight when the time was up are not
    /// counted, though the server may have answered them.
    pub responses: u64,
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors.
    pub errors: u64,
    pub rate: f64,
    pub p50: Duration,
    pub p99: Duration,
}

/// `wrk`'s path, installing it first if needed and possible.
pub fn find_or_install() -> Option<String> {
    if let Some(path) = which("wrk") {
        return Some(path);
    }
    if !is_root() {
        eprintln!("wrk is not installed and this is not root: using the in-repo client");
        return None;
    }
    eprintln!("installing wrk (apt-get install -y wrk) ...");
    apt_install(&["wrk"]);
    let found = which("wrk");
    if found.is_none() {
        eprintln!("wrk could not be installed: using the in-repo client");
    }
    found
}

/// Whether the bench runs as root (and so may install Debian's packages).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Installs Debian's `packages`, updating the package lists once if the first try fails.
pub fn apt_install(packages: &[&str]) -> bool {
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    install() || {
        let _ = Command::new("apt-get")
            .arg("update")
            .stdout(Stdio::null())
            .status();
        install()
    }
}

fn which(name: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !path.is_empty()).then_some(path)
}

/// Runs `wrk` with `script` for `duration` over `conns` connections on two threads.
pub fn run(
    wrk: &str,
    addr: SocketAddr,
    script: &Path,
    conns: usize,
    duration: Duration,
) -> Result<Report, String> {
    let out = Command::new(wrk)
        .arg("-t2")
        .arg(format!("-c{conns}"))
        .arg(format!("-d{}s", duration.as_secs().max(1)))
        .args(["--timeout", "10s", "--latency", "-s"])
        .arg(script)
        .arg(format!("http://{addr}"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse(&text).ok_or_else(|| format!("could not read wrk's report:\n{text}"))
}

fn parse(text: &str) -> Option<Report> {
    let mut report = Report {
        responses: 0,
        non_2xx: 0,
        errors: 0,
        rate: 0.0,
        p50: Duration::ZERO,
        p99: Duration::ZERO,
    };
    let mut saw_total = false;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", v] => report.p50 = duration(v)?,
            ["99%", v] => report.p99 = duration(v)?,
            [n, "requests", "in", ..] => {
                report.responses = n.parse().ok()?;
                saw_total = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => report.non_2xx = n.parse().ok()?,
            ["Requests/sec:", r] => report.rate = r.parse().ok()?,
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 0, write 0, timeout 0"
                report.errors = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    saw_total.then_some(report)
}

/// `312.00us`, `1.20ms`, `2.00s`.
fn duration(text: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    let value: f64 = number.parse().ok()?;
    Some(Duration::from_secs_f64(value * scale))
}
