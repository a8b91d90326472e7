//! The answers of `tracker user ...` as text: an invitation's address (shown once), the list of
//! users with their roles and spaces, a removal, a change of role; and the audit log's entries
//! (`tracker audit`), a line each.

use std::fmt::Write as _;

use super::output;
use crate::app::users::{Invited, UserSummary};
use crate::domain::audit::AuditEntry;
use crate::domain::user::Role;

/// A user's role with their spaces: `manager of a, b`, `owner (every space)`.
fn role_text(role: Role, spaces: &[String]) -> String {
    if role == Role::Owner {
        "owner (every space)".to_owned()
    } else if spaces.is_empty() {
        format!("{} of no space yet", role.as_str())
    } else {
        format!("{} of {}", role.as_str(), spaces.join(", "))
    }
}

pub(super) fn invited_text(invited: &Invited) -> String {
    format!(
        "user {}, {}: send them this address, where they set their own password (works once, \
         for 24 hours; shown only now)\n  {}",
        invited.name,
        role_text(invited.role, &invited.spaces),
        invited.address
    )
}

pub(super) fn list_text(users: &[UserSummary]) -> String {
    let none = "no users yet: tracker user add NAME --role owner";
    output::list_text(users, none, |text, u| {
        let state = match (u.password_set, u.second_factor) {
            (false, _) => "  (invited; no password yet)",
            (true, true) => "  (second factor on)",
            (true, false) => "",
        };
        let _ = writeln!(
            text,
            "{:<20} {}{state}",
            u.name,
            role_text(u.role, &u.spaces)
        );
    })
}

pub(super) fn rule_text(rule: crate::app::second_factor::SecondFactorRule) -> String {
    if rule.required {
        "the second factor is required of every user: one without it sets it up at their next \
         login"
            .to_owned()
    } else {
        "the second factor is each user's choice".to_owned()
    }
}

pub(super) fn removed_text(removed: &UserSummary) -> String {
    format!("removed user {}; their sessions have ended", removed.name)
}

pub(super) fn changed_text(changed: &UserSummary) -> String {
    format!(
        "user {} is now {}; their sessions have ended",
        changed.name,
        role_text(changed.role, &changed.spaces)
    )
}

/// A line per entry: when (UTC), who, from where, what, in which space, to what.
pub(super) fn audit_text(entries: &[AuditEntry]) -> String {
    let none = "the audit log has no entry that matches";
    output::list_text(entries, none, |text, e| {
        let _ = writeln!(
            text,
            "{} UTC  {:<16} {:<16} {:<28} {:<12} {}",
            crate::domain::display::local_time(e.at_ms, &jiff::tz::TimeZone::UTC),
            e.who,
            e.address.as_deref().unwrap_or("-"),
            e.action,
            e.space.as_deref().unwrap_or("-"),
            e.subject.as_deref().unwrap_or("")
        );
    })
}
