//! The full table (the default mode): each ingest case at each `--conns`, then the channel's
//! joins, conversions out, `PostgreSQL`'s anchor and the read rows on the same server, the
//! data file checked, and the rows on servers of their own; then each figure against its
//! target.

use std::time::Duration;

use crate::args::Args;
use crate::bench::{Bench, KNOWN_EVENTS, SETUP_CLICKS, channel_joins};
use crate::measure::{Row, load_generator, measure_alone};
use crate::read_rows::{READ_PACE, ReadPlan, export_direct, read_rows, report_reads};
use crate::report::{figures, machine, mib, ms, note_busy, print_header, print_row, report_stored};
use crate::scenario::{self, Case};
use crate::{anchor, channel, outbound, own_servers, server};

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

/// Runs the full table on one server, then the rows on servers of their own, and reports each
/// figure against its target; fails with every check that missed.
pub fn run(args: &Args) -> Result<(), String> {
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
    failures.append(&mut own_servers::run(args, wrk_path.as_deref())?);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
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
    // A landing page's view and a Mini App's bind against a link's visit, the same way.
    for case in [Case::View, Case::MiniAppBind] {
        if let (Some((rate, rounds)), Some((link, _))) = (mean(case), mean(Case::Link)) {
            let ratio = rate / link.max(1e-9);
            println!(
                "{} / {} at {conns} connections, mean of {rounds} round(s): {rate:.0} / \
                 {link:.0} = {ratio:.2}x (target >= 0.9x: {})",
                case.label(),
                Case::Link.label(),
                if ratio >= 0.9 { "met" } else { "NOT met" }
            );
        }
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
