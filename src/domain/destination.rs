//! Destinations and deliveries (`docs/api.md#destinations`): where a space's events are sent
//! on to (Meta's Conversions API, an affiliate postback, a signed webhook), the rules of their
//! fields, which events each one takes, and the states a delivery goes through.
//!
//! Every way in (`POST /destinations`, `tracker destination create`, the admin page) turns what
//! it was given into a [`NewDestination`] here, so a destination is checked by one set of rules.
//! The writer decides which destinations an event goes to with [`Destination::wants`], against
//! the [`Directory`] it holds in memory; the sender (`delivery/`) moves a delivery from state to
//! state with [`next_state`].

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::domain::event::EventKind;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// Where a destination sends its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Kind {
    /// Meta's Conversions API: `POST <graph_url>/<api_version>/<pixel_id>/events`.
    MetaCapi = 1,
    /// A `GET` of a URL template with the event's fields in its macros.
    Postback = 2,
    /// A `POST` of the event as the feed shows it, signed.
    Webhook = 3,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::MetaCapi, Kind::Postback, Kind::Webhook];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MetaCapi => "meta_capi",
            Kind::Postback => "postback",
            Kind::Webhook => "webhook",
        }
    }

    #[must_use]
    pub fn from_u8(n: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == n)
    }

    fn parse(text: &str) -> Result<Kind, Error> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "kind",
                    format!(
                        "kind is meta_capi, postback or webhook, got {}",
                        quoted(text)
                    ),
                )
            })
    }
}

/// A credential the tracker must be able to use (Meta's access token, a webhook's signing
/// secret): kept as it is, never printed by `Debug`, shown only by its last 4 characters.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The value itself: for the request that uses it, and for the store.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What answers and pages show: `…` and the last 4 characters.
    #[must_use]
    pub fn last4(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
        format!("…{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", self.last4())
    }
}

/// Meta's Conversions API: the pixel (dataset) and the token that may write to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub pixel_id: String,
    pub access_token: Secret,
    /// Sent as `test_event_code`: the events show in Events Manager's test tab only.
    pub test_event_code: Option<String>,
    pub api_version: String,
    /// Graph API's base address, without a trailing `/`.
    pub graph_url: String,
}

/// What a destination sends to, by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    MetaCapi(Meta),
    Postback { url: String },
    Webhook { url: String, signing_secret: Secret },
}

impl Target {
    #[must_use]
    pub fn kind(&self) -> Kind {
        match self {
            Target::MetaCapi(_) => Kind::MetaCapi,
            Target::Postback { .. } => Kind::Postback,
            Target::Webhook { .. } => Kind::Webhook,
        }
    }

    /// The address requests go to, as configured (a postback's with its macros).
    #[must_use]
    pub fn address(&self) -> &str {
        match self {
            Target::MetaCapi(m) => &m.graph_url,
            Target::Postback { url } | Target::Webhook { url, .. } => url,
        }
    }
}

/// The event kinds a destination takes, one bit each (`1 << (kind - 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSet(pub u8);

impl EventSet {
    pub const ALL: EventSet = EventSet(0b1111);

    #[must_use]
    pub fn contains(self, kind: EventKind) -> bool {
        self.0 & (1 << (kind as u8 - 1)) != 0
    }

    #[must_use]
    pub fn names(self) -> Vec<String> {
        EventKind::ALL
            .into_iter()
            .filter(|k| self.contains(*k))
            .map(|k| k.as_str().to_owned())
            .collect()
    }

    /// From event names: each one of the four, at least one.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<EventSet, Error> {
        let mut bits = 0;
        for name in names {
            let name = name.as_ref();
            let kind = EventKind::from_name(name).ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "events",
                    format!(
                        "events are contact, subscribed, registration and deposit, got {}",
                        quoted(name)
                    ),
                )
            })?;
            bits |= 1 << (kind as u8 - 1);
        }
        if bits == 0 {
            return Err(Error::field(
                Code::InvalidField,
                "events",
                "events must name at least one event kind (or be left out: all of them)",
            ));
        }
        Ok(EventSet(bits))
    }
}

/// A stored destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// Its number in the data file: what its deliveries are keyed by.
    pub no: u32,
    pub space: u32,
    pub name: String,
    pub events: EventSet,
    pub only_attributed: bool,
    pub target: Target,
    pub created_at_ms: u64,
}

impl Destination {
    /// Whether an event of `kind` goes to this destination: one of its kinds, and when it takes
    /// only attributed events, one with a click (for Meta, a click with an `fbclid`: without one
    /// Meta cannot match it to an ad).
    #[must_use]
    pub fn wants(&self, kind: EventKind, click: Option<ClickFacts>) -> bool {
        if !self.events.contains(kind) {
            return false;
        }
        if !self.only_attributed {
            return true;
        }
        match (self.target.kind(), click) {
            (_, None) => false,
            (Kind::MetaCapi, Some(c)) => c.has_fbclid,
            (_, Some(_)) => true,
        }
    }
}

/// What [`Destination::wants`] needs to know of an event's click.
#[derive(Clone, Copy, Debug)]
pub struct ClickFacts {
    pub has_fbclid: bool,
}

/// The live destinations of every space, in memory: what the writer looks an event's
/// destinations up in, and what the sender starts a task for. Replaced after each commit that
/// changes a destination, as the links' directory is.
#[derive(Default)]
pub struct Directory {
    by_space: RwLock<HashMap<u32, Arc<[Arc<Destination>]>>>,
}

impl Directory {
    pub fn replace(&self, destinations: Vec<Destination>) {
        let mut by_space: HashMap<u32, Vec<Arc<Destination>>> = HashMap::new();
        for d in destinations {
            by_space.entry(d.space).or_default().push(Arc::new(d));
        }
        let map = by_space
            .into_iter()
            .map(|(space, list)| (space, Arc::from(list)))
            .collect();
        *self
            .by_space
            .write()
            .unwrap_or_else(PoisonError::into_inner) = map;
    }

    /// The live destinations of `space` (none: an empty list, without allocating).
    #[must_use]
    pub fn of_space(&self, space: u32) -> Option<Arc<[Arc<Destination>]>> {
        self.by_space
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&space)
            .cloned()
    }

    /// Every live destination of every space.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Destination>> {
        self.by_space
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|list| list.iter().cloned())
            .collect()
    }
}

/// The state of one delivery (`docs/api.md#deliveries`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum State {
    /// Not tried yet (or tried, and the outcome not yet committed).
    Pending = 0,
    Delivered = 1,
    /// Failed, and tried again at `next_attempt_at_ms`.
    Retrying = 2,
    /// Refused for good, or still failing after `delivery_max_age`.
    Dead = 3,
    /// Its destination was removed before it was delivered.
    Cancelled = 4,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Pending,
        State::Delivered,
        State::Retrying,
        State::Dead,
        State::Cancelled,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Delivered => "delivered",
            State::Retrying => "retrying",
            State::Dead => "dead",
            State::Cancelled => "cancelled",
        }
    }

    #[must_use]
    pub fn from_u8(n: u8) -> Option<State> {
        State::ALL.into_iter().find(|s| *s as u8 == n)
    }

    /// A state as a query or body names it; the error names `field`.
    pub fn parse(text: &str, field: &'static str) -> Result<State, Error> {
        State::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    field,
                    format!(
                        "{field} is pending, delivered, retrying, dead or cancelled, got {}",
                        quoted(text)
                    ),
                )
            })
    }

    /// Whether the delivery may still be sent.
    #[must_use]
    pub fn is_open(self) -> bool {
        matches!(self, State::Pending | State::Retrying)
    }
}

/// How many of a destination's deliveries are in each state, indexed by `State as usize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts(pub [u64; 5]);

impl StateCounts {
    #[must_use]
    pub fn get(&self, state: State) -> u64 {
        self.0[state as usize]
    }

    /// Moves one delivery from `from` (`None`: a new one) to `to`.
    pub fn moved(&mut self, from: Option<State>, to: State) {
        if let Some(from) = from {
            self.0[from as usize] = self.0[from as usize].saturating_sub(1);
        }
        self.0[to as usize] += 1;
    }
}

impl Serialize for StateCounts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(5))?;
        for s in State::ALL {
            map.serialize_entry(s.as_str(), &self.get(s))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StateCounts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = HashMap::<String, u64>::deserialize(deserializer)?;
        let mut counts = StateCounts::default();
        for s in State::ALL {
            counts.0[s as usize] = map.get(s.as_str()).copied().unwrap_or(0);
        }
        Ok(counts)
    }
}

/// The first retry comes about this long after the first failure ...
pub const FIRST_RETRY_MS: u64 = 10_000;
/// ... each later one twice as long after the one before, and never more than this.
pub const MAX_RETRY_MS: u64 = 3_600_000;
/// How much of an answer is kept: enough to read an error, never a whole page.
pub const ANSWER_BYTES: usize = 300;

/// The pause before attempt `attempts + 1`, after `attempts` failed ones: 10 s doubling to at
/// most 1 h, spread by `jitter` (0..1) over 80% to 120% so that deliveries that failed together
/// do not all come back together; at least what the receiver asked for in `Retry-After`, itself
/// at most 1 h.
#[must_use]
pub fn retry_delay_ms(attempts: u32, jitter: f64, retry_after_ms: Option<u64>) -> u64 {
    let doubled = FIRST_RETRY_MS.saturating_mul(1 << attempts.saturating_sub(1).min(20));
    let base = doubled.min(MAX_RETRY_MS);
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_sign_loss,
        clippy::cast_possible_truncation
    )]
    let spread = (base as f64 * (0.8 + 0.4 * jitter.clamp(0.0, 1.0))) as u64;
    spread
        .min(MAX_RETRY_MS)
        .max(retry_after_ms.unwrap_or(0).min(MAX_RETRY_MS))
}

/// What one attempt at a delivery came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub inbox_id: u64,
    /// When the event was received: where `delivery_max_age` counts from, unless a retry asked
    /// by hand moved it.
    pub received_at_ms: u64,
    pub at_ms: u64,
    /// The answer's HTTP status; `None` when none came (refused, timed out, not sent).
    pub status: Option<u16>,
    /// The first [`ANSWER_BYTES`] of the answer, or what went wrong when none came.
    pub answer: String,
    pub outcome: Outcome,
    /// Seconds the receiver asked to wait (`Retry-After`), in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// 0..1, for [`retry_delay_ms`].
    pub jitter: f64,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Delivered,
    /// Worth another try: a timeout, a refused connection, `408`, `429`, `5xx`.
    Failed,
    /// Never worth another try: any other `4xx`, or an event the receiver cannot take.
    Refused,
}

/// What an answer's HTTP status means for the delivery: `2xx` delivered; `408`, `429` and
/// `5xx` worth another try; any other status refused for good (a `3xx` too: redirects are not
/// followed, since one could lead anywhere).
#[must_use]
pub fn outcome_of(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered,
        408 | 429 | 500..=599 => Outcome::Failed,
        _ => Outcome::Refused,
    }
}

/// A delivery's state after `attempt`, its attempts so far, and when it is next tried.
/// `since_ms` is where `delivery_max_age` counts from: a failure after that is `dead`.
#[must_use]
pub fn next_state(
    attempt: &Attempt,
    attempts: u32,
    since_ms: u64,
    max_age_ms: u64,
) -> (State, Option<u64>) {
    match attempt.outcome {
        Outcome::Delivered => (State::Delivered, None),
        Outcome::Refused => (State::Dead, None),
        Outcome::Failed => {
            let next = attempt.at_ms.saturating_add(retry_delay_ms(
                attempts,
                attempt.jitter,
                attempt.retry_after_ms,
            ));
            if next > since_ms.saturating_add(max_age_ms) {
                (State::Dead, None)
            } else {
                (State::Retrying, Some(next))
            }
        }
    }
}

/// The first [`ANSWER_BYTES`] of `text`, cut at a character boundary.
#[must_use]
pub fn answer_head(text: &str) -> String {
    let mut end = text.len().min(ANSWER_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Whether `ip` is an address a destination must not reach unless `allow_private_destinations`
/// is set: anything but a public unicast address. Loopback, the private ranges, link-local (the
/// cloud's metadata service at 169.254.169.254 among them), CGNAT's shared range, unspecified,
/// broadcast, multicast and reserved; in IPv6 also unique-local, link-local, and an IPv4 address
/// inside an IPv6 one (mapped, compatible, NAT64), judged as that IPv4 address.
#[must_use]
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => is_private_v6(v6),
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || a >= 240 // reserved
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_private_v4(v4);
    }
    let embedded_v4 = |hi: u16, lo: u16| {
        let [first, second] = hi.to_be_bytes();
        let [third, fourth] = lo.to_be_bytes();
        Ipv4Addr::new(first, second, third, fourth)
    };
    // IPv4-compatible (`::a.b.c.d`, deprecated) and NAT64 (`64:ff9b::a.b.c.d`).
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return is_private_v4(embedded_v4(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_private_v4(embedded_v4(s[6], s[7]));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local, deprecated
        || s[0] == 0x2001 && s[1] == 0x0db8 // documentation
}

/// The refusal of an address that is not public.
#[must_use]
pub fn private_address(field: &'static str, address: &str) -> Error {
    Error::field(
        Code::InvalidField,
        field,
        format!(
            "{field} points at {address}, a loopback, private or link-local address; \
             destinations must be public (set allow_private_destinations = true for private \
             networks and tests)"
        ),
    )
}

/// The longest URL (or URL template) a destination takes.
pub const MAX_URL_LEN: usize = 2048;

/// Checks a destination's URL: `https://` (or `http://` when private addresses are allowed),
/// a host, no user name or password, and, when its host is an IP address, a public one unless
/// `allow_private`. A host name is checked after it resolves, before each send.
pub fn check_url(field: &'static str, text: &str, allow_private: bool) -> Result<url::Url, Error> {
    let bad = |why: &str| {
        Error::field(
            Code::InvalidField,
            field,
            format!("{field} {why}, got {}", quoted(text)),
        )
    };
    if text.len() > MAX_URL_LEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(&format!(
            "must be at most {MAX_URL_LEN} visible ASCII characters"
        )));
    }
    let url = url::Url::parse(text).map_err(|e| bad(&format!("is not a URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => {
            return Err(bad(if allow_private {
                "must be an https:// or http:// URL"
            } else {
                "must be an https:// URL (http:// only with allow_private_destinations = true)"
            }));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not carry a user name or password"));
    }
    let ip = match url.host() {
        None => return Err(bad("must name a host")),
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None,
    };
    if let Some(ip) = ip {
        if !allow_private && is_private(ip) {
            return Err(private_address(field, &ip.to_string()));
        }
    }
    Ok(url)
}

/// The macros of a postback URL, each replaced percent-encoded, or empty where unknown.
pub const MACROS: [&str; 11] = [
    "uid",
    "event",
    "value",
    "currency",
    "eid",
    "inbox_id",
    "tg_id",
    "fbclid",
    "campaign_name",
    "link_slug",
    "occurred_at_ms",
];

/// `template` with each `{macro}` replaced by `value(macro)`, percent-encoded (everything but
/// `A-Z a-z 0-9 - . _ ~`), or by nothing when it has none. A brace that opens no macro is kept
/// as it is (the template was checked when the destination was made).
#[must_use]
pub fn fill_macros(template: &str, value: impl Fn(&str) -> Option<String>) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if MACROS.contains(&&after[..close]) => {
                if let Some(v) = value(&after[..close]) {
                    out.extend(utf8_percent_encode(&v, UNRESERVED));
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Checks a postback URL template: every `{name}` is one of [`MACROS`], and the URL with them
/// filled is a destination URL ([`check_url`]).
fn check_postback(text: &str, allow_private: bool) -> Result<(), Error> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name = after.find('}').map(|close| &after[..close]);
        match name {
            Some(name) if MACROS.contains(&name) => rest = &after[name.len() + 1..],
            _ => {
                let shown = name.map_or_else(|| after.to_owned(), |n| format!("{{{n}}}"));
                return Err(Error::field(
                    Code::InvalidField,
                    "url",
                    format!(
                        "url has {}, which is no macro; the macros are {}",
                        quoted(&shown),
                        MACROS.map(|m| format!("{{{m}}}")).join(", ")
                    ),
                ));
            }
        }
    }
    check_url(
        "url",
        &fill_macros(text, |_| Some("0".into())),
        allow_private,
    )?;
    Ok(())
}

/// The Graph API version used unless a destination names one.
pub const DEFAULT_API_VERSION: &str = "v25.0";
pub const DEFAULT_GRAPH_URL: &str = "https://graph.facebook.com";

/// A destination as given, checked; what the writer stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDestination {
    pub name: String,
    pub events: EventSet,
    pub only_attributed: bool,
    pub target: Target,
}

/// A destination's fields as every way in gives them, before they are checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DestinationFields {
    pub name: Option<String>,
    pub kind: Option<String>,
    /// Event names; `None`: all four.
    pub events: Option<Vec<String>>,
    pub only_attributed: Option<bool>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
    pub url: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DestinationBody<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    events: Option<&'a RawValue>,
    #[serde(borrow)]
    only_attributed: Option<&'a RawValue>,
    #[serde(borrow)]
    pixel_id: Option<&'a RawValue>,
    #[serde(borrow)]
    access_token: Option<&'a RawValue>,
    #[serde(borrow)]
    test_event_code: Option<&'a RawValue>,
    #[serde(borrow)]
    api_version: Option<&'a RawValue>,
    #[serde(borrow)]
    graph_url: Option<&'a RawValue>,
    #[serde(borrow)]
    url: Option<&'a RawValue>,
}

fn missing(field: &'static str, why: &str) -> Error {
    Error::field(
        Code::MissingField,
        field,
        format!("{field} is required {why}"),
    )
}

fn not_for(field: &'static str, kind: Kind) -> Error {
    Error::field(
        Code::InvalidField,
        field,
        format!("{field} is not a field of a {} destination", kind.as_str()),
    )
}

impl DestinationFields {
    /// Reads a `POST /destinations` body: each field of its JSON type, `null` as absent.
    pub fn from_json(body: &[u8]) -> Result<DestinationFields, Error> {
        let b: DestinationBody = input::parse_body(body)?;
        let text = |name: &'static str, v: Option<&RawValue>| -> Result<Option<String>, Error> {
            match v {
                Some(raw) if raw.get() != "null" => {
                    input::json_string(raw, name).map(|s| Some(s).filter(|t| !t.is_empty()))
                }
                _ => Ok(None),
            }
        };
        let events = match b.events {
            Some(raw) if raw.get() != "null" => Some(
                serde_json::from_str::<Vec<String>>(raw.get())
                    .map_err(|_| input::wrong_type("events", "an array of event names", raw))?,
            ),
            _ => None,
        };
        let only_attributed = match b.only_attributed {
            Some(raw) if raw.get() != "null" => Some(input::json_bool(raw, "only_attributed")?),
            _ => None,
        };
        Ok(DestinationFields {
            name: text("name", b.name)?,
            kind: text("kind", b.kind)?,
            events,
            only_attributed,
            pixel_id: text("pixel_id", b.pixel_id)?,
            access_token: text("access_token", b.access_token)?,
            test_event_code: text("test_event_code", b.test_event_code)?,
            api_version: text("api_version", b.api_version)?,
            graph_url: text("graph_url", b.graph_url)?,
            url: text("url", b.url)?,
        })
    }

    /// Checks every field by its kind's rules. A webhook gets its signing secret here.
    pub fn check(mut self, allow_private: bool) -> Result<NewDestination, Error> {
        let name = self
            .name
            .take()
            .ok_or_else(|| missing("name", "(a-z, 0-9 and '-')"))?;
        check_name(&name)?;
        let kind = Kind::parse(
            &self
                .kind
                .take()
                .ok_or_else(|| missing("kind", "(meta_capi, postback or webhook)"))?,
        )?;
        let events = match &self.events {
            None => EventSet::ALL,
            Some(names) => EventSet::parse(names)?,
        };
        let meta_fields = [
            ("pixel_id", self.pixel_id.is_some()),
            ("access_token", self.access_token.is_some()),
            ("test_event_code", self.test_event_code.is_some()),
            ("api_version", self.api_version.is_some()),
            ("graph_url", self.graph_url.is_some()),
        ];
        let only_attributed = self.only_attributed;
        let target = if kind == Kind::MetaCapi {
            if self.url.is_some() {
                return Err(not_for("url", kind));
            }
            Target::MetaCapi(meta(self, allow_private)?)
        } else {
            if let Some((field, _)) = meta_fields.iter().find(|(_, given)| *given) {
                return Err(not_for(field, kind));
            }
            let url = self
                .url
                .ok_or_else(|| missing("url", "(where the events are sent)"))?;
            if kind == Kind::Postback {
                check_postback(&url, allow_private)?;
                Target::Postback { url }
            } else {
                check_url("url", &url, allow_private)?;
                Target::Webhook {
                    url,
                    signing_secret: Secret::new(format!(
                        "trk_ws_{}",
                        crate::domain::credential::random_id()
                    )),
                }
            }
        };
        Ok(NewDestination {
            name,
            events,
            // A webhook feeds the team's own systems, which want every event; Meta and an
            // affiliate network can use only those they can match to a click of theirs.
            only_attributed: only_attributed.unwrap_or(kind != Kind::Webhook),
            target,
        })
    }
}

/// The rule of a destination's name: that of a space, `[a-z0-9][a-z0-9-]{0,31}`.
pub fn check_name(name: &str) -> Result<(), Error> {
    if input::is_lowercase_name(name) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "name",
            format!(
                "a destination's name is 1 to 32 of a-z, 0-9 and '-', not starting with '-'; got {}",
                quoted(name)
            ),
        ))
    }
}

fn meta(f: DestinationFields, allow_private: bool) -> Result<Meta, Error> {
    let invalid = |field: &'static str, why: String| Error::field(Code::InvalidField, field, why);
    let pixel_id = f
        .pixel_id
        .ok_or_else(|| missing("pixel_id", "(the Meta pixel or dataset id, digits)"))?;
    if !(1..=32).contains(&pixel_id.len()) || !pixel_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            "pixel_id",
            format!("pixel_id is 1 to 32 digits, got {}", quoted(&pixel_id)),
        ));
    }
    let access_token = f.access_token.ok_or_else(|| {
        missing(
            "access_token",
            "(a Conversions API access token from Events Manager)",
        )
    })?;
    if access_token.len() > 1024 || !access_token.bytes().all(|b| b.is_ascii_graphic()) {
        // Never quoted: it is a credential.
        return Err(invalid(
            "access_token",
            "access_token is at most 1024 visible ASCII characters".into(),
        ));
    }
    if let Some(code) = &f.test_event_code {
        if code.len() > 64 || !code.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(invalid(
                "test_event_code",
                format!(
                    "test_event_code is 1 to 64 letters and digits (TEST12345), got {}",
                    quoted(code)
                ),
            ));
        }
    }
    let api_version = f
        .api_version
        .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
    let version_ok = api_version
        .strip_prefix('v')
        .and_then(|v| v.split_once('.'))
        .is_some_and(|(major, minor)| {
            [major, minor]
                .iter()
                .all(|n| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
        });
    if !version_ok {
        return Err(invalid(
            "api_version",
            format!(
                "api_version is a Graph API version such as {DEFAULT_API_VERSION}, got {}",
                quoted(&api_version)
            ),
        ));
    }
    let graph_url = f.graph_url.unwrap_or_else(|| DEFAULT_GRAPH_URL.to_owned());
    let parsed = check_url("graph_url", &graph_url, allow_private)?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(
            "graph_url",
            format!(
                "graph_url is a base address without a query, got {}",
                quoted(&graph_url)
            ),
        ));
    }
    Ok(Meta {
        pixel_id,
        access_token: Secret::new(access_token),
        test_event_code: f.test_event_code,
        api_version,
        graph_url: graph_url.trim_end_matches('/').to_owned(),
    })
}

/// A destination's last failure, as its list shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    pub at_ms: u64,
    pub inbox_id: Option<String>,
    pub status: Option<u16>,
    pub answer: String,
}

/// A destination as answers show it: never its access token (its last 4 characters only), and
/// its signing secret only in the answer that created it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestinationView {
    pub name: String,
    pub kind: Kind,
    pub events: Vec<String>,
    pub only_attributed: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pixel_id: Option<String>,
    /// `…` and the token's last 4 characters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub access_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub test_event_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub graph_url: Option<String>,
    /// Only in the answer that created a webhook: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signing_secret: Option<String>,
    pub created_at_ms: u64,
    pub deliveries: StateCounts,
    pub last_error: Option<LastError>,
}

impl DestinationView {
    #[must_use]
    pub fn new(d: &Destination, deliveries: StateCounts, last_error: Option<LastError>) -> Self {
        let mut view = DestinationView {
            name: d.name.clone(),
            kind: d.target.kind(),
            events: d.events.names(),
            only_attributed: d.only_attributed,
            url: None,
            pixel_id: None,
            access_token: None,
            test_event_code: None,
            api_version: None,
            graph_url: None,
            signing_secret: None,
            created_at_ms: d.created_at_ms,
            deliveries,
            last_error,
        };
        match &d.target {
            Target::MetaCapi(m) => {
                view.pixel_id = Some(m.pixel_id.clone());
                view.access_token = Some(m.access_token.last4());
                view.test_event_code.clone_from(&m.test_event_code);
                view.api_version = Some(m.api_version.clone());
                view.graph_url = Some(m.graph_url.clone());
            }
            Target::Postback { url } | Target::Webhook { url, .. } => view.url = Some(url.clone()),
        }
        view
    }
}

/// One delivery as `GET /deliveries` shows it: never a credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    pub inbox_id: String,
    pub destination: String,
    pub state: State,
    pub attempts: u32,
    pub last_attempt_at_ms: Option<u64>,
    pub next_attempt_at_ms: Option<u64>,
    pub last_status: Option<u16>,
    pub last_answer: Option<String>,
}

/// The most deliveries one `GET /deliveries` answers, and how many unless asked.
pub const MAX_DELIVERIES_PAGE: usize = 1000;
pub const DEFAULT_DELIVERIES_PAGE: usize = 100;

/// What `GET /deliveries` asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryQuery {
    pub destination: Option<String>,
    pub state: Option<State>,
    pub limit: usize,
}

impl DeliveryQuery {
    /// From the query's `destination`, `state` and `limit` (absent: `None`).
    pub fn parse(
        destination: Option<&str>,
        state: Option<&str>,
        limit: Option<&str>,
    ) -> Result<DeliveryQuery, Error> {
        if let Some(d) = destination {
            check_name(d).map_err(|mut e| {
                e.field = Some("destination");
                e
            })?;
        }
        let limit = match limit {
            None => DEFAULT_DELIVERIES_PAGE,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_DELIVERIES_PAGE).contains(n))
                .ok_or_else(|| {
                    Error::field(
                        Code::InvalidField,
                        "limit",
                        format!(
                            "limit must be a whole number from 1 to {MAX_DELIVERIES_PAGE}, got {}",
                            quoted(text)
                        ),
                    )
                })?,
        };
        Ok(DeliveryQuery {
            destination: destination.map(str::to_owned),
            state: state.map(|s| State::parse(s, "state")).transpose()?,
            limit,
        })
    }
}

/// What `POST /deliveries/retry` asks: the dead deliveries of one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryRequest {
    pub destination: String,
    pub state: State,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryBody<'a> {
    #[serde(borrow)]
    destination: Option<&'a RawValue>,
    #[serde(borrow)]
    state: Option<&'a RawValue>,
}

impl RetryRequest {
    /// Reads a `POST /deliveries/retry` body: `destination` required, `state` `"dead"` (the
    /// default).
    pub fn from_json(body: &[u8]) -> Result<RetryRequest, Error> {
        let b: RetryBody = input::parse_body(body)?;
        let destination = match b.destination {
            Some(raw) if raw.get() != "null" => input::json_string(raw, "destination")?,
            _ => String::new(),
        };
        if destination.is_empty() {
            return Err(missing("destination", "(the name of the destination)"));
        }
        check_name(&destination).map_err(|mut e| {
            e.field = Some("destination");
            e
        })?;
        let state = match b.state {
            Some(raw) if raw.get() != "null" => {
                State::parse(&input::json_string(raw, "state")?, "state")?
            }
            _ => State::Dead,
        };
        Ok(RetryRequest { destination, state })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(kind: &str) -> DestinationFields {
        DestinationFields {
            name: Some("meta".into()),
            kind: Some(kind.into()),
            pixel_id: (kind == "meta_capi").then(|| "1234567890".into()),
            access_token: (kind == "meta_capi").then(|| "EAAB-token-abcd".into()),
            url: (kind != "meta_capi").then(|| "https://example.com/pb?c={uid}".into()),
            ..DestinationFields::default()
        }
    }

    #[test]
    fn private_addresses_are_refused_and_public_ones_are_not() {
        for private in [
            "127.0.0.1",
            "127.255.0.1",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::127.0.0.1",
        ] {
            assert!(is_private(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "9.255.255.255",
            "11.0.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.167.255.255",
            "192.169.0.1",
            "169.253.255.255",
            "169.255.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "223.255.255.255",
            "2a03:2880:f12f:83:face:b00c:0:25de",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!is_private(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn urls_are_https_with_a_public_host() {
        assert!(check_url("url", "https://example.com/x", false).is_ok());
        assert!(check_url("url", "https://8.8.8.8/x", false).is_ok());
        for (bad, says) in [
            ("http://example.com/x", "https://"),
            ("ftp://example.com/x", "https://"),
            ("https://127.0.0.1/x", "loopback"),
            ("https://10.1.2.3/x", "loopback"),
            ("https://169.254.169.254/latest", "loopback"),
            ("https://[::1]/x", "loopback"),
            ("https://[::ffff:7f00:1]/x", "loopback"),
            ("https://user:pw@example.com/x", "user name"),
            ("not a url", "visible ASCII"),
            ("https://", "host"),
        ] {
            let e = check_url("url", bad, false).unwrap_err();
            assert_eq!(e.field, Some("url"), "{bad}");
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
        assert!(check_url("url", "http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url("url", "https://[::1]/x", true).is_ok());
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN - 20));
        assert_eq!(long.len(), MAX_URL_LEN);
        assert!(check_url("url", &long, false).is_ok());
        assert!(check_url("url", &format!("{long}a"), false).is_err());
    }

    #[test]
    fn macros_are_filled_percent_encoded() {
        let filled = fill_macros(
            "https://n.example/pb?s={uid}&e={event}&v={value}&x={eid}&c={campaign_name}&z={tg_id}&k={x}",
            |m| match m {
                "uid" => Some("abc".into()),
                "event" => Some("deposit".into()),
                "value" => Some("12.50".into()),
                "eid" => Some("a&b=c d".into()),
                "campaign_name" => Some("Осень/50%".into()),
                _ => None,
            },
        );
        assert_eq!(
            filled,
            "https://n.example/pb?s=abc&e=deposit&v=12.50&x=a%26b%3Dc%20d\
             &c=%D0%9E%D1%81%D0%B5%D0%BD%D1%8C%2F50%25&z=&k={x}"
        );
    }

    #[test]
    fn a_postback_takes_only_known_macros() {
        let mut f = fields("postback");
        f.url = Some("https://n.example/pb?s={uid}&t={tid}".into());
        let e = f.check(false).unwrap_err();
        assert_eq!(e.field, Some("url"));
        assert!(e.message.contains("{tid}"), "{}", e.message);
        let mut f = fields("postback");
        f.url = Some("https://n.example/pb?s={uid".into());
        assert_eq!(f.check(false).unwrap_err().field, Some("url"));
        let mut f = fields("postback");
        f.url = Some(format!(
            "https://n.example/pb?{}",
            MACROS.map(|m| format!("{m}={{{m}}}")).join("&")
        ));
        assert!(f.check(false).is_ok());
    }

    #[test]
    fn each_kind_takes_its_own_fields() {
        let m = fields("meta_capi").check(false).unwrap();
        assert!(m.only_attributed);
        let Target::MetaCapi(meta) = &m.target else {
            panic!("{m:?}")
        };
        assert_eq!(meta.api_version, DEFAULT_API_VERSION);
        assert_eq!(meta.graph_url, DEFAULT_GRAPH_URL);
        assert_eq!(meta.access_token.last4(), "…abcd");
        assert!(!format!("{m:?}").contains("EAAB"), "{m:?}");
        let w = fields("webhook").check(false).unwrap();
        assert!(!w.only_attributed);
        let Target::Webhook { signing_secret, .. } = &w.target else {
            panic!("{w:?}")
        };
        assert!(signing_secret.expose().starts_with("trk_ws_"));
        let mut postback_with_pixel = fields("postback");
        postback_with_pixel.pixel_id = Some("1".into());
        assert_eq!(
            postback_with_pixel.check(false).unwrap_err().field,
            Some("pixel_id")
        );
        let mut meta_with_url = fields("meta_capi");
        meta_with_url.url = Some("https://x.example".into());
        assert_eq!(meta_with_url.check(false).unwrap_err().field, Some("url"));
        for (field, value) in [
            ("pixel_id", "12a"),
            ("pixel_id", &"1".repeat(33)),
            ("test_event_code", "TEST 1"),
            ("api_version", "25.0"),
            ("api_version", "v25"),
            ("graph_url", "http://graph.example"),
        ] {
            let mut f = fields("meta_capi");
            let v = Some(value.to_owned());
            match field {
                "pixel_id" => f.pixel_id = v,
                "test_event_code" => f.test_event_code = v,
                "api_version" => f.api_version = v,
                _ => f.graph_url = v,
            }
            assert_eq!(f.check(false).unwrap_err().field, Some(field), "{value}");
        }
        let mut ok = fields("meta_capi");
        ok.pixel_id = Some("1".repeat(32));
        ok.api_version = Some("v9.0".into());
        ok.test_event_code = Some("TEST12345".into());
        assert!(ok.check(false).is_ok());
    }

    #[test]
    fn names_and_events_have_rules() {
        let mut f = fields("webhook");
        f.name = Some("Bad Name".into());
        assert_eq!(f.check(false).unwrap_err().field, Some("name"));
        let mut f = fields("webhook");
        f.name = Some("a".repeat(33));
        assert_eq!(f.check(false).unwrap_err().field, Some("name"));
        let mut f = fields("webhook");
        f.name = Some("a".repeat(32));
        assert!(f.check(false).is_ok());
        assert_eq!(
            EventSet::parse(&["deposit", "contact"]).unwrap().names(),
            ["contact", "deposit"]
        );
        assert_eq!(
            EventSet::parse::<&str>(&[]).unwrap_err().field,
            Some("events")
        );
        assert_eq!(
            EventSet::parse(&["purchase"]).unwrap_err().field,
            Some("events")
        );
    }

    #[test]
    fn meta_takes_only_events_with_an_fbclid_unless_told_otherwise() {
        let mut d = Destination {
            no: 1,
            space: 1,
            name: "m".into(),
            events: EventSet::parse(&["deposit"]).unwrap(),
            only_attributed: true,
            target: fields("meta_capi").check(false).unwrap().target,
            created_at_ms: 0,
        };
        let with = Some(ClickFacts { has_fbclid: true });
        let without = Some(ClickFacts { has_fbclid: false });
        assert!(d.wants(EventKind::Deposit, with));
        assert!(!d.wants(EventKind::Contact, with));
        assert!(!d.wants(EventKind::Deposit, without));
        assert!(!d.wants(EventKind::Deposit, None));
        d.only_attributed = false;
        assert!(d.wants(EventKind::Deposit, None));
        d.target = fields("postback").check(false).unwrap().target;
        d.only_attributed = true;
        assert!(d.wants(EventKind::Deposit, without));
        assert!(!d.wants(EventKind::Deposit, None));
    }

    #[test]
    fn retries_back_off_from_10_s_to_1_h() {
        assert_eq!(retry_delay_ms(1, 0.5, None), 10_000);
        assert_eq!(retry_delay_ms(2, 0.5, None), 20_000);
        assert_eq!(retry_delay_ms(1, 0.0, None), 8_000);
        assert_eq!(retry_delay_ms(1, 1.0, None), 12_000);
        assert_eq!(retry_delay_ms(9, 0.5, None), 2_560_000);
        assert_eq!(retry_delay_ms(10, 0.5, None), MAX_RETRY_MS);
        assert_eq!(retry_delay_ms(40, 1.0, None), MAX_RETRY_MS);
        assert_eq!(retry_delay_ms(1, 0.5, Some(120_000)), 120_000);
        assert_eq!(retry_delay_ms(1, 0.5, Some(9_000)), 10_000);
        assert_eq!(retry_delay_ms(1, 0.5, Some(86_400_000)), MAX_RETRY_MS);
    }

    #[test]
    fn statuses_decide_outcomes_and_age_makes_a_failure_dead() {
        assert_eq!(outcome_of(200), Outcome::Delivered);
        assert_eq!(outcome_of(299), Outcome::Delivered);
        assert_eq!(outcome_of(408), Outcome::Failed);
        assert_eq!(outcome_of(429), Outcome::Failed);
        assert_eq!(outcome_of(500), Outcome::Failed);
        assert_eq!(outcome_of(400), Outcome::Refused);
        assert_eq!(outcome_of(404), Outcome::Refused);
        assert_eq!(outcome_of(302), Outcome::Refused);
        let attempt = Attempt {
            inbox_id: 1,
            received_at_ms: 0,
            at_ms: 1_000,
            status: Some(500),
            answer: String::new(),
            outcome: Outcome::Failed,
            retry_after_ms: None,
            jitter: 0.5,
        };
        assert_eq!(
            next_state(&attempt, 1, 0, 11_000),
            (State::Retrying, Some(11_000))
        );
        assert_eq!(next_state(&attempt, 1, 0, 10_999), (State::Dead, None));
    }

    #[test]
    fn answers_are_cut_at_a_character() {
        assert_eq!(answer_head("ok"), "ok");
        let long = "é".repeat(200);
        let head = answer_head(&long);
        assert_eq!(head.len(), ANSWER_BYTES);
        let odd = format!("a{long}");
        assert_eq!(answer_head(&odd).len(), ANSWER_BYTES - 1);
    }
}
