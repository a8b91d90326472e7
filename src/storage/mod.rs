//! Storage: the one data file, its schema, and the only code that touches redb.
//!
//! [`Store`] is the whole interface: one async method per operation, writes and reads alike.
//! Behind it, writes go to the commit loop (`commit.rs`), one thread that group-commits the
//! operations of `ops.rs`; reads go to the reader threads (`reader.rs`), which run the reads of
//! `read.rs` against shared snapshots. Nothing outside this module sees a channel, a
//! transaction or a table, and nothing here knows about HTTP.

mod attribution;
pub mod backup;
pub mod channels;
pub mod check;
mod commit;
pub mod compact;
mod cost_sums;
pub mod dedup_buffer;
mod destination_rows;
mod error;
pub mod fault;
pub mod fbclid_buffer;
mod file;
mod first_deposit;
pub mod key_filter;
mod links;
pub mod open;
mod ops;
pub mod outbox;
pub mod outbox_read;
pub mod read;
pub mod read_stats;
mod reader;
pub mod records;
mod rollup;
pub mod schema;
mod spaces;
mod store_outbox;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use tokio::sync::{oneshot, watch};

use crate::domain::channel::{ChannelUpdate, UpdatesApplied};
use crate::domain::click::NewClick;
use crate::domain::cost::{Cost, Day};
use crate::domain::credential::{CredentialDigest, Kind};
use crate::domain::dedup::{DedupKey, Expiry};
use crate::domain::event::ValidEvent;
use crate::domain::feed::{FeedEvent, FeedPage, PageRequest};
use crate::domain::keyring::Keyring;
use crate::domain::link::{Directory, Link, NewLink};
use crate::domain::outcome::{
    BindOutcome, ClickOutcome, EventOutcome, NewCredential, PruneCursor, PruneStep,
};
use crate::domain::rejection::Rejection;
use crate::domain::settings::{SettingsPatch, SpaceSettings};
use crate::domain::stats::{GroupStats, Grouping};
use crate::error::Error;
use crate::metrics::WriterMetrics;
use crate::platform;
use commit::{Message, RejectionQueue, Write};
use dedup_buffer::DedupBuffer;
use fault::FaultSwitch;
use ops::Txn;
use read::{Snapshot, SpaceSummary, TableUsage};
use reader::Readers;

pub use commit::Health;
pub use error::StoreError;

/// Bytes read from the data file by this process since it started (`file.rs`).
#[must_use]
pub fn file_bytes_read() -> u64 {
    file::BYTES_READ.load(Ordering::Relaxed)
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
    /// redb's page cache (`open::SERVER_CACHE_BYTES` for the server).
    pub cache_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            queue_capacity: 16 * 1024,
            // Enough that one long read (a backup) leaves another thread for the short ones.
            readers: std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4)),
            ephemeral: false,
            fault: None,
            cache_bytes: open::SERVER_CACHE_BYTES,
        }
    }
}

/// The open data file: every operation on it.
pub struct Store {
    writes: SyncSender<Message>,
    readers: Readers,
    /// What the store shares with its writer: the keyring, links and destinations as of the
    /// last commit, the dedup buffer, health, the commit counters and the writer's metrics.
    shared: commit::Shared,
    writer: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

impl Store {
    /// Opens `path` (creating it if needed) and starts the writer and reader threads.
    /// Returns the store and whether the file was created now.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<(Store, bool), StoreError> {
        let opened = if options.ephemeral {
            open::open_in_memory()?
        } else {
            open::open_database(path, options.fault.as_ref(), options.cache_bytes)?
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
            keyring.replace(read::keyring_entries(&txn)?);
            links.replace(read::all_links(&txn)?);
            let all = outbox::all_destinations(&txn)?;
            writer_metrics
                .set_paused_destinations(all.iter().filter(|d| d.paused.is_some()).count());
            destinations.replace(all);
            writer_metrics.set_delivery_states(outbox::state_totals(&txn)?);
            (
                fbclid_buffer::FbclidBuffer::load(&txn)?,
                DedupBuffer::load(&txn, dedup_filter)?,
            )
        };
        let slot = Arc::new(RwLock::new(Some(db)));
        let shared = commit::Shared {
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
        let commit_loop = commit::Writer::new(
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

    // --- Writes: each is one operation of `ops.rs`, answered after its batch's commit. ---

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
        if key.is_some() && matches!(self.health(), Health::Unwritable(_)) {
            if let Ok((Some((inbox_id, event_id)), attributed_by)) =
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
        }
        self.write(move |t| t.record_event(space, event, key)).await
    }

    /// Stores each of `events` that its dedup key does not name an earlier one for (in the store
    /// or earlier in `events`), in one transaction; answers one outcome per event, in order. An
    /// event's own refusal is its answer and the others are stored; a failed commit answers the
    /// whole batch `unavailable`.
    pub async fn record_events(
        &self,
        space: u32,
        events: Vec<(ValidEvent, Option<DedupKey>)>,
    ) -> Result<Vec<Result<EventOutcome, Error>>, Error> {
        self.write(move |t| commit::record_events(t, space, events))
            .await
    }

    /// Stores a new click, or answers the one with the same `fbclid`.
    pub async fn back_fill_click(
        &self,
        space: u32,
        click: NewClick,
    ) -> Result<ClickOutcome, Error> {
        self.write(move |t| t.back_fill_click(space, click)).await
    }

    /// Changes settings of `space`; answers them all as they now are. Events written after
    /// this commit use them.
    pub async fn update_settings(
        &self,
        space: u32,
        patch: SettingsPatch,
    ) -> Result<SpaceSettings, Error> {
        self.write(move |t| t.update_settings(space, &patch)).await
    }

    /// Binds a click to a Telegram user, first binding wins.
    pub async fn bind(
        &self,
        space: u32,
        uid: String,
        tg_id: u64,
        now_ms: u64,
    ) -> Result<BindOutcome, Error> {
        self.write(move |t| t.bind(space, &uid, tg_id, now_ms))
            .await
    }

    /// Stores a new link of `space`; a taken slug is refused with `conflict`.
    pub async fn create_link(&self, space: u32, link: NewLink, now_ms: u64) -> Result<Link, Error> {
        self.write(move |t| t.create_link(space, &link, now_ms))
            .await
    }

    /// Deletes a link of `space`.
    pub async fn delete_link(&self, space: u32, slug: String, now_ms: u64) -> Result<(), Error> {
        self.write(move |t| t.delete_link(space, &slug, now_ms))
            .await
    }

    /// Puts invite links made for channel link `slug` into its pool.
    pub async fn add_invites(
        &self,
        space: u32,
        slug: String,
        urls: Vec<String>,
        now_ms: u64,
    ) -> Result<(), Error> {
        self.write(move |t| t.add_invites(space, &slug, &urls, now_ms))
            .await
    }

    /// Applies the bot of `space`'s `updates` and stores `next_offset`, if given, in the same
    /// commit.
    pub async fn apply_updates(
        &self,
        space: u32,
        updates: Vec<ChannelUpdate>,
        next_offset: Option<u64>,
        currency: String,
        now_ms: u64,
    ) -> Result<UpdatesApplied, Error> {
        self.write(move |t| t.apply_updates(space, &updates, next_offset, &currency, now_ms))
            .await
    }

    /// Up to `limit` invite links handed out before `before_ms` and never used, of every space
    /// but those `passed_over`.
    pub async fn invites_to_revoke(
        &self,
        before_ms: u64,
        limit: usize,
        passed_over: std::collections::HashSet<u32>,
    ) -> Result<Vec<(u32, String, String)>, Error> {
        self.read(move |s| {
            channels::invites_to_revoke(s, before_ms, limit, |space| !passed_over.contains(&space))
        })
        .await
    }

    /// Marks invite links revoked.
    pub async fn invites_revoked(&self, urls: Vec<String>, now_ms: u64) -> Result<(), Error> {
        self.write(move |t| t.invites_revoked(&urls, now_ms)).await
    }

    /// Channel link `slug`'s counts and pool.
    pub async fn channel_counts(&self, slug: String) -> Result<channels::ChannelCounts, Error> {
        self.read(move |s| channels::channel_counts(s, &slug)).await
    }

    /// The next update of `space`'s bot to read.
    pub async fn telegram_offset(&self, space: u32) -> Result<u64, Error> {
        self.read(move |s| channels::telegram_offset(s, space))
            .await
    }

    /// Records a visit's click on link `slug`, if it still exists when its batch runs.
    pub async fn link_click(
        &self,
        slug: String,
        click: NewClick,
        channel: bool,
    ) -> Result<(ClickOutcome, Option<String>), Error> {
        self.write(move |t| t.link_click(&slug, click, channel))
            .await
    }

    /// One step of removing visitors' hints older than `before_ms` (retention).
    pub async fn prune_click_hints(
        &self,
        from: u32,
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<u32>), Error> {
        self.write(move |t| t.prune_click_hints(from, before_ms, limit))
            .await
    }

    /// Replaces the admin password's hash.
    pub async fn set_admin_password(&self, hash: String) -> Result<(), Error> {
        self.write(move |t| t.set_admin_password(&hash)).await
    }

    /// Creates a space with its first credentials; answers its number.
    pub async fn create_space(
        &self,
        name: String,
        secret: NewCredential,
        ingest: NewCredential,
        now_ms: u64,
    ) -> Result<u32, Error> {
        self.write(move |t| t.create_space(&name, &secret, &ingest, now_ms))
            .await
    }

    /// Makes `new` the active credential of its kind; answers when the replaced one stops.
    pub async fn rotate(
        &self,
        space: String,
        new: NewCredential,
        grace_ms: u64,
        now_ms: u64,
    ) -> Result<Option<u64>, Error> {
        self.write(move |t| t.rotate(&space, &new, grace_ms, now_ms))
            .await
    }

    /// Ends every live credential of `kind` at once; answers how many.
    pub async fn revoke(&self, space: String, kind: Kind, now_ms: u64) -> Result<usize, Error> {
        self.write(move |t| t.revoke(&space, kind, now_ms)).await
    }

    /// One step of retention (`retention.rs`): removes the windowed dedup entries that `expiry`
    /// says can never match again among the next `limit` after `after`, in one small write.
    pub async fn prune_dedup(
        &self,
        after: Option<PruneCursor>,
        expiry: Expiry,
        limit: usize,
    ) -> Result<PruneStep, Error> {
        self.write(move |t| t.prune_dedup(after, expiry, limit))
            .await
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

    // --- Reads: each is one function of `read.rs`, run by a reader thread. ---

    /// A page of the space's inbox with attribution, in commit order.
    pub async fn feed(&self, space: u32, page: PageRequest) -> Result<FeedPage, Error> {
        self.read(move |s| read::feed(s, space, page)).await
    }

    /// A page of the space's inbox newest first, with attribution: the events before `before`,
    /// and the id to ask before for the next page.
    pub async fn feed_newest(
        &self,
        space: u32,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<FeedEvent>, Option<u64>), Error> {
        self.read(move |s| read::feed_newest(s, space, before, limit))
            .await
    }

    /// The admin password's hash, if one was set.
    pub async fn admin_password(&self) -> Result<Option<String>, Error> {
        self.read(|s| read::admin_password(s.txn())).await
    }

    /// The space's stats by `dimension` over the quarters `[from, to)`, days in `zone`.
    pub async fn stats(
        &self,
        space: u32,
        grouping: Grouping,
        quarters: (u32, u32),
        zone: jiff::tz::TimeZone,
    ) -> Result<Vec<GroupStats>, Error> {
        self.read(move |s| read_stats::stats(s, space, &grouping, quarters, &zone))
            .await
    }

    /// The space's costs on the days `[from, to]`, by day, then campaign.
    pub async fn costs(&self, space: u32, days: (Day, Day)) -> Result<Vec<Cost>, Error> {
        self.read(move |s| read_stats::costs(s, space, days)).await
    }

    /// A fetch of Meta's spend for the days `[from, to]` of `space`: replaces those days' costs
    /// that came from Meta with `costs`, leaving those set by hand (`Txn::replace_meta_costs`);
    /// answers how many were set and how many of Meta's earlier ones removed.
    pub async fn replace_meta_costs(
        &self,
        space: u32,
        days: (Day, Day),
        costs: Vec<Cost>,
    ) -> Result<(usize, usize), Error> {
        self.write(move |t| t.replace_meta_costs(space, days, &costs))
            .await
    }

    /// Sets costs of `space` (an amount of 0 removes one); answers how many were set and
    /// removed.
    pub async fn set_costs(&self, space: u32, costs: Vec<Cost>) -> Result<(usize, usize), Error> {
        self.write(move |t| t.set_costs(space, &costs)).await
    }

    /// The space's most recent rejections, newest first.
    pub async fn rejections(&self, space: u32, limit: usize) -> Result<Vec<Rejection>, Error> {
        self.read(move |s| read::rejections(s, space, limit)).await
    }

    /// `space`'s links with their clicks and bound clicks.
    pub async fn links(&self, space: u32) -> Result<Vec<(Link, u64, u64)>, Error> {
        self.read(move |s| read::links(s, space)).await
    }

    /// The number of space `name`, or the refusal that says there is none.
    pub async fn space_no(&self, name: String) -> Result<u32, Error> {
        self.read(move |s| read::space_no(s.txn(), &name)).await
    }

    /// The settings of `space`.
    pub async fn space_settings(&self, space: u32) -> Result<SpaceSettings, Error> {
        self.read(move |s| read::space_settings(s, space)).await
    }

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
                .held(&dedup_buffer::entry_key(space, k))
        });
        self.read(move |s| read::judge_event(s, space, &event, key.as_ref(), held))
            .await
    }

    /// Every space with its credentials (never the credentials themselves). `seen` holds
    /// last-used times newer than the stored ones.
    pub async fn list_spaces(
        &self,
        seen: HashMap<CredentialDigest, u64>,
    ) -> Result<Vec<SpaceSummary>, Error> {
        self.read(move |s| read::list_spaces(s.txn(), &seen)).await
    }

    /// A consistent copy of the data file at `dest`, from one snapshot; refused, writing
    /// nothing, where it would leave the data file too little room ([`backup::room_for_copy`]).
    pub async fn backup(&self, dest: PathBuf) -> Result<backup::BackupStats, Error> {
        let (live, to) = (self.path().to_owned(), dest.clone());
        let room = tokio::task::spawn_blocking(move || backup::room_for_copy(&live, &to)).await;
        if let Ok(Err(why)) = room {
            return Err(Error::new(
                crate::error::Code::Unavailable,
                format!("backup to {} refused: {why}", dest.display()),
            ));
        }
        self.read(move |s| {
            backup::beside_the_load(s.txn(), &dest).map_err(|e| {
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

    /// Hands `op` to the commit loop and waits for its batch's commit.
    async fn write<T: Send + 'static>(
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

    /// Runs `read` on a reader thread against a snapshot begun after this call.
    async fn read<T: Send + 'static>(
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
