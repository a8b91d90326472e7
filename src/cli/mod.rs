//! The command line: flags are parsed into [`Cli`], settings loaded, and each command run.
//!
//! Output meant for people goes to stdout as text, or as one JSON document with `--json`; logs go
//! to stderr. Exit codes: 0 success, 1 failure while running, 2 bad usage or configuration.
//!
//! This file holds the flags and the dispatch; each command has a file of its own:
//! `serve.rs` and `init.rs` (a first start and what it shows), `request.rs` (how every
//! [`Request`] reaches the control socket or the data file), the text of each request's answer
//! in `space.rs` (spaces and keys), `link.rs`, `destination.rs`, `stats.rs`, `costs.rs`,
//! `admin.rs` and `user.rs`, `data_file.rs` (backup, check, compact), `backup_s3.rs` (a backup to `s3://`),
//! `restore.rs`, `export.rs` and `import.rs`. `output.rs` prints text or JSON, with control characters shown
//! escaped; `prompt.rs` asks what must never be a flag. Money, rates and where a link goes are
//! worded by `domain::display`, as the admin pages word them.

mod admin;
mod answer;
mod backup_s3;
mod costs;
mod data_file;
mod destination;
mod export;
mod import;
mod init;
mod link;
mod output;
mod prompt;
mod request;
mod restore;
mod serve;
mod space;
mod stats;
mod user;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_appender::non_blocking::WorkerGuard;

use crate::config::{self, Flags, LogFormat, Settings};
use crate::control::{self, Request};
use export::ExportFormat;
use output::{CliResult, Output};

/// `tracker --version`: the release and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BUILT_FROM_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "tracker",
    version = VERSION,
    about = "Self-hosted click and conversion tracker"
)]
pub struct Cli {
    /// Config file [default: ./tracker.toml if it exists]
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Machine-readable output
    #[arg(long, global = true)]
    json: bool,
    /// Data file (overrides `data` in the config)
    #[arg(long, global = true, value_name = "PATH")]
    data: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server (creates the data file and a `default` space on first start)
    Serve {
        /// Address to listen on (overrides `listen`)
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Keep the data in memory only, for test suites: nothing is written to disk and
        /// everything is gone at exit. The `default` space takes its credentials from
        /// `TRACKER_DEV_SECRET` and `TRACKER_DEV_INGEST_TOKEN` when they are set.
        #[arg(long)]
        ephemeral: bool,
    },
    /// Create the data file with a `default` space and an admin password, print them once,
    /// and exit, without serving: for a server that a service manager will start, whose log
    /// should never see them
    Init,
    #[command(flatten)]
    Request(Request),
    /// Check a data file: redb's page checksums, then the tracker's own rules (every record
    /// decodes, every index entry has its row and every row its entries, counters and stats
    /// agree with what they count). Read-only unless --repair. Exits 1 if anything is wrong.
    Check {
        /// The file to check, e.g. a backup [default: the data file, through the running
        /// server if one has it open]
        file: Option<PathBuf>,
        /// Rebuild what can be derived (indexes, stats, counters); needs the server stopped
        #[arg(long)]
        repair: bool,
    },
    /// Put a backup (a file, or `s3://BUCKET/KEY` with `[backup_s3]`'s settings) in place of the
    /// data file, after checking it as `tracker check` does: a damaged copy changes nothing,
    /// and the file it replaces is kept beside it. Needs the server stopped
    Restore {
        /// The backup: a file's path, or `s3://BUCKET/KEY`
        source: String,
    },
    /// Give the data file's free space back to the filesystem. Needs the server stopped (a
    /// running server keeps the file open; stop it, compact, start it again)
    Compact,
    /// Write a space's events, with attribution, as GET /events shows them (safe while the
    /// server runs; constant memory)
    Export {
        space: String,
        /// Start after this `inbox_id` (a `next`, or the last `inbox_id` of an earlier export)
        #[arg(long, value_name = "ID", default_value_t = 0)]
        after: u64,
        #[arg(long, value_enum, default_value_t = ExportFormat::Ndjson)]
        format: ExportFormat,
        /// Write to FILE instead of standard output
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Import events into a space from NDJSON or CSV: the columns of `tracker export`, or the
    /// fields of POST /events. Recorded in batches as POST /events/batch records them (through
    /// the running server if one has the data file open); a line without an `eid` gets one made
    /// from its content, so importing the same file again stores nothing twice. Nothing is sent
    /// to the space's destinations unless --send says so. Prints how many events were queued,
    /// duplicates and refused, with each refused line's number and why, and what was not sent;
    /// exits 1 if any line was refused (the others are imported)
    Import {
        space: String,
        /// The file (`-`: standard input)
        file: PathBuf,
        /// The file's format [default: csv for a file named *.csv, else ndjson]
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// Also send the imported events to the space's destinations (the ad platforms,
        /// postbacks, webhooks), as new events are; without it a history moved from another
        /// tracker is stored and counted, and sent nowhere
        #[arg(long)]
        send: bool,
    },
    /// Print the example configuration with every default
    DefaultConfig,
    /// Print a shell completion script: `tracker completions bash > /etc/bash_completion.d/tracker`
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `tracker man | man -l -`
    Man,
}

/// The commands that only print something built into the binary: no settings, no data file.
fn print_only(command: &Command) -> Option<ExitCode> {
    match command {
        Command::DefaultConfig => print!("{}", config::EXAMPLE),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut command, "tracker", &mut std::io::stdout());
        }
        Command::Man => {
            let man = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
            match man.render(&mut std::io::stdout()) {
                // `tracker man | head` closes the pipe early: not a failure.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("tracker: writing the manual page: {e}");
                    return Some(ExitCode::FAILURE);
                }
                _ => {}
            }
        }
        _ => return None,
    }
    Some(ExitCode::SUCCESS)
}

/// Runs the command line; what `main` calls.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(done) = print_only(&cli.command) {
        return done;
    }
    let flags = Flags {
        config: cli.config.clone(),
        listen: match &cli.command {
            Command::Serve { listen, .. } => listen.clone(),
            _ => None,
        },
        data: cli.data.clone(),
    };
    let settings = match config::load(&flags, std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tracker: {}", output::visible(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    let log_flush = init_tracing(&settings);
    if let Some(s3) = settings.backups.as_ref().and_then(|b| b.s3.as_ref()) {
        s3.warn_if_others_can_read();
    }
    let out = Output { json: cli.json };
    let result = match cli.command {
        Command::Serve { ephemeral, .. } => serve::serve(settings, out, ephemeral),
        Command::Init => init::init(&settings, out),
        Command::Request(Request::Backup { dest })
            if crate::s3::parse_address(&dest.to_string_lossy()).is_some() =>
        {
            data_file_required(&settings)
                .and_then(|()| backup_s3::backup_to_s3(&settings, out, &dest.to_string_lossy()))
        }
        Command::Restore { source } => restore::restore(&settings, out, &source),
        Command::Request(request) => data_file_required(&settings)
            .and_then(|()| request::complete(request))
            .and_then(|r| request::run_request(&settings, out, r)),
        Command::Check { file, repair } => data_file::check(&settings, out, file, repair),
        Command::Compact => data_file::compact(&settings, out),
        Command::Export {
            space,
            after,
            format,
            out: file,
        } => data_file_required(&settings).and_then(|()| {
            export::export(&settings, out, (&space, after, format), file.as_deref())
        }),
        Command::Import {
            space,
            file,
            format,
            send,
        } => data_file_required(&settings)
            .and_then(|()| import::import(&settings, out, (&space, send), &file, format)),
        Command::DefaultConfig | Command::Completions { .. } | Command::Man => {
            unreachable!("handled above")
        }
    };
    // Writes out the log lines still queued, so they are all in the log and come before the
    // error below, the last line a person reads.
    drop(log_flush);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracker: {}", output::visible(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// Log lines the writer thread may hold before new ones are dropped (`init_tracing`).
const LOG_BUFFER_LINES: usize = 32_768;

/// The thread's buffer: it takes every line queued, then writes them to stderr at once, one
/// system call for many lines under load, and each line as soon as it comes when idle.
const LOG_WRITE_BYTES: usize = 64 * 1024;

/// Sends logs to stderr through a thread of their own, and returns the guard that flushes them:
/// keep it until the command ends.
///
/// A request only queues its access-log line; the thread writes it, so a slow terminal or a
/// stalled pipe to the service manager never slows an answer. The queue is lossy and bounded:
/// under a flood (every request logs a line) that stderr cannot keep up with, new lines are
/// dropped instead of making requests wait for stderr (which is what a blocking queue does once
/// full) or holding an unbounded amount of memory. 32,768 lines is about a second of the
/// fastest ingest and a few MB.
fn init_tracing(settings: &Settings) -> WorkerGuard {
    let (stderr, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_BUFFER_LINES)
        .thread_name("tracker-log")
        .finish(std::io::BufWriter::with_capacity(
            LOG_WRITE_BYTES,
            std::io::stderr(),
        ));
    let mut filter = tracing_subscriber::EnvFilter::new(&settings.log_level);
    // object_store writes an INFO line per retry of an S3 request (a dozen in seconds against
    // an endpoint that is down); the upload's own line says how the whole attempt ended.
    if !settings.log_level.contains("object_store")
        && let Ok(quiet) = "object_store=warn".parse()
    {
        filter = filter.add_directive(quiet);
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(stderr);
    let _ = match settings.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.with_ansi(colour_on_stderr()).try_init(),
    };
    guard
}

/// Colours only for a person at a terminal: not in a file, a pipe or the journal, where escape
/// codes are noise, and not when `NO_COLOR` is set (no-color.org), which the subscriber would
/// otherwise honour by itself.
fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Every command but `serve` and `init` works on a data file that exists: a missing one is
/// refused, naming the path (`open::require_existing`), before the command asks for a password
/// or creates its output, and instead of a new, empty data file being made where a wrong
/// `--data` or config file points. A server that answers on the control socket takes the
/// command as before. `check` and `compact` refuse a missing file the same way, in storage.
fn data_file_required(settings: &Settings) -> CliResult {
    if control::reachable(&control::socket_path(&settings.data)) {
        return Ok(());
    }
    Ok(crate::storage::require_existing(&settings.data)?)
}
