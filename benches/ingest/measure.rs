//! One row measured: a case run at a number of connections on a [`Bench`] with the chosen load
//! generator (wrk or the in-repo client), the CPU shares and the server's memory beside it,
//! and the events it stored accounted for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::{Args, ClientChoice};
use crate::bench::Bench;
use crate::client::{self, Load, MakeRequest};
use crate::scenario::{Case, Fixture, Template};
use crate::server::Server;
use crate::{cpu, wrk};

/// One row of the table.
pub struct Row {
    pub label: &'static str,
    /// The ingest case measured; `None` for a read row's side client.
    pub case: Option<Case>,
    pub conns: usize,
    pub responses: u64,
    pub rate: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub non_2xx: u64,
    pub errors: u64,
    pub cpu: cpu::Shares,
    /// The server's resident memory after the row.
    pub rss: u64,
}

impl Row {
    /// The row of a short run of the in-repo client, too short for CPU shares to mean anything;
    /// the server's RSS after it.
    pub fn of_count(
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
    pub fn cpu_per_request_us(&self) -> f64 {
        self.cpu.server / 100.0 / self.rate.max(1e-9) * 1e6
    }
}

/// What a load generator reported.
pub enum Loaded {
    Wrk(wrk::Report),
    Builtin(client::Outcome),
}

/// Runs one case at `conns` with the chosen load generator and accounts for stored events.
/// `beside` runs on a thread of its own at the same time, given when the load ends (the read
/// rows' side client); the CPU shares cover both.
pub fn measure<S: Send>(
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
pub fn measure_with<S: Send>(
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
pub fn measure_alone(
    bench: &mut Bench,
    wrk_path: Option<&str>,
    case: Case,
    conns: usize,
    duration: Duration,
) -> Result<Row, String> {
    measure(bench, wrk_path, case, conns, duration, |_| ()).map(|(row, ())| row)
}

/// A run of the in-repo client.
pub fn builtin(
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
    pub fn account(&mut self, case: Case, o: &client::Outcome) {
        if case.stores_an_event() {
            // Answered `queued`: new events. (A `duplicate` answer stored nothing.)
            self.acked_events += o.expected * case.events_per_request();
            // A request whose connection failed may or may not have been stored.
            self.unacked_slack += o.errors * case.events_per_request();
        }
    }

    /// Runs `template` with the in-repo client and accounts for what it stored.
    pub fn builtin(&mut self, template: Template, case: Case, load: Load) -> client::Outcome {
        let o = builtin(self.server.addr, &self.fixture, template, case, load);
        self.account(case, &o);
        o
    }
}

/// `wrk`'s path, or `None` for the in-repo client, as `--client` asks.
pub fn load_generator(args: &Args) -> Result<Option<String>, String> {
    Ok(match args.client {
        ClientChoice::Builtin => None,
        ClientChoice::Auto => wrk::find_or_install(),
        ClientChoice::Wrk => {
            Some(wrk::find_or_install().ok_or("--client wrk, but wrk is not available")?)
        }
    })
}
