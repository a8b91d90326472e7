//! The tracker under test: the real release binary as a child process, on a temporary data
//! file, so the memory figures are the server's alone.
//!
//! `tracker --json serve --listen 127.0.0.1:0` creates the `default` space on first start and
//! prints its credentials and the bound address as JSON lines on stdout; that is how the
//! benchmark learns where to send load and with which credentials.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::client;

/// The binary cargo built for this bench, in the same profile: release under `cargo bench`, the
/// test profile under `cargo test --bench ingest` (for `--smoke` only; `main` refuses the rest).
const BUILT: &str = env!("CARGO_BIN_EXE_tracker");

/// The environment variable that names another `tracker` binary to measure instead of the one
/// cargo built: an older build, for an A/B of the same rows run by this bench. (Not
/// `TRACKER_...`: the tracker reads those as its settings.)
pub const BINARY_VAR: &str = "BENCH_TRACKER_BINARY";

/// The binary under test: the one [`BINARY_VAR`] names, else the one cargo built.
#[must_use]
pub fn tracker_binary() -> PathBuf {
    std::env::var_os(BINARY_VAR).map_or_else(|| PathBuf::from(BUILT), PathBuf::from)
}

pub struct Server {
    child: Child,
    /// A copy of the binary in the temporary directory: the target directory is shared, and
    /// another build there may replace the original while the benchmark runs.
    pub bin: PathBuf,
    pub addr: SocketAddr,
    pub secret: String,
    pub ingest_token: String,
    pub data: PathBuf,
    pub config: PathBuf,
    /// Where `/metrics` is served, when the server counts for it (`metrics_listen`).
    pub metrics: Option<SocketAddr>,
}

impl Server {
    /// Starts the server on `dir/bench.redb` with `settings` (TOML; empty: every default). Its
    /// log (stderr) goes to `log`, or nowhere.
    pub fn start(dir: &Path, log: Option<&Path>, settings: &str) -> Result<Server, String> {
        let config = dir.join("tracker.toml");
        let text = format!("# benchmark: every setting at its default but these\n{settings}");
        std::fs::write(&config, text).map_err(|e| format!("writing {}: {e}", config.display()))?;
        let data = dir.join("bench.redb");
        let bin = dir.join("tracker");
        let tracker = tracker_binary();
        std::fs::copy(&tracker, &bin)
            .map_err(|e| format!("copying {} to {}: {e}", tracker.display(), bin.display()))?;
        let stderr = match log {
            Some(path) => Stdio::from(
                File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?,
            ),
            None => Stdio::null(),
        };
        let mut child = Command::new(&bin)
            .arg("--json")
            .arg("--config")
            .arg(&config)
            .arg("--data")
            .arg(&data)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        // Lines are read on a thread that keeps draining stdout, so the server never blocks on
        // a full pipe; the first ones are handed back here.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep draining.
                }
            }
        });
        let (mut secret, mut token, mut addr, mut metrics_addr) = (None, None, None, None);
        let deadline = Instant::now() + Duration::from_secs(30);
        while addr.is_none() {
            let wait = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(wait) else {
                let _ = child.kill();
                return Err("the server did not print its address within 30 s".into());
            };
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if let Some(s) = value.get("secret").and_then(|v| v.as_str()) {
                secret = Some(s.to_owned());
            }
            if let Some(t) = value.get("ingest_token").and_then(|v| v.as_str()) {
                token = Some(t.to_owned());
            }
            if let Some(a) = value.get("metrics").and_then(|v| v.as_str()) {
                metrics_addr = a.parse().ok();
            }
            if let Some(a) = value.get("listening").and_then(|v| v.as_str()) {
                addr = a.parse().ok();
            }
        }
        let (Some(secret), Some(ingest_token), Some(addr)) = (secret, token, addr) else {
            let _ = child.kill();
            return Err("the server did not print the default space's credentials".into());
        };
        let metrics = settings.contains("metrics_listen");
        if metrics != metrics_addr.is_some() {
            let _ = child.kill();
            return Err(format!(
                "metrics asked {metrics}, served on {metrics_addr:?}"
            ));
        }
        Ok(Server {
            child,
            bin,
            addr,
            secret,
            ingest_token,
            data,
            config,
            metrics: metrics_addr,
        })
    }

    /// `tracker --json` with this server's configuration and data file, for another command
    /// (`space create`, `export`): it reaches the server through the control socket while the
    /// server runs, and opens the data file itself once it has stopped.
    pub fn command(&self) -> Command {
        command(&self.bin, &self.config, &self.data)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        status_kib(self.pid(), "VmHWM:").map(|k| k * 1024)
    }

    /// Resident memory now (`VmRSS`), in bytes.
    pub fn rss(&self) -> Option<u64> {
        status_kib(self.pid(), "VmRSS:").map(|k| k * 1024)
    }

    /// The bytes the server has sent to storage so far (`write_bytes` of `/proc/<pid>/io`):
    /// the data file's pages, its log aside.
    pub fn storage_writes(&self) -> Option<u64> {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid())).ok()?;
        let line = io.lines().find(|l| l.starts_with("write_bytes:"))?;
        line["write_bytes:".len()..].trim().parse().ok()
    }

    /// Asks the server to stop (SIGTERM, as a service manager would) and waits for it: it
    /// finishes requests in flight, commits, and closes the data file.
    pub fn stop(mut self) -> Result<ExitStatus, String> {
        let term = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .map_err(|e| format!("running kill: {e}"))?;
        if !term.success() {
            return Err("kill -TERM failed".into());
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err("the server did not stop within 60 s of SIGTERM".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only reached when `stop` was not: a failed run must not leave a server behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `BIN --json --config CONFIG --data DATA`, to which the caller adds a command.
pub fn command(bin: &Path, config: &Path, data: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--json")
        .arg("--config")
        .arg(config)
        .arg("--data")
        .arg(data);
    c
}

/// Reads process `pid`'s peak RSS (`VmHWM`, KiB) every 5 ms until it is gone, on a thread of its
/// own: the last value read, for a command run where `/usr/bin/time` is not there to report
/// its `ru_maxrss`.
pub fn poll_peak_rss(pid: u32) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while let Some(kib) = status_kib(pid, "VmHWM:") {
            peak = kib;
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    })
}

/// A `kB` line of `/proc/PID/status`.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// One counter without labels from the server's `/metrics`.
pub fn metric(metrics: SocketAddr, name: &str) -> Result<u64, String> {
    let scrape = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".to_vec();
    let (status, body) = client::fetch_all(metrics, 1, vec![scrape]).remove(0);
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("no {name} in /metrics ({status})"))
}
