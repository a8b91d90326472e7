//! Retention: the dedup entries that can never match again are removed in the background, so
//! the `dedup` table does not grow without bound from them; so are the visitors' hints of link
//! clicks (`meta_client_hints`) older than 7 days, Meta's window, and the rows of deliveries
//! delivered or cancelled more than `delivery_retention` ago (their counts stay).
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

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::clock;
use crate::domain::dedup::Expiry;
use crate::error::Error;

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

/// Sweeps until the task is dropped (at shutdown). A failed step (storage unavailable) ends
/// that sweep; the next one starts on schedule. Failures are logged once when they start and
/// once when they end.
pub async fn run(app: Arc<App>) {
    let window_ms = app.settings.dedup_window_ms();
    let every = u64::try_from(SWEEP_EVERY.as_millis())
        .unwrap_or(u64::MAX)
        .min(window_ms)
        .max(1000);
    let mut due = app.now_ms() + (FIRST_SWEEP_AFTER.as_secs() * 1000).min(every);
    let mut failing = false;
    loop {
        clock::sleep_until(&*app.clock, due).await;
        due = app.now_ms().saturating_add(every);
        if let Err(e) = sweep_hints(&app).await {
            tracing::warn!(error = %e.message, "deleting old visitors' hints failed");
        }
        match sweep_deliveries(&app).await {
            Ok(0) => {}
            Ok(removed) => tracing::debug!(removed, "deleted old delivered deliveries"),
            Err(e) => tracing::warn!(error = %e.message, "deleting old deliveries failed"),
        }
        match sweep(&app, window_ms).await {
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

/// Deletes the visitors' hints (IP address, user agent, `fbc`) of clicks older than 7 days
/// (`click::HINTS_KEPT_MS`, Meta's window), step by step; answers how many.
pub async fn sweep_hints(app: &App) -> Result<u64, Error> {
    let before = app
        .now_ms()
        .saturating_sub(crate::domain::click::HINTS_KEPT_MS);
    let (mut from, mut removed) = (0, 0);
    loop {
        let (n, next) = app
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

/// Deletes the rows of deliveries delivered (or cancelled with their destination) more than
/// `delivery_retention` ago, step by step; answers how many. Their destinations' counts stay.
pub async fn sweep_deliveries(app: &App) -> Result<u64, Error> {
    let before = app
        .now_ms()
        .saturating_sub(app.settings.delivery.retention_ms());
    let (mut from, mut removed) = ((0, 0), 0);
    loop {
        let (n, next) = app
            .store
            .write(move |t| t.prune_deliveries(from, before, STEP_ENTRIES))
            .await?;
        removed += n;
        match next {
            Some(cursor) => from = cursor,
            None => return Ok(removed),
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}

/// One sweep over every windowed entry, step by step; answers how many it removed. Each step
/// judges by the clock when it is sent, less [`MARGIN_MS`].
pub async fn sweep(app: &App, window_ms: u64) -> Result<u64, Error> {
    let mut after = None;
    let mut removed = 0;
    loop {
        let expiry = Expiry {
            now_ms: app.now_ms().saturating_sub(MARGIN_MS),
            window_ms,
        };
        let step = app
            .store
            .write(move |t| t.prune_dedup(after, expiry, STEP_ENTRIES))
            .await?;
        removed += step.removed;
        app.metrics.pruned(step.removed);
        match step.next {
            Some(next) => after = Some(next),
            None => return Ok(removed),
        }
        tokio::time::sleep(STEP_PAUSE).await;
    }
}
