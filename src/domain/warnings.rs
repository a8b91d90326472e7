//! Warnings any client can cause (a refused login form, a refused conversions file, a refused
//! Telegram update): written at most once a minute per client address and kind, with the count
//! left out since the last, and with what the client chose (a name from the path) clipped and
//! escaped, so that no client can fill the disk through the log or write a line of its own into
//! it (`docs/security.md`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use crate::domain::client::address_key;

/// Addresses and kinds remembered at most; the map cannot grow without bound under a
/// spread-out flood.
const MAX_KEYS: usize = 4096;

/// The characters of a client's text a warning keeps; the rest is counted, not written.
pub const LOGGED_CHARS: usize = 64;

/// Warnings about what any client can cause (a refused login form, a wrong password): one line
/// per client address and kind a minute, which says how many were left out since the last.
#[derive(Default)]
pub struct QuietWarnings {
    /// By address and kind: when its last line was written, and the lines left out since.
    last: Mutex<HashMap<(IpAddr, &'static str), Written>>,
}

type Written = (u64, u64);

/// How often one address's warning of one kind is written.
pub const WARNING_INTERVAL_MS: u64 = 60 * 1000;

impl QuietWarnings {
    /// Whether to write the warning `what` about `address` now: `Some(n)`, with `n` the lines
    /// of it left out since the last one; `None` within [`WARNING_INTERVAL_MS`] of that.
    pub fn admit(&self, address: IpAddr, what: &'static str, now_ms: u64) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (address_key(address), what);
        if let Some((at, left_out)) = last.get_mut(&key) {
            if now_ms < *at + WARNING_INTERVAL_MS {
                *left_out += 1;
                return None;
            }
            let n = *left_out;
            *at = now_ms;
            *left_out = 0;
            return Some(n);
        }
        if last.len() >= MAX_KEYS {
            // A flood from many addresses: start over, which at worst writes a line again.
            last.clear();
        }
        last.insert(key, (now_ms, 0));
        Some(0)
    }
}

/// `text` as a warning may write it: its first [`LOGGED_CHARS`] characters, quoted, with every
/// control character escaped (a forged second line, a terminal's escape sequence), and how many
/// were left out.
#[must_use]
pub fn clipped(text: &str) -> String {
    let kept: String = text.chars().take(LOGGED_CHARS).collect();
    let mut out = format!("{kept:?}");
    let left_out = text.chars().count() - kept.chars().count();
    if left_out > 0 {
        let _ = write!(out, " (and {left_out} more characters)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn warnings_are_written_once_a_minute_per_address_and_kind() {
        let w = QuietWarnings::default();
        assert_eq!(w.admit(A, "form", 0), Some(0));
        assert_eq!(w.admit(A, "form", 1), None);
        assert_eq!(w.admit(A, "form", WARNING_INTERVAL_MS - 1), None);
        assert_eq!(w.admit(B, "form", 1), Some(0), "another address");
        assert_eq!(w.admit(A, "password", 1), Some(0), "another kind");
        assert_eq!(w.admit(A, "form", WARNING_INTERVAL_MS), Some(2));
        assert_eq!(w.admit(A, "form", 2 * WARNING_INTERVAL_MS), Some(0));
    }

    #[test]
    fn a_clients_text_is_clipped_and_escaped() {
        assert_eq!(clipped("shop"), "\"shop\"");
        assert_eq!(
            clipped("a\nWARN forged\u{1b}[2J"),
            "\"a\\nWARN forged\\u{1b}[2J\""
        );
        let just_inside = "x".repeat(LOGGED_CHARS);
        assert_eq!(clipped(&just_inside), format!("{just_inside:?}"));
        let just_outside = "x".repeat(LOGGED_CHARS + 1);
        assert_eq!(
            clipped(&just_outside),
            format!("{just_inside:?} (and 1 more characters)")
        );
    }
}
