//! Entries of the `clicks_by_fbclid` index on their way to the table, written one slice of the
//! key space per commit: the treatment `dedup_buffer.rs` gives the dedup index, for the other
//! index whose keys are digests.
//!
//! Why: an index key is a digest of the `fbclid`, so each new click's entry landed in a random
//! leaf, and a commit of N clicks rewrote N leaves of this table (besides the click's own). Now a
//! new entry waits here, in memory, and each commit writes the entries of the next slice of the
//! key space ([`dedup_buffer::next_slice`]).
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use redb::{ReadableTable, Table, WriteTransaction};

use crate::domain::click;
use crate::storage::StoreError;
use crate::storage::dedup_buffer;
use crate::storage::records::{self, ClickRecord, SpaceRecord};
use crate::storage::schema::{CLICKS, CLICKS_BY_FBCLID, META, META_FBCLID_REDO_FROM, SPACES};

/// A `clicks_by_fbclid` key: `(space, fbclid_key)`.
pub type IndexKey = (u32, u128);

/// The entries not yet in the table, in table order.
#[derive(Debug, Default)]
pub struct FbclidBuffer {
    /// Key to the click's uid and the time it begins with.
    entries: BTreeMap<IndexKey, (String, u64)>,
    /// `(time of the click's uid, key)` of every entry: the smallest time is where a redo starts.
    times: BTreeSet<(u64, IndexKey)>,
    /// The last key written by the previous flush: the next one starts after it.
    cursor: Option<IndexKey>,
}

/// What one commit takes out of the buffer and puts in: decided while the transaction is open,
/// applied to the buffer ([`FbclidBuffer::apply`]) only once it has committed.
#[derive(Debug, Default)]
pub struct Change {
    /// Entries of this transaction's new clicks: key to `(uid, time of the uid)`.
    pub fresh: HashMap<IndexKey, (String, u64)>,
    /// Entries this transaction writes to the table.
    flushed: Vec<(IndexKey, (String, u64))>,
}

impl Change {
    /// Notes the entry of a click this transaction makes.
    pub fn add(&mut self, key: IndexKey, uid: &str) {
        // A uid `new_uid` did not make would be found by no redo: 0 makes the redo read every
        // click, which finds it.
        let time = click::uid_time(uid).unwrap_or(0);
        self.fresh.insert(key, (uid.to_owned(), time));
    }
}

impl FbclidBuffer {
    /// The uid of the click `key` names, if its entry is waiting here.
    #[must_use]
    pub fn get(&self, key: &IndexKey) -> Option<&str> {
        self.entries.get(key).map(|(uid, _)| uid.as_str())
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
        for (key, (uid, _)) in &change.flushed {
            table.insert(key, uid.as_str())?;
        }
        let leaving: HashSet<IndexKey> = change.flushed.iter().map(|(k, _)| *k).collect();
        let left = self
            .times
            .iter()
            .find(|(_, k)| !leaving.contains(k))
            .map(|(t, _)| *t);
        let fresh = change.fresh.values().map(|(_, t)| *t).min();
        Ok([left, fresh].into_iter().flatten().min())
    }

    /// Applies a committed transaction's `change`.
    pub fn apply(&mut self, change: Change) {
        if let Some((last, _)) = change.flushed.last() {
            self.cursor = Some(*last);
        }
        for (key, entry) in change.flushed {
            // Only if the buffer still holds what was written (it is the writer's alone, so it
            // does; but a newer entry must never be dropped for an older one).
            if self.entries.get(&key) == Some(&entry) {
                self.entries.remove(&key);
                self.times.remove(&(entry.1, key));
            }
        }
        for (key, entry) in change.fresh {
            let time = entry.1;
            if let Some((_, old)) = self.entries.insert(key, entry) {
                self.times.remove(&(old, key));
            }
            self.times.insert((time, key));
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
