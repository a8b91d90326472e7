//! `tracker check`: the tracker's invariants over one read snapshot, and `--repair` of the
//! derivable ones. Both ways in (a file opened by the command, and the admin socket of a running
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
//!   `first_deposit` mark ([`check_first_deposits`]);
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use crate::domain::click::fbclid_key;
use crate::domain::credential::Kind;
use crate::domain::dedup::{self, Expiry};
use crate::domain::rejection::KEPT_PER_SPACE;
use crate::domain::stats::Counts;
use crate::storage::attribution;
use crate::storage::dedup_buffer::{self, EntryKey};
use crate::storage::records::{
    self, ClickRecord, CredentialRecord, EventRecord, LinkRecord, RejectionRecord, SpaceRecord,
    TgTouchRecord,
};
use crate::storage::rollup::{self, RowKey};
use crate::storage::schema::{
    self, CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, FIRST_DEPOSITS_BY_CLICK,
    FIRST_DEPOSITS_BY_TG, INBOX, LINKS, LINKS_BY_SPACE, META, META_DEDUP_REDO_FROM,
    META_FBCLID_REDO_FROM, META_INBOX_SEQ, META_SCHEMA_VERSION, META_SPACE_SEQ, REJECTION_COUNTS,
    REJECTIONS, SCHEMA_VERSION, SPACE_SETTINGS, SPACES, STATS, TG_TOUCHES,
};
use crate::storage::{StoreError, open};

/// One thing wrong, in plain words, with the table and key where it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Finding {
    pub table: String,
    pub key: String,
    pub problem: String,
    /// Whether `--repair` can fix it (it is derived from other rows).
    pub repairable: bool,
}

/// What `tracker check` found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// redb's page check: `Some(true)` passed, `Some(false)` failed and redb repaired it, `None`
    /// not run (through a running server, which shares the file; see docs/backups.md).
    pub redb_integrity: Option<bool>,
    /// The rows of every table, counted as `tracker backup` counts what it copies
    /// (`schema::count_rows`), so the two agree about the same file.
    pub rows: u64,
    pub findings: Vec<Finding>,
    /// Findings fixed by `--repair` (then `findings` is what a second check found).
    pub repaired: Vec<Finding>,
}

impl Report {
    #[must_use]
    pub fn clean(&self) -> bool {
        self.findings.is_empty() && self.redb_integrity != Some(false)
    }
}

/// A fix for a repairable finding: one write to a derived table.
enum Fix {
    InsertDedup(EntryKey, (u64, u64)),
    RemoveDedup(EntryKey),
    InsertFbclid((u32, u128), String),
    RemoveFbclid((u32, u128)),
    InsertTg((u32, u64, String)),
    RemoveTg((u32, u64, String)),
    SetTouch((u32, u64), TgTouchRecord),
    RemoveTouch((u32, u64)),
    InsertLinkBySpace((u32, String)),
    RemoveLinkBySpace((u32, String)),
    RebuildStats,
    SetMeta(&'static str, u64),
    SetRejectionCount(u32, u64),
}

#[derive(Default)]
struct Checker {
    rows: u64,
    findings: Vec<Finding>,
    fixes: Vec<Fix>,
}

impl Checker {
    fn damaged(&mut self, table: &str, key: impl Into<String>, problem: impl Into<String>) {
        self.findings.push(Finding {
            table: table.to_owned(),
            key: key.into(),
            problem: problem.into(),
            repairable: false,
        });
    }

    fn derivable(
        &mut self,
        table: &str,
        key: impl Into<String>,
        problem: impl Into<String>,
        fix: Fix,
    ) {
        self.findings.push(Finding {
            table: table.to_owned(),
            key: key.into(),
            problem: problem.into(),
            repairable: true,
        });
        self.fixes.push(fix);
    }
}

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
        apply(&txn, first.fixes)?;
        txn.commit()?;
    }
    let mut report = check(&redb::ReadableDatabase::begin_read(db)?, expiry)?;
    report.repaired = repaired;
    Ok(report)
}

/// `tracker check` on a file no server has open (the data file of a stopped server, or a
/// backup): redb's page check, which needs the file to itself, then [`check`], or with `repair`
/// the schema brought up to date (as a server's open does) and [`repair`].
pub fn check_file(path: &Path, repair_it: bool, expiry: Expiry) -> Result<Report, StoreError> {
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

fn apply(txn: &WriteTransaction, fixes: Vec<Fix>) -> Result<(), StoreError> {
    let mut dedup = txn.open_table(DEDUP)?;
    let mut by_fbclid = txn.open_table(CLICKS_BY_FBCLID)?;
    let mut by_tg = txn.open_table(CLICKS_BY_TG)?;
    let mut touches = txn.open_table(TG_TOUCHES)?;
    let mut links_by_space = txn.open_table(LINKS_BY_SPACE)?;
    let mut meta = txn.open_table(META)?;
    let mut counts = txn.open_table(REJECTION_COUNTS)?;
    let mut rebuild_stats = false;
    for fix in fixes {
        match fix {
            Fix::InsertDedup(k, v) => {
                dedup.insert(k, v)?;
            }
            Fix::RemoveDedup(k) => {
                dedup.remove(k)?;
            }
            Fix::InsertFbclid(k, uid) => {
                by_fbclid.insert(k, uid.as_str())?;
            }
            Fix::RemoveFbclid(k) => {
                by_fbclid.remove(k)?;
            }
            Fix::InsertTg((s, tg, uid)) => {
                by_tg.insert((s, tg, uid.as_str()), ())?;
            }
            Fix::RemoveTg((s, tg, uid)) => {
                by_tg.remove((s, tg, uid.as_str()))?;
            }
            Fix::SetTouch(key, touch) => {
                touches.insert(key, records::encode(&touch).as_slice())?;
            }
            Fix::RemoveTouch(key) => {
                touches.remove(key)?;
            }
            Fix::InsertLinkBySpace((s, slug)) => {
                links_by_space.insert((s, slug.as_str()), ())?;
            }
            Fix::RemoveLinkBySpace((s, slug)) => {
                links_by_space.remove((s, slug.as_str()))?;
            }
            Fix::RebuildStats => rebuild_stats = true,
            Fix::SetMeta(name, v) => {
                meta.insert(name, v)?;
            }
            Fix::SetRejectionCount(space, n) => {
                counts.insert(space, n)?;
            }
        }
    }
    if rebuild_stats {
        rollup::rebuild_in(txn, |_| Ok(()))?;
    }
    Ok(())
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
    check_rejections(txn, &mut c)?;
    Ok(c)
}

fn check_spaces(
    txn: &ReadTransaction,
    c: &mut Checker,
    space_seq: u64,
) -> Result<BTreeSet<u32>, StoreError> {
    let mut nos = BTreeSet::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (name, bytes) = entry?;
        match records::decode::<SpaceRecord>(bytes.value()) {
            Ok(r) => {
                if !nos.insert(r.no) {
                    c.damaged(
                        "spaces",
                        name.value(),
                        format!("space number {} is used twice", r.no),
                    );
                }
            }
            Err(e) => c.damaged("spaces", name.value(), e.to_string()),
        }
    }
    if let Some(&max) = nos.last() {
        if u64::from(max) > space_seq {
            c.derivable(
                "meta",
                META_SPACE_SEQ,
                format!("space_seq is {space_seq} but space number {max} exists"),
                Fix::SetMeta(META_SPACE_SEQ, u64::from(max)),
            );
        }
    }
    Ok(nos)
}

fn check_credentials(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    for entry in txn.open_table(CREDENTIALS)?.iter()? {
        let (digest, bytes) = entry?;
        let key = hex::encode(digest.value());
        match records::decode::<CredentialRecord>(bytes.value()) {
            Ok(r) => {
                if !spaces.contains(&r.space_no) {
                    c.damaged(
                        "credentials",
                        &key,
                        format!(
                            "credential {} belongs to space number {}, which does not exist",
                            r.public_prefix, r.space_no
                        ),
                    );
                }
                if Kind::from_u8(r.kind).is_none() {
                    c.damaged(
                        "credentials",
                        &key,
                        format!("unknown credential kind {}", r.kind),
                    );
                }
            }
            Err(e) => c.damaged("credentials", &key, e.to_string()),
        }
    }
    Ok(())
}

fn check_inbox(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
    (inbox_seq, redo_from): (u64, u64),
    expiry: Expiry,
) -> Result<(), StoreError> {
    let inbox = txn.open_table(INBOX)?;
    let dedup_table = txn.open_table(DEDUP)?;
    let mut largest = 0;
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let at = format!("space {space}, inbox_id {inbox_id}");
        largest = largest.max(inbox_id);
        if !spaces.contains(&space) {
            c.damaged(
                "inbox",
                &at,
                format!("event of space number {space}, which does not exist"),
            );
        }
        let event = records::decode::<EventRecord>(bytes.value())
            .and_then(|r| dedup_buffer::event_of(r, inbox_id));
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                c.damaged("inbox", &at, e.to_string());
                continue;
            }
        };
        let Some(k) = dedup::dedup_key(&event, 0) else {
            continue;
        };
        let k = dedup_buffer::entry_key(space, &k);
        let stored = dedup_table.get(k)?.map(|v| v.value());
        // The entry names the newest event with its key, unless retention may have pruned it.
        let needed = inbox_id < redo_from && !expiry.expired(k.1, event.received_at_ms);
        if needed && stored.is_none_or(|(id, _)| id < inbox_id) {
            c.derivable(
                "dedup",
                dedup_key_text(k),
                match stored {
                    None => format!("event {at} has no dedup entry: a retry of it would be stored again"),
                    Some((id, _)) => format!("the dedup entry names inbox_id {id}, older than event {at} with the same key"),
                },
                Fix::InsertDedup(k, (inbox_id, event.received_at_ms)),
            );
        }
    }
    if largest > inbox_seq {
        c.derivable(
            "meta",
            META_INBOX_SEQ,
            format!("inbox_seq is {inbox_seq} but inbox_id {largest} exists: the next event would reuse an id"),
            Fix::SetMeta(META_INBOX_SEQ, largest),
        );
    }
    for entry in dedup_table.iter()? {
        let (key, value) = entry?;
        let k = key.value();
        let (inbox_id, received_at_ms) = value.value();
        let row = inbox.get((k.0, inbox_id))?;
        let derived = row
            .map(|bytes| {
                records::decode::<EventRecord>(bytes.value())
                    .and_then(|r| dedup_buffer::event_of(r, inbox_id))
                    .map(|e| (dedup::dedup_key(&e, 0), e.received_at_ms))
            })
            .transpose();
        match derived {
            Ok(None) => c.derivable(
                "dedup",
                dedup_key_text(k),
                format!(
                    "the entry names inbox_id {inbox_id} of space {}, which is not in the inbox",
                    k.0
                ),
                Fix::RemoveDedup(k),
            ),
            Ok(Some((event_key, at))) => {
                if event_key.map(|e| dedup_buffer::entry_key(k.0, &e)) != Some(k) {
                    c.derivable(
                        "dedup",
                        dedup_key_text(k),
                        format!("the entry names inbox_id {inbox_id}, whose event has another key"),
                        Fix::RemoveDedup(k),
                    );
                } else if at != received_at_ms {
                    c.derivable(
                        "dedup",
                        dedup_key_text(k),
                        format!("the entry's time {received_at_ms} is not its event's {at}"),
                        Fix::InsertDedup(k, (inbox_id, at)),
                    );
                }
            }
            // The event does not decode: reported with the inbox.
            Err(_) => {}
        }
    }
    Ok(())
}

fn check_clicks(
    txn: &ReadTransaction,
    c: &mut Checker,
    fbclid_redo_from: u64,
) -> Result<(), StoreError> {
    let clicks = txn.open_table(CLICKS)?;
    let by_fbclid = txn.open_table(CLICKS_BY_FBCLID)?;
    let by_tg = txn.open_table(CLICKS_BY_TG)?;
    for entry in clicks.iter()? {
        let (key, bytes) = entry?;
        let (space, uid) = key.value();
        let at = format!("space {space}, uid {uid}");
        let click = match records::decode::<ClickRecord>(bytes.value()) {
            Ok(r) => r,
            Err(e) => {
                c.damaged("clicks", &at, e.to_string());
                continue;
            }
        };
        if let Some(fbclid) = &click.fbclid {
            let k = (space, fbclid_key(fbclid));
            let indexed = by_fbclid.get(k)?.map(|v| v.value().to_owned());
            let buffered =
                crate::domain::click::uid_time(uid).is_some_and(|t| t >= fbclid_redo_from);
            if indexed.is_none() && !buffered {
                c.derivable(
                    "clicks_by_fbclid",
                    format!("space {space}, fbclid {fbclid}"),
                    format!("click {at} is missing from the fbclid index: a back-fill with its fbclid would make a second click"),
                    Fix::InsertFbclid(k, uid.to_owned()),
                );
            }
        }
        if let Some(tg) = click.tg_id {
            if by_tg.get((space, tg, uid))?.is_none() {
                c.derivable(
                    "clicks_by_tg",
                    format!("space {space}, tg_id {tg}, uid {uid}"),
                    format!("click {at} is bound to {tg} but missing from the Telegram index"),
                    Fix::InsertTg((space, tg, uid.to_owned())),
                );
            }
        }
    }
    for entry in by_fbclid.iter()? {
        let (key, uid) = entry?;
        let (space, digest) = key.value();
        let uid = uid.value();
        let at = format!("space {space}, fbclid digest {digest:032x}");
        match clicks.get((space, uid))? {
            None => c.derivable(
                "clicks_by_fbclid",
                at,
                format!("names click {uid}, which does not exist"),
                Fix::RemoveFbclid((space, digest)),
            ),
            Some(bytes) => {
                if let Ok(click) = records::decode::<ClickRecord>(bytes.value()) {
                    if click.fbclid.as_deref().map(fbclid_key) != Some(digest) {
                        c.derivable(
                            "clicks_by_fbclid",
                            at,
                            format!("names click {uid}, whose fbclid is another"),
                            Fix::RemoveFbclid((space, digest)),
                        );
                    }
                }
            }
        }
    }
    for entry in by_tg.iter()? {
        let (key, _) = entry?;
        let (space, tg, uid) = key.value();
        let at = format!("space {space}, tg_id {tg}, uid {uid}");
        let fix = Fix::RemoveTg((space, tg, uid.to_owned()));
        match clicks.get((space, uid))? {
            None => c.derivable("clicks_by_tg", at, "names a click that does not exist", fix),
            Some(bytes) => {
                if let Ok(click) = records::decode::<ClickRecord>(bytes.value()) {
                    if click.tg_id != Some(tg) {
                        c.derivable(
                            "clicks_by_tg",
                            at,
                            "names a click not bound to this tg_id",
                            fix,
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// `tg_touches` against what `clicks_by_tg` and the clicks say: every user's entry, and no
/// entry for a user without a bound click.
fn check_touches(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let (clicks, by_tg) = (txn.open_table(CLICKS)?, txn.open_table(CLICKS_BY_TG)?);
    let touches = txn.open_table(TG_TOUCHES)?;
    attribution::every_touch(&clicks, &by_tg, |(space, tg), want| {
        let Some(want) = want else { return Ok(()) };
        let at = format!("space {space}, tg_id {tg}");
        let problem = match touches.get((space, tg))? {
            None => "is missing".to_owned(),
            Some(bytes) => match records::decode::<TgTouchRecord>(bytes.value()) {
                Ok(t) if t == want => return Ok(()),
                Ok(t) => format!("names first {} and last {}", t.first_uid, t.last_uid),
                Err(e) => e.to_string(),
            },
        };
        c.derivable(
            "tg_touches",
            at,
            format!(
                "{problem}, but the user's first bound click is {} and the last {}",
                want.first_uid, want.last_uid
            ),
            Fix::SetTouch((space, tg), want),
        );
        Ok(())
    })?;
    for entry in touches.iter()? {
        let (key, _) = entry?;
        let (space, tg) = key.value();
        if attribution::touch_of(&clicks, &by_tg, space, tg)?.is_none() {
            c.derivable(
                "tg_touches",
                format!("space {space}, tg_id {tg}"),
                "names a user with no bound click",
                Fix::RemoveTouch((space, tg)),
            );
        }
    }
    Ok(())
}

/// A stored deposit as the first-deposit rule sees it (`storage/first_deposit.rs`): the user it
/// names, its click (when it matched one that exists) and that click's user now, and its mark.
struct Deposit {
    tg_id: Option<u64>,
    uid: Option<String>,
    click_tg: Option<u64>,
    first: bool,
}

/// The deposit `inbox_id` of `space`; `None` when the inbox has no event there, or one of another
/// kind. A record that does not decode counts as none here (the inbox's check reports it).
fn deposit_at(
    inbox: &impl ReadableTable<(u32, u64), &'static [u8]>,
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    space: u32,
    inbox_id: u64,
) -> Result<Option<Deposit>, StoreError> {
    match inbox.get((space, inbox_id))? {
        Some(bytes) => deposit_of(bytes.value(), clicks, space),
        None => Ok(None),
    }
}

/// The deposit an inbox record of `space` holds; `None` for an event of another kind or a record
/// that does not decode.
fn deposit_of(
    bytes: &[u8],
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    space: u32,
) -> Result<Option<Deposit>, StoreError> {
    let Ok(event) = records::decode::<EventRecord>(bytes) else {
        return Ok(None);
    };
    if event.kind != crate::domain::event::EventKind::Deposit as u8 {
        return Ok(None);
    }
    let click = match (&event.uid, event.matched) {
        (Some(uid), true) => match clicks.get((space, uid.as_str()))? {
            Some(bytes) => records::decode::<ClickRecord>(bytes.value()).ok(),
            None => None,
        },
        _ => None,
    };
    Ok(Some(Deposit {
        tg_id: event.tg_id,
        uid: click.as_ref().and(event.uid),
        click_tg: click.and_then(|c| c.tg_id),
        first: event.first_deposit,
    }))
}

/// `first_deposits_by_tg` and `first_deposits_by_click` against the deposits of the inbox.
///
/// The writer decides each deposit once, in commit order, and never rewrites an entry, so for
/// every deposit `D` (its user the Telegram id it names, else its click's; a click's entry is
/// its first deposit):
/// - its click's entry exists and is no later than `D`; a first deposit without a Telegram id
///   of its own is its click's entry;
/// - the user it names has an entry: `D` itself when `D` is marked first, an earlier deposit
///   when not; a click bound to a user gives that user an entry too (when the click was bound
///   after its deposit, the binding carries it over);
/// - a deposit not marked first has an earlier one of its user or its click;
/// - a deposit with neither a user nor a click is never first.
///
/// And every entry names a deposit of its own click or user: a click's entry a deposit through
/// that click, and no deposit through it is earlier; a user's entry a deposit naming that user
/// or through a click bound to them, marked first (or first of the other user it named).
///
/// Which of a user's deposits made before and after a binding came first is not stored, so a
/// user's entry is checked against these bounds, not recomputed. Nothing here is repaired: the
/// marks on the events are what the feed and the stats already showed.
fn check_first_deposits(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    const BY_TG: &str = "first_deposits_by_tg";
    const BY_CLICK: &str = "first_deposits_by_click";
    let (inbox, clicks) = (txn.open_table(INBOX)?, txn.open_table(CLICKS)?);
    let by_tg = txn.open_table(FIRST_DEPOSITS_BY_TG)?;
    let by_click = txn.open_table(FIRST_DEPOSITS_BY_CLICK)?;
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let Some(d) = deposit_of(bytes.value(), &clicks, space)? else {
            continue;
        };
        let at = |what: String| format!("space {space}, {what}");
        let mark = if d.first {
            "marked first"
        } else {
            "not marked first"
        };
        let click_entry = match &d.uid {
            Some(uid) => by_click.get((space, uid.as_str()))?.map(|v| v.value()),
            None => None,
        };
        let user_entry = |tg: u64| by_tg.get((space, tg)).map(|v| v.map(|v| v.value()));
        if let Some(uid) = &d.uid {
            let problem = match click_entry {
                None => Some(format!(
                    "is missing, but deposit {inbox_id} went through click {uid}"
                )),
                Some(first) if first > inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} through the click is earlier"
                )),
                Some(first) if d.first && d.tg_id.is_none() && first != inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} is {mark} and names no \
                     Telegram id, so it is the click's first"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_CLICK, at(format!("uid {uid}")), problem);
            }
        }
        if let Some(tg) = d.tg_id {
            let problem = match user_entry(tg)? {
                None => Some(format!("is missing, but deposit {inbox_id} names the user")),
                Some(first) if d.first && first != inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark}"
                )),
                Some(first) if !d.first && first >= inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark}, so \
                     an earlier one must be named"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_TG, at(format!("tg_id {tg}")), problem);
            }
        } else if let Some(tg) = d.click_tg {
            let earlier_by_click = click_entry.is_some_and(|first| first < inbox_id);
            let problem = match user_entry(tg)? {
                None => Some(format!(
                    "is missing, but deposit {inbox_id} went through a click bound to the user"
                )),
                Some(first) if !d.first && !earlier_by_click && first >= inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark} \
                         and its click has no earlier one, so an earlier one must be named"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_TG, at(format!("tg_id {tg}")), problem);
            }
        } else if d.uid.is_none() && d.first {
            c.damaged(
                "inbox",
                at(format!("inbox_id {inbox_id}")),
                "the deposit is marked first but names neither a Telegram user nor a known \
                 click, so nothing says whose first it is",
            );
        }
    }
    first_deposit_entries_name_deposits(txn, c, (BY_TG, BY_CLICK))
}

/// Every first-deposit entry names a deposit of its own click or user
/// ([`check_first_deposits`]).
fn first_deposit_entries_name_deposits(
    txn: &ReadTransaction,
    c: &mut Checker,
    (tg_table, click_table): (&str, &str),
) -> Result<(), StoreError> {
    let (inbox, clicks) = (txn.open_table(INBOX)?, txn.open_table(CLICKS)?);
    for entry in txn.open_table(FIRST_DEPOSITS_BY_CLICK)?.iter()? {
        let (key, value) = entry?;
        let ((space, uid), first) = (key.value(), value.value());
        let through = deposit_at(&inbox, &clicks, space, first)?
            .is_some_and(|d| d.uid.as_deref() == Some(uid));
        if !through {
            c.damaged(
                click_table,
                format!("space {space}, uid {uid}"),
                format!("names inbox_id {first}, which is not a deposit through this click"),
            );
        }
    }
    for entry in txn.open_table(FIRST_DEPOSITS_BY_TG)?.iter()? {
        let (key, value) = entry?;
        let ((space, tg), first) = (key.value(), value.value());
        let problem = match deposit_at(&inbox, &clicks, space, first)? {
            None => Some("which is not a deposit in the inbox"),
            Some(d) if d.tg_id != Some(tg) && d.click_tg != Some(tg) => {
                Some("a deposit neither naming this user nor through a click bound to them")
            }
            Some(d) if !d.first && d.tg_id.is_none_or(|named| named == tg) => {
                Some("a deposit not marked first")
            }
            Some(_) => None,
        };
        if let Some(problem) = problem {
            c.damaged(
                tg_table,
                format!("space {space}, tg_id {tg}"),
                format!("names inbox_id {first}, {problem}"),
            );
        }
    }
    Ok(())
}

/// Every space's settings decode, and belong to a space.
fn check_settings(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    let table = txn.open_table(SPACE_SETTINGS)?;
    for entry in table.iter()? {
        let (key, _) = entry?;
        let space = key.value();
        let at = format!("space {space}");
        if !spaces.contains(&space) {
            c.damaged(
                "space_settings",
                &at,
                "settings of a space that does not exist",
            );
        }
        if let Err(e) = attribution::settings(&table, space) {
            c.damaged("space_settings", &at, e.to_string());
        }
    }
    Ok(())
}

fn check_links(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    let links = txn.open_table(LINKS)?;
    let by_space = txn.open_table(LINKS_BY_SPACE)?;
    for entry in links.iter()? {
        let (slug, bytes) = entry?;
        let slug = slug.value();
        match records::decode::<LinkRecord>(bytes.value()) {
            Ok(r) => {
                if !spaces.contains(&r.space_no) {
                    c.damaged(
                        "links",
                        slug,
                        format!("link of space number {}, which does not exist", r.space_no),
                    );
                }
                if by_space.get((r.space_no, slug))?.is_none() {
                    c.derivable(
                        "links_by_space",
                        format!("space {}, slug {slug}", r.space_no),
                        format!("link {slug} is missing from its space's list"),
                        Fix::InsertLinkBySpace((r.space_no, slug.to_owned())),
                    );
                }
            }
            Err(e) => c.damaged("links", slug, e.to_string()),
        }
    }
    for entry in by_space.iter()? {
        let (key, _) = entry?;
        let (space, slug) = key.value();
        let owner = match links.get(slug)? {
            None => None,
            Some(bytes) => match records::decode::<LinkRecord>(bytes.value()) {
                Ok(r) => Some(r.space_no),
                // Reported with the links.
                Err(_) => continue,
            },
        };
        if owner != Some(space) {
            c.derivable(
                "links_by_space",
                format!("space {space}, slug {slug}"),
                "lists a link that does not exist in this space",
                Fix::RemoveLinkBySpace((space, slug.to_owned())),
            );
        }
    }
    Ok(())
}

fn check_stats(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let mut unreadable = 0;
    let expected = rollup::count_all(&txn.open_table(CLICKS)?, &txn.open_table(INBOX)?, |_| {
        unreadable += 1;
        Ok(())
    })?;
    // Rebuilt without the records that do not decode, the rollup would forget what they
    // counted: then the difference is reported, and the rollup left as it is.
    let repairable = unreadable == 0;
    let mut want: BTreeMap<RowKey, Counts> = expected.rows().clone();
    let mut wrong = Vec::new();
    for entry in txn.open_table(STATS)?.iter()? {
        let (key, bytes) = entry?;
        let (space, dimension, group, at) = key.value();
        let row: RowKey = (space, dimension, group.to_owned(), at);
        let counted = want.remove(&row).unwrap_or_default();
        let stored = rollup::counts_in(bytes.value());
        match stored {
            Ok(stored) if same_counts(&stored, &counted) => {}
            Ok(stored) => wrong.push((
                row,
                format!(
                    "holds {} but the file counts {}",
                    show(&stored),
                    show(&counted)
                ),
            )),
            Err(e) => wrong.push((
                row,
                format!("{e} (it is rebuilt from the clicks and events)"),
            )),
        }
    }
    for (row, counted) in want {
        if counted != Counts::default() {
            wrong.push((
                row,
                format!("is missing; the file counts {}", show(&counted)),
            ));
        }
    }
    let any = !wrong.is_empty();
    for ((space, dimension, group, at), problem) in wrong {
        let (unit, dimension) = if dimension & rollup::DAY_ROWS != 0 {
            ("day", dimension & !rollup::DAY_ROWS)
        } else if dimension & rollup::BLOCK_ROWS != 0 {
            ("block", dimension & !rollup::BLOCK_ROWS)
        } else {
            ("quarter", dimension)
        };
        c.findings.push(Finding {
            table: "stats".into(),
            key: format!("space {space}, dimension {dimension}, group {group:?}, {unit} {at}"),
            problem: if repairable {
                format!("the {unit} row {problem}")
            } else {
                format!(
                    "the {unit} row {problem}; {unreadable} click or event record(s) do not \
                     decode, so it is not rebuilt"
                )
            },
            repairable,
        });
    }
    if any && repairable {
        c.fixes.push(Fix::RebuildStats);
    }
    Ok(())
}

fn check_rejections(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let counts = txn.open_table(REJECTION_COUNTS)?;
    let mut needed: BTreeMap<u32, u64> = BTreeMap::new();
    for entry in txn.open_table(REJECTIONS)?.iter()? {
        let (key, bytes) = entry?;
        let (space, slot) = key.value();
        let at = format!("space {space}, slot {slot}");
        match records::decode::<RejectionRecord>(bytes.value()) {
            Ok(r) => {
                if r.number % u64::from(KEPT_PER_SPACE) != u64::from(slot) {
                    c.damaged(
                        "rejections",
                        &at,
                        format!("rejection number {} is in the wrong slot", r.number),
                    );
                }
                let n = needed.entry(space).or_default();
                *n = (*n).max(r.number + 1);
            }
            Err(e) => c.damaged("rejections", &at, e.to_string()),
        }
    }
    for (space, n) in needed {
        let stored = counts.get(space)?.map_or(0, |v| v.value());
        if stored < n {
            c.derivable(
                "rejection_counts",
                format!("space {space}"),
                format!("counts {stored} rejections but rejection number {} is stored: the next one would overwrite a newer one", n - 1),
                Fix::SetRejectionCount(space, n),
            );
        }
    }
    Ok(())
}

/// Counts equal, deposit sums compared by value (`14` and `14.00` are one sum).
fn same_counts(a: &Counts, b: &Counts) -> bool {
    let sums = |c: &Counts| -> BTreeMap<String, String> {
        c.deposits
            .iter()
            .map(|(k, v)| (k.clone(), v.normalized().to_string()))
            .collect()
    };
    a.clicks == b.clicks
        && a.bound_clicks == b.bound_clicks
        && a.events == b.events
        && sums(a) == sums(b)
}

fn show(c: &Counts) -> String {
    let deposits: Vec<String> = c.deposits.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} clicks, {} bound, events {:?}, deposits [{}]",
        c.clicks,
        c.bound_clicks,
        c.events,
        deposits.join(", ")
    )
}

fn dedup_key_text((space, rule, digest): EntryKey) -> String {
    format!("space {space}, rule {rule}, digest {digest:032x}")
}
