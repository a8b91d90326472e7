//! `cargo bench --bench ingest`: how fast the real tracker takes events, durably, on this machine.
//!
//! A plain program (`harness = false`) that prints a table, as redb's benches do. It starts the
//! release binary on a temporary data file, sets up a space's clicks and some known events, then
//! measures each endpoint at 64 and at 256 connections with `wrk` (or the in-repo client), stops
//! the server, and checks that every acknowledged event is in the data file.
//!
//! Modes (`cargo bench --bench ingest -- --help` has every flag, from flags.rs):
//! - (default) the full table; `--duration SECS` per row (default 10), `--conns 64,256`,
//!   `--only unique,dry_run`, `--client wrk|builtin`, `--log FILE` for the server's log,
//!   `--rate-limit N` to serve with the per-space limit on at `N` a second (burst `N`): with an
//!   `N` no row reaches, what the token bucket costs on the hot path (BENCHMARKS.md).
//! - `--smoke`: a few hundred requests per row with the in-repo client, every count checked;
//!   exits non-zero on any failure. Cheap enough for CI.
//! - `--soak`: unique events at 64 connections in 10 s stretches (wrk unless `--client
//!   builtin`) until 1 million are stored and at least `--soak-secs` (default 300) have passed,
//!   each stretch against the first on the new file, with the server's RSS.
//! - Rows on servers of their own, after the table: `unique_backup` (`backup_s3.rs`: unique
//!   while scheduled backups go to S3, against plain unique before and after) and `import`
//!   (`import.rs`: `tracker import` of 1 M events into a new data file, then again).
//! - `--metrics on|off|both`: the server with `/metrics` counting every request, or not
//!   (default off); `both` runs two servers side by side and measures the chosen ingest rows on
//!   each, alternating, `--rounds N` times (default 3): the cost of counting, in one run.
//! - `--prune`: the unique row at 64 connections with nothing to prune, then while retention
//!   prunes `--prune-entries` (default 200,000) expired dedup entries, then after; on one
//!   server with `dedup_window = "2s"`.
//!
//! See BENCHMARKS.md for the results on the project's machine.

mod anchor;
mod backup_s3;
mod channel;
mod client;
mod cpu;
mod dashboard;
mod deliveries;
mod flags;
// The integration tests' HTTP/1.1 response reader: one reader for both clients.
#[path = "../../tests/it/support/http1.rs"]
mod http1;
mod import;
mod outbound;
mod reads;
mod scenario;
mod server;
mod stand_in;
mod wrk;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Load, MakeRequest};
use flags::Flags;
use reads::{ReadRow, Spread};
use scenario::{Case, Fixture, Template};
use server::Server;
use tracker::storage::{Store, StoreOptions, read};

/// Clicks made during setup (events name them; binds bind them).
const SETUP_CLICKS: usize = 1000;
/// How often the paced read rows send a request: 20 a second, a dashboard or a few followers.
const READ_PACE: Duration = Duration::from_millis(50);
/// Events stored during setup, repeated by the duplicate case.
const KNOWN_EVENTS: usize = 1000;
/// Telegram users bound during setup for the `tg_unique` case: user `i` has `1 + i % 5` bound
/// clicks (900 clicks in all), bound one after another.
const TG_USERS: u64 = 300;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Full,
    Smoke,
    Soak,
    Prune,
}

/// Whether the server under test counts for `/metrics`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum MetricsChoice {
    /// A server without /metrics.
    Off,
    /// A server with /metrics on a port of its own, counting every request.
    On,
    /// Two servers, one of each, measured in turns (--rounds) at each ingest row: the cost of
    /// counting, in one run.
    Both,
}

/// The load generator.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum ClientChoice {
    /// wrk if it is installed or can be, else the in-repo client.
    Auto,
    /// wrk, installed if need be; fails if it cannot be.
    Wrk,
    /// The in-repo client (2 threads).
    Builtin,
}

/// What the flags (flags.rs) ask for.
#[derive(Clone)]
struct Args {
    mode: Mode,
    /// `PostgreSQL`'s insert measured beside the ingest rows (`anchor.rs`).
    anchor: bool,
    duration: Duration,
    conns: Vec<usize>,
    cases: Vec<Case>,
    /// The rows of conversions out, after the ingest rows.
    outs: Vec<outbound::OutRow>,
    /// Deliveries `pending_1m` queues; default 1,000,000, and 20,000 with `--smoke`.
    pending: Option<u64>,
    /// The read rows, after the rows of conversions out.
    reads: Vec<ReadRow>,
    /// Events in the read rows' space; default 1,000,000, and 2,000 with `--smoke`.
    feed_events: Option<u64>,
    client: ClientChoice,
    log: Option<PathBuf>,
    soak_secs: u64,
    soak_events: u64,
    /// Windowed deposits stored for `--prune` to prune.
    prune_entries: u64,
    keep: bool,
    metrics: MetricsChoice,
    /// Turns per server with `--metrics both`.
    rounds: u64,
    /// `rate_limit` and `rate_burst` for the server; off when `None`.
    rate_limit: Option<u64>,
    /// The `joins` row (`channel.rs`), after the ingest rows.
    joins: bool,
    /// The rows on servers of their own, after the table.
    own: OwnRows,
}

/// The rows that start servers of their own, after everything else.
#[derive(Clone)]
struct OwnRows {
    /// `unique_backup` (`backup_s3.rs`).
    backup: bool,
    /// `import` (`import.rs`).
    import: bool,
    /// Events in the import row's file; default 1,000,000, and 10,000 with `--smoke`.
    import_events: Option<u64>,
}

/// Runs the rows of `args.own` and answers what failed; under `--smoke` the import is small
/// and `unique_backup` is skipped, saying why.
fn own_rows(args: &Args, wrk_path: Option<&str>) -> Result<Vec<String>, String> {
    let smoke = args.mode == Mode::Smoke;
    let mut failures = Vec::new();
    if args.own.backup {
        if smoke {
            println!(
                "unique_backup: skipped under --smoke: it needs two scheduled backups during its \
                 load, at least {} s (run it with --only unique_backup)",
                backup_s3::MIN_LOAD.as_secs()
            );
        } else {
            failures.append(&mut backup_s3::run(args, wrk_path)?);
        }
    }
    if args.own.import {
        let default = if smoke { 10_000 } else { 1_000_000 };
        let events = args.own.import_events.unwrap_or(default);
        failures.append(&mut import::run(events, args.keep)?);
    }
    Ok(failures)
}

fn main() -> ExitCode {
    let args = Flags::args();
    if cfg!(debug_assertions) && args.mode != Mode::Smoke {
        // `cargo test --bench ingest` builds this and the server without optimizations: fine
        // for `--smoke`, which judges no figure, and misleading for every figure. Run with no
        // arguments at all, as `cargo test --all-targets` runs it, there is nothing to refuse.
        if std::env::args_os().len() == 1 {
            println!("ingest: an unoptimized build, run without --smoke: nothing measured");
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "FAILED: this is an unoptimized build, whose figures mean nothing: run \
             `cargo bench --bench ingest` for figures (`cargo test --bench ingest -- --smoke` \
             checks the harness only)"
        );
        return ExitCode::from(2);
    }
    let result = match args.mode {
        Mode::Full if args.metrics == MetricsChoice::Both => metrics_cost(&args),
        Mode::Full => full(&args),
        Mode::Smoke => smoke(&args),
        Mode::Soak => soak(&args),
        Mode::Prune => prune(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A temporary directory with the server running on a data file in it, set up for load.
struct Bench {
    dir: tempfile::TempDir,
    server: Server,
    fixture: Arc<Fixture>,
    /// Events stored so far that the data file must hold: setup's plus every acknowledged one.
    acked_events: u64,
    /// Events the server may have stored beyond those: requests in flight when `wrk` stopped
    /// counting.
    unacked_slack: u64,
    /// Load runs so far, which tag their eids.
    runs: u64,
}

impl Bench {
    fn start(args: &Args) -> Result<Bench, String> {
        Bench::start_counting(args, args.metrics == MetricsChoice::On)
    }

    /// [`Bench::start`], with a server that counts for `/metrics` or not.
    fn start_counting(args: &Args, metrics: bool) -> Result<Bench, String> {
        Bench::start_with(args, metrics, "")
    }

    /// [`Bench::start_counting`], with `extra` (TOML) after every other setting: a table such
    /// as `[backup_s3]` goes there.
    fn start_with(args: &Args, metrics: bool, extra: &str) -> Result<Bench, String> {
        let dir = tempfile::Builder::new()
            .prefix("tracker-bench-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        // Every connection of the load comes from 127.0.0.1: the per-address limits are set
        // where they never refuse, but still run (their cost is part of every row).
        // The `unique_dest` case's destinations are on loopback.
        let mut settings = String::from(
            "max_connections_per_address = 1000000\naddress_rate_limit = 10000000\n\
             allow_private_destinations = true\n",
        );
        if metrics {
            // `/metrics` on a port of its own, so the server counts every request.
            settings.push_str("metrics_listen = \"127.0.0.1:0\"\n");
        }
        if let Some(n) = args.rate_limit {
            let _ = writeln!(settings, "rate_limit = {n}\nrate_burst = {n}");
        }
        if args.mode == Mode::Prune {
            // A window short enough that the deposits stored expire during the run, and
            // `/metrics` (if not on already) to count what was pruned.
            settings.push_str("dedup_window = \"2s\"\n");
            if !metrics {
                settings.push_str("metrics_listen = \"127.0.0.1:0\"\n");
            }
        }
        // A channel link's rows: the server talks to the Bot API stand-in.
        let channels = matches!(args.mode, Mode::Full | Mode::Smoke)
            && (args.cases.contains(&Case::ChannelLink) || args.joins);
        if channels {
            settings.push_str(&channel::settings()?);
        }
        settings.push_str(extra);
        let server = Server::start(dir.path(), args.log.as_deref(), &settings)?;
        let mut fixture = Fixture {
            secret: server.secret.clone(),
            ingest_token: server.ingest_token.clone(),
            click_uids: Vec::new(),
            known_events: KNOWN_EVENTS,
            tg_users: Vec::new(),
            run: format!("r{}", std::process::id()),
            dest_secret: String::new(),
        };
        if args.cases.contains(&Case::UniqueDest) {
            let receiver = deliveries::receiver()?;
            fixture.dest_secret = deliveries::setup(server.command(), server.addr, receiver)?;
        }
        let clicks = Template::of(Case::Clicks, &fixture, "setup");
        let requests = (0..SETUP_CLICKS as u64)
            .map(|i| clicks.render(&fixture, i))
            .collect();
        fixture.click_uids = client::click_uids(server.addr, requests)
            .map_err(|e| format!("setting up clicks: {e}"))?;
        if args.cases.contains(&Case::TgUnique) {
            fixture.tg_users = bind_tg_users(server.addr, &fixture)?;
        }
        let made = client::fetch_all(server.addr, 1, vec![Template::bench_link(&fixture)]);
        if !made.iter().all(|(status, _)| (200..300).contains(status)) {
            return Err(format!("setting up the tracking link: {made:?}"));
        }
        if channels {
            channel::setup(server.addr, &fixture.secret)?;
        }
        let requests = (0..KNOWN_EVENTS)
            .map(|i| Template::known_event(&fixture, i))
            .collect();
        for (status, body) in client::fetch_all(server.addr, 16, requests) {
            if status != 200 || !String::from_utf8_lossy(&body).contains(r#""status":"queued""#) {
                return Err(format!(
                    "setting up known events: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
            }
        }
        Ok(Bench {
            dir,
            server,
            fixture: Arc::new(fixture),
            acked_events: KNOWN_EVENTS as u64,
            unacked_slack: 0,
            runs: 0,
        })
    }

    /// Stops the server and checks the data file against what was acknowledged.
    fn finish(self, keep: bool) -> Result<DataCheck, String> {
        self.finish_then(keep, |_| ()).map(|(check, ())| check)
    }

    /// Stops the server, runs `after_stop` with a `tracker` command line on the data file it
    /// left (the direct export), and checks the data file against what was acknowledged.
    fn finish_then<T>(
        self,
        keep: bool,
        after_stop: impl FnOnce(std::process::Command) -> T,
    ) -> Result<(DataCheck, T), String> {
        let peak_rss = self.server.peak_rss().unwrap_or(0);
        let data = self.server.data.clone();
        let (bin, config) = (self.server.bin.clone(), self.server.config.clone());
        let status = self.server.stop()?;
        if !status.success() {
            return Err(format!("the server exited with {status}"));
        }
        let after = after_stop(server::command(&bin, &config, &data));
        let file_bytes = std::fs::metadata(&data).map_or(0, |m| m.len());
        let (stored, usage) = count_events(&data)?;
        let (low, high) = (self.acked_events, self.acked_events + self.unacked_slack);
        let verdict = if stored < low {
            Err(format!(
                "{} acknowledged events are missing: the data file holds {stored}, {low} were \
                 acknowledged",
                low - stored
            ))
        } else if stored > high {
            Err(format!(
                "the data file holds {stored} events, more than the {high} sent"
            ))
        } else {
            Ok(())
        };
        if keep {
            let path = self.dir.keep();
            eprintln!("kept {}", path.display());
        }
        Ok((
            DataCheck {
                stored,
                acked: low,
                file_bytes,
                peak_rss,
                usage,
                verdict,
            },
            after,
        ))
    }
}

/// Makes [`TG_USERS`] Telegram users with one to five bound clicks each (clicks of their own,
/// not the setup clicks the bind case binds); answers their ids.
fn bind_tg_users(addr: std::net::SocketAddr, fixture: &Fixture) -> Result<Vec<u64>, String> {
    let users: Vec<u64> = (0..TG_USERS).map(|i| 5_000_000 + i).collect();
    let owners: Vec<u64> = users
        .iter()
        .enumerate()
        .flat_map(|(i, &user)| std::iter::repeat_n(user, 1 + i % 5))
        .collect();
    let clicks = Template::of(Case::Clicks, fixture, "tg-setup");
    let requests = (0..owners.len() as u64)
        .map(|i| clicks.render(fixture, i))
        .collect();
    let uids = client::click_uids(addr, requests)
        .map_err(|e| format!("setting up the Telegram users' clicks: {e}"))?;
    // One at a time, so each user's bindings have an order.
    let binds = uids
        .iter()
        .zip(&owners)
        .map(|(uid, &user)| Template::bind(fixture, uid, user))
        .collect();
    for (status, body) in client::fetch_all(addr, 1, binds) {
        if status != 200 || !String::from_utf8_lossy(&body).contains(r#""matched":true"#) {
            return Err(format!(
                "binding the Telegram users' clicks: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    Ok(users)
}

struct DataCheck {
    stored: u64,
    acked: u64,
    file_bytes: u64,
    peak_rss: u64,
    usage: Vec<read::TableUsage>,
    verdict: Result<(), String>,
}

impl DataCheck {
    #[allow(clippy::cast_precision_loss)]
    fn bytes_per_event(&self) -> f64 {
        self.file_bytes as f64 / self.stored.max(1) as f64
    }
}

/// Opens the data file with the library, as the server left it, counts the inbox and says
/// where the file's bytes are.
fn count_events(path: &Path) -> Result<(u64, Vec<read::TableUsage>), String> {
    let (store, _) =
        Store::open(path, &StoreOptions::default()).map_err(|e| format!("reopening: {e}"))?;
    let counted = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(store.usage())
        .map_err(|e| format!("counting events: {e}"))?;
    store.close();
    Ok(counted)
}

/// One row of the table.
struct Row {
    label: &'static str,
    /// The ingest case measured; `None` for a read row's side client.
    case: Option<Case>,
    conns: usize,
    responses: u64,
    rate: f64,
    p50: Duration,
    p99: Duration,
    non_2xx: u64,
    errors: u64,
    cpu: cpu::Shares,
    /// The server's resident memory after the row.
    rss: u64,
}

impl Row {
    /// The row of a short run of the in-repo client, too short for CPU shares to mean anything;
    /// the server's RSS after it.
    fn of_count(
        label: &'static str,
        case: Option<Case>,
        conns: usize,
        o: &client::Outcome,
        server: &Server,
    ) -> Row {
        Row {
            label,
            case,
            conns,
            responses: o.responses,
            rate: o.rate(),
            p50: o.latency.quantile(0.5),
            p99: o.latency.quantile(0.99),
            non_2xx: o.non_2xx,
            errors: o.errors,
            cpu: cpu::Shares::default(),
            rss: server.rss().unwrap_or(0),
        }
    }

    /// Server CPU per answered request, in microseconds.
    fn cpu_per_request_us(&self) -> f64 {
        self.cpu.server / 100.0 / self.rate.max(1e-9) * 1e6
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn print_header() {
    println!(
        "| {:<24} | {:>5} | {:>9} | {:>8} | {:>8} | {:>7} | {:>6} | {:>9} | {:>6} | {:>6} | {:>6} | {:>7} |",
        "scenario",
        "conns",
        "req/s",
        "p50 ms",
        "p99 ms",
        "non-2xx",
        "errors",
        "requests",
        "server",
        "load",
        "other",
        "RSS MiB"
    );
    println!(
        "|{:-<26}|{:->7}|{:->11}|{:->10}|{:->10}|{:->9}|{:->8}|{:->11}|{:->8}|{:->8}|{:->8}|{:->9}|",
        "", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":"
    );
}

fn print_row(r: &Row) {
    println!(
        "| {:<24} | {:>5} | {:>9.0} | {:>8} | {:>8} | {:>7} | {:>6} | {:>9} | {:>5.0}% | {:>5.0}% | {:>5.0}% | {:>7.1} |",
        r.label,
        r.conns,
        r.rate,
        ms(r.p50),
        ms(r.p99),
        r.non_2xx,
        r.errors,
        r.responses,
        r.cpu.server,
        r.cpu.load,
        r.cpu.other,
        mib(r.rss)
    );
}

/// What a load generator reported.
enum Loaded {
    Wrk(wrk::Report),
    Builtin(client::Outcome),
}

/// Runs one case at `conns` with the chosen load generator and accounts for stored events.
/// `beside` runs on a thread of its own at the same time, given when the load ends (the read
/// rows' side client); the CPU shares cover both.
fn measure<S: Send>(
    bench: &mut Bench,
    wrk_path: Option<&str>,
    case: Case,
    conns: usize,
    duration: Duration,
    beside: impl FnOnce(Instant) -> S + Send,
) -> Result<(Row, S), String> {
    let fixture = bench.fixture.clone();
    measure_with(bench, wrk_path, &fixture, case, conns, duration, beside)
}

/// [`measure`] with the requests of another space's `fixture` (its secret and clicks).
fn measure_with<S: Send>(
    bench: &mut Bench,
    wrk_path: Option<&str>,
    fixture: &Arc<Fixture>,
    case: Case,
    conns: usize,
    duration: Duration,
    beside: impl FnOnce(Instant) -> S + Send,
) -> Result<(Row, S), String> {
    // A tag per run: eids are numbered afresh in each, and must not repeat an earlier run's.
    bench.runs += 1;
    let tag = format!("{}-{conns}-{}", case.name(), bench.runs);
    let template = Template::of(case, fixture, &tag);
    let addr = bench.server.addr;
    let script = match wrk_path {
        Some(_) => {
            let script = bench.dir.path().join(format!("{tag}.lua"));
            std::fs::write(&script, template.lua(fixture))
                .map_err(|e| format!("writing {}: {e}", script.display()))?;
            Some(script)
        }
        None => None,
    };
    let fixture = fixture.clone();
    let before = cpu::snapshot(bench.server.pid());
    let started = Instant::now();
    let (loaded, side) = std::thread::scope(|scope| {
        let side = scope.spawn(move || beside(started + duration));
        let loaded = match (wrk_path, &script) {
            (Some(wrk_path), Some(script)) => {
                wrk::run(wrk_path, addr, script, conns, duration).map(Loaded::Wrk)
            }
            _ => Ok(Loaded::Builtin(builtin(
                addr,
                &fixture,
                template,
                case,
                Load {
                    conns,
                    duration: Some(duration),
                    max_requests: None,
                },
            ))),
        };
        (loaded, side.join())
    });
    let cpu = cpu::between(
        before,
        cpu::snapshot(bench.server.pid()),
        started.elapsed().as_secs_f64(),
    );
    let side = side.map_err(|_| "the side client panicked".to_owned())?;
    let mut row = match loaded? {
        Loaded::Wrk(r) => {
            if case.stores_an_event() {
                let per = case.events_per_request();
                bench.acked_events += (r.responses - r.non_2xx) * per;
                bench.unacked_slack += (conns as u64 + r.errors) * per;
            }
            Row {
                label: case.label(),
                case: Some(case),
                conns,
                responses: r.responses,
                rate: r.rate,
                p50: r.p50,
                p99: r.p99,
                non_2xx: r.non_2xx,
                errors: r.errors,
                cpu,
                rss: 0,
            }
        }
        Loaded::Builtin(o) => {
            bench.account(case, &o);
            if o.expected != o.ok {
                eprintln!(
                    "warning: {} of {} answers of {} lacked {}",
                    o.ok - o.expected,
                    o.ok,
                    case.label(),
                    case.expect()
                );
            }
            Row {
                label: case.label(),
                case: Some(case),
                conns,
                responses: o.responses,
                rate: o.rate(),
                p50: o.latency.quantile(0.50),
                p99: o.latency.quantile(0.99),
                non_2xx: o.non_2xx,
                errors: o.errors,
                cpu,
                rss: 0,
            }
        }
    };
    row.rss = bench.server.rss().unwrap_or(0);
    Ok((row, side))
}

/// [`measure`] with nothing beside the load.
fn measure_alone(
    bench: &mut Bench,
    wrk_path: Option<&str>,
    case: Case,
    conns: usize,
    duration: Duration,
) -> Result<Row, String> {
    measure(bench, wrk_path, case, conns, duration, |_| ()).map(|(row, ())| row)
}

/// A run of the in-repo client.
fn builtin(
    addr: std::net::SocketAddr,
    fixture: &Arc<Fixture>,
    template: Template,
    case: Case,
    load: Load,
) -> client::Outcome {
    let (fixture, template) = (fixture.clone(), Arc::new(template));
    let make: MakeRequest = Arc::new(move |seq| template.render(&fixture, seq));
    client::run(addr, load, &make, Some(case.expect()))
}

impl Bench {
    /// Counts what a run of the in-repo client stored; it counts acknowledged events exactly.
    fn account(&mut self, case: Case, o: &client::Outcome) {
        if case.stores_an_event() {
            // Answered `queued`: new events. (A `duplicate` answer stored nothing.)
            self.acked_events += o.expected * case.events_per_request();
            // A request whose connection failed may or may not have been stored.
            self.unacked_slack += o.errors * case.events_per_request();
        }
    }

    /// Runs `template` with the in-repo client and accounts for what it stored.
    fn builtin(&mut self, template: Template, case: Case, load: Load) -> client::Outcome {
        let o = builtin(self.server.addr, &self.fixture, template, case, load);
        self.account(case, &o);
        o
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown kernel".into(), |k| k.trim().to_owned());
    format!("{cpus} CPUs ({model}), Linux {kernel}")
}

#[allow(clippy::cast_precision_loss)]
fn per(bytes: u64, n: u64) -> f64 {
    bytes as f64 / n.max(1) as f64
}

#[allow(clippy::cast_precision_loss)]
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `wrk`'s path, or `None` for the in-repo client, as `--client` asks.
fn load_generator(args: &Args) -> Result<Option<String>, String> {
    Ok(match args.client {
        ClientChoice::Builtin => None,
        ClientChoice::Auto => wrk::find_or_install(),
        ClientChoice::Wrk => {
            Some(wrk::find_or_install().ok_or("--client wrk, but wrk is not available")?)
        }
    })
}

/// `--anchor`: the bare insert beside the unique row (or alone when neither row runs),
/// `pg_batch` beside the batch row at its 16 connections.
fn measure_anchor(args: &Args) -> Result<Option<anchor::Anchor>, String> {
    if !args.anchor {
        return Ok(None);
    }
    let batch = args.cases.contains(&Case::Batch);
    let bare = args.cases.contains(&Case::Unique) || !batch;
    anchor::measure(bare.then_some(64), batch.then_some(16), args.duration).map(Some)
}

fn full(args: &Args) -> Result<(), String> {
    let wrk_path = load_generator(args)?;
    println!("machine: {}", machine());
    let mut bench = Bench::start(args)?;
    println!(
        "load: {} for {} s per row, on the same machine; server: {} (a copy of {}), pid {}",
        wrk_path
            .as_deref()
            .map_or("the in-repo client (2 threads)", |_| "wrk -t2"),
        args.duration.as_secs(),
        bench.server.bin.display(),
        server::tracker_binary().display(),
        bench.server.pid(),
    );
    println!(
        "setup: {SETUP_CLICKS} clicks and {KNOWN_EVENTS} known events on {}\n",
        bench.server.data.display()
    );
    print_header();
    let mut rows = Vec::new();
    for &conns in &args.conns {
        for &case in &args.cases {
            let row = measure_alone(&mut bench, wrk_path.as_deref(), case, conns, args.duration)?;
            print_row(&row);
            rows.push(row);
            // Let the writer drain and the sockets close before the next row.
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    if args.cases.contains(&Case::ChannelLink) {
        channel::report_link(bench.server.addr, &bench.fixture.secret);
    }
    let ingest_peak = bench.server.peak_rss().unwrap_or(0);
    let joins = channel_joins(&mut bench, args, channel::JOINS)?;
    let out_plan = outbound::OutPlan {
        conns: &args.conns,
        duration: args.duration,
        pending: args.pending.unwrap_or(1_000_000),
        drain_limit: (args.duration * 6).max(Duration::from_secs(60)),
        hint_clicks: None,
    };
    let mut outs = outbound::run(&mut bench, wrk_path.as_deref(), &args.outs, &out_plan)?;
    // Beside the ingest rows, on the same quiet machine: the server waits idle meanwhile.
    let anchor = measure_anchor(args)?;
    let plan = ReadPlan {
        events: args.feed_events.unwrap_or(1_000_000),
        duration: args.duration,
        min_side: 20,
        paces: &[None, Some(READ_PACE)],
        settle: Duration::from_secs(1),
        formats: &["ndjson"],
    };
    let mut reads = if args.reads.is_empty() {
        None
    } else {
        Some(read_rows(
            &mut bench,
            wrk_path.as_deref(),
            &plan,
            &args.reads,
        )?)
    };
    let data = bench.server.data.clone();
    let (stored, direct) = bench.finish_then(args.keep, |cli| {
        outbound::after_stop(&data, &mut outs);
        reads.as_ref().map(|r| export_direct(&cli, r, plan.formats))
    })?;
    println!();
    report_ingest(&rows, &args.conns);
    if let Some(joins) = &joins {
        channel::report_joins(joins);
    }
    if let Some(anchor) = &anchor {
        report_anchor(&rows, anchor);
    }
    println!(
        "server peak RSS after the ingest rows (VmHWM): {:.1} MiB",
        mib(ingest_peak)
    );
    let mut failures = std::mem::take(&mut outs.failures);
    if let Some(reads) = &mut reads {
        reads.add_exports(direct.unwrap_or_default());
        let unique_alone = rows
            .iter()
            .find(|r| r.case == Some(Case::Unique) && r.conns == 64)
            .map(|r| r.rate);
        report_reads(reads, &plan, unique_alone);
        failures.append(&mut reads.failures);
    }
    report_stored(&stored);
    if let Err(e) = stored.verdict {
        failures.push(e);
    }
    // The rows on servers of their own, once the table's server has stopped.
    failures.append(&mut own_rows(args, wrk_path.as_deref())?);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// `--metrics both`: what counting for `/metrics` costs. Two servers run side by side, one
/// with `metrics_listen` and one without; each chosen ingest row is measured on each in turns
/// (off then on, then on then off, ...), so drift in the machine's load falls on both alike.
fn metrics_cost(args: &Args) -> Result<(), String> {
    let wrk_path = load_generator(args)?;
    println!("machine: {}", machine());
    let mut benches = [
        Bench::start_counting(args, false)?,
        Bench::start_counting(args, true)?,
    ];
    println!(
        "metrics off: pid {}; metrics on: pid {} (/metrics on {:?}); {} s per row, {} rounds, \
         load {}\n",
        benches[0].server.pid(),
        benches[1].server.pid(),
        benches[1].server.metrics,
        args.duration.as_secs(),
        args.rounds,
        wrk_path.as_deref().map_or("in-repo client", |_| "wrk -t2"),
    );
    print_header();
    let mut summaries = Vec::new();
    for &conns in &args.conns {
        for &case in &args.cases {
            let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            let mut cpu_us: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            let mut busy = false;
            for round in 0..args.rounds {
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for which in order {
                    let bench = &mut benches[which];
                    let mut row =
                        measure_alone(bench, wrk_path.as_deref(), case, conns, args.duration)?;
                    // A handful of rows per run: leaking their labels costs nothing.
                    let state = ["metrics off", "metrics on"][which];
                    row.label =
                        Box::leak(format!("{}, {state}", row.label.trim()).into_boxed_str());
                    print_row(&row);
                    busy |= row.cpu.busy();
                    rates[which].push(row.rate);
                    cpu_us[which].push(row.cpu_per_request_us());
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            summaries.push((case, conns, rates, cpu_us, busy));
        }
    }
    let mut failures = Vec::new();
    for bench in benches {
        let stored = bench.finish(args.keep)?;
        if let Err(e) = stored.verdict {
            failures.push(e);
        }
    }
    println!();
    for (case, conns, [off, on], [cpu_off, cpu_on], busy) in summaries {
        let (off_median, on_median) = (median(&off), median(&on));
        println!(
            "{} at {conns} connections: metrics off {:.0} req/s (rows {}), on {:.0} (rows {}): \
             on/off {:.3}; the rows of one server spread {:.1}% (off) and {:.1}% (on) around \
             their median{}",
            case.name(),
            off_median,
            figures(&off, 0),
            on_median,
            figures(&on, 0),
            on_median / off_median.max(1e-9),
            spread_percent(&off),
            spread_percent(&on),
            if busy {
                "; some rows were measured beside other work"
            } else {
                ""
            },
        );
        // The server's own CPU per request moves less with the machine's load than the rate.
        println!(
            "{} at {conns} connections: server CPU per request, metrics off {:.1} us (rows {}), \
             on {:.1} us (rows {}): on/off {:.3}",
            case.name(),
            median(&cpu_off),
            figures(&cpu_off, 1),
            median(&cpu_on),
            figures(&cpu_on, 1),
            median(&cpu_on) / median(&cpu_off).max(1e-9),
        );
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

/// (max - min) / median, in percent: how far apart the same server's rows fell.
fn spread_percent(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    (max - min) / median(values).max(1e-9) * 100.0
}

/// `values` with `decimals` digits after the point, joined by commas.
fn figures(values: &[f64], decimals: usize) -> String {
    values
        .iter()
        .map(|r| format!("{r:.decimals$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ingest rows' figures against their targets: `dry_run` beside durable unique, and the
/// server CPU each request took; and which rows were measured beside other work.
fn report_ingest(rows: &[Row], all_conns: &[usize]) {
    for (i, &conns) in all_conns.iter().enumerate() {
        // `--conns 16,16` measures each row twice: the second figure is each case's second
        // row at that count, not its first again.
        let round = all_conns[..i].iter().filter(|&&c| c == conns).count();
        let find = |case| {
            rows.iter()
                .filter(|r| r.case == Some(case) && r.conns == conns)
                .nth(round)
        };
        if let (Some(unique), Some(health)) = (find(Case::Unique), find(Case::Healthz)) {
            println!(
                "durable unique / healthz (the HTTP ceiling) at {conns} connections: {:.0} / \
                 {:.0} = {:.2}x",
                unique.rate,
                health.rate,
                unique.rate / health.rate.max(1e-9),
            );
        }
        if let (Some(unique), Some(dry)) = (find(Case::Unique), find(Case::DryRun)) {
            println!(
                "durable unique / dry_run at {conns} connections: {:.0} / {:.0} = {:.2}x \
                 (dry_run/unique {:.2}x); unique p99 {} ms; server CPU per request: dry_run \
                 {:.1} us, unique {:.1} us",
                unique.rate,
                dry.rate,
                unique.rate / dry.rate.max(1e-9),
                dry.rate / unique.rate.max(1e-9),
                ms(unique.p99),
                dry.cpu_per_request_us(),
                unique.cpu_per_request_us(),
            );
        }
        // Each event's deliveries, written in its transaction, cost little; so does the
        // look-up of a Telegram user's first bound click.
        for case in [Case::UniqueDest, Case::TgUnique] {
            if let (Some(row), Some(unique)) = (find(case), find(Case::Unique)) {
                let ratio = row.rate / unique.rate.max(1e-9);
                println!(
                    "{} / durable unique at {conns} connections: {:.0} / {:.0} = {ratio:.2}x; \
                     p99 {} ms (target >= 0.9x: {})",
                    row.label,
                    row.rate,
                    unique.rate,
                    ms(row.p99),
                    if ratio >= 0.9 { "met" } else { "NOT met" }
                );
            }
        }
        // A batch's events, each deduplicated and attributed as a single event is, against the
        // target of 150,000 durable events a second.
        if let Some(batch) = find(Case::Batch) {
            #[allow(clippy::cast_precision_loss)]
            let events = batch.rate * scenario::BATCH_EVENTS as f64;
            println!(
                "{}: {events:.0} durable events/s at {conns} connections ({:.0} batches/s, p99 \
                 {} ms; target >= 150000: {})",
                batch.label,
                batch.rate,
                ms(batch.p99),
                // A refused batch stored nothing: any such answer means the row measured
                // something else (wrk once sent its default request, the script not loading).
                if batch.non_2xx > 0 {
                    "NOT met: some answers were not 2xx"
                } else if events >= 150_000.0 {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
        // The click rows' figure: a click is as cheap to take as an event.
        for case in [Case::Link, Case::LinkFbclid, Case::Clicks] {
            if let (Some(row), Some(unique)) = (find(case), find(Case::Unique)) {
                let ratio = row.rate / unique.rate.max(1e-9);
                let met = conns != 64 || (ratio >= 0.9 && row.p99.as_secs_f64() <= 0.005);
                println!(
                    "{} / durable unique at {conns} connections: {:.0} / {:.0} = {ratio:.2}x; \
                     p99 {} ms{}",
                    row.label,
                    row.rate,
                    unique.rate,
                    ms(row.p99),
                    match (conns, met) {
                        (64, true) => " (target >= 0.9x, p99 <= 5 ms: met)",
                        (64, false) => " (target >= 0.9x, p99 <= 5 ms: NOT met)",
                        _ => "",
                    }
                );
            }
        }
        if let (Some(channel), Some(link)) = (find(Case::ChannelLink), find(Case::Link)) {
            let ratio = channel.rate / link.rate.max(1e-9);
            println!(
                "{} / {} at {conns} connections: {:.0} / {:.0} = {ratio:.2}x; p99 {} ms (target \
                 >= 0.9x: {})",
                channel.label,
                link.label,
                channel.rate,
                link.rate,
                ms(channel.p99),
                if ratio >= 0.9 { "met" } else { "NOT met" }
            );
        }
        // The means of every round: once per connection count, after its last round.
        if !all_conns[i + 1..].contains(&conns) {
            report_click_ids(rows, conns);
            report_ceiling_rounds(rows, conns);
        }
    }
    note_busy(rows);
}

/// Durable unique against `healthz` over every round at `conns` (`--conns 64,64,64` alternates
/// the rows), when there was more than one: `healthz` alone moves by a fifth from one run to the
/// next on this machine, so one round's ratio says little. Target at 64 connections: 0.4x.
fn report_ceiling_rounds(rows: &[Row], conns: usize) {
    let rates = |case| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.case == Some(case) && r.conns == conns)
            .map(|r| r.rate)
            .collect()
    };
    let (unique, health) = (rates(Case::Unique), rates(Case::Healthz));
    if unique.len() < 2 || health.len() < 2 {
        return;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / f64::from(u32::try_from(v.len()).unwrap_or(1));
    let ratio = mean(&unique) / mean(&health).max(1e-9);
    println!(
        "durable unique / healthz at {conns} connections, mean of {} and {} rounds: {:.0} / \
         {:.0} = {ratio:.3}x (unique {}; healthz {}){}",
        unique.len(),
        health.len(),
        mean(&unique),
        mean(&health),
        figures(&unique, 0),
        figures(&health, 0),
        match (conns, ratio >= 0.4) {
            (64, true) => " (target >= 0.4x: met)",
            (64, false) => " (target >= 0.4x: NOT met)",
            _ => "",
        }
    );
}

/// The rows of `TikTok`'s and Google's click ids against Meta's `fbclid` at `conns`, and the
/// channel link's against the bot link's: the mean of every round of each row (`--conns
/// 64,64,64` alternates the rows), as one round moves with the machine. Targets: within 0.95x
/// of `fbclid`'s, and at least 0.9x of the bot link's.
fn report_click_ids(rows: &[Row], conns: usize) {
    let mean = |case| {
        let rates: Vec<f64> = rows
            .iter()
            .filter(|r| r.case == Some(case) && r.conns == conns)
            .map(|r| r.rate)
            .collect();
        (!rates.is_empty()).then(|| {
            (
                rates.iter().sum::<f64>()
                    / f64::from(u32::try_from(rates.len()).unwrap_or(u32::MAX)),
                rates.len(),
            )
        })
    };
    // A channel link's visit against the bot link's, the same way: the rows alternate, so the
    // file each round writes into grows alike for both.
    if let (Some((rate, rounds)), Some((link, _))) = (mean(Case::ChannelLink), mean(Case::Link)) {
        let ratio = rate / link.max(1e-9);
        println!(
            "{} / {} at {conns} connections, mean of {rounds} round(s): {rate:.0} / {link:.0} = \
             {ratio:.2}x (target >= 0.9x: {})",
            Case::ChannelLink.label(),
            Case::Link.label(),
            if ratio >= 0.9 { "met" } else { "NOT met" }
        );
    }
    for case in [Case::LinkTtclid, Case::LinkGclid] {
        if let (Some((rate, rounds)), Some((fbclid, _))) = (mean(case), mean(Case::LinkFbclid)) {
            let ratio = rate / fbclid.max(1e-9);
            println!(
                "{} / GET /l/<slug> fbclid at {conns} connections, mean of {rounds} \
                 round(s): {rate:.0} / {fbclid:.0} = {ratio:.2}x{}",
                case.label(),
                match (conns, ratio >= 0.95) {
                    (64, true) => " (target >= 0.95x: met)",
                    (64, false) => " (target >= 0.95x: NOT met)",
                    _ => "",
                }
            );
        }
    }
}

/// The unique row against `PostgreSQL`'s insert in the same run, and the batch row's events
/// against `pg_batch`'s rows, each at the same connections.
fn report_anchor(rows: &[Row], anchor: &anchor::Anchor) {
    let find = |case, conns| {
        rows.iter()
            .find(|r| r.case == Some(case) && r.conns == conns)
    };
    if let Some((tps, conns)) = anchor.tps {
        match find(Case::Unique, conns) {
            Some(unique) => println!(
                "durable unique / {} (pgbench, INSERT ... ON CONFLICT, {conns} connections): \
                 {:.0} / {tps:.0} = {:.2}x",
                anchor.version,
                unique.rate,
                unique.rate / tps.max(1e-9)
            ),
            None => println!(
                "{}: {tps:.0} transactions/s (pgbench, INSERT ... ON CONFLICT, {conns} \
                 connections); no unique row at {conns} connections to compare",
                anchor.version
            ),
        }
    }
    if let Some((tps, conns)) = anchor.batch_tps {
        #[allow(clippy::cast_precision_loss)]
        let (pg_rows, per) = (
            tps * anchor::BATCH_ROWS as f64,
            scenario::BATCH_EVENTS as f64,
        );
        match find(Case::Batch, conns) {
            Some(batch) => {
                let events = batch.rate * per;
                println!(
                    "{} / {} pg_batch (pgbench, {} rows a transaction, ON CONFLICT DO NOTHING, \
                     {conns} connections): {events:.0} / {pg_rows:.0} rows/s ({tps:.0} \
                     transactions/s) = {:.2}x (target >= 1x: {})",
                    batch.label,
                    anchor.version,
                    anchor::BATCH_ROWS,
                    events / pg_rows.max(1e-9),
                    if batch.non_2xx > 0 {
                        "NOT met: some answers were not 2xx"
                    } else if events >= pg_rows {
                        "met"
                    } else {
                        "NOT met"
                    }
                );
            }
            None => println!(
                "{} pg_batch: {pg_rows:.0} rows/s ({tps:.0} transactions of {} rows, {conns} \
                 connections); no batch row at {conns} connections to compare",
                anchor.version,
                anchor::BATCH_ROWS
            ),
        }
    }
}

/// Names the rows measured beside other work (`cpu::Shares::busy`): other processes' disk
/// writes slow every fsync while using little CPU, so CPU alone does not show them.
fn note_busy<'a>(rows: impl IntoIterator<Item = &'a Row>) {
    let busy: Vec<String> = rows
        .into_iter()
        .filter(|r| r.cpu.busy())
        .map(|r| {
            format!(
                "{} at {} ({:.0}% of a CPU; {:.1} MiB/s written beside the server's {:.1})",
                r.label.trim(),
                r.conns,
                r.cpu.other,
                r.cpu.other_writes,
                r.cpu.server_writes
            )
        })
        .collect();
    if !busy.is_empty() {
        println!(
            "note: measured beside other work (more than 20% of a CPU, or disk writes beyond \
             1 MiB/s + 15% of the server's own): {}; re-run those rows with --only",
            busy.join(", ")
        );
    }
}

/// How big and how long the read rows are.
struct ReadPlan {
    /// Events in the read rows' space.
    events: u64,
    duration: Duration,
    /// The fewest answers the side client collects, however long they take.
    min_side: u64,
    /// How each read row's side client sends: back to back (`None`), then one every so often.
    paces: &'static [Option<Duration>],
    /// The pause between rows, for the writer to drain and the sockets to close.
    settle: Duration,
    /// Formats to export in.
    formats: &'static [&'static str],
}

/// What the read rows measured.
struct ReadResults {
    /// Events in the read rows' space.
    events: u64,
    /// Filling it: events added and how long it took.
    filled: (u64, Duration),
    /// Each read row: how its side client was paced, its row and the ingest row beside it.
    rows: Vec<(ReadRow, Option<Duration>, Row, Row)>,
    exports: Vec<ExportLine>,
    /// Where the last tenth of the space starts (an `after` for export), and its events.
    tail: Option<(u64, u64)>,
    failures: Vec<String>,
}

impl ReadResults {
    fn add_exports(&mut self, exports: Vec<Result<ExportLine, String>>) {
        for e in exports {
            match e {
                Ok(line) => self.exports.push(line),
                Err(e) => self.failures.push(e),
            }
        }
    }
}

struct ExportLine {
    via: &'static str,
    format: &'static str,
    events: u64,
    run: reads::Export,
}

/// The read rows: makes and fills the space, runs each selected row beside unique ingest at 64
/// connections, and exports through the server (at a tenth of the size first, then at full).
fn read_rows(
    bench: &mut Bench,
    wrk_path: Option<&str>,
    plan: &ReadPlan,
    rows: &[ReadRow],
) -> Result<ReadResults, String> {
    let addr = bench.server.addr;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut spread =
        reads::create_space(|| bench.server.command(), addr, &bench.fixture.run, now_ms)?;
    if rows.contains(&ReadRow::Dashboard) {
        spread.admin_cookie = dashboard::log_in(bench.server.command(), addr)?;
    }
    let mut results = ReadResults {
        events: 0,
        filled: (0, Duration::ZERO),
        rows: Vec::new(),
        exports: Vec::new(),
        tail: None,
        failures: Vec::new(),
    };
    let tenth = plan.events / 10;
    if rows.contains(&ReadRow::Export) {
        fill_spread(bench, &mut spread, tenth, &mut results)?;
        export_through_server(bench, &spread, plan, &mut results, None);
    }
    fill_spread(bench, &mut spread, plan.events, &mut results)?;
    let sides = rows.iter().filter(|&&r| r != ReadRow::Export);
    for (row, &pace) in sides.flat_map(|&r| plan.paces.iter().map(move |p| (r, p))) {
        let (ingest, side) = measure(
            bench,
            wrk_path,
            Case::Unique,
            64,
            plan.duration,
            |deadline| reads::side(addr, (row, pace), &spread, deadline, plan.min_side),
        )?;
        let side_row = Row {
            label: row.label(pace),
            case: None,
            conns: 1,
            responses: side.responses,
            rate: side.rate(),
            p50: side.latency.quantile(0.50),
            p99: side.latency.quantile(0.99),
            non_2xx: side.non_2xx,
            errors: side.errors,
            cpu: ingest.cpu,
            rss: ingest.rss,
        };
        let ingest = Row {
            label: "  + POST /events unique",
            ..ingest
        };
        print_row(&side_row);
        print_row(&ingest);
        if side.non_2xx + side.errors + side.wrong > 0 {
            results.failures.push(format!(
                "{}: {} non-2xx, {} errors, {} wrong answers: {}",
                row.label(pace),
                side.non_2xx,
                side.errors,
                side.wrong,
                side.samples.join(" | ")
            ));
        }
        if ingest.non_2xx + ingest.errors > 0 {
            results.failures.push(format!(
                "unique ingest beside {}: {} non-2xx, {} errors",
                row.label(pace),
                ingest.non_2xx,
                ingest.errors
            ));
        }
        results.rows.push((row, pace, side_row, ingest));
        std::thread::sleep(plan.settle);
    }
    if rows.contains(&ReadRow::Export) {
        // Notes where the last tenth starts, for the same size exported from the file.
        let mark = (tenth > 0).then(|| spread.events - tenth - 1);
        export_through_server(bench, &spread, plan, &mut results, mark);
        results.tail = results
            .exports
            .iter()
            .rev()
            .find_map(|e| e.run.marked)
            .map(|after| (after, tenth));
    }
    results.events = spread.events;
    Ok(results)
}

/// Fills the read rows' space to `target` events, counting them as acknowledged.
fn fill_spread(
    bench: &mut Bench,
    spread: &mut Spread,
    target: u64,
    results: &mut ReadResults,
) -> Result<(), String> {
    let f = reads::fill(bench.server.addr, spread, target)?;
    bench.acked_events += f.added;
    results.filled.0 += f.added;
    results.filled.1 += f.elapsed;
    Ok(())
}

/// `tracker export` of the read rows' space while the server runs, in each of the plan's
/// formats; the first (ndjson) notes the `inbox_id` of line `mark`.
fn export_through_server(
    bench: &Bench,
    spread: &Spread,
    plan: &ReadPlan,
    results: &mut ReadResults,
    mark: Option<u64>,
) {
    for (i, &format) in plan.formats.iter().enumerate() {
        let mark = if i == 0 { mark } else { None };
        match reads::export(&bench.server.command(), format, 0, mark) {
            Ok(run) => results.exports.push(ExportLine {
                via: "the server (socket)",
                format,
                events: spread.events,
                run,
            }),
            Err(e) => results.failures.push(e),
        }
    }
}

/// `tracker export` on the data file the server left (opened by the command itself): the whole
/// space in each format, then its last tenth, to compare memory with the same sizes as through
/// the server.
fn export_direct(
    cli: &std::process::Command,
    reads: &ReadResults,
    formats: &[&'static str],
) -> Vec<Result<ExportLine, String>> {
    let line = |format, events, run| ExportLine {
        via: "the file (stopped)",
        format,
        events,
        run,
    };
    let mut out = Vec::new();
    if let Some(&(after, events)) = reads.tail.as_ref() {
        out.push(
            reads::export(cli, formats[0], after, None).map(|run| line(formats[0], events, run)),
        );
    }
    for &format in formats {
        out.push(reads::export(cli, format, 0, None).map(|run| line(format, reads.events, run)));
    }
    out
}

/// Prints the read rows' figures against their targets, checks the exports' line counts,
/// and adds what failed to `r.failures`.
fn report_reads(r: &mut ReadResults, plan: &ReadPlan, unique_alone: Option<f64>) {
    let (added, took) = r.filled;
    #[allow(clippy::cast_precision_loss)]
    let fill_rate = added as f64 / took.as_secs_f64().max(1e-9);
    println!(
        "read rows: space {:?} of {} events ({} clicks over {} campaigns and {} links, half \
         bound; each campaign's events spread over {} hours; a cost for each campaign on each \
         of the last {} days), filled through POST /events at {fill_rate:.0} events/s",
        reads::SPACE,
        r.events,
        reads::CLICKS,
        reads::CAMPAIGNS,
        reads::LINKS,
        reads::hours_used(r.events),
        reads::COST_DAYS,
    );
    note_busy(r.rows.iter().map(|(_, _, side, _)| side));
    for (row, pace, side, ingest) in &r.rows {
        let p99 = side.p99.as_secs_f64() * 1000.0;
        let how = match pace {
            None => "back to back".to_owned(),
            Some(p) => format!("one every {} ms", p.as_millis()),
        };
        let alone = match unique_alone {
            Some(rate) => format!(", {:.0}% of its rate alone", ingest.rate / rate * 100.0),
            None => String::new(),
        };
        println!(
            "{}, {how}: p99 {} ms (p50 {} ms, {} requests) beside durable unique ingest at 64 \
             connections ({:.0} req/s{alone}, p99 {} ms): target p99 <= {} ms {}",
            row.title(),
            ms(side.p99),
            ms(side.p50),
            side.responses,
            ingest.rate,
            ms(ingest.p99),
            row.target_p99_ms(),
            if p99 <= row.target_p99_ms() {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    report_exports(r, plan);
}

/// The exports' table, their line counts checked, and how their memory grew with the size.
fn report_exports(r: &mut ReadResults, plan: &ReadPlan) {
    if r.exports.is_empty() {
        return;
    }
    println!();
    println!(
        "| {:<20} | {:>6} | {:>9} | {:>7} | {:>9} | {:>10} | {:>13} | {:>6} |",
        "tracker export via",
        "format",
        "events",
        "wall s",
        "events/s",
        "output MiB",
        "peak RSS MiB",
        "CPU s"
    );
    println!(
        "|{:-<22}|{:-<8}|{:->11}|{:->9}|{:->11}|{:->12}|{:->15}|{:->8}|",
        "", "", ":", ":", ":", ":", ":", ":"
    );
    for e in &r.exports {
        #[allow(clippy::cast_precision_loss)]
        let rate = e.events as f64 / e.run.wall.as_secs_f64().max(1e-9);
        println!(
            "| {:<20} | {:>6} | {:>9} | {:>7.2} | {:>9.0} | {:>10.1} | {:>13.1} | {:>6.2} |",
            e.via,
            e.format,
            e.events,
            e.run.wall.as_secs_f64(),
            rate,
            mib(e.run.bytes),
            mib(e.run.peak_rss_kib * 1024),
            e.run.cpu_s
        );
        let header = u64::from(e.format == "csv");
        if e.run.lines != e.events + header {
            r.failures.push(format!(
                "tracker export via {} ({}) wrote {} lines for {} events",
                e.via, e.format, e.run.lines, e.events
            ));
        }
    }
    for via in ["the server (socket)", "the file (stopped)"] {
        let runs: Vec<&ExportLine> = r
            .exports
            .iter()
            .filter(|e| e.via == via && e.format == plan.formats[0])
            .collect();
        let small = runs.iter().min_by_key(|e| e.events);
        let large = runs.iter().max_by_key(|e| e.events);
        if let (Some(small), Some(large)) = (small, large) {
            if small.events == large.events {
                continue;
            }
            #[allow(clippy::cast_precision_loss)]
            let growth = large.run.peak_rss_kib as f64 / small.run.peak_rss_kib.max(1) as f64;
            println!(
                "export peak RSS through {via}: {} events {:.1} MiB, {} events {:.1} MiB \
                 ({growth:.2}x for {}x the events)",
                small.events,
                mib(small.run.peak_rss_kib * 1024),
                large.events,
                mib(large.run.peak_rss_kib * 1024),
                large.events / small.events.max(1)
            );
        }
    }
}

fn report_stored(s: &DataCheck) {
    println!(
        "stored events: {} (acknowledged: {}); data file {:.1} MiB = {:.0} bytes per stored event",
        s.stored,
        s.acked,
        mib(s.file_bytes),
        s.bytes_per_event()
    );
    for u in &s.usage {
        let pages = (u.leaf_pages + u.branch_pages) * 4096;
        println!(
            "  {:<6} {:>9} entries, {:>8.1} MiB in {} pages: {:.0} B/entry stored, {:.0} \
             metadata, {:.0} unused in pages",
            u.table,
            u.entries,
            mib(pages),
            u.leaf_pages + u.branch_pages,
            per(u.stored_bytes, u.entries),
            per(u.metadata_bytes, u.entries),
            per(u.fragmented_bytes, u.entries),
        );
    }
    let event_pages: u64 = s
        .usage
        .iter()
        .filter(|u| u.table == "inbox" || u.table == "dedup")
        .map(|u| u.leaf_pages + u.branch_pages)
        .sum();
    println!(
        "  events in their tables (inbox + dedup pages): {:.0} bytes per stored event; the rest \
         of the file is clicks and space redb has grown into but not yet used",
        per(event_pages * 4096, s.stored)
    );
    let pages_of = |table: &str| {
        s.usage
            .iter()
            .filter(|u| u.table == table)
            .map(|u| u.leaf_pages + u.branch_pages)
            .sum::<u64>()
    };
    let clicks: u64 = s
        .usage
        .iter()
        .filter(|u| u.table == "clicks")
        .map(|u| u.entries)
        .sum();
    let click_pages = pages_of("clicks") + pages_of("clicks_by_fbclid") + pages_of("clicks_by_tg");
    println!(
        "  clicks in their tables (clicks + clicks_by_fbclid + clicks_by_tg pages): {:.0} bytes \
         per stored click ({clicks} clicks); the whole file less the event tables' pages: {:.0} \
         bytes per stored click",
        per(click_pages * 4096, clicks),
        per(s.file_bytes.saturating_sub(event_pages * 4096), clicks)
    );
    println!("server peak RSS (VmHWM): {:.1} MiB", mib(s.peak_rss));
    match &s.verdict {
        Ok(()) => println!("check: every acknowledged event is in the data file"),
        Err(e) => println!("check FAILED: {e}"),
    }
}

fn smoke(args: &Args) -> Result<(), String> {
    const REQUESTS: u64 = 300;
    const CONNS: usize = 16;
    println!("smoke: {REQUESTS} requests per case over {CONNS} connections, in-repo client");
    let mut bench = Bench::start(args)?;
    let mut failures = Vec::new();
    print_header();
    for &case in &args.cases {
        let template = Template::of(case, &bench.fixture, &format!("smoke-{}", case.name()));
        let load = Load {
            conns: CONNS,
            duration: Some(Duration::from_secs(60)),
            max_requests: Some(REQUESTS),
        };
        let o = bench.builtin(template, case, load);
        print_row(&Row::of_count(
            case.label(),
            Some(case),
            CONNS,
            &o,
            &bench.server,
        ));
        if o.responses != REQUESTS || o.non_2xx > 0 || o.errors > 0 {
            failures.push(format!(
                "{}: {} answers of {REQUESTS}, {} non-2xx, {} errors",
                case.label(),
                o.responses,
                o.non_2xx,
                o.errors
            ));
        }
        if o.expected != o.ok {
            failures.push(format!(
                "{}: {} of {} answers lacked {}",
                case.label(),
                o.ok - o.expected,
                o.ok,
                case.expect()
            ));
        }
        if case == Case::UniqueDest {
            // Each event made one delivery per destination, in its own transaction.
            let made = deliveries::deliveries(bench.server.addr, &bench.fixture.dest_secret)?;
            println!("  deliveries per destination: {made:?}");
            if made != [REQUESTS, REQUESTS] {
                failures.push(format!(
                    "{}: deliveries per destination {made:?}, expected {REQUESTS} each",
                    case.label()
                ));
            }
        }
    }
    if args.cases.contains(&Case::ChannelLink) {
        channel::report_link(bench.server.addr, &bench.fixture.secret);
    }
    if let Some(joins) = channel_joins(&mut bench, args, channel::SMOKE_JOINS)? {
        channel::report_joins(&joins);
    }
    let out_plan = outbound::OutPlan::smoke(&[CONNS], args.pending, REQUESTS);
    let mut outs = outbound::run(&mut bench, None, &args.outs, &out_plan)?;
    failures.append(&mut outs.failures);
    // The read rows at a small size, beside ingest for a second each; the exports in both
    // formats, through the server and (after it stops) on the file.
    let plan = ReadPlan {
        events: args.feed_events.unwrap_or(2_000),
        duration: Duration::from_secs(1),
        min_side: 3,
        paces: &[None, Some(READ_PACE)],
        settle: Duration::from_millis(200),
        formats: &["ndjson", "csv"],
    };
    let mut reads = if args.reads.is_empty() {
        None
    } else {
        Some(read_rows(&mut bench, None, &plan, &args.reads)?)
    };
    let data = bench.server.data.clone();
    let (stored, direct) = bench.finish_then(args.keep, |cli| {
        outbound::after_stop(&data, &mut outs);
        reads.as_ref().map(|r| export_direct(&cli, r, plan.formats))
    })?;
    failures.append(&mut outs.failures);
    if let Some(reads) = &mut reads {
        reads.add_exports(direct.unwrap_or_default());
        report_reads(reads, &plan, None);
        failures.append(&mut reads.failures);
    }
    report_stored(&stored);
    if stored.stored != stored.acked {
        failures.push(format!(
            "the data file holds {} events, {} were acknowledged",
            stored.stored, stored.acked
        ));
    }
    if let Err(e) = stored.verdict {
        failures.push(e);
    }
    failures.append(&mut own_rows(args, None)?);
    if failures.is_empty() {
        println!("smoke: ok");
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The `joins` row (`channel.rs`) with `n` joins, if asked for; the `subscribed` events it
/// recorded are counted as acknowledged.
fn channel_joins(bench: &mut Bench, args: &Args, n: u64) -> Result<Option<channel::Joins>, String> {
    if !args.joins {
        return Ok(None);
    }
    let visits = (n / 100).clamp(10, channel::POOL);
    let joins = channel::joins(bench.server.addr, &bench.fixture.secret, n, visits)?;
    bench.acked_events += joins.subscribed;
    Ok(Some(joins))
}

/// `--soak`: unique events at 64 connections in stretches of 10 s on one server and one new
/// data file, each a run of the load generator (wrk unless `--client builtin`), until
/// `--soak-events` are stored and `--soak-secs` have passed. Each stretch is reported against
/// the first on the new file (same server, same connections): the figure a user sees after
/// months of data. After the run, the first stretch past each million, and the RSS.
fn soak(args: &Args) -> Result<(), String> {
    const CONNS: usize = 64;
    const CHUNK: Duration = Duration::from_secs(10);
    // `/metrics` says how much the server read from its file: its growth per event.
    let args = &Args {
        metrics: MetricsChoice::On,
        ..args.clone()
    };
    let wrk_path = load_generator(args)?;
    let mut bench = Bench::start(args)?;
    let metrics = bench
        .server
        .metrics
        .ok_or("the server did not print its metrics address")?;
    println!("machine: {}", machine());
    println!(
        "soak: unique events over {CONNS} connections ({}), {} s stretches, until {} are stored \
         and {} s have passed; \"vs first\": each stretch's rate / the first stretch's, on the \
         new file",
        wrk_path
            .as_deref()
            .map_or("the in-repo client (2 threads)", |_| "wrk -t2"),
        CHUNK.as_secs(),
        args.soak_events,
        args.soak_secs
    );
    print_soak_header();
    let started = Instant::now();
    // Four times the asked time, and room for the asked events at 2,000 a second at worst.
    let limit = Duration::from_secs((args.soak_secs.max(60) * 4).max(args.soak_events / 2_000));
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut milestones: Vec<Milestone> = Vec::new();
    let mut first: Option<f64> = None;
    let mut last: Option<(u64, f64)> = None;
    let mut read_before = file_bytes_read(metrics)?;
    let mut written_before = bench.server.storage_writes().unwrap_or(0);
    loop {
        let elapsed = started.elapsed();
        if elapsed >= Duration::from_secs(args.soak_secs) && bench.acked_events >= args.soak_events
        {
            break;
        }
        if elapsed >= limit {
            println!("soak: stopping at the time limit of {} s", limit.as_secs());
            break;
        }
        let acked_before = bench.acked_events;
        let row = measure_alone(&mut bench, wrk_path.as_deref(), Case::Unique, CONNS, CHUNK)?;
        let read = file_bytes_read(metrics)?;
        let events = bench.acked_events.saturating_sub(acked_before).max(1);
        #[allow(clippy::cast_precision_loss)]
        let pages = (read.saturating_sub(read_before)) as f64 / 4096.0 / events as f64;
        read_before = read;
        let written = bench.server.storage_writes().unwrap_or(0);
        #[allow(clippy::cast_precision_loss)]
        let written_pages = written.saturating_sub(written_before) as f64 / 4096.0 / events as f64;
        written_before = written;
        let rss = bench.server.rss().unwrap_or(0);
        let file = std::fs::metadata(&bench.server.data).map_or(0, |m| m.len());
        samples.push((bench.acked_events, rss));
        let first_rate = *first.get_or_insert(row.rate);
        last = Some((bench.acked_events, row.rate));
        let millions = bench.acked_events / 1_000_000;
        if milestones.is_empty() || millions > milestones.last().map_or(0, |m| m.millions) {
            milestones.push(Milestone {
                millions,
                stored: bench.acked_events,
                rate: row.rate,
                pages,
                written_pages,
                file,
            });
        }
        println!(
            "| {:>6} | {:>10} | {:>8.0} | {:>8.2}x | {:>8} | {:>8.1} | {:>9.1} | {:>11.3} | {:>13.3} |",
            started.elapsed().as_secs(),
            bench.acked_events,
            row.rate,
            row.rate / first_rate.max(1e-9),
            ms(row.p99),
            mib(rss),
            mib(file),
            pages,
            written_pages
        );
        if row.non_2xx > 0 || row.errors > 0 {
            println!("  ({} non-2xx, {} errors)", row.non_2xx, row.errors);
        }
    }
    let acked = bench.acked_events;
    let stored = bench.finish(args.keep)?;
    println!();
    report_milestones(&milestones);
    if let (Some(first), Some(last)) = (first, last) {
        report_last_stretch(first, last, CHUNK);
    }
    report_soak_rss(&samples, args.soak_events.min(acked), args.soak_events);
    report_stored(&stored);
    stored.verdict
}

/// The heading of the soak's table, one row a stretch: "pages/event" is what the server read
/// from its data file per event stored in the stretch, "written/event" what it sent to storage.
fn print_soak_header() {
    println!(
        "| {:>6} | {:>10} | {:>8} | {:>9} | {:>8} | {:>8} | {:>9} | {:>11} | {:>13} |",
        "t s",
        "stored",
        "req/s",
        "vs first",
        "p99 ms",
        "RSS MiB",
        "file MiB",
        "pages/event",
        "written/event"
    );
}

/// The soak's last stretch (`(stored, rate)` at its end) against its first, on the new file.
fn report_last_stretch(first: f64, (at, rate): (u64, f64), chunk: Duration) {
    let ratio = rate / first.max(1e-9);
    println!(
        "the last {} s stretch (ending at {at} stored) / the first on the new file, same server \
         and connections: {rate:.0} / {first:.0} = {ratio:.2}x{}",
        chunk.as_secs(),
        if at >= 10_000_000 {
            format!(
                " (target >= 0.9x at 10 M stored: {})",
                if ratio >= 0.9 { "met" } else { "NOT met" }
            )
        } else {
            String::new()
        }
    );
}

/// RSS once `from` events were stored, and its range from then to the end.
fn report_soak_rss(samples: &[(u64, u64)], from: u64, soak_events: u64) {
    let after: Vec<u64> = samples
        .iter()
        .filter(|(n, _)| *n >= from)
        .map(|&(_, r)| r)
        .collect();
    let first_million = samples
        .iter()
        .find(|(n, _)| *n >= soak_events)
        .map(|&(_, r)| r);
    if let Some(rss) = first_million {
        println!(
            "RSS when {} events were stored: {:.1} MiB",
            soak_events,
            mib(rss)
        );
    }
    if let (Some(lo), Some(hi)) = (after.iter().min(), after.iter().max()) {
        println!(
            "RSS from then to the end: {:.1} .. {:.1} MiB over {} samples",
            mib(*lo),
            mib(*hi),
            after.len()
        );
    }
}

/// The first soak stretch after each million stored events (and the very first: a new file).
struct Milestone {
    millions: u64,
    stored: u64,
    rate: f64,
    /// Pages (4 KiB) read from the file per event stored in the chunk.
    pages: f64,
    /// Pages (4 KiB) the server sent to storage per event stored in the chunk.
    written_pages: f64,
    /// The data file's size then.
    file: u64,
}

/// The soak's rate per million stored events, against the first stretch on the new file.
fn report_milestones(milestones: &[Milestone]) {
    let Some(first) = milestones.first() else {
        return;
    };
    println!(
        "per million stored events (the first 10 s stretch past each million; \"vs first\": \
         against the first stretch on the new file, the row of 0 millions):"
    );
    println!(
        "| {:>8} | {:>10} | {:>8} | {:>9} | {:>11} | {:>13} | {:>12} |",
        "millions", "stored", "req/s", "vs first", "pages/event", "written/event", "file B/event"
    );
    for m in milestones {
        #[allow(clippy::cast_precision_loss)]
        let per_event = m.file as f64 / m.stored.max(1) as f64;
        println!(
            "| {:>8} | {:>10} | {:>8.0} | {:>8.2}x | {:>11.3} | {:>13.3} | {:>12.0} |",
            m.millions,
            m.stored,
            m.rate,
            m.rate / first.rate.max(1e-9),
            m.pages,
            m.written_pages,
            per_event
        );
    }
}

/// `tracker_data_file_read_bytes_total` from the server's `/metrics`.
fn file_bytes_read(metrics: std::net::SocketAddr) -> Result<u64, String> {
    metric(metrics, "tracker_data_file_read_bytes_total")
}

/// `--prune`: what retention costs ingest. One server, `dedup_window = "2s"`: the unique row at
/// 64 connections (A: no windowed entries, nothing to prune), then `--prune-entries` windowed
/// deposits stored, then, once they are past the window and retention's margin, the same row
/// while retention removes them (B), and the row again once it is done (A'). A and A' bracket
/// the drift of a shared machine; `/metrics` says how many entries each row saw pruned.
fn prune(args: &Args) -> Result<(), String> {
    const CONNS: usize = 64;
    let mut bench = Bench::start(args)?;
    let Some(metrics) = bench.server.metrics else {
        return Err("the server did not print its metrics address".into());
    };
    let wrk_path = match args.client {
        ClientChoice::Builtin => None,
        ClientChoice::Auto => wrk::find_or_install(),
        ClientChoice::Wrk => {
            Some(wrk::find_or_install().ok_or("--client wrk, but wrk is not available")?)
        }
    };
    let pruned = || pruned_count(metrics);
    let mut rows = Vec::new();
    let mut row = |bench: &mut Bench, label: &'static str| -> Result<(), String> {
        let before = pruned()?;
        let mut row = measure_alone(
            bench,
            wrk_path.as_deref(),
            Case::Unique,
            CONNS,
            args.duration,
        )?;
        row.label = label;
        let during = pruned()? - before;
        print_row(&row);
        println!("  entries pruned during the row: {during}");
        rows.push((row, during));
        Ok(())
    };
    println!(
        "prune: {} windowed deposits, unique at {CONNS} connections, {} s per row",
        args.prune_entries,
        args.duration.as_secs()
    );
    print_header();
    row(&mut bench, "A: unique, nothing to prune")?;
    let started = Instant::now();
    store_windowed_deposits(&mut bench, args.prune_entries, CONNS)?;
    println!(
        "stored {} windowed deposits in {:.1} s",
        args.prune_entries,
        started.elapsed().as_secs_f64()
    );
    // Past the window (2 s) and retention's margin before an entry may go.
    let expirable = Duration::from_millis(tracker::workers::retention::MARGIN_MS + 2000);
    std::thread::sleep(
        expirable
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(2)),
    );
    row(&mut bench, "B: unique while pruning")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while pruned()? < args.prune_entries && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    row(&mut bench, "A': unique, pruning done")?;
    let total = pruned()?;
    let check = bench.finish(args.keep)?;
    report_stored(&check);
    if let (Some((a, _)), Some((b, _)), Some((a2, _))) = (rows.first(), rows.get(1), rows.get(2)) {
        println!(
            "unique while pruning / without: {:.0} / {:.0} and {:.0} = {:.2}x and {:.2}x; p99 {} vs {} and {} ms; pruned {total} of {} in all",
            b.rate,
            a.rate,
            a2.rate,
            b.rate / a.rate.max(1e-9),
            b.rate / a2.rate.max(1e-9),
            ms(b.p99),
            ms(a.p99),
            ms(a2.p99),
            args.prune_entries
        );
    }
    note_busy(rows.iter().map(|(r, _)| r));
    check.verdict
}

/// `tracker_dedup_entries_pruned_total` from the server's `/metrics` at `metrics`.
fn pruned_count(metrics: std::net::SocketAddr) -> Result<u64, String> {
    metric(metrics, "tracker_dedup_entries_pruned_total")
}

/// One counter without labels from the server's `/metrics`.
fn metric(metrics: std::net::SocketAddr, name: &str) -> Result<u64, String> {
    let scrape = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".to_vec();
    let (status, body) = client::fetch_all(metrics, 1, vec![scrape]).remove(0);
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("no {name} in /metrics ({status})"))
}

/// Stores `n` deposits with a setup click's uid, no eid and no time, each its own amount: `n`
/// entries of the windowed dedup rule.
fn store_windowed_deposits(bench: &mut Bench, n: u64, conns: usize) -> Result<(), String> {
    let secret = &bench.fixture.secret;
    let uids = &bench.fixture.click_uids;
    let requests = (0..n)
        .map(|i| {
            let uid = &uids[i as usize % uids.len()];
            let body = format!(r#"{{"event":"deposit","uid":"{uid}","value":"{i}"}}"#);
            format!(
                "POST /events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {secret}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        })
        .collect();
    for (status, body) in client::fetch_all(bench.server.addr, conns, requests) {
        if status != 200 || !String::from_utf8_lossy(&body).contains(r#""status":"queued""#) {
            return Err(format!(
                "storing windowed deposits: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    bench.acked_events += n;
    Ok(())
}
