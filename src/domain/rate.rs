//! Request limits (`docs/api.md#rate-limits`): a token bucket per space (`rate_limit`, `rate_burst`)
//! and per client address on the public paths (`address_rate_limit`, `address_rate_burst`).
//!
//! A bucket holds up to `burst` tokens and gains `per_second` of them every second; a request
//! takes one, and a request that finds less than one is refused with the whole seconds until
//! one is there (the `Retry-After` header). Tokens are kept in thousandths, so a bucket is two
//! integers and a refill is a multiplication: one short lock per request, nothing allocated
//! for a key already seen.
//!
//! The keys (client addresses can be many) are kept in two generations: new keys go into the
//! current one, and when it holds half of [`MAX_KEYS`] it becomes the previous one and the
//! previous one is dropped whole; a key found in the previous one moves back. So a key seen
//! within the last `MAX_KEYS / 2` new keys keeps its bucket, the table never holds more than
//! `MAX_KEYS`, and a new key costs the same as any other, however full the table: no pass over
//! it under the lock (a forgotten key starts full, as a new one does).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};

use crate::error::{Code, Error};

/// One token, in the thousandths the buckets count in.
const TOKEN: u64 = 1000;
/// Keys remembered at most, in two generations of half as many each (module docs).
const MAX_KEYS: usize = 65_536;

/// A rate and a burst; a rate of 0 turns the limit off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}

impl Rate {
    pub const OFF: Rate = Rate {
        per_second: 0,
        burst: 0,
    };

    fn capacity(self) -> u64 {
        u64::from(self.burst.max(1)) * TOKEN
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Thousandths of a token.
    level: u64,
    at_ms: u64,
}

impl Bucket {
    /// The level at `now_ms`: refilled at `per_second` tokens a second (that is, `per_second`
    /// thousandths a millisecond), at most the capacity.
    fn refill(&mut self, rate: Rate, now_ms: u64) {
        #[cfg(test)]
        tests::REFILLS.with(|n| n.set(n.get() + 1));
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.level = self
            .level
            .saturating_add(elapsed.saturating_mul(u64::from(rate.per_second)))
            .min(rate.capacity());
        self.at_ms = self.at_ms.max(now_ms);
    }
}

/// Token buckets keyed by `K` (a space's number, a client address).
pub struct Limiter<K> {
    rate: Rate,
    buckets: Mutex<Generations<K>>,
}

/// The buckets of the keys seen lately, and of those seen before them (module docs).
struct Generations<K> {
    current: HashMap<K, Bucket>,
    previous: HashMap<K, Bucket>,
}

impl<K: Hash + Eq + Copy> Limiter<K> {
    #[must_use]
    pub fn new(rate: Rate) -> Self {
        Limiter {
            rate,
            buckets: Mutex::new(Generations {
                current: HashMap::new(),
                previous: HashMap::new(),
            }),
        }
    }

    /// Takes one token from `key`'s bucket at `now_ms`, or answers the whole seconds until one
    /// is there (at least one; with whole tokens a second always one, but computed rather than
    /// assumed, so a finer rate would stay right).
    pub fn take(&self, key: K, now_ms: u64) -> Result<(), u32> {
        let rate = self.rate;
        if rate.per_second == 0 {
            return Ok(());
        }
        let mut g = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if !g.current.contains_key(&key) {
            let known = g.previous.remove(&key);
            if g.current.len() >= MAX_KEYS / 2 {
                // Dropping a map of plain integers frees its memory in one piece.
                g.previous = std::mem::take(&mut g.current);
            }
            g.current.insert(
                key,
                known.unwrap_or(Bucket {
                    level: rate.capacity(),
                    at_ms: now_ms,
                }),
            );
        }
        let Some(bucket) = g.current.get_mut(&key) else {
            unreachable!("inserted above")
        };
        bucket.refill(rate, now_ms);
        if bucket.level >= TOKEN {
            bucket.level -= TOKEN;
            return Ok(());
        }
        let missing = TOKEN - bucket.level;
        let wait_ms = missing.div_ceil(u64::from(rate.per_second));
        Err(u32::try_from(wait_ms.div_ceil(1000).max(1)).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
impl<K> Limiter<K> {
    fn len(&self) -> usize {
        let g = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        g.current.len() + g.previous.len()
    }
}

/// The per-space limit, as the API answers it.
pub struct SpaceLimiter(Limiter<u32>);

impl SpaceLimiter {
    #[must_use]
    pub fn new(rate: Rate) -> Self {
        SpaceLimiter(Limiter::new(rate))
    }

    /// Counts one request of `space` at `now_ms`; `rate_limited` with its `Retry-After` past
    /// the limit.
    pub fn check(&self, space: u32, space_name: &str, now_ms: u64) -> Result<(), Error> {
        self.0.take(space, now_ms).map_err(|wait_s| {
            let Rate { per_second, burst } = self.0.rate;
            Error::new(
                Code::RateLimited,
                format!(
                    "space {space_name:?} is over its limit of {per_second} requests per second \
                     (bursts of {burst}); retry in {wait_s} s"
                ),
            )
            .retry_after(wait_s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Buckets refilled by this thread: the work a `take` did.
        pub(super) static REFILLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// With the table full of addresses that are all spending, a new address costs the same
    /// as any other: no pass over the whole table under the lock for each one.
    #[test]
    fn a_new_key_past_the_bound_costs_no_scan() {
        let l = Limiter::new(rate(1, 5));
        for k in 0..u32::try_from(MAX_KEYS).unwrap() {
            l.take(k, 0).unwrap();
        }
        REFILLS.with(|n| n.set(0));
        for k in 0..1000 {
            l.take(u32::MAX - k, 0).unwrap();
        }
        let work = REFILLS.with(std::cell::Cell::get);
        assert!(
            work <= 2 * 1000,
            "{work} buckets refilled for 1000 new keys"
        );
        // Still bounded, and a key seen lately keeps its bucket.
        assert!(l.len() <= MAX_KEYS);
        for _ in 0..4 {
            l.take(u32::MAX, 0).unwrap();
        }
        assert!(l.take(u32::MAX, 0).is_err());
    }

    fn rate(per_second: u32, burst: u32) -> Rate {
        Rate { per_second, burst }
    }

    #[test]
    fn a_full_bucket_allows_its_burst_then_the_rate() {
        let l = Limiter::new(rate(2, 5));
        for _ in 0..5 {
            l.take(1, 10_000).unwrap();
        }
        // Empty: the next token is half a second away, answered as 1 s.
        assert_eq!(l.take(1, 10_000), Err(1));
        // 499 ms: still less than a token; 500 ms: one token.
        assert_eq!(l.take(1, 10_499), Err(1));
        l.take(1, 10_500).unwrap();
        assert_eq!(l.take(1, 10_500), Err(1));
        // A long pause refills to the burst, never beyond it.
        for _ in 0..5 {
            l.take(1, 100_000).unwrap();
        }
        assert!(l.take(1, 100_000).is_err());
    }

    #[test]
    fn keys_have_their_own_buckets_and_a_rate_of_zero_is_off() {
        let l = Limiter::new(rate(1, 1));
        l.take(1, 0).unwrap();
        assert!(l.take(1, 0).is_err());
        l.take(2, 0).unwrap();
        let off = Limiter::new(Rate::OFF);
        assert!((0..10_000).all(|_| off.take(1, 0).is_ok()));
    }

    #[test]
    fn a_token_comes_back_at_the_rate_to_the_millisecond() {
        // 3 a second: a token every 333.3 ms, so one is back after 334 ms, not 333.
        let l = Limiter::new(rate(3, 1));
        l.take(1, 0).unwrap();
        assert_eq!(l.take(1, 333), Err(1));
        l.take(1, 334).unwrap();
        // Rates are whole tokens a second, so a wait is under a second: Retry-After is 1.
        assert_eq!(l.take(1, 334), Err(1));
    }

    #[test]
    fn the_space_limit_answers_rate_limited_with_retry_after() {
        let l = SpaceLimiter::new(rate(1, 2));
        l.check(1, "shop", 0).unwrap();
        l.check(1, "shop", 0).unwrap();
        let e = l.check(1, "shop", 0).unwrap_err();
        assert_eq!((e.code, e.retry_after_s), (Code::RateLimited, Some(1)));
        assert!(e.message.contains("\"shop\""), "{}", e.message);
        l.check(2, "other", 0).unwrap();
    }

    #[test]
    fn the_key_bound_keeps_the_keys_seen_lately() {
        let l = Limiter::new(rate(1, 1));
        for k in 0..u32::try_from(MAX_KEYS).unwrap() {
            l.take(k, 0).unwrap();
        }
        assert!(l.len() <= MAX_KEYS);
        // Both generations are remembered, spending ...
        let last = u32::try_from(MAX_KEYS).unwrap() - 1;
        assert!(l.take(last, 0).is_err());
        assert!(l.take(0, 0).is_err());
        // ... until a turn forgets the previous one, whose keys start full again.
        l.take(1, 0).unwrap();
        // A key seen again moves back into the current generation and survives the next turn.
        for k in 0..u32::try_from(MAX_KEYS / 2).unwrap() {
            let _ = l.take(u32::MAX - k, 0);
            if k % 1000 == 0 {
                assert!(l.take(last, 0).is_err(), "{k}");
            }
        }
        assert!(l.len() <= MAX_KEYS);
    }
}
