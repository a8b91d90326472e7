//! The read rows run on the table's server: their space made and filled, each row's side
//! client beside unique ingest at 64 connections, the exports through the server and, once it
//! stopped, on the file; and their figures against their targets.

use std::time::Duration;

use crate::bench::Bench;
use crate::dashboard;
use crate::measure::{Row, measure};
use crate::reads::{self, ReadRow, Spread};
use crate::report::{mib, ms, note_busy, print_row};
use crate::scenario::Case;

/// How often the paced read rows send a request: 20 a second, a dashboard or a few followers.
pub const READ_PACE: Duration = Duration::from_millis(50);

/// How big and how long the read rows are.
pub struct ReadPlan {
    /// Events in the read rows' space.
    pub events: u64,
    pub duration: Duration,
    /// The fewest answers the side client collects, however long they take.
    pub min_side: u64,
    /// How each read row's side client sends: back to back (`None`), then one every so often.
    pub paces: &'static [Option<Duration>],
    /// The pause between rows, for the writer to drain and the sockets to close.
    pub settle: Duration,
    /// Formats to export in.
    pub formats: &'static [&'static str],
}

/// What the read rows measured.
pub struct ReadResults {
    /// Events in the read rows' space.
    pub events: u64,
    /// Filling it: events added and how long it took.
    pub filled: (u64, Duration),
    /// Each read row: how its side client was paced, its row and the ingest row beside it.
    pub rows: Vec<(ReadRow, Option<Duration>, Row, Row)>,
    pub exports: Vec<ExportLine>,
    /// Where the last tenth of the space starts (an `after` for export), and its events.
    pub tail: Option<(u64, u64)>,
    pub failures: Vec<String>,
}

impl ReadResults {
    pub fn add_exports(&mut self, exports: Vec<Result<ExportLine, String>>) {
        for e in exports {
            match e {
                Ok(line) => self.exports.push(line),
                Err(e) => self.failures.push(e),
            }
        }
    }
}

pub struct ExportLine {
    pub via: &'static str,
    pub format: &'static str,
    pub events: u64,
    pub run: reads::Export,
}

/// The read rows: makes and fills the space, runs each selected row beside unique ingest at 64
/// connections, and exports through the server (at a tenth of the size first, then at full).
pub fn read_rows(
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
pub fn export_direct(
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
pub fn report_reads(r: &mut ReadResults, plan: &ReadPlan, unique_alone: Option<f64>) {
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
