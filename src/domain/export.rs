//! What `tracker export` writes of an event: the feed's record as `GET /events` shows it, and
//! after its columns the same moments as ISO 8601 times of the space's zone, for a spreadsheet
//! or a person, the epoch milliseconds kept where they were.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::display::iso_time;
use crate::domain::feed::FeedEvent;

/// One exported event: its feed record, then `occurred_at`, `received_at` and `clicked_at`
/// (`2026-11-24T18:30:07.000+03:00`) in the space's zone.
#[derive(Serialize, JsonSchema)]
pub struct ExportedEvent<'a> {
    #[serde(flatten)]
    pub event: &'a FeedEvent,
    /// `occurred_at_ms` in the space's zone.
    pub occurred_at: String,
    /// `received_at_ms` in the space's zone.
    pub received_at: String,
    /// `clicked_at_ms` in the space's zone; `null` without a click.
    pub clicked_at: Option<String>,
}

impl<'a> ExportedEvent<'a> {
    /// `event` with its times in `zone`.
    #[must_use]
    pub fn new(event: &'a FeedEvent, zone: &jiff::tz::TimeZone) -> ExportedEvent<'a> {
        ExportedEvent {
            occurred_at: iso_time(event.occurred_at_ms, zone),
            received_at: iso_time(event.received_at_ms, zone),
            clicked_at: event.clicked_at_ms.map(|ms| iso_time(ms, zone)),
            event,
        }
    }
}
