//! What comes in about conversions: an event recorded (or judged, for a dry run), a click
//! back-filled, a click bound to a Telegram user.

use crate::app::App;
use crate::domain::click::{BindInput, NewClick};
use crate::domain::dedup::{self, Basis, DedupKey};
use crate::domain::event::{self, AttributedBy, EventId, EventInput, FieldNames, ValidEvent};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::{BindOutcome, ClickOutcome, EventOutcome};
use crate::error::Error;
use crate::metrics::EventStatus;

/// What recording an event did (or, for a dry run, would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventResult {
    pub duplicate: bool,
    /// `None` only for a dry run of a new event: nothing was stored, so there is no id.
    pub inbox_id: Option<u64>,
    /// The event's identity (for a duplicate, the earlier event's); `None` as `inbox_id` is.
    pub event_id: Option<EventId>,
    pub basis: Basis,
    pub matched: bool,
    /// How it was (or would be) attributed to its click; `None` when no click was found.
    pub attributed_by: Option<AttributedBy>,
    pub dry_run: bool,
}

impl EventResult {
    /// What storing an event did, from the store's outcome: single events and batches alike.
    #[must_use]
    pub fn stored(outcome: EventOutcome, basis: Basis) -> EventResult {
        EventResult {
            duplicate: outcome.duplicate,
            inbox_id: Some(outcome.inbox_id),
            event_id: Some(outcome.event_id),
            basis,
            matched: outcome.matched,
            attributed_by: outcome.attributed_by,
            dry_run: false,
        }
    }
}

impl App {
    /// Validates and records one event; answers after the commit.
    pub async fn record_event(
        &self,
        space: &SpaceRef,
        input: EventInput,
        names: &FieldNames,
    ) -> Result<EventResult, Error> {
        let dry_run = input.dry_run;
        let (event, key, basis) = self.checked_event(input, names, self.now_ms())?;
        if dry_run {
            let (duplicate_of, attributed_by) =
                self.store.judge_event(space.no, event, key).await?;
            return Ok(EventResult {
                duplicate: duplicate_of.is_some(),
                inbox_id: duplicate_of.map(|(inbox_id, _)| inbox_id),
                event_id: duplicate_of.map(|(_, event_id)| event_id),
                basis,
                matched: attributed_by.is_some(),
                attributed_by,
                dry_run: true,
            });
        }
        let outcome = self.store.record_event(space.no, event, key).await?;
        Ok(EventResult::stored(outcome, basis))
    }

    /// An event checked against its rules at `now_ms`, with its dedup key and the rule that
    /// chose it: what every way of recording events does first.
    pub(super) fn checked_event(
        &self,
        input: EventInput,
        names: &FieldNames,
        now_ms: u64,
    ) -> Result<(ValidEvent, Option<DedupKey>, Basis), Error> {
        let event = event::validate(input, names, &self.rules, now_ms)?;
        let key = dedup::dedup_key(&event, self.dedup_window_ms);
        let basis = dedup::basis_of(key.as_ref());
        Ok((event, key, basis))
    }

    /// Counts how an authenticated event request ended, for `/metrics`; a dry run stored
    /// nothing and is not counted when it succeeds.
    pub fn count_event(&self, result: &Result<EventResult, Error>) {
        let status = match result {
            Ok(r) if r.dry_run => return,
            Ok(r) if r.duplicate => EventStatus::Duplicate,
            Ok(_) => EventStatus::Queued,
            Err(_) => EventStatus::Rejected,
        };
        self.metrics.event(status);
    }

    /// Back-fills a click from a `POST /clicks` body.
    pub async fn back_fill_click(
        &self,
        space: &SpaceRef,
        body: &[u8],
    ) -> Result<ClickOutcome, Error> {
        let click = NewClick::from_json(body, self.now_ms())?;
        let no = space.no;
        let outcome = self
            .store
            .write(move |t| t.back_fill_click(no, click))
            .await?;
        if outcome.created {
            self.metrics.click();
        }
        Ok(outcome)
    }

    /// Binds a click to a Telegram user, first binding wins.
    pub async fn bind(&self, space: &SpaceRef, input: BindInput) -> Result<BindOutcome, Error> {
        let (no, now) = (space.no, self.now_ms());
        self.store
            .write(move |t| t.bind(no, &input.uid, input.tg_id, now))
            .await
    }
}
