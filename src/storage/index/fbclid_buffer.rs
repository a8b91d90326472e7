//! Entries of the `clicks_by_fbclid` index on their way to the table, written one slice of the
//! key space per commit: the treatment `dedup_buffer.rs` gives the dedup index, for the other
//! index whose keys are digests.
//!
//! Why: an index key is a digest of the `fbclid`, so each new click's entry lands in a random
//! leaf, and writing each at once would rewrite a leaf of this table per click (besides the
//! click's own). So a new entry waits here, in memory, and each commit writes the entries of the
//! next slice of the key space ([`dedup_buffer::next_slice`]).
//!
//! Only the writer looks entries up (a back-fill or a visit with a known `fbclid` answers the
//! existing click), in this transaction's new entries first, then here, then in the table, so an
//! entry is found from the moment the commit of its click is answered. The buffer is the
//! writer's alone.
//!
//! Nothing is lost in a crash, because the `clicks` table is the redo log: an entry is only here
//! once its click is committed, a click record holds its `fbclid`, and a click's `uid` begins
//! with its time (`click::new_uid`), so the clicks from a time on are one range per space. Each
//! commit stores, in `META`, the smallest click time whose entry may be missing from the table
//! ([`META_FBCLID_REDO_FROM`]), or removes it when none may be; opening the file writes the
//! entries of the clicks from then on that the table lacks ([`redo`]).

use std::collections::btree_map;
use std::collections::{BTreeMap, HashMap};

use redb::{ReadableTable, Table, WriteTransaction};

use crate::domain::click;
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer;
use crate::storage::index::key_filter::KeyFilter;
use crate::storage::records::{self, ClickRecord, SpaceRecord};
use crate::storage::schema::{CLICKS, CLICKS_BY_FBCLID, META, META_FBCLID_REDO_FROM, SPACES};

/// A `clicks_by_fbclid` key: `(space, fbclid_key)`.
pub type IndexKey = (u32, u128);

/// The longest uid an entry holds: the longest a generated uid may be (`new_uid` makes 29).
const UID_MAX: usize = 32;

/// A waiting entry's value: the click's uid, held inline (the buffer holds tens of thousands of
/// entries, and each commit copies a slice of them: with a `String` each copy was an
/// allocation), and the time the uid begins with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    len: u8,
    uid: [u8; UID_MAX],
    time: u64,
}

impl Entry {
    /// The entry of `uid`, or `None` for a uid longer than any click's.
    fn of(uid: &str) -> Option<Entry> {
        let mut bytes = [0; UID_MAX];
        bytes.get_mut(..uid.len())?.copy_from_slice(uid.as_bytes());
        Some(Entry {
            len: u8::try_from(uid.len()).ok()?,
            uid: bytes,
            // A uid `new_uid` did not make would be found by no redo: 0 makes the redo read
            // every click, which finds it.
            time: click::uid_time(uid).unwrap_or(0),
        })
    }

    #[must_use]
    pub fn uid(&self) -> &str {
        // Copied from a `&str` whole, so always UTF-8.
        std::str::from_utf8(&self.uid[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// The entries not yet in the table, in table order.
#[derive(Debug, Default)]
pub struct FbclidBuffer {
    entries: BTreeMap<IndexKey, Entry>,
    /// How many of `entries` have each uid time: the smallest is where a redo starts. Counted
    /// per millisecond, not kept per entry: many entries share one.
    times: BTreeMap<u64, u32>,
    /// The last key written by the previous flush: the next one starts after it.
    cursor: Option<IndexKey>,
    /// The keys the table may hold (`key_filter.rs`).
    in_table: KeyFilter,
}

/// What one commit takes out of the buffer and puts in: decided while the transaction is open,
/// applied to the buffer ([`FbclidBuffer::apply`]) only once it has committed.
#[derive(Debug, Default)]
pub struct Change {
    /// Entries of this transaction's new clicks.
    fresh: HashMap<IndexKey, Entry>,
    /// Entries this transaction writes to the table.
    flushed: Vec<(IndexKey, Entry)>,
}

impl Change {
    /// Notes the entry of a click this transaction makes.
    ///
    /// # Errors
    /// `uid` is longer than any click's (`new_uid` never makes one).
    pub fn add(&mut self, key: IndexKey, uid: &str) -> Result<(), StoreError> {
        let entry = Entry::of(uid)
            .ok_or_else(|| StoreError::Corrupt(format!("a new click's uid {uid:?} is too long")))?;
        self.fresh.insert(key, entry);
        Ok(())
    }

    /// The uid of a click this transaction made with `key`.
    #[must_use]
    pub fn get(&self, key: &IndexKey) -> Option<&str> {
        self.fresh.get(key).map(Entry::uid)
    }
}

impl FbclidBuffer {
    /// An empty buffer, with the filter of the keys already in the table.
    ///
    /// # Errors
    /// A redb error.
    pub fn load(txn: &redb::ReadTransaction) -> Result<FbclidBuffer, StoreError> {
        // Not `..default()`: that would build an empty filter only to drop it.
        Ok(FbclidBuffer {
            entries: BTreeMap::new(),
            times: BTreeMap::new(),
            cursor: None,
            in_table: KeyFilter::of_table(txn)?,
        })
    }

    /// Whether the table may hold `key`: `false` only if it certainly does not, so that a new
    /// fbclid's click does not read the table.
    #[must_use]
    pub fn may_be_in_table(&self, key: &IndexKey) -> bool {
        self.in_table.may_hold(key)
    }

    /// The uid of the click `key` names, if its entry is waiting here.
    #[must_use]
    pub fn get(&self, key: &IndexKey) -> Option<&str> {
        self.entries.get(key).map(Entry::uid)
    }

    /// Writes the next slice of entries into `table` (every entry if `all`), records what it
    /// wrote in `change`, and returns the click time a redo would have to start from after this
    /// commit, or `None` if every entry is in the table.
    pub fn flush_slice(
        &self,
        change: &mut Change,
        table: &mut Table<'_, IndexKey, &'static str>,
        all: bool,
    ) -> Result<Option<u64>, StoreError> {
        change.flushed = dedup_buffer::next_slice(&self.entries, self.cursor, all);
        for (key, entry) in &change.flushed {
            table.insert(key, entry.uid())?;
        }
        let fresh = change.fresh.values().map(|e| e.time).min();
        Ok([self.smallest_time_left(&change.flushed), fresh]
            .into_iter()
            .flatten()
            .min())
    }

    /// The smallest uid time among the entries that stay once `leaving` is written.
    fn smallest_time_left(&self, leaving: &[(IndexKey, Entry)]) -> Option<u64> {
        let mut leaving: Vec<u64> = leaving.iter().map(|(_, e)| e.time).collect();
        leaving.sort_unstable();
        let mut leaving = leaving.into_iter().peekable();
        for (&time, &count) in &self.times {
            let mut gone = 0;
            while leaving.next_if(|&t| t <= time).is_some_and(|t| t == time) {
                gone += 1;
            }
            if count > gone {
                return Some(time);
            }
        }
        None
    }

    /// Applies a committed transaction's `change`.
    pub fn apply(&mut self, change: Change) {
        if let Some((last, _)) = change.flushed.last() {
            self.cursor = Some(*last);
        }
        for (key, entry) in change.flushed {
            // Only if the buffer still holds what was written (it is the writer's alone, so it
            // does; but a newer entry must never be dropped for an older one).
            if let btree_map::Entry::Occupied(held) = self.entries.entry(key)
                && *held.get() == entry
            {
                held.remove();
                self.forget_time(entry.time);
            }
        }
        for (key, entry) in change.fresh {
            self.in_table.insert(&key);
            if let Some(old) = self.entries.insert(key, entry) {
                self.forget_time(old.time);
            }
            *self.times.entry(entry.time).or_insert(0) += 1;
        }
    }

    fn forget_time(&mut self, time: u64) {
        if let btree_map::Entry::Occupied(mut count) = self.times.entry(time) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

/// Writes the index entries of every click from `META_FBCLID_REDO_FROM` on that the table lacks,
/// and removes the mark. Answers how many it wrote, or `None` if there was nothing to redo.
///
/// # Errors
/// A redb error, or a click record that does not decode.
pub fn redo(txn: &WriteTransaction) -> Result<Option<u64>, StoreError> {
    let mut meta = txn.open_table(META)?;
    let Some(from) = meta.get(META_FBCLID_REDO_FROM)?.map(|v| v.value()) else {
        return Ok(None);
    };
    let mut spaces = Vec::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (_, bytes) = entry?;
        spaces.push(records::decode::<SpaceRecord>(bytes.value())?.no);
    }
    let clicks = txn.open_table(CLICKS)?;
    let mut index = txn.open_table(CLICKS_BY_FBCLID)?;
    let start = click::uids_from(from);
    let mut written = 0;
    for space in spaces {
        for entry in clicks.range((space, start.as_str())..)? {
            let (key, bytes) = entry?;
            let (s, uid) = key.value();
            if s != space {
                break;
            }
            // Older, all-random uids in the range were indexed when they were made.
            if click::uid_time(uid).is_none_or(|t| t < from) {
                continue;
            }
            let record: ClickRecord = records::decode(bytes.value())?;
            let Some(fbclid) = &record.fbclid else {
                continue;
            };
            let k = (space, click::fbclid_key(fbclid));
            // The first click with an fbclid is the one it names; a later one would have been
            // answered with it, not made.
            if index.get(k)?.is_none() {
                index.insert(k, uid)?;
                written += 1;
            }
        }
    }
    meta.remove(META_FBCLID_REDO_FROM)?;
    Ok(Some(written))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uid: &str, time: u64) -> Entry {
        Entry {
            time,
            ..Entry::of(uid).unwrap()
        }
    }

    /// A buffer holding `(key, time)` entries, as commits would have left it.
    fn buffer(entries: &[(u128, u64)]) -> FbclidBuffer {
        let mut b = FbclidBuffer::default();
        let fresh = entries
            .iter()
            .map(|&(k, t)| ((1, k), entry(&format!("uid{k}"), t)))
            .collect();
        b.apply(Change {
            fresh,
            flushed: Vec::new(),
        });
        b
    }

    fn leaving(b: &FbclidBuffer, keys: &[u128]) -> Vec<(IndexKey, Entry)> {
        keys.iter().map(|&k| ((1, k), b.entries[&(1, k)])).collect()
    }

    #[test]
    fn an_entry_holds_a_uid_of_up_to_32_characters() {
        let uid = click::new_uid(1_700_000_000_000);
        let e = Entry::of(&uid).unwrap();
        assert_eq!((e.uid(), e.time), (uid.as_str(), 1_700_000_000_000));
        let longest = "a".repeat(UID_MAX);
        assert_eq!(Entry::of(&longest).unwrap().uid(), longest);
        assert_eq!(Entry::of(&"a".repeat(UID_MAX + 1)), None);
        // Not a uid `new_uid` made: a redo must read every click to find it.
        assert_eq!(Entry::of("old-random-uid").unwrap().time, 0);
    }

    #[test]
    fn the_redo_starts_at_the_oldest_entry_that_stays() {
        let b = buffer(&[(1, 5), (2, 5), (3, 7), (4, 9)]);
        assert_eq!(b.smallest_time_left(&[]), Some(5));
        assert_eq!(b.smallest_time_left(&leaving(&b, &[1])), Some(5));
        assert_eq!(b.smallest_time_left(&leaving(&b, &[1, 2])), Some(7));
        assert_eq!(b.smallest_time_left(&leaving(&b, &[3])), Some(5));
        assert_eq!(b.smallest_time_left(&leaving(&b, &[1, 2, 3])), Some(9));
        assert_eq!(b.smallest_time_left(&leaving(&b, &[1, 2, 3, 4])), None);
    }

    #[test]
    fn a_commit_takes_out_what_it_wrote_and_keeps_the_rest() {
        let mut b = buffer(&[(1, 5), (2, 5), (3, 7)]);
        let flushed = leaving(&b, &[1, 3]);
        b.apply(Change {
            fresh: [((1, 4), entry("uid4", 8))].into(),
            flushed,
        });
        assert_eq!(b.get(&(1, 1)), None);
        assert_eq!(b.get(&(1, 2)), Some("uid2"));
        assert_eq!(b.get(&(1, 3)), None);
        assert_eq!(b.get(&(1, 4)), Some("uid4"));
        assert_eq!(b.cursor, Some((1, 3)));
        assert_eq!(b.times, [(5, 1), (8, 1)].into());
        assert_eq!(b.smallest_time_left(&[]), Some(5));
    }

    /// The filter in front of the table must know every entry that leaves the buffer for it,
    /// or a click whose entry was written out would be missed and made again.
    #[test]
    fn an_entry_written_out_is_still_looked_up_in_the_table() {
        let mut b = FbclidBuffer::default();
        assert!(!b.may_be_in_table(&(1, 1)));
        let mut b2 = buffer(&[(1, 5), (2, 6)]);
        let flushed = leaving(&b2, &[1, 2]);
        b2.apply(Change {
            fresh: HashMap::new(),
            flushed,
        });
        assert_eq!((b2.get(&(1, 1)), b2.get(&(1, 2))), (None, None));
        assert!(b2.may_be_in_table(&(1, 1)) && b2.may_be_in_table(&(1, 2)));
        b.apply(Change {
            fresh: [((1, 1), entry("uid1", 5))].into(),
            flushed: Vec::new(),
        });
        assert!(b.may_be_in_table(&(1, 1)));
    }

    #[test]
    fn a_written_entry_that_was_replaced_meanwhile_stays() {
        let mut b = buffer(&[(1, 5)]);
        let stale = ((1, 1), entry("older", 3));
        b.apply(Change {
            fresh: HashMap::new(),
            flushed: vec![stale],
        });
        assert_eq!(b.get(&(1, 1)), Some("uid1"));
        assert_eq!(b.times, [(5, 1)].into());
    }
}
