//! The answers of `tracker destination ...` as text: a new destination (with a webhook's signing
//! secret, shown once), the list with deliveries counted by state and the last error, a
//! removal, the delivery log, and a retry.

use std::fmt::Write as _;

use super::output;
use crate::app::destinations::Retried;
use crate::control::DestinationDeleted;
use crate::platform::{DeliveryView, DestinationView, served_file};

pub(super) fn created_text(d: &DestinationView) -> String {
    let mut text = format!(
        "created destination {} ({}): the space's new events it takes are sent there",
        d.name,
        d.kind.as_str()
    );
    if let Some(secret) = &d.signing_secret {
        let _ = write!(
            text,
            "\n  signing secret  {secret}\n  (shown once: the receiver checks \
             webhook-signature with it, as Standard Webhooks specifies)"
        );
    }
    if let Some(password) = &d.password {
        let _ = write!(
            text,
            "\n  user name  {}\n  password   {password}\n  (shown once: give both to Google Ads, \
             which fetches {} with them)",
            d.text("user").unwrap_or_default(),
            served_file(d.text("template"), "SPACE", &d.name)
        );
    }
    text
}

/// A changed destination, with a rotated webhook's new secret (shown once).
pub(super) fn changed_text(d: &DestinationView) -> String {
    let mut text = match &d.signing_secret {
        None if d.password.is_some() => format!(
            "new password of {}\n  password  {}\n  (shown once; the old one no longer works: \
             give this one to each of Google Ads' connections to its files)",
            d.name,
            d.password.as_deref().unwrap_or_default()
        ),
        Some(secret) => format!(
            "new signing secret of {}\n  signing secret  {secret}\n  (shown once; the old \
             secret signs beside it for 24 hours, so the receiver can switch to this one)",
            d.name
        ),
        None => format!(
            "changed destination {} ({}); it keeps its deliveries",
            d.name,
            d.kind.as_str()
        ),
    };
    if d.paused_reason.is_some() {
        text.push_str("\n  still paused");
    }
    text
}

/// A line per destination: its deliveries by state and where it sends, and under it the last
/// error when there is one.
pub(super) fn list_text(list: &[DestinationView]) -> String {
    let none =
        "no destinations yet: tracker destination create SPACE NAME --kind webhook --url URL";
    output::list_text(list, none, |text, d| {
        let c = &d.deliveries;
        let _ = writeln!(
            text,
            "{:<20} {:<9} pending {} delivered {} retrying {} dead {} cancelled {} paused {}  {}",
            d.name,
            d.kind.as_str(),
            c.0[0],
            c.0[1],
            c.0[2],
            c.0[3],
            c.0[4],
            c.0[5],
            d.text("url")
                .or(d.text("pixel_id"))
                .or(d.text("pixel_code"))
                .unwrap_or_default()
        );
        if d.kind == crate::platform::Kind::GoogleAds {
            let _ = writeln!(
                text,
                "{:<20} fetched {} time(s), last {} ({} rows)",
                "",
                d.number("fetches").unwrap_or(0),
                d.number("last_fetched_at_ms")
                    .map_or_else(|| "never".to_owned(), |ms| ms.to_string()),
                d.number("rows_served").unwrap_or(0)
            );
        }
        if let Some(reason) = &d.paused_reason {
            let _ = writeln!(
                text,
                "{:<20} PAUSED: {reason}\n{:<20} resume with a new token: tracker destination \
                 change SPACE {} --new-token",
                "", "", d.name
            );
        }
        if let Some(e) = &d.last_error {
            let _ = writeln!(
                text,
                "{:<20} last error: {} {}",
                "",
                status_text(e.status),
                e.answer
            );
        }
    })
}

pub(super) fn deleted_text(d: &DestinationDeleted) -> String {
    format!(
        "removed destination {} of space {}: its open deliveries are cancelled",
        d.name, d.space
    )
}

/// The delivery log, a line per delivery, newest first as given.
pub(super) fn deliveries_text(list: &[DeliveryView]) -> String {
    output::list_text(list, "no deliveries", |text, d| {
        let _ = writeln!(
            text,
            "{:>10} {:<20} {:<9} {} attempt(s) {} {}",
            d.inbox_id,
            d.destination,
            d.state.as_str(),
            d.attempts,
            status_text(d.last_status),
            d.last_answer.as_deref().unwrap_or_default()
        );
    })
}

pub(super) fn retried_text(r: &Retried) -> String {
    format!(
        "{} dead deliveries of {} are due again now",
        r.retried, r.destination
    )
}

/// An HTTP status a receiver answered, or `-` when it answered none (a connection that failed).
fn status_text(status: Option<u16>) -> String {
    status.map_or_else(|| "-".to_owned(), |s| s.to_string())
}
