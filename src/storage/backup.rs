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
use crate::storage::schema::{self, TableVisitor};

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
    let mut copy = Copy {
        src,
        dest: &txn,
        rows: 0,
    };
    // Every table the schema declares: one added later cannot be left out of backups.
    schema::visit_every_table(&mut copy)?;
    let rows = copy.rows;
    txn.commit()?;
    db.close()?;
    Ok(rows)
}

/// Copies each table it visits from `src` to `dest`, counting rows.
struct Copy<'a> {
    src: &'a ReadTransaction,
    dest: &'a WriteTransaction,
    rows: u64,
}

impl TableVisitor for Copy<'_> {
    fn visit<K: Key + 'static, V: Value + 'static>(
        &mut self,
        table: TableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        let from = self.src.open_table(table)?;
        let mut to = self.dest.open_table(table)?;
        for entry in from.iter()? {
            let (k, v) = entry?;
            to.insert(k.value(), v.value())?;
            self.rows += 1;
        }
        Ok(())
    }
}
