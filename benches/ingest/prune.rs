//! The mode `--prune` ([`run`]): what retention costs ingest, and the windowed deposits it
//! stores for retention to prune.

use std::time::{Duration, Instant};

use crate::args::Args;
use crate::bench::Bench;
use crate::client;
use crate::measure::{load_generator, measure_alone};
use crate::report::{ms, note_busy, print_header, print_row, report_stored};
use crate::scenario::Case;
use crate::server::metric;

/// `--prune`: what retention costs ingest. One server, `dedup_window = "2s"`: the unique row at
/// 64 connections (A: no windowed entries, nothing to prune), then `--prune-entries` windowed
/// deposits stored, then, once they are past the window and retention's margin, the same row
/// while retention removes them (B), and the row again once it is done (A'). A and A' bracket
/// the drift of a shared machine; `/metrics` says how many entries each row saw pruned.
pub fn run(args: &Args) -> Result<(), String> {
    const CONNS: usize = 64;
    let mut bench = Bench::start(args)?;
    let Some(metrics) = bench.server.metrics else {
        return Err("the server did not print its metrics address".into());
    };
    let wrk_path = load_generator(args)?;
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
