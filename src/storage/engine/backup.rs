//! `tracker backup DEST`: a consistent copy of the data file, safe while the server runs.
//!
//! The copy is made from one read snapshot, table by table, into a new redb file, so it holds
//! exactly the commits before the snapshot and nothing half-written, whatever the writer does
//! meanwhile. Copying the file's bytes instead would race the writer.
//!
//! A backup of an older release is brought to this release's schema before it is restored
//! ([`migrate_copy`]), as a server's open would bring the data file.

use std::path::Path;

use redb::{
    Database, Key, ReadTransaction, ReadableTable, TableDefinition, Value, WriteTransaction,
};

use super::open;
use crate::storage::error::StoreError;
use crate::storage::schema::{self, SCHEMA_VERSION, TableVisitor};

/// Free bytes a copy must leave on the data file's own filesystem, for the file to go on
/// growing: a copy that took the last of it would turn every new event away.
pub const ROOM_LEFT: u64 = 64 << 20;

/// Whether a copy of the data file (`file_bytes` long) fits on its own filesystem, which has
/// `free` bytes free, leaving [`ROOM_LEFT`]: the finished copy is at most as large as the file
/// (it holds the same rows, written afresh and compacted); while it is written it can briefly be
/// larger (a fresh redb file starts at 1 MiB), which [`ROOM_LEFT`] leaves room for.
///
/// # Errors
/// What is free, what the copy needs, and what to do, when it does not fit.
pub fn enough_room(free: u64, file_bytes: u64) -> Result<(), String> {
    let need = file_bytes.saturating_add(ROOM_LEFT);
    if free >= need {
        return Ok(());
    }
    let (down, up) = (|b: u64| b >> 20, |b: u64| b.div_ceil(1 << 20));
    Err(format!(
        "no room for a copy on the data file's own disk: {} MiB free, and a copy of the {} MiB \
         data file must leave {} MiB for it to grow ({} MiB in all); free some space, or write \
         the copy to another disk (`backup_dir` for scheduled backups, another DEST for \
         `tracker backup`)",
        down(free),
        up(file_bytes),
        up(ROOM_LEFT),
        up(need)
    ))
}

/// The folder a file's path names: its parent, or `.` for a bare file name (`tracker.redb`,
/// which Rust gives the parent `""`, a folder nothing can be read from).
#[must_use]
pub fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// [`enough_room`] for a copy at `dest` of the data file at `live`, when `dest` is on the
/// same filesystem as `live`; a copy on another filesystem cannot take the data file's room, and
/// if that one fills, the copy fails by itself and changes nothing.
///
/// # Errors
/// As [`enough_room`].
pub fn room_for_copy(live: &Path, dest: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = folder_of(dest);
    let (Ok(file), Ok(there)) = (std::fs::metadata(live), std::fs::metadata(dir)) else {
        // The copy itself says what is missing.
        return Ok(());
    };
    if file.dev() != there.dev() {
        return Ok(());
    }
    match crate::storage::engine::open::free_bytes(dir) {
        Some(free) => enough_room(free, file.len()),
        None => Ok(()),
    }
}

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

/// Brings a copy written by an older release (a backup being restored) up to this release's
/// schema, in place, by the numbered migrations a server's open runs; answers the version it
/// was at, or `None` when it needed none. Only a file that says it is an older tracker file is
/// migrated: one with no version (another program's redb file) is left as it is, for the check
/// that follows to refuse.
///
/// # Errors
/// What the open or a migration step met (a damaged page, a full disk).
pub fn migrate_copy(path: &Path) -> Result<Option<u64>, StoreError> {
    let found = match Database::builder().open_read_only(path) {
        Ok(copy) => open::stored_version(&redb::ReadableDatabase::begin_read(&copy)?)?,
        // Not a clean redb file: the check that follows says what it is.
        Err(_) => return Ok(None),
    };
    match found {
        Some(version) if version < SCHEMA_VERSION => {
            drop(open::open_database(path, None, open::COMMAND_CACHE_BYTES)?);
            Ok(Some(version))
        }
        _ => Ok(None),
    }
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
    let mut db = Database::builder().create_with_backend(backend)?;
    let txn = db.begin_write()?;
    let mut copy = Copy { src, dest: &txn };
    // Every table the schema declares: one added later cannot be left out of backups.
    schema::visit_every_table(&mut copy)?;
    let rows = schema::count_rows(src)?;
    txn.commit()?;
    // A new redb file starts with room to grow (1 MiB even for a few rows): compacted, the copy
    // is no larger than the data file it copies, as `enough_room` and docs/backups.md count.
    super::compact::compact_all(&mut db)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_is_in_the_current_folder() {
        assert_eq!(folder_of(Path::new("tracker.redb")), Path::new("."));
        assert_eq!(folder_of(Path::new("data/tracker.redb")), Path::new("data"));
        assert_eq!(folder_of(Path::new("/tracker.redb")), Path::new("/"));
    }

    #[test]
    fn a_copy_must_leave_room_for_the_data_file_to_grow() {
        let file = 300 << 20;
        assert_eq!(enough_room(file + ROOM_LEFT, file), Ok(()));
        let refused = enough_room(file + ROOM_LEFT - 1, file).unwrap_err();
        assert!(
            refused.contains("363 MiB free")
                && refused.contains("300 MiB data file")
                && refused.contains("364 MiB in all")
                && refused.contains("backup_dir"),
            "{refused}"
        );
    }

    #[test]
    fn a_copy_on_another_filesystem_or_beside_a_missing_file_is_not_checked() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.redb");
        assert_eq!(
            room_for_copy(&missing, &dir.path().join("copy.redb")),
            Ok(())
        );
        // /proc is a filesystem of its own, with no free space at all.
        let live = dir.path().join("t.redb");
        std::fs::write(&live, b"data").unwrap();
        assert_eq!(room_for_copy(&live, Path::new("/proc/copy.redb")), Ok(()));
    }
}
