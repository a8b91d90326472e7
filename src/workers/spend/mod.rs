//! Spend fetched from Meta into costs (`docs/api.md#spend-from-meta`): for each space with a
//! `meta_ads_account` and a `meta_ads_token`, its ad account's insights by ad and day
//! (`insights.rs`), the last 3 days every hour and the last 28 days once a day, in the space's
//! time zone. A fetch sets each cost Meta answered over the one Meta gave before; a cost from
//! Meta its answer leaves out stays (an ad deleted since may be missing), and costs set by hand
//! (`POST /costs`, a CSV) stay. [`fetch`] is the one fetch, run by the loop ([`run`]), by `POST
//! /costs/fetch`, `tracker costs fetch` and the Costs page's button alike; one fetch of a space
//! runs at a time, the others wait their turn, so a space's answers never pile up in memory.
//!
//! Meta's words reach the log escaped (`?`, as delivery errors do): an answer cannot write
//! escape sequences or a line of its own there.
//!
//! A token Meta refuses (`190`, `10`, `200` to `299`) pauses the space's fetching, as it pauses
//! a Meta destination, until a new token is set. Each fetch's result is kept for the Costs page
//! and the command line ([`Status`]), logged (never with the token), and counted in
//! `/metrics` (`tracker_costs_fetch_total{result}`).
//!
//! Like `telegram/`, the loop is handed a narrow [`Shared`] rather than the application.

pub mod insights;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::cost::{self, Day};
use crate::domain::decimal::Decimal;
use crate::domain::stats;
use crate::error::{Code, Error};
use crate::metrics::Metrics;
use crate::storage::Store;
use crate::workers::Worker;

/// The days every hour's fetch reads: today and the two before.
pub const RECENT_DAYS: u32 = 3;
/// The days the daily fetch (and a fetch asked for now) reads.
pub const MONTH_DAYS: u32 = 28;
const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;
/// How often the loop looks at the spaces without being woken.
const LOOK_EVERY: Duration = Duration::from_secs(30);

/// What a fetch that worked did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub at_ms: u64,
    /// The days read, both included.
    pub first: Day,
    pub last: Day,
    /// Rows Meta answered, and those left out (a name over its bound, a spend that does not
    /// read).
    pub rows: usize,
    pub skipped: usize,
    /// Costs set (one per day, campaign, ad set and ad), and costs from Meta removed because
    /// Meta now answers no spend for them.
    pub set: usize,
    pub removed: usize,
    /// The spend read, per currency.
    pub spend: BTreeMap<String, Decimal>,
    /// The ad account's time zone, where it is not the space's: Meta's days are the account's,
    /// set against the space's days of clicks and events.
    pub other_zone: Option<String>,
}

impl Fetched {
    /// In a sentence, for the Costs page, the command line and the log.
    #[must_use]
    pub fn summary(&self) -> String {
        let spend = if self.spend.is_empty() {
            "no spend".to_owned()
        } else {
            let parts: Vec<String> = self.spend.iter().map(|(c, a)| format!("{a} {c}")).collect();
            format!("spend {}", parts.join(", "))
        };
        let skipped = if self.skipped == 0 {
            String::new()
        } else {
            format!(
                " ({} left out: a name too long or a spend that does not read)",
                self.skipped
            )
        };
        let zone = match &self.other_zone {
            None => String::new(),
            Some(zone) => format!(
                "; Meta counts days in the ad account's time zone, {zone}, and this space in \
                 another: set the space's time_zone to {zone} to set each day's spend against \
                 the same day's clicks"
            ),
        };
        format!(
            "{} days ({} to {}): {} rows{skipped}, {} costs set, {} removed, {spend}{zone}",
            self.last - self.first + 1,
            cost::day_text(self.first),
            cost::day_text(self.last),
            self.rows,
            self.set,
            self.removed,
        )
    }
}

/// A space's last fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LastFetch {
    Done(Fetched),
    Failed {
        at_ms: u64,
        message: String,
    },
    /// Meta refused the token: fetching waits for a new one.
    TokenRefused {
        at_ms: u64,
        message: String,
    },
}

impl LastFetch {
    /// `ok`, `failed` or `token_refused`, as `/metrics` labels it.
    #[must_use]
    pub fn result(&self) -> &'static str {
        match self {
            LastFetch::Done(_) => "ok",
            LastFetch::Failed { .. } => "failed",
            LastFetch::TokenRefused { .. } => "token_refused",
        }
    }

    #[must_use]
    pub fn at_ms(&self) -> u64 {
        match self {
            LastFetch::Done(f) => f.at_ms,
            LastFetch::Failed { at_ms, .. } | LastFetch::TokenRefused { at_ms, .. } => *at_ms,
        }
    }

    /// In a sentence.
    #[must_use]
    pub fn summary(&self) -> String {
        match self {
            LastFetch::Done(f) => f.summary(),
            LastFetch::Failed { message, .. } => format!("failed: {message}"),
            LastFetch::TokenRefused { message, .. } => {
                format!("paused until a new meta_ads_token: {message}")
            }
        }
    }
}

/// What the fetches report, read by the application; and the loop's wake-up.
#[derive(Default)]
pub struct Status {
    last: Mutex<HashMap<u32, LastFetch>>,
    /// The spaces whose settings changed: fetched at the loop's next look.
    changed: Mutex<HashSet<u32>>,
    /// Wakes the loop: a space's Meta settings were set.
    pub wake: Notify,
    /// Each space's turn: one fetch of a space at a time.
    turns: Mutex<HashMap<u32, Arc<tokio::sync::Mutex<()>>>>,
}

impl Status {
    /// The space's last fetch, if any since the server started.
    #[must_use]
    pub fn last(&self, space: u32) -> Option<LastFetch> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&space)
            .cloned()
    }

    /// The space's Meta settings were set: a refused token's pause ends (a new token is tried),
    /// and the loop fetches the space's month at once.
    pub fn settings_changed(&self, space: u32) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(last.get(&space), Some(LastFetch::TokenRefused { .. })) {
            last.remove(&space);
        }
        drop(last);
        self.changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(space);
        self.wake.notify_one();
    }

    fn paused(&self, space: u32) -> Option<String> {
        match self.last(space) {
            Some(LastFetch::TokenRefused { message, .. }) => Some(message),
            _ => None,
        }
    }

    /// The lock a fetch of `space` holds while it runs.
    fn turn(&self, space: u32) -> Arc<tokio::sync::Mutex<()>> {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(space)
            .or_default()
            .clone()
    }

    fn take_changed(&self, space: u32) -> bool {
        self.changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&space)
    }
}

/// Whether the zone named `account` (Meta's `timezone_name`) has the days of `space`'s zone:
/// the same offset now and half a year either side (an alias such as `US/Pacific`, or another
/// name with the same rules, is not another zone). A name the bundled database does not know is
/// taken as another zone.
fn same_days(account: &str, space: &jiff::tz::TimeZone, now_ms: u64) -> bool {
    let Ok(theirs) = jiff::tz::db().get(account) else {
        return false;
    };
    let half_year: i64 = 183 * 24 * 3_600_000;
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    [now - half_year, now, now.saturating_add(half_year)]
        .into_iter()
        .filter_map(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .all(|t| theirs.to_offset(t) == space.to_offset(t))
}

/// What a fetch is handed.
pub struct Shared {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    pub status: Arc<Status>,
    pub metrics: Arc<Metrics>,
}

/// Fetches the last `days` days (today in the space's zone and those before) of `space`'s spend
/// from Meta, and sets those days' costs from Meta's answer. The result, a failure too, is
/// kept ([`Status::last`]), logged and counted. A fetch of the same space already running is
/// waited for first.
///
/// # Errors
/// `conflict` when the space has no `meta_ads_account` or `meta_ads_token`, or its token was
/// refused and no new one was set since; a store's error. A fetch that fails at Meta is not an
/// error: it is the answer's [`LastFetch`].
pub async fn fetch(shared: &Shared, space: u32, days: u32) -> Result<LastFetch, Error> {
    let turn = shared.status.turn(space);
    let _running = turn.lock().await;
    let settings = shared.store.read(move |s| s.space_settings(space)).await?;
    let (Some(account), Some(token)) = (&settings.meta_ads_account, &settings.meta_ads_token)
    else {
        return Err(Error::new(
            Code::Conflict,
            "set the space's meta_ads_account and meta_ads_token first",
        ));
    };
    if let Some(message) = shared.status.paused(space) {
        return Err(Error::new(
            Code::Conflict,
            format!(
                "fetching is paused since Meta refused the token ({message}): set a new \
                 meta_ads_token"
            ),
        ));
    }
    let now = shared.clock.now_ms();
    let zone = settings.time_zone.zone();
    let today = stats::local_day(&zone, stats::quarter_of(now));
    let first = today.saturating_sub(days.max(1) - 1);
    let client = crate::outbound::client(&shared.settings.delivery).map_err(|e| {
        tracing::error!(error = %e, "a client for Meta's Graph API");
        Error::internal()
    })?;
    let allow_private = shared.settings.delivery.allow_private_destinations;
    let graph = insights::Graph {
        client: &client,
        check: |url: &str| crate::outbound::check_before_send(url, allow_private),
        base: settings.meta_graph_url.as_str(),
        version: settings
            .meta_graph_version
            .as_deref()
            .unwrap_or(insights::DEFAULT_GRAPH_VERSION),
        account,
        token: token.expose(),
    };
    let read = graph.insights((first, today)).await;
    // Asked after the spend, and only as advice: a fetch whose zone cannot be read still counts.
    let other_zone = match &read {
        Ok(_) => graph
            .account_zone()
            .await
            .ok()
            .filter(|z| !same_days(z, &zone, now)),
        Err(_) => None,
    };
    let last = match read {
        Ok(read) => {
            let mut spend: BTreeMap<String, Decimal> = BTreeMap::new();
            for c in &read.costs {
                let sum = spend
                    .entry(c.currency.clone())
                    .or_insert_with(Decimal::zero);
                *sum = sum.checked_add(c.amount).unwrap_or(*sum);
            }
            let costs = read.costs;
            let (set, removed) = shared
                .store
                .write(move |t| t.set_meta_costs(space, (first, today), &costs))
                .await?;
            LastFetch::Done(Fetched {
                at_ms: now,
                first,
                last: today,
                rows: read.rows,
                skipped: read.skipped,
                set,
                removed,
                spend,
                other_zone,
            })
        }
        Err(insights::Failure::TokenRefused(message)) => LastFetch::TokenRefused {
            at_ms: now,
            message,
        },
        Err(insights::Failure::Failed(message)) => LastFetch::Failed {
            at_ms: now,
            message,
        },
    };
    record(shared, space, account, &last);
    Ok(last)
}

/// A fetch's result logged (Meta's words escaped), counted and kept as the space's last.
fn record(shared: &Shared, space: u32, account: &str, last: &LastFetch) {
    match last {
        LastFetch::Done(_) => {
            tracing::info!(space, account = %account, result = ?last.summary(), "spend fetched from Meta");
        }
        _ => {
            tracing::warn!(space, account = %account, result = ?last.summary(), "spend not fetched from Meta");
        }
    }
    shared.metrics.costs_fetch(last.result());
    shared
        .status
        .last
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(space, last.clone());
}

/// When a space is next due: the hour's fetch and the day's.
#[derive(Clone, Copy, Default)]
struct Due {
    recent: u64,
    month: u64,
}

/// Runs beside the server: each space with Meta's settings fetched every hour (the last
/// [`RECENT_DAYS`]) and every day (the last [`MONTH_DAYS`]), the month first after a start or
/// a change of its settings, and again at the next hour after a month's fetch that failed.
pub async fn run(shared: Shared) {
    let mut due: HashMap<u32, Due> = HashMap::new();
    loop {
        let woken = shared.status.wake.notified();
        for space in with_accounts(&shared).await {
            let changed = shared.status.take_changed(space);
            let when = due.entry(space).or_default();
            let now = shared.clock.now_ms();
            let days = if changed || now >= when.month {
                when.month = now.saturating_add(DAY_MS);
                when.recent = now.saturating_add(HOUR_MS);
                MONTH_DAYS
            } else if now >= when.recent {
                when.recent = now.saturating_add(HOUR_MS);
                RECENT_DAYS
            } else {
                continue;
            };
            if shared.status.paused(space).is_some() {
                continue;
            }
            match fetch(&shared, space, days).await {
                Ok(LastFetch::Done(_)) => {}
                // The month's revisions are not left for a day: the next hour fetches the month
                // again, not only its last days.
                Ok(_) if days == MONTH_DAYS => when.month = when.recent,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(space, error = ?e.message, "spend not fetched from Meta");
                }
            }
        }
        let _ = tokio::time::timeout(LOOK_EVERY, woken).await;
    }
}

impl Worker for Shared {
    const NAME: &'static str = "spend";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// The spaces with an ad account and a token.
async fn with_accounts(shared: &Shared) -> Vec<u32> {
    let spaces = match shared.store.read(|s| s.list_spaces(&HashMap::new())).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "listing spaces for Meta's spend");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for summary in spaces {
        let s = &summary.settings;
        if s.meta_ads_account.is_none() || s.meta_ads_token.is_none() {
            continue;
        }
        let name = summary.space.clone();
        if let Ok(space) = shared.store.read(move |s| s.space_no(&name)).await {
            out.push(space);
        }
    }
    out
}

/// A fetch as every way out shows it (`POST /costs/fetch`, `tracker costs fetch`).
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FetchView {
    /// `ok`, `failed`, or `token_refused` (fetching paused until a new `meta_ads_token`).
    pub result: String,
    /// When it ran (UTC).
    pub at: String,
    /// The days read, both included (a fetch that worked).
    pub from: Option<String>,
    pub to: Option<String>,
    /// Rows Meta answered, rows left out, costs set, and costs from Meta removed because Meta
    /// now answers no spend for them.
    pub rows: usize,
    pub skipped: usize,
    pub set: usize,
    pub removed: usize,
    /// The spend read, per currency, exact decimals.
    pub spend: BTreeMap<String, String>,
    /// Why it failed (the token never in it).
    pub error: Option<String>,
    /// What it did, in a sentence.
    pub summary: String,
}

impl From<&LastFetch> for FetchView {
    fn from(last: &LastFetch) -> FetchView {
        let mut view = FetchView {
            result: last.result().to_owned(),
            at: crate::clock::rfc3339_s(last.at_ms()),
            from: None,
            to: None,
            rows: 0,
            skipped: 0,
            set: 0,
            removed: 0,
            spend: BTreeMap::new(),
            error: None,
            summary: last.summary(),
        };
        match last {
            LastFetch::Done(f) => {
                view.from = Some(cost::day_text(f.first));
                view.to = Some(cost::day_text(f.last));
                (view.rows, view.skipped, view.set, view.removed) =
                    (f.rows, f.skipped, f.set, f.removed);
                view.spend = f
                    .spend
                    .iter()
                    .map(|(c, a)| (c.clone(), a.to_string()))
                    .collect();
            }
            LastFetch::Failed { message, .. } | LastFetch::TokenRefused { message, .. } => {
                view.error = Some(message.clone());
            }
        }
        view
    }
}
