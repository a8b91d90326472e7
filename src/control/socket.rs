//! The socket itself: a server listens on a Unix domain socket beside its data file
//! (`tracker.redb.sock`); the command line connects to it when a server answers there, and opens
//! the data file itself when none does.
//!
//! What protects it: it is a filesystem socket, never a network port; it is created mode 0600,
//! so only its owner (and root) may connect; and every connection's peer credentials
//! (`SO_PEERCRED`) are checked: the server's own user id, or root's, so a connection from any
//! other user is refused even if the mode were loosened. Root is let in because refusing it
//! protects nothing (root can read the data file and the server's memory), while `sudo tracker
//! ...` on the server is how an operator runs a command.
//!
//! The protocol is one JSON [`Request`] line and one JSON reply line per connection.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::{Answer, Request, execute};
use crate::app::App;

/// The socket of the server that has `data` open.
#[must_use]
pub fn socket_path(data: &Path) -> PathBuf {
    let mut name = data.as_os_str().to_owned();
    name.push(".sock");
    PathBuf::from(name)
}

/// What goes back over the socket: the answer, or the refusal.
#[derive(Serialize, Deserialize, Debug)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Answer(Answer),
    Error(String),
}

/// The socket, listening; removes its file when dropped.
pub struct ControlSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The user id this process runs as (the owner of `/proc/self`).
fn own_uid() -> std::io::Result<u32> {
    Ok(std::fs::metadata("/proc/self")?.uid())
}

/// Whether a connection from `peer_uid` may use the socket of a server running as `own_uid`:
/// the same user, or root.
#[must_use]
pub fn peer_allowed(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid || peer_uid == 0
}

/// Starts listening on `path` for commands against `app`.
pub fn listen(path: &Path, app: Arc<App>) -> std::io::Result<ControlSocket> {
    if path.exists() {
        // A server that holds the data file would have stopped us opening it, so a socket file
        // here is left over from one that did not exit cleanly.
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let own = own_uid()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let app = app.clone();
            tokio::spawn(async move {
                if let Err(e) = serve_connection(stream, app, own).await {
                    tracing::warn!(error = %e, "control socket connection");
                }
            });
        }
    });
    Ok(ControlSocket {
        path: path.to_owned(),
        task,
    })
}

/// The longest request line: a cost import carries its CSV file (90 days of 1000 campaigns is
/// about 4 MiB), everything else is small.
const MAX_REQUEST_BYTES: u64 = 8 * 1024 * 1024;

async fn serve_connection(stream: UnixStream, app: Arc<App>, own: u32) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    let (read, mut write) = stream.into_split();
    let reply = if peer_allowed(peer, own) {
        let mut line = String::new();
        BufReader::new(read)
            .take(MAX_REQUEST_BYTES)
            .read_line(&mut line)
            .await?;
        if line.is_empty() {
            // Closed without a word: the command line asking whether a server listens
            // (`reachable`). Nothing to answer, nothing to warn about.
            return Ok(());
        }
        match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::Error(format!("not a request of this tracker: {e}")),
            Ok(request) => {
                if matches!(request, Request::ExportPage { .. }) {
                    // An export asks once per page: not worth a line each.
                    tracing::debug!(target: "tracker::control", ?request, "control command");
                } else {
                    tracing::info!(target: "tracker::control", ?request, "control command");
                }
                match execute(&app, request).await {
                    Ok(answer) => Reply::Answer(answer),
                    Err(e) => Reply::Error(e.message),
                }
            }
        }
    } else {
        tracing::warn!(
            peer_uid = peer,
            "control socket: refused a connection from another user"
        );
        Reply::Error("refused: the control socket accepts only the server's own user".into())
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    write.write_all(&bytes).await?;
    write.shutdown().await
}

/// What the command line got from the socket.
pub enum Reached {
    /// A server answered: its answer, or its error sentence.
    Answered(Result<Answer, String>),
    /// No server listens there: open the data file directly.
    NoServer,
}

/// Whether a server listens at `path`.
#[must_use]
pub fn reachable(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// Sends `request` to the server listening at `path`, if one does. Blocking; for the command
/// line.
pub fn send(path: &Path, request: &Request) -> std::io::Result<Reached> {
    use std::io::{BufRead, Write};
    let mut stream = match std::os::unix::net::UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(Reached::NoServer);
        }
        Err(e) => return Err(e),
    };
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    std::io::BufReader::new(stream).read_line(&mut answer)?;
    Ok(Reached::Answered(match serde_json::from_str(&answer)? {
        Reply::Answer(answer) => Ok(answer),
        Reply::Error(e) => Err(e),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's own user, and root (who can read the data file and the server's memory
    /// anyway); nobody else.
    #[test]
    fn only_the_owner_and_root_may_connect() {
        assert!(peer_allowed(1000, 1000));
        assert!(peer_allowed(0, 1000));
        assert!(!peer_allowed(1001, 1000));
        assert!(!peer_allowed(999, 1000));
        assert!(peer_allowed(0, 0));
    }

    #[test]
    fn socket_sits_beside_the_data_file() {
        assert_eq!(
            socket_path(Path::new("/srv/t.redb")),
            Path::new("/srv/t.redb.sock")
        );
    }
}
