//! `import`: `tracker import` of a file of NDJSON events into a new data file, then the same
//! file again.
//!
//! The file is made here, in the row's temporary directory: `--import-events` lines (1,000,000
//! by default), the four kinds in turn, each with a `uid` of its own and an `occurred_at_ms`
//! (one a second, ending now), deposits with a value and a currency, no `eid` (so each gets one
//! made from its line). The data file is new: a server started once in the directory makes it
//! and its `default` space, and stops; the import then runs on the file with no server, as one
//! moving a history onto a new machine would. Each run is timed from start to exit, and its peak
//! resident memory is the import process's own (`ru_maxrss` of `wait4`, as GNU time reports
//! it; without `/usr/bin/time`, `VmHWM` polled from `/proc`). The second run must store nothing.

use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::count_events;
use crate::report::mib;
use crate::server::Server;

/// The targets: seconds and peak RSS of the first import of 1,000,000 events.
const TARGET_SECS: f64 = 15.0;
const TARGET_RSS_MIB: f64 = 64.0;

/// One run of `tracker import`.
struct Run {
    wall: Duration,
    cpu_s: f64,
    peak_rss_kib: u64,
    /// Where the peak came from.
    how: &'static str,
    summary: serde_json::Value,
}

impl Run {
    fn count(&self, key: &str) -> u64 {
        self.summary[key].as_u64().unwrap_or(0)
    }
}

/// Runs the row with `events` lines and prints it; answers what failed.
pub fn run(events: u64, keep: bool) -> Result<Vec<String>, String> {
    let dir = tempfile::Builder::new()
        .prefix("tracker-bench-import-")
        .tempdir()
        .map_err(|e| format!("a temporary directory: {e}"))?;
    // The new data file and its `default` space, as a first start makes them.
    let server = Server::start(dir.path(), None, "")?;
    let (bin, config, data) = (
        server.bin.clone(),
        server.config.clone(),
        server.data.clone(),
    );
    let status = server.stop()?;
    if !status.success() {
        return Err(format!(
            "the server that made the data file exited with {status}"
        ));
    }
    let file = dir.path().join("events.ndjson");
    let bytes = write_events(&file, events)?;
    println!(
        "\nimport: tracker import default FILE on a new data file, no server running: {events} \
         events, {:.1} MiB of NDJSON (the four kinds in turn, a uid each, occurred_at_ms, no \
         eid), then the same file again",
        mib(bytes)
    );
    let import = || {
        let mut c = crate::server::command(&bin, &config, &data);
        c.arg("import").arg("default").arg(&file);
        timed(&c)
    };
    let first = import()?;
    let again = import()?;
    let (stored, _) = count_events(&data)?;
    print_runs(&first, &again);
    let secs = first.wall.as_secs_f64();
    let rss = mib(first.peak_rss_kib * 1024);
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    // The targets are for a million events; a smaller file (--smoke) is checked for its counts.
    let full = events >= 1_000_000;
    println!(
        "import of {events} events into a new data file: {secs:.2} s (target <= {TARGET_SECS} s: \
         {}), peak RSS {rss:.1} MiB (target <= {TARGET_RSS_MIB} MiB: {}; {}); the same file \
         again: {:.2} s, {} events stored (target 0: {}); the data file holds {stored} events",
        if full {
            verdict(secs <= TARGET_SECS)
        } else {
            "a target for 1000000"
        },
        if full {
            verdict(rss <= TARGET_RSS_MIB)
        } else {
            "a target for 1000000"
        },
        first.how,
        again.wall.as_secs_f64(),
        again.count("queued"),
        verdict(again.count("queued") == 0),
    );
    let mut failures = Vec::new();
    if first.count("queued") != events || first.count("refused") != 0 {
        failures.push(format!(
            "import: {} of {events} events queued, {} refused: {}",
            first.count("queued"),
            first.count("refused"),
            first.summary["refusals"]
        ));
    }
    if again.count("queued") != 0 || again.count("duplicates") != events {
        failures.push(format!(
            "import again: {} queued, {} duplicates of {events}",
            again.count("queued"),
            again.count("duplicates")
        ));
    }
    if stored != events {
        failures.push(format!(
            "import: the data file holds {stored} events, {events} were imported"
        ));
    }
    if keep {
        let path = dir.keep();
        eprintln!("kept {}", path.display());
    }
    Ok(failures)
}

/// The two runs as a table.
fn print_runs(first: &Run, again: &Run) {
    println!(
        "| {:<20} | {:>9} | {:>7} | {:>9} | {:>6} | {:>12} | {:>9} | {:>10} | {:>7} |",
        "tracker import",
        "events",
        "wall s",
        "events/s",
        "CPU s",
        "peak RSS MiB",
        "queued",
        "duplicates",
        "refused"
    );
    println!(
        "|{:-<22}|{:->11}|{:->9}|{:->11}|{:->8}|{:->14}|{:->11}|{:->12}|{:->9}|",
        "", ":", ":", ":", ":", ":", ":", ":", ":"
    );
    for (label, r) in [("a new data file", first), ("the same file again", again)] {
        #[allow(clippy::cast_precision_loss)]
        let rate = r.count("events") as f64 / r.wall.as_secs_f64().max(1e-9);
        println!(
            "| {:<20} | {:>9} | {:>7.2} | {:>9.0} | {:>6.2} | {:>12.1} | {:>9} | {:>10} | {:>7} |",
            label,
            r.count("events"),
            r.wall.as_secs_f64(),
            rate,
            r.cpu_s,
            mib(r.peak_rss_kib * 1024),
            r.count("queued"),
            r.count("duplicates"),
            r.count("refused"),
        );
    }
}

/// Writes `n` events as NDJSON to `path`; answers its size.
fn write_events(path: &Path, n: u64) -> Result<u64, String> {
    const KINDS: [&str; 4] = ["contact", "subscribed", "registration", "deposit"];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let failed = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let mut out = BufWriter::new(std::fs::File::create(path).map_err(failed)?);
    for i in 0..n {
        let kind = KINDS[(i % 4) as usize];
        // One a second, the last a minute ago: every one within `max_event_age` (90 days) for
        // files up to millions of lines.
        let at = now_ms - 60_000 - (n - i) * 1000;
        let value = if kind == "deposit" {
            r#","value":"12.50","currency":"USD""#
        } else {
            ""
        };
        writeln!(
            out,
            r#"{{"event":"{kind}","uid":"imp{i:08}"{value},"occurred_at_ms":{at}}}"#
        )
        .map_err(failed)?;
    }
    out.flush().map_err(failed)?;
    drop(out);
    Ok(std::fs::metadata(path).map_err(failed)?.len())
}

/// Runs `command` (a `tracker --json import`) to its end: wall time, CPU, peak RSS and the
/// summary it printed. A refused line makes it exit 1, still with its summary.
fn timed(command: &Command) -> Result<Run, String> {
    let time = Path::new("/usr/bin/time");
    let report = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let mut c = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f")
            .arg("%M %U %S")
            .arg("-o")
            .arg(report.path())
            .arg(command.get_program());
        c
    } else {
        Command::new(command.get_program())
    };
    c.args(command.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let child = c
        .spawn()
        .map_err(|e| format!("running tracker import: {e}"))?;
    let pid = child.id();
    let polled = (!time.exists()).then(|| crate::server::poll_peak_rss(pid));
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            format!(
                "tracker import ({}) printed no summary: {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let (peak_rss_kib, cpu_s, how) = if let Some(p) = polled {
        (p.join().unwrap_or(0), 0.0, "VmHWM polled")
    } else {
        let text = std::fs::read_to_string(report.path()).map_err(|e| e.to_string())?;
        // GNU time writes a line of its own first when the command exits non-zero.
        let fields: Vec<f64> = text
            .lines()
            .last()
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        match fields.as_slice() {
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
            [kib, user, system] => (*kib as u64, user + system, "ru_maxrss of wait4"),
            _ => return Err(format!("could not read /usr/bin/time's report: {text:?}")),
        }
    };
    Ok(Run {
        wall,
        cpu_s,
        peak_rss_kib,
        how,
        summary,
    })
}
