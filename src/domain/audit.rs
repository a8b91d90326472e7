//! The audit log's entries: who changed what, when, from which address, and who logged in or
//! failed to. Never a secret: an entry names what changed (a link's slug, a destination's
//! name, a key's kind), never a value, a password or a token.

use serde::{Deserialize, Serialize};

/// How long an entry is kept: a year (and a day, so a whole year back is always there).
pub const KEPT_MS: u64 = 366 * 24 * 60 * 60 * 1000;

/// Who the changes of the HTTP API with a space's secret are recorded as.
pub const BY_API: &str = "api";
/// Who the changes of the command line are recorded as.
pub const BY_CLI: &str = "cli";

/// One entry of the audit log.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at_ms: u64,
    /// A user's name, [`BY_API`] or [`BY_CLI`]; for a failed login, the name given.
    pub who: String,
    /// The client's address, where a request over the network made the change.
    pub address: Option<String>,
    /// What was done: `login`, `login failed`, `link create`, `keys rotate`, ...
    pub action: String,
    pub space: Option<String>,
    /// What it was done to: a link's slug, a destination's or a user's name.
    pub subject: Option<String>,
}

/// Which entries `tracker audit` and the Audit page show.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct AuditFilter {
    pub space: Option<String>,
    pub who: Option<String>,
    pub since_ms: Option<u64>,
}

/// The most entries one look at the log shows, newest first.
pub const SHOWN_AT_MOST: usize = 1000;

impl AuditFilter {
    #[must_use]
    pub fn admits(&self, entry: &AuditEntry) -> bool {
        self.space
            .as_ref()
            .is_none_or(|s| entry.space.as_ref() == Some(s))
            && self.who.as_ref().is_none_or(|w| *w == entry.who)
            && self.since_ms.is_none_or(|t| entry.at_ms >= t)
    }
}

/// A name as an entry keeps it: at most 64 characters, control characters dropped, so what a
/// client typed into a login form cannot make the log unreadable.
#[must_use]
pub fn kept_name(given: &str) -> String {
    given.chars().filter(|c| !c.is_control()).take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at_ms: u64, who: &str, space: Option<&str>) -> AuditEntry {
        AuditEntry {
            at_ms,
            who: who.into(),
            address: None,
            action: "link create".into(),
            space: space.map(str::to_owned),
            subject: None,
        }
    }

    #[test]
    fn a_filter_admits_by_space_user_and_time() {
        let e = entry(1_000, "anna", Some("a"));
        assert!(AuditFilter::default().admits(&e));
        let by = |space: Option<&str>, who: Option<&str>, since_ms| AuditFilter {
            space: space.map(str::to_owned),
            who: who.map(str::to_owned),
            since_ms,
        };
        assert!(by(Some("a"), Some("anna"), Some(1_000)).admits(&e));
        assert!(!by(Some("b"), None, None).admits(&e));
        assert!(!by(None, Some("bob"), None).admits(&e));
        assert!(!by(None, None, Some(1_001)).admits(&e));
        assert!(!by(Some("a"), None, None).admits(&entry(1, "cli", None)));
    }

    #[test]
    fn a_kept_name_is_short_and_without_control_characters() {
        assert_eq!(kept_name("an\nna\u{1b}"), "anna");
        assert_eq!(kept_name(&"x".repeat(65)).len(), 64);
        assert_eq!(kept_name(&"x".repeat(64)).len(), 64);
    }
}
