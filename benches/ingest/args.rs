//! What a run asks for, validated from the flags (`flags.rs` reads them): the mode, the rows
//! and their sizes, the load generator, and the server's settings. Every mode and row reads
//! it; the rows are named by the types beside what they send (`Case` in `scenario.rs`,
//! `ReadRow` in `reads.rs`, `OutRow` in `deliveries.rs`).

use std::path::PathBuf;
use std::time::Duration;

use crate::deliveries::OutRow;
use crate::reads::ReadRow;
use crate::scenario::Case;

/// The mode of the run, a file each: the full table, `--smoke`, `--soak`, `--prune` or
/// `--big-file`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Full,
    Smoke,
    Soak,
    Prune,
    BigFile,
}

/// `--big-file N`: the events of the file, and whether `--smoke` made it tiny.
#[derive(Clone, Copy, Debug)]
pub struct BigFile {
    pub events: u64,
    pub smoke: bool,
}

/// Whether the server under test counts for `/metrics`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum MetricsChoice {
    /// A server without /metrics.
    Off,
    /// A server with /metrics on a port of its own, counting every request.
    On,
    /// Two servers, one of each, measured in turns (--rounds) at each ingest row: the cost of
    /// counting, in one run.
    Both,
}

/// The load generator.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum ClientChoice {
    /// wrk if it is installed or can be, else the in-repo client.
    Auto,
    /// wrk, installed if need be; fails if it cannot be.
    Wrk,
    /// The in-repo client (2 threads).
    Builtin,
}

/// What the flags (flags.rs) ask for.
#[derive(Clone)]
pub struct Args {
    pub mode: Mode,
    /// `PostgreSQL`'s insert measured beside the ingest rows (`anchor.rs`).
    pub anchor: bool,
    pub duration: Duration,
    pub conns: Vec<usize>,
    pub cases: Vec<Case>,
    /// The rows of conversions out, after the ingest rows.
    pub outs: Vec<OutRow>,
    /// Deliveries `pending_1m` queues; default 1,000,000, and 20,000 with `--smoke`.
    pub pending: Option<u64>,
    /// The read rows, after the rows of conversions out.
    pub reads: Vec<ReadRow>,
    /// Events in the read rows' space; default 1,000,000, and 2,000 with `--smoke`.
    pub feed_events: Option<u64>,
    pub client: ClientChoice,
    pub log: Option<PathBuf>,
    pub soak_secs: u64,
    pub soak_events: u64,
    /// Windowed deposits stored for `--prune` to prune.
    pub prune_entries: u64,
    pub keep: bool,
    pub metrics: MetricsChoice,
    /// Turns per server with `--metrics both`.
    pub rounds: u64,
    /// `rate_limit` and `rate_burst` for the server; off when `None`.
    pub rate_limit: Option<u64>,
    /// The `joins` row (`channel.rs`), after the ingest rows.
    pub joins: bool,
    /// The rows on servers of their own, after the table.
    pub own: OwnRows,
    /// `--big-file` (`big_file.rs`).
    pub big_file: Option<BigFile>,
}

/// The rows that start servers of their own, after everything else.
#[derive(Clone)]
pub struct OwnRows {
    /// `unique_backup` (`backup_s3.rs`).
    pub backup: bool,
    /// `import` (`import.rs`).
    pub import: bool,
    /// Events in the import row's file; default 1,000,000, and 10,000 with `--smoke`.
    pub import_events: Option<u64>,
}
