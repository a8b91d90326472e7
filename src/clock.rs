//! Time, injectable: the server asks a [`Clock`], so tests move time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where "now" comes from, in epoch milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// A time as people read it: `2026-11-23T07:48:00Z` (UTC, to the second).
#[must_use]
pub fn rfc3339_s(ms: u64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A duration as people read it: `1 day`, `2 days 12h`, `1m 30s`. humantime's own form runs word
/// units into their number (`1day`); the short units (`h`, `m`, `s`, `ms`) keep theirs, as a
/// configuration file writes them.
#[must_use]
pub fn duration_text(d: std::time::Duration) -> String {
    humantime::format_duration(d)
        .to_string()
        .split(' ')
        .map(|part| match part.find(|c: char| c.is_ascii_alphabetic()) {
            Some(at) if part.len() - at > 2 => format!("{} {}", &part[..at], &part[at..]),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits until `clock` reads `due_ms` or later. The clock is read again at least once a second,
/// so a [`ManualClock`] moved by a test ends the wait within a second, and a wall clock that
/// jumps (a suspended VM, NTP) is followed instead of a timer set before the jump.
pub async fn sleep_until(clock: &dyn Clock, due_ms: u64) {
    const RECHECK_MS: u64 = 1000;
    loop {
        let now = clock.now_ms();
        if now >= due_ms {
            return;
        }
        let wait = (due_ms - now).min(RECHECK_MS);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
}

/// The operating system's wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that stands still until told to move; for tests.
#[derive(Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    #[must_use]
    pub fn new(now_ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(now_ms)))
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::duration_text;
    use std::time::Duration;

    #[test]
    fn a_duration_reads_with_its_word_units_spaced() {
        let text = |s| duration_text(Duration::from_secs(s));
        assert_eq!(text(86_400), "1 day");
        assert_eq!(text(2 * 86_400 + 12 * 3600), "2 days 12h");
        assert_eq!(text(3600), "1h");
        assert_eq!(text(90), "1m 30s");
        assert_eq!(text(0), "0s");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1s 500ms");
    }
}
