//! Running the tracker: serve HTTP on a bound listener until `shutdown`, then close the store.
//!
//! The listener is bound by the caller, so tests start the real server on port 0 and read the
//! address back; `tracker serve` binds the configured address. Beside HTTP, the server listens
//! on its admin socket (`admin_socket`) for the command line.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::app::App;
use crate::{admin_socket, http};

/// Serves until `shutdown` resolves: stops accepting, lets requests in flight finish, commits
/// everything the writer holds, and closes the data file cleanly.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let socket_path = admin_socket::socket_path(&app.settings.data);
    let socket = match admin_socket::listen(&socket_path, app.clone()) {
        Ok(socket) => Some(socket),
        Err(e) => {
            tracing::error!(
                path = %socket_path.display(),
                error = %e,
                "cannot create the admin socket; space and keys commands will not reach this server"
            );
            None
        }
    };
    let routes = http::routes(app.clone());
    warp::serve(routes)
        .incoming(listener)
        .graceful(shutdown)
        .run()
        .await;
    drop(socket);
    tracing::info!("stopped accepting; committing and closing the data file");
    let store = app.store.clone();
    // `close` joins the writer thread: blocking work, kept off the async workers.
    let _ = tokio::task::spawn_blocking(move || store.close()).await;
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested");
}
