//! `tracker check`: the tracker's invariants over one read snapshot, and `--repair` of the
//! derivable ones. Both ways in (a file opened by the command, and the control socket of a running
//! server) call [`check`] and [`repair`]; nothing else knows the rules.
//!
//! What is checked, beyond redb's own page checksums (`Database::check_integrity`, which the
//! command runs first when it has the file to itself):
//! - every record decodes;
//! - every index entry has its row, and every row its index entries: `dedup` → `inbox`,
//!   `clicks_by_fbclid` and `clicks_by_tg` → `clicks`, `credentials` and `space_settings` →
//!   `spaces`, `links` ↔ `links_by_space`, and `tg_touches` holds each Telegram user's first and
//!   last bound click as `clicks_by_tg` and the clicks say;
//! - the first-deposit tables agree with the deposits of the inbox and each deposit's
//!   `first_deposit` mark (`first_deposits.rs`);
//! - counters agree with what they count: `inbox_seq` ≥ the largest `inbox_id`, `space_seq` ≥
//!   the largest space number, `rejection_counts` past every stored rejection, and `stats` (hour
//!   and day rows) equal to a count of every click, binding and event made by the writer's rule.
//!
//! A dedup entry may be missing from the table for an event from `dedup_redo_from` on: it lives
//! in the writer's memory (`dedup_buffer.rs`) and is derived from the inbox at the next open.
//! Likewise a `clicks_by_fbclid` entry for a click whose uid's time is `fbclid_redo_from` or
//! later (`fbclid_buffer.rs`), derived from the clicks.
//! And an entry of the windowed rule may be missing once it can no longer match (the
//! [`Expiry`] the caller gives: its clock and `dedup_window`): retention prunes those.
//!
//! Derivable means computed from other rows: indexes, the rollup, counters, `tg_touches`. `repair` rewrites
//! only those; a record that does not decode, or a credential of a space that does not exist, is
//! reported and left for a person (restore it from a backup).
//!
//! The check reads the whole file once, looking each index entry up by key, so its memory is
//! the stats rollup and the findings, not the file.
//!
//! The checks, a file per kind: `spaces.rs` (spaces, credentials, settings, links), `inbox.rs`
//! (events and dedup), `clicks.rs` (clicks, their indexes, `tg_touches`), `first_deposits.rs`,
//! `counters.rs` (the stats rollup, `rejection_counts`); `findings.rs` holds what they find,
//! `fixes.rs` what `repair` writes.

mod clicks;
mod counters;
mod findings;
mod first_deposits;
mod fixes;
mod inbox;
mod spaces;

use std::path::Path;

use redb::ReadTransaction;

use self::clicks::{check_clicks, check_touches};
use self::counters::{check_cost_sums, check_rejections, check_stats};
use self::findings::Checker;
pub use self::findings::{Finding, Report};
use self::first_deposits::check_first_deposits;
use self::inbox::check_inbox;
use self::spaces::{check_credentials, check_links, check_settings, check_spaces};
use crate::domain::dedup::Expiry;
use crate::storage::schema::{
    self, META, META_DEDUP_REDO_FROM, META_FBCLID_REDO_FROM, META_INBOX_SEQ, META_SCHEMA_VERSION,
    META_SPACE_SEQ, SCHEMA_VERSION,
};
use crate::storage::{StoreError, open};

/// Checks every invariant of the snapshot `txn` as of `expiry`; never writes.
pub fn check(txn: &ReadTransaction, expiry: Expiry) -> Result<Report, StoreError> {
    let c = run(txn, expiry)?;
    Ok(Report {
        redb_integrity: None,
        rows: c.rows,
        findings: c.findings,
        repaired: Vec::new(),
    })
}

/// Checks, then rewrites what is derivable in one write transaction, then checks again: the
/// report's `repaired` is what was fixed, its `findings` what is left.
pub fn repair(db: &redb::Database, expiry: Expiry) -> Result<Report, StoreError> {
    let first = run(&redb::ReadableDatabase::begin_read(db)?, expiry)?;
    let repaired: Vec<Finding> = first
        .findings
        .iter()
        .filter(|f| f.repairable)
        .cloned()
        .collect();
    if !first.fixes.is_empty() {
        let txn = db.begin_write()?;
        fixes::apply(&txn, first.fixes)?;
        txn.commit()?;
    }
    let mut report = check(&redb::ReadableDatabase::begin_read(db)?, expiry)?;
    report.repaired = repaired;
    Ok(report)
}

/// `tracker check` on a file no server has open (the data file of a stopped server, or a
/// backup): redb's page check, which needs the file to itself, then [`check`], or with `repair`
/// the schema brought up to date (as a server's open does) and [`repair`].
///
/// redb panics on some damaged pages (a page of an unknown type) instead of answering an error;
/// that panic is caught here and answered as [`StoreError::Corrupt`], so `tracker check` and
/// `tracker restore` say the file is damaged rather than crash.
pub fn check_file(path: &Path, repair_it: bool, expiry: Expiry) -> Result<Report, StoreError> {
    quiet_panics_on_this_thread(true);
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_file_unguarded(path, repair_it, expiry)
    }));
    quiet_panics_on_this_thread(false);
    checked.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no reason given");
        Err(StoreError::Corrupt(format!(
            "reading it stopped at a page that is not what it should be ({why})"
        )))
    })
}

thread_local! {
    /// Set while [`check_file`] runs on this thread: a panic here is redb's answer to a damaged
    /// page, caught and reported, not a message for stderr.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Quiets (or no longer) the panic message of this thread only. The process's panic hook is
/// wrapped once, the first time, and goes on printing every other thread's panics as before
/// (swapping the hook itself for the check's duration silenced them too).
fn quiet_panics_on_this_thread(quiet: bool) {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(quiet));
}

fn check_file_unguarded(
    path: &Path,
    repair_it: bool,
    expiry: Expiry,
) -> Result<Report, StoreError> {
    open::require_existing(path)?;
    let mut db = if repair_it {
        open::open_database(path, None, open::COMMAND_CACHE_BYTES)?.db
    } else {
        // Before redb's open and page check, which this release may not read right.
        open::refuse_newer_schema(path)?;
        let mut builder = redb::Database::builder();
        builder.set_cache_size(open::COMMAND_CACHE_BYTES);
        builder.open(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => {
                StoreError::InUse(path.display().to_string())
            }
            other => StoreError::from(other),
        })?
    };
    let integrity = db.check_integrity()?;
    let mut report = if repair_it {
        repair(&db, expiry)?
    } else {
        check(&redb::ReadableDatabase::begin_read(&db)?, expiry)?
    };
    report.redb_integrity = Some(integrity);
    Ok(report)
}

fn run(txn: &ReadTransaction, expiry: Expiry) -> Result<Checker, StoreError> {
    let mut c = Checker::default();
    let meta = txn.open_table(META)?;
    let version = meta.get(META_SCHEMA_VERSION)?.map(|v| v.value());
    if version != Some(SCHEMA_VERSION) {
        c.damaged(
            "meta",
            META_SCHEMA_VERSION,
            format!(
                "schema version is {version:?}, not {SCHEMA_VERSION}: open the file with this \
                 tracker (tracker serve, or tracker check --repair) to migrate it first"
            ),
        );
        return Ok(c);
    }
    let inbox_seq = meta.get(META_INBOX_SEQ)?.map_or(0, |v| v.value());
    let space_seq = meta.get(META_SPACE_SEQ)?.map_or(0, |v| v.value());
    // Events from here on may have their dedup entry only in the writer's memory.
    let redo_from = meta
        .get(META_DEDUP_REDO_FROM)?
        .map_or(u64::MAX, |v| v.value());
    // Clicks from this time on may have their fbclid entry only in the writer's memory.
    let fbclid_redo_from = meta
        .get(META_FBCLID_REDO_FROM)?
        .map_or(u64::MAX, |v| v.value());

    c.rows = schema::count_rows(txn)?;
    let spaces = check_spaces(txn, &mut c, space_seq)?;
    check_credentials(txn, &mut c, &spaces)?;
    check_inbox(txn, &mut c, &spaces, (inbox_seq, redo_from), expiry)?;
    check_clicks(txn, &mut c, fbclid_redo_from)?;
    check_touches(txn, &mut c)?;
    check_first_deposits(txn, &mut c)?;
    check_settings(txn, &mut c, &spaces)?;
    check_links(txn, &mut c, &spaces)?;
    check_stats(txn, &mut c)?;
    check_cost_sums(txn, &mut c)?;
    check_rejections(txn, &mut c)?;
    Ok(c)
}
