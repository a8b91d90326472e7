//! The one typed request of the command line and the control socket, and its one typed answer.
//!
//! A request is serialised once (the command line, onto the socket) and decoded once (the
//! server); its answer likewise the other way. The command line prints an [`Answer`] as it is:
//! [`Answer::json`] for `--json`, and its own text for people (`cli`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::App;
use crate::app::spaces::{CreatedSpace, Revoked, Rotated};
use crate::domain::credential::Kind;
use crate::domain::feed::{FeedPage, PageRequest};
use crate::domain::link::{LinkView, NewLink};
use crate::domain::password::Password;
use crate::error::{Code, Error};
use crate::storage::backup::BackupStats;
use crate::storage::check::Report;
use crate::storage::read::SpaceSummary;

/// One command of the command line.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    SpaceCreate {
        name: String,
    },
    SpaceList,
    KeysRotate {
        space: String,
        kind: Kind,
    },
    KeysRevoke {
        space: String,
        kind: Kind,
    },
    /// A consistent copy of the data file at `dest`, an absolute path.
    Backup {
        dest: PathBuf,
    },
    /// `tracker check` on the file the server has open: read-only (see [`execute`]).
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
    /// Sets the admin page's password (the socket is the owner's only: `socket.rs`).
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

impl Request {
    /// The request's name in the log (never its fields: a password may be one).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Request::SpaceCreate { .. } => "space_create",
            Request::SpaceList => "space_list",
            Request::KeysRotate { .. } => "keys_rotate",
            Request::KeysRevoke { .. } => "keys_revoke",
            Request::Backup { .. } => "backup",
            Request::Check { .. } => "check",
            Request::LinkCreate { .. } => "link_create",
            Request::LinkList { .. } => "link_list",
            Request::LinkDelete { .. } => "link_delete",
            Request::AdminPassword { .. } => "admin_password",
            Request::ExportPage { .. } => "export_page",
        }
    }
}

/// What a [`Request`] answers.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "answer", content = "result", rename_all = "snake_case")]
pub enum Answer {
    SpaceCreated(CreatedSpace),
    Spaces(Vec<SpaceSummary>),
    Rotated(Rotated),
    Revoked(Revoked),
    BackedUp { stats: BackupStats, dest: PathBuf },
    Checked(Report),
    LinkCreated(LinkView),
    Links(Vec<LinkView>),
    LinkDeleted { space: String, slug: String },
    PasswordSet,
    Page(FeedPage),
}

impl Answer {
    /// What `--json` prints: the answer's own fields, as the API would give them.
    #[must_use]
    pub fn json(&self) -> Value {
        fn value<T: Serialize>(v: &T) -> Value {
            serde_json::to_value(v).unwrap_or(Value::Null)
        }
        match self {
            Answer::SpaceCreated(v) => value(v),
            Answer::Spaces(v) => value(v),
            Answer::Rotated(v) => value(v),
            Answer::Revoked(v) => value(v),
            Answer::BackedUp { stats, .. } => value(stats),
            Answer::Checked(v) => value(v),
            Answer::LinkCreated(v) => value(v),
            Answer::Links(v) => value(v),
            Answer::LinkDeleted { .. } => serde_json::json!({"deleted": true}),
            Answer::PasswordSet => serde_json::json!({"password_set": true}),
            Answer::Page(v) => value(v),
        }
    }
}

/// Runs `request` against `app`: the one place the socket and the command line dispatch.
pub async fn execute(app: &App, request: Request) -> Result<Answer, Error> {
    Ok(match request {
        Request::SpaceCreate { name } => Answer::SpaceCreated(app.create_space(&name).await?),
        Request::SpaceList => Answer::Spaces(app.spaces().await?),
        Request::KeysRotate { space, kind } => Answer::Rotated(app.rotate(&space, kind).await?),
        Request::KeysRevoke { space, kind } => Answer::Revoked(app.revoke(&space, kind).await?),
        Request::Backup { dest } => Answer::BackedUp {
            stats: app.backup(&dest).await?,
            dest,
        },
        // Repairing rewrites indexes and the rollup under the writer's feet, and redb's page
        // check needs the file to itself: both wait for the server to stop.
        Request::Check { repair: true } => {
            return Err(Error::new(
                Code::Conflict,
                "a server has the data file open: stop it, then run tracker check --repair",
            ));
        }
        Request::Check { repair: false } => Answer::Checked(app.check().await?),
        Request::LinkCreate {
            space,
            slug,
            bot,
            target,
            campaign_name,
            mode,
        } => {
            let link = NewLink::new(Some(slug), bot, target, campaign_name, mode)?;
            let space = app.space_named(space).await?;
            Answer::LinkCreated(app.create_link(&space, link).await?)
        }
        Request::LinkList { space } => {
            Answer::Links(app.links(&app.space_named(space).await?).await?)
        }
        Request::LinkDelete { space, slug } => {
            let space_ref = app.space_named(space.clone()).await?;
            app.delete_link(&space_ref, slug.clone()).await?;
            Answer::LinkDeleted { space, slug }
        }
        Request::AdminPassword { password } => {
            app.set_password(password.0).await?;
            Answer::PasswordSet
        }
        Request::ExportPage {
            space,
            after,
            limit,
        } => {
            let space = app.space_named(space).await?;
            Answer::Page(app.feed(&space, PageRequest { after, limit }).await?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_json() {
        let r = Request::KeysRotate {
            space: "a".into(),
            kind: Kind::Ingest,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"op":"keys_rotate","space":"a","kind":"ingest"}"#);
    }

    #[test]
    fn answers_round_trip_as_json() {
        let a = Answer::LinkDeleted {
            space: "a".into(),
            slug: "s".into(),
        };
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(
            text,
            r#"{"answer":"link_deleted","result":{"space":"a","slug":"s"}}"#
        );
        assert!(matches!(
            serde_json::from_str::<Answer>(&text).unwrap(),
            Answer::LinkDeleted { .. }
        ));
    }
}
