//! `cargo bench --bench ingest`: how fast the real tracker takes events, durably, on this machine.
//!
//! A plain program (`harness = false`) that prints a table, as redb's benches do. It starts the
//! release binary on a temporary data file, sets up a space's clicks and some known events, then
//! measures each endpoint at 64 and at 256 connections with `wrk` (or the in-repo client), stops
//! the server, and checks that every acknowledged event is in the data file.
//!
//! Modes (`cargo bench --bench ingest -- --help` has every flag, from flags.rs), a file each:
//! - (default) the full table (`full.rs`); `--duration SECS` per row (default 10), `--conns
//!   64,256`, `--only unique,dry_run`, `--client wrk|builtin`, `--log FILE` for the server's
//!   log, `--rate-limit N` to serve with the per-space limit on at `N` a second (burst `N`):
//!   with an `N` no row reaches, what the token bucket costs on the hot path (BENCHMARKS.md).
//! - `--smoke` (`smoke.rs`): a few hundred requests per row with the in-repo client, every count
//!   checked; exits non-zero on any failure. Cheap enough for CI.
//! - `--soak` (`soak.rs`): unique events at 64 connections in 10 s stretches (wrk unless
//!   `--client builtin`) until 1 million are stored and at least `--soak-secs` (default 300)
//!   have passed, each stretch against the first on the new file, with the server's RSS.
//! - Rows on servers of their own, after the table: `unique_backup` (`backup_s3.rs`: unique
//!   while scheduled backups go to S3, against plain unique before and after) and `import`
//!   (`import.rs`: `tracker import` of 1 M events into a new data file, then again).
//! - `--metrics on|off|both`: the server with `/metrics` counting every request, or not
//!   (default off); `both` (`metrics_cost.rs`) runs two servers side by side and measures the
//!   chosen ingest rows on each, alternating, `--rounds N` times (default 3): the cost of
//!   counting, in one run.
//! - `--prune` (`prune.rs`): the unique row at 64 connections with nothing to prune, then while
//!   retention prunes `--prune-entries` (default 200,000) expired dedup entries, then after; on
//!   one server with `dedup_window = "2s"`.
//! - `--big-file N` (`big_file.rs`): a data file of N events, and what it costs: unique ingest
//!   against the new file's, memory, bytes per event, the read rows beside ingest, and the
//!   file's chores timed. `--smoke` makes it 20,000 events.
//!
//! What the modes share: the server set up for load and checked after it (`bench.rs`, on the
//! process of `server.rs`), one row measured (`measure.rs`, with `wrk.rs` or `client.rs`), and
//! the table and the data file's report printed (`report.rs`). The families of rows: the
//! requests (`scenario.rs`), conversions out (`outbound.rs`), the read rows (`reads.rs`, run by
//! `read_rows.rs`), Telegram channels (`channel.rs`), `PostgreSQL`'s anchor (`anchor.rs`) and
//! the rows on servers of their own (`own_servers.rs`). `flags.rs` turns the flags into
//! [`args::Args`]; this file runs the mode they name.
//!
//! See BENCHMARKS.md for the results on the project's machine.

mod anchor;
mod args;
mod backup_s3;
mod bench;
mod big_file;
mod channel;
mod client;
mod cpu;
mod dashboard;
mod deliveries;
mod flags;
mod full;
// The integration tests' HTTP/1.1 response reader: one reader for both clients.
#[path = "../../tests/it/support/http1.rs"]
mod http1;
mod import;
mod measure;
mod metrics_cost;
mod outbound;
mod own_servers;
mod prune;
mod read_rows;
mod reads;
mod report;
mod scenario;
mod server;
mod smoke;
mod soak;
mod stand_in;
mod wrk;

use std::process::ExitCode;

use args::{MetricsChoice, Mode};
use flags::Flags;

fn main() -> ExitCode {
    let args = Flags::args();
    let smoke_sized = args.mode == Mode::Smoke || args.big_file.is_some_and(|b| b.smoke);
    if cfg!(debug_assertions) && !smoke_sized {
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
        Mode::Full if args.metrics == MetricsChoice::Both => metrics_cost::run(&args),
        Mode::Full => full::run(&args),
        Mode::Smoke => smoke::run(&args),
        Mode::Soak => soak::run(&args),
        Mode::Prune => prune::run(&args),
        Mode::BigFile => big_file::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
