//! Which keys a table of digests may hold: a Bloom filter in the writer's memory that answers
//! "certainly not" for almost every key seen for the first time. One in front of
//! `clicks_by_fbclid` (`fbclid_buffer.rs`, [`KeyFilter`]) and one in front of `DEDUP`
//! (`dedup_buffer.rs`, [`GenFilter`], which also says which of the table's runs to ask).
//!
//! Why: a click with an fbclid must find the earlier click with the same fbclid, and a new event
//! the earlier event with its dedup key, and almost never has one. Both keys are digests, so a
//! look-up reads a random leaf of the table, which on a file larger than redb's cache is a page
//! read from the OS: a cost that grows with the file. So the table is read only when the filter
//! says the key may be there: about one look-up in a hundred for a new key, every time
//! for a known one (a retry, which reads its earlier entry anyway).
//!
//! A Bloom filter never answers "no" for a key it was given, so no entry is missed. Its keys:
//! every key of the table when the store opens, and every entry from the commit that makes it
//! (`FbclidBuffer::apply`) or writes it to the table (`DedupBuffer::apply`) on. A key given to it
//! whose entry never reached the table, or was pruned from it since, costs only a needless
//! look-up.
//!
//! Blocked: the probes of one key fall in one 64-byte block (one cache miss per level, not one per
//! probe). It grows without a rebuild: when its newest level holds as many keys as it was sized
//! for, a level with as much room as all the others together is added, and a look-up asks each
//! level. A level has exactly the blocks its keys need (the block is picked by a multiply-shift,
//! not a mask, so the count need not be a power of two): 1.25 bytes per key it was sized for.
//! Built at open with a quarter more room than the table's keys: about 1.6 bytes per key then,
//! 1.25 when full, 2.5 right after a growth.

use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableTable, ReadableTableMetadata};

use crate::storage::error::StoreError;
use crate::storage::index::dedup_runs;
use crate::storage::schema::CLICKS_BY_FBCLID;

/// A key the filter takes: `(space, 128-bit digest)`, as `clicks_by_fbclid` keys are.
type Key = (u32, u128);

/// The filter's key for a `DEDUP` key `(space, rule, digest)`: the rule folded into the digest
/// (two rules' keys that fold alike would only cost a needless look-up).
#[must_use]
pub fn dedup_key(&(space, rule, digest): &(u32, u8, u128)) -> Key {
    (space, digest.wrapping_add(u128::from(rule) << 64))
}

/// Bits per key a level is sized for: 10 gives about one false "maybe" in a hundred when full.
const BITS_PER_KEY: usize = 10;
/// Bits set per key, all in one block.
const PROBES: u32 = 7;
/// Bits in a block: one cache line of `u64`s.
const BLOCK_BITS: usize = 512;
const WORDS_PER_BLOCK: usize = BLOCK_BITS / 64;
/// The smallest level: 64 Ki keys in 80 KiB.
const FIRST_CAPACITY: usize = 1 << 16;

#[derive(Debug)]
pub struct KeyFilter {
    /// Oldest first; each as large as all the ones before it together.
    levels: Vec<Level>,
}

#[derive(Debug)]
struct Level {
    words: Vec<u64>,
    /// Blocks in `words`.
    blocks: u64,
    /// Keys given to this level, and how many it was sized for.
    held: usize,
    capacity: usize,
}

impl Level {
    fn new(capacity: usize) -> Level {
        Level::with_bits(capacity, BITS_PER_KEY)
    }

    /// A level for `capacity` keys (more than zero) at `bits_per_key`.
    fn with_bits(capacity: usize, bits_per_key: usize) -> Level {
        let blocks = (capacity * bits_per_key).div_ceil(BLOCK_BITS).max(1);
        Level {
            words: vec![0; blocks * WORDS_PER_BLOCK],
            blocks: blocks as u64,
            held: 0,
            capacity: blocks * BLOCK_BITS / bits_per_key,
        }
    }

    fn insert(&mut self, key: &Key) {
        for (word, bit) in probes(self.blocks, key) {
            self.words[word] |= bit;
        }
        self.held += 1;
    }

    fn may_hold(&self, key: &Key) -> bool {
        probes(self.blocks, key).all(|(word, bit)| self.words[word] & bit != 0)
    }
}

/// The word and bit of each probe of `key` in a level of `blocks` blocks.
fn probes(blocks: u64, key: &Key) -> impl Iterator<Item = (usize, u64)> {
    let (space, digest) = *key;
    // The digest is a hash already: its low half picks the block and its high half the bits
    // within it. The space keeps one fbclid in two spaces apart. The high 64 bits of the
    // product spread the hash evenly over `0..blocks` (Lemire's multiply-shift).
    let low = digest as u64 ^ u64::from(space).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let block = ((u128::from(low) * u128::from(blocks)) >> 64) as u64;
    let bits = (digest >> 64) as u64;
    let base = block as usize * WORDS_PER_BLOCK;
    (0..PROBES).map(move |i| {
        let bit = (bits >> (i * 9)) as usize & (BLOCK_BITS - 1);
        (base + bit / 64, 1 << (bit % 64))
    })
}

impl Default for KeyFilter {
    fn default() -> KeyFilter {
        KeyFilter::with_capacity(0)
    }
}

impl KeyFilter {
    /// An empty filter whose first level holds `keys` keys (at least 64 Ki).
    #[must_use]
    pub fn with_capacity(keys: usize) -> KeyFilter {
        KeyFilter {
            levels: vec![Level::new(keys.max(FIRST_CAPACITY))],
        }
    }

    /// A filter of every key of `CLICKS_BY_FBCLID`, with room for a quarter more before it
    /// grows.
    ///
    /// # Errors
    /// A redb error.
    pub fn of_table(txn: &redb::ReadTransaction) -> Result<KeyFilter, StoreError> {
        let table = txn.open_table(CLICKS_BY_FBCLID)?;
        KeyFilter::of_keys(table.len()?, table.iter()?.map(|e| Ok(e?.0.value())))
    }

    fn of_keys(
        count: u64,
        keys: impl Iterator<Item = Result<Key, StoreError>>,
    ) -> Result<KeyFilter, StoreError> {
        let count = usize::try_from(count).unwrap_or(usize::MAX / 4);
        let mut filter = KeyFilter::with_capacity(count.saturating_add(count / 4));
        for key in keys {
            filter.insert(&key?);
        }
        Ok(filter)
    }

    pub fn insert(&mut self, key: &Key) {
        let full = self.levels.last().is_none_or(|l| l.held >= l.capacity);
        if full {
            // As much room again as all the levels before: the filter's size doubles, so right
            // after it grows it takes at most twice the 1.25 bytes a key it holds.
            let room: usize = self.levels.iter().map(|l| l.capacity).sum();
            self.levels.push(Level::new(room.max(FIRST_CAPACITY)));
        }
        if let Some(level) = self.levels.last_mut() {
            level.insert(key);
        }
    }

    /// `false` only if `key` was never inserted.
    #[must_use]
    pub fn may_hold(&self, key: &Key) -> bool {
        self.levels.iter().rev().any(|l| l.may_hold(key))
    }
}

/// Bits per key of a dedup run's level. A look-up asks the level of every run, so each must say
/// "maybe" more rarely than a level of [`KeyFilter`]: at 14 bits about one key in 500 it was
/// never given.
const GEN_BITS_PER_KEY: usize = 14;

/// Which runs of `DEDUP` may hold a key (`dedup_buffer.rs`, `dedup_runs.rs`): a level per run,
/// each sized for a full one (1.75 bytes per key of a full generation it covers), so the filter
/// never grows by doubling. A run's keys are given to its level only. A run that retention has
/// emptied keeps its level until the next start, which builds the filter from what the table
/// holds.
///
/// The cost that grows: each look-up asks every level, and each wrongly says "maybe" about one
/// time in 500, a read of a run that is not written to and so not in redb's cache. Merging
/// keeps the runs few (`dedup_runs.rs`); the look-ups and the wrong "maybe"s are counted for
/// `/metrics`.
#[derive(Debug)]
pub struct GenFilter {
    /// By run number, with each run's number.
    gens: Vec<(u32, Level)>,
    /// Keys a generation takes before the next begins.
    per_gen: usize,
    /// The first generation no merged run covers: where the writer's generations go on from.
    fresh_from: u32,
    /// Look-ups through [`dedup_buffer::find`](super::dedup_buffer::find), and the runs they
    /// read that did not hold the key.
    lookups: AtomicU64,
    wrong_maybes: AtomicU64,
}

impl GenFilter {
    /// An empty filter for generations of `per_gen` keys (more than zero).
    #[must_use]
    pub fn new(per_gen: usize) -> GenFilter {
        GenFilter {
            gens: Vec::new(),
            per_gen,
            fresh_from: 0,
            lookups: AtomicU64::new(0),
            wrong_maybes: AtomicU64::new(0),
        }
    }

    /// A filter of every key of the runs of `DEDUP` that look-ups ask, each in its run's level,
    /// with `building` the run a merge is writing (`META_DEDUP_MERGING`).
    ///
    /// # Errors
    /// A redb error.
    pub fn of_dedup(
        table: &impl ReadableTable<(u32, u32, u8, u128), (u64, u64)>,
        building: Option<u32>,
        per_gen: usize,
    ) -> Result<GenFilter, StoreError> {
        let mut filter = GenFilter::new(per_gen);
        for run in dedup_runs::Runs::read(table, building)?.live {
            filter.add_run(run);
            for entry in table.range((run, 0, 0, 0)..=(run, u32::MAX, u8::MAX, u128::MAX))? {
                let (_, space, rule, digest) = entry?.0.value();
                filter.insert(run, &dedup_key(&(space, rule, digest)));
            }
        }
        Ok(filter)
    }

    /// Keys a generation takes before the next begins.
    #[must_use]
    pub fn per_gen(&self) -> usize {
        self.per_gen
    }

    /// The newest of the writer's generations and how many keys it was given (`(0, 0)` when
    /// there is none): never one a merged run covers.
    #[must_use]
    pub fn newest(&self) -> (u32, usize) {
        let newest = self
            .gens
            .iter()
            .rev()
            .find(|(g, _)| *g < dedup_runs::MERGED)
            .map_or((0, 0), |(g, l)| (*g, l.held));
        if newest.0 < self.fresh_from {
            (self.fresh_from, 0)
        } else {
            newest
        }
    }

    /// The number of every run asked.
    #[must_use]
    pub fn runs(&self) -> Vec<u32> {
        self.gens.iter().map(|(g, _)| *g).collect()
    }

    /// Adds run `run`'s level, empty, unless it has one.
    pub fn add_run(&mut self, run: u32) -> usize {
        match self.gens.binary_search_by_key(&run, |(g, _)| *g) {
            Ok(i) => i,
            Err(i) => {
                let capacity = dedup_runs::capacity(run, self.per_gen).max(1);
                let level = Level::with_bits(capacity, GEN_BITS_PER_KEY);
                self.gens.insert(i, (run, level));
                if run >= dedup_runs::MERGED {
                    self.fresh_from = self.fresh_from.max(dedup_runs::covers(run).end() + 1);
                }
                i
            }
        }
    }

    /// Drops the levels of `runs`: a merged run replaced them.
    pub fn remove_runs(&mut self, runs: &[u32]) {
        self.gens.retain(|(g, _)| !runs.contains(g));
    }

    /// `key` is in run `generation` of the table.
    pub fn insert(&mut self, generation: u32, key: &Key) {
        // Nearly always the newest or the one after it; never dropped when it is another.
        let i = self.add_run(generation);
        self.gens[i].1.insert(key);
    }

    /// The runs that may hold `key`: every one that does is among them.
    pub fn may_hold<'a>(&'a self, key: &Key) -> impl Iterator<Item = u32> + use<'a> {
        let key = *key;
        self.gens
            .iter()
            .rev()
            .filter(move |(_, l)| l.may_hold(&key))
            .map(|(g, _)| *g)
    }

    /// A look-up asked the table, and read `wrong` runs that did not hold its key.
    pub fn count_lookup(&self, wrong: u64) {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        self.wrong_maybes.fetch_add(wrong, Ordering::Relaxed);
    }

    /// Look-ups so far and the runs they read in vain.
    #[must_use]
    pub fn lookups(&self) -> (u64, u64) {
        (
            self.lookups.load(Ordering::Relaxed),
            self.wrong_maybes.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl KeyFilter {
        /// The memory the filter takes.
        fn bytes(&self) -> usize {
            self.levels.iter().map(|l| l.words.len() * 8).sum()
        }
    }

    /// Keys as the index has them: a space and a 128-bit digest.
    fn key(n: u64) -> Key {
        let digest = crate::domain::click::fbclid_key(&format!("IwAR-test-{n}"));
        ((n % 3) as u32 + 1, digest)
    }

    #[test]
    fn every_key_given_is_found_across_levels() {
        let mut f = KeyFilter::default();
        let n = 400_000;
        for i in 0..n {
            f.insert(&key(i));
        }
        assert!(f.levels.len() >= 3, "grew to {} levels", f.levels.len());
        let missed = (0..n).filter(|&i| !f.may_hold(&key(i))).count();
        assert_eq!(missed, 0);
    }

    /// A dedup key's rule is part of what the filter knows: the same digest under another rule
    /// (another rule's fields) is a key of its own.
    #[test]
    fn dedup_keys_of_two_rules_with_one_digest_stay_apart() {
        let mut f = KeyFilter::default();
        let (space, digest) = (3, key(7).1);
        f.insert(&dedup_key(&(space, 1, digest)));
        assert!(f.may_hold(&dedup_key(&(space, 1, digest))));
        assert_ne!(
            dedup_key(&(space, 1, digest)),
            dedup_key(&(space, 2, digest))
        );
        let others = (2..=6u8)
            .filter(|&rule| f.may_hold(&dedup_key(&(space, rule, digest))))
            .count();
        assert_eq!(others, 0, "another rule's key taken for the one given");
    }

    #[test]
    fn few_keys_never_given_are_taken_for_given_ones() {
        let mut f = KeyFilter::default();
        for i in 0..300_000 {
            f.insert(&key(i));
        }
        let tries = 100_000;
        let wrong = (1_000_000..1_000_000 + tries)
            .filter(|&i| f.may_hold(&key(i)))
            .count();
        // About 1% per full level, a few levels asked.
        assert!(wrong * 100 < tries as usize * 3, "{wrong} of {tries}");
        // The same digest in another space is another key.
        let (space, digest) = key(1);
        let others = (10..1010)
            .filter(|s| *s != space && f.may_hold(&(*s, digest)))
            .count();
        assert!(others < 50, "{others} of 1000 other spaces");
    }

    #[test]
    fn growing_at_most_doubles_the_filter() {
        let mut f = KeyFilter::with_capacity(200_000);
        let room = f.levels[0].capacity;
        for i in 0..=room as u64 {
            f.insert(&key(i));
        }
        assert_eq!(f.levels.len(), 2);
        // Twice the bytes of the first level, one block of rounding each: 2.5 bytes a key.
        let most = 2 * (room * BITS_PER_KEY / 8 + BLOCK_BITS / 8);
        assert!(f.bytes() <= most, "{} > {most}", f.bytes());
        assert!((0..=room as u64).all(|i| f.may_hold(&key(i))));
    }

    /// A key given to any generation, in any order, is found there: never dropped because its
    /// generation is not the newest.
    #[test]
    fn a_generation_filter_finds_each_key_in_its_generation_newest_first() {
        let mut f = GenFilter::new(1000);
        for (generation, n) in [(3, 1), (1, 2), (7, 3), (3, 4), (0, 5)] {
            f.insert(generation, &key(n));
        }
        f.insert(7, &key(1));
        assert_eq!(f.newest(), (7, 2));
        assert_eq!(f.may_hold(&key(1)).collect::<Vec<_>>(), vec![7, 3]);
        for (n, generation) in [(2, 1), (3, 7), (4, 3), (5, 0)] {
            assert_eq!(
                f.may_hold(&key(n)).collect::<Vec<_>>(),
                vec![generation],
                "{n}"
            );
        }
        assert_eq!(f.may_hold(&key(99)).count(), 0);
    }

    #[test]
    fn a_level_is_sized_from_what_it_must_hold() {
        assert_eq!(KeyFilter::default().bytes(), 80 * 1024);
        // Not a power of two: exactly the blocks 10 bits a key need, and no more.
        for keys in [1_000_000, 1_300_001, 8_700_000] {
            let f = KeyFilter::with_capacity(keys);
            assert!(f.levels[0].capacity >= keys);
            let most = keys * BITS_PER_KEY / 8 + BLOCK_BITS / 8;
            assert!(f.bytes() <= most, "{keys} keys: {} > {most}", f.bytes());
        }
    }
}
