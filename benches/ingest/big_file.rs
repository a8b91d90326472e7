//! The mode `--big-file N` ([`run`]): what a data file of N events costs. Durable unique ingest
//! on the new file's first stretch, then a space of N events filled (the read rows' space:
//! clicks over 200 campaigns and links, half of them bound, costs, and events of every kind with
//! deposits among them), the read rows beside unique ingest at 64 connections on it, unique
//! ingest alone again against the first stretch, the server's memory, the file's bytes per
//! event and the dedup look-ups' wrong "maybe"s; then `tracker backup` through the server and,
//! the server stopped, `tracker check`, `tracker compact` and `tracker restore` of the backup,
//! each timed. With `--smoke`: 20,000
//! events and 1 s rows, to check the mode, not to measure.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::args::{Args, MetricsChoice};
use crate::bench::Bench;
use crate::measure::{load_generator, measure_alone};
use crate::read_rows::{ReadPlan, read_rows, report_reads};
use crate::reads::ReadRow;
use crate::report::{machine, mib, print_header, print_row, report_stored};
use crate::scenario::Case;
use crate::server::metric;

/// Events with `--smoke`, whatever N was given.
pub const SMOKE_EVENTS: u64 = 20_000;

/// `--big-file N`: see the module's doc.
pub fn run(args: &Args) -> Result<(), String> {
    const CONNS: usize = 64;
    let smoke = args.big_file.is_some_and(|b| b.smoke);
    let events = args.big_file.map_or(SMOKE_EVENTS, |b| b.events);
    let stretch = if smoke {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    // `/metrics` says what the dedup look-ups read.
    let args = &Args {
        metrics: MetricsChoice::On,
        duration: if smoke { stretch } else { args.duration },
        ..args.clone()
    };
    let wrk_path = if smoke { None } else { load_generator(args)? };
    let mut bench = Bench::start(args)?;
    let metrics = bench
        .server
        .metrics
        .ok_or("the server did not print its metrics address")?;
    println!("machine: {}", machine());
    println!("big file: {events} events; unique ingest at {CONNS} connections, {stretch:?} rows");
    print_header();
    // Unique ingest alone for one stretch, printed as `label`.
    let unique = |bench: &mut Bench, label| {
        let mut row = measure_alone(bench, wrk_path.as_deref(), Case::Unique, CONNS, stretch)?;
        row.label = label;
        print_row(&row);
        Ok::<_, String>(row)
    };
    let first = unique(&mut bench, "unique, new file")?;
    let plan = ReadPlan {
        events,
        duration: args.duration,
        min_side: if smoke { 3 } else { 20 },
        paces: &[None],
        settle: Duration::from_secs(1),
        formats: &[],
    };
    let rows = [ReadRow::Feed, ReadRow::Stats, ReadRow::Dashboard];
    let mut reads = read_rows(&mut bench, wrk_path.as_deref(), &plan, &rows)?;
    let lookups_before = dedup_lookups(metrics)?;
    let full = unique(&mut bench, "unique, big file")?;
    let lookups_after = dedup_lookups(metrics)?;
    let rss = bench.server.rss().unwrap_or(0);
    let backup = bench.dir.path().join("big-file-backup.redb");
    let backup_arg = backup.to_string_lossy().into_owned();
    let mut chores = vec![timed(
        &bench.server.command(),
        "tracker backup (served)",
        &["backup", &backup_arg],
    )];
    let (check, ()) = bench.finish_then(args.keep, |cli| {
        chores.push(timed(&cli, "tracker check", &["check"]));
        chores.push(timed(&cli, "tracker compact", &["compact"]));
        chores.push(timed(&cli, "tracker restore", &["restore", &backup_arg]));
    })?;
    println!();
    report_reads(&mut reads, &plan, Some(full.rate));
    report_stored(&check);
    #[allow(clippy::cast_precision_loss)]
    let wrong = (lookups_after.1 - lookups_before.1) as f64
        / (lookups_after.0 - lookups_before.0).max(1) as f64;
    println!(
        "big file: unique {:.0}/s against {:.0}/s on the new file = {:.2}x (target >= 0.9x); \
         {:.1} MiB resident after it (target <= 96 MiB); {:.0} bytes per event (target <= 200); \
         {wrong:.3} wrong \"maybe\"s per dedup look-up (target < 0.1)",
        full.rate,
        first.rate,
        full.rate / first.rate.max(1e-9),
        mib(rss),
        check.bytes_per_event(),
    );
    for chore in &chores {
        match chore {
            Ok((what, took)) => println!("  {what}: {:.2} s", took.as_secs_f64()),
            Err(e) => println!("  FAILED: {e}"),
        }
    }
    let failed: Vec<&String> = chores
        .iter()
        .filter_map(|c| c.as_ref().err())
        .chain(&reads.failures)
        .collect();
    if let Some(e) = failed.first() {
        return Err((*e).clone());
    }
    check.verdict
}

/// `tracker_dedup_lookups_total` and `tracker_dedup_wrong_maybe_reads_total` now.
fn dedup_lookups(metrics: std::net::SocketAddr) -> Result<(u64, u64), String> {
    Ok((
        metric(metrics, "tracker_dedup_lookups_total")?,
        metric(metrics, "tracker_dedup_wrong_maybe_reads_total")?,
    ))
}

/// Runs `cli` with `args` (a chore of the data file) and answers how long it took.
fn timed(
    cli: &Command,
    what: &'static str,
    args: &[&str],
) -> Result<(&'static str, Duration), String> {
    let mut c = Command::new(cli.get_program());
    c.args(cli.get_args()).args(args);
    let started = Instant::now();
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((what, started.elapsed()))
}
