//! The test switch that makes the disk fail, read by the data file's backend (`file.rs`), for
//! tests of what the tracker answers when it does: every write and flush fails ([`FAIL_ALL`],
//! as a full disk or a dead device), or only the flush ([`FAIL_SYNC`]: the pages and the header
//! were written, and may well be in the file when it is opened again); or a write panics
//! ([`PANIC_ON_WRITE`]: a bug in the writer thread); or the flush works and the commit reports an
//! error after it ([`FAIL_AFTER_SYNC`]: what redb does when a step after its header flush fails,
//! such as shrinking the file, so the commit is on disk though `commit()` failed).

use std::sync::Arc;
use std::sync::atomic::AtomicU8;

/// Shared switch: [`WORKS`], [`FAIL_ALL`] or [`FAIL_SYNC`].
pub type FaultSwitch = Arc<AtomicU8>;
pub const WORKS: u8 = 0;
pub const FAIL_ALL: u8 = 1;
pub const FAIL_SYNC: u8 = 2;
pub const PANIC_ON_WRITE: u8 = 3;
pub const FAIL_AFTER_SYNC: u8 = 4;
