//! The mode `--metrics both` ([`run`]) and its report: each ingest row's medians on the two
//! servers, in rate and in server CPU per request, and how far one server's own rows spread.

use std::time::Duration;

use crate::args::Args;
use crate::bench::Bench;
use crate::measure::{load_generator, measure_alone};
use crate::report::{figures, machine, print_header, print_row};

/// `--metrics both`: what counting for `/metrics` costs. Two servers run side by side, one
/// with `metrics_listen` and one without; each chosen ingest row is measured on each in turns
/// (off then on, then on then off, ...), so drift in the machine's load falls on both alike.
pub fn run(args: &Args) -> Result<(), String> {
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
