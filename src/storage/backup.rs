//! `tracker backup DEST`: a consistent copy of the data file, safe while the server runs.
//!
//! The copy is made from one read snapshot, table by table, into a new redb file, so it holds
//! exactly the commits before the snapshot and nothing half-written, whatever the writer does
//! meanwhile. Copying the file's bytes instead would race the writer.

use std::path::Path;

use redb::{
    Database, Key, ReadTransaction, ReadableTable, TableDefinition, Value, WriteTransaction,
};

use crate::storage::StoreError;
use crate::storage::schema::{
    CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, INBOX, META, SPACES,
};

/// Rows copied per table, for the caller to report.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct BackupStats {
    pub rows: u64,
    pub bytes: u64,
}

/// Copies the snapshot `src` into a new data file at `dest`, which must not exist. The copy is
/// written beside it under a temporary name and linked into place only when complete, so a
/// failed backup (a full disk) leaves no half-written `dest`, and an existing `dest` is never
/// replaced, even one created meanwhile.
pub fn backup(src: &ReadTransaction, dest: &Path) -> Result<BackupStats, StoreError> {
    let name = dest
        .file_name()
        .map_or_else(|| "backup".into(), |n| n.to_string_lossy().into_owned());
    let partial = dest.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let result = write_copy(src, &partial).and_then(|rows| {
        std::fs::hard_link(&partial, dest).map_err(|e| StoreError::Redb(redb::Error::Io(e)))?;
        Ok(rows)
    });
    let _ = std::fs::remove_file(&partial);
    let rows = result?;
    let bytes = dest.metadata().map_or(0, |m| m.len());
    Ok(BackupStats { rows, bytes })
}

fn write_copy(src: &ReadTransaction, dest: &Path) -> Result<u64, StoreError> {
    let db = Database::create(dest)?;
    let txn = db.begin_write()?;
    let mut rows = 0;
    rows += copy(src, &txn, META)?;
    rows += copy(src, &txn, SPACES)?;
    rows += copy(src, &txn, CREDENTIALS)?;
    rows += copy(src, &txn, INBOX)?;
    rows += copy(src, &txn, DEDUP)?;
    rows += copy(src, &txn, CLICKS)?;
    rows += copy(src, &txn, CLICKS_BY_FBCLID)?;
    rows += copy(src, &txn, CLICKS_BY_TG)?;
    txn.commit()?;
    db.close()?;
    Ok(rows)
}

fn copy<K: Key + 'static, V: Value + 'static>(
    src: &ReadTransaction,
    dest: &WriteTransaction,
    table: TableDefinition<K, V>,
) -> Result<u64, StoreError> {
    let from = src.open_table(table)?;
    let mut to = dest.open_table(table)?;
    let mut rows = 0;
    for entry in from.iter()? {
        let (k, v) = entry?;
        to.insert(k.value(), v.value())?;
        rows += 1;
    }
    Ok(rows)
}
