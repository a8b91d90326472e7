//! The tracker's operations, shared by every way in (HTTP endpoints, the admin socket, the
//! command line): authenticate, record an event, back-fill a click, bind a click.
//!
//! An [`App`] holds what they need: the store, the settings, the clock and the rate limiter.
//! Nothing here knows about HTTP; handlers turn requests into these calls and answers into JSON.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::click::{BindInput, NewClick};
use crate::domain::dedup::{self, Basis};
use crate::domain::event::{self, EventInput, EventRules, FieldNames};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::{BindOutcome, ClickOutcome};
use crate::domain::rate::RateLimiter;
use crate::error::Error;
use crate::storage::Store;

pub struct App {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    rules: EventRules,
    dedup_window_ms: u64,
    limiter: RateLimiter,
}

/// A credential as a request presents it.
#[derive(Clone, Copy, Debug)]
pub enum Presented<'a> {
    /// The `Authorization` header's value, if any.
    Bearer(Option<&'a str>),
    /// The `token=` query parameter, if any.
    IngestToken(Option<&'a str>),
}

/// What recording an event did (or, for a dry run, would do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventResult {
    pub duplicate: bool,
    /// `None` only for a dry run of a new event: nothing was stored, so there is no id.
    pub inbox_id: Option<u64>,
    pub basis: Basis,
    pub matched: bool,
    pub dry_run: bool,
}

impl App {
    #[must_use]
    pub fn new(settings: Settings, store: Arc<Store>, clock: Arc<dyn Clock>) -> App {
        App {
            rules: settings.event_rules(),
            dedup_window_ms: settings.dedup_window.as_millis() as u64,
            limiter: RateLimiter::new(settings.rate_limit),
            store,
            settings,
            clock,
        }
    }

    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The space a credential acts for, counted against that space's rate limit. Checked
    /// before anything else about a request.
    pub fn authenticate(&self, presented: Presented<'_>) -> Result<SpaceRef, Error> {
        let now = self.now_ms();
        let keyring = self.store.keyring();
        let space = match presented {
            Presented::Bearer(header) => keyring.bearer(header, now)?,
            Presented::IngestToken(token) => keyring.ingest_token(token, now)?,
        };
        self.limiter.check(space.no, &space.name, now)?;
        Ok(space)
    }

    /// Validates and records one event; answers after the commit.
    pub async fn record_event(
        &self,
        space: &SpaceRef,
        input: EventInput,
        names: &FieldNames,
    ) -> Result<EventResult, Error> {
        let dry_run = input.dry_run;
        let event = event::validate(input, names, &self.rules, self.now_ms())?;
        let key = dedup::dedup_key(&event, self.dedup_window_ms);
        let basis = dedup::basis_of(key.as_ref());
        if dry_run {
            let (duplicate_of, matched) = self.store.judge_event(space.no, event, key).await?;
            return Ok(EventResult {
                duplicate: duplicate_of.is_some(),
                inbox_id: duplicate_of,
                basis,
                matched,
                dry_run: true,
            });
        }
        let outcome = self.store.record_event(space.no, event, key).await?;
        Ok(EventResult {
            duplicate: outcome.duplicate,
            inbox_id: Some(outcome.inbox_id),
            basis,
            matched: outcome.matched,
            dry_run: false,
        })
    }

    /// Back-fills a click from a `POST /clicks` body.
    pub async fn back_fill_click(
        &self,
        space: &SpaceRef,
        body: &[u8],
    ) -> Result<ClickOutcome, Error> {
        let click = NewClick::from_json(body, self.now_ms())?;
        self.store.back_fill_click(space.no, click).await
    }

    /// Binds a click to a Telegram user, first binding wins.
    pub async fn bind(&self, space: &SpaceRef, input: BindInput) -> Result<BindOutcome, Error> {
        self.store
            .bind(space.no, input.uid, input.tg_id, self.now_ms())
            .await
    }
}
