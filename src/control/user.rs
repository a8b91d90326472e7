//! `tracker user ...`: the admin page's users from the command line, the same operations as the
//! admin page's Users page; and `tracker audit`, the log of what they changed.

use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::control::answer::Answer;
use crate::domain::audit::AuditFilter;
use crate::domain::user::{Role, parse_spaces};
use crate::error::Error;

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum UserRequest {
    /// Add a user and print a one-time invitation address (valid 24 hours) where they set
    /// their own password
    Add {
        name: String,
        /// owner (everything), manager (links, costs, destinations and stats of their spaces)
        /// or viewer (dashboards, stats, events and costs of their spaces, read only)
        #[arg(long)]
        role: String,
        /// The spaces of a manager or viewer, comma-separated
        #[arg(long, value_name = "A,B", default_value = "")]
        spaces: String,
    },
    /// List the users, their roles and spaces
    List,
    /// Remove a user (never the last owner); their sessions end at once
    Remove { name: String },
    /// Change a user's role and spaces (never the last owner's); their sessions end at once
    Role {
        name: String,
        role: String,
        /// The spaces of a manager or viewer, comma-separated
        #[arg(long, value_name = "A,B", default_value = "")]
        spaces: String,
    },
    /// End a user's password and second factor, and print a new invitation address to set
    /// another
    Reset { name: String },
    /// Require every user's second factor (TOTP), or leave it to each user: a user without one
    /// sets it up at their next login, before anything else
    RequireTotp {
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

/// Runs a `tracker user` request.
pub(super) async fn run(app: &App, request: UserRequest) -> Result<Answer, Error> {
    Ok(match request {
        UserRequest::Add { name, role, spaces } => Answer::Invited(Box::new(
            app.add_user(&name, Role::parse(&role)?, parse_spaces(&spaces))
                .await?,
        )),
        UserRequest::List => Answer::Users(app.users().await?),
        UserRequest::Remove { name } => Answer::UserRemoved(app.remove_user(&name).await?),
        UserRequest::Role { name, role, spaces } => Answer::UserChanged(
            app.set_role(&name, Role::parse(&role)?, parse_spaces(&spaces))
                .await?,
        ),
        UserRequest::Reset { name } => Answer::Invited(Box::new(app.reset_user(&name).await?)),
        UserRequest::RequireTotp { state } => {
            Answer::SecondFactorRule(app.require_second_factor(state == "on").await?)
        }
    })
}

/// `tracker audit`: the newest entries of `space`, by `user`, since the UTC day `since`.
pub(super) async fn show_audit(
    app: &App,
    space: Option<String>,
    user: Option<String>,
    since: Option<&str>,
) -> Result<Answer, Error> {
    const DAY_MS: u64 = 24 * 60 * 60 * 1000;
    let since_ms = since
        .map(|day| crate::domain::cost::parse_day(day, "since"))
        .transpose()?
        .map(|day| u64::from(day) * DAY_MS);
    let filter = AuditFilter {
        space,
        who: user,
        since_ms,
    };
    Ok(Answer::Audit(app.audit(filter).await?))
}
