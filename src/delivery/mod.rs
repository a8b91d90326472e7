//! The sender of conversions out (`docs/api.md#conversions-out`): one task per live
//! destination, started and stopped as destinations come and go, each with its own HTTP client
//! ([`outbound`](crate::outbound)), all on one thread of their own that runs at a lower CPU priority than the
//! server: ingest first, deliveries with the time that is left. What a destination is sent, and
//! what its answers mean, is its platform's (`platform/`), reached through
//! [`Platform`](crate::platform::Platform) alone.
//!
//! A task reads what is due through the reader path (`storage/destinations`, `due`), sends it, and
//! records what each attempt came to through the writer, one write per batch. A delivery leaves
//! `pending` or `retrying` only in that write: a crash before it sends the delivery again after
//! the restart (at least once; receivers deduplicate). A destination that is slow, failing or
//! unreachable holds only its own task, never ingest (which only appends a row per delivery)
//! nor another destination. What a task holds in memory is one batch; the rest waits in the
//! file.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::Delivery;
use crate::domain::credential::cut_secret;
use crate::domain::currency::CurrencyRates;
use crate::metrics::Metrics;
use crate::outbound as outgoing;
use crate::platform::halves::{self, Fate, PLATFORM_ANSWER_BYTES, Reply};
use crate::platform::{
    Answer, Attempt, Destination, Kind, MAX_RETRY_MS, MaxAge, Method, Outcome, Paused, Platform,
    Request, Sending, answer_head, outcome_of,
};
use crate::storage::Due;
use crate::storage::Store;

/// What the senders need of the application, handed to them by the layer above: the store,
/// the counters, the clock, the delivery settings and the wake-up a retry by hand rings.
#[derive(Clone)]
pub struct Senders {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    pub settings: Delivery,
    pub wake: Arc<tokio::sync::Notify>,
}

impl Senders {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// The longest a task waits before it looks at the clock again: retries come due with the
/// clock, which commits do not signal.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// After a commit wakes a task, it waits this long, so that the events of the next few commits
/// go out in one batch instead of a read per commit.
const GATHER: Duration = Duration::from_millis(5);
/// After a failure to read or record, a task waits this long before trying again.
const STORE_RETRY: Duration = Duration::from_secs(1);
/// Requests in flight at once, for a platform that is sent each event alone.
const IN_FLIGHT: usize = 32;

/// How much lower than ingest the senders' thread runs (a `nice` value): when the CPU is short,
/// requests and their commits go first and deliveries wait in the file, to be sent when it has
/// time again. The lowest priority a nice value gives (19): ingest on two cores is bound by
/// its commits' flushes, not the CPU, and the senders still send thousands of events a second
/// in the time the flushes leave, while a higher priority took a share of ingest's rate
/// (`BENCHMARKS.md`).
const NICE: i32 = 19;

/// Runs the senders ([`run`]) on a thread of their own, at a lower CPU priority than the
/// server's ([`NICE`]), until this task is dropped (the server stops), which stops the thread
/// and waits for it.
pub async fn run_beside(senders: Senders) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("sender".into())
        .spawn(move || {
            if let Err(e) =
                rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE)
            {
                tracing::warn!(error = %e, "the senders' thread runs at the server's priority");
            }
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "no runtime for the senders of conversions out");
                    return;
                }
            };
            runtime.block_on(async {
                tokio::select! {
                    () = run(senders) => {}
                    _ = stopped => {}
                }
            });
            // Cuts off a DNS lookup still under way rather than waiting for it.
            runtime.shutdown_timeout(Duration::from_secs(1));
            let _ = done.send(());
        });
    let thread = match spawned {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "no thread for the senders of conversions out");
            return;
        }
    };
    let _stop_on_drop = Joined {
        stop: Some(stop),
        thread: Some(thread),
    };
    let _ = finished.await;
}

/// Stops the senders' thread and waits for it, when the task that started it is dropped.
struct Joined {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Joined {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs the senders until the task is dropped (the server stops): every destination task is
/// aborted with it, and what they were sending is sent again after the next start.
async fn run(senders: Senders) {
    let mut changes = senders.store.destination_changes();
    let mut tasks = JoinSet::new();
    let mut running: HashMap<u32, tokio::task::AbortHandle> = HashMap::new();
    loop {
        changes.borrow_and_update();
        let live: HashMap<u32, Arc<Destination>> = senders
            .store
            .destination_directory()
            .all()
            .into_iter()
            .map(|d| (d.no, d))
            .collect();
        running.retain(|no, handle| {
            let keep = live.contains_key(no);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (no, d) in live {
            running
                .entry(no)
                .or_insert_with(|| tasks.spawn(send_loop(senders.clone(), d.space, no)));
        }
        tokio::select! {
            change = changes.changed() => if change.is_err() { return },
            // Reap finished (aborted) tasks so the set does not grow.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// One destination's loop: take what is due, send it, record it. The destination is read from
/// the directory before each batch, so a change (a new token, new settings) applies from the
/// next batch on; while it is paused, the loop waits for a change.
async fn send_loop(senders: Senders, space: u32, no: u32) {
    let client = match outgoing::client(&senders.settings) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(destination = no, error = %e, "no HTTP client for a destination");
            return;
        }
    };
    let mut commits = senders.store.commits();
    let mut edits = senders.store.destination_changes();
    let mut failures = FailureLog::default();
    // When the destination last resumed from a pause, as this task saw it.
    let (mut paused, mut resumed_at_ms) = (false, 0);
    loop {
        commits.borrow_and_update();
        edits.borrow_and_update();
        let Some(d) = senders.store.destination_directory().get(space, no) else {
            return;
        };
        if d.paused.is_some() {
            paused = true;
            if edits.changed().await.is_err() {
                return;
            }
            continue;
        }
        if std::mem::take(&mut paused) {
            resumed_at_ms = senders.now_ms();
        }
        let limit = match d.target.sending() {
            Sending::Alone { batch } | Sending::Together { batch } => batch,
            // A platform that fetches (Google Ads): nothing is ever queued for it to send.
            Sending::Fetched => return,
        };
        let now = senders.now_ms();
        let destination = d.clone();
        // The space's rates with the batch: a change of them applies from the next batch on.
        let due = senders.store.read(move |s| {
            let rates = s.space_settings(space)?.currency_rates;
            Ok((s.due(&destination, now, limit)?, rates))
        });
        let (batch, space_rates) = match due.await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(destination = %d.name, error = %e, "reading due deliveries");
                tokio::time::sleep(STORE_RETRY).await;
                continue;
            }
        };
        if batch.items.is_empty() {
            let wait = batch
                .next_due_ms
                .map_or(IDLE_POLL, |due| {
                    Duration::from_millis(due.saturating_sub(now).max(1))
                })
                .min(IDLE_POLL);
            tokio::select! {
                changed = commits.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    tokio::time::sleep(GATHER).await;
                }
                edited = edits.changed() => if edited.is_err() { return },
                () = senders.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        let (attempts, token_rejected) =
            send(&senders, &client, &d, &space_rates, batch.items).await;
        let at_ms = senders.now_ms();
        failures.note(&d.name, &attempts, at_ms);
        let pause = token_rejected.map(|reason| (Paused { at_ms, reason }, d.clone()));
        let age = MaxAge {
            ms: senders.settings.max_age_ms(),
            floor_ms: resumed_at_ms,
        };
        record(&senders, &d, &attempts, batch.sent_through, age, pause).await;
        for a in &attempts {
            senders.metrics.delivery_outcome(d.target.kind(), a.outcome);
        }
        if let Some(until) = asked_to_wait(&attempts, at_ms)
            && !hold_until(&senders, &mut edits, until).await
        {
            return;
        }
    }
}

/// Records what a batch's `attempts` came to, trying again until the write succeeds: a delivery
/// leaves `pending` or `retrying` only in that write. With `pause`, the destination is paused
/// in it (unless it changed since it was sent with), and the pause is logged once.
async fn record(
    senders: &Senders,
    d: &Destination,
    attempts: &[Attempt],
    sent_through: Option<u64>,
    age: MaxAge,
    pause: Option<(Paused, Arc<Destination>)>,
) {
    loop {
        let (no, recorded, pausing) = (d.no, attempts.to_vec(), pause.clone());
        let written = senders.store.write(move |t| {
            let pause = pausing.as_ref().map(|(p, d)| (p.clone(), &**d));
            t.record_attempts(no, &recorded, sent_through, age, pause)
        });
        match written.await {
            Ok((_, paused_now)) => {
                if let (true, Some((p, _))) = (paused_now, &pause) {
                    tracing::error!(
                        destination = %d.name,
                        space = d.space,
                        error = ?p.reason,
                        "the destination is paused: the remote no longer takes its credential \
                         (or its pixel or API version); its deliveries wait until it is \
                         changed (PATCH /destinations/<name>, tracker destination change, \
                         or the admin page)"
                    );
                }
                break;
            }
            Err(e) => {
                tracing::warn!(destination = %d.name, error = %e, "recording deliveries");
                tokio::time::sleep(STORE_RETRY).await;
            }
        }
    }
}

/// Until when the remote asked the destination to wait, when it asked that of every attempt
/// of a batch (a throttle, a `Retry-After`): the next batch is not sent before that, since it
/// would only be refused too, and a throttled API counts the refused requests against the
/// limit. An answer of another kind (a timeout, a `5xx` without `Retry-After`) holds nothing.
fn asked_to_wait(attempts: &[Attempt], at_ms: u64) -> Option<u64> {
    let mut shortest: Option<u64> = None;
    for a in attempts {
        match a.outcome {
            Outcome::Delivered | Outcome::Held => return None,
            // Refused for good (here, or by the remote): no answer about waiting.
            Outcome::Refused => {}
            Outcome::Failed => {
                // At most what a delivery's own retry honours.
                let wait = a.retry_after_ms?.min(MAX_RETRY_MS);
                shortest = Some(shortest.map_or(wait, |s| s.min(wait)));
            }
        }
    }
    shortest.map(|wait| at_ms.saturating_add(wait))
}

/// Waits until `until` by the senders' clock, or a change of a destination, or a retry by
/// hand; answers `false` when the server is stopping.
async fn hold_until(
    senders: &Senders,
    edits: &mut tokio::sync::watch::Receiver<u64>,
    until: u64,
) -> bool {
    loop {
        let now = senders.now_ms();
        if now >= until {
            return true;
        }
        tokio::select! {
            edited = edits.changed() => return edited.is_ok(),
            () = senders.wake.notified() => return true,
            () = tokio::time::sleep(Duration::from_millis(until - now).min(IDLE_POLL)) => {}
        }
    }
}

/// How often a destination's failures are logged at most: one WARN a minute, with how many
/// there were since the last one and the last error, so a destination that is down for a day
/// leaves a readable log.
const WARN_EVERY_MS: u64 = 60_000;

/// One destination's failures since its last WARN.
#[derive(Default)]
struct FailureLog {
    warned_at_ms: Option<u64>,
    failed: u64,
    last_error: String,
}

impl FailureLog {
    fn note(&mut self, name: &str, attempts: &[Attempt], now_ms: u64) {
        // A held delivery is not a failure of its own: the pause is logged once, as an ERROR.
        for a in attempts
            .iter()
            .filter(|a| !matches!(a.outcome, Outcome::Delivered | Outcome::Held))
        {
            self.failed += 1;
            self.last_error.clone_from(&a.answer);
        }
        let due = self
            .warned_at_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= WARN_EVERY_MS);
        if self.failed > 0 && due {
            tracing::warn!(
                destination = %name,
                failed = self.failed,
                // Debug: quoted, its control characters escaped, so a remote answer cannot
                // write escape sequences into the log.
                last_error = ?self.last_error,
                "deliveries failed"
            );
            self.warned_at_ms = Some(now_ms);
            self.failed = 0;
        }
    }
}

/// A random number in 0..1, for the retries' jitter.
fn jitter() -> f64 {
    #[allow(clippy::cast_precision_loss)]
    getrandom::u64().map_or(0.5, |n| (n >> 11) as f64 / (1u64 << 53) as f64)
}

fn attempt(due: &Due, at_ms: u64, answered: &outgoing::Answered) -> Attempt {
    Attempt {
        inbox_id: due.inbox_id,
        at_ms,
        status: answered.status,
        answer: answer_head(&crate::domain::credential::redact(&answered.answer)),
        outcome: answered.status.map_or(Outcome::Failed, outcome_of),
        retry_after_ms: answered.retry_after_ms,
        jitter: jitter(),
    }
}

/// An attempt that never left: refused here for good.
fn refused(due: &Due, at_ms: u64, why: &str) -> Attempt {
    Attempt {
        inbox_id: due.inbox_id,
        at_ms,
        status: None,
        answer: answer_head(&crate::domain::credential::redact(why)),
        outcome: Outcome::Refused,
        retry_after_ms: None,
        jitter: 0.5,
    }
}

/// Sends one batch of a destination in a space with `space_rates`; answers an attempt for each
/// delivery, and the platform's message when the destination's access token no longer works.
async fn send(
    senders: &Senders,
    client: &reqwest::Client,
    d: &Destination,
    space_rates: &CurrencyRates,
    items: Vec<Due>,
) -> (Vec<Attempt>, Option<String>) {
    let allow_private = senders.settings.allow_private_destinations;
    let platform = d.target.platform();
    let kind = d.target.kind();
    let (mut attempts, token_rejected) = match d.target.sending() {
        Sending::Together { .. } => send_together(senders, client, d, space_rates, &items).await,
        Sending::Alone { .. } => {
            let attempts = futures_util::stream::iter(items)
                .map(|due| async move {
                    let request = platform.request_alone(
                        &due.event,
                        due.click_query.as_deref(),
                        senders.now_ms(),
                    );
                    let answered = match request {
                        None => refused_answer("this destination sends no event alone"),
                        Some(request) => {
                            match outgoing::check_before_send(&request.url, allow_private) {
                                Err(why) => refused_answer(&why),
                                Ok(url) => {
                                    timed(senders, kind, http_request(client, url, request)).await
                                }
                            }
                        }
                    };
                    finish(senders, &due, &answered)
                })
                .buffer_unordered(IN_FLIGHT)
                .collect::<Vec<_>>()
                .await;
            (attempts, None)
        }
        // Never queued (`Destination::wants`): the platform fetches.
        Sending::Fetched => (Vec::new(), None),
    };
    // What is kept of an answer (shown, logged) never holds the token, which a platform may
    // quote.
    let token = d.target.platform_token();
    if !token.is_empty() {
        for a in &mut attempts {
            a.answer = cut_secret(&a.answer, token);
        }
    }
    (attempts, token_rejected.map(|m| cut_secret(&m, token)))
}

/// An answer and what the destination's platform makes of it, as the search by halves reads
/// it.
#[derive(Clone)]
struct Read {
    answered: outgoing::Answered,
    meaning: Answer,
}

impl Read {
    /// What `answered` means by `platform`: refused here (a private address) counts as a
    /// refusal of all, no answer as worth another try.
    fn of(answered: outgoing::Answered, platform: &dyn Platform) -> Read {
        let meaning = if answered.refused_here {
            Answer::Refused {
                named: Vec::new(),
                message: answered.answer.clone(),
            }
        } else {
            match answered.status {
                None => Answer::Retry { after_ms: None },
                Some(status) => platform.judge(status, &answered.body),
            }
        };
        Read { answered, meaning }
    }
}

impl Reply for Read {
    fn meaning(&self) -> Answer {
        self.meaning.clone()
    }

    fn with_message(&self, message: &str) -> Self {
        Read {
            answered: outgoing::Answered {
                answer: answer_head(message),
                ..self.answered.clone()
            },
            meaning: self.meaning.clone(),
        }
    }
}

/// Sends one batch to a platform that takes events together: the events it could not take
/// are refused here, the rest go in requests ([`halves::send_batch`]) until each is taken,
/// refused or to be retried. Answers an attempt for each delivery, and the platform's message
/// when the destination's access token no longer works.
async fn send_together(
    senders: &Senders,
    client: &reqwest::Client,
    d: &Destination,
    space_rates: &CurrencyRates,
    items: &[Due],
) -> (Vec<Attempt>, Option<String>) {
    let platform = d.target.platform();
    let kind = d.target.kind();
    let now = senders.now_ms();
    let mut attempts = Vec::with_capacity(items.len());
    let mut data = Vec::new();
    let mut in_request = Vec::new();
    for due in items {
        match platform.entry(&due.event, due.hints.as_ref(), space_rates, now) {
            Ok(e) => {
                data.push(e);
                in_request.push(due);
            }
            Err(why) => attempts.push(refused(due, now, &why)),
        }
    }
    if data.is_empty() {
        return (attempts, None);
    }
    let allow_private = senders.settings.allow_private_destinations;
    // Every request of the batch goes to the same address: checked once.
    let checked = platform
        .request_of(&[], None)
        .ok_or_else(|| "this destination sends no events together".to_owned())
        .and_then(|r| outgoing::check_before_send(&r.url, allow_private));
    let url = match checked {
        Ok(url) => url,
        Err(why) => {
            let answered = refused_answer(&why);
            attempts.extend(in_request.iter().map(|due| finish(senders, due, &answered)));
            return (attempts, None);
        }
    };
    let fates = halves::send_batch(&data, |entries| {
        let request = platform
            .request_of(&entries, None)
            .map(|r| http_request(client, url.clone(), r));
        async move {
            let started = Instant::now();
            let answered = match request {
                Some(request) => {
                    outgoing::exchange_reading(request, senders.now_ms(), PLATFORM_ANSWER_BYTES)
                        .await
                }
                None => refused_answer("this destination sends no events together"),
            };
            senders.metrics.delivery_latency(kind, started.elapsed());
            Read::of(answered, platform)
        }
    })
    .await;
    let at = senders.now_ms();
    let mut token_rejected = None;
    for (due, fate) in in_request.into_iter().zip(fates) {
        attempts.push(match fate {
            Fate::Delivered(read) => Attempt {
                outcome: Outcome::Delivered,
                ..attempt(due, at, &read.answered)
            },
            Fate::Refused(read) => Attempt {
                outcome: Outcome::Refused,
                ..attempt(due, at, &read.answered)
            },
            Fate::Retry(read, after_ms) => Attempt {
                outcome: Outcome::Failed,
                retry_after_ms: read.answered.retry_after_ms.max(after_ms),
                ..attempt(due, at, &read.answered)
            },
            // Held until the destination, paused by this answer, is given a new token.
            Fate::TokenRejected(read) => {
                token_rejected = Some(read.answered.answer.clone());
                Attempt {
                    outcome: Outcome::Held,
                    ..attempt(due, at, &read.answered)
                }
            }
        });
    }
    (attempts, token_rejected)
}

fn finish(senders: &Senders, due: &Due, answered: &outgoing::Answered) -> Attempt {
    let mut a = attempt(due, senders.now_ms(), answered);
    if answered.refused_here {
        a.outcome = Outcome::Refused;
    }
    a
}

fn refused_answer(why: &str) -> outgoing::Answered {
    outgoing::Answered {
        status: None,
        answer: answer_head(&format!("not sent: {why}")),
        body: String::new(),
        retry_after_ms: None,
        took: Duration::ZERO,
        refused_here: true,
    }
}

/// A platform's `request`, to its checked address `url`, for the senders' HTTP client.
fn http_request(
    client: &reqwest::Client,
    url: reqwest::Url,
    request: Request,
) -> reqwest::RequestBuilder {
    let mut builder = match request.method {
        Method::Get => client.get(url),
        Method::Post => client.post(url),
    };
    for (name, value) in request.headers {
        builder = builder.header(name, value);
    }
    if request.method == Method::Post {
        builder = builder.body(request.body);
    }
    builder
}

/// Sends `request`, counting its latency.
async fn timed(
    senders: &Senders,
    kind: Kind,
    request: reqwest::RequestBuilder,
) -> outgoing::Answered {
    let started = Instant::now();
    let answered = outgoing::exchange(request, senders.now_ms()).await;
    senders.metrics.delivery_latency(kind, started.elapsed());
    answered
}

/// What `POST /destinations/<name>/test` answers: what the remote answered to one synthetic
/// event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tested {
    pub destination: String,
    /// Whether the remote took it (a `2xx`).
    pub delivered: bool,
    /// The answer's HTTP status; `null` when none came.
    pub status: Option<u16>,
    /// The first 300 bytes of the answer, or what went wrong.
    pub answer: String,
}

/// Sends a destination one synthetic event (`platform::test_event`), a new one each time, and
/// answers what came back; to an ad platform with `test_code` (the caller has checked there is
/// one), so it shows only in the platform's test view. Nothing is recorded.
pub async fn test(senders: &Senders, d: &Destination, test_code: Option<String>) -> Tested {
    let allow_private = senders.settings.allow_private_destinations;
    let now = senders.now_ms();
    // A new `event_id` each time, so a receiver that deduplicates never drops the next one.
    let event = crate::platform::test_event(now);
    let platform = d.target.platform();
    let request = match d.target.sending() {
        Sending::Together { .. } => {
            // The test event is in an ISO 4217 currency: it needs no rate.
            let no_rates = CurrencyRates::default();
            let data: Vec<_> = platform
                .entry(&event, None, &no_rates, now)
                .into_iter()
                .collect();
            platform.request_of(&data, test_code.as_deref())
        }
        Sending::Alone { .. } => platform.request_alone(&event, None, now),
        // Refused before it is sent: a test of Google Ads is answered `409` above.
        Sending::Fetched => None,
    };
    let answered = match outgoing::client(&senders.settings) {
        Err(e) => refused_answer(&e.to_string()),
        Ok(client) => {
            let url = request.as_ref().map_or("", |r| r.url.as_str());
            match outgoing::check_before_send(url, allow_private) {
                Err(why) => refused_answer(&why),
                Ok(url) => match request {
                    Some(request) => {
                        outgoing::exchange(http_request(&client, url, request), now).await
                    }
                    None => refused_answer("this destination is sent nothing"),
                },
            }
        }
    };
    Tested {
        destination: d.name.clone(),
        delivered: answered
            .status
            .is_some_and(|s| platform.took(s, &answered.body)),
        status: answered.status,
        answer: cut_secret(&answered.answer, d.target.platform_token()),
    }
}
