//! The runs of the `DEDUP` table: which generations a merged run replaces, which merge comes
//! next, and the slices a merge is written and a replaced run deleted in, a few each commit.
//!
//! Why: a look-up asks the filter level of every run of the table, and each level wrongly says
//! "maybe" for about one new key in 500, a page read of a run that is not written to and so not
//! in redb's cache. With one run per generation (`dedup_buffer::GEN_ENTRIES` entries each) that
//! grows with the file (0.75 reads per new event at 100 million events). So
//! full generations are merged, [`FAN_IN`] at a time, into a run of the next tier, and
//! [`FAN_IN`] runs of a tier into one of the next: the runs a look-up asks grow with the
//! logarithm of the file (at most [`FAN_IN`] of each tier and the one being built; about 16
//! runs at 100 million events).
//!
//! A run's number says what it holds. A generation written by the writer has its number below
//! [`MERGED`]; a merged run's number is [`MERGED`], its tier and the newest generation it covers,
//! so it covers the [`FAN_IN`]^tier generations up to that one, aligned: the runs a merge
//! replaces and the run it makes follow from the numbers, and no table says so.
//!
//! A merge writes its run in key order (each source is a sorted run, so it reads in order and
//! appends), a slice each commit, while the writer goes on: until it ends, its sources stay as
//! they were and are asked as before, and the run being built is asked too (it holds copies of
//! their entries). `META_DEDUP_MERGING` names the run being built from its first slice's commit
//! on; the commit of its last slice removes that name, and from that commit on the run is
//! complete and its sources replaced: one small commit swaps them. A replaced run's entries are
//! then deleted a slice each commit. A crash at any point leaves one of two readings of the
//! file: the sources (and a part of the run, resumed at the next start from its last key), or
//! the run (and what is left of the replaced sources, never asked again). Entries are only ever
//! copied, never moved, so no key is lost; a key found in two runs has the same entry in both, or
//! a newer one in a newer generation, and a look-up takes the newest (the highest inbox id).
//!
//! The writer decides under its own view, so its answers are exact. A reader (`dry_run`) takes
//! its list of runs from the filter and opens its snapshot after: one that took the list before
//! a merge's last slice was applied and opens its snapshot only after the first deletion slice
//! of a source could miss that source's keys. Deletion waits for no reader; that window is a few
//! commits long.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeInclusive};

use redb::{ReadableTable, Table};

use crate::storage::error::StoreError;
use crate::storage::schema::META_DEDUP_MERGING;

/// A dedup key as the buffer holds it: `(space, rule, digest)`.
pub type EntryKey = (u32, u8, u128);
/// A `DEDUP` table key: `(run, space, rule, digest)`; a run is a generation or a merged run.
pub type TableKey = (u32, u32, u8, u128);
/// A `DEDUP` table value: the earlier event's `(inbox_id, received_at_ms)`.
pub type Earlier = (u64, u64);

/// The lowest number of a merged run.
pub const MERGED: u32 = 1 << 31;
/// Where a merged run's number keeps its tier; below it, the newest generation it covers.
const TIER_SHIFT: u32 = 26;
const NEWEST_MASK: u32 = (1 << TIER_SHIFT) - 1;
/// Runs of one tier merged into one of the next.
pub const FAN_IN: u32 = 8;
/// The highest tier: 8^6 generations, 68 billion entries at full size.
const TOP_TIER: u32 = 6;
/// Entries a commit may read for a merge, per entry it writes to the newest generation, and at
/// least (or a generation's entries, if fewer): each entry is merged once per tier (about three
/// times at 100 million events), so a merge keeps ahead of the writer while its cost per commit
/// stays a bounded slice.
pub const PACE: usize = 4;
pub const FLOOR: usize = 256;

/// The tier of run `id`: 0 for a generation the writer wrote.
#[must_use]
pub fn tier(id: u32) -> u32 {
    if id < MERGED {
        0
    } else {
        (id >> TIER_SHIFT) & 0x1f
    }
}

/// Generations a run of `tier` covers.
fn span(tier: u32) -> u32 {
    FAN_IN.pow(tier)
}

/// The generations run `id` covers.
#[must_use]
pub fn covers(id: u32) -> RangeInclusive<u32> {
    match tier(id) {
        0 => id..=id,
        t => {
            let newest = id & NEWEST_MASK;
            (newest + 1 - span(t))..=newest
        }
    }
}

fn merged_id(tier: u32, newest: u32) -> u32 {
    MERGED | tier << TIER_SHIFT | newest
}

/// The keys run `id`'s filter level is sized for: a full generation's for each it covers.
#[must_use]
pub fn capacity(id: u32, per_gen: usize) -> usize {
    per_gen.saturating_mul(span(tier(id)) as usize)
}

fn within(inner: u32, outer: u32) -> bool {
    let (i, o) = (covers(inner), covers(outer));
    o.start() <= i.start() && i.end() <= o.end()
}

/// The runs the table holds, read from their numbers and the run being built: those a look-up
/// asks, and those a complete merged run replaced (deleted a slice at a time).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Runs {
    /// Asked by look-ups, oldest generation first; the run being built among them.
    pub live: Vec<u32>,
    pub replaced: Vec<u32>,
}

impl Runs {
    /// The runs of the numbers `present`, with `building` the run a merge is writing.
    #[must_use]
    pub fn of(present: &[u32], building: Option<u32>) -> Runs {
        let complete: Vec<u32> = present
            .iter()
            .copied()
            .filter(|&id| id >= MERGED && Some(id) != building)
            .collect();
        let mut runs = Runs::default();
        for &id in present {
            let is_replaced = complete
                .iter()
                .any(|&m| m != id && tier(m) > tier(id) && within(id, m));
            if is_replaced {
                runs.replaced.push(id);
            } else {
                runs.live.push(id);
            }
        }
        if let Some(b) = building.filter(|b| !runs.live.contains(b)) {
            runs.live.push(b);
        }
        runs
    }

    /// The runs of `table`: each run number found by one seek, not by reading its entries.
    ///
    /// # Errors
    /// A redb error.
    pub fn read(
        table: &impl ReadableTable<TableKey, Earlier>,
        building: Option<u32>,
    ) -> Result<Runs, StoreError> {
        let mut present = Vec::new();
        let mut from = 0;
        while let Some(entry) = table.range((from, 0, 0, 0)..)?.next() {
            let id = entry?.0.value().0;
            present.push(id);
            let Some(next) = id.checked_add(1) else { break };
            from = next;
        }
        Ok(Runs::of(&present, building))
    }
}

/// The run a merge is writing, as `META_DEDUP_MERGING` names it.
///
/// # Errors
/// A redb error.
pub fn building(meta: &impl ReadableTable<&'static str, u64>) -> Result<Option<u32>, StoreError> {
    Ok(meta
        .get(META_DEDUP_MERGING)?
        .and_then(|v| u32::try_from(v.value()).ok()))
}

/// A merge on its way: the run it writes, the runs it reads, and the last key written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub into: u32,
    pub sources: Vec<u32>,
    pub cursor: Option<EntryKey>,
}

impl Merge {
    /// The merge that writes run `into`, resumed after the last key the table holds of it.
    ///
    /// # Errors
    /// A redb error.
    pub fn resume(
        table: &impl ReadableTable<TableKey, Earlier>,
        into: u32,
        live: &[u32],
    ) -> Result<Merge, StoreError> {
        let last = table
            .range((into, 0, 0, 0)..=(into, u32::MAX, u8::MAX, u128::MAX))?
            .next_back()
            .transpose()?
            .map(|(k, _)| {
                let (_, space, rule, digest) = k.value();
                (space, rule, digest)
            });
        Ok(Merge {
            into,
            sources: sources_of(into, live),
            cursor: last,
        })
    }
}

fn sources_of(into: u32, live: &[u32]) -> Vec<u32> {
    live.iter()
        .copied()
        .filter(|&id| id != into && within(id, into))
        .collect()
}

/// The next merge of the complete runs `complete`, while generation `newest` is written to: the
/// lowest tier first, then the oldest. A block of [`FAN_IN`]^tier generations is merged once
/// every one of them is older than `newest` and every run in it is of the tier below.
#[must_use]
pub fn next_merge(complete: &[u32], newest: u32) -> Option<Merge> {
    for t in 1..=TOP_TIER {
        let size = span(t);
        let mut blocks: Vec<u32> = complete
            .iter()
            .filter(|&&id| tier(id) == t - 1 && *covers(id).end() <= NEWEST_MASK)
            .map(|&id| covers(id).start() / size)
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        for block in blocks {
            let (first, last) = (block * size, block * size + (size - 1));
            if last >= newest {
                continue;
            }
            let inside = |id: &u32| {
                let c = covers(*id);
                *c.start() <= last && first <= *c.end()
            };
            if complete
                .iter()
                .filter(|id| inside(id))
                .all(|&id| tier(id) == t - 1)
            {
                let into = merged_id(t, last);
                return Some(Merge {
                    into,
                    sources: sources_of(into, complete),
                    cursor: None,
                });
            }
        }
    }
    None
}

/// Writes the next slice of `merge` into its run, reading at most about `budget` entries of its
/// sources, and answers the entries written and whether the merge is done. A key in two sources
/// gets the newer entry.
///
/// # Errors
/// A redb error.
pub fn merge_slice(
    table: &mut Table<'_, TableKey, Earlier>,
    merge: &Merge,
    budget: usize,
) -> Result<(Vec<(EntryKey, Earlier)>, bool), StoreError> {
    let per_source = (budget / merge.sources.len().max(1)).max(1);
    let mut merged: BTreeMap<EntryKey, Earlier> = BTreeMap::new();
    // The last key read of each source that may hold more: past the smallest of them, a key
    // of that source may still come, so the slice ends there.
    let mut until: Option<EntryKey> = None;
    for &source in &merge.sources {
        let start = match merge.cursor {
            Some((s, r, d)) => Bound::Excluded((source, s, r, d)),
            None => Bound::Included((source, 0, 0, 0)),
        };
        let end = Bound::Included((source, u32::MAX, u8::MAX, u128::MAX));
        let mut read = 0;
        let mut last = None;
        for entry in table.range::<TableKey>((start, end))?.take(per_source) {
            let (k, v) = entry?;
            let (_, space, rule, digest) = k.value();
            let key = (space, rule, digest);
            let value = v.value();
            merged
                .entry(key)
                .and_modify(|e| *e = (*e).max(value))
                .or_insert(value);
            read += 1;
            last = Some(key);
        }
        if let Some(last) = last.filter(|_| read == per_source) {
            until = Some(until.map_or(last, |u| u.min(last)));
        }
    }
    let written: Vec<(EntryKey, Earlier)> = match until {
        Some(until) => merged
            .into_iter()
            .take_while(|(k, _)| *k <= until)
            .collect(),
        None => merged.into_iter().collect(),
    };
    for (key, earlier) in &written {
        let (space, rule, digest) = *key;
        table.insert((merge.into, space, rule, digest), earlier)?;
    }
    Ok((written, until.is_none()))
}

/// Deletes up to `budget` entries of replaced run `id`; `true` once it has none left.
///
/// # Errors
/// A redb error.
pub fn delete_slice(
    table: &mut Table<'_, TableKey, Earlier>,
    id: u32,
    budget: usize,
) -> Result<bool, StoreError> {
    let keys: Vec<TableKey> = table
        .range((id, 0, 0, 0)..=(id, u32::MAX, u8::MAX, u128::MAX))?
        .take(budget)
        .map(|e| e.map(|(k, _)| k.value()))
        .collect::<Result<_, _>>()?;
    for key in &keys {
        table.remove(key)?;
    }
    Ok(keys.len() < budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merged_runs_number_says_what_it_covers() {
        assert_eq!(covers(5), 5..=5);
        let tier_one = merged_id(1, 15);
        assert_eq!((tier(tier_one), covers(tier_one)), (1, 8..=15));
        let tier_two = merged_id(2, 63);
        assert_eq!(covers(tier_two), 0..=63);
        assert_eq!(capacity(tier_two, 100), 6400);
        assert!(within(tier_one, tier_two) && !within(tier_two, tier_one));
    }

    #[test]
    fn merges_go_lowest_tier_first_and_never_take_the_newest_generation() {
        let fresh: Vec<u32> = (0..16).collect();
        // Generation 15 is written to: only 0..=7 can be merged.
        let m = next_merge(&fresh, 15).unwrap();
        assert_eq!((m.into, m.sources), (merged_id(1, 7), (0..8).collect()));
        assert_eq!(next_merge(&fresh[..8], 7), None);
        // Seven tier-one runs and fresh ones: the fresh ones first, then the tier-one block.
        let mut runs: Vec<u32> = (0..7).map(|b| merged_id(1, b * 8 + 7)).collect();
        runs.extend(56..=64);
        let m = next_merge(&runs, 64).unwrap();
        assert_eq!(m.into, merged_id(1, 63));
        runs.retain(|&id| !(56..64).contains(&id));
        runs.push(merged_id(1, 63));
        let m = next_merge(&runs, 64).unwrap();
        assert_eq!(m.into, merged_id(2, 63));
        assert_eq!(m.sources.len(), 8);
    }

    #[test]
    fn a_complete_merged_run_replaces_what_it_covers_and_one_being_built_does_not() {
        let t1 = merged_id(1, 7);
        let present = [0, 3, 7, 8, 9, t1];
        assert_eq!(
            Runs::of(&present, None),
            Runs {
                live: vec![8, 9, t1],
                replaced: vec![0, 3, 7]
            }
        );
        assert_eq!(
            Runs::of(&present, Some(t1)),
            Runs {
                live: present.to_vec(),
                replaced: vec![]
            }
        );
        // Named as being built before its first entry is in the table.
        assert_eq!(Runs::of(&[0, 1], Some(t1)).live, vec![0, 1, t1]);
    }
}
