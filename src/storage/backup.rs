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

/// What a backup copied: the rows of every table (`schema::count_rows`, as `tracker check`
/// counts them) and the copy's size.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct BackupStats {
    pub rows: u64,
    pub bytes: u64,
}

/// Copies the snapshot `src` into a new data file at `dest`, which must not exist. The copy is
/// written beside it under a temporary name and linked into place only when complete, so a
/// failed backup (a full disk) leaves no half-written `dest`, and an existing `dest` is never
/// replaced, even one created meanwhile. The copy is its owner's alone (mode `0600`), like the
/// data file, and its temporary file is created new (`O_EXCL`, `O_NOFOLLOW`): a file or link
/// someone else put at that name is never written through.
pub fn backup(src: &ReadTransaction, dest: &Path) -> Result<BackupStats, StoreError> {
    let name = dest
        .file_name()
        .map_or_else(|| "backup".into(), |n| n.to_string_lossy().into_owned());
    let partial = dest.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    // Left over from a backup of an earlier process with the same id, or planted: unlinking a
    // link removes the link, never its target.
    let _ = std::fs::remove_file(&partial);
    let result = write_copy(src, &partial).and_then(|rows| {
        std::fs::hard_link(&partial, dest).map_err(|e| StoreError::Redb(redb::Error::Io(e)))?;
        Ok(rows)
    });
    let _ = std::fs::remove_file(&partial);
    let rows = result?;
    let bytes = dest.metadata().map_or(0, |m| m.len());
    Ok(BackupStats { rows, bytes })
}

/// The nice value of a copy made beside the server's load: the lowest priority there is. A copy
/// is seconds of inserting every row again; ingest on two cores is bound by its flushes, and the
/// copy still gets the time they leave.
const NICE: i32 = 19;

/// [`backup`] of a running server's snapshot: on a thread of its own at [`NICE`] (a thread's
/// priority cannot be raised again without privilege, so the reader thread that asked keeps
/// its own and waits), so that a scheduled backup takes the CPU ingest leaves, not a share of
/// ingest's.
pub fn beside_the_load(src: &ReadTransaction, dest: &Path) -> Result<BackupStats, StoreError> {
    std::thread::scope(|scope| {
        let copy = std::thread::Builder::new()
            .name("backup".into())
            .spawn_scoped(scope, || {
                if let Err(e) =
                    rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE)
                {
                    tracing::warn!(error = %e, "the backup runs at the server's priority");
                }
                backup(src, dest)
            })
            .map_err(|e| StoreError::Redb(redb::Error::Io(e)))?;
        copy.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn write_copy(src: &ReadTransaction, dest: &Path) -> Result<u64, StoreError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0))
        .open(dest)
        .map_err(|e| StoreError::Redb(redb::Error::Io(e)))?;
    let backend = redb::backends::FileBackend::new(file)
        .map_err(|e| StoreError::Redb(redb::Error::from(e)))?;
    let db = Database::builder().create_with_backend(backend)?;
    let txn = db.begin_write()?;
    let mut copy = Copy { src, dest: &txn };
    // Every table the schema declares: one added later cannot be left out of backups.
    schema::visit_every_table(&mut copy)?;
    let rows = schema::count_rows(src)?;
    txn.commit()?;
    db.close()?;
    Ok(rows)
}

/// Copies each table it visits from `src` to `dest`.
struct Copy<'a> {
    src: &'a ReadTransaction,
    dest: &'a WriteTransaction,
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
        }
        Ok(())
    }
}
