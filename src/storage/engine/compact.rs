//! `tracker compact`: gives the file's free pages back to the filesystem (redb's `compact`).
//!
//! Offline only. redb compacts through `&mut Database` with no transaction alive, and a running
//! server shares its `Database` with the reader threads and every snapshot they hold, so
//! compacting it would mean stopping reads and writes for the whole (slow) compaction: a stop
//! of the server by another name. The command says so instead, and a person stops the server,
//! compacts, and starts it again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::engine::open;
use crate::storage::error::StoreError;

/// The file's size before and after.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Compacted {
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// redb compacts as far as it can in one pass; a later pass can move what the first freed.
const MAX_PASSES: usize = 8;

/// Compacts the data file at `path`, which no server may have open. Opening it brings its
/// schema up to date first, as a server's open would.
pub fn compact_file(path: &Path) -> Result<Compacted, StoreError> {
    let size = |p: &Path| {
        p.metadata()
            .map(|m| m.len())
            .map_err(|error| StoreError::File {
                path: p.to_owned(),
                error,
            })
    };
    open::require_existing(path)?;
    let bytes_before = size(path)?;
    let mut db = open::open_database(path, None, open::COMMAND_CACHE_BYTES)?.db;
    compact_all(&mut db)?;
    drop(db);
    Ok(Compacted {
        bytes_before,
        bytes_after: size(path)?,
    })
}

/// Compacts `db`, which no transaction may be open on, as far as [`MAX_PASSES`] passes go: the
/// command's compaction, and a backup's of its fresh copy.
pub(super) fn compact_all(db: &mut redb::Database) -> Result<(), StoreError> {
    for _ in 0..MAX_PASSES {
        if !db.compact().map_err(|e| StoreError::Redb(e.into()))? {
            break;
        }
    }
    Ok(())
}
