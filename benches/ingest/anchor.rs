//! `--anchor`: the same durable insert in `PostgreSQL`, measured in the same run, so the tracker's
//! figures have a yardstick a reader knows.
//!
//! A throwaway cluster (Debian's `PostgreSQL`, installed from its packages when missing and the
//! bench runs as root) in a temporary directory, on a Unix socket only, with its defaults:
//! `fsync` and `synchronous_commit` on, so a committed insert is on disk as a tracker answer is.
//! `pgbench` sends, over as many connections as the tracker's row and two threads, a bare
//! `INSERT ... ON CONFLICT DO NOTHING` of an event with a random external id into a table with
//! a unique key: what the tracker does for an event with an `eid`, without HTTP, JSON,
//! validation, attribution or the rollup. With the `batch` row, also `pg_batch`: the same
//! insert of 100 rows a transaction (one `INSERT ... SELECT` of 100 new events, `ON CONFLICT
//! DO NOTHING` on the same key) at the batch row's 16 connections, the rows a second to compare
//! with the batch row's events a second. The cluster is stopped and removed afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::wrk::{apt_install, is_root};

/// The table, with the unique key the insert conflicts on.
const SETUP: &str = "CREATE TABLE events (
  inbox_id bigserial PRIMARY KEY,
  space int NOT NULL,
  eid text NOT NULL,
  event text NOT NULL,
  value numeric,
  currency text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (space, eid)
);
";

/// One transaction of pgbench: a new event (the id is random over 10^15: no repeats in a run).
const INSERT: &str = "\\set n random(1, 1000000000000000)
INSERT INTO events (space, eid, event, value, currency) \
VALUES (1, 'e-' || :client_id || '-' || :n, 'deposit', 12.50, 'USD') \
ON CONFLICT (space, eid) DO NOTHING;
";

/// `pg_batch`'s transaction: [`BATCH_ROWS`] new events in one statement.
const BATCH: &str = "\\set n random(1, 1000000000000000)
INSERT INTO events (space, eid, event, value, currency) \
SELECT 1, 'b-' || :client_id || '-' || :n || '-' || i, 'deposit', 12.50, 'USD' \
FROM generate_series(1, 100) AS i \
ON CONFLICT (space, eid) DO NOTHING;
";

/// Rows in each of `pg_batch`'s transactions, as the batch row sends events in each request.
pub const BATCH_ROWS: u64 = 100;

const PORT: &str = "5499";

/// What `--anchor` measured.
pub struct Anchor {
    pub version: String,
    /// The bare insert, transactions a second, and its connections.
    pub tps: Option<(f64, usize)>,
    /// `pg_batch`: transactions of [`BATCH_ROWS`] rows a second, and its connections.
    pub batch_tps: Option<(f64, usize)>,
}

/// Runs pgbench against a throwaway cluster for `duration`: the bare insert over `bare`
/// connections, then `pg_batch` over `batch`, each if asked.
pub fn measure(
    bare: Option<usize>,
    batch: Option<usize>,
    duration: Duration,
) -> Result<Anchor, String> {
    let bin = find_or_install()?;
    let dir = tempfile::Builder::new()
        .prefix("tracker-anchor-")
        .tempdir()
        .map_err(|e| format!("anchor: a temporary directory: {e}"))?;
    let cluster = Cluster::start(&bin, dir.path())?;
    let result = (|| {
        let tps = match bare {
            Some(conns) => Some((cluster.pgbench("insert.sql", conns, duration)?, conns)),
            None => None,
        };
        let batch_tps = match batch {
            Some(conns) => Some((cluster.pgbench("batch.sql", conns, duration)?, conns)),
            None => None,
        };
        Ok::<_, String>((tps, batch_tps))
    })();
    cluster.stop();
    let (tps, batch_tps) = result?;
    let version = run_as(cluster.user.as_ref(), &bin.join("postgres"), &["--version"])
        .map(|v| v.trim().to_owned())
        .unwrap_or_default();
    Ok(Anchor {
        version,
        tps,
        batch_tps,
    })
}

/// The directory of `PostgreSQL`'s programs, installing Debian's package if it is missing.
fn find_or_install() -> Result<PathBuf, String> {
    let find = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|bin| bin.join("postgres").exists() && bin.join("pgbench").exists())
            .collect();
        found.sort();
        found.pop()
    };
    if let Some(bin) = find() {
        return Ok(bin);
    }
    if !is_root() {
        return Err("anchor: PostgreSQL is not installed and this is not root; \
                    apt-get install postgresql, or leave out --anchor"
            .into());
    }
    eprintln!("installing PostgreSQL (apt-get install -y postgresql) for --anchor ...");
    apt_install(&["postgresql"]);
    find().ok_or_else(|| "anchor: PostgreSQL could not be installed".into())
}

/// A running throwaway cluster.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    socket: PathBuf,
    /// Who runs it: `postgres` when the bench runs as root (`PostgreSQL` refuses root).
    user: Option<String>,
}

impl Cluster {
    fn start(bin: &Path, dir: &Path) -> Result<Cluster, String> {
        let user = is_root().then(|| "postgres".to_owned());
        if let Some(user) = &user {
            let status = Command::new("chown")
                .args(["-R", user])
                .arg(dir)
                .status()
                .map_err(|e| format!("anchor: chown: {e}"))?;
            if !status.success() {
                return Err(format!("anchor: chown {user} {} failed", dir.display()));
            }
        }
        let cluster = Cluster {
            bin: bin.to_owned(),
            data: dir.join("data"),
            socket: dir.to_owned(),
            user,
        };
        let data = cluster.data.display().to_string();
        cluster.run(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        )?;
        let options = format!(
            "-k {} -c listen_addresses='' -p {PORT}",
            cluster.socket.display()
        );
        let log = dir.join("log").display().to_string();
        cluster.run(
            "pg_ctl",
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
        )?;
        let setup = dir.join("setup.sql");
        let insert = dir.join("insert.sql");
        let batch = dir.join("batch.sql");
        for (path, text) in [(&setup, SETUP), (&insert, INSERT), (&batch, BATCH)] {
            std::fs::write(path, text).map_err(|e| format!("anchor: {}: {e}", path.display()))?;
        }
        if let Some(user) = &cluster.user {
            let _ = Command::new("chown")
                .arg(user)
                .arg(&setup)
                .arg(&insert)
                .arg(&batch)
                .status();
        }
        let socket = cluster.socket.display().to_string();
        let setup = setup.display().to_string();
        cluster.run(
            "psql",
            &[
                "-h", &socket, "-p", PORT, "-U", "postgres", "-q", "-f", &setup, "postgres",
            ],
        )?;
        Ok(cluster)
    }

    /// Transactions of `script` a second over `duration`, without the initial connection time.
    fn pgbench(&self, script: &str, conns: usize, duration: Duration) -> Result<f64, String> {
        let socket = self.socket.display().to_string();
        let script = self.socket.join(script).display().to_string();
        let (clients, seconds) = (conns.to_string(), duration.as_secs().max(1).to_string());
        let out = self.run(
            "pgbench",
            &[
                "-h", &socket, "-p", PORT, "-U", "postgres", "-n", "-c", &clients, "-j", "2", "-T",
                &seconds, "-f", &script, "postgres",
            ],
        )?;
        out.lines()
            .find_map(|l| {
                l.strip_prefix("tps = ")?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .ok_or_else(|| format!("anchor: no tps in pgbench's report:\n{out}"))
    }

    fn stop(&self) {
        let data = self.data.display().to_string();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]);
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        run_as(self.user.as_ref(), &self.bin.join(program), args)
    }
}

/// Runs `program` (as `user` when given), answering its standard output or why it failed.
fn run_as(user: Option<&String>, program: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = match user {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    };
    let out = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("anchor: {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "anchor: {} {} failed: {}{}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
