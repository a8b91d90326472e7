//! What every mode prints the same way: the table's heading and rows, the machine, the rows
//! measured beside other work, and what the data file holds once the server stopped; and the
//! units they print in.

use std::time::Duration;

use crate::bench::DataCheck;
use crate::measure::Row;

pub fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

pub fn print_header() {
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

pub fn print_row(r: &Row) {
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

pub fn machine() -> String {
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
pub fn per(bytes: u64, n: u64) -> f64 {
    bytes as f64 / n.max(1) as f64
}

#[allow(clippy::cast_precision_loss)]
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `values` with `decimals` digits after the point, joined by commas.
pub fn figures(values: &[f64], decimals: usize) -> String {
    values
        .iter()
        .map(|r| format!("{r:.decimals$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Names the rows measured beside other work (`cpu::Shares::busy`): other processes' disk
/// writes slow every fsync while using little CPU, so CPU alone does not show them.
pub fn note_busy<'a>(rows: impl IntoIterator<Item = &'a Row>) {
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

pub fn report_stored(s: &DataCheck) {
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
