//! What the audit log says of a command that changes something: its action, space and subject,
//! by `cli`. Never a value: a setting by its name, a key by its kind, a destination by its name.
//! [`execute`], the one dispatch of the socket and the command line, writes it.

use crate::app::App;
use crate::app::audit::Change;
use crate::control::answer::Answer;
use crate::domain::audit::BY_CLI;
use crate::error::Error;

use crate::control::request::{
    AdminRequest, CostsRequest, DestinationRequest, KeysRequest, LinkRequest, Request,
    SpaceRequest, UserRequest, run,
};

/// What a command that changes something changes: `(action, space, subject)`; `None` for one
/// that only reads.
pub(super) fn change_of(
    request: &Request,
) -> Option<(&'static str, Option<String>, Option<String>)> {
    let of = |action, space: &String, subject: Option<&String>| {
        Some((action, Some(space.clone()), subject.cloned()))
    };
    match request {
        Request::Space { request } => match request {
            SpaceRequest::Create { name } => of("space create", name, None),
            SpaceRequest::Set { space, settings } => {
                let names: Vec<&str> = settings
                    .iter()
                    .map(|s| s.split_once('=').map_or(s.as_str(), |(n, _)| n.trim()))
                    .collect();
                of("space set", space, Some(&names.join(", ")))
            }
            SpaceRequest::List => None,
        },
        Request::Keys { request } => match request {
            KeysRequest::Rotate { space, kind } => {
                of("keys rotate", space, Some(&kind.as_str().to_owned()))
            }
            KeysRequest::Revoke { space, kind } => {
                of("keys revoke", space, Some(&kind.as_str().to_owned()))
            }
        },
        Request::Link { request } => match request {
            LinkRequest::Create { space, slug, .. } => of("link create", space, Some(slug)),
            LinkRequest::Delete { space, slug } => of("link delete", space, Some(slug)),
            LinkRequest::List { .. } => None,
        },
        Request::Destination { request } => match request {
            DestinationRequest::Create { space, name, .. } => {
                of("destination create", space, Some(name))
            }
            DestinationRequest::Change { space, name, .. } => {
                of("destination change", space, Some(name))
            }
            DestinationRequest::RotateSecret { space, name } => {
                of("destination rotate-secret", space, Some(name))
            }
            DestinationRequest::Delete { space, name } => {
                of("destination delete", space, Some(name))
            }
            DestinationRequest::Retry { space, name } => of("destination retry", space, Some(name)),
            DestinationRequest::List { .. } | DestinationRequest::Deliveries { .. } => None,
        },
        Request::Admin {
            request: AdminRequest::Password { .. },
        } => Some(("admin password", None, Some("admin".to_owned()))),
        Request::User { request } => {
            let (action, name) = match request {
                UserRequest::Add { name, .. } => ("user add", name),
                UserRequest::Remove { name } => ("user remove", name),
                UserRequest::Role { name, .. } => ("user role", name),
                UserRequest::Reset { name } => ("user reset", name),
                UserRequest::RequireTotp { state } => ("user require-totp", state),
                UserRequest::List => return None,
            };
            Some((action, None, Some(name.clone())))
        }
        Request::Costs { request } => match request {
            CostsRequest::Import { space, .. } => of("costs import", space, None),
            CostsRequest::Fetch { space } => of("costs fetch", space, None),
        },
        Request::ImportEvents { space, .. } => of("events import", space, None),
        Request::Audit { .. }
        | Request::Stats { .. }
        | Request::Backup { .. }
        | Request::Check { .. }
        | Request::ExportPage { .. } => None,
    }
}

/// Runs `request` against `app`: the one place the socket and the command line dispatch. A
/// change goes into the audit log as made by `cli` once it has committed.
pub async fn execute(app: &App, request: Request) -> Result<Answer, Error> {
    let change = super::audit::change_of(&request);
    let answer = run(app, request).await?;
    if let Some((action, space, subject)) = change {
        app.record_audit(Change {
            who: BY_CLI,
            address: None,
            action: action.to_owned(),
            space: space.as_deref(),
            subject: subject.as_deref(),
        })
        .await;
    }
    Ok(answer)
}
