//! Operational metrics (`docs/api.md#metrics`): counted with plain atomics where they happen,
//! written out in the Prometheus text format by `prometheus-client` only when `/metrics` is
//! scraped, on a listener of their own (`metrics_listen`, off by default), never the public one.
//!
//! Why not the crate's own `Family` and `Histogram` types: a family looks its label set up in a
//! locked map, and a histogram takes a lock per observation. Here every label set is known at
//! start (a fixed list of routes and of status codes), so each series is an atomic in an array,
//! the hot path never locks or allocates, and cardinality is bounded by construction. The crate
//! does what it is good at: the exposition format, through a [`Collector`].

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// The HTTP statuses the tracker answers, each its own series; any other is counted as `other`.
const STATUSES: [u16; 20] = [
    200, 201, 204, 302, 303, 304, 400, 401, 403, 404, 405, 409, 410, 413, 414, 422, 429, 431, 500,
    503,
];
const STATUS_SLOTS: usize = STATUSES.len() + 1;

fn status_slot(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|&s| s == status)
        .unwrap_or(STATUSES.len())
}

/// A histogram of atomics: a count per bucket (not cumulative; summed at scrape), the count and
/// the sum, in integer units (`scale` of them make one of the exposed unit).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    scale: f64,
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
}

/// Request latency bounds in microseconds: 0.5 ms to 10 s.
const LATENCY_US: &[u64] = &[
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];
/// Requests in one write transaction (the writer takes at most 4096).
const BATCH_SIZES: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

impl Histogram {
    #[must_use]
    pub fn new(bounds: &'static [u64], scale: f64) -> Histogram {
        Histogram {
            bounds,
            scale,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Durations in seconds, kept in microseconds.
    #[must_use]
    pub fn seconds() -> Histogram {
        Histogram::new(LATENCY_US, 1e6)
    }

    /// Writer batches: how many requests each transaction served.
    #[must_use]
    pub fn batch_sizes() -> Histogram {
        Histogram::new(BATCH_SIZES, 1.0)
    }

    pub fn observe(&self, value: u64) {
        let slot = self
            .bounds
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(self.bounds.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    #[must_use]
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    #[allow(clippy::cast_precision_loss)]
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> std::fmt::Result {
        // Each bucket's own count: the encoder sums them into the cumulative `le` buckets.
        let mut count = 0;
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (i, bucket) in self.buckets.iter().enumerate() {
            let n = bucket.load(Ordering::Relaxed);
            count += n;
            let bound = self
                .bounds
                .get(i)
                .map_or(f64::INFINITY, |&b| b as f64 / self.scale);
            buckets.push((bound, n));
        }
        // The count is the buckets' total, so a scrape between two increments stays consistent.
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.sum.load(Ordering::Relaxed) as f64 / self.scale,
            count,
            &buckets,
            None,
        )
    }
}

/// What the writer thread counts (`storage::commit`); the store shares it with the metrics.
#[derive(Debug)]
pub struct WriterMetrics {
    /// Requests handed to the writer and not yet taken into a batch.
    pub queued: AtomicI64,
    pub batch_size: Histogram,
    pub commit_seconds: Histogram,
    /// Deliveries in each state (`destination::State as usize`), over every destination, as of
    /// the last commit.
    delivery_states: [AtomicI64; 5],
    /// Destinations paused because their credential is no longer taken.
    paused_destinations: AtomicI64,
    /// Look-ups of the dedup table, and the runs they read that did not hold the key (the
    /// filter's wrong "maybe"s), as of the last commit.
    dedup_lookups: AtomicU64,
    dedup_wrong_maybes: AtomicU64,
}

impl Default for WriterMetrics {
    fn default() -> Self {
        WriterMetrics {
            queued: AtomicI64::new(0),
            batch_size: Histogram::batch_sizes(),
            commit_seconds: Histogram::seconds(),
            delivery_states: std::array::from_fn(|_| AtomicI64::new(0)),
            paused_destinations: AtomicI64::new(0),
            dedup_lookups: AtomicU64::new(0),
            dedup_wrong_maybes: AtomicU64::new(0),
        }
    }
}

impl WriterMetrics {
    /// The totals as the data file holds them, when it is opened.
    pub fn set_delivery_states(&self, totals: [u64; 5]) {
        for (slot, n) in self.delivery_states.iter().zip(totals) {
            slot.store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
        }
    }

    /// A committed batch moved deliveries between states.
    pub fn moved_deliveries(&self, moved: &[i64; 5]) {
        for (slot, n) in self.delivery_states.iter().zip(moved) {
            if *n != 0 {
                slot.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }

    /// How many live destinations are paused, whenever the destinations are read.
    pub fn set_paused_destinations(&self, paused: usize) {
        self.paused_destinations
            .store(i64::try_from(paused).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// The dedup look-ups so far and the runs they read in vain, after a commit.
    pub fn set_dedup_lookups(&self, (lookups, wrong_maybes): (u64, u64)) {
        self.dedup_lookups.store(lookups, Ordering::Relaxed);
        self.dedup_wrong_maybes
            .store(wrong_maybes, Ordering::Relaxed);
    }

    /// Deliveries in each state, as of the last commit.
    #[must_use]
    pub fn delivery_states(&self) -> [i64; 5] {
        std::array::from_fn(|i| self.delivery_states[i].load(Ordering::Relaxed))
    }
}

/// How an event request ended: the label `status` of `tracker_events`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStatus {
    Queued,
    Duplicate,
    /// Authenticated, and refused (invalid input, a storage failure).
    Rejected,
}

/// Every series the tracker counts, but the writer's.
#[derive(Debug)]
pub struct Metrics {
    /// The requests of each route, named when the server starts ([`Metrics::name_routes`]).
    routes: OnceLock<Routes>,
    events: [AtomicU64; 3],
    clicks: AtomicU64,
    /// Dedup entries removed by retention.
    dedup_pruned: AtomicU64,
    /// Scheduled backups: written, failed.
    backups: [AtomicU64; 2],
    /// Uploads of scheduled backups to `[backup_s3]`: how they went, and the last of each.
    uploads: Uploads,
    /// Delivery attempts by destination kind (`destination::Kind as usize - 1`) and outcome
    /// (delivered, failed, refused).
    deliveries: [[AtomicU64; 3]; crate::platform::Kind::ALL.len()],
    /// Send latency of deliveries, by destination kind.
    delivery_seconds: [Histogram; crate::platform::Kind::ALL.len()],
    /// Telegram channels, by [`TELEGRAM_COUNTS`].
    telegram: [AtomicU64; TELEGRAM_COUNTS.len()],
    /// Each channel link's invite links by [`CHANNEL_INVITE_STATES`], as the pool's loop last
    /// read them (by slug).
    channel_invites: std::sync::Mutex<std::collections::BTreeMap<String, [u64; 3]>>,
    /// Fetches of spend from Meta, by [`COSTS_FETCH_RESULTS`].
    costs_fetch: [AtomicU64; COSTS_FETCH_RESULTS.len()],
    /// The bots and channels the health checks watch, by [`TARGET_STATES`], as of the last
    /// round of checks.
    link_targets: [AtomicU64; TARGET_STATES.len()],
}

/// What `tracker_link_targets` gives, by its `state` label: watched bots and channels that
/// pass their checks, and those held down (two failed checks in a row).
pub const TARGET_STATES: [&str; 2] = ["up", "down"];

/// What `tracker_channel_invites` gives per channel link, by its `state` label: invite links in
/// the pool (ready to hand out), handed out, and used to join.
pub const CHANNEL_INVITE_STATES: [&str; 3] = ["pool", "handed_out", "used"];

/// What `tracker_costs_fetch` counts (`docs/costs.md`), by its `result` label: fetches of spend
/// from Meta that replaced the days' costs, that failed, and that found the token refused
/// (which pauses fetching until a new one is set).
pub const COSTS_FETCH_RESULTS: [&str; 3] = ["ok", "failed", "token_refused"];

/// What `tracker_telegram` counts (`docs/channels.md`), by its `what` label: joins through the
/// tracker's invite links and through anything else, leaves, join requests, invite links made,
/// visits of channel links sent to the fallback (an empty pool), and failed Bot API calls.
pub const TELEGRAM_COUNTS: [&str; 7] = [
    "joins",
    "unattributed_joins",
    "leaves",
    "join_requests",
    "invites_made",
    "fallback_visits",
    "bot_api_errors",
];

/// The counters of every route, by the route's index in the router's table.
#[derive(Debug)]
struct Routes {
    /// The `route` label of each index, `other` last.
    labels: Vec<String>,
    requests: Box<[[AtomicU64; STATUS_SLOTS]]>,
    latency: Box<[Histogram]>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            routes: OnceLock::new(),
            events: std::array::from_fn(|_| AtomicU64::new(0)),
            clicks: AtomicU64::new(0),
            dedup_pruned: AtomicU64::new(0),
            backups: std::array::from_fn(|_| AtomicU64::new(0)),
            uploads: Uploads::default(),
            deliveries: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            delivery_seconds: std::array::from_fn(|_| Histogram::seconds()),
            telegram: std::array::from_fn(|_| AtomicU64::new(0)),
            channel_invites: std::sync::Mutex::default(),
            costs_fetch: std::array::from_fn(|_| AtomicU64::new(0)),
            link_targets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Metrics {
    /// Names the routes requests are counted under, by index: the router hands its table's
    /// labels over when the server starts (the router sits above this layer). The first call
    /// names them; a later one changes nothing.
    pub fn name_routes(&self, labels: Vec<String>) {
        self.routes.get_or_init(|| Routes {
            requests: labels
                .iter()
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            latency: labels.iter().map(|_| Histogram::seconds()).collect(),
            labels,
        });
    }

    /// One answered request of route `r` (the router's index); not counted before the routes
    /// are named, or for an index they do not have.
    pub fn request(&self, r: usize, status: u16, took: Duration) {
        let Some(routes) = self.routes.get() else {
            return;
        };
        if let (Some(counts), Some(latency)) = (routes.requests.get(r), routes.latency.get(r)) {
            counts[status_slot(status)].fetch_add(1, Ordering::Relaxed);
            latency.observe_duration(took);
        }
    }

    pub fn event(&self, status: EventStatus) {
        self.events[status as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A new click was stored (a back-fill that created one, a tracking-link visit).
    pub fn click(&self) {
        self.clicks.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fetch of spend from Meta that came to `result` (one of
    /// [`COSTS_FETCH_RESULTS`]).
    pub fn costs_fetch(&self, result: &str) {
        if let Some(i) = COSTS_FETCH_RESULTS.iter().position(|r| *r == result) {
            self.costs_fetch[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds `n` to the Telegram count `what` (one of [`TELEGRAM_COUNTS`]).
    pub fn telegram(&self, what: &str, n: u64) {
        if let Some(i) = TELEGRAM_COUNTS.iter().position(|w| *w == what) {
            self.telegram[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The watched targets up and down ([`TARGET_STATES`]), after a round of health checks.
    pub fn set_link_targets(&self, up: u64, down: u64) {
        self.link_targets[0].store(up, Ordering::Relaxed);
        self.link_targets[1].store(down, Ordering::Relaxed);
    }

    /// Each channel link's invite links (by slug) by [`CHANNEL_INVITE_STATES`], replacing what
    /// was there: a link no longer given is no longer shown.
    pub fn channel_invites(&self, links: std::collections::BTreeMap<String, [u64; 3]>) {
        *self
            .channel_invites
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = links;
    }

    /// Retention removed `entries` expired dedup entries.
    pub fn pruned(&self, entries: u64) {
        self.dedup_pruned.fetch_add(entries, Ordering::Relaxed);
    }

    /// A scheduled backup was written (`true`) or failed.
    pub fn backup(&self, written: bool) {
        self.backups[usize::from(!written)].fetch_add(1, Ordering::Relaxed);
    }

    /// A scheduled backup was uploaded to `[backup_s3]` at `now_ms`.
    pub fn backup_uploaded(&self, now_ms: u64) {
        self.uploads.counts[0].fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .uploads
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        last.success_ms = Some(now_ms);
    }

    /// At start, the newest scheduled backup already in the bucket, made at `at_ms`: the last
    /// success until this process uploads one, so that an alert on the age of the last upload
    /// holds across a restart instead of going quiet until the first upload works.
    pub fn backup_found_uploaded(&self, at_ms: u64) {
        let mut last = self
            .uploads
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.success_ms.is_none() {
            last.success_ms = Some(at_ms);
        }
    }

    /// A scheduled backup's upload failed at `now_ms`, for the reason `error`.
    pub fn backup_upload_failed(&self, now_ms: u64, error: String) {
        self.uploads.counts[1].fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .uploads
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        last.failure = Some((now_ms, error));
    }

    /// The last upload that worked and the last that failed, as the admin page shows them.
    #[must_use]
    pub fn backup_uploads(&self) -> LastUploads {
        self.uploads
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One delivery attempt to a destination of `kind` ended with `outcome`.
    pub fn delivery_outcome(&self, kind: crate::platform::Kind, outcome: crate::platform::Outcome) {
        use crate::platform::Outcome;
        let slot = match outcome {
            Outcome::Delivered => 0,
            Outcome::Failed | Outcome::Held => 1,
            Outcome::Refused => 2,
        };
        self.deliveries[kind as usize - 1][slot].fetch_add(1, Ordering::Relaxed);
    }

    /// One request to a destination of `kind` took `took` (a Meta request carries many
    /// deliveries).
    pub fn delivery_latency(&self, kind: crate::platform::Kind, took: Duration) {
        self.delivery_seconds[kind as usize - 1].observe_duration(took);
    }
}

/// Uploads of scheduled backups: counted by outcome (uploaded, failed), and the last of each.
#[derive(Debug, Default)]
struct Uploads {
    counts: [AtomicU64; 2],
    last: Mutex<LastUploads>,
}

/// The last upload of a scheduled backup that worked, and the last that failed with its reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastUploads {
    pub success_ms: Option<u64>,
    pub failure: Option<(u64, String)>,
}

/// What one scrape reads: the counters, the writer's, and the data file's size.
#[derive(Debug)]
struct Scrape {
    metrics: Arc<Metrics>,
    writer: Arc<WriterMetrics>,
    /// `None` for an ephemeral store: there is no file.
    data: Option<DataFile>,
}

/// The data file, as a scrape reads it.
#[derive(Debug)]
pub struct DataFile {
    pub path: PathBuf,
    /// Bytes read from the file since the process started (storage counts them).
    pub bytes_read: fn() -> u64,
}

fn labels<const N: usize>(
    pairs: [(&'static str, Cow<'static, str>); N],
) -> [(&'static str, Cow<'static, str>); N] {
    pairs
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let m = &self.metrics;
        let (labels_of, requests_of, latency_of) =
            m.routes.get().map_or((&[][..], &[][..], &[][..]), |r| {
                (&r.labels[..], &r.requests[..], &r.latency[..])
            });
        let mut requests = encoder.encode_descriptor(
            "tracker_http_requests",
            "HTTP requests answered, by route and status code.",
            None,
            MetricType::Counter,
        )?;
        for (route, counts) in labels_of.iter().zip(requests_of) {
            for (slot, count) in counts.iter().enumerate() {
                let n = count.load(Ordering::Relaxed);
                if n == 0 {
                    continue;
                }
                let status = STATUSES
                    .get(slot)
                    .map_or(Cow::Borrowed("other"), |s| Cow::Owned(s.to_string()));
                let set = labels([("route", Cow::Owned(route.clone())), ("status", status)]);
                ConstCounter::new(n).encode(requests.encode_family(&set)?)?;
            }
        }
        let mut latency = encoder.encode_descriptor(
            "tracker_http_request_duration",
            "Time from a request's head to its answer, by route.",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (route, histogram) in labels_of.iter().zip(latency_of) {
            if histogram.count() == 0 {
                continue;
            }
            let set = labels([("route", Cow::Owned(route.clone()))]);
            histogram.encode(latency.encode_family(&set)?)?;
        }
        let mut events = encoder.encode_descriptor(
            "tracker_events",
            "Event requests (POST /events, GET /e) by outcome: queued (new, stored), duplicate, \
             or rejected (authenticated and refused). Dry runs are not counted.",
            None,
            MetricType::Counter,
        )?;
        for (name, count) in ["queued", "duplicate", "rejected"].iter().zip(&m.events) {
            let set = labels([("status", Cow::Borrowed(*name))]);
            ConstCounter::new(count.load(Ordering::Relaxed)).encode(events.encode_family(&set)?)?;
        }
        ConstCounter::new(m.clicks.load(Ordering::Relaxed)).encode(encoder.encode_descriptor(
            "tracker_clicks",
            "New clicks stored: back-fills that created one, and tracking-link visits.",
            None,
            MetricType::Counter,
        )?)?;
        encode_background(m, &mut encoder)?;
        encode_deliveries(m, &self.writer, &mut encoder)?;
        encode_telegram(m, &mut encoder)?;
        encode_costs_fetch(m, &mut encoder)?;
        let w = &self.writer;
        w.batch_size.encode(encoder.encode_descriptor(
            "tracker_writer_batch_size",
            "Requests committed by one write transaction (group commit).",
            None,
            MetricType::Histogram,
        )?)?;
        w.commit_seconds.encode(encoder.encode_descriptor(
            "tracker_writer_commit_duration",
            "Time of one write transaction, from its start to its commit with fsync.",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?)?;
        encode_dedup_lookups(w, &mut encoder)?;
        ConstGauge::new(w.queued.load(Ordering::Relaxed).max(0)).encode(
            encoder.encode_descriptor(
                "tracker_writer_queue_depth",
                "Write requests waiting for the writer.",
                None,
                MetricType::Gauge,
            )?,
        )?;
        if let Some(data) = &self.data {
            ConstCounter::new((data.bytes_read)()).encode(encoder.encode_descriptor(
                "tracker_data_file_read",
                "Bytes read from the data file: the pages redb's cache did not hold.",
                Some(&Unit::Bytes),
                MetricType::Counter,
            )?)?;
            let bytes = std::fs::metadata(&data.path).map_or(0, |m| m.len());
            ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX)).encode(
                encoder.encode_descriptor(
                    "tracker_data_file_size",
                    "Size of the data file.",
                    Some(&Unit::Bytes),
                    MetricType::Gauge,
                )?,
            )?;
        }
        Ok(())
    }
}

/// The writer's look-ups of the dedup table and the runs they read in vain.
fn encode_dedup_lookups(w: &WriterMetrics, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    ConstCounter::new(w.dedup_lookups.load(Ordering::Relaxed)).encode(
        encoder.encode_descriptor(
            "tracker_dedup_lookups",
            "New events' dedup keys looked up in the dedup table (the filter said the table \
         may hold them, or not).",
            None,
            MetricType::Counter,
        )?,
    )?;
    ConstCounter::new(w.dedup_wrong_maybes.load(Ordering::Relaxed)).encode(
        encoder.encode_descriptor(
            "tracker_dedup_wrong_maybe_reads",
            "Runs of the dedup table read for a key they did not hold: the filter's wrong \
         \"maybe\"s. Merging keeps them below 0.1 per look-up.",
            None,
            MetricType::Counter,
        )?,
    )?;
    Ok(())
}

/// What the server does in the background: retention and scheduled backups.
fn encode_background(m: &Metrics, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    ConstCounter::new(m.dedup_pruned.load(Ordering::Relaxed)).encode(
        encoder.encode_descriptor(
            "tracker_dedup_entries_pruned",
            "Dedup entries removed by retention: windowed ones that can never match again.",
            None,
            MetricType::Counter,
        )?,
    )?;
    let mut backups = encoder.encode_descriptor(
        "tracker_scheduled_backups",
        "Scheduled backups (backup_dir, backup_every) by outcome: written or failed.",
        None,
        MetricType::Counter,
    )?;
    for (name, count) in ["written", "failed"].iter().zip(&m.backups) {
        let set = labels([("status", Cow::Borrowed(*name))]);
        ConstCounter::new(count.load(Ordering::Relaxed)).encode(backups.encode_family(&set)?)?;
    }
    let mut uploads = encoder.encode_descriptor(
        "tracker_backup_uploads",
        "Uploads of scheduled backups to [backup_s3] by outcome: uploaded or failed.",
        None,
        MetricType::Counter,
    )?;
    for (name, count) in ["uploaded", "failed"].iter().zip(&m.uploads.counts) {
        let set = labels([("outcome", Cow::Borrowed(*name))]);
        ConstCounter::new(count.load(Ordering::Relaxed)).encode(uploads.encode_family(&set)?)?;
    }
    // Only once one has worked: a 0 would read as an upload in 1970.
    if let Some(ms) = m.backup_uploads().success_ms {
        #[allow(clippy::cast_precision_loss)]
        let seconds = ms as f64 / 1000.0;
        ConstGauge::new(seconds).encode(encoder.encode_descriptor(
            "tracker_backup_upload_last_success_timestamp",
            "When the last upload of a scheduled backup to [backup_s3] completed (at start, the \
             time of the newest backup in the bucket), in seconds since 1970.",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?)?;
    }
    Ok(())
}

/// Telegram channels: [`TELEGRAM_COUNTS`].
fn encode_telegram(m: &Metrics, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let mut telegram = encoder.encode_descriptor(
        "tracker_telegram",
        "Telegram channels: joins through the tracker's invite links and unattributed ones, \
         leaves, join requests, invite links made, visits sent to the fallback (an empty \
         pool), and failed Bot API calls.",
        None,
        MetricType::Counter,
    )?;
    for (what, count) in TELEGRAM_COUNTS.iter().zip(&m.telegram) {
        let set = labels([("what", Cow::Borrowed(*what))]);
        ConstCounter::new(count.load(Ordering::Relaxed)).encode(telegram.encode_family(&set)?)?;
    }
    let links = m
        .channel_invites
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut invites = encoder.encode_descriptor(
        "tracker_channel_invites",
        "Each channel link's invite links: in its pool (ready), handed out to visitors, and \
         used to join; as the pool's loop last read them (about every second).",
        None,
        MetricType::Gauge,
    )?;
    for (slug, counts) in &links {
        for (state, n) in CHANNEL_INVITE_STATES.iter().zip(counts) {
            let set = labels([
                ("link", Cow::Owned(slug.clone())),
                ("state", Cow::Borrowed(*state)),
            ]);
            ConstGauge::new(i64::try_from(*n).unwrap_or(i64::MAX))
                .encode(invites.encode_family(&set)?)?;
        }
    }
    let mut targets = encoder.encode_descriptor(
        "tracker_link_targets",
        "Bots and channels the health checks watch: up (passing) and down (two failed checks \
         in a row: no visits until one passes), as of the last round of checks.",
        None,
        MetricType::Gauge,
    )?;
    for (state, n) in TARGET_STATES.iter().zip(&m.link_targets) {
        let set = labels([("state", Cow::Borrowed(*state))]);
        ConstGauge::new(i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX))
            .encode(targets.encode_family(&set)?)?;
    }
    Ok(())
}

/// Fetches of spend from Meta: [`COSTS_FETCH_RESULTS`].
fn encode_costs_fetch(m: &Metrics, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let mut fetches = encoder.encode_descriptor(
        "tracker_costs_fetch",
        "Fetches of spend from Meta's insights into costs, by result: ok, failed, and \
         token_refused (fetching paused until a new meta_ads_token).",
        None,
        MetricType::Counter,
    )?;
    for (result, count) in COSTS_FETCH_RESULTS.iter().zip(&m.costs_fetch) {
        let set = labels([("result", Cow::Borrowed(*result))]);
        ConstCounter::new(count.load(Ordering::Relaxed)).encode(fetches.encode_family(&set)?)?;
    }
    Ok(())
}

/// Conversions out: attempts by kind and outcome, the queue by state, send latency.
fn encode_deliveries(
    m: &Metrics,
    w: &WriterMetrics,
    encoder: &mut DescriptorEncoder,
) -> std::fmt::Result {
    use crate::platform::{Kind, State};
    let mut attempts = encoder.encode_descriptor(
        "tracker_deliveries",
        "Delivery attempts by destination kind and outcome: delivered (2xx), failed (tried \
         again later) or refused (dead: a permanent refusal, or not sendable).",
        None,
        MetricType::Counter,
    )?;
    for kind in Kind::ALL {
        for (outcome, count) in ["delivered", "failed", "refused"]
            .iter()
            .zip(&m.deliveries[kind as usize - 1])
        {
            let set = labels([
                ("kind", Cow::Borrowed(kind.as_str())),
                ("outcome", Cow::Borrowed(*outcome)),
            ]);
            ConstCounter::new(count.load(Ordering::Relaxed))
                .encode(attempts.encode_family(&set)?)?;
        }
    }
    let mut queue = encoder.encode_descriptor(
        "tracker_deliveries_by_state",
        "Deliveries of every destination in each state, as of the last commit.",
        None,
        MetricType::Gauge,
    )?;
    for (state, n) in State::ALL.iter().zip(w.delivery_states()) {
        let set = labels([("state", Cow::Borrowed(state.as_str()))]);
        ConstGauge::new(n.max(0)).encode(queue.encode_family(&set)?)?;
    }
    ConstGauge::new(w.paused_destinations.load(Ordering::Relaxed).max(0)).encode(
        encoder.encode_descriptor(
            "tracker_destinations_paused",
            "Destinations paused because the remote no longer takes their credential (Meta's \
             access token): their deliveries wait until a new one is given.",
            None,
            MetricType::Gauge,
        )?,
    )?;
    let mut latency = encoder.encode_descriptor(
        "tracker_delivery_duration",
        "Time of one request to a destination, by kind.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for kind in Kind::ALL {
        let histogram = &m.delivery_seconds[kind as usize - 1];
        if histogram.count() == 0 {
            continue;
        }
        let set = labels([("kind", Cow::Borrowed(kind.as_str()))]);
        histogram.encode(latency.encode_family(&set)?)?;
    }
    Ok(())
}

/// The registry a scrape encodes.
#[must_use]
pub fn registry(
    metrics: Arc<Metrics>,
    writer: Arc<WriterMetrics>,
    data: Option<DataFile>,
) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        metrics,
        writer,
        data,
    }));
    registry
}

/// The text of one scrape, in the `OpenMetrics` text format (what Prometheus asks for first; it
/// reads the plain Prometheus text format too).
#[must_use]
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::error!(error = %e, "encoding the metrics");
    }
    out
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
