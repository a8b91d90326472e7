//! A storage backend with a switch that makes the disk fail, for tests of what the tracker
//! answers when it does (full disk, I/O error): every write and fsync ([`FAIL_ALL`]), or only the
//! fsync ([`FAIL_SYNC`]: the pages and the header were written, and may well be in the file
//! when it is opened again).
//!
//! It wraps redb's own file backend, so everything else, locking included, is the real thing.

use std::fs::OpenOptions;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// Shared switch: [`WORKS`], [`FAIL_ALL`] or [`FAIL_SYNC`].
pub type FaultSwitch = Arc<AtomicU8>;
pub const WORKS: u8 = 0;
pub const FAIL_ALL: u8 = 1;
pub const FAIL_SYNC: u8 = 2;

#[derive(Debug)]
pub struct FaultyFile {
    inner: FileBackend,
    fail: FaultSwitch,
}

impl FaultyFile {
    pub fn open(path: &Path, fail: FaultSwitch) -> Result<FaultyFile, redb::DatabaseError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| redb::DatabaseError::Storage(redb::StorageError::Io(e)))?;
        Ok(FaultyFile {
            inner: FileBackend::new(file)?,
            fail,
        })
    }

    /// Fails if the switch fails `what` (a write, or with `sync` a flush).
    fn check(&self, sync: bool) -> Result<(), std::io::Error> {
        match self.fail.load(Ordering::SeqCst) {
            FAIL_ALL => Err(std::io::Error::other("injected storage failure")),
            FAIL_SYNC if sync => Err(std::io::Error::other("injected flush failure")),
            _ => Ok(()),
        }
    }
}

impl StorageBackend for FaultyFile {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.check(false)?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.check(true)?;
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.check(false)?;
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
