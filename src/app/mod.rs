//! The tracker's operations, shared by every way in (HTTP endpoints, the control socket, the
//! command line): authenticate, record an event, back-fill a click, bind a click.
//!
//! An [`App`] holds what they need: the store, the settings, the clock and the rate limiter.
//! Nothing here knows about HTTP; handlers turn requests into these calls and answers into JSON.

pub mod batch;
pub mod conversions;
pub mod destinations;
pub mod settings;
pub mod spaces;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::click::{BindInput, ClientHints, MAX_USER_AGENT, NewClick};
use crate::domain::client;
use crate::domain::dedup::{self, Basis, DedupKey};
use crate::domain::event::{
    self, AttributedBy, EventId, EventInput, EventRules, FieldNames, ValidEvent,
};
use crate::domain::feed::{FeedPage, MAX_WAITERS_PER_SPACE, PageRequest};
use crate::domain::keyring::{self, SpaceRef};
use crate::domain::link::{self, Link, LinkView, NewLink};
use crate::domain::outcome::{BindOutcome, ClickOutcome, EventOutcome};
use crate::domain::rate::{Limiter, SpaceLimiter};
use crate::domain::rejection::Rejection;
use crate::domain::stats::{GroupStats, Grouping, Range};
use crate::error::{Code, Error};
use crate::metrics::{EventStatus, Metrics};
use crate::storage::Store;

pub struct App {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    /// Requests, events and clicks counted for `/metrics` (the writer counts its own).
    pub metrics: Arc<Metrics>,
    rules: EventRules,
    dedup_window_ms: u64,
    limiter: SpaceLimiter,
    /// The per-address limit of the public paths.
    address_limiter: Limiter<IpAddr>,
    /// Whether the log has said that an `X-Forwarded-For` came from an untrusted peer.
    warned_untrusted_forwarded: AtomicBool,
    /// Requests of each space waiting on `GET /events/wait` now.
    waiting: Arc<Mutex<HashMap<u32, usize>>>,
    /// Wakes the senders (`delivery/`) to look for due deliveries now: after a retry by hand,
    /// or a step of a test's clock.
    pub delivery_wake: Arc<tokio::sync::Notify>,
    /// What the Telegram tasks report (each bot's name, each channel link's last Bot API
    /// error), and their wake-up (`telegram/`).
    pub telegram: Arc<crate::workers::telegram::Status>,
    /// Each space's last fetch of spend from Meta, and the fetch loop's wake-up (`spend/`).
    pub spend: Arc<crate::workers::spend::Status>,
}

/// A place among a space's waiting followers, given back when dropped.
struct Waiting {
    counts: Arc<Mutex<HashMap<u32, usize>>>,
    space: u32,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.space) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.space);
            }
        }
    }
}

/// A credential as a request presents it.
#[derive(Clone, Copy, Debug)]
pub enum Presented<'a> {
    /// The `Authorization` header's value, if any.
    Bearer(Option<&'a str>),
    /// The `token=` query parameter, if any.
    IngestToken(Option<&'a str>),
}

/// What a visit of a tracking link found.
#[derive(Debug)]
pub enum Visit {
    /// No link has that slug.
    Unknown,
    /// The link was deleted.
    Gone,
    /// A link preview or crawler: answered without a click.
    Preview(Arc<Link>),
    /// A person: the click was recorded with `uid`; for a channel link, with the invite link
    /// it took (`None`: the pool was empty, the visitor goes to the fallback).
    Clicked {
        link: Arc<Link>,
        uid: String,
        invite: Option<String>,
    },
}

/// What setting costs did: how many were set, and how many (of amount 0) removed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CostsSet {
    pub set: usize,
    pub removed: usize,
}

/// What importing a CSV of costs did: the rows the file had, the days (the first, the last,
/// how many) and campaigns they name, and how many costs were set and removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostsImport {
    pub rows: usize,
    pub days: usize,
    /// The first and the last day the file names.
    pub span: Option<(crate::domain::cost::Day, crate::domain::cost::Day)>,
    pub campaigns: usize,
    pub done: CostsSet,
}

impl CostsImport {
    /// What the import did, in the one sentence the Costs page and `tracker costs import`
    /// print: `3 rows: 3 costs set, 0 removed, over 2 days (2026-11-24 to 2026-11-25) and 2
    /// campaigns.`
    #[must_use]
    pub fn summary(&self) -> String {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        let span = self
            .span_text()
            .map_or_else(String::new, |t| format!(" ({t})"));
        format!(
            "{} row{}: {} cost{} set, {} removed, over {} day{}{span} and {} campaign{}.",
            self.rows,
            s(self.rows),
            self.done.set,
            s(self.done.set),
            self.done.removed,
            self.days,
            s(self.days),
            self.campaigns,
            s(self.campaigns),
        )
    }

    /// The days the file names as text: `2026-11-24 to 2026-11-25`, or the one day.
    fn span_text(&self) -> Option<String> {
        let (first, last) = self.span?;
        let day = crate::domain::cost::day_text;
        Some(if first == last {
            day(first)
        } else {
            format!("{} to {}", day(first), day(last))
        })
    }
}

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
    #[must_use]
    pub fn new(settings: Settings, store: Arc<Store>, clock: Arc<dyn Clock>) -> App {
        App {
            rules: settings.event_rules(),
            dedup_window_ms: settings.dedup_window_ms(),
            limiter: SpaceLimiter::new(settings.rate_limit),
            address_limiter: Limiter::new(settings.address_rate_limit),
            warned_untrusted_forwarded: AtomicBool::new(false),
            waiting: Arc::default(),
            delivery_wake: Arc::default(),
            telegram: Arc::default(),
            spend: Arc::default(),
            metrics: Arc::new(Metrics::default()),
            store,
            settings,
            clock,
        }
    }

    /// What the senders of conversions out are handed: the parts of the application they use.
    #[must_use]
    pub fn senders(&self) -> crate::delivery::Senders {
        crate::delivery::Senders {
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            settings: self.settings.delivery,
            wake: self.delivery_wake.clone(),
        }
    }

    /// What the fetch of spend from Meta is handed (`workers/spend/`).
    #[must_use]
    pub fn spend_tasks(&self) -> crate::workers::spend::Shared {
        crate::workers::spend::Shared {
            store: self.store.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
            status: self.spend.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// Fetches the space's spend of the last 28 days from Meta now (`POST /costs/fetch`,
    /// `tracker costs fetch`, the Costs page's button): the same fetch the hourly and daily
    /// ones are ([`crate::workers::spend::fetch`]). A fetch that fails at Meta is answered as its
    /// result, not an error.
    pub async fn fetch_costs(
        &self,
        space: &SpaceRef,
    ) -> Result<crate::workers::spend::LastFetch, Error> {
        crate::workers::spend::fetch(
            &self.spend_tasks(),
            space.no,
            crate::workers::spend::MONTH_DAYS,
        )
        .await
    }

    /// The space's last fetch of spend from Meta since the server started.
    #[must_use]
    pub fn last_costs_fetch(&self, space: &SpaceRef) -> Option<crate::workers::spend::LastFetch> {
        self.spend.last(space.no)
    }

    /// What retention is handed (`workers/retention.rs`).
    #[must_use]
    pub fn retention(&self) -> crate::workers::retention::Retention {
        crate::workers::retention::Retention::new(
            self.store.clone(),
            self.clock.clone(),
            self.metrics.clone(),
            &self.settings,
        )
    }

    /// What the backup schedule is handed (`workers/backups.rs`).
    #[must_use]
    pub fn backups(
        &self,
        schedule: crate::config::BackupSchedule,
    ) -> crate::workers::backups::Backups {
        crate::workers::backups::Backups {
            store: self.store.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            schedule,
        }
    }

    /// What the Telegram tasks are handed (`workers/telegram/`).
    #[must_use]
    pub fn telegram_tasks(&self) -> crate::workers::telegram::Shared {
        crate::workers::telegram::Shared::new(
            self.store.clone(),
            self.settings.clone(),
            self.clock.clone(),
            self.telegram.clone(),
            self.metrics.clone(),
        )
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

    /// The address a request comes from: the peer, or what a trusted proxy says it is. The
    /// first `X-Forwarded-For` from a peer that is not a trusted proxy is warned about, once:
    /// behind a proxy left out of `trusted_proxies`, every visitor would share its address.
    #[must_use]
    pub fn client_ip(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        let trusted = &self.settings.trusted_proxies;
        if forwarded_for.is_some()
            && !self.warned_untrusted_forwarded.load(Ordering::Relaxed)
            && !trusted.iter().any(|c| c.contains(peer))
            && !self
                .warned_untrusted_forwarded
                .swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                %peer,
                "a request carried X-Forwarded-For from a peer that is not in trusted_proxies: \
                 the header is ignored (said once). Behind a reverse proxy, set trusted_proxies \
                 to its address, or every visitor counts as the proxy for the per-address limits"
            );
        }
        client::client_ip(peer, forwarded_for, trusted)
    }

    /// Counts one request of a public path (no credential) from `client` against
    /// `address_rate_limit`.
    pub fn admit_address(&self, client: IpAddr) -> Result<(), Error> {
        self.address_limiter
            .take(client::address_key(client), self.now_ms())
            .map_err(|wait_s| {
                Error::new(
                    Code::RateLimited,
                    format!("too many requests from your address; retry in {wait_s} s"),
                )
                .retry_after(wait_s)
            })
    }

    /// The space of a credential that [`App::authenticate`] refused, if the tracker issued it
    /// (expired, revoked, of the wrong kind): its refusals belong in that space's rejection log.
    #[must_use]
    pub fn issuer_space(&self, presented: Presented<'_>) -> Option<SpaceRef> {
        let text = match presented {
            Presented::Bearer(header) => header.and_then(keyring::bearer_credential)?,
            Presented::IngestToken(token) => token?,
        };
        self.store.keyring().issuer_space(text)
    }

    /// Adds a refused request to `space`'s rejection log (best effort: never delays anything).
    pub fn record_rejection(&self, space: &SpaceRef, rejection: Rejection) {
        self.store.record_rejection(space.no, rejection);
    }

    /// The space named `name`, as a credential would have given it: how the command line and
    /// the admin page, which act for a space by name, reach the same operations.
    pub async fn space_named(&self, name: String) -> Result<SpaceRef, Error> {
        let no = self.store.space_no(name.clone()).await?;
        Ok(SpaceRef {
            no,
            name: name.into(),
        })
    }

    /// A page of the space's feed newest first (the admin page): the events before `before`,
    /// and the id to ask before for the next page.
    pub async fn feed_newest(
        &self,
        space: &SpaceRef,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<crate::domain::feed::FeedEvent>, Option<u64>), Error> {
        self.store.feed_newest(space.no, before, limit).await
    }

    /// A page of the space's feed.
    pub async fn feed(&self, space: &SpaceRef, page: PageRequest) -> Result<FeedPage, Error> {
        self.store.feed(space.no, page).await
    }

    /// A page of the space's feed as soon as it holds an event after `page.after`, or an empty
    /// page after `timeout`. Woken by the writer's commits, never by polling the file. At most
    /// [`MAX_WAITERS_PER_SPACE`] requests of a space wait at once; past it, `rate_limited`.
    pub async fn wait_for_events(
        &self,
        space: &SpaceRef,
        page: PageRequest,
        timeout: Duration,
    ) -> Result<FeedPage, Error> {
        let _place = {
            let mut counts = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let n = counts.entry(space.no).or_insert(0);
            if *n >= MAX_WAITERS_PER_SPACE {
                return Err(Error::new(
                    Code::RateLimited,
                    format!(
                        "space {:?} has {MAX_WAITERS_PER_SPACE} requests waiting for events \
                         already, the most at once; retry in 1 s",
                        &*space.name
                    ),
                )
                .retry_after(1));
            }
            *n += 1;
            Waiting {
                counts: self.waiting.clone(),
                space: space.no,
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut commits = self.store.commits();
        loop {
            // Marked seen before the read: a commit after it wakes the wait below.
            commits.borrow_and_update();
            let found = self.store.feed(space.no, page).await?;
            if !found.events.is_empty() {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, commits.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the store is closing: an empty page.
                Ok(Err(_)) | Err(_) => return Ok(found),
            }
        }
    }

    /// The space's stats by `grouping` over `range`, days in the space's time zone; answers
    /// the quarters `[from, to)` counted, with the groups.
    pub async fn stats(
        &self,
        space: &SpaceRef,
        grouping: Grouping,
        range: Range,
    ) -> Result<((u32, u32), Vec<GroupStats>), Error> {
        let zone = self.space_settings(space).await?.time_zone.zone();
        let quarters = range.quarters(&zone);
        let groups = self.store.stats(space.no, grouping, quarters, zone).await?;
        Ok((quarters, groups))
    }

    /// The space's costs on the days `[from, to]` (`GET /costs`, the dashboard).
    pub async fn costs(
        &self,
        space: &SpaceRef,
        days: (crate::domain::cost::Day, crate::domain::cost::Day),
    ) -> Result<Vec<crate::domain::cost::Cost>, Error> {
        self.store.costs(space.no, days).await
    }

    /// Sets costs (`POST /costs`, `tracker costs import`): each replaces what its campaign's day
    /// had, an amount of 0 removes it; one transaction, so an import is all or nothing.
    pub async fn set_costs(
        &self,
        space: &SpaceRef,
        costs: Vec<crate::domain::cost::Cost>,
    ) -> Result<CostsSet, Error> {
        let (set, removed) = self.store.set_costs(space.no, costs).await?;
        Ok(CostsSet { set, removed })
    }

    /// Imports a CSV file of costs (`tracker costs import`, the admin page's upload): parsed and
    /// checked whole ([`crate::domain::cost::parse_csv`]), then set in one transaction, so a
    /// bad row names its line and changes nothing. The file is read on a blocking thread: a
    /// large one takes a while, and a request thread held that long would stall ingest.
    pub async fn import_costs(&self, space: &SpaceRef, csv: &str) -> Result<CostsImport, Error> {
        let csv = csv.to_owned();
        let read = tokio::task::spawn_blocking(move || crate::domain::cost::parse_csv(&csv))
            .await
            .map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("reading the costs file failed: {e}"),
                )
            })??;
        let (rows, days, campaigns) = (read.rows, read.days(), read.campaigns());
        let span = read.days_span();
        let done = self.set_costs(space, read.costs).await?;
        Ok(CostsImport {
            rows,
            days,
            span,
            campaigns,
            done,
        })
    }

    /// The space's last `limit` rejections, newest first.
    pub async fn rejections(
        &self,
        space: &SpaceRef,
        limit: usize,
    ) -> Result<Vec<Rejection>, Error> {
        self.store.rejections(space.no, limit).await
    }

    /// Creates a link of `space` from a `POST /links` body or the command line's flags.
    pub async fn create_link(
        &self,
        space: &SpaceRef,
        mut link: NewLink,
    ) -> Result<LinkView, Error> {
        if let link::Destination::Channel(c) = &mut link.destination {
            self.resolve_channel(space, c).await?;
        }
        let is_channel = matches!(link.destination, link::Destination::Channel(_));
        let link = self
            .store
            .create_link(space.no, link, self.now_ms())
            .await?;
        if is_channel {
            self.telegram.wake.notify_one();
        }
        let mut view = LinkView::new(&link, &self.settings.public_url(), 0, 0);
        self.fill_channel_state(&mut view).await?;
        Ok(view)
    }

    /// Asks the space's bot about the channel a new link names: it must be a channel, and the
    /// bot an admin of it allowed to invite users. Fills in its chat id and title.
    async fn resolve_channel(
        &self,
        space: &SpaceRef,
        channel: &mut crate::domain::channel::Channel,
    ) -> Result<(), Error> {
        use crate::workers::telegram::api::ApiError;
        let bad = |message: String| Error::field(Code::InvalidField, "channel", message);
        let token = self
            .store
            .space_settings(space.no)
            .await?
            .telegram_bot_token
            .ok_or_else(|| {
                bad(
                    "a channel link needs the space's Telegram bot: set telegram_bot_token \
                     first (docs/channels.md)"
                        .to_owned(),
                )
            })?;
        let api = self.telegram_tasks().api(token.expose()).map_err(|e| {
            tracing::error!(error = %e, "a client of the Bot API");
            Error::internal()
        })?;
        let refused = |e: ApiError| match e {
            ApiError::Refused(_, d) => bad(format!(
                "Telegram does not know the channel {} or the bot cannot see it ({d}); add \
                 the bot to the channel as an admin first",
                channel.chat
            )),
            other => bad(format!("the channel could not be checked: {other}")),
        };
        let me = api.get_me().await.map_err(|e| bad(e.to_string()))?;
        let chat = api
            .call(
                "getChat",
                &serde_json::json!({"chat_id": channel.chat}),
                Duration::ZERO,
            )
            .await
            .map_err(refused)?;
        if chat["type"] != "channel" {
            return Err(bad(format!(
                "{} is a {}, not a channel",
                channel.chat,
                chat["type"].as_str().unwrap_or("chat of another kind")
            )));
        }
        let chat_id = chat["id"]
            .as_i64()
            .ok_or_else(|| bad("getChat answered no id".into()))?;
        let member = api
            .call(
                "getChatMember",
                &serde_json::json!({"chat_id": chat_id, "user_id": me.id}),
                Duration::ZERO,
            )
            .await
            .map_err(refused)?;
        let may_invite = member["status"] == "creator"
            || (member["status"] == "administrator" && member["can_invite_users"] == true);
        if !may_invite {
            return Err(bad(format!(
                "the bot @{} is not an admin of {} allowed to invite users: in the channel's \
                 Administrators, add the bot and turn on \"Invite users via link\"",
                me.username, channel.chat
            )));
        }
        channel.chat_id = chat_id;
        chat["title"]
            .as_str()
            .unwrap_or_default()
            .clone_into(&mut channel.title);
        Ok(())
    }

    /// A channel link's counts, pool and last Bot API error, into its view.
    async fn fill_channel_state(&self, view: &mut LinkView) -> Result<(), Error> {
        let Some(state) = &mut view.channel_state else {
            return Ok(());
        };
        let counts = self.store.channel_counts(view.slug.clone()).await?;
        state.pool = counts.pool;
        state.handed_out = counts.state.handed_out;
        state.used = counts.state.used;
        state.fallbacks = counts.state.fallbacks;
        state.joins = counts.state.joins;
        state.leaves = counts.state.leaves;
        state.last_error = self.telegram.link_error(&view.slug);
        Ok(())
    }

    /// The space's links with their click counts.
    pub async fn links(&self, space: &SpaceRef) -> Result<Vec<LinkView>, Error> {
        let public_url = self.settings.public_url();
        let mut views: Vec<LinkView> = self
            .store
            .links(space.no)
            .await?
            .iter()
            .map(|(link, clicks, bound)| LinkView::new(link, &public_url, *clicks, *bound))
            .collect();
        for view in &mut views {
            self.fill_channel_state(view).await?;
        }
        Ok(views)
    }

    /// Deletes a link of the space: its address answers `410` from now on.
    pub async fn delete_link(&self, space: &SpaceRef, slug: String) -> Result<(), Error> {
        self.store.delete_link(space.no, slug, self.now_ms()).await
    }

    /// A visit of `/l/<slug>`: what to answer, and the click it recorded (committed before
    /// this returns). Link previews, crawlers and `HEAD` record nothing.
    pub async fn visit(
        &self,
        slug: &str,
        raw_query: &str,
        user_agent: Option<&str>,
        client: Option<IpAddr>,
        head: bool,
    ) -> Result<Visit, Error> {
        let Some(link) = self.store.link(slug) else {
            return Ok(Visit::Unknown);
        };
        if link.deleted {
            return Ok(Visit::Gone);
        }
        if head || link::is_preview(user_agent, &self.settings.link_preview_agents) {
            return Ok(Visit::Preview(link));
        }
        let mut click = link::visit_click(&link, raw_query, self.now_ms());
        // Kept only where the space opted in (`meta_client_hints`): the writer decides.
        click.hints = client.map(|ip| ClientHints {
            ip: Some(ip),
            user_agent: user_agent.map(|a| a.chars().take(MAX_USER_AGENT).collect()),
            fbc: None,
        });
        let channel = matches!(link.destination, link::Destination::Channel(_));
        match self.store.link_click(slug.to_owned(), click, channel).await {
            Ok((outcome, invite)) => {
                self.metrics.click();
                if channel {
                    // The pool is one shorter: its loop makes another.
                    self.telegram.wake.notify_one();
                    if invite.is_none() {
                        self.metrics.telegram("fallback_visits", 1);
                    }
                }
                Ok(Visit::Clicked {
                    link,
                    uid: outcome.uid,
                    invite,
                })
            }
            // Deleted between the look-up and the write.
            Err(e) if e.code == Code::NotFound => Ok(Visit::Gone),
            Err(e) => Err(e),
        }
    }

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
    fn checked_event(
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
        let outcome = self.store.back_fill_click(space.no, click).await?;
        if outcome.created {
            self.metrics.click();
        }
        Ok(outcome)
    }

    /// Binds a click to a Telegram user, first binding wins.
    pub async fn bind(&self, space: &SpaceRef, input: BindInput) -> Result<BindOutcome, Error> {
        self.store
            .bind(space.no, input.uid, input.tg_id, self.now_ms())
            .await
    }
}
