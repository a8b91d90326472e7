//! Conversion events: every field rule (`docs/api.md#field-rules`), for `POST /events` and `GET /e`.
//!
//! Both endpoints turn their request into an [`EventInput`] (the same fields, under the names
//! that endpoint uses) and call [`validate`]; no other code decides whether an event is valid.
//! A `uid` follows the one uid rule (`domain::uid`), a Telegram id the one rule of bindings
//! (`click::parse_tg_id`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::domain::click;
use crate::domain::codes::stored_codes;
use crate::domain::decimal::Decimal;
use crate::domain::input::{self, Query, json_number_text, quoted};
use crate::domain::uid;
use crate::error::{Code, Error};

stored_codes! {
    /// The four canonical events. The discriminants are stored on disk; never renumber them.
    #[derive(Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum EventKind {
        Contact = 1 => "contact",
        Subscribed = 2 => "subscribed",
        Registration = 3 => "registration",
        Deposit = 4 => "deposit",
    }
}

impl EventKind {
    #[must_use]
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The bounds of the event rules that come from configuration.
#[derive(Clone, Debug)]
pub struct EventRules {
    pub default_currency: String,
    pub max_event_age_ms: u64,
    pub max_clock_skew_ms: u64,
}

/// How far from now a dated input may lie: `max_age_ms` into the past, `max_skew_ms` into the
/// future (a clock ahead of this server's). The one bound of an event's times and of a Mini
/// App's `auth_date`.
#[derive(Clone, Copy, Debug)]
pub struct Freshness {
    pub now_ms: u64,
    pub max_age_ms: u64,
    pub max_skew_ms: u64,
}

/// Which side of its [`Freshness`] a moment falls out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stale {
    TooOld,
    Ahead,
}

impl Freshness {
    /// Whether `ms` lies within the bound, both ends included.
    ///
    /// # Errors
    /// [`Stale::TooOld`] before `now - max_age_ms`, [`Stale::Ahead`] after `now + max_skew_ms`.
    pub fn check(self, ms: u64) -> Result<(), Stale> {
        if ms < self.now_ms.saturating_sub(self.max_age_ms) {
            Err(Stale::TooOld)
        } else if ms > self.now_ms.saturating_add(self.max_skew_ms) {
            Err(Stale::Ahead)
        } else {
            Ok(())
        }
    }
}

/// An event that passed every rule, ready to be deduplicated and stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidEvent {
    pub kind: EventKind,
    pub uid: Option<String>,
    /// The Telegram user the sender named; without a `uid`, the event is attributed to one of
    /// the user's bound clicks when it is stored.
    pub tg_id: Option<u64>,
    pub value: Option<Decimal>,
    pub currency: String,
    pub eid: Option<String>,
    /// The caller's time if given (`time_supplied`), else the time of receipt.
    pub occurred_at_ms: u64,
    pub time_supplied: bool,
    pub received_at_ms: u64,
    /// Which way in it came by.
    pub source: Source,
}

/// An event's identity, its `event_id`: 128 bits shown as a UUID (`8-4-4-4-12` lowercase hex),
/// made when the event is stored and never made again, in this data file or any other.
///
/// `inbox_id` is no identity: it counts from 1 in every data file, and again after a restore
/// from a backup, so two events would share it. Receivers (Meta, webhooks, postbacks)
/// deduplicate by `event_id`, so it is drawn from the operating system's generator
/// ([`EventId::random`]). Events stored before the tracker kept one have an id derived from a
/// random secret of their data file and their `inbox_id` ([`EventId::derived`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventId(u128);

/// In a UUID read as a big-endian `u128`: the version nibble (bits 76-79) and the two variant
/// bits (62-63).
const UUID_VERSION: u128 = 0xf << 76;
const UUID_VARIANT: u128 = 0b11 << 62;

impl EventId {
    /// A new id: a UUID of version 4, 122 bits from the operating system's generator.
    ///
    /// # Panics
    /// If the operating system has no randomness to give.
    #[must_use]
    pub fn random() -> EventId {
        EventId::version_4(crate::domain::credential::random_bits())
    }

    /// The id of the event `inbox_id` of a data file stored before events had one: the first
    /// 128 bits of SHA-256 over a fixed label, the file's 128-bit `salt` (random, written once
    /// by the migration that brought ids in) and the `inbox_id`, as a UUID of version 4. Without
    /// the salt the digest cannot be guessed, so it is as good as random; with it, the same
    /// event has the same id every time it is read. Part of the file format: changing it
    /// changes stored events' ids.
    #[must_use]
    pub fn derived(salt: u128, inbox_id: u64) -> EventId {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new_with_prefix(b"tracker event_id\0");
        hasher.update(salt.to_be_bytes());
        hasher.update(inbox_id.to_be_bytes());
        EventId::version_4(crate::domain::digest::first_128_bits(hasher))
    }

    /// `bits` with the version 4 and variant bits of a UUID set.
    fn version_4(bits: u128) -> EventId {
        EventId(bits & !UUID_VERSION & !UUID_VARIANT | 0x4 << 76 | 0b10 << 62)
    }

    /// The id as stored (`EventRecord::event_id`).
    #[must_use]
    pub fn from_bits(bits: u128) -> EventId {
        EventId(bits)
    }

    #[must_use]
    pub fn bits(self) -> u128 {
        self.0
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            n >> 96,
            (n >> 80) & 0xffff,
            (n >> 64) & 0xffff,
            (n >> 48) & 0xffff,
            n & 0xffff_ffff_ffff
        )
    }
}

stored_codes! {
    /// The way in an event came by, reported as `source` in the feed.
    pub enum Source {
        /// `POST /events`, with the space's secret.
        Post = 1 => "post",
        /// `GET /e`, a postback with the ingest token.
        Get = 2 => "get",
        /// A join of a Telegram channel, read from the bot's updates (`docs/channels.md`).
        Telegram = 3 => "telegram",
    }
}

stored_codes! {
    /// How a stored event was attributed to its click, reported as `attributed_by` in the answer
    /// and the feed. The discriminants are stored on disk; never renumber them.
    #[derive(Serialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum AttributedBy {
        /// Its `uid` names a click of the space.
        Uid = 1 => "uid",
        /// It named no `uid`, and its Telegram id has a bound click, chosen by the space's
        /// `attribution` setting.
        TgId = 2 => "tg_id",
    }
}

/// The names an endpoint gives the event fields; errors name the field as the caller sent it.
pub struct FieldNames {
    pub time: &'static str,
    pub tg_id: &'static str,
    pub source: Source,
}

pub const POST_NAMES: FieldNames = FieldNames {
    time: "occurred_at_ms",
    tg_id: "tg_id",
    source: Source::Post,
};
pub const GET_NAMES: FieldNames = FieldNames {
    time: "t",
    tg_id: "tg",
    source: Source::Get,
};

/// A numeric field as sent: JSON number text, or a string (every GET value, or a JSON string).
#[derive(Debug)]
pub enum Numeric {
    JsonNumber(String),
    Text(String),
}

/// The event fields of one request, read but not yet checked.
#[derive(Debug, Default)]
pub struct EventInput {
    pub event: Option<String>,
    pub uid: Option<String>,
    /// The Telegram id as sent: digits (a JSON integer's text, or a string).
    pub tg_id: Option<String>,
    pub value: Option<Numeric>,
    pub currency: Option<String>,
    pub eid: Option<String>,
    pub time: Option<Numeric>,
    pub dry_run: bool,
}

// Each field is read as it came and checked by `validate`, so that a wrong value is answered
// with the field's own code; the `schemars` attributes describe each for `/openapi.json`.
/// The body of `POST /events`. An optional field sent as `null` counts as absent.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventBody<'a> {
    #[serde(borrow)]
    #[schemars(with = "EventKind")]
    event: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<input::UidJson>")]
    uid: Option<&'a RawValue>,
    /// The Telegram user the event is about. Without a `uid`, the event is attributed to a click
    /// bound to this user; with one, the `uid` decides and the id is kept.
    #[serde(borrow)]
    #[schemars(with = "Option<input::TelegramIdJson>")]
    tg_id: Option<&'a RawValue>,
    /// The deposit's amount.
    #[serde(borrow)]
    #[schemars(with = "Option<input::DecimalJson>")]
    value: Option<&'a RawValue>,
    /// 3 to 10 ASCII letters or digits, stored in upper case; absent: `default_currency` (USD).
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^[A-Za-z0-9]{3,10}$"))]
    currency: Option<&'a RawValue>,
    /// The sender's own event id: permanent dedup key with `event`. An unreplaced macro
    /// (`{txid}`, `%%TXID%%`, `##txid##`) is `invalid_eid`.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        length(min = 1, max = 256),
        pattern(r"^[!-~]+$")
    )]
    eid: Option<&'a RawValue>,
    /// Epoch milliseconds, not before now - `max_event_age` (90 days) and not after now +
    /// `max_clock_skew` (10 minutes); absent: the time of receipt.
    #[serde(borrow)]
    #[schemars(with = "Option<u64>", range(min = 100_000_000_000_u64))]
    occurred_at_ms: Option<&'a RawValue>,
    /// Validate and report what would happen; store nothing.
    #[serde(borrow)]
    #[schemars(with = "Option<bool>")]
    dry_run: Option<&'a RawValue>,
}

impl EventInput {
    /// Reads a `POST /events` body. Only JSON types are checked here; values are checked by
    /// [`validate`].
    pub fn from_json(body: &[u8]) -> Result<EventInput, Error> {
        let b: EventBody = input::parse_body(body)?;
        let string =
            |raw: Option<&RawValue>, name| raw.map(|r| input::json_string(r, name)).transpose();
        let value = match b.value {
            None => None,
            Some(raw) => Some(match json_number_text(raw) {
                Some(n) => Numeric::JsonNumber(n.to_owned()),
                None => Numeric::Text(input::json_string(raw, "value").map_err(|_| {
                    input::wrong_type("value", "a number or a string holding one", raw)
                })?),
            }),
        };
        let time = match b.occurred_at_ms {
            None => None,
            Some(raw) => Some(Numeric::JsonNumber(
                json_number_text(raw)
                    .ok_or_else(|| input::wrong_type("occurred_at_ms", "an integer", raw))?
                    .to_owned(),
            )),
        };
        Ok(EventInput {
            event: string(b.event, "event")?,
            uid: string(b.uid, "uid")?,
            tg_id: b.tg_id.map(|r| click::tg_id_text(r, "tg_id")).transpose()?,
            value,
            currency: string(b.currency, "currency")?,
            eid: string(b.eid, "eid")?,
            time,
            dry_run: b
                .dry_run
                .map(|r| input::json_bool(r, "dry_run"))
                .transpose()?
                .unwrap_or(false),
        })
    }

    /// Reads a `GET /e` query (the token was taken by authentication).
    pub fn from_query(q: &Query) -> Result<EventInput, Error> {
        let text = |name, code| q.value(name, code).map(|v| v.map(str::to_owned));
        Ok(EventInput {
            event: text("event", Code::InvalidEvent)?,
            uid: text("uid", Code::InvalidUid)?,
            tg_id: text("tg", Code::InvalidTgId)?,
            value: text("value", Code::InvalidValue)?.map(Numeric::Text),
            currency: text("currency", Code::InvalidCurrency)?,
            eid: text("eid", Code::InvalidEid)?,
            time: text("t", Code::InvalidTime)?.map(Numeric::Text),
            dry_run: q.get("dry_run").is_some_and(|v| v == "1" || v == "true"),
        })
    }
}

/// Checks every field of `input` against its rule, at time `now_ms`.
pub fn validate(
    input: EventInput,
    names: &FieldNames,
    rules: &EventRules,
    now_ms: u64,
) -> Result<ValidEvent, Error> {
    let event = match input.event {
        None => {
            return Err(Error::field(
                Code::MissingField,
                "event",
                "`event` is required",
            ));
        }
        Some(e) if e.is_empty() => {
            return Err(Error::field(
                Code::MissingField,
                "event",
                "`event` is required",
            ));
        }
        Some(e) => e,
    };
    let kind = EventKind::from_name(&event).ok_or_else(|| {
        Error::field(
            Code::InvalidEvent,
            "event",
            format!(
                "`event` must be one of contact, subscribed, registration, deposit; got {}",
                quoted(&event)
            ),
        )
    })?;
    let uid = input.uid.map(|u| uid::check(u, "uid")).transpose()?;
    let tg_id = input
        .tg_id
        .map(|t| click::parse_tg_id(&t, names.tg_id))
        .transpose()?;
    let eid = input.eid.map(check_eid).transpose()?;
    let value = input.value.map(|v| parse_value(&v)).transpose()?;
    let currency = match input.currency {
        None => rules.default_currency.clone(),
        Some(c) => check_currency(&c)?,
    };
    let (occurred_at_ms, time_supplied) = match input.time {
        None => (now_ms, false),
        Some(t) => (check_time(&t, names.time, rules, now_ms)?, true),
    };
    Ok(ValidEvent {
        kind,
        uid,
        tg_id,
        value,
        currency,
        eid,
        occurred_at_ms,
        time_supplied,
        received_at_ms: now_ms,
        source: names.source,
    })
}

/// The rule of `eid`: 1 to 256 visible ASCII characters (`!` to `~`), and not an unreplaced
/// postback macro (`{txid}`, `%%TXID%%`, `##txid##`): every postback whose macro was never
/// replaced would carry the same text, and all but the first would count as duplicates of it.
fn check_eid(eid: String) -> Result<String, Error> {
    const MAX: usize = 256;
    let bad = |why: String| {
        Err(Error::field(
            Code::InvalidEid,
            "eid",
            format!("`eid` {why}"),
        ))
    };
    if eid.is_empty() {
        return bad("must not be empty".into());
    }
    if eid.len() > MAX {
        return bad(format!(
            "must be at most {MAX} characters, got {}",
            eid.len()
        ));
    }
    if let Some(c) = eid.chars().find(|c| !c.is_ascii_graphic()) {
        return bad(format!(
            "must be visible ASCII with no spaces, but contains {c:?}"
        ));
    }
    match input::macro_syntax(&eid) {
        Some(syntax) => Err(input::unreplaced_macro(
            Code::InvalidEid,
            "eid",
            &eid,
            &syntax,
        )),
        None => Ok(eid),
    }
}

fn parse_value(v: &Numeric) -> Result<Decimal, Error> {
    let text = match v {
        Numeric::JsonNumber(t) | Numeric::Text(t) => t,
    };
    Decimal::parse(text).map_err(|msg| Error::field(Code::InvalidValue, "value", msg))
}

pub(crate) fn check_currency(c: &str) -> Result<String, Error> {
    if (3..=10).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(c.to_ascii_uppercase())
    } else {
        Err(Error::field(
            Code::InvalidCurrency,
            "currency",
            format!(
                "`currency` must be 3 to 10 ASCII letters or digits (USD, USDT), got {}",
                quoted(c)
            ),
        ))
    }
}

fn check_time(
    t: &Numeric,
    field: &'static str,
    rules: &EventRules,
    now_ms: u64,
) -> Result<u64, Error> {
    let bad = |msg: String| Error::field(Code::InvalidTime, field, msg);
    let text = match t {
        Numeric::JsonNumber(t) | Numeric::Text(t) => t,
    };
    let ms: u64 = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse()
            .map_err(|_| bad(format!("`{field}` is far too large: {}", quoted(text))))?
    } else {
        return Err(bad(format!(
            "`{field}` must be a positive whole number of epoch milliseconds, got {}",
            quoted(text)
        )));
    };
    if ms < 100_000_000_000 {
        return Err(bad(format!(
            "`{field}` is {ms}, which looks like seconds; send epoch milliseconds ({ms}000)"
        )));
    }
    let freshness = Freshness {
        now_ms,
        max_age_ms: rules.max_event_age_ms,
        max_skew_ms: rules.max_clock_skew_ms,
    };
    match freshness.check(ms) {
        Ok(()) => Ok(ms),
        Err(Stale::TooOld) => Err(bad(format!(
            "`{field}` is {ms}, more than {} in the past",
            humantime::format_duration(std::time::Duration::from_millis(rules.max_event_age_ms))
        ))),
        Err(Stale::Ahead) => Err(bad(format!(
            "`{field}` is {ms}, more than {} in the future; check the sender's clock",
            humantime::format_duration(std::time::Duration::from_millis(rules.max_clock_skew_ms))
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;
    const DAY: u64 = 86_400_000;

    /// A UUID of version 4 in its text form: 8-4-4-4-12 lowercase hex, `4` first in the third
    /// group, `8` to `b` first in the fourth.
    fn is_uuid_v4(text: &str) -> bool {
        let groups: Vec<&str> = text.split('-').collect();
        groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
            && groups
                .iter()
                .all(|g| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            && groups[2].starts_with('4')
            && groups[3].starts_with(['8', '9', 'a', 'b'])
    }

    #[test]
    fn event_ids_are_uuids_of_version_4_and_never_repeat() {
        let ids: std::collections::HashSet<String> =
            (0..10_000).map(|_| EventId::random().to_string()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| is_uuid_v4(id)), "{ids:?}");
        assert_eq!(
            EventId::from_bits(0x0123_4567_89ab_4def_8123_4567_89ab_cdef).to_string(),
            "01234567-89ab-4def-8123-456789abcdef"
        );
        assert!(!is_uuid_v4("01234567-89ab-3def-8123-456789abcdef"));
    }

    /// A derived id is the same for the same salt and event, another for another salt (another
    /// data file) or event. Pinned: the stored events of a file keep their ids across releases.
    #[test]
    fn derived_event_ids_depend_on_the_salt_and_the_inbox_id() {
        let id = EventId::derived(7, 1);
        assert_eq!(id, EventId::derived(7, 1));
        assert_ne!(id, EventId::derived(8, 1));
        assert_ne!(id, EventId::derived(7, 2));
        assert!(is_uuid_v4(&id.to_string()), "{id}");
        assert_eq!(
            EventId::derived(0, 0).bits(),
            EventId::derived(0, 0).bits() & !(0xf << 76) | 0x4 << 76
        );
    }

    fn rules() -> EventRules {
        EventRules {
            default_currency: "USD".into(),
            max_event_age_ms: 90 * DAY,
            max_clock_skew_ms: 600_000,
        }
    }

    fn post(body: &str) -> Result<ValidEvent, Error> {
        validate(
            EventInput::from_json(body.as_bytes())?,
            &POST_NAMES,
            &rules(),
            NOW,
        )
    }

    fn code(body: &str) -> Code {
        post(body).unwrap_err().code
    }

    #[test]
    fn event_name_rules() {
        assert_eq!(
            post(r#"{"event":"deposit"}"#).unwrap().kind,
            EventKind::Deposit
        );
        assert_eq!(code(r"{}"), Code::MissingField);
        assert_eq!(code(r#"{"event":""}"#), Code::MissingField);
        assert_eq!(code(r#"{"event":"Deposit"}"#), Code::InvalidEvent);
        assert_eq!(code(r#"{"event":"purchase"}"#), Code::InvalidEvent);
        assert_eq!(code(r#"{"event":5}"#), Code::InvalidJson);
    }

    /// `uid` is a Telegram start parameter (1 to 64 of `A-Za-z0-9_-`, `domain::uid`); `eid` 1 to
    /// 256 visible ASCII characters that are not an unreplaced macro.
    #[test]
    fn uid_and_eid_bounds() {
        for (field, max, ok, field_code) in [
            ("uid", 64, "a_-Z9", Code::InvalidUid),
            ("eid", 256, "!~", Code::InvalidEid),
        ] {
            // The value goes into JSON as written: `\t` is JSON's escape of a tab.
            let with = |value: &str| post(&format!(r#"{{"event":"deposit","{field}":"{value}"}}"#));
            assert!(with(&"a".repeat(max)).is_ok(), "{field} at {max}");
            assert!(with(ok).is_ok(), "{field}");
            for bad in [
                "a".repeat(max + 1),
                String::new(),
                "a b".into(),
                r"a\tb".into(),
                "é".into(),
                "%%TXID%%".into(),
                "##txid##".into(),
                "{txid}".into(),
            ] {
                let err = with(&bad).unwrap_err();
                assert_eq!(
                    (err.code, err.field),
                    (field_code, Some(field)),
                    "{field}: {bad:?}"
                );
            }
        }
        assert_eq!(code(r#"{"event":"deposit","uid":"a.b"}"#), Code::InvalidUid);
        assert!(post(r#"{"event":"deposit","eid":"a.b/c?d"}"#).is_ok());
    }

    /// `tg_id` / `tg` follow the Telegram id rule of bindings, under the name the caller used.
    #[test]
    fn tg_id_takes_a_telegram_id() {
        let tg = |v: &str| post(&format!(r#"{{"event":"deposit","tg_id":{v}}}"#));
        assert_eq!(tg("1").unwrap().tg_id, Some(1));
        assert_eq!(
            tg(r#""9007199254740991""#).unwrap().tg_id,
            Some((1 << 53) - 1)
        );
        for bad in ["0", "9007199254740992", "-1", "1.5", r#""12a""#] {
            let e = tg(bad).unwrap_err();
            assert_eq!(
                (e.code, e.field),
                (Code::InvalidTgId, Some("tg_id")),
                "{bad}"
            );
        }
        assert_eq!(tg("true").unwrap_err().code, Code::InvalidJson);
        assert_eq!(post(r#"{"event":"deposit"}"#).unwrap().tg_id, None);
        let get = |q: &str| {
            validate(
                EventInput::from_query(&Query::parse(q))?,
                &GET_NAMES,
                &rules(),
                NOW,
            )
        };
        assert_eq!(get("event=contact&tg=42").unwrap().tg_id, Some(42));
        let e = get("event=contact&tg=4x").unwrap_err();
        assert_eq!((e.code, e.field), (Code::InvalidTgId, Some("tg")));
        let e = get("event=contact&tg={user_id}").unwrap_err();
        assert_eq!((e.code, e.field), (Code::InvalidTgId, Some("tg")));
    }

    #[test]
    fn value_rules() {
        let v = |body: &str| post(body).map(|e| e.value.unwrap().to_string());
        assert_eq!(
            v(r#"{"event":"deposit","value":"12.10"}"#).unwrap(),
            "12.10"
        );
        assert_eq!(v(r#"{"event":"deposit","value":12.10}"#).unwrap(), "12.10");
        assert_eq!(v(r#"{"event":"deposit","value":-3.5}"#).unwrap(), "-3.5");
        assert_eq!(
            code(r#"{"event":"deposit","value":"12,5"}"#),
            Code::InvalidValue
        );
        assert_eq!(
            code(r#"{"event":"deposit","value":"0x1F"}"#),
            Code::InvalidValue
        );
        assert_eq!(
            code(r#"{"event":"deposit","value":"NaN"}"#),
            Code::InvalidValue
        );
        assert_eq!(
            code(r#"{"event":"deposit","value":1e400}"#),
            Code::InvalidValue
        );
        assert_eq!(
            code(r#"{"event":"deposit","value":true}"#),
            Code::InvalidJson
        );
        let digits28 = "1234567890123456789012345678";
        assert!(post(&format!(r#"{{"event":"deposit","value":{digits28}}}"#)).is_ok());
        assert_eq!(
            code(&format!(r#"{{"event":"deposit","value":{digits28}9}}"#)),
            Code::InvalidValue
        );
    }

    #[test]
    fn currency_bounds() {
        let c = |body: &str| post(body).map(|e| e.currency);
        assert_eq!(c(r#"{"event":"deposit"}"#).unwrap(), "USD");
        assert_eq!(c(r#"{"event":"deposit","currency":"eur"}"#).unwrap(), "EUR");
        assert_eq!(
            c(r#"{"event":"deposit","currency":"abcdefghij"}"#).unwrap(),
            "ABCDEFGHIJ"
        );
        assert_eq!(
            code(r#"{"event":"deposit","currency":"abcdefghijk"}"#),
            Code::InvalidCurrency
        );
        assert_eq!(c(r#"{"event":"deposit","currency":"usd"}"#).unwrap(), "USD");
        assert_eq!(
            code(r#"{"event":"deposit","currency":"US"}"#),
            Code::InvalidCurrency
        );
        assert_eq!(
            code(r#"{"event":"deposit","currency":"US$"}"#),
            Code::InvalidCurrency
        );
    }

    #[test]
    fn time_bounds() {
        let at = |t: u64| post(&format!(r#"{{"event":"deposit","occurred_at_ms":{t}}}"#));
        let oldest = NOW - 90 * DAY;
        assert_eq!(at(oldest).unwrap().occurred_at_ms, oldest);
        assert_eq!(at(oldest - 1).unwrap_err().code, Code::InvalidTime);
        assert!(at(NOW + 600_000).unwrap().time_supplied);
        assert_eq!(at(NOW + 600_001).unwrap_err().code, Code::InvalidTime);
        let secs = at(1_800_000_000).unwrap_err();
        assert!(secs.message.contains("seconds"), "{}", secs.message);
        assert_eq!(secs.field, Some("occurred_at_ms"));
        assert_eq!(
            code(r#"{"event":"deposit","occurred_at_ms":1.8e12}"#),
            Code::InvalidTime
        );
        assert_eq!(
            code(r#"{"event":"deposit","occurred_at_ms":-5}"#),
            Code::InvalidTime
        );
        assert_eq!(
            code(r#"{"event":"deposit","occurred_at_ms":"1800000000000"}"#),
            Code::InvalidJson
        );
        let absent = post(r#"{"event":"deposit"}"#).unwrap();
        assert_eq!((absent.occurred_at_ms, absent.time_supplied), (NOW, false));
    }

    /// A time below 10^11 looks like seconds. With an age limit that lets
    /// both through, 10^11 - 1 is refused for that reason and 10^11 is accepted.
    #[test]
    fn seconds_are_told_apart_at_exactly_10_pow_11() {
        let rules = EventRules {
            max_event_age_ms: NOW,
            ..rules()
        };
        let at = |t: u64| {
            let body = format!(r#"{{"event":"deposit","occurred_at_ms":{t}}}"#);
            validate(
                EventInput::from_json(body.as_bytes()).unwrap(),
                &POST_NAMES,
                &rules,
                NOW,
            )
        };
        let below = at(99_999_999_999).unwrap_err();
        assert_eq!(below.code, Code::InvalidTime);
        assert!(
            below.message.contains("looks like seconds"),
            "{}",
            below.message
        );
        assert_eq!(at(100_000_000_000).unwrap().occurred_at_ms, 100_000_000_000);
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let err = post(r#"{"event":"deposit","occured_at_ms":1}"#).unwrap_err();
        assert_eq!(err.code, Code::InvalidJson);
        assert!(err.message.contains("occured_at_ms"), "{}", err.message);
        assert_eq!(code("not json"), Code::InvalidJson);
        assert_eq!(code(""), Code::InvalidJson);
        assert_eq!(code("[]"), Code::InvalidJson);
    }

    #[test]
    fn get_query_uses_get_names_and_refuses_macros() {
        let get = |q: &str| {
            validate(
                EventInput::from_query(&Query::parse(q))?,
                &GET_NAMES,
                &rules(),
                NOW,
            )
        };
        let e = get("event=deposit&value=7.00&currency=usdt&t=1800000000000&extra=1").unwrap();
        assert_eq!(
            (e.value.unwrap().to_string(), e.currency),
            ("7.00".into(), "USDT".into())
        );
        assert_eq!(get("event=deposit&t=12").unwrap_err().field, Some("t"));
        assert_eq!(
            get("event=deposit&uid={clickid}").unwrap_err().code,
            Code::InvalidUid
        );
        assert_eq!(
            get("event=deposit&value=%7Bamount%7D").unwrap_err().code,
            Code::InvalidValue
        );
        assert_eq!(get("event=&uid=x").unwrap_err().code, Code::MissingField);
        assert_eq!(get("event=deposit&uid=").unwrap().uid, None);
    }
}
