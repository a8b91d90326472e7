//! The admin page's sessions, the login form's token, and the throttle in front of its password
//! check.
//!
//! Sessions live in memory only: a session id is a credential, and keeping none on disk means
//! none is at rest; a restart logs everyone out, which costs each user one login. A
//! session ends after [`IDLE_MS`] without a request, and [`LIFETIME_MS`] after its login however
//! busy it is, so a stolen cookie cannot be kept alive for ever. Each
//! session has its own CSRF token, which every state-changing form carries, and remembers its
//! user as they logged in (a digest of their role, spaces and password hash): a user removed,
//! given another role or spaces, or given a new password (`tracker admin password`, say
//! because the old one leaked) has no session left at their next request.
//!
//! The login form comes before any session, so its token is a signed double submit: the form's
//! page sets a short-lived cookie (when it was issued, 128 random bits, and a tag: their HMAC
//! under a key that never leaves the process) and puts the whole cookie's HMAC under the same
//! key in the form. The cookie alone is checked from the request's head, before its body is
//! read (a post without one is answered without waiting for a body); a login is checked only
//! when cookie and form match and the cookie is younger than [`LOGIN_FORM_MS`]. Another site can make a browser
//! POST a password but can neither read nor set that cookie (`SameSite=Strict`, `HttpOnly`), and a
//! cookie it planted some other way has no HMAC it could compute. Nothing is kept per form, so
//! fetching login pages costs the server no memory.
//!
//! The throttle bounds how often the argon2id check runs, since each costs tens of milliseconds
//! of a core. Per client address (an IPv6 client by its /64): [`ATTEMPTS_PER_ADDRESS`] in
//! [`ADDRESS_WINDOW_MS`], then `429`; and for one user name from one address, fewer
//! ([`ATTEMPTS_PER_USER_AT_ADDRESS`]). The pair is bounded, never the user alone: a bound per
//! user would let anyone lock a user out by failing on purpose, whereas attempts on a user
//! from other addresses never count against their own. Overall, past [`ATTEMPTS_OVERALL`] a minute from all
//! addresses together, an address that has failed is refused and one that has not is only
//! slowed (by up to [`MAX_OVERALL_PAUSE_MS`]): so a flood of wrong passwords from many addresses
//! can neither take the CPU from ingest (the checks also run one at a time) nor lock the admin
//! out, whose right password from an address that has not failed is always checked. Attempts
//! are counted when they start, not when they fail, so a burst of concurrent attempts is
//! bounded too.
//!
//! A user with a second factor (or whom an owner requires to set one up) gets no session from
//! the password alone: a half-login ([`HalfLogins`]), in memory as sessions are, waits for the
//! code on its own form for [`HALF_LOGIN_MS`] and [`CODE_TRIES`] wrong codes at most; then the
//! password is asked again, and its throttle counts. The address's attempts are cleared only
//! when the whole login has succeeded, so that guessing codes costs password attempts too.
//!
//! What anyone can cause is logged at most once a minute per address ([`QuietWarnings`]), with
//! the count of lines left out, so refused forms cannot fill the log.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use hmac::{KeyInit as _, Mac as _};

use crate::domain::client::address_key;
/// The one comparison of tokens, in time that does not depend on where they differ.
pub use crate::domain::credential::same_token;
pub use crate::domain::warnings::QuietWarnings;

/// A session ends after this long without a request ...
pub const IDLE_MS: u64 = 12 * 60 * 60 * 1000;
/// ... and this long after its login, however busy.
pub const LIFETIME_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Sessions kept at most; the least recently used goes first.
const MAX_SESSIONS: usize = 1024;

/// Login attempts per client address within [`ADDRESS_WINDOW_MS`] (a success clears them).
pub const ATTEMPTS_PER_ADDRESS: usize = 5;
pub const ADDRESS_WINDOW_MS: u64 = 15 * 60 * 1000;
/// Login attempts for one user name from one client address within [`ADDRESS_WINDOW_MS`].
pub const ATTEMPTS_PER_USER_AT_ADDRESS: usize = 3;
/// The characters of a typed user name a pair is counted by (a name has at most 32).
const NAME_CHARS_KEPT: usize = 64;
/// Login attempts from all addresses together within [`OVERALL_WINDOW_MS`] that are checked at
/// once: with a check of about 20 ms of a core (BENCHMARKS.md, "The admin password check"),
/// about 0.6 s of one core a minute. Past it, attempts are slowed or refused (module docs).
pub const ATTEMPTS_OVERALL: usize = 30;
pub const OVERALL_WINDOW_MS: u64 = 60 * 1000;
/// The longest an attempt from an address that has not failed waits past the overall bound.
pub const MAX_OVERALL_PAUSE_MS: u64 = 5 * 1000;
/// Addresses remembered at most; the map cannot grow without bound under a spread-out flood.
const MAX_ADDRESSES: usize = 4096;

/// A half-login (password right, second factor not yet given) lasts this long ...
pub const HALF_LOGIN_MS: u64 = 5 * 60 * 1000;
/// ... and takes this many wrong codes.
pub const CODE_TRIES: u32 = 5;

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

    /// The tag of a cookie's `<issued>.<random>`: the first 128 bits of their HMAC, told apart
    /// from a form field (the HMAC of a whole cookie) by its prefix.
    fn cookie_tag(&self, issued_and_random: &str) -> HmacSha256 {
        self.keyed
            .clone()
            .chain_update("cookie ")
            .chain_update(issued_and_random)
    }

    /// A new pair for a login page served at `now_ms`.
    #[must_use]
    pub fn issue(&self, now_ms: u64) -> LoginForm {
        let body = format!("{now_ms}.{}", random_hex128());
        let tag = self.cookie_tag(&body).finalize().into_bytes();
        let cookie = format!("{body}.{}", hex::encode(&tag[..16]));
        let field = self.field_for(&cookie);
        LoginForm { cookie, field }
    }

    /// Whether a login's cookie alone is one this process issued less than [`LOGIN_FORM_MS`]
    /// before `now_ms`: what the request's head can show before its body is read.
    #[must_use]
    pub fn accepts_cookie(&self, cookie: Option<&str>, now_ms: u64) -> bool {
        let Some((body, tag)) = cookie.and_then(|c| c.rsplit_once('.')) else {
            return false;
        };
        let issued_ms = body
            .split_once('.')
            .and_then(|(issued, _)| issued.parse::<u64>().ok());
        let fresh = issued_ms.is_some_and(|t| t <= now_ms && now_ms - t < LOGIN_FORM_MS);
        fresh
            && tag.len() == 32
            && hex::decode(tag)
                .is_ok_and(|t| self.cookie_tag(body).verify_truncated_left(&t).is_ok())
    }

    /// Whether a login's cookie and form field are a pair this process issued less than
    /// [`LOGIN_FORM_MS`] before `now_ms`.
    #[must_use]
    pub fn accepts(&self, cookie: Option<&str>, field: Option<&str>, now_ms: u64) -> bool {
        let (Some(cookie), Some(field)) = (cookie, field) else {
            return false;
        };
        self.accepts_cookie(Some(cookie), now_ms)
            && hex::decode(field).is_ok_and(|tag| self.mac_of(cookie).verify_slice(&tag).is_ok())
    }
}

struct Session {
    user: String,
    csrf: String,
    started_ms: u64,
    last_used_ms: u64,
    /// `User::session_tag` of the user as they logged in: their role, spaces and password.
    user_tag: u128,
    /// The secret of a second factor being set up on the account page, until a code of it
    /// turns it on: kept here, never in a form.
    enrolling: Option<Vec<u8>>,
}

/// The logged-in sessions.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// A live session: its id (the cookie), its CSRF token and its user's name.
#[derive(Clone, Debug)]
pub struct Live {
    pub id: String,
    pub csrf: String,
    pub user: String,
}

impl Sessions {
    /// A new session of `user`, logged in as `user_tag` (`User::session_tag`) says.
    pub fn start(&self, now_ms: u64, user: &str, user_tag: u128) -> Live {
        let live = Live {
            id: random_hex128(),
            csrf: random_hex128(),
            user: user.to_owned(),
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
                user: live.user.clone(),
                csrf: live.csrf.clone(),
                started_ms: now_ms,
                last_used_ms: now_ms,
                user_tag,
                enrolling: None,
            },
        );
        live
    }

    /// The user of the session of cookie value `id`, if there is one: whose record
    /// [`Sessions::resume`] is then given the tag of.
    pub fn user_of(&self, id: &str) -> Option<String> {
        let map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(id).map(|s| s.user.clone())
    }

    /// The session of cookie value `id`, if it is live (used within [`IDLE_MS`], started within
    /// [`LIFETIME_MS`]) and its user is still as they logged in (`user_tag`; `None`: the user
    /// is gone); using it keeps it alive.
    pub fn resume(&self, id: &str, now_ms: u64, user_tag: Option<u128>) -> Option<Live> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let session = map.get_mut(id)?;
        if now_ms.saturating_sub(session.last_used_ms) >= IDLE_MS
            || now_ms.saturating_sub(session.started_ms) >= LIFETIME_MS
            || user_tag != Some(session.user_tag)
        {
            map.remove(id);
            return None;
        }
        session.last_used_ms = now_ms;
        Some(Live {
            id: id.to_owned(),
            csrf: session.csrf.clone(),
            user: session.user.clone(),
        })
    }

    /// Ends a session (logout).
    pub fn end(&self, id: &str) {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// The secret session `id` is setting up a second factor with: `new()`'s, kept until
    /// [`Sessions::enrolled`], so the page shows the same one however often it is loaded.
    pub fn enrolling(&self, id: &str, new: impl FnOnce() -> Vec<u8>) -> Option<Vec<u8>> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let session = map.get_mut(id)?;
        Some(session.enrolling.get_or_insert_with(new).clone())
    }

    /// Forgets session `id`'s secret being set up: turned on, or to start again.
    pub fn enrolled(&self, id: &str) {
        if let Some(session) = self
            .by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(id)
        {
            session.enrolling = None;
        }
    }
}

struct HalfLogin {
    user: String,
    user_tag: u128,
    csrf: String,
    started_ms: u64,
    tries_left: u32,
    enrolling: Option<Vec<u8>>,
}

/// Logins past their password that wait for the second factor.
#[derive(Default)]
pub struct HalfLogins {
    by_id: Mutex<HashMap<String, HalfLogin>>,
}

/// A half-login: its id (the cookie), its form's token, its user as they gave their password,
/// and the secret they are setting up, when they have no second factor yet.
#[derive(Clone)]
pub struct Waiting {
    pub id: String,
    pub csrf: String,
    pub user: String,
    pub user_tag: u128,
    pub enrolling: Option<Vec<u8>>,
}

impl HalfLogins {
    /// A new half-login of `user` (as `user_tag` says), setting up `enrolling` if given.
    pub fn start(
        &self,
        now_ms: u64,
        user: &str,
        user_tag: u128,
        enrolling: Option<Vec<u8>>,
    ) -> Waiting {
        let waiting = Waiting {
            id: random_hex128(),
            csrf: random_hex128(),
            user: user.to_owned(),
            user_tag,
            enrolling,
        };
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, h| now_ms.saturating_sub(h.started_ms) < HALF_LOGIN_MS);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, h)| h.started_ms)
                .map(|(id, _)| id.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            waiting.id.clone(),
            HalfLogin {
                user: waiting.user.clone(),
                user_tag,
                csrf: waiting.csrf.clone(),
                started_ms: now_ms,
                tries_left: CODE_TRIES,
                enrolling: waiting.enrolling.clone(),
            },
        );
        waiting
    }

    /// The half-login of cookie value `id`, while it is younger than [`HALF_LOGIN_MS`].
    pub fn resume(&self, id: &str, now_ms: u64) -> Option<Waiting> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let half = map.get(id)?;
        if now_ms.saturating_sub(half.started_ms) >= HALF_LOGIN_MS {
            map.remove(id);
            return None;
        }
        Some(Waiting {
            id: id.to_owned(),
            csrf: half.csrf.clone(),
            user: half.user.clone(),
            user_tag: half.user_tag,
            enrolling: half.enrolling.clone(),
        })
    }

    /// Counts a wrong code: whether the half-login may take another (else it has ended).
    pub fn wrong_code(&self, id: &str) -> bool {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(half) = map.get_mut(id) else {
            return false;
        };
        half.tries_left = half.tries_left.saturating_sub(1);
        if half.tries_left == 0 {
            map.remove(id);
            return false;
        }
        true
    }

    /// Ends a half-login: it became a session, or was given up.
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
    /// By address and the user name typed.
    by_pair: HashMap<(IpAddr, String), VecDeque<u64>>,
    overall: VecDeque<u64>,
}

/// The key of a user name typed from `address`.
fn pair_key(address: IpAddr, user: &str) -> (IpAddr, String) {
    (
        address_key(address),
        user.chars().take(NAME_CHARS_KEPT).collect(),
    )
}

/// Makes room in `map` for `key` when it is full: the entries of no attempt within the window
/// go, and if every one is recent (a flood from many addresses, which the overall bound
/// already holds), an arbitrary one.
fn room_for<K: std::hash::Hash + Eq + Clone>(
    map: &mut HashMap<K, VecDeque<u64>>,
    key: &K,
    now_ms: u64,
) {
    if map.len() < MAX_ADDRESSES || map.contains_key(key) {
        return;
    }
    map.retain(|_, times| times.back().is_some_and(|t| t + ADDRESS_WINDOW_MS > now_ms));
    if map.len() >= MAX_ADDRESSES
        && let Some(any) = map.keys().next().cloned()
    {
        map.remove(&any);
    }
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
    /// Counts an attempt for user name `user` from `address`: the milliseconds it waits before
    /// its check (0 unless the overall bound is reached), or a refusal with the seconds to wait.
    pub fn admit(&self, address: IpAddr, user: &str, now_ms: u64) -> Result<u64, u64> {
        let key = address_key(address);
        let pair = pair_key(address, user);
        let mut a = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        forget_old(&mut a.overall, now_ms, OVERALL_WINDOW_MS);
        room_for(&mut a.by_address, &key, now_ms);
        room_for(&mut a.by_pair, &pair, now_ms);
        let overall_first = a.overall.front().copied();
        let overall_full = a.overall.len() >= ATTEMPTS_OVERALL;
        let pair_times = a.by_pair.entry(pair.clone()).or_default();
        forget_old(pair_times, now_ms, ADDRESS_WINDOW_MS);
        if pair_times.len() >= ATTEMPTS_PER_USER_AT_ADDRESS {
            let first = pair_times.front().copied().unwrap_or(now_ms);
            return Err(wait_s(first + ADDRESS_WINDOW_MS, now_ms));
        }
        let times = a.by_address.entry(key).or_default();
        forget_old(times, now_ms, ADDRESS_WINDOW_MS);
        if times.len() >= ATTEMPTS_PER_ADDRESS {
            let first = times.front().copied().unwrap_or(now_ms);
            return Err(wait_s(first + ADDRESS_WINDOW_MS, now_ms));
        }
        let overall_until = overall_first.unwrap_or(now_ms) + OVERALL_WINDOW_MS;
        let pause_ms = match (overall_full, times.is_empty()) {
            (false, _) => 0,
            // Past the overall bound, an address with attempts of its own is the flood's.
            (true, false) => return Err(wait_s(overall_until, now_ms)),
            (true, true) => overall_until
                .saturating_sub(now_ms)
                .min(MAX_OVERALL_PAUSE_MS),
        };
        times.push_back(now_ms);
        a.overall.push_back(now_ms);
        a.by_pair.entry(pair).or_default().push_back(now_ms);
        Ok(pause_ms)
    }

    /// A successful login of `user` clears its address's attempts, and the pair's.
    pub fn succeeded(&self, address: IpAddr, user: &str) {
        let mut a = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        a.by_address.remove(&address_key(address));
        a.by_pair.remove(&pair_key(address, user));
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

    /// A user name of its own per attempt, so that only the address's bound is met.
    fn nth(i: usize) -> String {
        format!("user-{i}")
    }

    #[test]
    fn an_address_gets_its_attempts_then_waits_out_the_window() {
        let t = LoginThrottle::default();
        for i in 0..ATTEMPTS_PER_ADDRESS {
            t.admit(A, &nth(i), 1_000).unwrap();
        }
        let wait = t.admit(A, "anyone", 1_000).unwrap_err();
        assert_eq!(wait, ADDRESS_WINDOW_MS / 1000);
        // Another address is not held back by A's attempts.
        t.admit(B, "anyone", 1_000).unwrap();
        // Just inside the window: still refused; at its end: admitted.
        assert!(t.admit(A, "anyone", 1_000 + ADDRESS_WINDOW_MS - 1).is_err());
        t.admit(A, "anyone", 1_000 + ADDRESS_WINDOW_MS).unwrap();
    }

    /// The bound of one user from one address, which ends before the address's; attempts on
    /// the same user from elsewhere, or on another user from here, are not held back by it.
    #[test]
    fn a_user_at_one_address_gets_fewer_attempts_and_elsewhere_is_not_held_back() {
        let t = LoginThrottle::default();
        for _ in 0..ATTEMPTS_PER_USER_AT_ADDRESS {
            t.admit(A, "admin", 1_000).unwrap();
        }
        assert_eq!(
            t.admit(A, "admin", 1_000),
            Err(ADDRESS_WINDOW_MS / 1000),
            "the pair's bound"
        );
        t.admit(B, "admin", 1_000).unwrap();
        t.admit(A, "anna", 1_000).unwrap();
        assert!(t.admit(A, "admin", 1_000 + ADDRESS_WINDOW_MS - 1).is_err());
        t.admit(A, "admin", 1_000 + ADDRESS_WINDOW_MS).unwrap();
    }

    #[test]
    fn a_success_clears_the_address_and_the_pair() {
        let t = LoginThrottle::default();
        for i in 0..ATTEMPTS_PER_ADDRESS - ATTEMPTS_PER_USER_AT_ADDRESS {
            t.admit(A, &nth(i), 0).unwrap();
        }
        for _ in 0..ATTEMPTS_PER_USER_AT_ADDRESS {
            t.admit(A, "admin", 0).unwrap();
        }
        t.succeeded(A, "admin");
        for _ in 0..ATTEMPTS_PER_USER_AT_ADDRESS {
            t.admit(A, "admin", 0).unwrap();
        }
    }

    #[test]
    fn attempts_from_many_addresses_meet_the_overall_bound() {
        let t = LoginThrottle::default();
        for i in 0..ATTEMPTS_OVERALL {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(i).unwrap()));
            t.admit(address, "admin", 0).unwrap();
        }
        // Past the bound: an address that has not failed waits (at most the longest pause) ...
        assert_eq!(t.admit(B, "admin", 0), Ok(MAX_OVERALL_PAUSE_MS));
        assert_eq!(t.admit(A, "admin", OVERALL_WINDOW_MS - 1_000), Ok(1_000));
        // ... and one that has is refused until the window has room.
        assert_eq!(t.admit(B, "admin", 1), Err(OVERALL_WINDOW_MS / 1000));
        let failed = IpAddr::V4(std::net::Ipv4Addr::from(3));
        assert_eq!(t.admit(failed, "admin", 0), Err(OVERALL_WINDOW_MS / 1000));
        assert_eq!(t.admit(B, "admin", OVERALL_WINDOW_MS), Ok(0));
    }

    #[test]
    fn a_session_ends_at_its_lifetime_however_busy() {
        let s = Sessions::default();
        let live = s.start(0, "admin", 7);
        let mut now = 0;
        while now + IDLE_MS / 2 < LIFETIME_MS {
            now += IDLE_MS / 2;
            assert!(s.resume(&live.id, now, Some(7)).is_some(), "{now}");
        }
        assert!(s.resume(&live.id, LIFETIME_MS - 1, Some(7)).is_some());
        assert!(s.resume(&live.id, LIFETIME_MS, Some(7)).is_none());
    }

    #[test]
    fn the_login_cookie_alone_is_checked_from_the_head() {
        let forms = LoginForms::default();
        let form = forms.issue(1_000);
        assert!(forms.accepts_cookie(Some(&form.cookie), 1_000));
        assert!(forms.accepts_cookie(Some(&form.cookie), 1_000 + LOGIN_FORM_MS - 1));
        assert!(!forms.accepts_cookie(Some(&form.cookie), 1_000 + LOGIN_FORM_MS));
        // Made up by hand, or with its tag changed: not one of ours.
        assert!(!forms.accepts_cookie(Some("1000.00ff"), 1_000));
        let (body, tag) = form.cookie.rsplit_once('.').unwrap();
        let other = if tag.starts_with('0') { "1" } else { "0" };
        let changed = format!("{body}.{other}{}", &tag[1..]);
        assert!(!forms.accepts_cookie(Some(&changed), 1_000));
        assert!(!forms.accepts_cookie(None, 1_000));
        assert!(!LoginForms::default().accepts_cookie(Some(&form.cookie), 1_000));
    }

    #[test]
    fn a_session_lives_while_used_and_ends_idle_or_at_logout() {
        let s = Sessions::default();
        let live = s.start(0, "admin", 7);
        assert_eq!(live.id.len(), 32);
        assert_ne!(live.id, live.csrf);
        assert_eq!(s.user_of(&live.id).as_deref(), Some("admin"));
        assert!(s.resume(&live.id, IDLE_MS - 1, Some(7)).is_some());
        // Used at IDLE_MS - 1: alive until twice that.
        assert!(s.resume(&live.id, 2 * IDLE_MS - 2, Some(7)).is_some());
        assert!(s.resume(&live.id, 3 * IDLE_MS, Some(7)).is_none());
        let other = s.start(0, "admin", 7);
        s.end(&other.id);
        assert!(s.resume(&other.id, 1, Some(7)).is_none());
        assert!(s.resume("not-a-session", 1, Some(7)).is_none());
        // The user changed (another password or role): the session is over, also when the
        // user is as before again.
        let third = s.start(0, "admin", 7);
        assert!(s.resume(&third.id, 1, Some(8)).is_none());
        assert!(s.resume(&third.id, 2, Some(7)).is_none());
        // The user is gone.
        let fourth = s.start(0, "anna", 7);
        assert!(s.resume(&fourth.id, 1, None).is_none());
        assert!(s.resume(&fourth.id, 2, Some(7)).is_none());
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
    fn a_half_login_ends_after_its_minutes_or_its_wrong_codes() {
        let h = HalfLogins::default();
        let waiting = h.start(0, "anna", 7, None);
        assert_ne!(waiting.id, waiting.csrf);
        let resumed = h.resume(&waiting.id, HALF_LOGIN_MS - 1).unwrap();
        assert_eq!((resumed.user.as_str(), resumed.user_tag), ("anna", 7));
        assert!(h.resume(&waiting.id, HALF_LOGIN_MS).is_none());
        assert!(h.resume(&waiting.id, 0).is_none(), "ended for good");
        let waiting = h.start(0, "anna", 7, Some(vec![1, 2]));
        assert_eq!(
            h.resume(&waiting.id, 1).unwrap().enrolling,
            Some(vec![1, 2])
        );
        for _ in 1..CODE_TRIES {
            assert!(h.wrong_code(&waiting.id));
        }
        assert!(!h.wrong_code(&waiting.id));
        assert!(h.resume(&waiting.id, 1).is_none());
        let waiting = h.start(0, "anna", 7, None);
        h.end(&waiting.id);
        assert!(h.resume(&waiting.id, 1).is_none());
    }

    #[test]
    fn a_session_keeps_the_secret_it_sets_up_until_it_is_on() {
        let s = Sessions::default();
        let live = s.start(0, "anna", 7);
        let first = s.enrolling(&live.id, || vec![1]).unwrap();
        assert_eq!(s.enrolling(&live.id, || vec![2]), Some(first));
        s.enrolled(&live.id);
        assert_eq!(s.enrolling(&live.id, || vec![3]), Some(vec![3]));
        assert_eq!(s.enrolling("not-a-session", || vec![4]), None);
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
