//! Storage: the one data file, its schema, and the only code that touches redb.
//!
//! Every write goes through the [`writer`] thread, which group-commits; reads run on the calling
//! (blocking) thread against a snapshot. Nothing here knows about HTTP.

pub mod backup;
pub mod dedup_buffer;
pub mod fault;
pub mod open;
pub mod read;
pub mod records;
pub mod schema;
pub mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use redb::{Database, ReadableDatabase};
use tokio::sync::oneshot;

use crate::domain::dedup::DedupKey;
use crate::domain::event::ValidEvent;
use crate::domain::keyring::Keyring;
use crate::error::{Code, Error};
use dedup_buffer::DedupBuffer;
use fault::FaultSwitch;
pub use writer::{AdminOp, AdminOutcome, BindOutcome, ClickOutcome, EventOutcome, Request};

/// What can go wrong below the domain: the disk, the file, or the writer.
#[derive(Debug)]
pub enum StoreError {
    /// redb reported an error: I/O, a full disk, a failed commit.
    Redb(redb::Error),
    /// A stored record does not decode.
    Corrupt(String),
    /// Another process has the data file open.
    InUse(String),
    /// The file was written by a newer release.
    NewerSchema { found: u64 },
    /// The writer has stopped (the server is shutting down).
    Closed,
    /// The writer's queue is full.
    Busy,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Redb(e) => write!(f, "storage error: {e}"),
            StoreError::Corrupt(what) => write!(f, "data file is damaged: {what}"),
            StoreError::InUse(path) => write!(
                f,
                "the data file {path} is open in another process (is a tracker serving it?)"
            ),
            StoreError::NewerSchema { found } => write!(
                f,
                "the data file has schema version {found}, newer than the {} this tracker knows; \
                 run a newer tracker (the file was left untouched)",
                schema::SCHEMA_VERSION
            ),
            StoreError::Closed => write!(f, "the tracker is shutting down"),
            StoreError::Busy => write!(f, "the write queue is full"),
        }
    }
}

impl std::error::Error for StoreError {}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Redb(e.into())
            }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl From<StoreError> for Error {
    /// Storage failures reach a client as `unavailable`, or `internal` for damage; the detail is
    /// logged here, once, and never sent.
    fn from(e: StoreError) -> Error {
        match e {
            StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "storage");
                Error::internal()
            }
            StoreError::Busy | StoreError::Closed => {
                tracing::warn!(error = %e, "storage");
                Error::unavailable()
            }
            _ => {
                tracing::error!(error = %e, "storage");
                Error::unavailable()
            }
        }
    }
}

/// Tunables of the store; the defaults suit a small VPS.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Requests that may wait for the writer; past this, requests are answered `503`.
    pub queue_capacity: usize,
    /// Test hook: a switch that makes the disk fail.
    pub fault: Option<FaultSwitch>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            queue_capacity: 16 * 1024,
            fault: None,
        }
    }
}

/// The database handle that readers share with the writer. The writer replaces it when it
/// reopens the file after an I/O failure.
type DbSlot = RwLock<Option<Arc<Database>>>;

/// The open data file: a handle to the writer thread, the shared database, and the keyring.
pub struct Store {
    requests: SyncSender<Request>,
    db: Arc<DbSlot>,
    keyring: Arc<Keyring>,
    pending: Arc<RwLock<DedupBuffer>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

impl Store {
    /// Opens `path` (creating it if needed) and starts the writer thread.
    /// Returns the store and whether the file was created now.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<(Store, bool), StoreError> {
        let (db, created) = open::open_database(path, options.fault.as_ref())?;
        let db = Arc::new(db);
        let keyring = Arc::new(Keyring::default());
        keyring.replace(read::keyring_entries(&db.begin_read()?)?);
        let slot = Arc::new(RwLock::new(Some(db)));
        let pending = Arc::new(RwLock::new(DedupBuffer::default()));
        let (tx, rx) = mpsc::sync_channel(options.queue_capacity);
        let writer = writer::Writer::new(
            path.to_owned(),
            options.fault.clone(),
            slot.clone(),
            keyring.clone(),
            pending.clone(),
        );
        let handle = std::thread::Builder::new()
            .name("tracker-writer".into())
            .spawn(move || writer.run(&rx))
            .map_err(|e| StoreError::Redb(redb::Error::Io(e)))?;
        Ok((
            Store {
                requests: tx,
                db: slot,
                keyring,
                pending,
                writer: Mutex::new(Some(handle)),
                path: path.to_owned(),
            },
            created,
        ))
    }

    #[must_use]
    pub fn keyring(&self) -> &Arc<Keyring> {
        &self.keyring
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands a request to the writer without waiting; `Busy` when the queue is full.
    fn enqueue<T>(
        &self,
        make: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<oneshot::Receiver<Result<T, Error>>, Error> {
        let (reply, answer) = oneshot::channel();
        match self.requests.try_send(make(reply)) {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_)) => Err(StoreError::Busy.into()),
            Err(TrySendError::Disconnected(_)) => Err(StoreError::Closed.into()),
        }
    }

    /// Submits a write and waits for its commit: the answer comes only after the fsync.
    pub async fn write<T>(
        &self,
        make: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<T, Error> {
        let answer = self.enqueue(make)?;
        answer.await.map_err(|_| Error::from(StoreError::Closed))?
    }

    /// [`Store::write`] for synchronous callers (the command line).
    pub fn write_blocking<T>(
        &self,
        make: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<T, Error> {
        let answer = self.enqueue(make)?;
        answer
            .blocking_recv()
            .map_err(|_| Error::from(StoreError::Closed))?
    }

    /// Runs `f` on a read snapshot, on the calling thread: call it from a blocking context.
    ///
    /// # Panics
    /// If a thread panicked while holding the database slot's lock.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.read().expect("db slot lock poisoned").clone();
        let db = db.ok_or(StoreError::Closed)?;
        f(&db.begin_read()?)
    }

    /// What storing `event` in `space` would do now, without storing it: `(duplicate_of,
    /// matched)`. Blocking, like [`Store::read`].
    ///
    /// # Panics
    /// If a thread panicked while holding the dedup buffer's lock.
    pub fn judge_event(
        &self,
        space: u32,
        event: &ValidEvent,
        key: Option<&DedupKey>,
    ) -> Result<(Option<u64>, bool), StoreError> {
        // The buffer before the snapshot: an entry leaves the buffer only once the table in
        // every later snapshot has it (dedup_buffer.rs).
        let buffered = key.and_then(|k| {
            self.pending
                .read()
                .expect("dedup buffer lock poisoned")
                .get(&dedup_buffer::entry_key(space, k))
        });
        self.read(|txn| read::judge_event(txn, space, event, key, buffered))
    }

    /// Stops the writer after everything queued before this call is committed, and closes the
    /// data file cleanly. Later writes are answered `unavailable`.
    ///
    /// # Panics
    /// If a thread panicked while holding the writer handle's lock.
    pub fn close(&self) {
        // FIFO: everything sent before `Stop` is committed before the writer exits. The join
        // waits for that, and for the file to be closed.
        let _ = self.requests.send(Request::Stop);
        if let Some(handle) = self
            .writer
            .lock()
            .expect("writer handle lock poisoned")
            .take()
        {
            let _ = handle.join();
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}

/// `Code` for admin failures that are the caller's fault (unknown space, name taken).
pub(crate) fn admin_error(message: String) -> Error {
    Error::new(Code::InvalidField, message)
}
