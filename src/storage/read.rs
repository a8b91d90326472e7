//! The read operations, each one function on a [`Snapshot`]: the keyring, the space list,
//! `dry_run`'s dedup decision, what the benchmark counts.
//!
//! They run on the reader threads (`reader.rs`), which [`Store`](crate::storage::Store)'s read
//! methods feed; the keyring is also read by the writer after a commit that changed credentials.
//! None of them writes. Adding a read is one function here and one method on `Store`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use redb::{
    Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata,
};

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::domain::cost::{self, Cost};
use crate::domain::credential::{CredentialDigest, Kind};
use crate::domain::decimal::Decimal;
use crate::domain::dedup::{self, DedupKey};
use crate::domain::event::{AttributedBy, EventKind, Source, ValidEvent};
use crate::domain::feed::{self, Attribution, FeedEvent, FeedPage, PageRequest};
use crate::domain::keyring::{KeyEntry, SpaceRef};
use crate::domain::link::{Destination, Link, Mode};
use crate::domain::rejection::Rejection;
use crate::domain::settings::SpaceSettings;
use crate::domain::stats::{self, Counts, Dimension, GroupStats, Grouping};
use crate::storage::StoreError;
use crate::storage::attribution;
use crate::storage::records::{self, CredentialRecord, SpaceRecord};
use crate::storage::records::{ClickRecord, EventRecord, LinkRecord, RejectionRecord};
use crate::storage::rollup;
use crate::storage::schema::COSTS;
use crate::storage::schema::{
    ADMIN, ADMIN_PASSWORD, CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, INBOX,
    LINKS, LINKS_BY_SPACE, REJECTIONS, SPACE_SETTINGS, SPACES, STATS, TG_TOUCHES,
};

/// One read snapshot, shared by the reads of a batch, with the tables the hot reads use opened
/// once for all of them.
pub struct Snapshot {
    txn: ReadTransaction,
    clicks: ReadOnlyTable<(u32, &'static str), &'static [u8]>,
    dedup: ReadOnlyTable<(u32, u8, u128), (u64, u64)>,
    touches: ReadOnlyTable<(u32, u64), &'static [u8]>,
    /// The file stays open while a snapshot of it is read.
    db: Arc<Database>,
}

impl Snapshot {
    pub(super) fn begin(db: &Arc<Database>) -> Result<Snapshot, StoreError> {
        let txn = db.begin_read()?;
        Ok(Snapshot {
            clicks: txn.open_table(CLICKS)?,
            dedup: txn.open_table(DEDUP)?,
            touches: txn.open_table(TG_TOUCHES)?,
            txn,
            db: db.clone(),
        })
    }

    /// Whether this is a snapshot of `db`, not of a file the writer has since reopened.
    pub(super) fn is_of(&self, db: &Arc<Database>) -> bool {
        Arc::ptr_eq(&self.db, db)
    }

    /// The snapshot's transaction, for reads of the other tables.
    #[must_use]
    pub fn txn(&self) -> &ReadTransaction {
        &self.txn
    }
}

fn space_names(txn: &ReadTransaction) -> Result<HashMap<u32, Arc<str>>, StoreError> {
    let mut names = HashMap::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (name, bytes) = entry?;
        let record: SpaceRecord = records::decode(bytes.value())?;
        names.insert(record.no, Arc::from(name.value()));
    }
    Ok(names)
}

/// Every stored credential, as the keyring keeps them.
pub fn keyring_entries(
    txn: &ReadTransaction,
) -> Result<Vec<(CredentialDigest, KeyEntry)>, StoreError> {
    let names = space_names(txn)?;
    let mut out = Vec::new();
    for entry in txn.open_table(CREDENTIALS)?.iter()? {
        let (digest, bytes) = entry?;
        let r: CredentialRecord = records::decode(bytes.value())?;
        let (Some(name), Some(kind)) = (names.get(&r.space_no), Kind::from_u8(r.kind)) else {
            return Err(StoreError::Corrupt(format!(
                "credential {} names space {} or kind {} that does not exist",
                r.public_prefix, r.space_no, r.kind
            )));
        };
        out.push((
            *digest.value(),
            KeyEntry {
                space: SpaceRef {
                    no: r.space_no,
                    name: name.clone(),
                },
                kind,
                valid_until_ms: r.valid_until_ms,
                revoked: r.revoked_at_ms.is_some(),
                last_used_ms: AtomicU64::new(r.last_used_ms),
            },
        ));
    }
    Ok(out)
}

/// A space, its settings and its credentials, for `space list`. Never holds a credential, only
/// its prefix.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpaceSummary {
    pub space: String,
    pub created_at_ms: u64,
    pub settings: SpaceSettings,
    pub credentials: Vec<CredentialSummary>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CredentialSummary {
    pub kind: String,
    pub prefix: String,
    pub created_at_ms: u64,
    pub last_used_ms: Option<u64>,
    /// Set for a credential replaced by a rotation: when it stops (or stopped) working.
    pub valid_until_ms: Option<u64>,
    pub revoked_at_ms: Option<u64>,
}

impl CredentialSummary {
    /// Whether it works at `now_ms`, in words: `active`, `in grace until …`, `expired …` or
    /// `revoked …`.
    #[must_use]
    pub fn state(&self, now_ms: u64) -> String {
        let at = crate::clock::rfc3339_s;
        match (self.revoked_at_ms, self.valid_until_ms) {
            (Some(t), _) => format!("revoked {}", at(t)),
            (None, Some(until)) if until <= now_ms => format!("expired {}", at(until)),
            (None, Some(until)) => format!("in grace until {}", at(until)),
            (None, None) => "active".to_owned(),
        }
    }

    /// Whether it is accepted at `now_ms`.
    #[must_use]
    pub fn works(&self, now_ms: u64) -> bool {
        self.revoked_at_ms.is_none() && self.valid_until_ms.is_none_or(|until| until > now_ms)
    }
}

/// Every space, by name, with its credentials, newest first. `seen` holds last-used times
/// newer than the stored ones (kept in memory between flushes).
pub fn list_spaces(
    txn: &ReadTransaction,
    seen: &HashMap<CredentialDigest, u64, impl std::hash::BuildHasher>,
) -> Result<Vec<SpaceSummary>, StoreError> {
    let mut spaces = Vec::new();
    let mut by_no = HashMap::new();
    let settings = txn.open_table(SPACE_SETTINGS)?;
    for entry in txn.open_table(SPACES)?.iter()? {
        let (name, bytes) = entry?;
        let record: SpaceRecord = records::decode(bytes.value())?;
        by_no.insert(record.no, spaces.len());
        spaces.push(SpaceSummary {
            space: name.value().to_owned(),
            created_at_ms: record.created_at_ms,
            settings: attribution::settings(&settings, record.no)?,
            credentials: Vec::new(),
        });
    }
    for entry in txn.open_table(CREDENTIALS)?.iter()? {
        let (digest, bytes) = entry?;
        let r: CredentialRecord = records::decode(bytes.value())?;
        let last_used = seen
            .get(digest.value())
            .copied()
            .unwrap_or(0)
            .max(r.last_used_ms);
        if let Some(&i) = by_no.get(&r.space_no) {
            spaces[i].credentials.push(CredentialSummary {
                kind: Kind::from_u8(r.kind)
                    .map_or("unknown", Kind::as_str)
                    .to_owned(),
                prefix: r.public_prefix,
                created_at_ms: r.created_at_ms,
                last_used_ms: (last_used > 0).then_some(last_used),
                valid_until_ms: r.valid_until_ms,
                revoked_at_ms: r.revoked_at_ms,
            });
        }
    }
    for s in &mut spaces {
        s.credentials
            .sort_by(|a, b| (&a.kind, b.created_at_ms).cmp(&(&b.kind, a.created_at_ms)));
    }
    Ok(spaces)
}

/// What storing `event` would do now, without storing it: `(duplicate_of, attributed_by)`,
/// attributed as the writer would (`storage/attribution.rs`). `buffered` is the key's entry in
/// the writer's dedup buffer, which is newer than the table's.
pub fn judge_event(
    snapshot: &Snapshot,
    space: u32,
    event: &ValidEvent,
    key: Option<&DedupKey>,
    buffered: Option<(u64, u64)>,
) -> Result<(Option<u64>, Option<AttributedBy>), StoreError> {
    let attributed_by = attribution::resolve(
        &snapshot.clicks,
        &snapshot.touches,
        || Ok(space_settings(snapshot, space)?.attribution),
        space,
        event,
    )?
    .map(|r| r.by);
    let duplicate_of = match key {
        None => None,
        Some(key) => {
            let earlier = match buffered {
                Some(e) => Some(e),
                None => snapshot
                    .dedup
                    .get((space, key.rule, key.digest))?
                    .map(|g| g.value()),
            };
            dedup::duplicate_of(key, earlier, event.received_at_ms)
        }
    };
    Ok((duplicate_of, attributed_by))
}

/// The settings of `space`.
pub fn space_settings(s: &Snapshot, space: u32) -> Result<SpaceSettings, StoreError> {
    attribution::settings(&s.txn.open_table(SPACE_SETTINGS)?, space)
}

/// How many events the inbox holds, over every space. The benchmark checks acknowledged events
/// against it after the server has stopped.
pub fn count_events(txn: &ReadTransaction) -> Result<u64, StoreError> {
    Ok(txn.open_table(INBOX)?.len()?)
}

/// Where the data file's bytes go, per table: what the benchmark prints beside bytes per event.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableUsage {
    pub table: &'static str,
    pub entries: u64,
    pub leaf_pages: u64,
    pub branch_pages: u64,
    /// Keys and values as stored.
    pub stored_bytes: u64,
    /// Per-entry and per-page bookkeeping.
    pub metadata_bytes: u64,
    /// Unused space inside the table's pages.
    pub fragmented_bytes: u64,
}

/// [`TableUsage`] of the tables that grow with traffic.
pub fn table_usage(txn: &ReadTransaction) -> Result<Vec<TableUsage>, StoreError> {
    Ok(vec![
        usage("inbox", &txn.open_table(INBOX)?)?,
        usage("dedup", &txn.open_table(DEDUP)?)?,
        usage("clicks", &txn.open_table(CLICKS)?)?,
        usage("clicks_by_fbclid", &txn.open_table(CLICKS_BY_FBCLID)?)?,
        usage("clicks_by_tg", &txn.open_table(CLICKS_BY_TG)?)?,
        usage("tg_touches", &txn.open_table(TG_TOUCHES)?)?,
        usage("stats", &txn.open_table(STATS)?)?,
        usage("rejections", &txn.open_table(REJECTIONS)?)?,
    ])
}

/// The entries and bytes of `t`, an open table named `table`.
pub fn usage<T: ReadableTableMetadata>(
    table: &'static str,
    t: &T,
) -> Result<TableUsage, StoreError> {
    let s = t.stats()?;
    Ok(TableUsage {
        table,
        entries: t.len()?,
        leaf_pages: s.leaf_pages(),
        branch_pages: s.branch_pages(),
        stored_bytes: s.stored_bytes(),
        metadata_bytes: s.metadata_bytes(),
        fragmented_bytes: s.fragmented_bytes(),
    })
}

/// A page of `space`'s inbox after `page.after`, with each event's click joined now.
pub fn feed(s: &Snapshot, space: u32, page: PageRequest) -> Result<FeedPage, StoreError> {
    let inbox = s.txn.open_table(INBOX)?;
    if page.after > 0 && inbox.get((space, page.after))?.is_none() {
        return Err(StoreError::Refused(feed::foreign_cursor(page.after)));
    }
    let mut events = Vec::with_capacity(page.limit.min(feed::MAX_PAGE));
    let mut more = false;
    if let Some(first) = page.after.checked_add(1) {
        for entry in inbox.range((space, first)..=(space, u64::MAX))? {
            if events.len() == page.limit {
                more = true;
                break;
            }
            let (key, bytes) = entry?;
            let inbox_id = key.value().1;
            let record: EventRecord = records::decode(bytes.value())?;
            events.push(feed_event(s, space, inbox_id, record)?);
        }
    }
    let next = if more {
        events.last().map(|e| e.inbox_id.clone())
    } else {
        None
    };
    Ok(FeedPage { events, next })
}

/// A page of the space's inbox newest first: the events before `before` (all: `None`), at most
/// `limit`, and the `inbox_id` to ask before for the next page, when there is one.
pub fn feed_newest(
    s: &Snapshot,
    space: u32,
    before: Option<u64>,
    limit: usize,
) -> Result<(Vec<FeedEvent>, Option<u64>), StoreError> {
    let inbox = s.txn.open_table(INBOX)?;
    let end = before.unwrap_or(u64::MAX);
    let mut events = Vec::with_capacity(limit.min(feed::MAX_PAGE));
    let mut older = None;
    for entry in inbox.range((space, 0)..(space, end))?.rev() {
        let (key, bytes) = entry?;
        let inbox_id = key.value().1;
        if events.len() == limit {
            older = events
                .last()
                .map(|e: &FeedEvent| e.inbox_id.parse().unwrap_or(0));
            break;
        }
        let record: EventRecord = records::decode(bytes.value())?;
        events.push(feed_event(s, space, inbox_id, record)?);
    }
    Ok((events, older))
}

/// One stored event as the feed shows it, with its click joined now.
pub(crate) fn feed_event(
    s: &Snapshot,
    space: u32,
    inbox_id: u64,
    r: EventRecord,
) -> Result<FeedEvent, StoreError> {
    let kind = EventKind::from_u8(r.kind).ok_or_else(|| {
        StoreError::Corrupt(format!("event {inbox_id} has unknown kind {}", r.kind))
    })?;
    let click = match &r.uid {
        None => None,
        Some(uid) => match s.clicks.get((space, uid.as_str()))? {
            None => None,
            Some(bytes) => {
                let c: ClickRecord = records::decode(bytes.value())?;
                Some(Attribution {
                    link_slug: c.link_slug,
                    fbclid: c.fbclid,
                    campaign_name: c.campaign_name,
                    clicked_at_ms: c.clicked_at_ms,
                    tg_id: c.tg_id,
                })
            }
        },
    };
    let mut event = FeedEvent {
        inbox_id: inbox_id.to_string(),
        event: kind.as_str().to_owned(),
        uid: r.uid,
        attributed_by: AttributedBy::from_u8(r.attributed_by).map(|a| a.as_str().to_owned()),
        value: r.value,
        currency: r.currency,
        eid: r.eid,
        occurred_at_ms: r.occurred_at_ms,
        received_at_ms: r.received_at_ms,
        source: Source::from_u8(r.source).map(|s| s.as_str().to_owned()),
        matched: false,
        link_slug: None,
        fbclid: None,
        campaign_name: None,
        clicked_at_ms: None,
        tg_id: None,
        fbc: None,
        first_deposit: (kind == EventKind::Deposit).then_some(r.first_deposit),
    };
    event.attribute(click);
    // The Telegram id the event named, where it named one; else its click's.
    event.tg_id = r.tg_id.or(event.tg_id);
    Ok(event)
}

/// `space`'s counts by `grouping` over the quarters `[from, to)`, one entry per group, the
/// groups in order (days ascending; the group without a name first), with days and costs in
/// `zone`. Whole UTC days are read from the day rows, the rest from the quarter rows
/// (`rollup::DAY_ROWS`); a day of `zone` is read as its own range, so it is exact in any zone.
/// One campaign's groups are its drill-down rows (`rollup::in_campaign`), its days its own rows.
pub fn stats(
    s: &Snapshot,
    space: u32,
    grouping: &Grouping,
    (from, to): (u32, u32),
    zone: &jiff::tz::TimeZone,
) -> Result<Vec<GroupStats>, StoreError> {
    let table = s.txn.open_table(STATS)?;
    let rows = Rows {
        table: &table,
        space,
        pieces: pieces(from, to),
    };
    let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
    let campaign = grouping.campaign.as_deref();
    match (grouping.by, campaign) {
        (Dimension::Day, _) => {
            let (code, group) = match campaign {
                Some(c) => (Dimension::Campaign.code(), c),
                None => (Dimension::Day.code(), ""),
            };
            rows.by_day(code, group, (from, to), zone, &mut groups)?;
        }
        (Dimension::Campaign, Some(c)) => {
            if let Some(total) = rows.total(Dimension::Campaign.code(), c)? {
                groups.insert(c.to_owned(), total);
            }
        }
        (by, Some(c)) => {
            let code = by.in_campaign_code().unwrap_or(by.code());
            let (start, end) = rollup::in_campaign_range(c);
            let end = Bound::Excluded((space, code, end.as_str(), 0));
            rows.each_group(code, &start, end, &mut groups)?;
        }
        (by, None) => {
            let end = Bound::Excluded((space, by.code() + 1, "", 0));
            rows.each_group(by.code(), "", end, &mut groups)?;
        }
    }
    let spent = group_costs(s, space, grouping, (from, to), zone)?;
    for group in spent.keys() {
        groups.entry(group.clone()).or_default();
    }
    let none = BTreeMap::new();
    Ok(groups
        .into_iter()
        .map(|(group, counts)| {
            let cost = spent.get(&group).unwrap_or(&none);
            GroupStats::new((!group.is_empty()).then_some(group), &counts, cost)
        })
        .collect())
}

/// The rollup rows of one space over some quarters (`pieces`).
struct Rows<'a> {
    table: &'a ReadOnlyTable<(u32, u8, &'static str, u32), &'static [u8]>,
    space: u32,
    pieces: Vec<(u8, u32, u32)>,
}

impl Rows<'_> {
    /// The counts of one group over the quarters; `None` when it has no row there.
    fn total(&self, code: u8, group: &str) -> Result<Option<Counts>, StoreError> {
        let mut total = None;
        add_rows(
            self.table,
            (self.space, code, group),
            &self.pieces,
            &mut total,
        )?;
        Ok(total)
    }

    /// Each group of dimension `code` from `start` (a group, or the prefix of the groups) to
    /// `end`, with its counts, named without `start`.
    fn each_group(
        &self,
        code: u8,
        start: &str,
        end: Bound<(u32, u8, &str, u32)>,
        groups: &mut BTreeMap<String, Counts>,
    ) -> Result<(), StoreError> {
        // One seek per group (over the quarter rows, which every group has), then its rows in
        // range.
        let space = self.space;
        // The group after which the next one starts; `None` for the first.
        let mut previous: Option<String> = None;
        loop {
            let from = match &previous {
                None => Bound::Included((space, code, start, 0)),
                Some(group) => Bound::Excluded((space, code, group.as_str(), u32::MAX)),
            };
            let Some(first) = self
                .table
                .range::<(u32, u8, &str, u32)>((from, end))?
                .next()
            else {
                break;
            };
            let group = first?.0.value().2.to_owned();
            if let Some(total) = self.total(code, &group)? {
                let name = group.strip_prefix(start).unwrap_or(&group);
                groups.insert(name.to_owned(), total);
            }
            previous = Some(group);
        }
        Ok(())
    }

    /// The counts of `group` of dimension `code` by day of `zone`, the days from the first
    /// quarter row in `[from, to)` to the last.
    fn by_day(
        &self,
        code: u8,
        group: &str,
        (from, to): (u32, u32),
        zone: &jiff::tz::TimeZone,
        groups: &mut BTreeMap<String, Counts>,
    ) -> Result<(), StoreError> {
        let space = self.space;
        let rows = || {
            self.table
                .range((space, code, group, from)..(space, code, group, to))
        };
        let first = rows()?.next().transpose()?.map(|(k, _)| k.value().3);
        let last = rows()?.next_back().transpose()?.map(|(k, _)| k.value().3);
        if let (Some(first), Some(last)) = (first, last) {
            for day in stats::local_day(zone, first)..=stats::local_day(zone, last) {
                let start = stats::day_start(zone, day).max(from);
                let end = stats::day_start(zone, day + 1).min(to);
                let mut total = None;
                add_rows(
                    self.table,
                    (space, code, group),
                    &pieces(start, end),
                    &mut total,
                )?;
                if let Some(total) = total {
                    groups.insert(cost::day_text(day), total);
                }
            }
        }
        Ok(())
    }
}

/// What each group of `grouping` spent over the quarters `[from, to)`, by currency: the costs
/// of the days of `zone` that begin in the range, by campaign or by day (a link has none), of
/// its one campaign where it has one.
fn group_costs(
    s: &Snapshot,
    space: u32,
    grouping: &Grouping,
    (from, to): (u32, u32),
    zone: &jiff::tz::TimeZone,
) -> Result<BTreeMap<String, BTreeMap<String, Decimal>>, StoreError> {
    // Summed in a hash map, found by one hash of the name per row rather than a walk of string
    // comparisons; ordered once at the end.
    let mut spent: HashMap<String, BTreeMap<String, Decimal>> = HashMap::new();
    if !grouping.by.has_costs() || from >= to {
        return Ok(BTreeMap::new());
    }
    let mut first = stats::local_day(zone, from);
    if stats::day_start(zone, first) < from {
        first += 1;
    }
    let last = stats::local_day(zone, to - 1);
    // Looked up by reference: a row allocates only a group or currency not seen before.
    each_cost(
        s,
        space,
        (first, last),
        |day, campaign, amount, currency| {
            if grouping
                .campaign
                .as_ref()
                .is_some_and(|one| one != campaign)
            {
                return Ok(());
            }
            let day_text;
            let group = match grouping.by {
                Dimension::Day => {
                    day_text = cost::day_text(day);
                    day_text.as_str()
                }
                _ => campaign,
            };
            let by_currency = match spent.get_mut(group) {
                Some(c) => c,
                None => spent.entry(group.to_owned()).or_default(),
            };
            let sum = match by_currency.get_mut(currency) {
                Some(sum) => sum,
                None => by_currency
                    .entry(currency.to_owned())
                    .or_insert_with(Decimal::zero),
            };
            *sum = sum
                .checked_add(amount)
                .ok_or_else(|| StoreError::Corrupt("a cost sum overflowed".into()))?;
            Ok(())
        },
    )?;
    Ok(spent.into_iter().collect())
}

/// Adds the counts of each row of one group in `pieces` to `total`, made at the first row (so
/// `None` is left where the group has no row there).
fn add_rows(
    table: &ReadOnlyTable<(u32, u8, &'static str, u32), &'static [u8]>,
    (space, code, group): (u32, u8, &str),
    pieces: &[(u8, u32, u32)],
    total: &mut Option<Counts>,
) -> Result<(), StoreError> {
    for &(flag, lo, hi) in pieces {
        for entry in
            table.range((space, code | flag, group, lo)..(space, code | flag, group, hi))?
        {
            let (_, bytes) = entry?;
            records::with_stats_row(bytes.value(), |row| {
                rollup::add_stored(total.get_or_insert_with(Counts::default), row)
            })??;
        }
    }
    Ok(())
}

/// The `STATS` key ranges that cover the quarters `[from, to)` once each: `(0, quarters)` before
/// the first whole UTC day, `(DAY_ROWS, days)` for the whole days before the first whole block,
/// `(BLOCK_ROWS, blocks)` for the whole blocks, `(DAY_ROWS, days)` after the last, `(0,
/// quarters)` after the last whole day. Empty ranges are left out.
fn pieces(from: u32, to: u32) -> Vec<(u8, u32, u32)> {
    const PER_DAY: u32 = stats::QUARTERS_PER_DAY;
    const PER_BLOCK: u32 = rollup::BLOCK_DAYS;
    if from >= to {
        return Vec::new();
    }
    let first_day = from.div_ceil(PER_DAY);
    let end_day = to / PER_DAY;
    if first_day >= end_day {
        return vec![(0, from, to)];
    }
    let first_block = first_day.div_ceil(PER_BLOCK);
    let end_block = end_day / PER_BLOCK;
    let days = if first_block >= end_block {
        vec![(rollup::DAY_ROWS, first_day, end_day)]
    } else {
        vec![
            (rollup::DAY_ROWS, first_day, first_block * PER_BLOCK),
            (rollup::BLOCK_ROWS, first_block, end_block),
            (rollup::DAY_ROWS, end_block * PER_BLOCK, end_day),
        ]
    };
    let mut all = vec![(0, from, first_day * PER_DAY)];
    all.extend(days);
    all.push((0, end_day * PER_DAY, to));
    all.retain(|&(_, lo, hi)| lo < hi);
    all
}

/// `space`'s costs on the days `[from, to]` (both included), by day, then campaign.
pub fn costs(
    s: &Snapshot,
    space: u32,
    days: (cost::Day, cost::Day),
) -> Result<Vec<Cost>, StoreError> {
    let mut costs = Vec::new();
    each_cost(s, space, days, |day, campaign, amount, currency| {
        costs.push(Cost {
            day,
            campaign_name: campaign.to_owned(),
            amount,
            currency: currency.to_owned(),
        });
        Ok(())
    })?;
    Ok(costs)
}

/// Calls `each` with the day, campaign, amount and currency of each of `space`'s costs on the
/// days `[from, to]` (both included), by day, then campaign.
fn each_cost(
    s: &Snapshot,
    space: u32,
    (from, to): (cost::Day, cost::Day),
    mut each: impl FnMut(cost::Day, &str, Decimal, &str) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if from > to {
        return Ok(());
    }
    let table = s.txn.open_table(COSTS)?;
    for entry in table.range((space, from, "")..(space, to.saturating_add(1), ""))? {
        let (key, bytes) = entry?;
        let (_, day, campaign) = key.value();
        records::with_cost_row(bytes.value(), |r| {
            let amount = Decimal::parse(r.amount).map_err(|e| {
                StoreError::Corrupt(format!("cost of {campaign:?} on day {day}: {e}"))
            })?;
            each(day, campaign, amount, r.currency)
        })??;
    }
    Ok(())
}

/// `space`'s most recent rejections, newest first.
pub fn rejections(s: &Snapshot, space: u32, limit: usize) -> Result<Vec<Rejection>, StoreError> {
    let table = s.txn.open_table(REJECTIONS)?;
    let mut kept = Vec::new();
    for entry in table.range((space, 0)..=(space, u32::MAX))? {
        let (_, bytes) = entry?;
        kept.push(records::decode::<RejectionRecord>(bytes.value())?);
    }
    kept.sort_by_key(|r| std::cmp::Reverse(r.number));
    Ok(kept.into_iter().take(limit).map(|r| r.rejection).collect())
}

/// The number of space `name`.
pub fn space_no(txn: &ReadTransaction, name: &str) -> Result<u32, StoreError> {
    match txn.open_table(SPACES)?.get(name)? {
        Some(bytes) => Ok(records::decode::<SpaceRecord>(bytes.value())?.no),
        None => Err(StoreError::Refused(crate::error::Error::new(
            crate::error::Code::InvalidField,
            format!("no space named {name:?}"),
        ))),
    }
}

/// The admin password's hash, if one was set.
pub fn admin_password(txn: &ReadTransaction) -> Result<Option<String>, StoreError> {
    let table = txn.open_table(ADMIN)?;
    let Some(bytes) = table.get(ADMIN_PASSWORD)? else {
        return Ok(None);
    };
    String::from_utf8(bytes.value().to_vec())
        .map(Some)
        .map_err(|_| StoreError::Corrupt("the admin password hash is not text".to_owned()))
}

/// A stored link as the domain sees it.
pub(crate) fn link_of(slug: &str, r: LinkRecord) -> Result<Link, StoreError> {
    let destination = match (r.bot, r.target) {
        (Some(bot), None) => Destination::Bot(bot),
        (None, Some(target)) => Destination::Target(target),
        _ => {
            return Err(StoreError::Corrupt(format!(
                "link {slug:?} has neither a bot nor a target, or both"
            )));
        }
    };
    Ok(Link {
        space: r.space_no,
        slug: slug.to_owned(),
        destination,
        campaign_name: r.campaign_name,
        mode: if r.mode == 1 {
            Mode::Page
        } else {
            Mode::Redirect
        },
        created_at_ms: r.created_at_ms,
        deleted: r.deleted_at_ms.is_some(),
    })
}

/// Every link of the file, deleted ones included: what the public path looks slugs up in.
pub fn all_links(txn: &ReadTransaction) -> Result<Vec<Link>, StoreError> {
    let mut links = Vec::new();
    for entry in txn.open_table(LINKS)?.iter()? {
        let (slug, bytes) = entry?;
        links.push(link_of(slug.value(), records::decode(bytes.value())?)?);
    }
    Ok(links)
}

/// `space`'s links that are not deleted, oldest first, each with its clicks and bound clicks
/// (all time, from the stats rollup: every click whose `link_slug` is the slug).
pub fn links(s: &Snapshot, space: u32) -> Result<Vec<(Link, u64, u64)>, StoreError> {
    let table = s.txn.open_table(LINKS)?;
    let stats = s.txn.open_table(STATS)?;
    let code = Dimension::Link.code();
    let mut out = Vec::new();
    for entry in s
        .txn
        .open_table(LINKS_BY_SPACE)?
        .range((space, "")..=(space, "\u{10ffff}"))?
    {
        let (key, _) = entry?;
        let slug = key.value().1;
        let Some(bytes) = table.get(slug)? else {
            return Err(StoreError::Corrupt(format!(
                "links_by_space names {slug:?}, which has no link"
            )));
        };
        let link = link_of(slug, records::decode(bytes.value())?)?;
        if link.deleted {
            continue;
        }
        let mut total = Counts::default();
        for row in stats.range((space, code, slug, 0)..=(space, code, slug, u32::MAX))? {
            let (_, bytes) = row?;
            total
                .add(&rollup::counts_in(bytes.value())?)
                .map_err(StoreError::Corrupt)?;
        }
        out.push((link, total.clicks, total.bound_clicks));
    }
    out.sort_by_key(|(l, _, _)| l.created_at_ms);
    Ok(out)
}

#[cfg(test)]
mod pieces_tests {
    use super::pieces;
    use crate::domain::stats::QUARTERS_PER_DAY;
    use crate::storage::rollup::{BLOCK_DAYS, BLOCK_ROWS, DAY_ROWS};

    /// The quarters a piece's rows count.
    fn quarters((flag, lo, hi): (u8, u32, u32)) -> std::ops::Range<u32> {
        let per = match flag {
            0 => 1,
            DAY_ROWS => QUARTERS_PER_DAY,
            BLOCK_ROWS => QUARTERS_PER_DAY * BLOCK_DAYS,
            _ => panic!("flag {flag:#x}"),
        };
        lo * per..hi * per
    }

    #[test]
    fn pieces_cover_each_quarter_of_a_range_once() {
        let block = QUARTERS_PER_DAY * BLOCK_DAYS;
        let edges = [
            0,
            1,
            QUARTERS_PER_DAY - 1,
            QUARTERS_PER_DAY,
            block - 1,
            block,
            block + 5,
            3 * block - QUARTERS_PER_DAY,
            3 * block,
            3 * block + 7,
            20_000 * QUARTERS_PER_DAY + 13,
        ];
        let mut blocks_used = 0;
        for &from in &edges {
            for &to in &edges {
                let got = pieces(from, to);
                let mut covered: Vec<u32> = got.iter().flat_map(|&p| quarters(p)).collect();
                covered.sort_unstable();
                let want: Vec<u32> = (from..to.max(from)).collect();
                assert_eq!(covered, want, "pieces({from}, {to}) = {got:?}");
                blocks_used += got.iter().filter(|p| p.0 == BLOCK_ROWS).count();
            }
        }
        assert!(blocks_used > 0, "no range was read by blocks");
        // A range of whole blocks reads blocks only.
        assert_eq!(pieces(block, 3 * block), vec![(BLOCK_ROWS, 1, 3)]);
    }
}
