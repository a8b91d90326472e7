//! The benchmark's command line: the flags as clap reads them ([`Flags`], whose doc comments
//! are `--help`), turned into what they ask for ([`Args`], which the rest of the program reads).

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Parser};

use crate::args::{Args, BigFile, ClientChoice, MetricsChoice, Mode, OwnRows};
use crate::deliveries::OutRow;
use crate::reads::ReadRow;
use crate::scenario::Case;

/// How fast the real tracker takes events, durably, on this machine.
///
/// Starts the release binary on a temporary data file, sets up a space's clicks and some known
/// events, measures each endpoint at each --conns with wrk (or the in-repo client), stops
/// the server, and checks that every acknowledged event is in the data file. Without a mode
/// flag: the full table. See BENCHMARKS.md for the results on the project's machine.
#[derive(Parser, Debug)]
#[command(
    bin_name = "cargo bench --bench ingest --",
    // As the flags always did: given twice, the last one counts (lists too: `ArgAction::Set`).
    args_override_self = true,
)]
pub struct Flags {
    #[command(flatten)]
    mode: ModeFlags,

    /// Seconds per row.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    duration: u64,

    /// The numbers of connections each ingest row is measured at.
    #[arg(
        long,
        value_name = "N,..",
        value_delimiter = ',',
        default_value = "64,256",
        action = ArgAction::Set
    )]
    conns: Vec<usize>,

    /// Only these rows: ingest cases (each at every --conns), the rows of conversions out
    /// (`send_meta`, `send_webhook`, `dest_blackhole`, `dest_answering` and `dest_snap` at every --conns, `pending_1m` and
    /// `client_hints` at the first), and the read rows feed, stats, dashboard and export (beside
    /// unique ingest at 64 connections, on a space of --feed-events), `joins` (Telegram
    /// joins read and committed, after the ingest rows), `unique_backup` (unique at the first
    /// --conns with scheduled backups uploaded to S3 beside it, on servers of its own; at least
    /// 150 s a row, three rows) and `import` (`tracker import` of --import-events). All of
    /// them when not given.
    #[arg(
        long,
        value_name = "ROW,..",
        value_delimiter = ',',
        value_parser = row_names(),
        action = ArgAction::Set
    )]
    only: Option<Vec<Row>>,

    /// The load generator.
    #[arg(long, value_enum, default_value_t = ClientChoice::Auto)]
    client: ClientChoice,

    /// Writes the server's log to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,

    /// Events in the read rows' space [default: 1000000, and 20000 with --smoke].
    #[arg(long, value_name = "N")]
    feed_events: Option<u64>,

    /// Deliveries the `pending_1m` row queues [default: 1000000, and 20000 with --smoke].
    #[arg(long, value_name = "N")]
    pending: Option<u64>,

    /// Events in the `import` row's NDJSON file [default: 1000000, and 10000 with --smoke].
    #[arg(long, value_name = "N")]
    import_events: Option<u64>,

    /// With --soak: the fewest seconds it runs.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    soak_secs: u64,

    /// With --soak: the fewest events it stores [default: 1000000]; given without a mode flag, it
    /// asks for --soak. The soak reports each 10 s stretch against its first on the new file,
    /// and the pages read and the file's bytes per stored event at each million.
    #[arg(long, value_name = "N")]
    soak_events: Option<u64>,

    /// Also measures `PostgreSQL`'s durable `INSERT ... ON CONFLICT` with pgbench at 64
    /// connections (and with the batch row, `pg_batch`: 100 rows a transaction at 16), on a
    /// throwaway cluster in the same run (installed from Debian's packages when missing and
    /// running as root), and prints the tracker's unique and batch rows against them.
    #[arg(long)]
    anchor: bool,

    /// With --prune: the expired dedup entries (windowed deposits) stored for retention to
    /// prune.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    prune_entries: u64,

    /// Keeps the temporary directory (data file, config, log) and prints where it is.
    #[arg(long)]
    keep: bool,

    /// Whether the server under test counts every request for /metrics.
    #[arg(long, value_enum, default_value_t = MetricsChoice::Off)]
    metrics: MetricsChoice,

    /// With --metrics both: the turns each server takes at each row (0 counts as 1).
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: u64,

    /// Serves with the per-space rate limit on at N a second (burst N): with an N no row
    /// reaches, what the token bucket costs on the hot path (BENCHMARKS.md).
    #[arg(long, value_name = "N")]
    rate_limit: Option<u64>,

    /// A data file of N events (a space of clicks over 200 campaigns and links, half bound,
    /// and events of every kind with deposits): unique ingest on it against the new file's
    /// first 10 s, memory, bytes per event, the read rows beside unique ingest, and `tracker
    /// backup`, `check`, `compact` and `restore` timed. A mode of its own, which --smoke
    /// makes tiny: 20,000 events, 1 s rows.
    #[arg(long, value_name = "N")]
    big_file: Option<u64>,

    /// Passed by cargo bench to every bench binary; ignored.
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}

/// The mode flags: at most one of them; the full table without any.
#[derive(clap::Args, Debug)]
#[group(multiple = false)]
struct ModeFlags {
    /// A few hundred requests per row with the in-repo client, every count checked; exits
    /// non-zero on any failure. Cheap enough for CI.
    #[arg(long)]
    smoke: bool,

    /// Unique events at 64 connections in 10 s stretches (wrk, or --client) until --soak-events
    /// are stored and at least --soak-secs have passed, each stretch against the first on the
    /// new file, with the server's RSS.
    #[arg(long)]
    soak: bool,

    /// The unique row at 64 connections with nothing to prune, then while retention prunes
    /// --prune-entries expired dedup entries, then after; on one server with
    /// `dedup_window = "2s"`.
    #[arg(long)]
    prune: bool,
}

impl ModeFlags {
    fn mode(&self) -> Mode {
        match (self.smoke, self.soak, self.prune) {
            (true, _, _) => Mode::Smoke,
            (_, true, _) => Mode::Soak,
            (_, _, true) => Mode::Prune,
            _ => Mode::Full,
        }
    }
}

/// A row `--only` names: an ingest case, a row of conversions out or a read row.
#[derive(Clone, Copy, Debug)]
enum Row {
    Ingest(Case),
    Out(OutRow),
    Read(ReadRow),
    /// `joins` (`channel.rs`).
    Joins,
    /// `unique_backup` (`backup_s3.rs`).
    Backup,
    /// `import` (`import.rs`).
    Import,
}

/// Reads a row's name: those of the ingest cases, then of conversions out, then of the read
/// rows.
fn row_names() -> impl TypedValueParser<Value = Row> {
    let cases = Case::ALL.map(Row::Ingest);
    let outs = OutRow::ALL.map(Row::Out);
    let reads = ReadRow::ALL.map(Row::Read);
    let name = |row: &Row| match *row {
        Row::Ingest(case) => case.name(),
        Row::Out(out) => out.name(),
        Row::Read(read) => read.name(),
        Row::Joins => "joins",
        Row::Backup => "unique_backup",
        Row::Import => "import",
    };
    let rows: Vec<Row> = cases
        .into_iter()
        .chain(outs)
        .chain(reads)
        .chain([Row::Joins, Row::Backup, Row::Import])
        .collect();
    PossibleValuesParser::new(rows.iter().map(name).collect::<Vec<_>>()).map(move |chosen| {
        *rows
            .iter()
            .find(|row| name(row) == chosen)
            .expect("clap checked the name")
    })
}

impl Flags {
    /// Reads the command line; prints the help, or what is wrong with the flags, and exits
    /// when it should.
    pub fn args() -> Args {
        Flags::parse().into_args()
    }

    fn into_args(self) -> Args {
        let (cases, outs, reads, [joins, backup_row, import_row]) = match self.only {
            None => (
                Case::ALL.to_vec(),
                OutRow::ALL.to_vec(),
                ReadRow::ALL.to_vec(),
                [true; 3],
            ),
            Some(rows) => {
                let mut chosen = (Vec::new(), Vec::new(), Vec::new(), [false; 3]);
                for row in rows {
                    match row {
                        Row::Ingest(case) => chosen.0.push(case),
                        Row::Out(out) => chosen.1.push(out),
                        Row::Read(read) => chosen.2.push(read),
                        Row::Joins => chosen.3[0] = true,
                        Row::Backup => chosen.3[1] = true,
                        Row::Import => chosen.3[2] = true,
                    }
                }
                chosen
            }
        };
        let mode = match self.mode.mode() {
            _ if self.big_file.is_some() => Mode::BigFile,
            Mode::Full if self.soak_events.is_some() => Mode::Soak,
            mode => mode,
        };
        Args {
            mode,
            anchor: self.anchor,
            duration: Duration::from_secs(self.duration),
            conns: self.conns,
            cases,
            outs,
            pending: self.pending,
            reads,
            feed_events: self.feed_events,
            client: self.client,
            log: self.log,
            soak_secs: self.soak_secs,
            soak_events: self.soak_events.unwrap_or(1_000_000),
            prune_entries: self.prune_entries,
            keep: self.keep,
            metrics: self.metrics,
            rounds: self.rounds.max(1),
            rate_limit: self.rate_limit,
            joins,
            own: OwnRows {
                backup: backup_row,
                import: import_row,
                import_events: self.import_events,
            },
            big_file: self.big_file.map(|n| BigFile {
                events: if self.mode.smoke {
                    n.min(crate::big_file::SMOKE_EVENTS)
                } else {
                    n
                },
                smoke: self.mode.smoke,
            }),
        }
    }
}
