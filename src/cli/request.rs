//! How a request of the command line is carried out: completed here first (what only this
//! terminal or working directory has: a file's text, a password, an absolute path), then sent
//! to the running server's control socket, or run on the data file opened here when no server
//! has it, and its answer printed. Both ways run [`control::execute`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::output::CliResult;
use super::output::Output;
use super::prompt;
use crate::app::App;
use crate::clock::SystemClock;
use crate::config::Settings;
use crate::control::{
    self, AdminRequest, Answer, CostsRequest, DestinationRequest, Reached, Request,
};
use crate::storage::{Store, StoreError, StoreOptions};

/// How long a command waits for the data file while another command holds it.
const FILE_WAIT: Duration = Duration::from_secs(10);

/// Where requests go: the running server's control socket, or the data file opened here.
/// Decided by the first request: a server answering on the socket takes it, else the file is
/// opened.
// `Local` is large, but there is one of these per command.
#[allow(clippy::large_enum_variant)]
pub(super) enum Target {
    Undecided,
    Server(PathBuf),
    Local {
        app: App,
        runtime: tokio::runtime::Runtime,
    },
}

impl Target {
    /// Runs one request; both targets run [`control::execute`].
    pub(super) fn run(
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
                    crate::storage::require_existing(&settings.data)?;
                    // A command's own open: it reads what it needs once, so a small cache.
                    let options = StoreOptions {
                        cache_bytes: crate::storage::COMMAND_CACHE_BYTES,
                        ..StoreOptions::default()
                    };
                    match Store::open(&settings.data, &options) {
                        Ok((store, _)) => {
                            let app =
                                App::new(settings.clone(), Arc::new(store), Arc::new(SystemClock));
                            // Timers and sockets: some operations call out (a new bot
                            // token is checked with Telegram, a channel link's channel too).
                            let runtime = tokio::runtime::Builder::new_current_thread()
                                .enable_all()
                                .build()?;
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
pub(super) fn run_request(settings: &Settings, out: Output, request: Request) -> CliResult {
    let dest = match &request {
        Request::Backup { dest } => Some(dest.clone()),
        _ => None,
    };
    let answer = Target::Undecided.run(settings, request)?;
    super::answer::print(out, &answer, &settings.public_url(), dest.as_deref());
    Ok(())
}

/// What a request needs from here before it is sent: the backup's destination made absolute and
/// a cost file's text read (a server answering through the socket has its own working
/// directory), the new admin password or a Meta access token asked (`prompt`).
pub(super) fn complete(mut request: Request) -> Result<Request, Box<dyn std::error::Error>> {
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
        } => *password = prompt::read_new_password()?,
        Request::Destination {
            request:
                DestinationRequest::Create {
                    kind, access_token, ..
                },
        } if crate::platform::Kind::parse(kind)
            .is_ok_and(|k| k.required().contains(&"access_token")) =>
        {
            *access_token = Some(crate::domain::password::SecretText(
                prompt::read_access_token()?,
            ));
        }
        Request::Destination {
            request:
                DestinationRequest::Change {
                    new_token: true,
                    access_token,
                    ..
                },
        } => {
            *access_token = Some(crate::domain::password::SecretText(
                prompt::read_access_token()?,
            ));
        }
        _ => {}
    }
    Ok(request)
}
