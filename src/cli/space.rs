//! The answers of `tracker space ...` and `tracker keys ...` as text: a new space's credentials
//! (shown once), the list of spaces with their settings and credentials, a change of settings,
//! a rotation and a revocation.

use std::fmt::Write as _;

use super::init::{PASTE_OTHER, credentials_text};
use super::output;
use crate::app::spaces::{CreatedSpace, Revoked, Rotated};
use crate::clock::{Clock as _, SystemClock, rfc3339_s};
use crate::control::SpaceSettingsSet;
use crate::domain::settings::SpaceSettings;
use crate::storage::SpaceSummary;

/// A new space's credentials, shown once, as lines to paste into a shell (`base`: the
/// tracker's public address, for `TRACKER`).
pub(super) fn created_text(c: &CreatedSpace, base: &str) -> String {
    let text = format!(
        "Created space {}. {}",
        c.space,
        credentials_text(c, base, "Its secret and ingest token are", PASTE_OTHER)
    );
    text.trim_end().to_owned()
}

/// Each space with when it was made, its settings, and its credentials (their prefixes, never
/// the credentials themselves).
pub(super) fn list_text(spaces: &[SpaceSummary]) -> String {
    output::list_text(spaces, "", |text, s| {
        let _ = writeln!(
            text,
            "{}  (created {})\n  settings  {}",
            s.space,
            rfc3339_s(s.created_at_ms),
            settings_text(&s.settings)
        );
        for c in &s.credentials {
            let state = c.state(SystemClock.now_ms(), rfc3339_s);
            let used = c.last_used_ms.map_or_else(|| "never".to_owned(), rfc3339_s);
            let _ = writeln!(
                text,
                "  {:<6}  {}…  created {}  last used {}  {}",
                c.kind,
                c.prefix,
                rfc3339_s(c.created_at_ms),
                used,
                state
            );
        }
    })
}

pub(super) fn settings_set_text(set: &SpaceSettingsSet) -> String {
    format!("space {}: {}", set.space, settings_text(&set.settings))
}

/// A space's settings as the command line takes them: `attribution=first_touch ...`.
fn settings_text(settings: &SpaceSettings) -> String {
    settings
        .pairs()
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn rotated_text(r: &Rotated) -> String {
    let until = r.previous_valid_until_ms.map_or_else(
        || "no credential was active, so none is in grace".to_owned(),
        |ms| {
            format!(
                "the replaced one keeps working until {} (epoch ms {ms})",
                rfc3339_s(ms)
            )
        },
    );
    format!(
        "new {} for space {}: {}\n{until}",
        r.kind, r.space, r.credential
    )
}

pub(super) fn revoked_text(r: &Revoked) -> String {
    format!(
        "revoked {} {} credential(s) of space {}; none is active until the next rotate",
        r.revoked, r.kind, r.space
    )
}
