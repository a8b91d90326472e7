//! Running the tracker: serve HTTP on a bound listener until `shutdown`, then close the store.
//!
//! The listener is bound by the caller, so tests start the real server on port 0 and read the
//! address back; `tracker serve` binds the configured address. Beside HTTP, the server listens
//! on its admin socket (`admin_socket`) for the command line.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::app::App;
use crate::storage::{Health, StoreError};
use crate::{admin_socket, http};

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
    let socket_path = admin_socket::socket_path(&app.settings.data);
    // An ephemeral server writes no file at all, its socket included.
    let socket = if app.store.is_ephemeral() {
        None
    } else {
        match admin_socket::listen(&socket_path, app.clone()) {
            Ok(socket) => Some(socket),
            Err(e) => {
                tracing::error!(
                    path = %socket_path.display(),
                    error = %e,
                    "cannot create the admin socket; space and keys commands will not reach this server"
                );
                None
            }
        }
    };
    let routes = http::routes(app.clone());
    let failed = app.store.failed();
    let stop = async move {
        tokio::select! {
            () = shutdown => {}
            reason = failed => tracing::error!(%reason, "storage failed; stopping"),
        }
    };
    warp::serve(routes)
        .incoming(listener)
        .graceful(stop)
        .run()
        .await;
    drop(socket);
    tracing::info!("stopped accepting; committing and closing the data file");
    let store = app.store.clone();
    // `close` joins the writer thread: blocking work, kept off the async workers.
    let _ = tokio::task::spawn_blocking(move || store.close()).await;
    match app.store.health() {
        Health::Serving => Ok(()),
        Health::Failed(reason) => Err(StoreError::Failed(reason)),
    }
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
