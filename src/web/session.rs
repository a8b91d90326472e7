//! The admin page's sessions, the login form's token, and the throttle in front of its password
//! check.
//!
//! Sessions live in memory only: a session id is a credential, and keeping none on disk means
//! none is at rest; a restart logs everyone out, which for one admin user costs one login. Each
//! session has its own CSRF token, which every state-changing form carries, and remembers which
//! password hash it logged in under: a new password (`tracker admin password`, say because the
//! old one leaked) ends every session made with the old one.
//!
//! The login form comes before any session, so its token is a signed double submit: the form's
//! page sets a short-lived cookie (when it was issued, and 128 random bits) and puts the cookie's
//! HMAC under a key that never leaves the process in the form. A login is checked only when the
//! two match and the cookie is younger than [`LOGIN_FORM_MS`]. Another site can make a browser
//! POST a password but can neither read nor set that cookie (`SameSite=Strict`, `HttpOnly`), and a
//! cookie it planted some other way has no HMAC it could compute. Nothing is kept per form, so
//! fetching login pages costs the server no memory.
//!
//! The throttle bounds how often the argon2id check runs, since each costs tens of milliseconds
//! of a core: per client address, and overall, so that a flood of wrong passwords from many
//! addresses still cannot take the CPU from ingest. Attempts are counted when they start, not
//! when they fail, so a burst of concurrent attempts is bounded too.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use hmac::{KeyInit as _, Mac as _};
use subtle::ConstantTimeEq as _;

/// A session ends after this long without a request.
pub const IDLE_MS: u64 = 12 * 60 * 60 * 1000;
/// Sessions kept at most; the least recently used goes first.
const MAX_SESSIONS: usize = 1024;

/// Login attempts per client address within [`ADDRESS_WINDOW_MS`] (a success clears them).
pub const ATTEMPTS_PER_ADDRESS: usize = 5;
pub const ADDRESS_WINDOW_MS: u64 = 15 * 60 * 1000;
/// Login attempts from all addresses together within [`OVERALL_WINDOW_MS`]: with a check of
/// about 20 ms of a core (BENCHMARKS.md, "The admin password check"), at most about 0.6 s of one core a minute.
pub const ATTEMPTS_OVERALL: usize = 30;
pub const OVERALL_WINDOW_MS: u64 = 60 * 1000;
/// Addresses remembered at most; the map cannot grow without bound under a spread-out flood.
const MAX_ADDRESSES: usize = 4096;

/// A login form is accepted for this long after its page was served.
pub const LOGIN_FORM_MS: u64 = 60 * 60 * 1000;

/// 128 random bits as 32 lowercase hex digits.
fn random_hex128() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    hex::encode(bytes)
}

/// HMAC-SHA256 (RFC 2104), the login form's signature.
type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The login form's tokens: HMAC-SHA256 under a random 32-byte key, new at each start. The keyed
/// state is kept and cloned for each form, so the key's pads are hashed once per process.
pub struct LoginForms {
    keyed: HmacSha256,
}

impl Default for LoginForms {
    fn default() -> LoginForms {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random number generator failed");
        LoginForms::with_key(&key)
    }
}

/// A login form's pair: the cookie's value and the form field's.
pub struct LoginForm {
    pub cookie: String,
    pub field: String,
}

impl LoginForms {
    fn with_key(key: &[u8; 32]) -> LoginForms {
        LoginForms {
            keyed: HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length"),
        }
    }

    /// The HMAC of `cookie`, ready to finish or verify.
    fn mac_of(&self, cookie: &str) -> HmacSha256 {
        self.keyed.clone().chain_update(cookie)
    }

    /// The form field that goes with `cookie`: its HMAC, in hex.
    fn field_for(&self, cookie: &str) -> String {
        hex::encode(self.mac_of(cookie).finalize().into_bytes())
    }

    /// A new pair for a login page served at `now_ms`.
    #[must_use]
    pub fn issue(&self, now_ms: u64) -> LoginForm {
        let cookie = format!("{now_ms}.{}", random_hex128());
        let field = self.field_for(&cookie);
        LoginForm { cookie, field }
    }

    /// Whether a login's cookie and form field are a pair this process issued less than
    /// [`LOGIN_FORM_MS`] before `now_ms`.
    #[must_use]
    pub fn accepts(&self, cookie: Option<&str>, field: Option<&str>, now_ms: u64) -> bool {
        let (Some(cookie), Some(field)) = (cookie, field) else {
            return false;
        };
        let issued_ms = cookie
            .split_once('.')
            .and_then(|(issued, _)| issued.parse::<u64>().ok());
        let fresh = issued_ms.is_some_and(|t| t <= now_ms && now_ms - t < LOGIN_FORM_MS);
        fresh && hex::decode(field).is_ok_and(|tag| self.mac_of(cookie).verify_slice(&tag).is_ok())
    }
}

/// Compares two tokens in time that does not depend on where they differ (a different length
/// answers at once: token lengths are no secret).
#[must_use]
pub fn same_token(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

struct Session {
    csrf: String,
    last_used_ms: u64,
    /// [`password_tag`] of the hash the login was checked against.
    password_tag: u128,
}

/// A digest of the stored password hash, to tell whether it has changed since a login.
#[must_use]
pub fn password_tag(stored_hash: Option<&str>) -> u128 {
    use sha2::{Digest as _, Sha256};
    crate::domain::digest::first_128_bits(Sha256::new_with_prefix(stored_hash.unwrap_or("")))
}

/// The logged-in sessions.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// A live session: its id (the cookie) and its CSRF token.
#[derive(Clone, Debug)]
pub struct Live {
    pub id: String,
    pub csrf: String,
}

impl Sessions {
    /// A new session, logged in under the password hash of `password_tag`.
    pub fn start(&self, now_ms: u64, password_tag: u128) -> Live {
        let live = Live {
            id: random_hex128(),
            csrf: random_hex128(),
        };
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, s| now_ms.saturating_sub(s.last_used_ms) < IDLE_MS);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.last_used_ms)
                .map(|(id, _)| id.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            live.id.clone(),
            Session {
                csrf: live.csrf.clone(),
                last_used_ms: now_ms,
                password_tag,
            },
        );
        live
    }

    /// The session of cookie value `id`, if it is live and the password is still the one it
    /// logged in with (`password_tag`); using it keeps it alive.
    pub fn resume(&self, id: &str, now_ms: u64, password_tag: u128) -> Option<Live> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let session = map.get_mut(id)?;
        if now_ms.saturating_sub(session.last_used_ms) >= IDLE_MS
            || session.password_tag != password_tag
        {
            map.remove(id);
            return None;
        }
        session.last_used_ms = now_ms;
        Some(Live {
            id: id.to_owned(),
            csrf: session.csrf.clone(),
        })
    }

    /// Ends a session (logout).
    pub fn end(&self, id: &str) {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

#[derive(Default)]
struct Attempts {
    by_address: HashMap<IpAddr, VecDeque<u64>>,
    overall: VecDeque<u64>,
}

/// The login throttle.
#[derive(Default)]
pub struct LoginThrottle {
    attempts: Mutex<Attempts>,
}

/// Forgets the attempts a whole `window_ms` or more before `now_ms`: out of the window.
fn forget_old(times: &mut VecDeque<u64>, now_ms: u64, window_ms: u64) {
    while times.front().is_some_and(|t| t + window_ms <= now_ms) {
        times.pop_front();
    }
}

impl LoginThrottle {
    /// Counts an attempt from `address`, or refuses it with the seconds to wait.
    pub fn admit(&self, address: IpAddr, now_ms: u64) -> Result<(), u64> {
        let mut a = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        forget_old(&mut a.overall, now_ms, OVERALL_WINDOW_MS);
        if a.overall.len() >= ATTEMPTS_OVERALL {
            let first = a.overall.front().copied().unwrap_or(now_ms);
            return Err(wait_s(first + OVERALL_WINDOW_MS, now_ms));
        }
        if a.by_address.len() >= MAX_ADDRESSES && !a.by_address.contains_key(&address) {
            a.by_address
                .retain(|_, times| times.back().is_some_and(|t| t + ADDRESS_WINDOW_MS > now_ms));
            if a.by_address.len() >= MAX_ADDRESSES {
                // Every remembered address is recent: a flood from many addresses, which the
                // overall bound already holds; the newest address replaces an arbitrary one.
                if let Some(any) = a.by_address.keys().next().copied() {
                    a.by_address.remove(&any);
                }
            }
        }
        let times = a.by_address.entry(address).or_default();
        forget_old(times, now_ms, ADDRESS_WINDOW_MS);
        if times.len() >= ATTEMPTS_PER_ADDRESS {
            let first = times.front().copied().unwrap_or(now_ms);
            return Err(wait_s(first + ADDRESS_WINDOW_MS, now_ms));
        }
        times.push_back(now_ms);
        a.overall.push_back(now_ms);
        Ok(())
    }

    /// A successful login clears its address's attempts.
    pub fn succeeded(&self, address: IpAddr) {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_address
            .remove(&address);
    }
}

fn wait_s(until_ms: u64, now_ms: u64) -> u64 {
    until_ms.saturating_sub(now_ms).div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn an_address_gets_its_attempts_then_waits_out_the_window() {
        let t = LoginThrottle::default();
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            t.admit(A, 1_000).unwrap();
        }
        let wait = t.admit(A, 1_000).unwrap_err();
        assert_eq!(wait, ADDRESS_WINDOW_MS / 1000);
        // Another address is not held back by A's attempts.
        t.admit(B, 1_000).unwrap();
        // Just inside the window: still refused; at its end: admitted.
        assert!(t.admit(A, 1_000 + ADDRESS_WINDOW_MS - 1).is_err());
        t.admit(A, 1_000 + ADDRESS_WINDOW_MS).unwrap();
    }

    #[test]
    fn a_success_clears_the_address() {
        let t = LoginThrottle::default();
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            t.admit(A, 0).unwrap();
        }
        t.succeeded(A);
        t.admit(A, 0).unwrap();
    }

    #[test]
    fn attempts_from_many_addresses_meet_the_overall_bound() {
        let t = LoginThrottle::default();
        for i in 0..ATTEMPTS_OVERALL {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(i).unwrap()));
            t.admit(address, 0).unwrap();
        }
        assert_eq!(t.admit(B, 0), Err(OVERALL_WINDOW_MS / 1000));
        t.admit(B, OVERALL_WINDOW_MS).unwrap();
    }

    #[test]
    fn a_session_lives_while_used_and_ends_idle_or_at_logout() {
        let s = Sessions::default();
        let live = s.start(0, 7);
        assert_eq!(live.id.len(), 32);
        assert_ne!(live.id, live.csrf);
        assert!(s.resume(&live.id, IDLE_MS - 1, 7).is_some());
        // Used at IDLE_MS - 1: alive until twice that.
        assert!(s.resume(&live.id, 2 * IDLE_MS - 2, 7).is_some());
        assert!(s.resume(&live.id, 3 * IDLE_MS, 7).is_none());
        let other = s.start(0, 7);
        s.end(&other.id);
        assert!(s.resume(&other.id, 1, 7).is_none());
        assert!(s.resume("not-a-session", 1, 7).is_none());
        // Another password: the session is over, also when the old one comes back.
        let third = s.start(0, 7);
        assert!(s.resume(&third.id, 1, 8).is_none());
        assert!(s.resume(&third.id, 2, 7).is_none());
        assert_ne!(
            password_tag(Some("$argon2id$a")),
            password_tag(Some("$argon2id$b"))
        );
    }

    /// RFC 4231 test case 2: its 4-byte key ("Jefe") zero-padded to our 32 bytes is the same
    /// HMAC key, since HMAC pads every key shorter than the hash's block with zeros.
    #[test]
    fn the_login_field_is_hmac_sha256_of_the_cookie() {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            LoginForms::with_key(&key).field_for("what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_login_form_is_accepted_with_its_own_cookie_while_fresh() {
        let forms = LoginForms::default();
        let form = forms.issue(1_000);
        let at = |now| forms.accepts(Some(&form.cookie), Some(&form.field), now);
        assert!(at(1_000));
        assert!(at(1_000 + LOGIN_FORM_MS - 1));
        assert!(!at(1_000 + LOGIN_FORM_MS));
        // Issued in the future (a cookie made up by hand): refused.
        assert!(!at(999));
        // Missing either half, or halves of two different forms.
        let other = forms.issue(1_000);
        assert!(!forms.accepts(None, Some(&form.field), 1_000));
        assert!(!forms.accepts(Some(&form.cookie), None, 1_000));
        assert!(!forms.accepts(Some(&form.cookie), Some(&other.field), 1_000));
        // Its field cut short, or not hex at all.
        assert!(!forms.accepts(Some(&form.cookie), Some(&form.field[..62]), 1_000));
        assert!(!forms.accepts(Some(&form.cookie), Some("zz"), 1_000));
        // A cookie whose time was moved forward no longer matches its field.
        let moved = form.cookie.replacen("1000.", "2000.", 1);
        assert!(!forms.accepts(Some(&moved), Some(&form.field), 2_000));
        // Another process's key: its forms are not ours.
        let elsewhere = LoginForms::default().issue(1_000);
        assert!(!forms.accepts(Some(&elsewhere.cookie), Some(&elsewhere.field), 1_000));
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "ab"));
        assert!(!same_token("", "a"));
        assert!(same_token("", ""));
        // A difference in the last byte only, and in the first only.
        assert!(!same_token("0123456789abcdef", "0123456789abcdeF"));
        assert!(!same_token("0123456789abcdef", "1123456789abcdef"));
    }
}
