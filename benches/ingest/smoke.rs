//! `--smoke`: a few hundred requests per row with the in-repo client on one server, every
//! count checked (answers, deliveries, stored events, export lines); fails on any miss. Cheap
//! enough for CI, and judges no figure.

use std::time::Duration;

use crate::args::Args;
use crate::bench::{Bench, channel_joins};
use crate::client::Load;
use crate::measure::Row;
use crate::read_rows::{READ_PACE, ReadPlan, export_direct, read_rows, report_reads};
use crate::report::{print_header, print_row, report_stored};
use crate::scenario::{Case, Template};
use crate::{channel, deliveries, outbound, own_servers};

/// Runs every row small on one server, then the rows on servers of their own (`import` small,
/// `unique_backup` skipped); fails with every count that missed.
pub fn run(args: &Args) -> Result<(), String> {
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
    failures.append(&mut own_servers::run(args, None)?);
    if failures.is_empty() {
        println!("smoke: ok");
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}
