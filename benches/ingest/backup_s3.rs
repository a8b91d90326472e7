//! `unique_backup`: unique ingest while scheduled backups are taken and uploaded to S3 beside
//! it, against plain unique before and after.
//!
//! Three servers, each on a new data file set up as every bench server is and each loaded the
//! same way (unique events at the first `--conns`, for `--duration` but at least
//! [`MIN_LOAD`]): A plain, B with `backup_every = "1m"` (the least allowed), `backup_keep = 2`
//! and `[backup_s3]` at a real S3 server on loopback, A' plain again. A new server for each row,
//! because the rate falls as the file grows and a row this long grows it by millions of events:
//! so the three rows write into files of the same sizes, and A and A' bracket the machine's
//! drift. All three count for `/metrics`, which B needs to see its backups.
//!
//! The S3 server is moto in server mode, installed by `.ci/moto` into `target/` (as the tests
//! use it), run at nice 19 as a bucket on another machine would take none of this one's CPU.
//! B's first backup is taken as its server starts, before the load; the load starts once it is
//! uploaded, and runs long enough for the ones at one and two minutes. Afterwards the bucket
//! itself is listed: `backup_keep` objects under the prefix (or as many as were taken, if
//! fewer), none empty, and `/metrics` must count no failed upload.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::args::Args;
use crate::bench::Bench;
use crate::measure::{Row, measure};
use crate::report::{mib, note_busy, print_header, print_row};
use crate::scenario::Case;
use crate::server::metric;

/// The shortest load of each row: the backups at one and two minutes after B's server starts,
/// and the second's copy and upload, fall within it.
pub const MIN_LOAD: Duration = Duration::from_secs(150);
/// `backup_keep`.
const KEEP: u64 = 2;
const BUCKET: &str = "bench-backups";
const PREFIX: &str = "tracker/";
/// Never logged, never in the configuration file: read from a file of mode 0600.
const SECRET_KEY: &str = "bench-secret-key";

/// moto's S3 on loopback, stopped when dropped.
struct Moto {
    child: Child,
    addr: SocketAddr,
}

impl Moto {
    /// Installs moto if need be (`.ci/moto`), starts it at nice 19 and makes the bucket.
    fn start() -> Result<Moto, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/moto");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running .ci/moto: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "unique_backup: .ci/moto could not install moto ({}); leave the row out",
                out.status
            ));
        }
        let server = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("a free port for moto: {e}"))?
            .port();
        // `nice` runs moto in its own place, so the child is moto itself.
        let child = Command::new("nice")
            .args(["-n", "19"])
            .arg(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {server}: {e}"))?;
        let moto = Moto {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(moto.addr).is_err() {
            if Instant::now() > deadline {
                return Err("moto did not listen within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let made = moto.call("PUT", &format!("/{BUCKET}"))?;
        if !made.starts_with("HTTP/1.1 200") {
            return Err(format!("making the bucket: {made}"));
        }
        Ok(moto)
    }

    /// One unsigned request (moto takes them), answered whole.
    fn call(&self, method: &str, target: &str) -> Result<String, String> {
        let mut stream = TcpStream::connect(self.addr).map_err(|e| format!("moto: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        write!(
            stream,
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: \
             close\r\n\r\n",
            self.addr
        )
        .map_err(|e| format!("moto: {e}"))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|e| format!("moto: {e}"))?;
        Ok(answer)
    }

    /// The objects under [`PREFIX`] with their sizes, from the bucket's own listing.
    fn objects(&self) -> Result<Vec<(String, u64)>, String> {
        let answer = self.call("GET", &format!("/{BUCKET}?list-type=2&prefix={PREFIX}"))?;
        if !answer.starts_with("HTTP/1.1 200") {
            return Err(format!("listing the bucket: {answer}"));
        }
        let field = |item: &str, tag: &str| {
            let start = item.find(&format!("<{tag}>"))? + tag.len() + 2;
            let end = item[start..].find(&format!("</{tag}>"))? + start;
            Some(item[start..end].to_owned())
        };
        Ok(answer
            .split("<Contents>")
            .skip(1)
            .filter_map(|item| {
                let key = field(item, "Key")?;
                let size = field(item, "Size")?.parse().ok()?;
                Some((key, size))
            })
            .collect())
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's backup counters in `/metrics`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Counts {
    written: u64,
    uploaded: u64,
    failed: u64,
}

fn counts(metrics: SocketAddr) -> Result<Counts, String> {
    Ok(Counts {
        written: metric(
            metrics,
            "tracker_scheduled_backups_total{status=\"written\"}",
        )?,
        uploaded: metric(
            metrics,
            "tracker_backup_uploads_total{outcome=\"uploaded\"}",
        )?,
        failed: metric(metrics, "tracker_backup_uploads_total{outcome=\"failed\"}")?,
    })
}

/// Polls the counters until `deadline` (beside the load); answers each change with when it was
/// seen, from `started`.
fn watch(metrics: SocketAddr, started: Instant, deadline: Instant) -> Vec<(Duration, Counts)> {
    let mut seen: Vec<(Duration, Counts)> = Vec::new();
    while Instant::now() < deadline {
        if let Ok(c) = counts(metrics)
            && seen.last().is_none_or(|(_, last)| *last != c)
        {
            seen.push((started.elapsed(), c));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    seen
}

/// Waits until `ready` holds for the counters, at most `limit`; answers the last read.
fn counts_when(
    metrics: SocketAddr,
    limit: Duration,
    ready: impl Fn(&Counts) -> bool,
) -> Result<Counts, String> {
    let deadline = Instant::now() + limit;
    loop {
        let c = counts(metrics)?;
        if ready(&c) || Instant::now() > deadline {
            return Ok(c);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// B's settings: the schedule and `[backup_s3]` at `moto`, the secret key in a file of mode
/// 0600 written into `dir`.
fn settings(moto: &Moto, dir: &Path) -> Result<String, String> {
    let secret_file = dir.join("s3-secret");
    std::fs::write(&secret_file, SECRET_KEY)
        .and_then(|()| {
            std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600))
        })
        .map_err(|e| format!("writing {}: {e}", secret_file.display()))?;
    Ok(format!(
        "backup_every = \"1m\"\nbackup_keep = {KEEP}\n[backup_s3]\nendpoint = \"http://{}\"\n\
         region = \"us-east-1\"\nbucket = \"{BUCKET}\"\nprefix = \"{PREFIX}\"\n\
         access_key_id = \"bench\"\nsecret_access_key_file = \"{}\"\n",
        moto.addr,
        secret_file.display()
    ))
}

/// Runs the row and prints it; answers what failed.
pub fn run(args: &Args, wrk_path: Option<&str>) -> Result<Vec<String>, String> {
    let conns = args.conns.first().copied().unwrap_or(64);
    let load = args.duration.max(MIN_LOAD);
    let moto = Moto::start()?;
    let secrets = tempfile::Builder::new()
        .prefix("tracker-bench-s3-")
        .tempdir()
        .map_err(|e| format!("a temporary directory: {e}"))?;
    let backups = settings(&moto, secrets.path())?;
    println!(
        "\nunique_backup: unique at {conns} connections for {} s on each of three new servers \
         (/metrics on): A plain; B with backup_every = \"1m\", backup_keep = {KEEP} and \
         [backup_s3] at moto (nice 19) on {}; A' plain",
        load.as_secs(),
        moto.addr
    );
    print_header();
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    let mut b_report = None;
    for (label, with_backups) in [
        ("A: unique", false),
        ("B: unique, backups to S3", true),
        ("A': unique", false),
    ] {
        let extra = if with_backups { backups.as_str() } else { "" };
        // Set up for the unique row alone: no other case's spaces, stand-ins or bindings.
        let unique_only = Args {
            cases: vec![Case::Unique],
            joins: false,
            ..args.clone()
        };
        let mut bench = Bench::start_with(&unique_only, true, extra)?;
        let metrics = bench
            .server
            .metrics
            .ok_or("the server did not print its metrics address")?;
        let before = if with_backups {
            // The backup taken at the start, of the setup alone: uploaded before the load.
            Some(counts_when(metrics, Duration::from_secs(60), |c| {
                c.uploaded + c.failed >= 1
            })?)
        } else {
            None
        };
        let started = Instant::now();
        let (mut row, seen) = measure(
            &mut bench,
            wrk_path,
            Case::Unique,
            conns,
            load,
            |deadline| {
                if with_backups {
                    watch(metrics, started, deadline)
                } else {
                    Vec::new()
                }
            },
        )?;
        row.label = label;
        print_row(&row);
        if row.non_2xx + row.errors > 0 {
            failures.push(format!(
                "unique_backup, {label}: {} non-2xx, {} errors",
                row.non_2xx, row.errors
            ));
        }
        if let Some(before) = before {
            let after_load = counts(metrics)?;
            // Every backup taken has finished uploading (or failed) before the bucket is read.
            let settled = counts_when(metrics, Duration::from_secs(300), |c| {
                c.uploaded + c.failed >= c.written
            })?;
            let objects = moto.objects()?;
            b_report = Some(BackupReport {
                before,
                after_load,
                settled,
                seen,
                objects,
                rss: bench.server.rss().unwrap_or(0),
            });
        }
        rows.push(row);
        let check = bench.finish(args.keep)?;
        if let Err(e) = check.verdict {
            failures.push(format!("unique_backup, {label}: {e}"));
        }
    }
    let report = b_report.ok_or("unique_backup: no B row")?;
    report_row(&rows, &report, conns, &mut failures);
    note_busy(&rows);
    Ok(failures)
}

/// What B's server and the bucket said.
struct BackupReport {
    /// When the load started.
    before: Counts,
    /// When it ended.
    after_load: Counts,
    /// Once every backup taken was uploaded or failed.
    settled: Counts,
    /// Each change during the load, with when it was seen.
    seen: Vec<(Duration, Counts)>,
    /// The objects under the prefix, from the bucket's listing.
    objects: Vec<(String, u64)>,
    rss: u64,
}

fn report_row(rows: &[Row], r: &BackupReport, conns: usize, failures: &mut Vec<String>) {
    let [a, b, a2] = [rows[0].rate, rows[1].rate, rows[2].rate];
    let mean = f64::midpoint(a, a2);
    let (low, high) = (a.min(a2), a.max(a2));
    let during = r.after_load.uploaded - r.before.uploaded;
    let taken = r.after_load.written - r.before.written;
    // When each backup of the load was written and uploaded, from the start of the load.
    let mut times = Vec::new();
    for pair in r.seen.windows(2) {
        let (t, (old, new)) = (pair[1].0, (pair[0].1, pair[1].1));
        if new.written > old.written {
            times.push(format!("written at +{:.0} s", t.as_secs_f64()));
        }
        if new.uploaded > old.uploaded {
            times.push(format!("uploaded at +{:.0} s", t.as_secs_f64()));
        }
        if new.failed > old.failed {
            times.push(format!("FAILED at +{:.0} s", t.as_secs_f64()));
        }
    }
    let expected = KEEP.min(r.settled.written);
    let sizes: Vec<String> = r
        .objects
        .iter()
        .map(|(key, size)| format!("{key} {:.1} MiB", mib(*size)))
        .collect();
    let mut wrong = Vec::new();
    if during < 2 {
        wrong.push(format!(
            "{during} backups uploaded during the load, not 2 (a longer --duration gives more)"
        ));
    }
    if r.settled.failed > 0 {
        wrong.push(format!("{} failed uploads in /metrics", r.settled.failed));
    }
    if r.objects.len() as u64 != expected {
        wrong.push(format!(
            "{} objects under {PREFIX}, not {expected}",
            r.objects.len()
        ));
    }
    if r.objects.iter().any(|(_, size)| *size == 0) {
        wrong.push("an empty object".into());
    }
    let ratio = b / mean.max(1e-9);
    println!(
        "unique_backup at {conns} connections: unique with backups to S3 / plain unique before \
         and after: {b:.0} / {a:.0} and {a2:.0} = {:.2}x and {:.2}x, {ratio:.2}x of their mean \
         (plain unique's own rows {:.1}% apart; target >= 0.95x of their mean: {})",
        b / a.max(1e-9),
        b / a2.max(1e-9),
        (high - low) / low.max(1e-9) * 100.0,
        if ratio >= 0.95 { "met" } else { "NOT met" },
    );
    println!(
        "  backups during the load: {taken} taken, {during} uploaded ({}); in all {} taken, {} \
         uploaded, {} failed; the bucket holds {} under {PREFIX} ({}); B's server RSS {:.1} MiB: \
         backups arrived: {}",
        if times.is_empty() {
            "none".to_owned()
        } else {
            times.join(", ")
        },
        r.settled.written,
        r.settled.uploaded,
        r.settled.failed,
        r.objects.len(),
        sizes.join(", "),
        mib(r.rss),
        if wrong.is_empty() {
            "met".to_owned()
        } else {
            format!("NOT met: {}", wrong.join("; "))
        }
    );
    if !wrong.is_empty() {
        failures.push(format!(
            "unique_backup: backups did not arrive: {}",
            wrong.join("; ")
        ));
    }
}
