//! The command line: flags are parsed into [`Cli`], settings loaded, and each command run.
//!
//! Output meant for people goes to stdout as text, or as one JSON document with `--json`; logs go
//! to stderr. Exit codes: 0 success, 1 failure while running, 2 bad usage or configuration.

use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use tracing_appender::non_blocking::WorkerGuard;

use std::time::{Duration, Instant};

use crate::app::App;
use crate::app::spaces::{CreatedSpace, Rotated};
use crate::clock::{Clock, SystemClock};
use crate::config::{self, Flags, LogFormat, Settings};
use crate::control::{
    self, AdminRequest, Answer, CostsRequest, DestinationRequest, Reached, Request,
};
use crate::domain::password::{self, Password};
use crate::domain::spreadsheet::CsvRows;
use crate::server;
use crate::storage::{Store, StoreError, StoreOptions};

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    /// One JSON object per line
    Ndjson,
    /// RFC 4180, with a header row
    Csv,
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
// One arm per command, each a call: the dispatch reads best whole, in one place.
#[allow(clippy::too_many_lines)]
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
            eprintln!("tracker: {e}");
            return ExitCode::from(2);
        }
    };
    let log_flush = init_tracing(&settings);
    let out = Output { json: cli.json };
    let result = match cli.command {
        Command::Serve { ephemeral, .. } => serve(settings, out, ephemeral),
        Command::Init => init(&settings, out),
        Command::Request(request) => data_file_required(&settings)
            .and_then(|()| complete(request))
            .and_then(|r| run_request(&settings, out, r)),
        Command::Check { file, repair } => check(&settings, out, file, repair),
        Command::Compact => compact(&settings, out),
        Command::Export {
            space,
            after,
            format,
            out: file,
        } => data_file_required(&settings)
            .and_then(|()| export(&settings, out, (&space, after, format), file.as_deref())),
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
            eprintln!("tracker: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines the writer thread may hold before new ones are dropped (`init_tracing`).
const LOG_BUFFER_LINES: usize = 32_768;

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
        .finish(std::io::stderr());
    let filter = tracing_subscriber::EnvFilter::new(&settings.log_level);
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

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// Every command but `serve` and `init` works on a data file that exists: a missing one is
/// refused, naming the path (`open::require_existing`), before the command asks for a password
/// or creates its output, and instead of a new, empty data file being made where a wrong
/// `--data` or config file points. A server that answers on the control socket takes the
/// command as before. `check` and `compact` refuse a missing file the same way, in storage.
fn data_file_required(settings: &Settings) -> CliResult {
    if control::reachable(&control::socket_path(&settings.data)) {
        return Ok(());
    }
    Ok(crate::storage::open::require_existing(&settings.data)?)
}

/// How long an admin command waits for the data file while another command holds it.
const FILE_WAIT: Duration = Duration::from_secs(10);

/// Where requests go: the running server's control socket, or the data file opened here.
/// Decided by the first request: a server answering on the socket takes it, else the file is
/// opened.
// `Local` is large, but there is one of these per command.
#[allow(clippy::large_enum_variant)]
enum Target {
    Undecided,
    Server(PathBuf),
    Local {
        app: App,
        runtime: tokio::runtime::Runtime,
    },
}

impl Target {
    /// Runs one request; both targets run [`control::execute`].
    fn run(
        &mut self,
        settings: &Settings,
        request: Request,
    ) -> Result<Answer, Box<dyn std::error::Error>> {
        let socket = control::socket_path(&settings.data);
        let started = Instant::now();
        loop {
            match self {
                Target::Server(socket) => {
                    return match control::send(socket, &request)? {
                        Reached::Answered(answer) => Ok(answer?),
                        Reached::NoServer => Err("the server stopped while the command ran".into()),
                    };
                }
                Target::Local { app, runtime } => {
                    return Ok(runtime.block_on(control::execute(app, request))?);
                }
                Target::Undecided => {
                    if let Reached::Answered(answer) = control::send(&socket, &request)? {
                        *self = Target::Server(socket);
                        return Ok(answer?);
                    }
                    // No server: the file must be there (the server may have just stopped).
                    crate::storage::open::require_existing(&settings.data)?;
                    // A command's own open: it reads what it needs once, so a small cache.
                    let options = StoreOptions {
                        cache_bytes: crate::storage::open::COMMAND_CACHE_BYTES,
                        ..StoreOptions::default()
                    };
                    match Store::open(&settings.data, &options) {
                        Ok((store, _)) => {
                            let app =
                                App::new(settings.clone(), Arc::new(store), Arc::new(SystemClock));
                            let runtime = tokio::runtime::Builder::new_current_thread().build()?;
                            *self = Target::Local { app, runtime };
                        }
                        // Another command has the file for a moment, or a server is starting.
                        Err(StoreError::InUse(_)) if started.elapsed() < FILE_WAIT => {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Target::Local { app, .. } = self {
            app.store.close();
        }
    }
}

/// Runs a request through the running server's control socket, or, when no server runs, on
/// the data file directly. Both paths run [`control::execute`].
fn run_request(settings: &Settings, out: Output, request: Request) -> CliResult {
    let dest = match &request {
        Request::Backup { dest } => Some(dest.clone()),
        _ => None,
    };
    let answer = Target::Undecided.run(settings, request)?;
    out.answer(&answer, &settings.public_url(), dest.as_deref());
    Ok(())
}

/// `tracker check`: through the running server's socket when it has the data file open (the
/// invariants only), else on the file itself (redb's page check as well). An error when
/// anything is wrong, so scripts and timers can alert on the exit status.
fn check(settings: &Settings, out: Output, file: Option<PathBuf>, repair: bool) -> CliResult {
    let socket = control::socket_path(&settings.data);
    let through_server = match &file {
        None => match control::send(&socket, &Request::Check { repair })? {
            Reached::Answered(answer) => Some(answer?),
            Reached::NoServer => None,
        },
        Some(_) => None,
    };
    let path = file.unwrap_or_else(|| settings.data.clone());
    let report = match through_server {
        Some(Answer::Checked(report)) => report,
        Some(other) => return Err(format!("the server answered a check with {other:?}").into()),
        None => crate::storage::check::check_file(
            &path,
            repair,
            settings.dedup_expiry(SystemClock.now_ms()),
        )?,
    };
    let mut text = String::new();
    match report.redb_integrity {
        Some(true) => text.push_str("redb page check: passed\n"),
        Some(false) => text.push_str("redb page check: FAILED, and redb repaired the file\n"),
        None => text.push_str(
            "redb page check: not run (the server has the file open; check a backup, or stop \
             the server)\n",
        ),
    }
    for f in &report.repaired {
        let _ = writeln!(text, "repaired: {} [{}]: {}", f.table, f.key, f.problem);
    }
    for f in &report.findings {
        let how = if f.repairable {
            "tracker check --repair rebuilds it"
        } else {
            "not derivable: restore from a backup"
        };
        let _ = writeln!(text, "{} [{}]: {} ({how})", f.table, f.key, f.problem);
    }
    let _ = write!(
        text,
        "{}: {} rows read, {} problem(s)",
        path.display(),
        report.rows,
        report.findings.len()
    );
    out.print(&report, &text);
    if report.clean() {
        Ok(())
    } else {
        Err(format!(
            "{} has {} problem(s)",
            path.display(),
            report.findings.len()
        )
        .into())
    }
}

/// `tracker compact`: offline only (`storage/compact.rs` says why).
fn compact(settings: &Settings, out: Output) -> CliResult {
    let path = &settings.data;
    if control::reachable(&control::socket_path(path)) {
        return Err(format!(
            "a server has {} open, and compacting needs the file to itself: stop the server \
             (e.g. systemctl stop tracker), run tracker compact, then start it again",
            path.display()
        )
        .into());
    }
    let done = crate::storage::compact::compact_file(path)?;
    let text = format!(
        "compacted {}: {} bytes before, {} after ({} freed)",
        path.display(),
        done.bytes_before,
        done.bytes_after,
        done.bytes_before.saturating_sub(done.bytes_after)
    );
    out.print(&done, &text);
    Ok(())
}

/// `tracker export`: the space's feed page by page (constant memory), through the server when
/// one runs. Stops at the end of what is committed when it reaches it.
fn export(
    settings: &Settings,
    output: Output,
    (space, mut after, format): (&str, u64, ExportFormat),
    out: Option<&std::path::Path>,
) -> CliResult {
    let mut target = Target::Undecided;
    let file: Box<dyn std::io::Write> = match out {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut sink = std::io::BufWriter::new(file);
    // CSV through the one writer that neutralises formulas (`domain::spreadsheet`).
    let mut csv = (format == ExportFormat::Csv).then(|| CsvRows::new(Vec::new()));
    // Progress on a terminal only: indicatif draws nothing when stderr is not one.
    let progress = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} events exported ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let (mut written, mut last) = (0_u64, None);
    loop {
        let request = Request::ExportPage {
            space: space.to_owned(),
            after,
            limit: crate::domain::feed::MAX_PAGE,
        };
        let page = match target.run(settings, request)? {
            Answer::Page(page) => page,
            other => return Err(format!("the server answered a page with {other:?}").into()),
        };
        for event in &page.events {
            if let Some(w) = &mut csv {
                w.row(event)?;
            } else {
                serde_json::to_writer(&mut sink, event)?;
                sink.write_all(b"\n")?;
            }
        }
        // The CSV rows of a page, emptied into the sink: memory stays one page whatever the
        // size of the export.
        if let Some(w) = &mut csv {
            sink.write_all(&w.take_written()?)?;
        }
        progress.inc(page.events.len() as u64);
        written += page.events.len() as u64;
        if let Some(event) = page.events.last() {
            last = Some(event.inbox_id.clone());
        }
        match page.next {
            Some(next) => after = next.parse()?,
            None => break,
        }
    }
    sink.flush()?;
    progress.finish_and_clear();
    // With the events in a file, standard output says what was written and how to go on.
    if let Some(path) = out {
        #[derive(Serialize)]
        struct Exported<'a> {
            space: &'a str,
            file: String,
            events: u64,
            /// The last event's `inbox_id`: the `--after` of the next export.
            last_inbox_id: Option<&'a str>,
        }
        let file = path.display().to_string();
        let s = if written == 1 { "" } else { "s" };
        let text = match &last {
            Some(id) => format!(
                "wrote {written} event{s} of space {space} to {file}; the last is inbox_id {id}, \
                 and --after {id} exports what comes after it"
            ),
            None if after == 0 => format!("wrote 0 events of space {space} to {file}: it has none"),
            None => {
                format!("wrote 0 events of space {space} to {file}: none after inbox_id {after}")
            }
        };
        output.print(
            &Exported {
                space,
                file,
                events: written,
                last_inbox_id: last.as_deref(),
            },
            &text,
        );
    }
    Ok(())
}

fn serve(settings: Settings, out: Output, ephemeral: bool) -> CliResult {
    let dev = dev_credentials(ephemeral)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        // First, so a SIGTERM at any moment after start is a clean stop.
        let shutdown = server::shutdown_signal();
        // The listeners before the data file: an address that is taken fails the start with
        // nothing created, so the next start still makes the credentials and shows them.
        let listener = bind(settings.listen, Listener::Api).await?;
        let metrics = match settings.metrics_listen {
            Some(at) => Some(bind(at, Listener::Metrics).await?),
            None => None,
        };
        let addr = listener.local_addr()?;
        let metrics_addr = metrics
            .as_ref()
            .map(tokio::net::TcpListener::local_addr)
            .transpose()?;
        // The bound address (a port of 0 is chosen now): in every line printed, and what
        // `public_url` defaults to.
        let settings = Settings {
            listen: addr,
            ..settings
        };
        let options = StoreOptions {
            ephemeral,
            ..StoreOptions::default()
        };
        let (store, created) = Store::open(&settings.data, &options)?;
        let app = Arc::new(App::new(settings, Arc::new(store), Arc::new(SystemClock)));
        let made = first_start(&app, dev).await?;
        let base = app.settings.public_url();
        if let Some(space) = &made.space {
            let data = (created && !ephemeral).then(|| std::path::absolute(&app.settings.data));
            out.first_start(space, data.transpose()?.as_deref(), &base);
        }
        let note = app.settings.public_url_missing().then(|| {
            format!(
                "public_url is not set: tracking links and the addresses shown use {base}, which \
                 only this machine reaches; set public_url in the configuration to the address \
                 visitors use, such as \"https://t.example.com\""
            )
        });
        out.listening(
            (addr, metrics_addr),
            &base,
            made.admin_password.as_deref(),
            note.as_deref(),
        );
        server::serve_with_metrics(app, listener, metrics, shutdown).await?;
        Ok(())
    })
}

/// What a first start made: each is shown once, so each is `Some` only when made now.
struct Made {
    /// The `default` space, on a data file without spaces (`None` with known credentials,
    /// which the caller already has).
    space: Option<CreatedSpace>,
    /// The admin page's password, when none was set.
    admin_password: Option<String>,
}

/// Makes what a data file needs before it is served: the `default` space if it has no space
/// (with `dev`'s credentials when given), and the admin page's password if none is set.
async fn first_start(app: &App, dev: Option<DevCredentials>) -> Result<Made, crate::error::Error> {
    let mut space = None;
    if app.spaces().await?.is_empty() {
        match dev {
            Some((secret, ingest)) => {
                app.create_space_with("default", secret, ingest).await?;
            }
            None => space = Some(app.create_space("default").await?),
        }
    }
    let admin_password = app.ensure_password().await?;
    Ok(Made {
        space,
        admin_password,
    })
}

/// `tracker init`: a new data file with what a first start makes, shown on this terminal and
/// never in a service's log; the server started later finds it ready.
fn init(settings: &Settings, out: Output) -> CliResult {
    let path = &settings.data;
    if crate::storage::open::holds_data(path) {
        return Err(format!(
            "there is already a data file at {}; `tracker init` only makes a new one (add a \
             space to it with `tracker space create NAME`)",
            path.display()
        )
        .into());
    }
    let options = StoreOptions {
        cache_bytes: crate::storage::open::COMMAND_CACHE_BYTES,
        ..StoreOptions::default()
    };
    let (store, _) = Store::open(path, &options)?;
    let app = App::new(settings.clone(), Arc::new(store), Arc::new(SystemClock));
    let made = tokio::runtime::Builder::new_current_thread()
        .build()?
        .block_on(first_start(&app, None));
    app.store.close();
    let made = made?;
    let (Some(space), Some(password)) = (made.space, made.admin_password) else {
        return Err("the new data file already had a space or a password".into());
    };
    out.initialised(
        &space,
        &std::path::absolute(path)?,
        &settings.public_url(),
        &password,
    );
    Ok(())
}

/// The server's two listeners, for what their errors say.
#[derive(Clone, Copy)]
enum Listener {
    /// `listen`: the API, the tracking links and the admin page.
    Api,
    /// `metrics_listen`.
    Metrics,
}

/// Binds `addr`; a failure names the address and how to choose another.
async fn bind(addr: SocketAddr, listener: Listener) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| cannot_listen(addr, listener, &e))
}

/// The error of a listener that cannot bind: the address, the system's reason, and a flag or
/// key with another address to try (the next port, when this one is taken).
fn cannot_listen(addr: SocketAddr, listener: Listener, e: &std::io::Error) -> String {
    let other = match (e.kind(), addr.port()) {
        (std::io::ErrorKind::AddrInUse, port @ 1..=65534) => SocketAddr::new(addr.ip(), port + 1),
        _ if addr.port() == 8080 => SocketAddr::from(([127, 0, 0, 1], 8081)),
        _ => SocketAddr::from(([127, 0, 0, 1], 8080)),
    };
    match listener {
        Listener::Api => format!(
            "cannot listen on {addr}: {e}; choose another address with --listen {other} (or \
             `listen` in the config file)"
        ),
        Listener::Metrics => format!(
            "cannot listen for metrics on {addr}: {e}; choose another address with \
             `metrics_listen = \"{other}\"` in the config file (or TRACKER_METRICS_LISTEN)"
        ),
    }
}

/// The `default` space's secret and ingest token, given by the caller of `serve --ephemeral`.
type DevCredentials = (
    crate::domain::credential::Issued,
    crate::domain::credential::Issued,
);

/// The `default` space's credentials of an ephemeral server, from `TRACKER_DEV_SECRET` and
/// `TRACKER_DEV_INGEST_TOKEN`: both or neither, each a credential the tracker could have made.
fn dev_credentials(ephemeral: bool) -> Result<Option<DevCredentials>, Box<dyn std::error::Error>> {
    use crate::domain::credential::{self, Kind};
    let secret = std::env::var("TRACKER_DEV_SECRET").ok();
    let ingest = std::env::var("TRACKER_DEV_INGEST_TOKEN").ok();
    match (secret, ingest) {
        (None, None) => Ok(None),
        _ if !ephemeral => Err(
            "TRACKER_DEV_SECRET and TRACKER_DEV_INGEST_TOKEN are only for `serve --ephemeral`"
                .into(),
        ),
        (Some(secret), Some(ingest)) => Ok(Some((
            credential::from_text(&secret, Kind::Secret, "TRACKER_DEV_SECRET")?,
            credential::from_text(&ingest, Kind::Ingest, "TRACKER_DEV_INGEST_TOKEN")?,
        ))),
        _ => Err("set both TRACKER_DEV_SECRET and TRACKER_DEV_INGEST_TOKEN, or neither".into()),
    }
}

/// What a request needs from here before it is sent: the backup's destination made absolute (a
/// server answering through the socket has its own working directory), the new admin password
/// read from the terminal or standard input.
fn complete(mut request: Request) -> Result<Request, Box<dyn std::error::Error>> {
    match &mut request {
        Request::Backup { dest } => *dest = std::path::absolute(&*dest)?,
        Request::Costs {
            request: CostsRequest::Import { file, csv, .. },
        } => {
            *csv = control::FileText(if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&*file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            });
        }
        Request::Admin {
            request: AdminRequest::Password { password },
        } => *password = read_new_password()?,
        Request::Destination {
            request:
                DestinationRequest::Create {
                    kind, access_token, ..
                },
        } if kind == "meta_capi" => {
            *access_token = Some(crate::domain::password::SecretText(read_access_token()?));
        }
        _ => {}
    }
    Ok(request)
}

/// The new admin password: typed twice without echo on a terminal, else the first line of
/// standard input (for scripts: `echo "$PASSWORD" | tracker admin password`). The rule is
/// checked here too, before anything is asked of a server.
fn read_new_password() -> Result<Password, Box<dyn std::error::Error>> {
    use std::io::BufRead;
    let stdin = std::io::stdin();
    let password = if stdin.is_terminal() {
        let first = prompt_hidden("New admin password: ")?;
        password::check_rule(&first)?;
        if prompt_hidden("Again: ")? != first {
            return Err("the two passwords differ; nothing was changed".into());
        }
        first
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    password::check_rule(&password)?;
    Ok(Password(password))
}

/// A Meta access token: asked without echo on a terminal, else the first line of standard
/// input (`tracker destination create ... < token.txt`).
fn read_access_token() -> Result<String, Box<dyn std::error::Error>> {
    use std::io::BufRead;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return prompt_hidden("Meta access token: ");
    }
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

/// Reads a line from the terminal with echo off, restoring the terminal after.
fn prompt_hidden(prompt: &str) -> Result<String, Box<dyn std::error::Error>> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    use std::io::BufRead;
    let stdin = std::io::stdin();
    eprint!("{prompt}");
    let before = tcgetattr(&stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Flush, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(&stdin, OptionalActions::Flush, &before)?;
    eprintln!();
    read?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// A space's settings as the command line takes them: `attribution=first_touch ...`.
fn settings_text(settings: &crate::domain::settings::SpaceSettings) -> String {
    settings
        .pairs()
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints command results as text or JSON.
#[derive(Clone, Copy)]
struct Output {
    json: bool,
}

impl Output {
    /// Prints a request's answer, as JSON with `--json`, else as text (with `base`, the public
    /// address, where a new space's lines use it; naming `dest`, where a backup went).
    fn answer(self, answer: &Answer, base: &str, dest: Option<&Path>) {
        if self.json {
            self.print(&answer.json(), "");
            return;
        }
        match answer {
            Answer::SpaceCreated(created) => self.created_space(created, base),
            Answer::Spaces(spaces) => self.space_list(spaces),
            Answer::Rotated(rotated) => self.rotated(rotated),
            Answer::Revoked(r) => {
                let text = format!(
                    "revoked {} {} credential(s) of space {}; none is active until the next rotate",
                    r.revoked, r.kind, r.space
                );
                self.print(r, &text);
            }
            // `check` prints its own report (`check`); an export page is data.
            Answer::Page(_) | Answer::Checked(_) => {
                let value = answer.json();
                self.print(&value, &value.to_string());
            }
            Answer::SpaceSettings(set) => {
                let text = format!("space {}: {}", set.space, settings_text(&set.settings));
                self.print(set, &text);
            }
            Answer::PasswordSet(set) => self.print(
                set,
                "the admin password is set; log in at /admin/ as user admin",
            ),
            Answer::LinkCreated(link) => {
                let text = format!(
                    "created link {}: put this address in your ads\n  {}",
                    link.slug, link.url
                );
                self.print(link, &text);
            }
            Answer::Links(links) => {
                let mut text = String::new();
                for l in links {
                    let to = l
                        .bot
                        .as_deref()
                        .map_or_else(|| l.target.clone().unwrap_or_default(), |b| format!("@{b}"));
                    let _ = writeln!(
                        text,
                        "{:<20} {:<8} {} clicks, {} bound  -> {}  {}",
                        l.slug, l.mode, l.clicks, l.bound_clicks, to, l.url
                    );
                }
                if links.is_empty() {
                    text.push_str("no links yet: tracker link create SPACE SLUG --bot NAME");
                }
                self.print(links, text.trim_end());
            }
            Answer::LinkDeleted(d) => {
                let text = format!(
                    "deleted link {} of space {}: its address now answers 410 Gone",
                    d.slug, d.space
                );
                self.print(d, &text);
            }
            Answer::DestinationCreated(_)
            | Answer::Destinations(_)
            | Answer::DestinationDeleted(_)
            | Answer::Deliveries(_)
            | Answer::Retried(_) => self.destination_answer(answer),
            Answer::Stats(shown) => self.print(shown, &stats_text(shown)),
            Answer::CostsImported(done) => {
                let text = if done.summary.is_empty() {
                    // A server from before the summary answered only these two.
                    format!("{} cost(s) set, {} removed", done.set, done.removed)
                } else {
                    done.summary.clone()
                };
                self.print(done, &text);
            }
            Answer::BackedUp(stats) => {
                let text = format!(
                    "backed up {} rows ({} bytes) to {}",
                    stats.rows,
                    stats.bytes,
                    dest.map_or_else(String::new, |d| d.display().to_string())
                );
                self.print(stats, &text);
            }
        }
    }

    /// The answers of `tracker destination ...`, as text.
    fn destination_answer(self, answer: &Answer) {
        match answer {
            Answer::DestinationCreated(d) => {
                let mut text = format!(
                    "created destination {} ({}): the space's new events it takes are sent there",
                    d.name,
                    d.kind.as_str()
                );
                if let Some(secret) = &d.signing_secret {
                    let _ = write!(
                        text,
                        "\n  signing secret  {secret}\n  (shown once: the receiver checks \
                         Tracker-Signature with it)"
                    );
                }
                self.print(d, &text);
            }
            Answer::Destinations(list) => {
                let mut text = String::new();
                for d in list {
                    let c = &d.deliveries;
                    let _ = writeln!(
                        text,
                        "{:<20} {:<9} pending {} delivered {} retrying {} dead {} cancelled {}  {}",
                        d.name,
                        d.kind.as_str(),
                        c.0[0],
                        c.0[1],
                        c.0[2],
                        c.0[3],
                        c.0[4],
                        d.url
                            .as_deref()
                            .or(d.pixel_id.as_deref())
                            .unwrap_or_default()
                    );
                    if let Some(e) = &d.last_error {
                        let _ = writeln!(
                            text,
                            "{:<20} last error: {} {}",
                            "",
                            e.status.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                            e.answer
                        );
                    }
                }
                if list.is_empty() {
                    text.push_str(
                        "no destinations yet: tracker destination create SPACE NAME --kind webhook --url URL",
                    );
                }
                self.print(list, text.trim_end());
            }
            Answer::DestinationDeleted(d) => {
                let text = format!(
                    "removed destination {} of space {}: its open deliveries are cancelled",
                    d.name, d.space
                );
                self.print(d, &text);
            }
            Answer::Deliveries(list) => {
                let mut text = String::new();
                for d in list {
                    let _ = writeln!(
                        text,
                        "{:>10} {:<20} {:<9} {} attempt(s) {} {}",
                        d.inbox_id,
                        d.destination,
                        d.state.as_str(),
                        d.attempts,
                        d.last_status
                            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                        d.last_answer.as_deref().unwrap_or_default()
                    );
                }
                if list.is_empty() {
                    text.push_str("no deliveries");
                }
                self.print(list, text.trim_end());
            }
            Answer::Retried(r) => {
                let text = format!(
                    "{} dead deliveries of {} are due again now",
                    r.retried, r.destination
                );
                self.print(r, &text);
            }
            _ => {}
        }
    }

    fn print<T: Serialize>(self, value: &T, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = if self.json {
            writeln!(
                stdout,
                "{}",
                serde_json::to_string(value).unwrap_or_default()
            )
        } else {
            writeln!(stdout, "{text}")
        };
        let _ = stdout.flush();
    }

    /// A new space's credentials, shown once, as lines to paste into a shell (`base`: the
    /// tracker's public address, for `TRACKER`).
    fn created_space(self, c: &CreatedSpace, base: &str) {
        let text = format!(
            "Created space {}. {}",
            c.space,
            credentials_text(c, base, "Its secret and ingest token are", PASTE_OTHER)
        );
        self.print(c, text.trim_end());
    }

    /// The first start's space, with the data file it made (`None`: an existing file without
    /// spaces, or `--ephemeral`).
    fn first_start(self, c: &CreatedSpace, data: Option<&Path>, base: &str) {
        let made = data.map_or_else(
            || format!("Created space {}.", c.space),
            |path| {
                format!(
                    "Created the data file {} with a space named {}.",
                    path.display(),
                    c.space
                )
            },
        );
        let shown = credentials_text(
            c,
            base,
            "Its secret and ingest token, and the admin password below, are",
            PASTE_FIRST,
        );
        self.print(c, &format!("{made} {shown}"));
    }

    /// `tracker init`'s report: the first start's, and the admin page with its password.
    fn initialised(self, c: &CreatedSpace, data: &Path, base: &str, password: &str) {
        #[derive(Serialize)]
        struct Initialised<'a> {
            data: &'a Path,
            #[serde(flatten)]
            space: &'a CreatedSpace,
            admin_url: String,
            admin_password: &'a str,
        }
        let text = format!(
            "Created the data file {} with a space named {}. {}\n{}\n\nStart the server with \
             `tracker serve` (with the same --config and --data), or the service that runs it.",
            data.display(),
            c.space,
            credentials_text(
                c,
                base,
                "Its secret and ingest token, and the admin password below, are",
                PASTE_FIRST,
            ),
            admin_page_text(base, Some(password)),
        );
        self.print(
            &Initialised {
                data,
                space: c,
                admin_url: admin_url(base),
                admin_password: password,
            },
            &text,
        );
    }

    fn rotated(self, r: &Rotated) {
        let until = r.previous_valid_until_ms.map_or_else(
            || "no credential was active, so none is in grace".to_owned(),
            |ms| {
                format!(
                    "the replaced one keeps working until {} (epoch ms {ms})",
                    crate::clock::rfc3339_s(ms)
                )
            },
        );
        self.print(
            r,
            &format!(
                "new {} for space {}: {}\n{until}",
                r.kind, r.space, r.credential
            ),
        );
    }

    fn space_list(self, spaces: &[crate::storage::read::SpaceSummary]) {
        let mut text = String::new();
        for s in spaces {
            let _ = writeln!(
                text,
                "{}  (created {})\n  settings  {}",
                s.space,
                crate::clock::rfc3339_s(s.created_at_ms),
                settings_text(&s.settings)
            );
            for c in &s.credentials {
                let state = c.state(SystemClock.now_ms());
                let used = c
                    .last_used_ms
                    .map_or_else(|| "never".to_owned(), crate::clock::rfc3339_s);
                let _ = writeln!(
                    text,
                    "  {:<6}  {}…  created {}  last used {}  {}",
                    c.kind,
                    c.prefix,
                    crate::clock::rfc3339_s(c.created_at_ms),
                    used,
                    state
                );
            }
        }
        self.print(&spaces, text.trim_end());
    }

    /// The ready lines, at every start: the address, the metrics address, `note` when there is
    /// something to do (`public_url` to set), and the admin page's, with its password when this
    /// start made it (the only time it is shown).
    fn listening(
        self,
        (addr, metrics): (SocketAddr, Option<SocketAddr>),
        base: &str,
        admin_password: Option<&str>,
        note: Option<&str>,
    ) {
        #[derive(Serialize)]
        struct ReadyLine<'a> {
            listening: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            metrics: Option<String>,
            admin_url: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            admin_password: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            note: Option<&'a str>,
        }
        let mut text = format!("listening on http://{addr}");
        if let Some(metrics) = metrics {
            let _ = write!(text, "\nmetrics on http://{metrics}/metrics");
        }
        if let Some(note) = note {
            let _ = write!(text, "\n{note}");
        }
        let _ = write!(text, "\n{}", admin_page_text(base, admin_password));
        self.print(
            &ReadyLine {
                listening: addr.to_string(),
                metrics: metrics.map(|m| m.to_string()),
                admin_url: admin_url(base),
                admin_password,
                note,
            },
            &text,
        );
    }
}

/// The admin page's address under the public base address.
fn admin_url(base: &str) -> String {
    format!("{base}/admin/")
}

/// The admin page's line: its address and user, with the password when it was made now.
fn admin_page_text(base: &str, password: Option<&str>) -> String {
    let url = admin_url(base);
    match password {
        Some(password) => format!(
            "Admin page: {url}  user admin  password {password}\n  (shown only this once; \
             `tracker admin password` sets another)"
        ),
        None => format!(
            "Admin page: {url}  user admin  (forgot the password? `tracker admin password` \
             sets a new one)"
        ),
    }
}

/// What the `export` lines are for: the first space's are the README's examples' own; a later
/// space's replace them.
const PASTE_FIRST: &str = "Paste these lines into your shell; the README's examples use them:";
const PASTE_OTHER: &str = "To work with this space, paste these lines into your shell (they \
                           replace the SECRET and INGEST_TOKEN of the space you used before):";

/// A new space's credentials as `export` lines to paste into a shell, under the names the
/// README's examples use, with a request to try them; `shown` says what is shown only once.
fn credentials_text(c: &CreatedSpace, base: &str, shown: &str, paste: &str) -> String {
    format!(
        "{shown} shown only this once: keep them somewhere safe.\n\
         {paste}\n\
         \n  export TRACKER={base}\
         \n  export SECRET={secret}\
         \n  export INGEST_TOKEN={token}\n\
         \nSECRET is for your servers only (Authorization: Bearer $SECRET); INGEST_TOKEN goes in \
         postback URLs (?token=$INGEST_TOKEN).\n\
         \nTry it (with the server running):\
         \n  curl -s \"$TRACKER/events\" -H \"Authorization: Bearer $SECRET\" \
         -d '{{\"event\":\"contact\",\"uid\":\"test-click\"}}'\n",
        base = shell_word(base),
        secret = c.secret,
        token = c.ingest_token,
    )
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially
/// (every credential, and a plain address), else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.:/@%+=,[]".contains(c);
    if text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `tracker stats` as a table: a line per group, each currency's figures after the counts.
fn stats_text(shown: &control::StatsShown) -> String {
    let mut text = format!(
        "{:<24} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  revenue / cost / roi\n",
        shown.by, "clicks", "bound", "regs", "deps", "first", "bound%"
    );
    for g in &shown.groups {
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let money = |name: &str| {
            g[name]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(c, v)| format!("{} {c}", v.as_str().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".into())
        };
        let cost_currencies = g["cost"].as_object().map_or(0, serde_json::Map::len);
        let roi = g["roi"].as_object().map_or_else(String::new, |m| {
            crate::domain::stats::returns_text(
                m.iter()
                    .filter_map(|(c, v)| Some((c.as_str(), v.as_str()?))),
                cost_currencies,
            )
        });
        let _ = writeln!(
            text,
            "{:<24} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  {} / {} / {}",
            g["group"].as_str().unwrap_or("(none)"),
            n(&g["clicks"]),
            n(&g["bound_clicks"]),
            n(&g["events"]["registration"]),
            n(&g["events"]["deposit"]),
            n(&g["first_deposits"]),
            g["rates"]["bound"]
                .as_str()
                .map_or_else(|| "-".to_owned(), crate::domain::stats::percent),
            money("deposits"),
            money("cost"),
            if roi.is_empty() { "-".to_owned() } else { roi },
        );
    }
    if shown.groups.is_empty() {
        text.push_str("no clicks, events or costs in this range");
    }
    text.trim_end().to_owned()
}
