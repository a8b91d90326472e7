//! The admin socket: how `tracker space …`, `keys …`, `backup` and `check` reach a running server.
//!
//! A server listens on a Unix domain socket beside its data file (`tracker.redb.sock`). The
//! command line connects to it when a server answers there, and opens the data file itself when
//! none does; both paths call the same functions in [`crate::admin`], so a rotation made either
//! way is the same rotation, and one made through the socket is in force at once.
//!
//! What protects it: it is a filesystem socket, never a network port; it is created mode 0600,
//! so only its owner (and root) may connect; and every connection's peer credentials
//! (`SO_PEERCRED`) are checked against the server's own user id, so a connection from any other
//! user is refused even if the mode were loosened.
//!
//! The protocol is one JSON request line and one JSON answer line per connection.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::admin;
use crate::app::App;
use crate::domain::credential::Kind;
use crate::domain::feed::PageRequest;
use crate::domain::link::NewLink;
use crate::domain::password::Password;
use crate::error::Error;

/// The socket of the server that has `data` open.
#[must_use]
pub fn socket_path(data: &Path) -> PathBuf {
    let mut name = data.as_os_str().to_owned();
    name.push(".sock");
    PathBuf::from(name)
}

/// One admin command.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AdminRequest {
    SpaceCreate {
        name: String,
    },
    SpaceList,
    KeysRotate {
        space: String,
        kind: KindName,
    },
    KeysRevoke {
        space: String,
        kind: KindName,
    },
    Backup {
        dest: PathBuf,
    },
    /// `tracker check` on the file the server has open: read-only (see `execute`).
    Check {
        repair: bool,
    },
    LinkCreate {
        space: String,
        slug: String,
        bot: Option<String>,
        target: Option<String>,
        campaign_name: Option<String>,
        mode: Option<String>,
    },
    LinkList {
        space: String,
    },
    LinkDelete {
        space: String,
        slug: String,
    },
    /// Sets the admin page's password (the socket is the owner's only: see above).
    AdminPassword {
        password: Password,
    },
    /// One page of a space's feed, for `tracker export`.
    ExportPage {
        space: String,
        after: u64,
        limit: usize,
    },
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KindName {
    Secret,
    Ingest,
}

impl From<KindName> for Kind {
    fn from(k: KindName) -> Kind {
        match k {
            KindName::Secret => Kind::Secret,
            KindName::Ingest => Kind::Ingest,
        }
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct AdminAnswer {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs `request` against `app`: the one place both socket and command line dispatch admin
/// commands.
pub async fn execute(app: &App, request: AdminRequest) -> Result<Value, Error> {
    let store = &app.store;
    let now = app.now_ms();
    let value = match request {
        AdminRequest::SpaceCreate { name } => {
            to_value(&admin::create_space(store, &name, now).await?)
        }
        AdminRequest::SpaceList => to_value(&admin::list(store).await?),
        AdminRequest::KeysRotate { space, kind } => to_value(
            &admin::rotate(store, &space, kind.into(), app.settings.rotation_grace, now).await?,
        ),
        AdminRequest::KeysRevoke { space, kind } => {
            to_value(&admin::revoke(store, &space, kind.into(), now).await?)
        }
        AdminRequest::Backup { dest } => to_value(&admin::backup(store, &dest).await?),
        // Repairing rewrites indexes and the rollup under the writer's feet, and redb's page
        // check needs the file to itself: both wait for the server to stop.
        AdminRequest::Check { repair: true } => {
            return Err(Error::new(
                crate::error::Code::Conflict,
                "a server has the data file open: stop it, then run tracker check --repair",
            ));
        }
        AdminRequest::Check { repair: false } => {
            to_value(&store.check(app.settings.dedup_expiry(now)).await?)
        }
        AdminRequest::LinkCreate {
            space,
            slug,
            bot,
            target,
            campaign_name,
            mode,
        } => {
            let link = NewLink::new(Some(slug), bot, target, campaign_name, mode)?;
            let space = app.space_named(space).await?;
            to_value(&app.create_link(&space, link).await?)
        }
        AdminRequest::LinkList { space } => {
            to_value(&app.links(&app.space_named(space).await?).await?)
        }
        AdminRequest::LinkDelete { space, slug } => {
            let space = app.space_named(space).await?;
            app.delete_link(&space, slug).await?;
            serde_json::json!({"deleted": true})
        }
        AdminRequest::AdminPassword { password } => {
            admin::set_password(store, password.0).await?;
            serde_json::json!({"password_set": true})
        }
        AdminRequest::ExportPage {
            space,
            after,
            limit,
        } => {
            let no = store.space_no(space).await?;
            to_value(&store.feed(no, PageRequest { after, limit }).await?)
        }
    };
    Ok(value)
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The socket, listening; removes its file when dropped.
pub struct AdminSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The user id this process runs as (the owner of `/proc/self`).
fn own_uid() -> std::io::Result<u32> {
    Ok(std::fs::metadata("/proc/self")?.uid())
}

/// Whether a connection from `peer_uid` may use the socket of a server running as `own_uid`.
#[must_use]
pub fn peer_allowed(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid
}

/// Starts listening on `path` for admin commands against `app`.
pub fn listen(path: &Path, app: Arc<App>) -> std::io::Result<AdminSocket> {
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
                    tracing::warn!(error = %e, "admin socket connection");
                }
            });
        }
    });
    Ok(AdminSocket {
        path: path.to_owned(),
        task,
    })
}

async fn serve_connection(stream: UnixStream, app: Arc<App>, own: u32) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    let (read, mut write) = stream.into_split();
    let answer = if peer_allowed(peer, own) {
        let mut line = String::new();
        BufReader::new(read)
            .take(64 * 1024)
            .read_line(&mut line)
            .await?;
        match serde_json::from_str::<AdminRequest>(&line) {
            Err(e) => AdminAnswer {
                ok: false,
                result: None,
                error: Some(format!("not an admin request: {e}")),
            },
            Ok(request) => {
                if matches!(request, AdminRequest::ExportPage { .. }) {
                    // An export asks once per page: not worth a line each.
                    tracing::debug!(target: "tracker::admin", op = "export_page", "admin command");
                } else {
                    tracing::info!(target: "tracker::admin", op = ?op_name(&request), "admin command");
                }
                match execute(&app, request).await {
                    Ok(value) => AdminAnswer {
                        ok: true,
                        result: Some(value),
                        error: None,
                    },
                    Err(e) => AdminAnswer {
                        ok: false,
                        result: None,
                        error: Some(e.message),
                    },
                }
            }
        }
    } else {
        tracing::warn!(
            peer_uid = peer,
            "admin socket: refused a connection from another user"
        );
        AdminAnswer {
            ok: false,
            result: None,
            error: Some("refused: the admin socket accepts only the server's own user".into()),
        }
    };
    let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
    bytes.push(b'\n');
    write.write_all(&bytes).await?;
    write.shutdown().await
}

fn op_name(r: &AdminRequest) -> &'static str {
    match r {
        AdminRequest::SpaceCreate { .. } => "space_create",
        AdminRequest::SpaceList => "space_list",
        AdminRequest::KeysRotate { .. } => "keys_rotate",
        AdminRequest::KeysRevoke { .. } => "keys_revoke",
        AdminRequest::Backup { .. } => "backup",
        AdminRequest::Check { .. } => "check",
        AdminRequest::ExportPage { .. } => "export_page",
        AdminRequest::LinkCreate { .. } => "link_create",
        AdminRequest::LinkList { .. } => "link_list",
        AdminRequest::LinkDelete { .. } => "link_delete",
        AdminRequest::AdminPassword { .. } => "admin_password",
    }
}

/// What the command line got from the socket.
pub enum Reached {
    /// A server answered: its result, or its error sentence.
    Answered(Result<Value, String>),
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
pub fn request(path: &Path, request: &AdminRequest) -> std::io::Result<Reached> {
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
    let answer: AdminAnswer = serde_json::from_str(&answer)?;
    Ok(Reached::Answered(
        match (answer.ok, answer.result, answer.error) {
            (true, Some(v), _) => Ok(v),
            (_, _, Some(e)) => Err(e),
            _ => Err("the server gave an empty answer".into()),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_may_connect() {
        assert!(peer_allowed(1000, 1000));
        assert!(!peer_allowed(0, 1000));
        assert!(!peer_allowed(1001, 1000));
    }

    #[test]
    fn socket_sits_beside_the_data_file() {
        assert_eq!(
            socket_path(Path::new("/srv/t.redb")),
            Path::new("/srv/t.redb.sock")
        );
    }

    #[test]
    fn requests_round_trip_as_json() {
        let r = AdminRequest::KeysRotate {
            space: "a".into(),
            kind: KindName::Ingest,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"op":"keys_rotate","space":"a","kind":"ingest"}"#);
    }
}
