//! The write operations, each one function on [`Txn`]: the tables of the batch's write
//! transaction, with what the batch shares (the next `inbox_id`, the dedup buffer).
//!
//! The commit loop (`engine/commit.rs`) runs each request's operation inside one transaction and
//! answers after the commit; callers hand an operation to
//! [`Store::write`](crate::storage::Store::write). Adding a write is one method of `Txn`. The
//! writes here are events, settings, rejections and retention; those of the other families of
//! tables have a file of their own, each an `impl Txn`: clicks and bindings in `clicks.rs`,
//! links in `links.rs`, Telegram channels in `channels.rs`, spaces and credentials in
//! `spaces.rs`, costs in `costs.rs`, destinations and deliveries in `destinations/outbox.rs`.
//!
//! How an operation fails decides how far the failure reaches (`commit.rs`):
//! - [`StoreError::Refused`]: the caller's request is refused (a taken name); that request is
//!   answered with it.
//! - [`StoreError::Corrupt`]: a stored record does not decode; that request is answered
//!   `internal` and the rest of the batch commits.
//! - anything else (an I/O error of redb): the whole batch fails.
//!
//! So that a refused or corrupt request leaves nothing behind, an operation reads and decodes
//! everything it needs before its first insert.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use redb::{Key, ReadableTable, Table, TableDefinition, Value, WriteTransaction};

use crate::domain::dedup::{self, DedupKey, Expiry, WINDOWED_RULES};
use crate::domain::event::{EventId, EventKind, ValidEvent};
use crate::domain::link::{Directory, Link};
use crate::domain::outcome::{EventOutcome, PruneCursor, PruneStep};
use crate::domain::rejection::{KEPT_PER_SPACE, Rejection};
use crate::domain::settings::{SettingsPatch, SpaceSettings, check_bot_unshared};
use crate::domain::stats::Counts;
use crate::platform::{self, ClickFacts, Secret};
use crate::storage::attribution;
use crate::storage::cost_sums::CostKey;
use crate::storage::error::StoreError;
use crate::storage::first_deposit::Depositors;
use crate::storage::index::dedup_buffer::{self, DedupBuffer};
use crate::storage::index::fbclid_buffer::{self, FbclidBuffer};
use crate::storage::read;
use crate::storage::records::{self, RejectionRecord, SpaceRecord};
use crate::storage::rollup::Rollup;
use crate::storage::schema::{
    CLICK_HINTS, CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, DELIVERIES,
    DELIVERY_QUEUE, DELIVERY_STATES, DESTINATIONS, INBOX, LINKS, LINKS_BY_SPACE, META,
    META_INBOX_SEQ, REJECTION_COUNTS, REJECTIONS, SPACE_SETTINGS, SPACES, STATS, TG_TOUCHES,
};
use crate::storage::schema::{COSTS, FIRST_DEPOSITS_BY_CLICK, FIRST_DEPOSITS_BY_TG};

/// What one batch changes of the destinations and their deliveries.
#[derive(Default)]
pub(super) struct OutboxBatch {
    /// The delivery state rows this batch changed, by destination, written at its end.
    pub(super) states: HashMap<u32, records::DeliveryStateRecord>,
    /// How many deliveries this batch moved into (+) and out of (-) each state, over every
    /// destination: what the writer adds to the in-memory totals once the batch commits.
    pub(super) moved: [i64; 5],
    /// Whether a destination was created or removed in this batch: the directory no longer
    /// says, and each space's destinations are read from the table for the rest of the batch.
    pub(super) changed: bool,
    /// Those reads, once per space.
    pub(super) read_since_change: HashMap<u32, Vec<std::sync::Arc<platform::Destination>>>,
}

/// A table of the batch's transaction that most batches never touch, opened the first time an
/// operation of the batch uses it. redb looks up an open table's definition when it opens it and
/// again at the commit: with all 24 tables opened, that was about 12% of the writer's CPU in
/// batches of new events, which touch the 10 opened eagerly.
pub(crate) struct Lazy<'t, K: Key + 'static, V: Value + 'static> {
    txn: &'t WriteTransaction,
    definition: TableDefinition<'static, K, V>,
    table: Option<Table<'t, K, V>>,
}

impl<'t, K: Key + 'static, V: Value + 'static> Lazy<'t, K, V> {
    fn new(txn: &'t WriteTransaction, definition: TableDefinition<'static, K, V>) -> Self {
        Lazy {
            txn,
            definition,
            table: None,
        }
    }

    /// The table, opened now if no operation of the batch has used it yet.
    pub(crate) fn open(&mut self) -> Result<&mut Table<'t, K, V>, StoreError> {
        let table = match self.table.take() {
            Some(table) => table,
            None => self.txn.open_table(self.definition)?,
        };
        Ok(self.table.insert(table))
    }
}

/// The tables of one write transaction, opened once per batch (the rarely used ones when first
/// used), and what the batch's operations share.
pub struct Txn<'t> {
    /// The transaction itself, for the tables only some operations use (Telegram channels'),
    /// opened by those operations when they run rather than by every batch.
    pub(super) transaction: &'t WriteTransaction,
    pub(super) meta: Table<'t, &'static str, u64>,
    pub(super) spaces: Lazy<'t, &'static str, &'static [u8]>,
    pub(super) credentials: Lazy<'t, &'static [u8; 32], &'static [u8]>,
    pub(super) inbox: Table<'t, (u32, u64), &'static [u8]>,
    pub(super) dedup: Table<'t, dedup_buffer::TableKey, dedup_buffer::Earlier>,
    pub(super) clicks: Table<'t, (u32, &'static str), &'static [u8]>,
    pub(super) by_fbclid: Table<'t, (u32, u128), &'static str>,
    pub(super) by_tg: Lazy<'t, (u32, u64, &'static str), ()>,
    pub(super) touches: Table<'t, (u32, u64), &'static [u8]>,
    pub(super) space_settings: Table<'t, u32, &'static [u8]>,
    pub(super) stats: Table<'t, (u32, u8, &'static str, u32), &'static [u8]>,
    pub(super) rejections: Lazy<'t, (u32, u32), &'static [u8]>,
    pub(super) rejection_counts: Lazy<'t, u32, u64>,
    pub(super) links: Lazy<'t, &'static str, &'static [u8]>,
    pub(super) links_by_space: Lazy<'t, (u32, &'static str), ()>,
    pub(super) depositors: Depositors<'t>,
    pub(super) costs: Lazy<'t, CostKey, &'static [u8]>,
    /// The stats counts of this batch, written once at its end.
    pub(super) rollup: Rollup,
    /// The last `inbox_id` handed out, stored in `META` at the end of the batch.
    pub(super) inbox_seq: u64,
    /// Whether the keyring must be read again once the batch commits.
    pub(super) credentials_changed: bool,
    /// The links this batch created or changed, for the directory once the batch commits.
    pub(super) changed_links: Vec<Link>,
    /// The running server's links, as of the batch before: what the bound per space counts.
    pub(super) links_directory: &'t Directory,
    /// Dedup entries older than this transaction, not yet in `DEDUP`.
    pub(super) pending: &'t DedupBuffer,
    /// The dedup entries this transaction adds and writes out.
    pub(super) change: dedup_buffer::Change,
    /// `clicks_by_fbclid` entries older than this transaction, not yet in the table.
    pub(super) fbclid_pending: &'t FbclidBuffer,
    /// The `clicks_by_fbclid` entries this transaction adds and writes out.
    pub(super) fbclid_change: fbclid_buffer::Change,
    /// This batch's new clicks, encoded, written in key order at its end ([`Txn::write_clicks`]):
    /// in the order they came, two clicks of one millisecond would land out of order about half
    /// the time, and redb splits the last leaf evenly for a key that is not past every other,
    /// leaving half-empty leaves behind. No request of the batch can name them: their uids are
    /// answered after the commit.
    pub(super) new_clicks: BTreeMap<(u32, String), Vec<u8>>,
    /// The earliest time a new uid of this batch may begin with: past every uid of the batches
    /// before, so that a batch's clicks come after the last one's.
    pub(super) uid_floor: u64,
    /// The space of each link this batch's visits named, `None` if it has none or is deleted: a
    /// batch of visits mostly names one link, read and decoded once. Any change to a link
    /// drops its entry.
    pub(super) link_spaces: HashMap<Box<str>, Option<u32>>,
    /// Each space's settings, read once per batch when an event by Telegram id or a link click
    /// needs them; a change of the settings in the batch replaces them, so every event and click
    /// uses the settings in force when it is written.
    pub(super) settings_cache: HashMap<u32, SpaceSettings>,
    /// This batch's visitors' hints of new clicks, written in key order with the clicks.
    pub(super) new_hints: BTreeMap<(u32, String), Vec<u8>>,
    /// The live destinations as of the last commit (`Store`'s directory).
    pub(super) directory: &'t platform::Directory,
    /// What this batch changes of the destinations and their deliveries (`outbox.rs`).
    pub(super) outbox: OutboxBatch,
    pub(super) destinations: Lazy<'t, u32, &'static [u8]>,
    pub(super) delivery_states: Lazy<'t, u32, &'static [u8]>,
    pub(super) deliveries: Lazy<'t, (u32, u64), &'static [u8]>,
    pub(super) delivery_queue: Lazy<'t, (u32, u64, u64), ()>,
    pub(super) click_hints: Lazy<'t, (u32, &'static str), &'static [u8]>,
}

impl<'t> Txn<'t> {
    pub(super) fn open(
        txn: &'t WriteTransaction,
        pending: &'t DedupBuffer,
        fbclid_pending: &'t FbclidBuffer,
        links_directory: &'t Directory,
        uid_floor: u64,
        directory: &'t platform::Directory,
    ) -> Result<Txn<'t>, StoreError> {
        let meta = txn.open_table(META)?;
        let inbox_seq = meta.get(META_INBOX_SEQ)?.map_or(0, |v| v.value());
        Ok(Txn {
            transaction: txn,
            meta,
            spaces: Lazy::new(txn, SPACES),
            credentials: Lazy::new(txn, CREDENTIALS),
            inbox: txn.open_table(INBOX)?,
            dedup: txn.open_table(DEDUP)?,
            clicks: txn.open_table(CLICKS)?,
            by_fbclid: txn.open_table(CLICKS_BY_FBCLID)?,
            by_tg: Lazy::new(txn, CLICKS_BY_TG),
            touches: txn.open_table(TG_TOUCHES)?,
            space_settings: txn.open_table(SPACE_SETTINGS)?,
            stats: txn.open_table(STATS)?,
            rejections: Lazy::new(txn, REJECTIONS),
            rejection_counts: Lazy::new(txn, REJECTION_COUNTS),
            links: Lazy::new(txn, LINKS),
            links_by_space: Lazy::new(txn, LINKS_BY_SPACE),
            depositors: Depositors {
                by_tg: txn.open_table(FIRST_DEPOSITS_BY_TG)?,
                by_click: txn.open_table(FIRST_DEPOSITS_BY_CLICK)?,
            },
            costs: Lazy::new(txn, COSTS),
            rollup: Rollup::default(),
            inbox_seq,
            credentials_changed: false,
            changed_links: Vec::new(),
            links_directory,
            pending,
            change: dedup_buffer::Change::default(),
            fbclid_pending,
            fbclid_change: fbclid_buffer::Change::default(),
            new_clicks: BTreeMap::new(),
            uid_floor,
            link_spaces: HashMap::new(),
            settings_cache: HashMap::new(),
            new_hints: BTreeMap::new(),
            directory,
            outbox: OutboxBatch::default(),
            destinations: Lazy::new(txn, DESTINATIONS),
            delivery_states: Lazy::new(txn, DELIVERY_STATES),
            deliveries: Lazy::new(txn, DELIVERIES),
            delivery_queue: Lazy::new(txn, DELIVERY_QUEUE),
            click_hints: Lazy::new(txn, CLICK_HINTS),
        })
    }

    /// Stores `event` in the inbox of `space` unless its dedup key names an earlier event,
    /// attributed to its click (`storage/attribution.rs`) under the settings in force now, with
    /// a delivery to each destination that takes it.
    pub fn record_event(
        &mut self,
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
    ) -> Result<EventOutcome, StoreError> {
        self.record_event_sending(space, event, key, true)
    }

    /// [`Txn::record_event`], with deliveries only when `send`: an imported history is stored
    /// and counted without being sent again.
    pub fn record_event_sending(
        &mut self,
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
        send: bool,
    ) -> Result<EventOutcome, StoreError> {
        let (cache, settings) = (&mut self.settings_cache, &self.space_settings);
        let resolved = attribution::resolve(
            &self.clicks,
            &self.touches,
            || Ok(cached_settings(cache, settings, space)?.attribution),
            space,
            &event,
        )?;
        let matched = resolved.is_some();
        let attributed_by = resolved.as_ref().map(|r| r.by);
        let entry_key = key.as_ref().map(|k| dedup_buffer::entry_key(space, k));
        if let (Some(key), Some(k)) = (&key, &entry_key) {
            // Newest first: this transaction's events, then the buffer, then the table.
            let earlier = match self
                .change
                .fresh
                .get(k)
                .copied()
                .or_else(|| self.pending.get(k))
            {
                Some(e) => Some(e),
                None => self.pending.in_table(&self.dedup, k)?,
            };
            if let Some(inbox_id) = dedup::duplicate_of(key, earlier, event.received_at_ms) {
                let Some(bytes) = self.inbox.get((space, inbox_id))? else {
                    return Err(StoreError::Corrupt(format!(
                        "a dedup entry names event {inbox_id}, which the inbox lacks"
                    )));
                };
                let record: records::EventRecord = records::decode(bytes.value())?;
                return Ok(EventOutcome {
                    duplicate: true,
                    inbox_id,
                    event_id: read::event_id(&self.meta, &record, inbox_id)?,
                    matched,
                    attributed_by,
                });
            }
        }
        // Every read that can fail before the first write (the module's rule).
        let click = resolved
            .as_ref()
            .map(|r| ClickFacts::of(r.click.fbclid.is_some(), &r.click.ids));
        let deliveries = if send {
            self.deliveries_for(space, event.kind, click)?
        } else {
            Vec::new()
        };
        self.inbox_seq += 1;
        let inbox_id = self.inbox_seq;
        let received_at_ms = event.received_at_ms;
        let first_deposit = self.first_deposit(space, &event, resolved.as_ref(), inbox_id)?;
        let counts = Counts::event(event.kind, event.value, &event.currency, first_deposit);
        self.rollup.event(
            space,
            resolved.as_ref().map(|r| &r.click),
            event.occurred_at_ms,
            &counts,
        );
        let mut record =
            dedup_buffer::event_record(event, resolved.as_ref().map(|r| (r.by, r.uid.as_str())));
        record.first_deposit = first_deposit;
        let event_id = EventId::random();
        record.event_id = Some(event_id.bits());
        self.inbox
            .insert((space, inbox_id), records::encode(&record).as_slice())?;
        if let Some(k) = entry_key {
            self.change.fresh.insert(k, (inbox_id, received_at_ms));
        }
        self.enqueue_deliveries(inbox_id, &deliveries)?;
        Ok(EventOutcome {
            duplicate: false,
            inbox_id,
            event_id,
            matched,
            attributed_by,
        })
    }

    /// Whether new event `inbox_id` is a first deposit (`storage/first_deposit.rs`): its user is
    /// the Telegram id it names, else the one its click is bound to.
    fn first_deposit(
        &mut self,
        space: u32,
        event: &ValidEvent,
        resolved: Option<&attribution::Resolved>,
        inbox_id: u64,
    ) -> Result<bool, StoreError> {
        if event.kind != EventKind::Deposit {
            return Ok(false);
        }
        let user = event.tg_id.or(resolved.and_then(|r| r.click.tg_id));
        self.depositors
            .decide(space, user, resolved.map(|r| r.uid.as_str()), inbox_id)
    }

    /// Applies `patch` to the settings of `space`; answers them as they now are. A bot token
    /// whose bot is another space's is refused here, where every way in passes and no other
    /// write can come between the check and the change ([`check_bot_unshared`]).
    pub fn update_settings(
        &mut self,
        space: u32,
        patch: &SettingsPatch,
    ) -> Result<SpaceSettings, StoreError> {
        let mut settings = attribution::settings(&self.space_settings, space)?;
        patch.apply(&mut settings).map_err(StoreError::Refused)?;
        if let Some(token) = patch.value("telegram_bot_token").filter(|t| !t.is_empty()) {
            let others = self.other_bot_tokens(space)?;
            let others = others.iter().map(|(n, t)| (n.as_str(), t.expose()));
            check_bot_unshared(token, others).map_err(StoreError::Refused)?;
        }
        if !patch.is_empty() {
            self.space_settings.insert(
                space,
                records::encode(&attribution::settings_record(&settings)).as_slice(),
            )?;
            self.settings_cache.insert(space, settings.clone());
        }
        Ok(settings)
    }

    /// Every space but `space` that has a bot token: its name and the token.
    fn other_bot_tokens(&mut self, space: u32) -> Result<Vec<(String, Secret)>, StoreError> {
        let mut out = Vec::new();
        for entry in self.spaces.open()?.iter()? {
            let (name, bytes) = entry?;
            let no = records::decode::<SpaceRecord>(bytes.value())?.no;
            if no == space {
                continue;
            }
            if let Some(token) = attribution::settings(&self.space_settings, no)?.telegram_bot_token
            {
                out.push((name.value().to_owned(), token));
            }
        }
        Ok(out)
    }

    /// One step of retention: looks at up to `limit` entries of the windowed dedup rules after
    /// `after` (from the start if `None`), in key order, generation by generation, space by
    /// space and rule by rule, and removes those that `expiry` says can never match again.
    /// Entries of the permanent rules are never looked at.
    ///
    /// Only the table is pruned. An entry still in the dedup buffer is newer than the table's
    /// entry for its key, and is looked at by a later sweep once written; one that the redo of
    /// an open writes again (its event is after `dedup_redo_from`) is the newest entry of its
    /// key, expired or not, exactly as if it had never been pruned, and a later sweep takes it.
    pub fn prune_dedup(
        &mut self,
        after: Option<PruneCursor>,
        expiry: Expiry,
        limit: usize,
    ) -> Result<PruneStep, StoreError> {
        let mut step = PruneStep::default();
        let mut expired = Vec::new();
        let (mut generation, mut space, mut rule, mut after_digest) = after
            .map_or((0, 0, WINDOWED_RULES[0], None), |(g, s, r, d)| {
                (g, s, r, Some(d))
            });
        loop {
            let start = match after_digest {
                Some(d) => Bound::Excluded((generation, space, rule, d)),
                None => Bound::Included((generation, space, rule, 0)),
            };
            let end = Bound::Included((generation, space, rule, u128::MAX));
            let room = limit.saturating_sub(step.scanned as usize);
            let mut last = None;
            for entry in self
                .dedup
                .range::<dedup_buffer::TableKey>((start, end))?
                .take(room)
            {
                let (key, value) = entry?;
                let (_, at_ms) = value.value();
                step.scanned += 1;
                last = Some(key.value().3);
                if expiry.expired(rule, at_ms) {
                    expired.push(key.value());
                }
            }
            if step.scanned as usize >= limit {
                step.next = last.or(after_digest).map(|d| (generation, space, rule, d));
                break;
            }
            // This rule's entries of the space are done: on to the next windowed rule, or the
            // next space (of this generation or a later one) that has entries.
            if let Some(&next_rule) = WINDOWED_RULES.iter().find(|&&r| r > rule) {
                (rule, after_digest) = (next_rule, None);
                continue;
            }
            let from = match space.checked_add(1) {
                Some(s) => Some((generation, s)),
                None => generation.checked_add(1).map(|g| (g, 0)),
            };
            let next = match from {
                Some((g, s)) => self
                    .dedup
                    .range((g, s, 0, 0)..)?
                    .next()
                    .transpose()?
                    .map(|(k, _)| (k.value().0, k.value().1)),
                None => None,
            };
            match next {
                Some((g, s)) => {
                    (generation, space, rule, after_digest) = (g, s, WINDOWED_RULES[0], None);
                }
                None => break,
            }
        }
        for key in expired {
            self.dedup.remove(key)?;
            step.removed += 1;
        }
        Ok(step)
    }

    /// The settings of `space` in force now in this batch.
    pub(super) fn settings_of(&mut self, space: u32) -> Result<&SpaceSettings, StoreError> {
        cached_settings(&mut self.settings_cache, &self.space_settings, space)
    }

    /// Adds refused requests to their spaces' rejection logs, each replacing the space's oldest
    /// once the log holds `KEPT_PER_SPACE`.
    pub(super) fn record_rejections(
        &mut self,
        rejections: impl IntoIterator<Item = (u32, Rejection)>,
    ) -> Result<(), StoreError> {
        for (space, r) in rejections {
            let number = self
                .rejection_counts
                .open()?
                .get(space)?
                .map_or(0, |v| v.value());
            let record = RejectionRecord {
                number,
                rejection: r,
            };
            let slot = (number % u64::from(KEPT_PER_SPACE)) as u32;
            self.rejections
                .open()?
                .insert((space, slot), records::encode(&record).as_slice())?;
            self.rejection_counts.open()?.insert(space, number + 1)?;
        }
        Ok(())
    }
}

/// The settings of `space` from `cache`, read from `table` once per batch.
fn cached_settings<'c>(
    cache: &'c mut HashMap<u32, SpaceSettings>,
    table: &Table<'_, u32, &'static [u8]>,
    space: u32,
) -> Result<&'c SpaceSettings, StoreError> {
    Ok(match cache.entry(space) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(attribution::settings(table, space)?)
        }
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::domain::click::{self, NewClick};
    use crate::storage::engine::open::open_in_memory;

    /// A data file in memory with what the writer hands a transaction, all empty: its dedup
    /// and `fbclid` buffers, the links' and the destinations' directories.
    pub(in crate::storage) struct Bare {
        pub db: redb::Database,
        dedup: DedupBuffer,
        fbclid: FbclidBuffer,
        directory: Directory,
        destinations: platform::Directory,
    }

    impl Bare {
        pub(in crate::storage) fn new() -> Bare {
            Bare {
                db: open_in_memory().unwrap().db,
                dedup: DedupBuffer::default(),
                fbclid: FbclidBuffer::default(),
                directory: Directory::default(),
                destinations: platform::Directory::default(),
            }
        }

        /// A [`Txn`] in `txn` as the writer opens one.
        pub(in crate::storage) fn open<'t>(&'t self, txn: &'t WriteTransaction) -> Txn<'t> {
            let (dedup, fbclid, directory) = (&self.dedup, &self.fbclid, &self.directory);
            Txn::open(txn, dedup, fbclid, directory, 0, &self.destinations).unwrap()
        }
    }

    pub(in crate::storage) fn visit() -> NewClick {
        NewClick {
            link_slug: None,
            fbclid: None,
            campaign_name: None,
            raw_query: None,
            clicked_at_ms: 1_700_000_000_000,
            ids: click::ClickIds::default(),
            hints: None,
            variant: None,
        }
    }

    /// Retention walks every generation: expired windowed entries go from each, in steps of
    /// any size, and nothing else is touched.
    #[test]
    fn pruning_takes_expired_entries_from_every_generation() {
        use crate::domain::dedup::WINDOWED_RULES;
        let [windowed, other_windowed] = WINDOWED_RULES;
        let permanent = 1;
        let bare = Bare::new();
        let expiry = Expiry {
            now_ms: 1_000_000,
            window_ms: 1_000,
        };
        // Generations 0, 1 and 3 (2 pruned empty), spaces 1, 2 and u32::MAX: old windowed
        // entries (at 5), fresh ones (at 999_500) and permanent ones (at 5).
        let mut want_left = Vec::new();
        let txn = bare.db.begin_write().unwrap();
        {
            let mut t = bare.open(&txn);
            for generation in [0, 1, 3] {
                for space in [1, 2, u32::MAX] {
                    for d in 0..3u128 {
                        for (rule, at) in [(windowed, 5), (other_windowed, 999_500), (permanent, 5)]
                        {
                            let k = (generation, space, rule, d);
                            t.dedup.insert(k, (1, at)).unwrap();
                            if !expiry.expired(rule, at) {
                                want_left.push(k);
                            }
                        }
                    }
                }
            }
        }
        txn.commit().unwrap();
        want_left.sort_unstable();
        for limit in [1, 2, 7, 1000] {
            let mut after = None;
            let mut removed = 0;
            loop {
                let txn = bare.db.begin_write().unwrap();
                let step = bare.open(&txn).prune_dedup(after, expiry, limit).unwrap();
                txn.commit().unwrap();
                removed += step.removed;
                match step.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            // The first sweep takes the 27 old ones; later sweeps find none.
            assert_eq!(removed, if limit == 1 { 27 } else { 0 }, "limit {limit}");
            let txn = redb::ReadableDatabase::begin_read(&bare.db).unwrap();
            let left: Vec<_> = txn
                .open_table(DEDUP)
                .unwrap()
                .iter()
                .unwrap()
                .map(|e| e.unwrap().0.value())
                .collect();
            assert_eq!(left, want_left, "limit {limit}");
        }
    }

    /// A batch reads a space's `attribution` once for its events by Telegram id; a change of
    /// the settings in the same batch must be in force for the events after it.
    #[test]
    fn an_event_after_a_settings_change_in_its_batch_uses_the_new_setting() {
        use crate::domain::dedup::tests::by_tg;
        use crate::domain::event::{AttributedBy, EventKind};
        let bare = Bare::new();
        let batch = |op: &mut dyn FnMut(&mut Txn<'_>)| {
            let txn = bare.db.begin_write().unwrap();
            {
                let mut t = bare.open(&txn);
                op(&mut t);
                t.write_clicks().unwrap();
            }
            txn.commit().unwrap();
        };
        let mut uids = Vec::new();
        batch(&mut |t| {
            for _ in 0..2 {
                uids.push(t.back_fill_click(1, visit()).unwrap().uid);
            }
        });
        batch(&mut |t| {
            for (at, uid) in [(10, &uids[1]), (20, &uids[0])] {
                t.bind(1, uid, 7, at).unwrap();
            }
        });
        let stored_uid = |t: &mut Txn<'_>, inbox_id| {
            let bytes = t.inbox.get((1, inbox_id)).unwrap().unwrap();
            records::decode::<records::EventRecord>(bytes.value())
                .unwrap()
                .uid
        };
        batch(&mut |t| {
            let first = t
                .record_event(1, by_tg(EventKind::Contact, 7, None), None)
                .unwrap();
            assert_eq!(first.attributed_by, Some(AttributedBy::TgId));
            assert_eq!(stored_uid(t, first.inbox_id).as_ref(), Some(&uids[1]));
            let patch = SettingsPatch::new([("attribution".into(), "last_touch".into())]).unwrap();
            t.update_settings(1, &patch).unwrap();
            let last = t
                .record_event(1, by_tg(EventKind::Registration, 7, None), None)
                .unwrap();
            assert_eq!(stored_uid(t, last.inbox_id).as_ref(), Some(&uids[0]));
        });
    }

    /// An event whose delivery cannot be enqueued (a damaged state row of its destination) is
    /// refused before anything of it is written: no inbox entry, no dedup entry, no first
    /// deposit used up, its `inbox_id` not taken.
    #[test]
    fn an_event_whose_deliveries_cannot_be_enqueued_writes_nothing() {
        use crate::domain::dedup::tests::by_tg;
        use crate::domain::event::EventKind;
        use redb::ReadableTableMetadata as _;
        let bare = Bare::new();
        let txn = bare.db.begin_write().unwrap();
        let mut t = bare.open(&txn);
        let hook = create_hook(&mut t);
        corrupt_state_row(&mut t, hook);
        let seq = t.inbox_seq;
        let refused = t.record_event(1, by_tg(EventKind::Deposit, 7, None), None);
        assert!(
            matches!(refused, Err(StoreError::Corrupt(_))),
            "{refused:?}"
        );
        assert_eq!(t.inbox_seq, seq, "no inbox_id taken");
        assert_eq!(t.inbox.len().unwrap(), 0, "nothing in the inbox");
        assert!(t.change.fresh.is_empty(), "no dedup entry");
        assert_eq!(
            t.depositors.by_tg.len().unwrap(),
            0,
            "no first deposit used up"
        );
    }

    /// A destination `hook` of space 1 with event 5's delivery pending, committed; answers its
    /// number.
    fn hook_with_a_pending_delivery(bare: &Bare) -> u32 {
        let txn = bare.db.begin_write().unwrap();
        let no = {
            let mut t = bare.open(&txn);
            let no = create_hook(&mut t);
            t.enqueue_deliveries(5, &[no]).unwrap();
            t.write_delivery_states().unwrap();
            no
        };
        txn.commit().unwrap();
        no
    }

    /// A retry by hand in steps goes on from where the last step stopped: a delivery retried
    /// and dead again before the next step is not taken twice.
    #[test]
    fn a_retry_in_steps_takes_each_dead_delivery_once() {
        use crate::platform::{Attempt, Outcome};
        let bare = Bare::new();
        let txn = bare.db.begin_write().unwrap();
        let mut t = bare.open(&txn);
        let hook = create_hook(&mut t);
        let refused = |inbox_id| Attempt {
            inbox_id,
            at_ms: 2,
            status: Some(400),
            answer: "no".into(),
            outcome: Outcome::Refused,
            retry_after_ms: None,
            jitter: 0.5,
        };
        for id in 1..=3 {
            t.enqueue_deliveries(id, &[hook]).unwrap();
        }
        let all: Vec<_> = (1..=3).map(refused).collect();
        t.record_attempts(hook, &all, Some(3), AGE, None).unwrap();
        assert_eq!(t.retry_dead(1, "hook", 10, 0, 2).unwrap(), (2, Some(3)));
        // Event 1's retry is refused again before the next step.
        t.record_attempts(hook, &[refused(1)], None, AGE, None)
            .unwrap();
        assert_eq!(t.retry_dead(1, "hook", 11, 3, 2).unwrap(), (1, None));
        assert_eq!(t.retry_dead(1, "hook", 12, 0, 2).unwrap(), (1, None));
    }

    /// An hour's `delivery_max_age`, from the first attempt.
    const AGE: crate::platform::MaxAge = crate::platform::MaxAge {
        ms: 3_600_000,
        floor_ms: 0,
    };

    /// Creates webhook destination `hook` of space 1 in `t`; answers its number.
    fn create_hook(t: &mut Txn<'_>) -> u32 {
        use crate::platform::DestinationFields;
        let mut fields = DestinationFields {
            name: Some("hook".into()),
            kind: Some("webhook".into()),
            ..DestinationFields::default()
        };
        fields.set_text("url", Some("http://127.0.0.1:9/hook".into()));
        t.create_destination(1, &fields.check(true).unwrap(), 1)
            .unwrap()
            .no
    }

    /// Makes the stored state row of destination `no` undecodable.
    fn corrupt_state_row(t: &mut Txn<'_>, no: u32) {
        let table = t.delivery_states.open().unwrap();
        table.insert(no, &[0xff, 0xff][..]).unwrap();
    }

    /// The stored record of destination `no`, as `t` sees it.
    fn destination_record(t: &mut Txn<'_>, no: u32) -> records::DestinationRecord {
        let table = t.destinations.open().unwrap();
        records::decode(table.get(no).unwrap().unwrap().value()).unwrap()
    }

    /// An answer that pauses the destination, at a delivery whose destination's state row no
    /// longer decodes: the request fails before its first write, so neither the pause nor the
    /// attempt is left behind in the batch that commits.
    #[test]
    fn an_attempt_whose_state_row_is_corrupt_writes_nothing() {
        use crate::platform::{Attempt, Outcome, Paused};
        use redb::ReadableTableMetadata as _;
        let bare = Bare::new();
        let hook = hook_with_a_pending_delivery(&bare);
        let txn = bare.db.begin_write().unwrap();
        let mut t = bare.open(&txn);
        corrupt_state_row(&mut t, hook);
        let attempt = Attempt {
            inbox_id: 5,
            at_ms: 2,
            status: Some(401),
            answer: "the token has expired".into(),
            outcome: Outcome::Held,
            retry_after_ms: None,
            jitter: 0.5,
        };
        let pause = Paused {
            at_ms: 2,
            reason: "the token has expired".into(),
        };
        let sent_with = crate::storage::destinations::destination_rows::destination_of(
            hook,
            destination_record(&mut t, hook),
        )
        .unwrap()
        .unwrap();
        let refused = t.record_attempts(hook, &[attempt], None, AGE, Some((pause, &sent_with)));
        assert!(
            matches!(refused, Err(StoreError::Corrupt(_))),
            "{refused:?}"
        );
        assert_eq!(
            destination_record(&mut t, hook).paused_at_ms,
            None,
            "not paused"
        );
        let deliveries = t.deliveries.open().unwrap();
        let delivery = deliveries.get((hook, 5)).unwrap().unwrap();
        assert!(
            delivery.value().is_empty(),
            "the delivery still pending, untried"
        );
        drop(delivery);
        assert_eq!(t.delivery_queue.open().unwrap().len().unwrap(), 0);
    }

    /// Removing a destination whose state row no longer decodes fails before its first write.
    #[test]
    fn removing_a_destination_whose_state_row_is_corrupt_writes_nothing() {
        let bare = Bare::new();
        let hook = hook_with_a_pending_delivery(&bare);
        let txn = bare.db.begin_write().unwrap();
        let mut t = bare.open(&txn);
        corrupt_state_row(&mut t, hook);
        let refused = t.remove_destination(1, "hook", 3);
        assert!(
            matches!(refused, Err(StoreError::Corrupt(_))),
            "{refused:?}"
        );
        assert_eq!(
            destination_record(&mut t, hook).removed_at_ms,
            None,
            "not removed"
        );
    }
}
