//! Storage: the one data file, its schema, and the only code that touches redb.
//!
//! [`Store`] is the whole interface, and runs every operation one way: a write is one method of
//! [`Txn`] handed to [`Store::write`] (`store.write(move |t| t.create_link(..))`), which the
//! commit loop (`engine/commit.rs`, one thread) group-commits; a read is one method of
//! [`Snapshot`] handed to [`Store::read`] (`store.read(move |s| s.feed(..))`), which a reader
//! thread (`engine/reader.rs`) runs against a shared snapshot. The writes and reads of each
//! family of tables live in its own file (`links.rs`, `spaces.rs`, `channels.rs`, `costs.rs`,
//! `clicks.rs`, `destinations/`, `users.rs`, currency rates `rates.rs`; events and settings in `ops.rs` and `read.rs`, stats in
//! `read_stats.rs`). Nothing outside this module sees a channel, a redb transaction or a
//! table, and nothing here knows about HTTP.
//!
//! The modules are private; what the rest of the crate and the tests use is re-exported below.
//! Public are only the file's format, which tests write by hand (`schema`, `records`), the
//! reads the benchmark measures the file with (`read`), and `tracker check` (`check`).

mod attribution;
mod audit;
mod channels;
pub mod check;
mod clicks;
mod cost_sums;
mod costs;
mod destinations;
mod engine;
mod error;
mod first_deposit;
mod index;
mod links;
mod ops;
mod rates;
pub mod read;
mod read_stats;
pub mod records;
mod rollup;
pub mod schema;
mod spaces;
mod users;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use tokio::sync::{oneshot, watch};

use crate::domain::dedup::{DedupKey, Expiry};
use crate::domain::event::ValidEvent;
use crate::domain::keyring::Keyring;
use crate::domain::link::{Directory, Link};
use crate::domain::outcome::EventOutcome;
use crate::domain::rejection::Rejection;
use crate::error::Error;
use crate::metrics::WriterMetrics;
use crate::platform;
use engine::commit::{Message, RejectionQueue, Write};
use engine::fault::FaultSwitch;
use engine::reader::Readers;
use index::dedup_buffer::DedupBuffer;
use read::TableUsage;

pub use channels::ChannelCounts;
pub use destinations::outbox::Due;
pub use engine::backup::{BackupStats, folder_of, migrate_copy};
pub use engine::commit::Health;
pub use engine::compact::compact_file;
pub use engine::fault;
pub use engine::open::{
    COMMAND_CACHE_BYTES, SERVER_CACHE_BYTES, holds_data, open_database, require_existing,
    require_unused,
};
pub use error::StoreError;
pub use ops::Txn;
pub use read::Snapshot;
pub use spaces::{CredentialSummary, SpaceSummary};

/// Bytes read from the data file by this process since it started (`file.rs`).
#[must_use]
pub fn file_bytes_read() -> u64 {
    engine::file::BYTES_READ.load(Ordering::Relaxed)
}

/// Tunables of the store; the defaults suit a small VPS.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Requests that may wait for the writer; past this, requests are answered `503`.
    pub queue_capacity: usize,
    /// Reader threads (`reader.rs`).
    pub readers: usize,
    /// Keep the data in memory only: nothing is written to disk (`serve --ephemeral`).
    pub ephemeral: bool,
    /// Test hook: a switch that makes the disk fail.
    pub fault: Option<FaultSwitch>,
    /// redb's page cache ([`SERVER_CACHE_BYTES`] for the server).
    pub cache_bytes: usize,
    /// Entries per generation of the dedup table ([`index::dedup_buffer::GEN_ENTRIES`]); tests
    /// make it small to have many generations and merges.
    pub dedup_generation: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            queue_capacity: 16 * 1024,
            // Enough that one long read (a backup) leaves another thread for the short ones.
            readers: std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4)),
            ephemeral: false,
            fault: None,
            cache_bytes: engine::open::SERVER_CACHE_BYTES,
            dedup_generation: index::dedup_buffer::GEN_ENTRIES,
        }
    }
}

/// The open data file: every operation on it.
pub struct Store {
    writes: SyncSender<Message>,
    readers: Readers,
    /// What the store shares with its writer: the keyring, links and destinations as of the
    /// last commit, the dedup buffer, health, the commit counters and the writer's metrics.
    shared: engine::commit::Shared,
    writer: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

impl Store {
    /// Opens `path` (creating it if needed) and starts the writer and reader threads.
    /// Returns the store and whether the file was created now.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<(Store, bool), StoreError> {
        let opened = if options.ephemeral {
            engine::open::open_in_memory()?
        } else {
            engine::open::open_database(path, options.fault.as_ref(), options.cache_bytes)?
        };
        let created = opened.created;
        let dedup_filter = opened.dedup_filter;
        let db = Arc::new(opened.db);
        let keyring = Arc::new(Keyring::default());
        let links = Arc::new(Directory::default());
        let destinations = Arc::new(platform::Directory::default());
        let writer_metrics = Arc::new(WriterMetrics::default());
        let (fbclid, dedup) = {
            let txn = redb::ReadableDatabase::begin_read(&*db)?;
            keyring.replace(spaces::keyring_entries(&txn)?);
            links.replace(links::all_links(&txn)?);
            let all = destinations::outbox::all_destinations(&txn)?;
            writer_metrics
                .set_paused_destinations(all.iter().filter(|d| d.paused.is_some()).count());
            destinations.replace(all);
            writer_metrics.set_delivery_states(destinations::outbox::state_totals(&txn)?);
            (
                index::fbclid_buffer::FbclidBuffer::load(&txn)?,
                DedupBuffer::load(&txn, dedup_filter, options.dedup_generation.max(1))?,
            )
        };
        let slot = Arc::new(RwLock::new(Some(db)));
        let shared = engine::commit::Shared {
            ephemeral: options.ephemeral,
            keyring,
            links,
            destinations,
            destinations_changed: Arc::new(watch::Sender::new(0)),
            pending: Arc::new(RwLock::new(dedup)),
            health: Arc::new(watch::Sender::new(Health::Serving)),
            rejections: Arc::new(RejectionQueue::default()),
            committed: Arc::new(watch::Sender::new(0)),
            metrics: writer_metrics,
            commits: Arc::new(AtomicU64::new(0)),
        };
        let (writes, queue) = mpsc::sync_channel(options.queue_capacity);
        let commit_loop = engine::commit::Writer::new(
            path.to_owned(),
            options.fault.clone(),
            options.cache_bytes,
            opened.flush_failed,
            fbclid,
            slot.clone(),
            shared.clone(),
        );
        let thread_health = shared.health.clone();
        let io = |e| StoreError::Redb(redb::Error::Io(e));
        let handle = std::thread::Builder::new()
            .name("tracker-writer".into())
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| commit_loop.run(&queue));
                if std::panic::catch_unwind(run).is_err() {
                    // The panic itself was printed by the panic hook. Every request waiting in
                    // this thread is answered 503 as its reply is dropped, and later ones find
                    // the queue closed.
                    thread_health.send_replace(Health::Failed(
                        "the writer thread panicked; see the log above".into(),
                    ));
                }
            })
            .map_err(io)?;
        let readers = Readers::start(
            &slot,
            &shared.commits,
            options.readers,
            options.queue_capacity,
        )
        .map_err(io)?;
        Ok((
            Store {
                writes,
                readers,
                shared,
                writer: Mutex::new(Some(handle)),
                path: path.to_owned(),
            },
            created,
        ))
    }

    #[must_use]
    pub fn keyring(&self) -> &Arc<Keyring> {
        &self.shared.keyring
    }

    /// The link with `slug`, deleted or not, from memory.
    #[must_use]
    pub fn link(&self, slug: &str) -> Option<Arc<Link>> {
        self.shared.links.get(slug)
    }

    /// The live destinations, as of the last commit.
    #[must_use]
    pub fn destination_directory(&self) -> &Arc<platform::Directory> {
        &self.shared.destinations
    }

    /// Changes after each commit that created or removed a destination.
    #[must_use]
    pub fn destination_changes(&self) -> watch::Receiver<u64> {
        self.shared.destinations_changed.subscribe()
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the writer counts, for `/metrics`.
    #[must_use]
    pub fn writer_metrics(&self) -> &Arc<WriterMetrics> {
        &self.shared.metrics
    }

    /// Whether the data lives in memory only (`serve --ephemeral`).
    #[must_use]
    pub fn is_ephemeral(&self) -> bool {
        self.shared.ephemeral
    }

    /// Whether the store still writes.
    #[must_use]
    pub fn health(&self) -> Health {
        self.shared.health.borrow().clone()
    }

    /// Resolves with the reason once the store has failed for good.
    pub fn failed(&self) -> impl Future<Output = String> + Send + 'static {
        let mut health = self.shared.health.subscribe();
        async move {
            let reason = match health.wait_for(|h| matches!(h, Health::Failed(_))).await {
                Ok(h) => match &*h {
                    Health::Failed(reason) => Some(reason.clone()),
                    Health::Serving | Health::Unwritable(_) => None,
                },
                Err(_) => None,
            };
            match reason {
                Some(reason) => reason,
                // The store is gone without failing: never resolve.
                None => std::future::pending().await,
            }
        }
    }

    // --- Writes that are more than one operation of `Txn`; the rest go through `write`. ---

    /// Stores `event` unless its dedup key names an earlier event.
    ///
    /// While writes fail (a full disk), an event that repeats a committed one is still answered
    /// `duplicate` with the earlier `inbox_id`: that decision reads and writes nothing, so a
    /// sender that retries what was acknowledged learns it is stored. Only a new event waits
    /// for the disk (and is answered `unavailable`).
    pub async fn record_event(
        &self,
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
    ) -> Result<EventOutcome, Error> {
        if key.is_some()
            && matches!(self.health(), Health::Unwritable(_))
            && let Ok((Some((inbox_id, event_id)), attributed_by)) =
                self.judge_event(space, event.clone(), key).await
        {
            return Ok(EventOutcome {
                duplicate: true,
                inbox_id,
                event_id,
                matched: attributed_by.is_some(),
                attributed_by,
            });
        }
        self.write(move |t| t.record_event(space, event, key)).await
    }

    /// Adds a refused request to the space's rejection log, when the writer next commits.
    /// Never waits and never takes a write's place: when too many are waiting it is dropped
    /// and counted ([`Store::rejections_dropped`]).
    pub fn record_rejection(&self, space: u32, rejection: Rejection) {
        if self.shared.rejections.push(space, rejection) {
            // A busy writer commits them with its next batch anyway.
            let _ = self.writes.try_send(Message::Wake);
        }
    }

    /// Rejections dropped since start (the writer was busy, or their batch failed).
    #[must_use]
    pub fn rejections_dropped(&self) -> u64 {
        self.shared.rejections.dropped()
    }

    /// The last `inbox_id` committed, changing with each commit that stores events.
    #[must_use]
    pub fn commits(&self) -> watch::Receiver<u64> {
        self.shared.committed.subscribe()
    }

    // --- Reads that are more than one read of a `Snapshot`; the rest go through `read`. ---

    /// What storing `event` in `space` would do now, without storing it: `(duplicate_of,
    /// attributed_by)`.
    pub async fn judge_event(
        &self,
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
    ) -> Result<read::Judged, Error> {
        // The buffer before the snapshot: an entry leaves the buffer only once the table in
        // every later snapshot has it (dedup_buffer.rs), and the reader begins its snapshot
        // after this.
        let held = key.as_ref().map(|k| {
            self.shared
                .pending
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .held(&index::dedup_buffer::entry_key(space, k))
        });
        self.read(move |s| read::judge_event(s, space, &event, key.as_ref(), held))
            .await
    }

    /// A consistent copy of the data file at `dest`, from one snapshot; refused, writing
    /// nothing, where it would leave the data file too little room
    /// ([`engine::backup::room_for_copy`]).
    pub async fn backup(&self, dest: PathBuf) -> Result<engine::backup::BackupStats, Error> {
        let (live, to) = (self.path().to_owned(), dest.clone());
        let room =
            tokio::task::spawn_blocking(move || engine::backup::room_for_copy(&live, &to)).await;
        if let Ok(Err(why)) = room {
            return Err(Error::new(
                crate::error::Code::Unavailable,
                format!("backup to {} refused: {why}", dest.display()),
            ));
        }
        self.read(move |s| {
            engine::backup::beside_the_load(s.txn(), &dest).map_err(|e| {
                StoreError::Refused(Error::new(
                    crate::error::Code::Unavailable,
                    format!("backup to {} failed: {e}", dest.display()),
                ))
            })
        })
        .await
    }

    /// `tracker check` on the open file: the tracker's invariants over one snapshot, read-only
    /// (redb's page check needs the file to itself; `check::check_file` runs it).
    pub async fn check(&self, expiry: Expiry) -> Result<check::Report, Error> {
        self.read(move |s| check::check(s.txn(), expiry)).await
    }

    /// How many events the inbox holds, and where the file's bytes are (for the benchmark).
    pub async fn usage(&self) -> Result<(u64, Vec<TableUsage>), Error> {
        self.read(|s| Ok((read::count_events(s.txn())?, read::table_usage(s.txn())?)))
            .await
    }

    /// Stops the writer after everything queued before this call is committed, and closes the
    /// data file cleanly. Later writes are answered `unavailable`. Blocks until the file is
    /// closed: call it from a blocking context.
    pub fn close(&self) {
        // FIFO: everything sent before `Stop` is committed before the writer exits. The join
        // waits for that, and for the file to be closed.
        let _ = self.writes.send(Message::Stop);
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// Runs a write: hands `op`, one operation of [`Txn`] (`store.write(move |t| t.bind(..))`),
    /// to the commit loop and answers after its batch's commit. A refusal the operation
    /// returns is its answer; a failed commit answers `unavailable`, a full queue `busy`.
    pub async fn write<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut Txn<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        let message = Message::Job(Box::new(Write::new(op, reply)));
        // Counted before the send: the writer may take the job before `try_send` returns.
        let queued = &self.shared.metrics.queued;
        queued.fetch_add(1, Ordering::Relaxed);
        match self.writes.try_send(message) {
            Ok(()) => {}
            Err(e) => {
                queued.fetch_sub(1, Ordering::Relaxed);
                return Err(match e {
                    TrySendError::Full(_) => StoreError::Busy.into(),
                    TrySendError::Disconnected(_) => self.gone(),
                });
            }
        }
        answer.await.map_err(|_| self.gone())?
    }

    /// Runs a read: `read`, one read of a [`Snapshot`] (`store.read(move |s| s.feed(..))`), on
    /// a reader thread against a snapshot begun after this call.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Snapshot) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Error> {
        let answer = self.readers.submit(read)?;
        answer.await.map_err(|_| Error::from(StoreError::Closed))?
    }

    /// The answer when the writer is not there: it stopped, or failed.
    fn gone(&self) -> Error {
        match self.health() {
            Health::Failed(reason) => StoreError::Failed(reason).into(),
            Health::Serving | Health::Unwritable(_) => StoreError::Closed.into(),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}
