//! The commit loop: one OS thread that owns every redb write transaction, and group-commits.
//!
//! [`Store`](crate::storage::Store) sends a [`Job`] (an operation of `ops.rs` and where its answer
//! goes) and awaits the answer. The loop takes everything waiting in its queue, applies it in one
//! write transaction (dedup and compare-and-set decisions happen here, against the transaction's
//! own view, so 100 identical concurrent requests yield one `queued`), commits with fsync, and
//! only then answers every request of the batch.
//!
//! A failure stays the size of its cause:
//! - one request's refusal or undecodable record answers that request, and the rest commit;
//! - a failed write of the commit (a full disk) answers the batch `unavailable`, stores none of
//!   it, and the file is reopened, which recovers to the last commit. While writes keep failing,
//!   the store is [`Health::Unwritable`] (`/healthz` says so), batches are answered at once
//!   without touching the disk, and the writer tries again by itself after a pause that doubles
//!   up to [`MAX_RETRY_PAUSE`]: a full disk costs one log line when it starts and one when it
//!   ends, not a reopen and a repair per request. A try waits for [`ROOM_TO_RECOVER`] free on
//!   the filesystem, since on a full disk a commit of nothing new still fits in the file;
//! - a failed flush answers the batch `unavailable` and stops the store for good
//!   ([`Health::Failed`]): after a failed fsync the kernel may have dropped the pages, and only
//!   a new process that reads the file from disk knows what is there (`file.rs`).
//!
//! Why a thread and a `std` channel, not a task: redb calls block on disk I/O, and a blocked
//! async worker would stall every connection it serves.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, WriteTransaction};
use tokio::sync::{oneshot, watch};

use crate::domain::dedup::DedupKey;
use crate::domain::event::ValidEvent;
use crate::domain::keyring::Keyring;
use crate::domain::link::{Directory, Link};
use crate::domain::outcome::EventOutcome;
use crate::domain::rejection::Rejection;
use crate::error::Error;
use crate::metrics::WriterMetrics;
use crate::platform;
use crate::storage::engine::fault::FaultSwitch;
use crate::storage::engine::file::FlushFailed;
use crate::storage::engine::open;
use crate::storage::engine::reader::DbSlot;
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer::{self, DedupBuffer};
use crate::storage::index::fbclid_buffer::{self, FbclidBuffer};
use crate::storage::ops::Txn;
use crate::storage::schema::{META_DEDUP_REDO_FROM, META_FBCLID_REDO_FROM, META_INBOX_SEQ};
use crate::storage::spaces;

/// Whether the store can still write. Once `Failed`, it stays so: the process must exit and be
/// started again, which recovers from the file (`commit.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Serving,
    /// Writes fail (a full disk) and are answered `503`; the writer tries again by itself and
    /// is `Serving` once a commit works (`commit.rs`).
    Unwritable(String),
    Failed(String),
}

/// Where a request's answer goes, once its batch has committed.
pub(in crate::storage) type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// The most requests one transaction takes; bounds the latency a batch adds.
const MAX_BATCH: usize = 4096;
/// How often last-used times of credentials are written back.
const LAST_USED_FLUSH: Duration = Duration::from_secs(60);
/// The first pause after a failed commit, before the file is reopened and written again.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between tries while the disk keeps failing.
pub(in crate::storage) const MAX_RETRY_PAUSE: Duration = Duration::from_secs(5);

/// Free space on the data file's filesystem before the writer tries again after a failed
/// commit: a few commits' worth of new pages.
pub(in crate::storage) const ROOM_TO_RECOVER: u64 = 1 << 20;

/// How long closing waits for readers to let go of the file.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A run of failed commits: when it began, how many, and when to try again.
struct Failing {
    since: Instant,
    commits: u64,
    pause: Duration,
    retry_at: Instant,
}

/// What the queue carries.
pub(in crate::storage) enum Message {
    Job(Box<dyn Job>),
    /// Rejections are waiting (`RejectionQueue`): commit them even if no write comes.
    Wake,
    /// Commit what came before, close the file, and end the thread.
    Stop,
}

/// A write operation on its way through a batch.
pub(in crate::storage) trait Job: Send {
    /// Runs the operation inside the batch's transaction and keeps its result. An error here
    /// fails the whole batch; a failure of this request alone is kept as its answer.
    fn apply(&mut self, txn: &mut Txn<'_>) -> Result<(), StoreError>;
    /// Sends the answer: the operation's own if the batch committed, `unavailable` if not.
    fn answer(self: Box<Self>, committed: bool);
}

/// The one [`Job`]: an operation, its result once applied, and its reply.
pub(in crate::storage) struct Write<T, F> {
    op: Option<F>,
    result: Option<Result<T, Error>>,
    reply: Reply<T>,
}

impl<T, F> Write<T, F> {
    pub(in crate::storage) fn new(op: F, reply: Reply<T>) -> Write<T, F> {
        Write {
            op: Some(op),
            result: None,
            reply,
        }
    }
}

impl<T, F> Job for Write<T, F>
where
    T: Send,
    F: FnOnce(&mut Txn<'_>) -> Result<T, StoreError> + Send,
{
    fn apply(&mut self, txn: &mut Txn<'_>) -> Result<(), StoreError> {
        let Some(op) = self.op.take() else {
            return Ok(());
        };
        self.result = Some(own_answer(op(txn))?);
        Ok(())
    }

    fn answer(self: Box<Self>, committed: bool) {
        let result = match self.result {
            Some(result) if committed => result,
            _ => Err(Error::unavailable()),
        };
        // A caller that gave up (closed connection) is not an error.
        let _ = self.reply.send(result);
    }
}

/// A request's own answer from what its operation returned: a refusal or an undecodable record
/// answers that request alone; any other error fails the whole batch.
fn own_answer<T>(result: Result<T, StoreError>) -> Result<Result<T, Error>, StoreError> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(StoreError::Refused(e)) => Ok(Err(e)),
        Err(StoreError::Corrupt(what)) => {
            tracing::error!(error = %what, "a stored record does not decode; answered this request 500");
            Ok(Err(Error::internal()))
        }
        Err(e) => Err(e),
    }
}

impl Txn<'_> {
    /// The batch entry (`POST /events/batch`, `tracker import`): each event recorded in order by
    /// the one operation a single event goes through ([`Txn::record_event`]), inside the batch's
    /// transaction, so each is deduplicated against the store and the events before it,
    /// attributed, counted and given its deliveries exactly as if it came alone. Each event's
    /// refusal is its own answer, as each request's is in a batch of requests. Without `send`,
    /// no event is given deliveries ([`Txn::record_event_sending`]).
    pub fn record_events(
        &mut self,
        space: u32,
        events: Vec<(ValidEvent, Option<DedupKey>)>,
        send: bool,
    ) -> Result<Vec<Result<EventOutcome, Error>>, StoreError> {
        events
            .into_iter()
            .map(|(event, key)| own_answer(self.record_event_sending(space, event, key, send)))
            .collect()
    }
}

/// Refused requests on their way to the rejection log: bounded, and never in the way of a
/// write. When it is full, or a batch fails, rejections are dropped and counted; events never.
#[derive(Default)]
pub(in crate::storage) struct RejectionQueue {
    waiting: Mutex<Vec<(u32, Rejection)>>,
    dropped: AtomicU64,
}

/// How many rejections may wait for the writer.
const REJECTIONS_WAITING: usize = 1024;

impl RejectionQueue {
    /// Queues one; answers whether it is the first waiting (the writer may need waking).
    pub(in crate::storage) fn push(&self, space: u32, rejection: Rejection) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.len() >= REJECTIONS_WAITING {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        waiting.push((space, rejection));
        waiting.len() == 1
    }

    fn take(&self) -> Vec<(u32, Rejection)> {
        std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn is_empty(&self) -> bool {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// How many were dropped since start.
    pub(in crate::storage) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

pub(in crate::storage) struct Writer {
    path: PathBuf,
    fault: Option<FaultSwitch>,
    cache_bytes: usize,
    /// The open file, shared with the readers; never held by the store itself, so that the
    /// file closes when the writer and the readers let go of it.
    slot: Arc<DbSlot>,
    db: Option<Arc<Database>>,
    flush_failed: FlushFailed,
    /// `clicks_by_fbclid` entries not yet in the table; only the writer reads that index.
    fbclid: FbclidBuffer,
    /// Past the time of every uid committed so far (`Txn::uid_floor`).
    uid_floor: u64,
    last_flush: Instant,
    /// Set while commits fail and the disk may recover.
    failing: Option<Failing>,
    /// What a commit changed that could not be read back into memory since: read again after
    /// every commit until it can be.
    stale: Stale,
    /// What the store shares with its writer.
    shared: Shared,
}

/// The in-memory copies a failed read left behind the file.
#[derive(Default)]
struct Stale {
    keyring: bool,
    /// While set, each batch reads its spaces' destinations from the table rather than the
    /// directory (`OutboxBatch::changed`), so no event misses a delivery it owes.
    destinations: bool,
    /// Whether this run of failed reads has been logged: once, not once a batch.
    logged: bool,
}

/// What a committed batch changed that the server keeps in memory.
struct Changed {
    credentials: bool,
    /// The links the batch created or changed.
    links: Vec<Link>,
    destinations: bool,
    /// Deliveries moved into (+) and out of (-) each state.
    delivery_states: [i64; 5],
}

impl Changed {
    fn of(t: &mut Txn<'_>) -> Changed {
        Changed {
            credentials: t.credentials_changed,
            links: std::mem::take(&mut t.changed_links),
            destinations: t.outbox.changed,
            delivery_states: t.outbox.moved,
        }
    }
}

/// What a committed batch takes out of the index buffers and puts in, and the latest uid time it
/// made.
struct Buffered {
    dedup: dedup_buffer::Change,
    fbclid: fbclid_buffer::Change,
    /// The latest time a new click's uid began with.
    newest_uid: Option<u64>,
}

/// What ended a batch that did not commit.
enum Failure {
    /// Reopening the file recovers (a failed write, a full disk).
    Recoverable,
    /// The store stops: a flush failed.
    Fatal,
}

/// What the writer shares with the [`Store`](crate::storage::Store): each made once, when the
/// store opens, and held by both.
#[derive(Clone)]
pub(in crate::storage) struct Shared {
    /// The data is in memory only: a failed commit can never be recovered by reopening.
    pub(in crate::storage) ephemeral: bool,
    pub(in crate::storage) keyring: Arc<Keyring>,
    pub(in crate::storage) links: Arc<Directory>,
    pub(in crate::storage) destinations: Arc<platform::Directory>,
    /// Bumped after each commit that changed a destination: the sender starts and stops its
    /// tasks by it.
    pub(in crate::storage) destinations_changed: Arc<watch::Sender<u64>>,
    /// Dedup entries not yet in the table; readers share it (`Store::judge_event`).
    pub(in crate::storage) pending: Arc<RwLock<DedupBuffer>>,
    pub(in crate::storage) health: Arc<watch::Sender<Health>>,
    pub(in crate::storage) rejections: Arc<RejectionQueue>,
    /// The last `inbox_id` committed, for followers of the feed (`GET /events/wait`).
    pub(in crate::storage) committed: Arc<watch::Sender<u64>>,
    /// Queue depth, batch sizes and commit times, for `/metrics`.
    pub(in crate::storage) metrics: Arc<WriterMetrics>,
    /// Commits so far, counted before a commit's buffers change or its batch is answered: a
    /// reader snapshot begun at a count holds every commit up to it (`reader.rs`).
    pub(in crate::storage) commits: Arc<AtomicU64>,
}

impl Writer {
    pub(in crate::storage) fn new(
        path: PathBuf,
        fault: Option<FaultSwitch>,
        cache_bytes: usize,
        flush_failed: FlushFailed,
        fbclid: FbclidBuffer,
        slot: Arc<DbSlot>,
        shared: Shared,
    ) -> Writer {
        let db = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
        Writer {
            path,
            fault,
            cache_bytes,
            slot,
            db,
            flush_failed,
            fbclid,
            uid_floor: 0,
            last_flush: Instant::now(),
            failing: None,
            stale: Stale::default(),
            shared,
        }
    }

    pub(in crate::storage) fn run(mut self, queue: &Receiver<Message>) {
        let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(256);
        let mut stopping = false;
        while !stopping {
            let first = match &self.failing {
                None => queue.recv().map_err(|_| ()),
                // While the disk fails, try again by itself when the pause is over, so that
                // `/healthz` turns back to ok without waiting for a request.
                Some(failing) => {
                    let wait = failing.retry_at.saturating_duration_since(Instant::now());
                    match queue.recv_timeout(wait) {
                        Ok(message) => Ok(message),
                        Err(RecvTimeoutError::Timeout) => {
                            if let Err(Failure::Fatal) = self.commit_batch(&mut batch, false, false)
                            {
                                answer_unavailable(queue);
                                return;
                            }
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => Err(()),
                    }
                }
            };
            let Ok(first) = first else { break };
            let mut next = Some(first);
            while let Some(message) = next.take() {
                match message {
                    Message::Job(job) => {
                        self.shared.metrics.queued.fetch_sub(1, Ordering::Relaxed);
                        batch.push(job);
                    }
                    Message::Wake => {}
                    // Anything after `Stop` was sent after `close()`: it is dropped, and its
                    // caller sees the writer gone.
                    Message::Stop => {
                        stopping = true;
                        break;
                    }
                }
                if batch.len() < MAX_BATCH {
                    next = queue.try_recv().ok();
                }
            }
            let flush = stopping || self.last_flush.elapsed() >= LAST_USED_FLUSH;
            if batch.is_empty() && !flush && self.shared.rejections.is_empty() {
                continue;
            }
            // At a stop, every buffered dedup entry goes to the table: a cleanly closed file
            // needs no redo.
            if let Err(Failure::Fatal) = self.commit_batch(&mut batch, flush, stopping) {
                answer_unavailable(queue);
                return;
            }
        }
        self.close();
    }

    fn commit_batch(
        &mut self,
        batch: &mut Vec<Box<dyn Job>>,
        flush_last_used: bool,
        drain: bool,
    ) -> Result<(), Failure> {
        let pausing = match &self.failing {
            Some(failing) if Instant::now() < failing.retry_at => true,
            // Due for a try. On a full disk an empty commit still fits in pages the file has
            // already, and would call the disk writable while every new event fails (and each
            // failure logged again): so a try waits until the filesystem has room. Meanwhile the
            // file is reopened for the readers, so reads and re-sent events (`Store::
            // record_event`) are answered.
            Some(_) if !self.room_to_write() => {
                let _ = self.database();
                self.commit_failed(&"the filesystem has no room");
                true
            }
            None | Some(_) => false,
        };
        let db = if pausing { None } else { self.database() };
        let Some(db) = db else {
            if !pausing {
                self.commit_failed(&"the data file cannot be reopened");
            }
            for job in batch.drain(..) {
                job.answer(false);
            }
            return Err(Failure::Recoverable);
        };
        let pending = self.shared.pending.clone();
        let pending = pending.read().unwrap_or_else(PoisonError::into_inner);
        let rejections = self.shared.rejections.take();
        let rejected = rejections.len() as u64;
        let flushes_before = self.flush_failed.done();
        let started = Instant::now();
        let result = (|| -> Result<(Changed, Buffered, u64), StoreError> {
            let txn = db.begin_write()?;
            let (changed, buffered, inbox_seq) = {
                let (links, dests) = (&self.shared.links, &self.shared.destinations);
                let mut t = Txn::open(&txn, &pending, &self.fbclid, links, self.uid_floor, dests)?;
                t.outbox.changed = self.stale.destinations;
                for job in batch.iter_mut() {
                    job.apply(&mut t)?;
                }
                let newest_uid = t.write_clicks()?;
                if flush_last_used {
                    t.flush_last_used(&self.shared.keyring.last_used())?;
                }
                t.record_rejections(rejections)?;
                t.rollup.write(&mut t.stats)?;
                t.write_delivery_states()?;
                let buffered = flush_buffers(&mut t, &pending, &self.fbclid, drain, newest_uid)?;
                t.meta.insert(META_INBOX_SEQ, t.inbox_seq)?;
                let changed = Changed::of(&mut t);
                (changed, buffered, t.inbox_seq)
            };
            // Odd while redb makes the commit visible: see `reader.rs`, "Freshness".
            self.shared.commits.fetch_add(1, Ordering::Release);
            let done = commit(txn);
            self.shared.commits.fetch_add(1, Ordering::Release);
            done?;
            Ok((changed, buffered, inbox_seq))
        })();
        drop(pending);
        match result {
            Ok((changed, buffered, inbox_seq)) => {
                self.shared
                    .metrics
                    .commit_seconds
                    .observe_duration(started.elapsed());
                if !batch.is_empty() {
                    self.shared.metrics.batch_size.observe(batch.len() as u64);
                }
                self.committed(&db, changed, buffered, inbox_seq, flush_last_used);
                for job in batch.drain(..) {
                    job.answer(true);
                }
                Ok(())
            }
            Err(e) => {
                self.shared
                    .rejections
                    .dropped
                    .fetch_add(rejected, Ordering::Relaxed);
                let flush_failed = self.flush_failed.failed();
                // A flush of this commit worked and the commit still failed: it may be on disk,
                // with entries that neither the buffers nor the tables hold; only the redo of a
                // new process brings them back.
                let flushed = self.flush_failed.done() != flushes_before;
                self.let_go_of_file();
                let failure = if flush_failed || flushed {
                    let what = if flush_failed {
                        "flushing"
                    } else {
                        "committing after a flush of"
                    };
                    let reason = format!(
                        "{what} {} to disk failed ({e}); what the disk holds is known only to \
                         a new process, so the tracker stops and a restart recovers from the file",
                        self.path.display()
                    );
                    tracing::error!("{reason}");
                    // Before answering: a client that reads the 503 finds `/healthz` failed.
                    self.shared.health.send_replace(Health::Failed(reason));
                    Failure::Fatal
                } else {
                    self.commit_failed(&e);
                    Failure::Recoverable
                };
                for job in batch.drain(..) {
                    job.answer(false);
                }
                Err(failure)
            }
        }
    }

    /// What follows a commit before its batch is answered, so that whoever reads an answer sees
    /// what it says: the dedup buffer, the keyring and links, the followers' watch.
    fn committed(
        &mut self,
        db: &Database,
        changed: Changed,
        buffered: Buffered,
        inbox_seq: u64,
        flush_last_used: bool,
    ) {
        if let Some(failing) = self.failing.take() {
            tracing::warn!(
                failed_commits = failing.commits,
                after = %humantime::format_duration(Duration::from_secs(failing.since.elapsed().as_secs())),
                "storage is writable again"
            );
            self.shared.health.send_replace(Health::Serving);
        }
        // A reader that sees the answer sees the entries.
        let lookups = {
            let mut pending = self
                .shared
                .pending
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            pending.apply(buffered.dedup);
            pending.lookups()
        };
        self.shared.metrics.set_dedup_lookups(lookups);
        self.fbclid.apply(buffered.fbclid);
        if let Some(t) = buffered.newest_uid {
            self.uid_floor = self.uid_floor.max(t.saturating_add(1));
        }
        if flush_last_used {
            self.last_flush = Instant::now();
        }
        // A rotation is in force when its command returns, and a new link answers when its
        // creation does.
        if !changed.links.is_empty() {
            self.shared.links.apply(changed.links);
        }
        self.stale.keyring |= changed.credentials;
        self.stale.destinations |= changed.destinations;
        let delivery_states = changed.delivery_states;
        self.reload(db);
        self.shared.metrics.moved_deliveries(&delivery_states);
        // Followers wake after the commit and find the events in their next snapshot.
        self.shared.committed.send_if_modified(|last| {
            let newer = inbox_seq > *last;
            *last = inbox_seq.max(*last);
            newer
        });
    }

    /// Notes a failed commit: the first of a run is logged and makes the store
    /// [`Health::Unwritable`]; the rest are counted, and each doubles the pause before the next
    /// try.
    fn commit_failed(&mut self, e: &dyn std::fmt::Display) {
        let now = Instant::now();
        match &mut self.failing {
            None => {
                let reason = format!("writing the data file fails: {e}");
                tracing::error!(
                    "{reason}; answering 503 and trying again by itself until it works (the \
                     next line in this log says when)"
                );
                self.shared.health.send_replace(Health::Unwritable(reason));
                self.failing = Some(Failing {
                    since: now,
                    commits: 1,
                    pause: FIRST_RETRY_PAUSE,
                    retry_at: now + FIRST_RETRY_PAUSE,
                });
            }
            Some(failing) => {
                tracing::debug!(error = %e, commits = failing.commits, "storage still fails");
                failing.commits += 1;
                failing.pause = (failing.pause * 2).min(MAX_RETRY_PAUSE);
                failing.retry_at = now + failing.pause;
            }
        }
    }

    /// Whether the data file's filesystem has [`ROOM_TO_RECOVER`] free, or cannot say.
    fn room_to_write(&self) -> bool {
        if self.shared.ephemeral {
            return true;
        }
        open::free_bytes(&self.path).is_none_or(|free| free >= ROOM_TO_RECOVER)
    }

    /// Reads what [`Stale`] names back into memory; what fails stays stale and is read again
    /// after the next commit (each batch meanwhile reads destinations from the table).
    fn reload(&mut self, db: &Database) {
        let mut failed = None;
        if self.stale.keyring {
            match db
                .begin_read()
                .map_err(StoreError::from)
                .and_then(|txn| spaces::keyring_entries(&txn))
            {
                Ok(entries) => {
                    self.shared.keyring.replace(entries);
                    self.stale.keyring = false;
                }
                Err(e) => failed = Some(("credentials", e)),
            }
        }
        if self.stale.destinations {
            match db
                .begin_read()
                .map_err(StoreError::from)
                .and_then(|txn| crate::storage::destinations::outbox::all_destinations(&txn))
            {
                Ok(all) => {
                    self.shared
                        .metrics
                        .set_paused_destinations(all.iter().filter(|d| d.paused.is_some()).count());
                    self.shared.destinations.replace(all);
                    self.stale.destinations = false;
                    self.shared.destinations_changed.send_modify(|n| *n += 1);
                }
                Err(e) => failed = Some(("destinations", e)),
            }
        }
        match failed {
            Some((what, e)) if !self.stale.logged => {
                self.stale.logged = true;
                tracing::error!(error = %e, "reading {what} after a commit failed; read again after each commit until it works");
            }
            None if self.stale.logged => {
                self.stale.logged = false;
                tracing::warn!("credentials and destinations read again after failing");
            }
            _ => {}
        }
    }

    /// The database, reopened first if an earlier commit failed.
    fn database(&mut self) -> Option<Arc<Database>> {
        if self.db.is_none() && !self.shared.ephemeral {
            match open::reopen_database(&self.path, self.fault.as_ref(), self.cache_bytes) {
                Ok(opened) => {
                    tracing::info!("data file reopened after a storage failure");
                    // The file is as the last commit left it, and so are both buffers (they
                    // take a batch's entries only once it has committed): every entry the
                    // tables lack is still in a buffer, and the stored `dedup_redo_from` and
                    // `fbclid_redo_from` still cover them for a crash.
                    let db = Arc::new(opened.db);
                    self.flush_failed = opened.flush_failed;
                    *self.slot.write().unwrap_or_else(PoisonError::into_inner) = Some(db.clone());
                    self.db = Some(db);
                }
                Err(e) => tracing::debug!(error = %e, "data file cannot be reopened yet"),
            }
        }
        self.db.clone()
    }

    /// After a failed commit redb refuses further work on that handle: let go of it, so that
    /// the next batch reopens the file (and repairs it if needed), or, after a failed flush,
    /// so that nothing reads from it again.
    fn let_go_of_file(&mut self) {
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = None;
        self.db = None;
    }

    fn close(mut self) {
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = None;
        if let Some(mut db) = self.db.take() {
            // Readers hold their own Arc for the length of a batch of reads (and a reader that
            // has just answered may not have let go yet): wait a moment for them, so that the
            // file is closed when `Store::close` returns and can be opened again at once. A read
            // that outlasts the wait closes the file when it is done.
            let deadline = Instant::now() + CLOSE_WAIT;
            loop {
                match Arc::try_unwrap(db) {
                    Ok(db) => {
                        if let Err(e) = db.close() {
                            tracing::error!(error = %e, "closing the data file");
                        }
                        break;
                    }
                    Err(shared) if Instant::now() < deadline => {
                        db = shared;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(_) => {
                        tracing::debug!("data file closes after its last reader");
                        break;
                    }
                }
            }
        }
    }
}

/// Writes each index buffer's next slice and its redo mark into the batch's transaction, and
/// answers what the buffers take out and put in once it commits.
fn flush_buffers(
    t: &mut Txn<'_>,
    dedup: &DedupBuffer,
    fbclid: &FbclidBuffer,
    drain: bool,
    newest_uid: Option<u64>,
) -> Result<Buffered, StoreError> {
    let mut dedup_change = std::mem::take(&mut t.change);
    let redo_from = dedup.flush_slice(&mut dedup_change, &mut t.dedup, drain, t.inbox_seq + 1)?;
    t.meta.insert(META_DEDUP_REDO_FROM, redo_from)?;
    dedup.merge_slice(&mut dedup_change, &mut t.dedup, &mut t.meta)?;
    let mut fbclid_change = std::mem::take(&mut t.fbclid_change);
    match fbclid.flush_slice(&mut fbclid_change, &mut t.by_fbclid, drain)? {
        Some(from) => t.meta.insert(META_FBCLID_REDO_FROM, from)?,
        None => t.meta.remove(META_FBCLID_REDO_FROM)?,
    };
    Ok(Buffered {
        dedup: dedup_change,
        fbclid: fbclid_change,
        newest_uid,
    })
}

/// After a fatal failure: answers what waits, and lets the queue close with the thread.
fn answer_unavailable(queue: &Receiver<Message>) {
    while let Ok(message) = queue.try_recv() {
        if let Message::Job(job) = message {
            job.answer(false);
        }
    }
}

/// Commits with fsync, in one phase: redb writes the pages, flushes, then writes the header that
/// names them (with a checksum that tells a torn header from a whole one), and flushes once more
/// only for a shrink. Without quick repair, a crash costs a full check of the file at the next
/// open instead of a second flush and the allocator state on every commit (docs/internals.md,
/// "Durability and the storage").
fn commit(txn: WriteTransaction) -> Result<(), StoreError> {
    txn.commit()?;
    Ok(())
}
