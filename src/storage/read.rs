//! The read operations, each one function on a [`Snapshot`]: the keyring, the space list,
//! `dry_run`'s dedup decision, the feed and its pages, links, rejections, what the benchmark
//! counts. The stats and costs are read in `read_stats.rs`, on the same snapshot.
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

use crate::domain::click::ClickIds;
use crate::domain::credential::{CredentialDigest, Kind};
use crate::domain::dedup::{self, DedupKey};
use crate::domain::event::{AttributedBy, EventId, EventKind, Source, ValidEvent};
use crate::domain::feed::{self, Attribution, FeedEvent, FeedPage, PageRequest};
use crate::domain::keyring::{KeyEntry, SpaceRef};
use crate::domain::link::{Destination, Link, Mode};
use crate::domain::rejection::Rejection;
use crate::domain::settings::SpaceSettings;
use crate::domain::stats::{Counts, Dimension};
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer::{self, Held};
use crate::storage::records::{self, CredentialRecord, SpaceRecord};
use crate::storage::records::{ClickRecord, EventRecord, LinkRecord, RejectionRecord};
use crate::storage::rollup;
use crate::storage::schema::{
    ADMIN, ADMIN_PASSWORD, CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, INBOX,
    LINKS, LINKS_BY_SPACE, META, META_EVENT_ID_SALT_HIGH, META_EVENT_ID_SALT_LOW, REJECTIONS,
    SPACE_SETTINGS, SPACES, STATS, TG_TOUCHES,
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
    /// `revoked …`, each time written by `at` (UTC for the command line, the space's zone on a
    /// page).
    #[must_use]
    pub fn state(&self, now_ms: u64, at: impl Fn(u64) -> String) -> String {
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

    /// `space`'s links that are not deleted, oldest first, each with its clicks and bound clicks
    /// (all time, from the stats rollup: every click whose `link_slug` is the slug).
    pub fn links(&self, space: u32) -> Result<Vec<(Link, u64, u64)>, StoreError> {
        let table = self.txn.open_table(LINKS)?;
        let stats = self.txn.open_table(STATS)?;
        let code = Dimension::Link.code();
        let mut out = Vec::new();
        for entry in self
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
                    ids: ClickIds {
                        ttclid: c.ttclid,
                        gclid: c.gclid,
                        gbraid: c.gbraid,
                        wbraid: c.wbraid,
                        fbp: c.fbp,
                    },
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
        ttclid: None,
        gclid: None,
        gbraid: None,
        wbraid: None,
        fbp: None,
    };
    event.attribute(click);
    // The Telegram id the event named, where it named one; else its click's.
    event.tg_id = r.tg_id.or(event.tg_id);
    Ok(event)
}

impl Snapshot {
    /// The admin password's hash, if one was set.
    pub fn admin_password(&self) -> Result<Option<String>, StoreError> {
        let table = self.txn().open_table(ADMIN)?;
        let Some(bytes) = table.get(ADMIN_PASSWORD)? else {
            return Ok(None);
        };
        String::from_utf8(bytes.value().to_vec())
            .map(Some)
            .map_err(|_| StoreError::Corrupt("the admin password hash is not text".to_owned()))
    }

    /// The number of space `name`.
    pub fn space_no(&self, name: &str) -> Result<u32, StoreError> {
        match self.txn().open_table(SPACES)?.get(name)? {
            Some(bytes) => Ok(records::decode::<SpaceRecord>(bytes.value())?.no),
            None => Err(StoreError::Refused(crate::error::Error::new(
                crate::error::Code::InvalidField,
                format!("no space named {name:?}"),
            ))),
        }
    }

    /// Every space, by name, with its credentials, newest first. `seen` holds last-used times
    /// newer than the stored ones (kept in memory between flushes).
    pub fn list_spaces(
        &self,
        seen: &HashMap<CredentialDigest, u64, impl std::hash::BuildHasher>,
    ) -> Result<Vec<SpaceSummary>, StoreError> {
        let mut spaces = Vec::new();
        let mut by_no = HashMap::new();
        let settings = self.txn().open_table(SPACE_SETTINGS)?;
        for entry in self.txn().open_table(SPACES)?.iter()? {
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
        for entry in self.txn().open_table(CREDENTIALS)?.iter()? {
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
}

/// A stored link as the domain sees it.
pub(crate) fn link_of(slug: &str, r: LinkRecord) -> Result<Link, StoreError> {
    let destination = match (r.bot, r.target, r.channel) {
        (Some(bot), None, None) => Destination::Bot(bot),
        (None, Some(target), None) => Destination::Target(target),
        (None, None, Some(c)) => Destination::Channel(crate::domain::channel::Channel {
            chat: c.chat,
            chat_id: c.chat_id,
            title: c.title,
            join_requests: c.join_requests,
            fallback: c.fallback,
        }),
        _ => {
            return Err(StoreError::Corrupt(format!(
                "link {slug:?} has not exactly one of a bot, a target and a channel"
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
