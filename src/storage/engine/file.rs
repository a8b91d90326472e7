//! The data file's storage backend: redb's own file backend, watched for a failed flush.
//!
//! Why a backend of our own: redb reports a failed `write` and a failed `fsync` alike, as an I/O
//! error of the commit, but they mean different things. A failed write (a full disk, where ext4
//! and XFS report it) leaves the file as the last commit left it, and reopening the file is a
//! clean recovery. A failed fsync does not: Linux may have dropped the dirty pages and marked
//! them clean, so the file can then show data that never reached the disk, and a retry would be
//! acknowledged as a `duplicate` of a lost write. `PostgreSQL` learned this in 2018 and since then
//! stops (`data_sync_retry = off`); so does the tracker (`commit.rs`). This backend remembers
//! that a flush failed, so the writer can tell the two apart. It also counts the flushes that
//! worked: an error from a commit after one of its flushes worked means the commit may be on disk
//! (redb's header is written and flushed before the file is shrunk), which is no more a clean
//! recovery than a failed flush.
//!
//! It also reads the test switch (`fault.rs`) that makes writes or flushes fail on purpose.
//! Everything else, locking included, is redb's file backend.

use std::fs::OpenOptions;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use crate::storage::engine::fault::{
    FAIL_AFTER_SYNC, FAIL_ALL, FAIL_SYNC, FaultSwitch, PANIC_ON_WRITE,
};

/// What the flushes of one open file did, shared with the writer.
pub type FlushFailed = Arc<Flushes>;

#[derive(Debug, Default)]
pub struct Flushes {
    /// Set once a flush has failed; never cleared for that open file.
    failed: AtomicBool,
    /// How many flushes worked.
    done: AtomicU64,
}

impl Flushes {
    #[must_use]
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// How many flushes have worked: compared before and after a commit that failed, it tells
    /// whether that commit got as far as its flush.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
pub struct DataFile {
    inner: FileBackend,
    flush_failed: FlushFailed,
    fault: Option<FaultSwitch>,
}

impl DataFile {
    /// Opens (or creates) `path`. A new file is its owner's alone (mode `0600`): it holds the
    /// admin password's hash, the links and the Telegram ids. The caller's error names the path.
    pub fn open(
        path: &Path,
        fault: Option<FaultSwitch>,
    ) -> std::io::Result<(DataFile, FlushFailed)> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let flush_failed = FlushFailed::default();
        let inner = FileBackend::new(file).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok((
            DataFile {
                inner,
                flush_failed: flush_failed.clone(),
                fault,
            },
            flush_failed,
        ))
    }

    /// Fails if the test switch fails this kind of call (a write, or with `sync` a flush).
    fn injected(&self, sync: bool) -> Result<(), std::io::Error> {
        match self.fault.as_ref().map(|f| f.load(Ordering::SeqCst)) {
            Some(FAIL_ALL) => Err(std::io::Error::other("injected storage failure")),
            Some(FAIL_SYNC) if sync => Err(std::io::Error::other("injected flush failure")),
            Some(PANIC_ON_WRITE) if !sync => panic!("injected panic in a write"),
            _ => Ok(()),
        }
    }
}

/// Bytes this process has read from its data file: what redb's page cache did not hold. Its
/// growth per stored event says whether the writer's reads grow with the file (`/metrics`,
/// `tracker_data_file_read_bytes_total`). One data file per process, so one counter.
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);

impl StorageBackend for DataFile {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        BYTES_READ.fetch_add(out.len() as u64, Ordering::Relaxed);
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.injected(false)?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        let result = self.injected(true).and_then(|()| self.inner.sync_data());
        match result {
            Ok(()) => {
                self.flush_failed.done.fetch_add(1, Ordering::SeqCst);
                if self.fault.as_ref().map(|f| f.load(Ordering::SeqCst)) == Some(FAIL_AFTER_SYNC) {
                    return Err(std::io::Error::other("injected failure after a flush"));
                }
            }
            Err(_) => self.flush_failed.failed.store(true, Ordering::SeqCst),
        }
        result
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.injected(false)?;
        self.inner.write(offset, data)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
    fn try_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(s, e)
    }
    fn try_lock_shared_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(s, e)
    }
    fn lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(s, e)
    }
    fn lock_shared_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(s, e)
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(s, e)
    }
    fn query_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(s, e)
    }
}
