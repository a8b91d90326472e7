//! A read snapshot ([`Snapshot`]) and the reads of events on it, each one of its methods:
//! `dry_run`'s dedup decision, the feed and its pages, a space's settings, rejections, and
//! what the benchmark counts. The reads of the other families of tables are methods of
//! `Snapshot` in their own files: spaces and the keyring in `spaces.rs`, links in `links.rs`,
//! channels in `channels.rs`, destinations in `destinations/`, stats and costs in
//! `read_stats.rs`.
//!
//! They run on the reader threads (`engine/reader.rs`), handed over by
//! [`Store::read`](crate::storage::Store::read). None of them writes.

use std::sync::Arc;

use redb::{
    Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata,
};

use crate::domain::dedup::{self, DedupKey};
use crate::domain::event::{AttributedBy, EventId, EventKind, Source, ValidEvent};
use crate::domain::feed::{self, Attribution, FeedEvent, FeedPage, PageRequest};
use crate::domain::rejection::Rejection;
use crate::domain::settings::SpaceSettings;
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer::{self, Held};
use crate::storage::records::{self, ClickRecord, EventRecord, RejectionRecord};
use crate::storage::schema::{
    CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, DEDUP, INBOX, META, META_EVENT_ID_SALT_HIGH,
    META_EVENT_ID_SALT_LOW, REJECTIONS, SPACE_SETTINGS, STATS, TG_TOUCHES,
};

/// One read snapshot, shared by the reads of a batch, with the tables the hot reads use opened
/// once for all of them.
pub struct Snapshot {
    pub(super) txn: ReadTransaction,
    clicks: ReadOnlyTable<(u32, &'static str), &'static [u8]>,
    dedup: ReadOnlyTable<dedup_buffer::TableKey, dedup_buffer::Earlier>,
    touches: ReadOnlyTable<(u32, u64), &'static [u8]>,
    /// The file's event id salt, read when an event without a stored id is first shown.
    salt: std::sync::OnceLock<u128>,
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
            salt: std::sync::OnceLock::new(),
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

    /// The `event_id` of stored event `inbox_id` (`event_id`).
    pub(crate) fn event_id(
        &self,
        record: &EventRecord,
        inbox_id: u64,
    ) -> Result<EventId, StoreError> {
        if let Some(bits) = record.event_id {
            return Ok(EventId::from_bits(bits));
        }
        let salt = if let Some(salt) = self.salt.get() {
            *salt
        } else {
            let salt = event_id_salt(&self.txn.open_table(META)?)?;
            *self.salt.get_or_init(|| salt)
        };
        Ok(EventId::derived(salt, inbox_id))
    }
}

/// The data file's event id salt (`META_EVENT_ID_SALT_HIGH` and `_LOW`), which every file of
/// schema 13 holds.
pub(crate) fn event_id_salt(
    meta: &impl ReadableTable<&'static str, u64>,
) -> Result<u128, StoreError> {
    match (
        meta.get(META_EVENT_ID_SALT_HIGH)?,
        meta.get(META_EVENT_ID_SALT_LOW)?,
    ) {
        (Some(high), Some(low)) => Ok(u128::from(high.value()) << 64 | u128::from(low.value())),
        _ => Err(StoreError::Corrupt(
            "the data file has no event id salt (meta event_id_salt_high and _low), from \
             which the ids of its older events are derived"
                .into(),
        )),
    }
}

/// The `event_id` of stored event `inbox_id`: the one its record holds, or, for an event stored
/// before events had one, the one derived from it and the file's salt (read from `meta`).
pub(crate) fn event_id(
    meta: &impl ReadableTable<&'static str, u64>,
    record: &EventRecord,
    inbox_id: u64,
) -> Result<EventId, StoreError> {
    match record.event_id {
        Some(bits) => Ok(EventId::from_bits(bits)),
        None => Ok(EventId::derived(event_id_salt(meta)?, inbox_id)),
    }
}

/// What [`judge_event`] answers: the event it would duplicate (`inbox_id` and `event_id`), and
/// how it would be attributed.
pub type Judged = (Option<(u64, EventId)>, Option<AttributedBy>);

/// What storing `event` would do now, without storing it: `(duplicate_of, attributed_by)`,
/// attributed as the writer would (`storage/attribution.rs`); `duplicate_of` is the earlier
/// event's `inbox_id` and `event_id`. `held` is where the writer's dedup buffer says the key's
/// entry is: in the buffer (newer than the table's), or in which generations of the table.
pub fn judge_event(
    snapshot: &Snapshot,
    space: u32,
    event: &ValidEvent,
    key: Option<&DedupKey>,
    held: Option<Held>,
) -> Result<Judged, StoreError> {
    let attributed_by = attribution::resolve(
        &snapshot.clicks,
        &snapshot.touches,
        || Ok(snapshot.space_settings(space)?.attribution),
        space,
        event,
    )?
    .map(|r| r.by);
    let duplicate_of = match key {
        None => None,
        Some(key) => {
            let earlier = match held {
                Some(Held::Buffered(e)) => Some(e),
                Some(Held::InTable(gens)) => dedup_buffer::newest_in(
                    &snapshot.dedup,
                    gens,
                    &dedup_buffer::entry_key(space, key),
                )?,
                None => None,
            };
            dedup::duplicate_of(key, earlier, event.received_at_ms)
        }
    };
    let duplicate_of = match duplicate_of {
        None => None,
        Some(inbox_id) => {
            let inbox = snapshot.txn.open_table(INBOX)?;
            let Some(bytes) = inbox.get((space, inbox_id))? else {
                return Err(StoreError::Corrupt(format!(
                    "a dedup entry names event {inbox_id}, which the inbox lacks"
                )));
            };
            let record: EventRecord = records::decode(bytes.value())?;
            Some((inbox_id, snapshot.event_id(&record, inbox_id)?))
        }
    };
    Ok((duplicate_of, attributed_by))
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

impl Snapshot {
    /// A page of `space`'s inbox after `page.after`, with each event's click joined now.
    pub fn feed(&self, space: u32, page: PageRequest) -> Result<FeedPage, StoreError> {
        let inbox = self.txn.open_table(INBOX)?;
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
                events.push(feed_event(self, space, inbox_id, record)?);
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
        &self,
        space: u32,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<FeedEvent>, Option<u64>), StoreError> {
        let inbox = self.txn.open_table(INBOX)?;
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
            events.push(feed_event(self, space, inbox_id, record)?);
        }
        Ok((events, older))
    }

    /// `space`'s most recent rejections, newest first.
    pub fn rejections(&self, space: u32, limit: usize) -> Result<Vec<Rejection>, StoreError> {
        let table = self.txn.open_table(REJECTIONS)?;
        let mut kept = Vec::new();
        for entry in table.range((space, 0)..=(space, u32::MAX))? {
            let (_, bytes) = entry?;
            kept.push(records::decode::<RejectionRecord>(bytes.value())?);
        }
        kept.sort_by_key(|r| std::cmp::Reverse(r.number));
        Ok(kept.into_iter().take(limit).map(|r| r.rejection).collect())
    }

    /// The settings of `space`.
    pub fn space_settings(&self, space: u32) -> Result<SpaceSettings, StoreError> {
        attribution::settings(&self.txn.open_table(SPACE_SETTINGS)?, space)
    }
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
                    ids: c.ids,
                })
            }
        },
    };
    let event_id = s.event_id(&r, inbox_id)?.to_string();
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
        event_id,
        // The click ids, from the click, by `attribute`.
        ..FeedEvent::default()
    };
    event.attribute(click);
    // The Telegram id the event named, where it named one; else its click's.
    event.tg_id = r.tg_id.or(event.tg_id);
    Ok(event)
}
