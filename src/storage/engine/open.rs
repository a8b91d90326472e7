//! Opening the data file: refuse a newer schema untouched, repair after a crash, migrate.
//!
//! Migrations are numbered `migrate_to_vN`, each in its own write transaction that also bumps the
//! stored version, so a crash between two steps resumes at the next one.

use std::collections::BTreeMap;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable};

use crate::domain::stats::Counts;
use crate::storage::attribution;
use crate::storage::engine::fault::FaultSwitch;
use crate::storage::engine::file::{DataFile, FlushFailed};
use crate::storage::error::StoreError;
use crate::storage::records;
use crate::storage::rollup::{self, DAY_ROWS};
use crate::storage::schema::{
    ADMIN, CLICK_HINTS, CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, DELIVERIES,
    DELIVERY_QUEUE, DELIVERY_STATES, DESTINATIONS, INBOX, LINKS, LINKS_BY_SPACE, META,
    META_INBOX_SEQ, META_SCHEMA_VERSION, META_SPACE_SEQ, REJECTION_COUNTS, REJECTIONS,
    SCHEMA_VERSION, SPACE_SETTINGS, SPACES, STATS, TG_TOUCHES,
};

/// The data file, open and up to date.
pub struct Opened {
    pub db: Database,
    /// Set by the backend if a flush of this open file fails (`file.rs`).
    pub flush_failed: FlushFailed,
    /// Whether the file was created by this open.
    pub created: bool,
    /// The filter of the dedup table's keys, when the open's redo built it (after a stop that
    /// was not clean): the store takes it instead of reading the whole table again.
    pub dedup_filter: Option<crate::storage::index::key_filter::GenFilter>,
}

/// How the server holds its data file open: enough page cache for the hot part of the indexes
/// (their branch pages and recent leaves) on a small VPS, bounded so memory stays flat however
/// large the file grows. No larger: the cache is the largest part of the server's resident
/// memory, which BENCHMARKS.md holds to a target.
pub const SERVER_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// A command that opens the file itself because no server has it (`tracker export`, `link
/// list`, ...): it reads what it needs about once, front to back, so a small cache keeps its
/// memory flat in the size of the file.
pub const COMMAND_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Opens (or creates) the data file at `path` and brings its schema up to date, with a page
/// cache of `cache_bytes`.
pub fn open_database(
    path: &Path,
    fault: Option<&FaultSwitch>,
    cache_bytes: usize,
) -> Result<Opened, StoreError> {
    open_up_to_date(path, fault, cache_bytes, true).map_err(|e| explain_no_space(path, e))
}

/// Opens the data file again in the process that had it open, after a failed commit: like
/// [`open_database`] but without deriving the dedup entries again, since that process's buffer
/// (`dedup_buffer.rs`) still holds every entry the table lacks. That derivation writes, and on
/// a full disk the open would fail with it, leaving the readers without a file: reads and
/// re-sent events are answered from a file reopened this way.
pub fn reopen_database(
    path: &Path,
    fault: Option<&FaultSwitch>,
    cache_bytes: usize,
) -> Result<Opened, StoreError> {
    open_up_to_date(path, fault, cache_bytes, false).map_err(|e| explain_no_space(path, e))
}

/// The free bytes (for an unprivileged user) on the filesystem that holds `path`, if it says.
#[must_use]
pub fn free_bytes(path: &Path) -> Option<u64> {
    let fs = rustix::fs::statvfs(path).ok()?;
    Some(fs.f_bavail.saturating_mul(fs.f_frsize))
}

/// A file not closed cleanly is repaired and its dedup entries derived again as it opens, and
/// both write new pages: on a full disk that open fails with only "No space left on device".
/// This says which file, how much is free, and how much to free. The need is
/// an upper bound: copy-on-write rewrites at most every page the file has.
fn explain_no_space(path: &Path, e: StoreError) -> StoreError {
    let no_space = matches!(&e, StoreError::Redb(redb::Error::Io(io))
        if io.kind() == std::io::ErrorKind::StorageFull);
    if !no_space {
        return e;
    }
    let free = free_bytes(path).map_or_else(|| "unknown".to_owned(), |b| b.to_string());
    let needs = path.metadata().map_or(0, |m| m.len()).max(1 << 20);
    StoreError::File {
        path: path.to_owned(),
        error: std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "no space left on its filesystem to bring it up to date after an unclean stop \
                 ({free} bytes free; it needs up to about {needs} bytes: the file's size, at \
                 least 1 MiB); free some space and start the tracker again ({e})"
            ),
        ),
    }
}

/// Whether `path` holds a data file. An empty file counts as none: redb writes a new file's
/// header before anything else, so an empty one is a creation that never got that far.
#[must_use]
pub fn holds_data(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.len() > 0)
}

/// Refuses a missing data file, naming the path and how to make one. Every command but
/// `serve` opens the file through this, so a wrong `--data` or config file is found out
/// instead of a new, empty data file being made where it points.
pub fn require_existing(path: &Path) -> Result<(), StoreError> {
    if holds_data(path) {
        Ok(())
    } else {
        Err(StoreError::NoDataFile(absolute(path)))
    }
}

/// Refuses when another process has the data file at `path` open (a server, even one whose
/// control socket is gone, or a command): redb holds a lock on the file while it is open. A
/// missing file, or one redb cannot read, is not in use.
pub fn require_unused(path: &Path) -> Result<(), StoreError> {
    match Database::builder().open_read_only(path) {
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
            Err(StoreError::InUse(path.display().to_string()))
        }
        _ => Ok(()),
    }
}

/// `path` from the root, as messages name it: a relative one depends on where the command ran
/// and, from a config file, where that file is.
fn absolute(path: &Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The error of a data file that cannot be opened or created; a missing directory is said as
/// such, with the command that makes it.
fn cannot_open(path: &Path, error: std::io::Error) -> StoreError {
    match path.parent() {
        Some(dir)
            if error.kind() == std::io::ErrorKind::NotFound
                && !dir.as_os_str().is_empty()
                && !dir.exists() =>
        {
            StoreError::NoDirectory(absolute(path))
        }
        _ => StoreError::File {
            path: path.to_owned(),
            error,
        },
    }
}

fn open_up_to_date(
    path: &Path,
    fault: Option<&FaultSwitch>,
    cache_bytes: usize,
    redo: bool,
) -> Result<Opened, StoreError> {
    let existed = holds_data(path);
    if existed {
        refuse_newer_schema(path)?;
    }
    let mut builder = Database::builder();
    builder.set_repair_callback(|session| {
        tracing::warn!(
            progress = format!("{:.0}%", session.progress() * 100.0),
            "data file was not closed cleanly; repairing"
        );
    });
    builder.set_cache_size(cache_bytes);
    let (file, flush_failed) =
        DataFile::open(path, fault.cloned()).map_err(|error| cannot_open(path, error))?;
    warn_if_others_can_read(path);
    let db = builder.create_with_backend(file).map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::InUse(path.display().to_string()),
        other => StoreError::from(other),
    })?;
    migrate(&db)?;
    if !existed {
        tracing::info!(
            path = %absolute(path).display(),
            schema_version = SCHEMA_VERSION,
            "created a new data file"
        );
    }
    // The writer's own reopen after a failed write passes `redo: false`: the redo writes, which
    // a full disk refuses, and the writer's buffers still hold every entry the file lacks.
    let mut dedup_filter = None;
    if redo {
        // The dedup redo also hands on the filter it built, kept only if its commit succeeds.
        redo_index(
            &db,
            |txn| {
                let redone = crate::storage::index::dedup_buffer::redo(txn)?;
                Ok(redone.map(|(written, filter)| {
                    dedup_filter = Some(filter);
                    written
                }))
            },
            "dedup entries derived again from the inbox",
        )?;
        redo_index(
            &db,
            crate::storage::index::fbclid_buffer::redo,
            "fbclid index entries derived again from the clicks",
        )?;
    }
    Ok(Opened {
        db,
        flush_failed,
        created: !existed,
        dedup_filter,
    })
}

/// Says so when users other than the owner may read the data file. An existing file's mode is
/// left as it is (its owner may have chosen it, for a backup tool's group, say), but the file
/// holds the admin password's hash, the links and the Telegram ids.
fn warn_if_others_can_read(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = path.metadata()
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "the data file can be read by other users; `chmod 600` it unless that is meant"
        );
    }
}

/// A data file that lives in memory only (`tracker serve --ephemeral`, for test suites): the
/// same schema and migrations, nothing written to disk, gone when the process ends.
pub fn open_in_memory() -> Result<Opened, StoreError> {
    let db = Database::builder().create_with_backend(redb::backends::InMemoryBackend::new())?;
    migrate(&db)?;
    Ok(Opened {
        db,
        flush_failed: FlushFailed::default(),
        created: true,
        dedup_filter: None,
    })
}

/// Writes the index entries that were only in the writer's memory when the file was last closed
/// without a clean stop, with `redo` (`dedup_buffer.rs`, `fbclid_buffer.rs`), and logs how many
/// with `what`.
fn redo_index(
    db: &Database,
    redo: impl FnOnce(&redb::WriteTransaction) -> Result<Option<u64>, StoreError>,
    what: &'static str,
) -> Result<(), StoreError> {
    let txn = db.begin_write()?;
    match redo(&txn)? {
        None => txn.abort()?,
        Some(written) => {
            txn.commit()?;
            tracing::info!(entries = written, "{what}");
        }
    }
    Ok(())
}

/// Reads the schema version without writing anything; refuses a file from a newer release.
pub(crate) fn refuse_newer_schema(path: &Path) -> Result<(), StoreError> {
    let ro = match Database::builder().open_read_only(path) {
        Ok(ro) => ro,
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
            return Err(StoreError::InUse(path.display().to_string()));
        }
        // Not cleanly closed (needs repair, which read-only cannot do) or not readable this way:
        // the read-write open below repairs it, and the version is checked again after that.
        Err(_) => return Ok(()),
    };
    let found = stored_version(&ro.begin_read()?)?;
    match found {
        Some(v) if v > SCHEMA_VERSION => Err(StoreError::NewerSchema {
            found: v,
            known: SCHEMA_VERSION,
        }),
        _ => Ok(()),
    }
}

pub(super) fn stored_version(txn: &redb::ReadTransaction) -> Result<Option<u64>, StoreError> {
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(meta.get(META_SCHEMA_VERSION)?.map(|v| v.value()))
}

/// Brings the file to `SCHEMA_VERSION`: a file of an older version one numbered step at a time,
/// each logged; a new file (no version yet) with every step in one transaction, so it is made
/// at the current version at once, or not at all.
fn migrate(db: &Database) -> Result<(), StoreError> {
    let Some(mut version) = stored_version(&db.begin_read()?)? else {
        let txn = db.begin_write()?;
        for from in 0..SCHEMA_VERSION {
            migrate_from(&txn, from)?;
        }
        txn.open_table(META)?
            .insert(META_SCHEMA_VERSION, SCHEMA_VERSION)?;
        txn.commit()?;
        return Ok(());
    };
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    while version < SCHEMA_VERSION {
        let txn = db.begin_write()?;
        migrate_from(&txn, version)?;
        version += 1;
        txn.open_table(META)?.insert(META_SCHEMA_VERSION, version)?;
        txn.commit()?;
        tracing::info!(version, "data file schema migrated");
    }
    Ok(())
}

/// The step from `version` to the next, in `txn`; the caller stores the new version.
fn migrate_from(txn: &redb::WriteTransaction, version: u64) -> Result<(), StoreError> {
    match version {
        0 => migrate_to_v1(txn),
        // Nothing to convert: see schema.rs (2: event records version 2; 7: the fbclid
        // buffer's redo mark and uids that begin with their time; 19: destination records
        // version 5, version 4 read as it is; 20: split links, their clicks' variants and
        // rows by variant, which only split links write; 22: merged dedup runs, which only a
        // merge writes; 23: user records version 2, version 1 read as it is, and the admin
        // page's setting that requires a second factor).
        1 | 6 | 18 | 19 | 21 | 22 => Ok(()),
        2 => migrate_to_v3(txn),
        3 => migrate_to_v4(txn),
        4 => migrate_to_v5(txn),
        5 => migrate_to_v6(txn),
        7 => migrate_to_v8(txn),
        8 => migrate_to_v9(txn),
        9 => migrate_to_v10(txn),
        10 => migrate_to_v11(txn),
        11 => migrate_to_v12(txn),
        12 => migrate_to_v13(txn),
        13 => migrate_to_v14(txn),
        14 => migrate_to_v15(txn),
        15 => migrate_to_v16(txn),
        16 => migrate_to_v17(txn),
        17 => migrate_to_v18(txn),
        20 => migrate_to_v21(txn),
        23 => migrate_to_v24(txn),
        _ => unreachable!("every version below SCHEMA_VERSION has a migration"),
    }
}

/// Version 1: every table, empty, and the counters at zero.
fn migrate_to_v1(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META)?;
    meta.insert(META_INBOX_SEQ, 0)?;
    meta.insert(META_SPACE_SEQ, 0)?;
    txn.open_table(SPACES)?;
    txn.open_table(CREDENTIALS)?;
    txn.open_table(INBOX)?;
    txn.open_table(crate::storage::schema::DEDUP_V15)?;
    txn.open_table(CLICKS)?;
    txn.open_table(CLICKS_BY_FBCLID)?;
    txn.open_table(CLICKS_BY_TG)?;
    Ok(())
}

/// Version 3: the rejection log's tables, empty, and the stats rollup, counted from every click
/// and event the file holds by the same rule the writer counts new ones with.
fn migrate_to_v3(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(REJECTIONS)?;
    txn.open_table(REJECTION_COUNTS)?;
    rollup::rebuild_in(txn, Err)
}

/// Version 4: the tracking links' tables, empty.
fn migrate_to_v4(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(LINKS)?;
    txn.open_table(LINKS_BY_SPACE)?;
    Ok(())
}

/// Version 6: the admin page's table, empty (no password yet: `serve` makes one).
fn migrate_to_v6(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(ADMIN)?;
    Ok(())
}

/// Version 8: the space settings' table, empty (every space at the defaults), and each Telegram
/// user's first and last bound click, derived from `CLICKS_BY_TG` and the clicks' binding times
/// by the rule every binding from now on keeps (`storage/attribution.rs`).
fn migrate_to_v8(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(SPACE_SETTINGS)?;
    let mut touches = txn.open_table(TG_TOUCHES)?;
    let (clicks, by_tg) = (txn.open_table(CLICKS)?, txn.open_table(CLICKS_BY_TG)?);
    attribution::every_touch(&clicks, &by_tg, |key, touch| {
        if let Some(touch) = touch {
            touches.insert(key, records::encode(&touch).as_slice())?;
        }
        Ok(())
    })
}

/// Version 9: conversions out, empty: destinations, their delivery states, deliveries and
/// queue, and the visitors' hints of link clicks.
fn migrate_to_v9(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(DESTINATIONS)?;
    txn.open_table(DELIVERY_STATES)?;
    txn.open_table(DELIVERIES)?;
    txn.open_table(DELIVERY_QUEUE)?;
    txn.open_table(CLICK_HINTS)?;
    Ok(())
}

/// Version 10: the marketer's numbers. Every deposit of the inbox, in commit order, is decided a
/// first deposit or not by the rule the writer decides new ones with (`storage/first_deposit.rs`;
/// its user as its click is bound now, since when the click was bound is not what decides), and
/// each first one is rewritten marked. Then `STATS` is counted again from the inbox and the
/// clicks, which also counts the first deposits. `COSTS` is created empty.
fn migrate_to_v10(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::domain::event::EventKind;
    use crate::storage::first_deposit::Depositors;
    use crate::storage::schema::{FIRST_DEPOSITS_BY_CLICK, FIRST_DEPOSITS_BY_TG};
    let mut depositors = Depositors {
        by_tg: txn.open_table(FIRST_DEPOSITS_BY_TG)?,
        by_click: txn.open_table(FIRST_DEPOSITS_BY_CLICK)?,
    };
    let mut inbox = txn.open_table(INBOX)?;
    let clicks = txn.open_table(CLICKS)?;
    let mut firsts = Vec::new();
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let mut event: records::EventRecord = records::decode(bytes.value())?;
        if event.kind != EventKind::Deposit as u8 {
            continue;
        }
        let click = match (&event.uid, event.matched) {
            (Some(uid), true) => match clicks.get((space, uid.as_str()))? {
                Some(c) => Some(records::decode::<records::ClickRecord>(c.value())?),
                None => None,
            },
            _ => None,
        };
        let user = event.tg_id.or(click.as_ref().and_then(|c| c.tg_id));
        let uid = click.as_ref().and(event.uid.as_deref());
        if depositors.decide(space, user, uid, inbox_id)? {
            event.first_deposit = true;
            firsts.push(((space, inbox_id), records::encode(&event)));
        }
    }
    for (key, bytes) in firsts {
        inbox.insert(key, bytes.as_slice())?;
    }
    txn.open_table(crate::storage::schema::COSTS_V10)?;
    drop((inbox, clicks, depositors));
    rollup::rebuild_in(txn, Err)
}

/// Version 11: each campaign's drill-down rows, its links, ads and ad sets (`STATS`, dimensions
/// 5 to 7). `STATS` is counted again from the inbox and the clicks by the rule the writer counts
/// with, which counts the rows already there the same and adds the new ones.
fn migrate_to_v11(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    rollup::rebuild_in(txn, Err)
}

/// Version 12: the stats rollup's block rows (`rollup::BLOCK_ROWS`), each the sum of
/// `BLOCK_DAYS` day rows, counted again with everything else by the rule the writer counts with.
fn migrate_to_v12(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    rollup::rebuild_in(txn, Err)
}

/// Version 13: event ids, and destination records that may be version 2 (read as they are,
/// `records/delivery.rs`). The file's random salt, from which the `event_id` of every event
/// already stored is derived (`domain::event::EventId::derived`), so that no event is
/// rewritten. Written only if absent: this step runs once per file, and the salt must never
/// change once an id derived from it may have been sent.
fn migrate_to_v13(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::storage::schema::{META_EVENT_ID_SALT_HIGH, META_EVENT_ID_SALT_LOW};
    let mut meta = txn.open_table(META)?;
    if meta.get(META_EVENT_ID_SALT_HIGH)?.is_none() {
        let salt = crate::domain::credential::random_bits();
        meta.insert(META_EVENT_ID_SALT_HIGH, (salt >> 64) as u64)?;
        meta.insert(META_EVENT_ID_SALT_LOW, salt as u64)?;
    }
    drop(meta);
    migrate_channels(txn)
}

/// Version 14: costs per campaign, ad set and ad. Each cost of the campaign-keyed table moves to
/// the new one as the campaign's (ad set "", ad ""), set by hand, its amount and currency as
/// they were; the old table is deleted. Space settings need nothing: Meta's ad account, token
/// and address are stored by name like every setting. Destination records may from now on be
/// version 3 (a Google Ads destination's fields, `records/delivery.rs`); those there are read
/// as they are.
fn migrate_to_v14(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::storage::schema::{COSTS, COSTS_V10};
    let mut costs = txn.open_table(COSTS)?;
    {
        let old = txn.open_table(COSTS_V10)?;
        for entry in old.iter()? {
            let (key, bytes) = entry?;
            let (space, day, campaign) = key.value();
            let mut cost: records::CostRecord = records::decode(bytes.value())?;
            cost.source = crate::domain::cost::Source::Hand.code();
            costs.insert(
                (space, day, campaign, "", ""),
                records::encode(&cost).as_slice(),
            )?;
        }
    }
    drop(costs);
    txn.delete_table(COSTS_V10)?;
    Ok(())
}

/// Version 15: `COST_SUMS`, the sums of every cost by campaign and for the whole space, by day
/// and by blocks of days (`storage/cost_sums.rs`), built from `COSTS`.
fn migrate_to_v15(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::storage::cost_sums;
    use crate::storage::schema::{COST_SUMS, COSTS};
    let all = cost_sums::all_sums(&txn.open_table(COSTS)?)?;
    cost_sums::rewrite(&mut txn.open_table(COST_SUMS)?, &all)
}

/// Version 16: `DEDUP` by generation. The entries of `DEDUP_V15` move in key order,
/// [`GEN_ENTRIES`](crate::storage::index::dedup_buffer::GEN_ENTRIES) to a generation (each one
/// a run of keys written one after another), and the old table is deleted.
fn migrate_to_v16(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    dedup_to_generations(txn, crate::storage::index::dedup_buffer::GEN_ENTRIES)
}

/// Version 17: every destination's row rewritten as `DestinationRecord` version 4, its
/// settings one tagged value read from the columns of its kind.
fn migrate_to_v17(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::storage::records::{DestinationRecord, decode, encode};
    use crate::storage::schema::DESTINATIONS;
    let mut table = txn.open_table(DESTINATIONS)?;
    let mut rows = Vec::new();
    for entry in table.iter()? {
        let (no, bytes) = entry?;
        rows.push((no.value(), decode::<DestinationRecord>(bytes.value())?));
    }
    for (no, record) in rows {
        table.insert(no, encode(&record).as_slice())?;
    }
    Ok(())
}

/// Version 18: `LINK_VIEWS`, empty. Link records of versions 1 and 2 are read as they are
/// (no allowed origins).
fn migrate_to_v18(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(crate::storage::schema::LINK_VIEWS)?;
    Ok(())
}

/// Version 21: `USERS`; the `admin` password hash, if one was set, becomes user `admin`, an
/// owner, and leaves `ADMIN`. `AUDIT`, empty.
fn migrate_to_v21(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::domain::user::{FIRST_OWNER, Role};
    use crate::storage::records::UserRecord;
    use crate::storage::schema::{ADMIN_PASSWORD, AUDIT, USERS};
    txn.open_table(AUDIT)?;
    let mut users = txn.open_table(USERS)?;
    let mut admin = txn.open_table(ADMIN)?;
    let Some(hash) = admin.remove(ADMIN_PASSWORD)?.map(|v| v.value().to_vec()) else {
        return Ok(());
    };
    let hash = String::from_utf8(hash)
        .map_err(|_| StoreError::Corrupt("the admin password hash is not text".to_owned()))?;
    let owner = UserRecord {
        role: Role::Owner.stored(),
        spaces: Vec::new(),
        password_hash: Some(hash),
        invitation: None,
        second_factor: None,
    };
    users.insert(FIRST_OWNER, records::encode(&owner).as_slice())?;
    Ok(())
}

/// Version 24: `CURRENCY_RATES`; each space's `currency_rates` setting, where set, becomes its
/// first typed set of rates, from day 0, so every day before keeps the rates it was shown at.
fn migrate_to_v24(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::domain::rate_history::RateSource;
    use crate::storage::schema::CURRENCY_RATES;
    let mut rates = txn.open_table(CURRENCY_RATES)?;
    let settings = txn.open_table(SPACE_SETTINGS)?;
    for entry in settings.iter()? {
        let space = entry?.0.value();
        let typed = crate::storage::attribution::settings(&settings, space)?.currency_rates;
        if !typed.0.is_empty() {
            rates.insert((space, RateSource::Typed as u8, 0), typed.text().as_str())?;
        }
    }
    Ok(())
}

fn dedup_to_generations(txn: &redb::WriteTransaction, per_gen: usize) -> Result<(), StoreError> {
    use crate::storage::index::dedup_buffer::table_key;
    use crate::storage::schema::DEDUP_V15;
    let mut dedup = txn.open_table(DEDUP)?;
    {
        let old = txn.open_table(DEDUP_V15)?;
        for (i, entry) in old.iter()?.enumerate() {
            let (key, value) = entry?;
            let generation = u32::try_from(i / per_gen).unwrap_or(u32::MAX);
            dedup.insert(table_key(generation, &key.value()), value.value())?;
        }
    }
    drop(dedup);
    txn.delete_table(DEDUP_V15)?;
    Ok(())
}

/// Version 13 also: Telegram channels' tables, empty. Link records of version 1 are read as
/// they are (no channel).
fn migrate_channels(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    use crate::storage::schema::{
        CHANNEL_MEMBERS, CHANNEL_STATES, CHANNEL_STATS, INVITE_POOL, INVITES, INVITES_HANDED,
        TELEGRAM_OFFSETS,
    };
    txn.open_table(INVITE_POOL)?;
    txn.open_table(INVITES)?;
    txn.open_table(INVITES_HANDED)?;
    txn.open_table(CHANNEL_MEMBERS)?;
    txn.open_table(CHANNEL_STATES)?;
    txn.open_table(TELEGRAM_OFFSETS)?;
    txn.open_table(CHANNEL_STATS)?;
    Ok(())
}

/// Version 5: the stats rollup's day rows, each the sum of its day's hour rows. Day rows already
/// there (written by `migrate_to_v3`'s rollup, which counts into both) are removed first, so
/// they are counted once whichever version the file started at.
fn migrate_to_v5(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    let mut table = txn.open_table(STATS)?;
    table.retain(|(_, dimension, _, _), _| dimension & DAY_ROWS == 0)?;
    let mut days: BTreeMap<rollup::RowKey, Counts> = BTreeMap::new();
    for entry in table.iter()? {
        let (key, bytes) = entry?;
        let (space, dimension, group, hour) = key.value();
        let counts = rollup::counts_in(bytes.value())?;
        let day = (
            space,
            dimension | DAY_ROWS,
            group.to_owned(),
            rollup::day_of(hour),
        );
        days.entry(day)
            .or_default()
            .add(&counts)
            .map_err(StoreError::Corrupt)?;
    }
    for ((space, dimension, group, day), counts) in days {
        table.insert(
            (space, dimension, group.as_str(), day),
            records::encode(&rollup::record_of(&counts)).as_slice(),
        )?;
    }
    Ok(())
}

/// A new data file in a temporary directory, for unit tests: the directory (keep it alive) and
/// the database.
#[cfg(test)]
pub(crate) fn test_database() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = open_database(&dir.path().join("t.redb"), None, SERVER_CACHE_BYTES)
        .expect("a new data file")
        .db;
    (dir, db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_then_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        let opened = open_database(&path, None, SERVER_CACHE_BYTES).unwrap();
        assert!(opened.created);
        drop(opened);
        assert!(
            !open_database(&path, None, SERVER_CACHE_BYTES)
                .unwrap()
                .created
        );
    }

    /// Version 16's step: the old table's entries, in key order, `per_gen` to a generation,
    /// each with its value; the old table gone.
    #[test]
    fn dedup_entries_move_to_generations_in_key_order() {
        use crate::storage::index::dedup_buffer::{Earlier, EntryKey};
        use crate::storage::schema::DEDUP_V15;
        use redb::{ReadableDatabase as _, TableHandle as _};
        let (_dir, db) = test_database();
        let old: Vec<(EntryKey, Earlier)> = (0..25u64)
            .map(|i| {
                (
                    (1 + (i % 2) as u32, 2, u128::from(i * 7919 % 101)),
                    (i, i * 10),
                )
            })
            .collect();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(DEDUP_V15).unwrap();
            for (k, v) in &old {
                t.insert(k, v).unwrap();
            }
        }
        dedup_to_generations(&txn, 10).unwrap();
        txn.commit().unwrap();
        let txn = db.begin_read().unwrap();
        let moved: Vec<_> = txn
            .open_table(DEDUP)
            .unwrap()
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value(), v.value())
            })
            .collect();
        let mut sorted = old.clone();
        sorted.sort_unstable();
        let want: Vec<_> = sorted
            .iter()
            .enumerate()
            .map(|(i, ((s, r, d), v))| (((i / 10) as u32, *s, *r, *d), *v))
            .collect();
        assert_eq!(moved, want);
        let names: Vec<String> = txn
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_owned())
            .collect();
        assert!(!names.contains(&"dedup".to_owned()), "{names:?}");
    }

    /// Writes `version` as the file's schema version, as a release that wrote it would have.
    fn stamp_version(path: &std::path::Path, version: u64) {
        let db = open_database(path, None, SERVER_CACHE_BYTES).unwrap().db;
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(META_SCHEMA_VERSION, version)
            .unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_and_the_file_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        {
            stamp_version(&path, SCHEMA_VERSION + 1);
        }
        let before = std::fs::read(&path).unwrap();
        let err = open_database(&path, None, SERVER_CACHE_BYTES)
            .err()
            .expect("refused");
        assert!(
            matches!(err, StoreError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1)
        );
        assert!(err.to_string().contains("newer"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the file must not be touched"
        );
    }

    #[test]
    fn a_version_1_file_is_brought_to_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        {
            stamp_version(&path, 1);
        }
        let opened = open_database(&path, None, SERVER_CACHE_BYTES).unwrap();
        assert!(!opened.created);
        let db = opened.db;
        assert_eq!(
            stored_version(&db.begin_read().unwrap()).unwrap(),
            Some(SCHEMA_VERSION)
        );
    }

    /// A user who points `data` into a directory that does not exist reads which path failed,
    /// once, and how to make the directory.
    #[test]
    fn a_data_file_in_a_missing_directory_is_named_once_with_mkdir() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let path = missing.join("t.redb");
        let err = open_database(&path, None, SERVER_CACHE_BYTES)
            .err()
            .expect("must fail")
            .to_string();
        assert_eq!(err.matches(&path.display().to_string()).count(), 1, "{err}");
        assert!(
            err.contains(&format!("create it with `mkdir -p {}`", missing.display())),
            "{err}"
        );
        // Just inside: with the directory there, the file is made.
        std::fs::create_dir(&missing).unwrap();
        assert!(
            open_database(&path, None, SERVER_CACHE_BYTES)
                .unwrap()
                .created
        );
    }

    /// A file that is there but cannot be opened (here: a directory in its place) keeps the
    /// system's reason, with the path once.
    #[test]
    fn a_data_file_that_cannot_be_opened_keeps_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::create_dir(&path).unwrap();
        let err = open_database(&path, None, SERVER_CACHE_BYTES)
            .err()
            .expect("must fail")
            .to_string();
        assert_eq!(err.matches(&path.display().to_string()).count(), 1, "{err}");
        assert!(err.contains("Is a directory"), "{err}");
    }

    /// Commands other than `serve` refuse a missing or empty file, naming it and `tracker
    /// serve`; a file with data passes.
    #[test]
    fn require_existing_refuses_a_missing_or_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        let err = require_existing(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("`tracker serve` creates"), "{err}");
        std::fs::write(&path, b"").unwrap();
        assert!(require_existing(&path).is_err());
        std::fs::remove_file(&path).unwrap();
        drop(open_database(&path, None, SERVER_CACHE_BYTES).unwrap());
        require_existing(&path).unwrap();
    }

    /// A new file is made at the current version in one step, with the tables a file of
    /// version 2 (the oldest fixture) has once migrated version by version.
    #[test]
    fn a_new_file_is_made_at_the_current_version_with_every_table() {
        use redb::TableHandle as _;
        let tables = |path: &Path| {
            let db = open_database(path, None, SERVER_CACHE_BYTES).unwrap().db;
            let txn = db.begin_read().unwrap();
            assert_eq!(stored_version(&txn).unwrap(), Some(SCHEMA_VERSION));
            let mut names: Vec<String> = txn
                .list_tables()
                .unwrap()
                .map(|t| t.name().to_owned())
                .collect();
            names.sort();
            names
        };
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.redb");
        let stepped = dir.path().join("stepped.redb");
        let v2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2.redb");
        std::fs::copy(v2, &stepped).unwrap();
        assert_eq!(tables(&new), tables(&stepped));
    }

    #[test]
    fn a_second_open_reports_the_file_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        let _open = open_database(&path, None, SERVER_CACHE_BYTES).unwrap();
        assert!(matches!(
            open_database(&path, None, SERVER_CACHE_BYTES),
            Err(StoreError::InUse(_))
        ));
    }
}
