//! Running the tracker: serve HTTP on a bound listener until `shutdown`, then close the store.
//!
//! The listener is bound by the caller, so tests start the real server on port 0 and read the
//! address back; `tracker serve` binds the configured address. Beside HTTP, the server listens
//! on its control socket (`control/socket.rs`) for the command line.
//!
//! Connections (`docs/api.md#limits`): at most `max_connections` are open; past that the accept
//! loop waits for one to close, and new clients wait in the kernel's queue without touching
//! those in service. One client address holds at most `max_connections_per_address` of them
//! (an IPv6 client: its /64); past that a new connection is answered `429` at once and closed,
//! so no single address can take the service from the rest. The count is by the TCP peer, the
//! only address known when a connection is accepted: a peer in `trusted_proxies` is not counted,
//! since a reverse proxy carries every visitor's connections (the proxy limits per visitor). Each connection is served by `connection.rs`, which cuts off slow heads,
//! stalled bodies and idle keep-alives. At shutdown, the listener closes, idle connections close
//! at once, requests in flight get `shutdown_timeout` to finish, and whatever is left is cut off,
//! so a stalled client cannot hold the process.

pub mod connection;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use warp::Filter;
use warp::reply::Response;

use crate::app::App;
use crate::config::ConnectionLimits;
use crate::domain::client::{Cidr, address_key};
use crate::error::{Code, Error};
use crate::metrics::{self, Metrics};
use crate::storage::{Health, StoreError};
use crate::surface::respond;
use crate::workers::Workers;
use crate::{control, router};
use connection::ConnectionStats;

/// File descriptors kept free of connections: the data file, the control socket and its clients,
/// the log, the listener, and the tracker's own threads.
const RESERVED_FDS: u64 = 64;

/// Serves until `shutdown` resolves: stops accepting, lets requests in flight finish, commits
/// everything the writer holds, and closes the data file cleanly.
///
/// If the store fails for good meanwhile (a failed flush, a dead writer), it stops the same way
/// and answers the failure, so that the process exits non-zero and its supervisor starts it
/// again, which recovers from the file.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StoreError> {
    serve_with_metrics(app, listener, None, shutdown).await
}

/// [`serve`], and `GET /metrics` on `metrics` (bound by the caller from `metrics_listen`) until
/// the main listener has stopped.
pub async fn serve_with_metrics(
    app: Arc<App>,
    listener: TcpListener,
    metrics: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StoreError> {
    let socket_path = control::socket_path(&app.settings.data);
    // An ephemeral server writes no file at all, its socket included.
    let socket = if app.store.is_ephemeral() {
        None
    } else {
        match control::listen(&socket_path, app.clone()) {
            Ok(socket) => Some(socket),
            Err(e) => {
                tracing::error!(
                    path = %socket_path.display(),
                    error = %e,
                    "cannot create the control socket; space and keys commands will not reach this server"
                );
                None
            }
        }
    };
    let workers = start_workers(&app);
    let routes = router::routes(app.clone());
    let failed = app.store.failed();
    let stop = async move {
        tokio::select! {
            () = shutdown => {}
            reason = failed => tracing::error!(%reason, "storage failed; stopping"),
        }
    };
    let mut limits = app.settings.connections;
    limits.max_connections = fit_open_files_limit(limits.max_connections);
    let (stopped, stopped_rx) = watch::channel(false);
    let scrapes = metrics.map(|metrics_listener| {
        let routes = metrics_routes(&app);
        let mut stopped_rx = stopped_rx;
        let scrape_limits = ConnectionLimits {
            max_connections: 16,
            ..limits
        };
        tokio::spawn(serve_connections(
            routes,
            metrics_listener,
            scrape_limits,
            async move {
                let _ = stopped_rx.wait_for(|s| *s).await;
            },
        ))
    });
    let per_address = PerAddress::new(
        limits.max_connections_per_address,
        app.settings.trusted_proxies.clone(),
    );
    serve_counted(
        routes,
        listener,
        limits,
        per_address,
        stop,
        Some(app.metrics.clone()),
    )
    .await;
    stopped.send_replace(true);
    if let Some(scrapes) = scrapes {
        let _ = scrapes.await;
    }
    drop(socket);
    // A backup in progress goes on in its reader thread: it is linked into place if it is
    // complete before the process exits, and otherwise only its temporary file is left.
    workers.stop().await;
    tracing::info!("stopped accepting; committing and closing the data file");
    let store = app.store.clone();
    // `close` joins the writer thread: blocking work, kept off the async workers.
    let _ = tokio::task::spawn_blocking(move || store.close()).await;
    match app.store.health() {
        Health::Serving | Health::Unwritable(_) => {
            tracing::info!("the data file is closed; stopped");
            Ok(())
        }
        Health::Failed(reason) => Err(StoreError::Failed(reason)),
    }
}

/// The server's background work, each started through [`Workers`]: retention, the senders of
/// conversions out, the Telegram bots of channel links, the fetch of spend from Meta, the
/// health checks of links' targets and their alerts, and the
/// backup schedule when `backup_dir` or `[backup_s3]` is set (not for an ephemeral store, which
/// writes no file). Each is handed the narrow part of the application it uses. Stopping them
/// cuts off a send in flight: it is sent again after the next start.
fn start_workers(app: &App) -> Workers {
    let mut workers = Workers::default();
    workers.start(app.retention());
    workers.start(app.senders());
    workers.start(app.telegram_tasks());
    workers.start(app.spend_tasks());
    workers.start(app.health_checks());
    if let Some(alerts) = app.alert_tasks() {
        workers.start(alerts);
    }
    workers.start(app.ecb_tasks());
    match &app.settings.backups {
        Some(_) if app.store.is_ephemeral() => tracing::warn!(
            "backups are set (backup_dir or [backup_s3]), but an ephemeral server writes no \
             file: no automatic backups"
        ),
        Some(schedule) => {
            tracing::info!(
                dir = ?schedule.dir,
                s3 = ?schedule.s3.as_ref().map(|s3| format!("s3://{}/{}", s3.bucket, s3.prefix)),
                every = %humantime::format_duration(schedule.every),
                keep = schedule.keep,
                "automatic backups on"
            );
            workers.start(app.backups(schedule.clone()));
        }
        None => {}
    }
    workers
}

/// Serves `routes` on every connection `listener` accepts, within `limits`, until `stop`
/// resolves; returns when every connection is closed (or was cut off at `shutdown_timeout`).
///
/// # Panics
/// Never: the semaphore of connection permits is never closed.
pub async fn serve_connections<F>(
    routes: F,
    listener: TcpListener,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) where
    F: Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static,
{
    let per_address = PerAddress::new(limits.max_connections_per_address, Vec::new());
    serve_counted(routes, listener, limits, per_address, stop, None).await;
}

/// The listener of `/metrics`: that one path, and the JSON error body for any other.
fn metrics_routes(
    app: &Arc<App>,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    let data = (!app.store.is_ephemeral()).then(|| metrics::DataFile {
        path: app.settings.data.clone(),
        bytes_read: crate::storage::file_bytes_read,
    });
    let registry = Arc::new(metrics::registry(
        app.metrics.clone(),
        app.store.writer_metrics().clone(),
        data,
    ));
    warp::path!("metrics")
        .and(warp::get())
        .map(move || {
            let mut response = Response::new(metrics::render(&registry).into());
            response.headers_mut().insert(
                warp::http::header::CONTENT_TYPE,
                warp::http::HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            response
        })
        .recover(respond::recover)
        .unify()
}

/// [`serve_connections`], counting every answer in `metrics` when given.
async fn serve_counted<F>(
    routes: F,
    listener: TcpListener,
    limits: ConnectionLimits,
    per_address: Arc<PerAddress>,
    stop: impl Future<Output = ()>,
    metrics: Option<Arc<Metrics>>,
) where
    F: Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static,
{
    let stats = Arc::new(ConnectionStats::default());
    let permits = Arc::new(Semaphore::new(limits.max_connections as usize));
    let (closing, closing_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    let mut accept_errors = AcceptErrors::default();
    loop {
        // A permit first: at the bound, nothing more is accepted until a connection closes.
        let permit = tokio::select! {
            () = &mut stop => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let (stream, addr) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_errors.failed(&e).await;
                    continue;
                }
            },
        };
        accept_errors.succeeded();
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = per_address.open(addr.ip()) else {
            stats.address_refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%addr, "refused a connection: its address holds its share");
            // Written only if the socket takes it at once (a new socket's buffer is empty):
            // nothing waits on a client that is already over its share.
            let _ = stream.try_write(&per_address.refusal);
            continue;
        };
        while connections.try_join_next().is_some() {}
        let (routes, closing, stats) = (routes.clone(), closing_rx.clone(), stats.clone());
        let metrics = metrics.clone();
        connections.spawn(async move {
            connection::serve(stream, addr, routes, limits, closing, stats, metrics).await;
            drop(slot);
            drop(permit);
        });
    }
    drop(listener);
    closing.send_replace(true);
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "cut off the connections still open at shutdown_timeout"
        );
        connections.shutdown().await;
    }
    let count = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    tracing::info!(
        accepted = count(&stats.accepted),
        head_timeouts = count(&stats.head_timeouts),
        body_timeouts = count(&stats.body_timeouts),
        idle_closed = count(&stats.idle_closed),
        protocol_errors = count(&stats.protocol_errors),
        refused_per_address = count(&stats.address_refused),
        handler_panics = count(&stats.panics),
        "connections served"
    );
}

/// The open connections of each client address (`max_connections_per_address`).
struct PerAddress {
    max: u32,
    /// Peers not counted: the trusted proxies.
    exempt: Vec<Cidr>,
    open: Mutex<HashMap<IpAddr, u32>>,
    /// The answer to a connection over the share, made once.
    refusal: Vec<u8>,
}

/// A connection's place in its address's share, given back when dropped.
struct AddressSlot {
    counts: Arc<PerAddress>,
    key: Option<IpAddr>,
}

impl PerAddress {
    fn new(max: u32, exempt: Vec<Cidr>) -> Arc<PerAddress> {
        let err = Error::new(
            Code::RateLimited,
            format!(
                "too many connections from your address (at most {max} at once); close one, or \
                 retry in 1 s"
            ),
        );
        let body = crate::surface::respond::error_body(&err);
        let mut refusal = format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nx-content-type-options: nosniff\r\n\
             connection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        refusal.extend_from_slice(&body);
        Arc::new(PerAddress {
            max,
            exempt,
            open: Mutex::new(HashMap::new()),
            refusal,
        })
    }

    /// A place for a connection from `peer`, or `None` if its address holds its share.
    fn open(self: &Arc<Self>, peer: IpAddr) -> Option<AddressSlot> {
        let key = if self.exempt.iter().any(|c| c.contains(peer)) {
            None
        } else {
            let key = address_key(peer);
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            let n = open.entry(key).or_insert(0);
            if *n >= self.max {
                return None;
            }
            *n += 1;
            Some(key)
        };
        Some(AddressSlot {
            counts: self.clone(),
            key,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let mut open = self
            .counts
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&key);
            }
        }
    }
}

/// Failed accepts (out of file descriptors, mostly): one warning when they start and one line
/// when they stop, not one a second; and a growing pause, so the loop does not spin.
#[derive(Default)]
struct AcceptErrors {
    failing: u64,
}

impl AcceptErrors {
    async fn failed(&mut self, e: &std::io::Error) {
        if self.failing == 0 {
            tracing::warn!(error = %e, "accepting connections fails; retrying with a pause");
        }
        self.failing += 1;
        let pause = Duration::from_millis(10 << self.failing.min(7));
        tokio::time::sleep(pause).await;
    }

    fn succeeded(&mut self) {
        if self.failing > 0 {
            tracing::info!(failed = self.failing, "accepting connections works again");
            self.failing = 0;
        }
    }
}

/// Raises the open-files limit to its hard limit, logs it, and answers the connection bound
/// that fits under it (with [`RESERVED_FDS`] to spare), warning if `wanted` does not.
fn fit_open_files_limit(wanted: u32) -> u32 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let mut raised = before;
    raised.current = before.maximum;
    let limit = match setrlimit(Resource::Nofile, raised) {
        Ok(()) => before.maximum,
        Err(e) => {
            tracing::warn!(error = %e, "cannot raise the open-files limit");
            before.current
        }
    };
    let Some(limit) = limit else {
        tracing::info!(max_connections = wanted, "open-files limit: unlimited");
        return wanted;
    };
    let fits = limit
        .saturating_sub(RESERVED_FDS)
        .clamp(1, u64::from(u32::MAX)) as u32;
    tracing::info!(
        from = before.current,
        to = limit,
        max_connections = wanted.min(fits),
        "open-files limit raised to its hard limit"
    );
    if wanted > fits {
        tracing::warn!(
            max_connections = wanted,
            open_files = limit,
            using = fits,
            "max_connections does not fit under the open-files limit; using less"
        );
    }
    wanted.min(fits)
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
///
/// The handlers are registered when this is called, not when the future is first polled: a
/// signal that arrives between "listening" and the first poll must still mean a clean stop,
/// not the default action of killing the process.
///
/// # Panics
/// If called outside a Tokio runtime, or if the OS refuses a signal handler.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
        tracing::info!("shutdown requested");
    }
}
