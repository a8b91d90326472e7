//! Retention: the dedup entries that can never match again are removed in the background, so
//! the `dedup` table does not grow without bound from them; so are the visitors' hints of link
//! clicks (`meta_client_hints`) older than 7 days, Meta's window, the rows of deliveries
//! delivered or cancelled more than `delivery_retention` ago (their counts stay), and the audit
//! log's entries older than a year.
//!
//! Only the windowed rule's entries expire (a deposit with `uid`, no `eid` and no time: a
//! duplicate only within `dedup_window`); every other rule is permanent and its entries stay.
//! [`Expiry`](crate::domain::dedup::Expiry) decides, with the same window arithmetic as the
//! dedup decision itself.
//!
//! A sweep walks the windowed entries in key order in small steps, each one write operation of
//! the commit loop (`Store::prune_dedup`) that looks at [`STEP_ENTRIES`] entries at most, with
//! a pause between steps, so that ingest's batches keep the writer between them and a step adds
//! a few small page writes to the batch it joins. Sweeps start [`FIRST_SWEEP_AFTER`] after the
//! server does and then every `dedup_window` or [`SWEEP_EVERY`], whichever is shorter (at least a
//! second apart), so an entry stays at most about twice the window, plus [`MARGIN_MS`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{self, Clock};
use crate::config::Settings;
use crate::domain::dedup::Expiry;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::storage::Store;
use crate::workers::Worker;

/// Entries looked at in one write transaction: a few leaves of the table, about a millisecond
/// of the writer's time.
pub const STEP_ENTRIES: usize = 1024;
/// The pause between two steps of a sweep: ingest's batches run in between.
const STEP_PAUSE: Duration = Duration::from_millis(20);
/// The longest time between two sweeps.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// The first sweep waits this long after the start (or one sweep's interval, if shorter), so
/// that a server that restarts often still prunes, and a start is not slowed by it.
pub const FIRST_SWEEP_AFTER: Duration = Duration::from_secs(60);
/// How long after it stops counting an entry is kept at least. An event is stamped with its
/// time of receipt before it reaches the writer's queue; a step that ran between the stamp and
/// the queue must not have removed an entry the event duplicates. The stamp and the queue are
/// microseconds apart, a step in the queue runs in order with the events around it, and a
/// minute covers a stalled thread and a small step of the wall clock.
pub const MARGIN_MS: u64 = 60_000;

/// What retention is handed by the layer above: the store it prunes, the clock it judges by,
/// the counter of pruned entries, and the two windows it keeps.
#[derive(Clone)]
pub struct Retention {
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    /// `dedup_window`: how long a windowed dedup entry counts.
    pub dedup_window_ms: u64,
    /// `delivery_retention`: how long a delivered or cancelled delivery's row is kept.
    pub delivery_retention_ms: u64,
}

impl Retention {
    #[must_use]
    pub fn new(
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        settings: &Settings,
    ) -> Retention {
        Retention {
            store,
            clock,
            metrics,
            dedup_window_ms: settings.dedup_window_ms(),
            delivery_retention_ms: settings.delivery.retention_ms(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// Sweeps until the task is dropped (at shutdown). A failed step (storage unavailable) ends
/// that sweep; the next one starts on schedule. Failures are logged once when they start and
/// once when they end.
pub async fn run(retention: Retention) {
    let window_ms = retention.dedup_window_ms;
    let every = u64::try_from(SWEEP_EVERY.as_millis())
        .unwrap_or(u64::MAX)
        .min(window_ms)
        .max(1000);
    let mut due = retention.now_ms() + (FIRST_SWEEP_AFTER.as_secs() * 1000).min(every);
    let mut failing = false;
    loop {
        clock::sleep_until(&*retention.clock, due).await;
        due = retention.now_ms().saturating_add(every);
        if let Err(e) = sweep_hints(&retention).await {
            tracing::warn!(error = %e.message, "deleting old visitors' hints failed");
        }
        if let Err(e) = sweep_audit(&retention).await {
            tracing::warn!(error = %e.message, "deleting old audit log entries failed");
        }
        match sweep_deliveries(&retention).await {
            Ok(0) => {}
            Ok(removed) => tracing::debug!(removed, "deleted old delivered deliveries"),
            Err(e) => tracing::warn!(error = %e.message, "deleting old deliveries failed"),
        }
        match sweep(&retention, window_ms).await {
            Ok(removed) => {
                if failing {
                    tracing::info!("pruning expired dedup entries works again");
                    failing = false;
                }
                if removed > 0 {
                    tracing::debug!(removed, "pruned expired dedup entries");
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        error = %e.message,
                        "pruning expired dedup entries failed; trying again at the next sweep"
                    );
                    failing = true;
                }
            }
        }
    }
}

impl Worker for Retention {
    const NAME: &'static str = "retention";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// Deletes the visitors' hints (IP address, user agent, `fbc`) of clicks older than 7 days
/// (`click::HINTS_KEPT_MS`, Meta's window), step by step; answers how many.
pub async fn sweep_hints(retention: &Retention) -> Result<u64, Error> {
    let before = retention
        .now_ms()
        .saturating_sub(crate::domain::click::HINTS_KEPT_MS);
    let (mut from, mut removed) = (0, 0);
    loop {
        let (n, next) = retention
            .store
            .write(move |t| t.prune_click_hints(from, before, STEP_ENTRIES))
            .await?;
        removed += n;
        match next {
            Some(space) => from = space,
            None => return Ok(removed),
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}

/// Deletes the audit log's entries older than a year (`audit::KEPT_MS`), step by step; answers
/// how many.
pub async fn sweep_audit(retention: &Retention) -> Result<u64, Error> {
    let before = retention
        .now_ms()
        .saturating_sub(crate::domain::audit::KEPT_MS);
    let mut removed = 0;
    loop {
        let n = retention
            .store
            .write(move |t| t.prune_audit(before, STEP_ENTRIES))
            .await?;
        removed += n;
        if n < STEP_ENTRIES as u64 {
            return Ok(removed);
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}

/// Deletes the rows of deliveries delivered (or cancelled with their destination) more than
/// `delivery_retention` ago, step by step; answers how many. Their destinations' counts stay;
/// then the rows of destinations removed that long ago whose deliveries are all gone.
pub async fn sweep_deliveries(retention: &Retention) -> Result<u64, Error> {
    let before = retention
        .now_ms()
        .saturating_sub(retention.delivery_retention_ms);
    let (mut from, mut removed) = ((0, 0), 0);
    loop {
        let (n, next) = retention
            .store
            .write(move |t| t.prune_deliveries(from, before, STEP_ENTRIES))
            .await?;
        removed += n;
        match next {
            Some(cursor) => from = cursor,
            None => break,
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
    loop {
        let forgotten = retention
            .store
            .write(move |t| t.forget_removed_destinations(before, STEP_ENTRIES))
            .await?;
        if forgotten < STEP_ENTRIES as u64 {
            return Ok(removed);
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}

/// One sweep over every windowed entry, step by step; answers how many it removed. Each step
/// judges by the clock when it is sent, less [`MARGIN_MS`].
pub async fn sweep(retention: &Retention, window_ms: u64) -> Result<u64, Error> {
    let mut after = None;
    let mut removed = 0;
    loop {
        let expiry = Expiry {
            now_ms: retention.now_ms().saturating_sub(MARGIN_MS),
            window_ms,
        };
        let step = retention
            .store
            .write(move |t| t.prune_dedup(after, expiry, STEP_ENTRIES))
            .await?;
        removed += step.removed;
        retention.metrics.pruned(step.removed);
        match step.next {
            Some(next) => after = Some(next),
            None => return Ok(removed),
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}
