//! The mode `--soak` ([`run`]) and its report: a line per stretch, the first stretch past each
//! million, the last stretch against the first, and the server's RSS once the asked events
//! were stored.

use std::time::{Duration, Instant};

use crate::args::{Args, MetricsChoice};
use crate::bench::Bench;
use crate::measure::{load_generator, measure_alone};
use crate::report::{machine, mib, ms, report_stored};
use crate::scenario::Case;
use crate::server::metric;

/// `--soak`: unique events at 64 connections in stretches of 10 s on one server and one new
/// data file, each a run of the load generator (wrk unless `--client builtin`), until
/// `--soak-events` are stored and `--soak-secs` have passed. Each stretch is reported against
/// the first on the new file (same server, same connections): the figure a user sees after
/// months of data. After the run, the first stretch past each million, and the RSS.
pub fn run(args: &Args) -> Result<(), String> {
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
