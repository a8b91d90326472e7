//! `tracker serve`: `backup_dir` made if missing (or the start refused), the listeners bound
//! before anything else is created (a taken address fails the start with nothing made, and
//! names another to try), the data file opened, what a first start
//! makes, the ready lines a person reads, and then the server until a shutdown signal.

use super::init::DevCredentials;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;

use super::admin::{admin_page_text, admin_url};
use super::init::{first_start, first_start_text};
use super::output::CliResult;
use super::output::Output;
use crate::app::App;
use crate::clock::SystemClock;
use crate::config::Settings;
use crate::server;
use crate::storage::{Store, StoreOptions};

pub(super) fn serve(settings: Settings, out: Output, ephemeral: bool) -> CliResult {
    let dev = dev_credentials(ephemeral)?;
    // Before anything is created: a backup_dir that cannot be made fails the start.
    if !ephemeral && let Some(dir) = settings.backups.as_ref().and_then(|b| b.dir.as_ref()) {
        crate::workers::backups::make_backup_dir(dir)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(async move {
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
            dedup_generation: dev_dedup_generation()?
                .unwrap_or(StoreOptions::default().dedup_generation),
            ..StoreOptions::default()
        };
        let (store, created) = Store::open(&settings.data, &options)?;
        let app = Arc::new(App::new(settings, Arc::new(store), Arc::new(SystemClock)));
        let made = first_start(&app, dev).await?;
        let base = app.settings.public_url();
        if let Some(space) = &made.space {
            let data = (created && !ephemeral).then(|| std::path::absolute(&app.settings.data));
            out.print(
                space,
                &first_start_text(space, data.transpose()?.as_deref(), &base),
            );
        }
        let note = app.settings.public_url_missing().then(|| {
            format!(
                "public_url is not set: tracking links and the addresses shown use {base}, which \
                 only this machine reaches; set public_url in the configuration to the address \
                 visitors use, such as \"https://t.example.com\""
            )
        });
        ready(
            out,
            (addr, metrics_addr),
            &base,
            made.admin_password.as_deref(),
            note.as_deref(),
        );
        server::serve_with_metrics(app, listener, metrics, shutdown).await?;
        Ok(())
    });
    // The data file is closed by now. What still runs on a blocking thread (an upload to S3
    // retrying against an endpoint that is down, for up to `retry_for`) is cut off rather than
    // waited for: a stop must not hang on the network. The backup stays where it was made, and
    // the next one is uploaded at its time.
    runtime.shutdown_timeout(STOP_GRACE);
    served
}

/// How long a stopping server waits for blocking work still running after the data file is
/// closed.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

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

/// Entries per generation of the dedup table from `TRACKER_DEV_DEDUP_GENERATION`: tests that run
/// the binary make it small, so that a few thousand events fill many generations and merge them.
fn dev_dedup_generation() -> Result<Option<usize>, Box<dyn std::error::Error>> {
    match std::env::var("TRACKER_DEV_DEDUP_GENERATION") {
        Err(_) => Ok(None),
        Ok(text) => match text.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "TRACKER_DEV_DEDUP_GENERATION must be a whole number of entries above 0, not {text:?}"
            )
            .into()),
        },
    }
}

/// The `default` space's credentials of an ephemeral server, from `TRACKER_DEV_SECRET` and
/// `TRACKER_DEV_INGEST_TOKEN`: both or neither, each a credential the tracker could have made.
pub(super) fn dev_credentials(
    ephemeral: bool,
) -> Result<Option<DevCredentials>, Box<dyn std::error::Error>> {
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

/// The ready lines, at every start: the address, the metrics address, `note` when there is
/// something to do (`public_url` to set), and the admin page's, with its password when this
/// start made it (the only time it is shown).
fn ready(
    out: Output,
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
    out.print(
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
