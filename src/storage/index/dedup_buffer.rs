//! Dedup entries on their way to the `DEDUP` table, written one slice of the key space per commit
//! into the table's newest generation.
//!
//! Why: a dedup key is a digest, so each new event's entry lands in a random leaf of whatever
//! range of the table it is written to, and writing each at once would rewrite a leaf per event
//! (copy the page, insert, checksum, write it, free the old one), much of the writer's time.
//! Instead a new entry waits here, in memory, and each commit writes the entries of the next
//! slice of the key space, so that a sweep over the whole key space takes [`SWEEP_COMMITS`]
//! commits: an entry waits at most about one sweep, and a leaf takes several entries in one
//! write.
//!
//! Generations: that works only while the range written to has few leaves against the entries
//! waiting here. Over the whole table it did not: at 10 M entries, 134 Ki leaves against at most
//! 64 Ki entries, each entry written cost a leaf read and a leaf written, and the write rate
//! fell with the file. So the table's key begins with a generation ([`GEN_ENTRIES`] entries each,
//! one after another): entries are written to the newest generation only, whose leaves stay
//! few (about 3,500) however large the table grows. Full generations are merged into larger
//! runs (`dedup_runs.rs`), so that a look-up asks few. A look-up asks the runs the filter
//! (`key_filter::GenFilter`) says may hold the key, and takes the newest entry it finds (the
//! highest inbox id), so a key written again in a newer generation (a windowed rule's whose
//! earlier entry had expired, or an entry a redo or a repair writes) is found there; retention
//! prunes an expired one, and an older entry of a permanent rule left beside a newer one is
//! never taken.
//!
//! Nothing is lost in a crash, because the inbox is the redo log: an entry is only ever here
//! once its event is committed in the inbox, and an event record holds every field its key is
//! derived from. Each commit stores, in `META`, the smallest inbox id whose entry may be missing
//! from the table ([`META_DEDUP_REDO_FROM`](crate::storage::schema::META_DEDUP_REDO_FROM));
//! opening the file derives the keys of the events from there on again and writes the entries
//! the table lacks ([`redo`]).
//!
//! Readers see the union of this buffer and the table. An entry leaves the buffer only after the
//! commit that wrote it to the table, and enters it only after the commit of its event. A reader
//! looks here first (and takes the generations to ask from the filter under the same lock) and
//! opens its snapshot after that, so an entry that has left the buffer is in the reader's
//! snapshot, in a generation it asks.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use redb::{ReadableTable, Table, WriteTransaction};

use crate::domain::dedup::{self, DedupKey};
use crate::domain::event::{AttributedBy, Source, ValidEvent};
use crate::storage::error::StoreError;
use crate::storage::index::dedup_runs::{self, Merge, Runs};
use crate::storage::index::key_filter::{self, GenFilter};
use crate::storage::records::{self, EventRecord};
use crate::storage::schema::{
    DEDUP, INBOX, META, META_DEDUP_MERGING, META_DEDUP_REDO_FROM, META_INBOX_SEQ, SPACES,
};

pub use crate::storage::index::dedup_runs::{Earlier, EntryKey, TableKey};

/// Commits per sweep of the key space: a slice is 1/2048 of the table, so on a busy server the
/// entries of one commit fall in a few leaves, and an entry waits at most this many commits.
const SWEEP_COMMITS: usize = 2048;
/// The most entries the buffer holds after a commit (~5 MiB); past it, commits write more.
const CAPACITY: usize = 64 * 1024;
/// Entries per generation of `DEDUP`: about 3,500 leaves (14 MiB), so a buffer of 64 Ki entries
/// writes 18 to a leaf, and the leaves written to fit redb's cache. 40 generations at 10 M.
pub const GEN_ENTRIES: usize = 256 * 1024;

#[must_use]
pub fn entry_key(space: u32, key: &DedupKey) -> EntryKey {
    (space, key.rule, key.digest)
}

/// `key`'s place in generation `generation` of the table.
#[must_use]
pub fn table_key(generation: u32, &(space, rule, digest): &EntryKey) -> TableKey {
    (generation, space, rule, digest)
}

/// The newest entry of `key` (the highest inbox id) in the runs `gens`, and how many of them
/// held none.
fn newest_of(
    table: &impl ReadableTable<TableKey, Earlier>,
    gens: impl IntoIterator<Item = u32>,
    key: &EntryKey,
) -> Result<(Option<Earlier>, u64), StoreError> {
    let (mut newest, mut missed) = (None, 0);
    for generation in gens {
        match table.get(table_key(generation, key))? {
            Some(found) => newest = newest.max(Some(found.value())),
            None => missed += 1,
        }
    }
    Ok((newest, missed))
}

/// The newest entry of `key` (the highest inbox id) in the runs `gens`. Every run is asked, not
/// only up to the first that holds one: a merged run's number says nothing of its age.
///
/// # Errors
/// A redb error.
pub fn newest_in(
    table: &impl ReadableTable<TableKey, Earlier>,
    gens: impl IntoIterator<Item = u32>,
    key: &EntryKey,
) -> Result<Option<Earlier>, StoreError> {
    Ok(newest_of(table, gens, key)?.0)
}

/// The generations of the table that `filter` says may hold `key`, newest first.
fn gens_to_ask<'a>(filter: &'a GenFilter, key: &EntryKey) -> impl Iterator<Item = u32> + use<'a> {
    filter.may_hold(&key_filter::dedup_key(key))
}

/// `key`'s entry in `table`, asking only the generations that `filter` says may hold it: the
/// one look-up of the writer, its redo and `tracker check`.
///
/// # Errors
/// A redb error.
pub fn find(
    table: &impl ReadableTable<TableKey, Earlier>,
    filter: &GenFilter,
    key: &EntryKey,
) -> Result<Option<Earlier>, StoreError> {
    let (found, missed) = newest_of(table, gens_to_ask(filter, key), key)?;
    filter.count_lookup(missed);
    Ok(found)
}

/// Where a reader finds a key's entry: in the buffer, or else in one of these generations of
/// the table, newest first (none: the key has no entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Buffered(Earlier),
    InTable(Vec<u32>),
}

/// The entries not yet in the table, in table order, and the filter of every key the table may
/// hold.
#[derive(Debug)]
pub struct DedupBuffer {
    entries: BTreeMap<EntryKey, Earlier>,
    /// Every key of the table, by generation (`key_filter.rs`): a new event's key that it does
    /// not hold needs no look-up in the table, and one it may hold, a look-up in a few
    /// generations.
    in_table: GenFilter,
    /// Where the inbox ids of `entries` came from, a commit at a time, oldest first: the first
    /// one's smallest id is where a redo must start.
    ages: Ages,
    /// The last key written by the previous flush: the next one starts after it.
    cursor: Option<EntryKey>,
    /// The merge under way (`dedup_runs.rs`), and the runs merges replaced whose entries are
    /// still to delete.
    merge: Option<Merge>,
    replaced: Vec<u32>,
    /// Entries a commit's merge may read per entry it flushes (`dedup_runs::PACE`); 0 merges
    /// nothing.
    merge_pace: usize,
}

/// What one commit takes out of the buffer and puts in: decided while the transaction is open,
/// applied to the buffer ([`DedupBuffer::apply`]) only once it has committed.
#[derive(Debug, Default)]
pub struct Change {
    /// Entries of this transaction's new events.
    pub fresh: HashMap<EntryKey, Earlier>,
    /// Entries this transaction writes to the table.
    flushed: Vec<(EntryKey, Earlier)>,
    /// The generation each of `flushed` is written to.
    gens: Vec<u32>,
    runs: RunsChange,
}

/// What one commit did to the runs: the merge as it stands after its slice, the entries the
/// slice wrote, whether it is done, and a replaced run whose last entries it deleted.
#[derive(Debug, Default)]
struct RunsChange {
    merge: Option<Merge>,
    merged: Vec<EntryKey>,
    done: bool,
    deleted: Option<u32>,
}

impl Default for DedupBuffer {
    /// An empty buffer in front of an empty table.
    fn default() -> DedupBuffer {
        DedupBuffer::with_filter(GenFilter::new(GEN_ENTRIES))
    }
}

impl DedupBuffer {
    fn with_filter(in_table: GenFilter) -> DedupBuffer {
        DedupBuffer {
            entries: BTreeMap::new(),
            in_table,
            ages: Ages::default(),
            cursor: None,
            merge: None,
            replaced: Vec::new(),
            merge_pace: dedup_runs::PACE,
        }
    }

    /// An empty buffer for generations of `per_gen` entries, with the filter of the keys already
    /// in the table (`built` if the open's [`redo`] made it for generations of that size, else
    /// read from the table), and the merge under way resumed.
    ///
    /// # Errors
    /// A redb error.
    pub fn load(
        txn: &redb::ReadTransaction,
        built: Option<GenFilter>,
        per_gen: usize,
    ) -> Result<DedupBuffer, StoreError> {
        let table = txn.open_table(DEDUP)?;
        let building = dedup_runs::building(&txn.open_table(META)?)?;
        let filter = match built.filter(|f| f.per_gen() == per_gen) {
            Some(filter) => filter,
            None => GenFilter::of_dedup(&table, building, per_gen)?,
        };
        let runs = Runs::read(&table, building)?;
        let mut buffer = DedupBuffer::with_filter(filter);
        buffer.merge = match building {
            Some(into) => {
                let merge = Merge::resume(&table, into, &runs.live)?;
                tracing::info!(
                    run = into,
                    sources = merge.sources.len(),
                    "a merge of dedup runs resumes where it was"
                );
                Some(merge)
            }
            None => None,
        };
        buffer.replaced = runs.replaced;
        Ok(buffer)
    }

    /// Look-ups of the table so far, and the runs they read that did not hold the key.
    #[must_use]
    pub fn lookups(&self) -> (u64, u64) {
        self.in_table.lookups()
    }

    /// `key`'s entry in `table` (not in this buffer), asking only the generations that may
    /// hold it.
    ///
    /// # Errors
    /// A redb error.
    pub fn in_table(
        &self,
        table: &impl ReadableTable<TableKey, Earlier>,
        key: &EntryKey,
    ) -> Result<Option<Earlier>, StoreError> {
        find(table, &self.in_table, key)
    }

    /// Where a reader finds `key`'s entry, given a snapshot begun after this call.
    #[must_use]
    pub fn held(&self, key: &EntryKey) -> Held {
        match self.get(key) {
            Some(earlier) => Held::Buffered(earlier),
            None => Held::InTable(gens_to_ask(&self.in_table, key).collect()),
        }
    }

    #[must_use]
    pub fn get(&self, key: &EntryKey) -> Option<Earlier> {
        self.entries.get(key).copied()
    }

    #[cfg(test)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the next slice of entries into `table` (every entry if `all`), records what it
    /// wrote in `change`, and returns the inbox id a redo would have to start from after this
    /// commit, given that the next id to be handed out is `next_inbox_id`.
    pub fn flush_slice(
        &self,
        change: &mut Change,
        table: &mut Table<'_, TableKey, Earlier>,
        all: bool,
        next_inbox_id: u64,
    ) -> Result<u64, StoreError> {
        let flushed = &mut change.flushed;
        *flushed = next_slice(&self.entries, self.cursor, all);
        let mut newest = self.in_table.newest();
        change.gens.clear();
        for (key, earlier) in flushed.iter() {
            let generation = next_gen(&mut newest, self.in_table.per_gen());
            table.insert(table_key(generation, key), earlier)?;
            change.gens.push(generation);
        }
        // Where a redo starts once this commit is applied: at the oldest commit that still has
        // an entry here, or at this commit's events.
        let left = self.ages.first_left(flushed.iter().map(|(_, (id, _))| *id));
        let fresh = change.fresh.values().map(|(id, _)| *id).min();
        Ok([left, fresh]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(next_inbox_id))
    }

    /// The commit's step of the runs' upkeep (`dedup_runs.rs`), reading a bounded slice: the next
    /// entries of the merge under way (or of the next one, begun here), and the next entries
    /// of a replaced run deleted. Recorded in `change`, applied with it.
    ///
    /// # Errors
    /// A redb error.
    pub fn merge_slice(
        &self,
        change: &mut Change,
        table: &mut Table<'_, TableKey, Earlier>,
        meta: &mut Table<'_, &str, u64>,
    ) -> Result<(), StoreError> {
        if self.merge_pace == 0 {
            return Ok(());
        }
        let floor = dedup_runs::FLOOR.min(self.in_table.per_gen());
        let budget = change.flushed.len() * self.merge_pace + floor;
        if let Some(&run) = self.replaced.first()
            && dedup_runs::delete_slice(table, run, budget)?
        {
            change.runs.deleted = Some(run);
        }
        let mut merge = if let Some(merge) = &self.merge {
            merge.clone()
        } else {
            let Some(merge) =
                dedup_runs::next_merge(&self.in_table.runs(), self.in_table.newest().0)
            else {
                return Ok(());
            };
            meta.insert(META_DEDUP_MERGING, u64::from(merge.into))?;
            merge
        };
        let (written, done) = dedup_runs::merge_slice(table, &merge, budget)?;
        if done {
            // The swap: from this commit on, the run is complete and its sources replaced.
            meta.remove(META_DEDUP_MERGING)?;
        }
        if let Some((last, _)) = written.last() {
            merge.cursor = Some(*last);
        }
        change.runs = RunsChange {
            merge: Some(merge),
            merged: written.into_iter().map(|(k, _)| k).collect(),
            done,
            deleted: change.runs.deleted,
        };
        Ok(())
    }

    /// Applies a committed transaction's `change`.
    pub fn apply(&mut self, change: Change) {
        let runs = change.runs;
        if let Some(run) = runs.deleted {
            self.replaced.retain(|r| *r != run);
        }
        if let Some(merge) = runs.merge {
            self.in_table.add_run(merge.into);
            for key in &runs.merged {
                self.in_table
                    .insert(merge.into, &key_filter::dedup_key(key));
            }
            if runs.done {
                self.in_table.remove_runs(&merge.sources);
                self.replaced.extend(&merge.sources);
                self.merge = None;
            } else {
                self.merge = Some(merge);
            }
        }
        if let Some((last, _)) = change.flushed.last() {
            self.cursor = Some(*last);
        }
        for ((key, earlier), generation) in change.flushed.into_iter().zip(change.gens) {
            self.in_table
                .insert(generation, &key_filter::dedup_key(&key));
            // Only if the buffer still holds what was written; it is the writer's alone, so it
            // does, but a newer entry must never be dropped for an older one.
            if self.entries.get(&key) == Some(&earlier) {
                self.entries.remove(&key);
                self.ages.leave(earlier.0);
            }
        }
        self.ages.arrive(change.fresh.values().map(|(id, _)| *id));
        for (key, earlier) in change.fresh {
            if let Some(old) = self.entries.insert(key, earlier) {
                self.ages.leave(old.0);
            }
        }
        self.ages.drop_empty();
    }
}

/// The generation the next entry goes to, given the newest generation and its entries so far:
/// that one, or once it holds `per_gen`, the one after it. Every writer of entries (the flush,
/// the redo, `tracker check --repair`) goes through it, so a newer entry is never in an older
/// generation than an older entry of its key, and no generation outgrows its filter level.
pub(crate) fn next_gen(newest: &mut (u32, usize), per_gen: usize) -> u32 {
    if newest.1 >= per_gen {
        *newest = (newest.0 + 1, 0);
    }
    newest.1 += 1;
    newest.0
}

/// The buffer's entries by the commit that brought them. Inbox ids only grow, so each commit's
/// ids come after the previous commit's, and an entry leaving finds its commit by its id: a
/// binary search over about a sweep of commits in one block of memory, where an ordered set of
/// every id took a walk down a tree of 64 Ki ids for each entry in and out (half the cost of
/// [`DedupBuffer::apply`] in a profile of batches). The redo point this gives, the smallest id
/// of the oldest commit with an entry left, may be below the smallest id left: a redo then also
/// reads a few events whose entries are in the table already, and writes nothing for them.
#[derive(Debug, Default)]
struct Ages(std::collections::VecDeque<Age>);

#[derive(Debug)]
struct Age {
    /// The commit's smallest inbox id with an entry.
    first_id: u64,
    /// How many of its entries are still in the buffer.
    left: usize,
}

impl Ages {
    /// A commit's entries arrive, with these ids (none: nothing arrives).
    fn arrive(&mut self, ids: impl Iterator<Item = u64>) {
        let (mut first_id, mut count) = (u64::MAX, 0);
        for id in ids {
            first_id = first_id.min(id);
            count += 1;
        }
        if count > 0 {
            debug_assert!(self.0.back().is_none_or(|a| a.first_id < first_id));
            self.0.push_back(Age {
                first_id,
                left: count,
            });
        }
    }

    /// Where the entry of inbox id `id` came from.
    fn of(&self, id: u64) -> Option<usize> {
        self.0.partition_point(|a| a.first_id <= id).checked_sub(1)
    }

    /// The entry of inbox id `id` leaves.
    fn leave(&mut self, id: u64) {
        if let Some(age) = self.of(id).and_then(|i| self.0.get_mut(i)) {
            age.left = age.left.saturating_sub(1);
        }
    }

    /// Forgets the commits at the front with no entry left.
    fn drop_empty(&mut self) {
        while self.0.front().is_some_and(|a| a.left == 0) {
            self.0.pop_front();
        }
    }

    /// The smallest id of the oldest commit that would still have an entry once the entries of
    /// the `leaving` ids are gone; `None` if none would.
    fn first_left(&self, leaving: impl Iterator<Item = u64>) -> Option<u64> {
        let mut gone = vec![0; self.0.len()];
        for id in leaving {
            if let Some(g) = self.of(id).and_then(|i| gone.get_mut(i)) {
                *g += 1;
            }
        }
        self.0
            .iter()
            .zip(gone)
            .find(|(a, gone)| a.left > *gone)
            .map(|(a, _)| a.first_id)
    }

    /// The smallest id of the oldest commit with an entry left.
    #[cfg(test)]
    fn first(&self) -> Option<u64> {
        self.0.front().map(|a| a.first_id)
    }
}

/// The entries one commit writes out of a buffer of `entries`: every one if `all`, else the next
/// 1/[`SWEEP_COMMITS`] of them after `cursor` (the last key the previous commit wrote), wrapping
/// around to the start of the key space, and more while the buffer is over [`CAPACITY`]. Shared
/// by the buffers of both digest-keyed indexes (`fbclid_buffer.rs`).
pub(in crate::storage) fn next_slice<K: Ord + Copy, V: Clone>(
    entries: &BTreeMap<K, V>,
    cursor: Option<K>,
    all: bool,
) -> Vec<(K, V)> {
    let quota = if all {
        entries.len()
    } else {
        entries
            .len()
            .div_ceil(SWEEP_COMMITS)
            .max(entries.len().saturating_sub(CAPACITY))
    };
    let after = match cursor {
        Some(c) => Bound::Excluded(c),
        None => Bound::Unbounded,
    };
    let mut slice: Vec<(K, V)> = entries
        .range((after, Bound::Unbounded))
        .take(quota)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    if slice.len() < quota {
        // Wrap around to the start of the key space (only with a cursor: without one, the
        // first range is the whole buffer).
        let wrap = quota - slice.len();
        let until = match cursor {
            Some(c) => Bound::Included(c),
            None => Bound::Unbounded,
        };
        slice.extend(
            entries
                .range((Bound::Unbounded, until))
                .take(wrap)
                .map(|(k, v)| (*k, v.clone())),
        );
    }
    slice
}

/// The inbox record of `event`, attributed as `attributed` says (how, and to which click's uid),
/// or to no click. It keeps every field [`dedup::dedup_key`] reads, and whether its `uid` is the
/// sender's or the one its Telegram id resolved to, so that [`event_of`] gives the same key back:
/// the inbox is the buffer's redo log.
pub(crate) fn event_record(
    event: ValidEvent,
    attributed: Option<(AttributedBy, &str)>,
) -> EventRecord {
    let uid = match attributed {
        Some((AttributedBy::TgId, resolved)) => Some(resolved.to_owned()),
        _ => event.uid,
    };
    EventRecord {
        kind: event.kind as u8,
        uid,
        value: event.value.map(|v| v.to_string()),
        currency: event.currency,
        eid: event.eid,
        occurred_at_ms: event.occurred_at_ms,
        time_supplied: event.time_supplied,
        received_at_ms: event.received_at_ms,
        matched: attributed.is_some(),
        source: event.source as u8,
        tg_id: event.tg_id,
        attributed_by: attributed.map_or(0, |(by, _)| by as u8),
        // Decided by the writer (`storage/first_deposit.rs`) after this record is made.
        first_deposit: false,
        // Made by the writer as it stores the record; a dry run stores none.
        event_id: None,
    }
}

/// The event a stored record describes, as its sender sent it, as far as its dedup key goes: an
/// event attributed by its Telegram id named no `uid` (the stored one is the resolved click's).
pub(crate) fn event_of(record: EventRecord, inbox_id: u64) -> Result<ValidEvent, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("event {inbox_id}: {what}"));
    let kind = crate::domain::event::EventKind::from_u8(record.kind)
        .ok_or_else(|| corrupt(&format!("unknown kind {}", record.kind)))?;
    let value = record
        .value
        .as_deref()
        .map(crate::domain::decimal::Decimal::parse)
        .transpose()
        .map_err(|e| corrupt(&format!("value does not parse: {e}")))?;
    let by_tg_id = AttributedBy::from_u8(record.attributed_by) == Some(AttributedBy::TgId);
    Ok(ValidEvent {
        kind,
        uid: if by_tg_id { None } else { record.uid },
        tg_id: record.tg_id,
        value,
        currency: record.currency,
        eid: record.eid,
        occurred_at_ms: record.occurred_at_ms,
        time_supplied: record.time_supplied,
        received_at_ms: record.received_at_ms,
        // Not part of any dedup key; records written before version 3 have none.
        source: Source::from_u8(record.source).unwrap_or(Source::Post),
    })
}

/// Writes the table entries of every event from `META_DEDUP_REDO_FROM` on that the table lacks,
/// in `txn`. Returns how many it wrote and the filter of every key of the table after it (built
/// to find the generations to ask; [`DedupBuffer::load`] takes it once `txn` commits, instead of
/// reading the table again), or `None` if there was nothing to do (a file closed cleanly, or
/// written before the buffer existed, has every entry in the table).
pub fn redo(txn: &WriteTransaction) -> Result<Option<(u64, GenFilter)>, StoreError> {
    redo_in(txn, GEN_ENTRIES)
}

/// [`redo`] with generations of `per_gen` entries.
fn redo_in(txn: &WriteTransaction, per_gen: usize) -> Result<Option<(u64, GenFilter)>, StoreError> {
    let mut meta = txn.open_table(META)?;
    let Some(from) = meta.get(META_DEDUP_REDO_FROM)?.map(|v| v.value()) else {
        return Ok(None);
    };
    let seq = meta.get(META_INBOX_SEQ)?.map_or(0, |v| v.value());
    if from > seq {
        return Ok(None);
    }
    let mut spaces = Vec::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (_, bytes) = entry?;
        spaces.push(records::decode::<records::SpaceRecord>(bytes.value())?.no);
    }
    let building = dedup_runs::building(&meta)?;
    let inbox = txn.open_table(INBOX)?;
    let mut table = txn.open_table(DEDUP)?;
    let mut filter = GenFilter::of_dedup(&table, building, per_gen)?;
    let mut newest = filter.newest();
    let mut written = 0;
    for space in spaces {
        for entry in inbox.range((space, from)..=(space, u64::MAX))? {
            let (key, bytes) = entry?;
            let inbox_id = key.value().1;
            let event = event_of(records::decode(bytes.value())?, inbox_id)?;
            // The window is no part of the table key.
            let Some(key) = dedup::dedup_key(&event, 0) else {
                continue;
            };
            let k = entry_key(space, &key);
            // Events are read in id order, and every stored event with a key was new for it
            // then, so the highest id is the entry's.
            let stored = find(&table, &filter, &k)?;
            if stored.is_none_or(|(id, _)| id < inbox_id) {
                let generation = next_gen(&mut newest, per_gen);
                table.insert(table_key(generation, &k), &(inbox_id, event.received_at_ms))?;
                filter.insert(generation, &key_filter::dedup_key(&k));
                written += 1;
            }
        }
    }
    meta.insert(META_DEDUP_REDO_FROM, seq + 1)?;
    Ok(Some((written, filter)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::dedup::tests::{by_tg, ev};
    use crate::domain::event::EventKind;
    use redb::Database;

    fn table_contents(db: &Database) -> Vec<(EntryKey, Earlier)> {
        use redb::ReadableDatabase;
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(DEDUP).unwrap();
        t.iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                let (_, space, rule, digest) = k.value();
                ((space, rule, digest), v.value())
            })
            .collect()
    }

    fn commit(
        db: &Database,
        buffer: &mut DedupBuffer,
        fresh: &[(EntryKey, Earlier)],
        all: bool,
    ) -> u64 {
        let txn = db.begin_write().unwrap();
        let mut change = Change::default();
        change.fresh.extend(fresh.iter().copied());
        let next = fresh
            .iter()
            .map(|(_, (id, _))| id + 1)
            .max()
            .unwrap_or(u64::MAX);
        let redo_from = {
            let mut t = txn.open_table(DEDUP).unwrap();
            buffer.flush_slice(&mut change, &mut t, all, next).unwrap()
        };
        txn.commit().unwrap();
        buffer.apply(change);
        redo_from
    }

    /// A commit as the writer makes it: the buffer's slice, then the runs' slice.
    fn commit_merging(db: &Database, buffer: &mut DedupBuffer, fresh: &[(EntryKey, Earlier)]) {
        let txn = db.begin_write().unwrap();
        let mut change = Change::default();
        change.fresh.extend(fresh.iter().copied());
        {
            let mut t = txn.open_table(DEDUP).unwrap();
            let mut meta = txn.open_table(META).unwrap();
            buffer.flush_slice(&mut change, &mut t, true, 0).unwrap();
            buffer.merge_slice(&mut change, &mut t, &mut meta).unwrap();
        }
        txn.commit().unwrap();
        buffer.apply(change);
    }

    /// The buffer a restart would load from the file as it is now: what a crash after the last
    /// commit leaves (with nothing only in memory: the redo covers that, tested above).
    fn restarted(db: &Database, per_gen: usize) -> DedupBuffer {
        let txn = redb::ReadableDatabase::begin_read(db).unwrap();
        DedupBuffer::load(&txn, None, per_gen).unwrap()
    }

    /// `key`'s entry as the writer finds it: in the buffer, else in the table.
    fn found(db: &Database, buffer: &DedupBuffer, key: &EntryKey) -> Option<Earlier> {
        let txn = redb::ReadableDatabase::begin_read(db).unwrap();
        let table = txn.open_table(DEDUP).unwrap();
        buffer
            .get(key)
            .or_else(|| buffer.in_table(&table, key).unwrap())
    }

    /// Fills generations of 64 entries with `n` keys, 50 to a commit, `restart_every` commits a
    /// restart from the file (none: never), and commits on with nothing new until every merge is
    /// done. Answers the keys with their entries.
    fn fill(
        db: &Database,
        buffer: &mut DedupBuffer,
        n: u64,
        restart_every: Option<usize>,
    ) -> BTreeMap<EntryKey, Earlier> {
        let mut all = BTreeMap::new();
        for (commits, chunk) in (1..=n).collect::<Vec<_>>().chunks(50).enumerate() {
            let mut fresh: Vec<_> = chunk
                .iter()
                .map(|&id| ((1 + (id % 2) as u32, 2, digest(id)), (id, id * 10)))
                .collect();
            // Now and then a key written again: its newer entry must win wherever the older is.
            if let Some(&id) = chunk.first().filter(|id| *id % 7 == 1 && **id > 1000) {
                let again = id - 900;
                fresh.push(((1 + (again % 2) as u32, 2, digest(again)), (id + n, 1)));
            }
            all.extend(fresh.iter().copied());
            commit_merging(db, buffer, &fresh);
            if restart_every.is_some_and(|every| (commits + 1) % every == 0) {
                commit_merging(db, buffer, &[]);
                *buffer = restarted(db, 64);
            }
        }
        for _ in 0..10_000 {
            if buffer.merge.is_none() && buffer.replaced.is_empty() && buffer.is_empty() {
                break;
            }
            commit_merging(db, buffer, &[]);
        }
        all
    }

    #[test]
    fn merges_between_commits_keep_every_key_and_find_no_absent_one() {
        for restart_every in [None, Some(5)] {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::create(dir.path().join("t.redb")).unwrap();
            let mut buffer = DedupBuffer::with_filter(GenFilter::new(64));
            let all = fill(&db, &mut buffer, 12_000, restart_every);
            // 188 generations: two of tier 2, seven of tier 1 beside them, and the newest few.
            let runs = buffer.in_table.runs();
            assert!(runs.len() <= 16, "{restart_every:?}: {runs:?}");
            assert!(
                runs.iter().any(|r| dedup_runs::tier(*r) == 2),
                "{restart_every:?}: {runs:?}"
            );
            for (k, v) in &all {
                assert_eq!(found(&db, &buffer, k), Some(*v), "{restart_every:?}: {k:?}");
            }
            for i in 100_000..102_000 {
                assert_eq!(found(&db, &buffer, &(1, 2, digest(i))), None);
            }
            // Nothing is counted twice: the runs replaced are gone from the table, and what
            // it holds is the runs asked.
            let in_table: Vec<u32> = generations(&db).into_keys().collect();
            assert_eq!(in_table, runs, "{restart_every:?}");
            // A restart reads the same runs.
            assert_eq!(restarted(&db, 64).in_table.runs(), runs);
        }
    }

    /// A crash after any commit of a merge: the file as that commit left it finds every key,
    /// whether the merge had begun, was half way, had swapped, or was deleting what it
    /// replaced.
    #[test]
    fn a_restart_after_any_commit_of_a_merge_finds_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::with_filter(GenFilter::new(64));
        let mut all = fill(&db, &mut buffer, 4_000, None);
        // One more block of eight generations makes a tier-two merge of 4,096 entries, which
        // takes many commits of nothing new.
        let more: Vec<_> = (4_001..=4_600u64)
            .map(|id| ((1, 2, digest(id)), (id, 0)))
            .collect();
        all.extend(more.iter().copied());
        commit_merging(&db, &mut buffer, &more);
        let mut states = std::collections::BTreeSet::new();
        for _ in 0..200 {
            commit_merging(&db, &mut buffer, &[]);
            let after = restarted(&db, 64);
            states.insert((after.merge.is_some(), after.replaced.is_empty()));
            for (k, v) in all.iter().step_by(7) {
                assert_eq!(found(&db, &after, k), Some(*v), "{k:?}");
            }
        }
        // Seen: merging, swapped with runs to delete, and settled.
        assert!(states.contains(&(true, true)), "{states:?}");
        assert!(states.contains(&(false, false)), "{states:?}");
        assert!(states.contains(&(false, true)), "{states:?}");
    }

    /// The filter's wrong "maybe"s per look-up of a new key: bounded with merges, growing with
    /// the generations without them.
    #[test]
    fn merging_bounds_the_wrong_maybes_of_a_new_key() {
        let per_lookup = |merge_pace: usize| {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::create(dir.path().join("t.redb")).unwrap();
            let mut buffer = DedupBuffer::with_filter(GenFilter::new(256));
            buffer.merge_pace = merge_pace;
            let mut id = 0;
            for _ in 0..128 {
                let fresh: Vec<_> = (0..200)
                    .map(|_| {
                        id += 1;
                        ((1, 2, digest(id)), (id, 0))
                    })
                    .collect();
                commit_merging(&db, &mut buffer, &fresh);
            }
            for _ in 0..200 {
                commit_merging(&db, &mut buffer, &[]);
            }
            let before = buffer.lookups();
            for i in 1_000_000..1_020_000 {
                assert_eq!(found(&db, &buffer, &(1, 2, digest(i))), None);
            }
            let (lookups, wrong) = buffer.lookups();
            let share = |n: u64| f64::from(u32::try_from(n).expect("a test's count"));
            share(wrong - before.1) / share(lookups - before.0)
        };
        let merged = per_lookup(dedup_runs::PACE);
        let unmerged = per_lookup(0);
        // 100 generations: about one wrong "maybe" in 700 each unmerged, ten runs merged.
        assert!(merged < 0.05, "{merged} with merges");
        assert!(unmerged > 0.1, "{unmerged} without merges");
    }

    #[test]
    fn every_entry_reaches_the_table_within_a_sweep_and_the_union_never_loses_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::default();
        let mut all = BTreeMap::new();
        let mut id = 0u64;
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..300 {
            let mut fresh = Vec::new();
            for _ in 0..7 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                id += 1;
                let key = (1 + (x % 3) as u32, 1, u128::from(x) << 64 | u128::from(id));
                fresh.push((key, (id, id * 10)));
                all.insert(key, (id, id * 10));
            }
            let redo_from = commit(&db, &mut buffer, &fresh, false);
            // The redo point is at or before the oldest id still only in the buffer: here, the
            // first id of the oldest commit with an entry left.
            let oldest = buffer.entries.values().map(|(id, _)| *id).min();
            assert!(
                oldest.is_none_or(|o| redo_from <= o),
                "{redo_from} {oldest:?}"
            );
            assert_eq!(redo_from, buffer.ages.first().unwrap_or(id + 1));
            // Every entry is in the table or the buffer, with its value.
            let table: BTreeMap<_, _> = table_contents(&db).into_iter().collect();
            for (k, v) in &all {
                let found = buffer.get(k).or_else(|| table.get(k).copied());
                assert_eq!(found, Some(*v), "{k:?}");
            }
        }
        assert!(
            buffer.len() < all.len(),
            "slices were written: {}",
            buffer.len()
        );
        commit(&db, &mut buffer, &[], true);
        assert!(buffer.is_empty());
        assert_eq!(table_contents(&db), all.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_newer_entry_for_a_key_replaces_the_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::default();
        let k = (1, 4, 77);
        commit(&db, &mut buffer, &[(k, (1, 100))], false);
        // Written to the table by the next commit (a one-entry buffer is a whole slice) while
        // a newer entry for the same key arrives.
        commit(&db, &mut buffer, &[(k, (2, 200))], false);
        assert_eq!(buffer.get(&k), Some((2, 200)));
        assert_eq!(buffer.ages.first(), Some(2));
        commit(&db, &mut buffer, &[], true);
        assert_eq!(table_contents(&db), vec![(k, (2, 200))]);
    }

    /// One event of each rule, and a windowed deposit stored twice (the window had passed).
    fn events() -> Vec<ValidEvent> {
        let mut tg_timed = by_tg(EventKind::Deposit, 42, Some("7"));
        tg_timed.time_supplied = true;
        tg_timed.occurred_at_ms = 600;
        let mut timed = ev(EventKind::Deposit, Some("u1"), None, Some("7.00"));
        timed.time_supplied = true;
        timed.occurred_at_ms = 500;
        let mut later = ev(EventKind::Deposit, Some("u1"), None, Some("7"));
        later.received_at_ms += 90_000_000;
        vec![
            ev(EventKind::Deposit, Some("u1"), Some("e-1"), Some("12.50")),
            ev(EventKind::Contact, Some("u1"), None, None),
            timed,
            ev(EventKind::Deposit, Some("u1"), None, Some("7.00")),
            ev(EventKind::Registration, None, None, None),
            later,
            by_tg(EventKind::Contact, 42, None),
            tg_timed,
            by_tg(EventKind::Deposit, 42, Some("7")),
        ]
    }

    /// How a writer attributes each of [`events`]: the Telegram ids resolve to click `c-42`.
    fn attribution_of(e: &ValidEvent) -> Option<(AttributedBy, &'static str)> {
        match (&e.uid, e.tg_id) {
            (Some(_), _) => Some((AttributedBy::Uid, "")),
            (None, Some(_)) => Some((AttributedBy::TgId, "c-42")),
            (None, None) => None,
        }
    }

    #[test]
    fn a_stored_record_gives_back_its_events_key() {
        for e in events() {
            let want = dedup::dedup_key(&e, 0);
            let stored = event_record(e.clone(), attribution_of(&e));
            if e.tg_id.is_some() {
                assert_eq!(
                    stored.uid.as_deref(),
                    Some("c-42"),
                    "the resolved click is stored"
                );
            }
            let record = records::decode(&records::encode(&stored)).unwrap();
            assert_eq!(
                dedup::dedup_key(&event_of(record, 1).unwrap(), 0),
                want,
                "{e:?}"
            );
        }
    }

    #[test]
    fn redo_writes_the_entries_the_table_lacks_and_keeps_newer_ones() {
        // With full-size generations (all in the first), and with generations of two entries,
        // so that the redo rolls over and a key written twice lands in two of them.
        for per_gen in [GEN_ENTRIES, 2] {
            redo_with_generations_of(per_gen);
        }
    }

    fn redo_with_generations_of(per_gen: usize) {
        let (_dir, db) = crate::storage::engine::open::test_database();
        let space = 7;
        let events = events();
        let keys: Vec<_> = events.iter().map(|e| dedup::dedup_key(e, 0)).collect();
        let txn = db.begin_write().unwrap();
        {
            let mut spaces = txn.open_table(SPACES).unwrap();
            let rec = records::SpaceRecord {
                no: space,
                created_at_ms: 0,
            };
            spaces
                .insert("s", records::encode(&rec).as_slice())
                .unwrap();
            let mut inbox = txn.open_table(INBOX).unwrap();
            for (i, e) in events.iter().enumerate() {
                let record = records::encode(&event_record(e.clone(), attribution_of(e)));
                inbox
                    .insert((space, i as u64 + 1), record.as_slice())
                    .unwrap();
            }
            // The first event's entry made it to the table before the crash.
            let first = entry_key(space, keys[0].as_ref().unwrap());
            txn.open_table(DEDUP)
                .unwrap()
                .insert(table_key(0, &first), (1, events[0].received_at_ms))
                .unwrap();
            let mut meta = txn.open_table(META).unwrap();
            meta.insert(META_INBOX_SEQ, events.len() as u64).unwrap();
            meta.insert(META_DEDUP_REDO_FROM, 1).unwrap();
        }
        txn.commit().unwrap();

        let txn = db.begin_write().unwrap();
        // Seven writes: the first entry was there, the registration has no key, the two
        // windowed deposits share one, written for the earlier and then for the later, and the
        // three by Telegram id are keyed by it, not by the click they resolved to.
        let (written, filter) = redo_in(&txn, per_gen).unwrap().expect("entries to redo");
        assert_eq!(written, 7);
        if per_gen == 2 {
            // 1 entry there and 7 written, two to a generation.
            assert_eq!(filter.newest(), (3, 2));
        }
        txn.commit().unwrap();
        // The filter handed to the store holds every key in its generation, as one read from
        // the table would.
        {
            use redb::ReadableDatabase;
            let read = db.begin_read().unwrap();
            let t = read.open_table(DEDUP).unwrap();
            // The same newest generation (the count may differ: a key written twice counts
            // twice in the filter and once in the table).
            assert_eq!(
                filter.newest().0,
                GenFilter::of_dedup(&t, None, per_gen).unwrap().newest().0
            );
            for e in t.iter().unwrap() {
                let (generation, space, rule, digest) = e.unwrap().0.value();
                let key = key_filter::dedup_key(&(space, rule, digest));
                assert!(filter.may_hold(&key).any(|g| g == generation));
            }
        }
        let table: BTreeMap<_, _> = table_contents(&db).into_iter().collect();
        let want: BTreeMap<_, _> = [(0, 1), (1, 2), (2, 3), (5, 6), (6, 7), (7, 8), (8, 9)]
            .into_iter()
            .map(|(i, id)| {
                (
                    entry_key(space, keys[i].as_ref().unwrap()),
                    (id, events[id as usize - 1].received_at_ms),
                )
            })
            .collect();
        assert_eq!(table, want);
        // A look-up through the filter finds each key's newest entry, in whichever generation.
        {
            use redb::ReadableDatabase;
            let read = db.begin_read().unwrap();
            let t = read.open_table(DEDUP).unwrap();
            for (k, v) in &want {
                let gens = filter.may_hold(&key_filter::dedup_key(k));
                assert_eq!(
                    newest_in(&t, gens, k).unwrap(),
                    Some(*v),
                    "{per_gen}: {k:?}"
                );
            }
        }
        // Done once: the next open has nothing to do.
        let txn = db.begin_write().unwrap();
        assert!(redo(&txn).unwrap().is_none());
    }

    /// A digest as a dedup key has one: 128 bits of a hash of `n`.
    fn digest(n: u64) -> u128 {
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        u128::from(mix(n)) << 64 | u128::from(mix(!n))
    }

    /// How many entries each generation of the table holds.
    fn generations(db: &Database) -> BTreeMap<u32, usize> {
        use redb::ReadableDatabase;
        let txn = db.begin_read().unwrap();
        let mut by = BTreeMap::new();
        for e in txn.open_table(DEDUP).unwrap().iter().unwrap() {
            *by.entry(e.unwrap().0.value().0).or_insert(0) += 1;
        }
        by
    }

    #[test]
    fn entries_fill_one_generation_after_another_and_each_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::with_filter(GenFilter::new(100));
        let mut all = BTreeMap::new();
        let mut id = 0u64;
        for _ in 0..50 {
            let fresh: Vec<_> = (0..21)
                .map(|_| {
                    id += 1;
                    ((1, 2, digest(id)), (id, id * 10))
                })
                .collect();
            all.extend(fresh.iter().copied());
            commit(&db, &mut buffer, &fresh, false);
        }
        commit(&db, &mut buffer, &[], true);
        // 1,050 entries: ten full generations and the eleventh begun, none written twice.
        let mut want: BTreeMap<u32, usize> = (0..10).map(|g| (g, 100)).collect();
        want.insert(10, 50);
        assert_eq!(generations(&db), want);
        assert_eq!(buffer.in_table.newest(), (10, 50));
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let table = txn.open_table(DEDUP).unwrap();
        for (k, v) in &all {
            assert_eq!(buffer.in_table(&table, k).unwrap(), Some(*v), "{k:?}");
        }
        // A key never given is asked of few generations, and found in none.
        let asked: usize = (10_000..11_000)
            .map(|i| {
                let k = (1, 2, digest(i));
                assert_eq!(buffer.in_table(&table, &k).unwrap(), None);
                buffer.in_table.may_hold(&key_filter::dedup_key(&k)).count()
            })
            .sum();
        assert!(asked < 50, "{asked} generations asked for 1000 new keys");
        // A reader is told the same: the generations to ask, or the buffer's entry.
        let k = *all.keys().next().unwrap();
        let Held::InTable(gens) = buffer.held(&k) else {
            panic!("written out")
        };
        assert_eq!(newest_in(&table, gens, &k).unwrap(), all.get(&k).copied());
    }

    /// A windowed rule's key stored again after its window: the new entry goes to the newest
    /// generation, the expired one stays in its own until pruned, and look-ups find the new one.
    #[test]
    fn a_key_written_again_in_a_newer_generation_is_found_there() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::with_filter(GenFilter::new(4));
        let k = (1, 4, 77);
        let others: Vec<_> = (11..=14u64).map(|i| ((1, 2, digest(i)), (i, 0))).collect();
        commit(&db, &mut buffer, &[(k, (10, 100))], true);
        commit(&db, &mut buffer, &others, true);
        commit(&db, &mut buffer, &[(k, (20, 200))], true);
        // A commit writes what was in the buffer before it: one more writes the last entry.
        commit(&db, &mut buffer, &[], true);
        assert_eq!(generations(&db), BTreeMap::from([(0, 4), (1, 2)]));
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let table = txn.open_table(DEDUP).unwrap();
        assert_eq!(
            table.get(table_key(0, &k)).unwrap().unwrap().value(),
            (10, 100)
        );
        assert_eq!(buffer.in_table(&table, &k).unwrap(), Some((20, 200)));
    }

    #[test]
    fn the_buffer_stays_within_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let mut buffer = DedupBuffer::default();
        let batch: Vec<_> = (0..CAPACITY as u64 + 500)
            .map(|i| ((1, 1, u128::from(i)), (i + 1, 0)))
            .collect();
        commit(&db, &mut buffer, &batch, false);
        commit(&db, &mut buffer, &[], false);
        assert!(buffer.len() <= CAPACITY, "{}", buffer.len());
    }
}
