//! The per-space request limit (`rate_limit` requests per second, 0 = off).
//!
//! A fixed one-second window per space: cheap (one lock, one map entry per space), and a burst
//! of at most twice the limit across a window edge is acceptable for a guard against runaway
//! senders, which is all this is.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{Code, Error};

pub struct RateLimiter {
    per_second: u32,
    windows: Mutex<HashMap<u32, (u64, u32)>>,
}

impl RateLimiter {
    #[must_use]
    pub fn new(per_second: u32) -> Self {
        RateLimiter {
            per_second,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one request of `space` at `now_ms`; `rate_limited` past the limit.
    ///
    /// # Panics
    /// If a thread panicked while holding the limiter's lock.
    pub fn check(&self, space: u32, space_name: &str, now_ms: u64) -> Result<(), Error> {
        if self.per_second == 0 {
            return Ok(());
        }
        let second = now_ms / 1000;
        let mut windows = self.windows.lock().expect("rate limiter lock poisoned");
        let (start, count) = windows.entry(space).or_insert((second, 0));
        if *start != second {
            *start = second;
            *count = 0;
        }
        *count += 1;
        if *count > self.per_second {
            return Err(Error::new(
                Code::RateLimited,
                format!(
                    "space {space_name:?} is over its limit of {} requests per second; retry \
                     after the Retry-After header's seconds",
                    self.per_second
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_per_space_per_second() {
        let r = RateLimiter::new(2);
        assert!(r.check(1, "a", 1000).is_ok());
        assert!(r.check(1, "a", 1500).is_ok());
        assert_eq!(r.check(1, "a", 1999).unwrap_err().code, Code::RateLimited);
        assert!(
            r.check(2, "b", 1999).is_ok(),
            "another space has its own budget"
        );
        assert!(r.check(1, "a", 2000).is_ok(), "a new second starts afresh");
        let off = RateLimiter::new(0);
        assert!((0..10_000).all(|_| off.check(1, "a", 1).is_ok()));
    }
}
