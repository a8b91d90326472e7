//! Clicks and bindings: the field rules of `docs/api.md#post-clicks` and `#post-bind`.
//!
//! A back-filled click carries up to four strings, each with its bound. A binding names a click
//! `uid` and a Telegram user id: a positive integer up to 2^53-1 (the largest integer every JSON
//! parser holds exactly), sent as a JSON integer or a string of digits.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

use crate::domain::input::{self, Query, json_number_text, quoted};
use crate::domain::{base62, digest, uid};
use crate::error::{Code, Error};

/// Characters of a generated `uid` before its random part: the click's time in milliseconds
/// since the epoch, base62, zero-padded. 62^7 ms runs to the year 2081.
pub const UID_TIME_LEN: usize = 7;
/// The largest time the prefix holds; later clicks all carry it.
const UID_TIME_MAX: u64 = 62u64.pow(UID_TIME_LEN as u32) - 1;

/// A new click's `uid`: [`UID_TIME_LEN`] characters of its time, then 22 of 128 random bits
/// (`credential::random_id`), 29 characters of `[A-Za-z0-9]` in all (at
/// least 128 random bits in at most 32 such characters; Telegram's `start` takes 64).
///
/// Why the time: the `clicks` table is keyed by `(space, uid)`. With a random uid each new click
/// would land in a random leaf, and a commit of N clicks rewrite N leaves; with the time first,
/// new clicks go to the end of their space's range and a commit writes one or two leaves. The time
/// is the click's own (which its record holds anyway), or a millisecond or two later when the
/// writer keeps one batch's uids after the last one's (`Txn::uid_floor`); nothing else can be
/// read from the uid.
/// An all-random uid (22 characters, as older files hold) is found the same way: a look-up is by
/// the whole uid.
#[must_use]
pub fn new_uid(clicked_at_ms: u64) -> String {
    let mut uid = uids_from(clicked_at_ms);
    uid.push_str(&crate::domain::credential::random_id());
    uid
}

/// The time prefix of a `uid` that [`new_uid`] made (every uid of a click made since schema 7);
/// `None` for an older, all-random one.
#[must_use]
pub fn uid_time(uid: &str) -> Option<u64> {
    if uid.len() != UID_TIME_LEN + 22 || !uid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let time = base62::decode(&uid[..UID_TIME_LEN])?;
    u64::try_from(time).ok()
}

/// The smallest uid [`new_uid`] makes for a click at `time_ms` or later, for a range of the
/// `clicks` table (older all-random uids may sort after it too).
#[must_use]
pub fn uids_from(time_ms: u64) -> String {
    base62::encode(u128::from(time_ms.min(UID_TIME_MAX)), UID_TIME_LEN)
}

/// The largest Telegram id accepted: 2^53 - 1.
pub const MAX_TG_ID: u64 = (1 << 53) - 1;

/// A click to back-fill, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClick {
    pub link_slug: Option<String>,
    pub fbclid: Option<String>,
    pub campaign_name: Option<String>,
    pub raw_query: Option<String>,
    pub clicked_at_ms: u64,
    /// The visitor's address and user agent, from a link visit: kept only in a space with
    /// `meta_client_hints` on (the writer decides), else dropped.
    pub hints: Option<ClientHints>,
}

/// What a link visit's request says about the visitor, for Meta's matching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientHints {
    pub ip: std::net::IpAddr,
    /// Cut to [`MAX_USER_AGENT`] characters.
    pub user_agent: Option<String>,
}

/// The longest user agent kept; real ones are a few hundred characters.
pub const MAX_USER_AGENT: usize = 512;

/// The body of `POST /clicks`. Every field optional; an empty string or `null` counts as
/// absent. Lengths are in characters.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClickBody<'a> {
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = 128))]
    link_slug: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = 512))]
    fbclid: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CAMPAIGN_NAME_MAX_CHARS))]
    campaign_name: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = 4096))]
    raw_query: Option<&'a RawValue>,
}

/// The most characters a campaign's name has, wherever one is given: a click, a link, a cost,
/// a stats filter.
pub const CAMPAIGN_NAME_MAX_CHARS: usize = 256;

/// The bound on each click field, in characters.
pub const CLICK_FIELD_BOUNDS: [(&str, usize); 4] = [
    ("link_slug", 128),
    ("fbclid", 512),
    ("campaign_name", CAMPAIGN_NAME_MAX_CHARS),
    ("raw_query", 4096),
];

impl NewClick {
    /// Reads and checks a `POST /clicks` body. An empty string counts as absent.
    pub fn from_json(body: &[u8], now_ms: u64) -> Result<NewClick, Error> {
        let b: ClickBody = input::parse_body(body)?;
        let [slug, fbclid, campaign, raw_query] = CLICK_FIELD_BOUNDS;
        Ok(NewClick {
            link_slug: bounded(b.link_slug, slug)?,
            fbclid: bounded(b.fbclid, fbclid)?,
            campaign_name: bounded(b.campaign_name, campaign)?,
            raw_query: bounded(b.raw_query, raw_query)?,
            clicked_at_ms: now_ms,
            hints: None,
        })
    }
}

fn bounded(
    raw: Option<&RawValue>,
    (field, max): (&'static str, usize),
) -> Result<Option<String>, Error> {
    let Some(raw) = raw else { return Ok(None) };
    let text = input::json_string(raw, field)?;
    within_bound(&text, (field, max))?;
    Ok((!text.is_empty()).then_some(text))
}

/// Refuses `text` in `field` longer than `max` characters: the bound of a click's field, also
/// where a campaign's name is asked for (`GET /stats?campaign=`).
pub fn within_bound(text: &str, (field, max): (&'static str, usize)) -> Result<(), Error> {
    let len = text.chars().count();
    if len > max {
        return Err(Error::field(
            Code::InvalidField,
            field,
            format!("`{field}` must be at most {max} characters, got {len}"),
        ));
    }
    Ok(())
}

/// The key of `fbclid` in the click index (`CLICKS_BY_FBCLID`): the 128-bit digest of its
/// UTF-8 bytes, with no length prefix. An fbclid is up to 512 characters; the index stores 16
/// bytes whatever its length. Stored keys depend on it: a change is a schema version.
#[must_use]
pub fn fbclid_key(fbclid: &str) -> u128 {
    digest::first_128_bits(Sha256::new_with_prefix(fbclid.as_bytes()))
}

/// A bind request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindInput {
    pub uid: String,
    pub tg_id: u64,
}

/// The body of `POST /bind`: both fields required (`missing_field` without one; `null` counts
/// as absent).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindBody<'a> {
    /// A click id: 1 to 64 of `A-Z a-z 0-9 _ -`, a Telegram `start` parameter. Anything else (an
    /// unreplaced macro such as `{clickid}`, `%%CLICK_ID%%` or `$subid`) is `invalid_uid`.
    #[serde(borrow)]
    #[schemars(
        with = "String",
        length(min = 1, max = 64),
        pattern(r"^[A-Za-z0-9_-]+$")
    )]
    uid: Option<&'a RawValue>,
    /// The Telegram user the click is bound to.
    #[serde(borrow)]
    #[schemars(with = "input::TelegramIdJson")]
    tg_id: Option<&'a RawValue>,
}

impl BindInput {
    /// Reads and checks a `POST /bind` body: `{"uid": "...", "tg_id": 123}`.
    pub fn from_json(body: &[u8]) -> Result<BindInput, Error> {
        let b: BindBody = input::parse_body(body)?;
        let uid = b.uid.map(|r| input::json_string(r, "uid")).transpose()?;
        let tg = b.tg_id.map(|r| tg_id_text(r, "tg_id")).transpose()?;
        BindInput::check(uid, tg, "tg_id")
    }

    /// Reads and checks a `GET /bind` query: `uid=...&tg=123`.
    pub fn from_query(q: &Query) -> Result<BindInput, Error> {
        let uid = q.value("uid", Code::InvalidUid)?.map(str::to_owned);
        let tg = q.value("tg", Code::InvalidTgId)?.map(str::to_owned);
        BindInput::check(uid, tg, "tg")
    }

    fn check(
        uid: Option<String>,
        tg: Option<String>,
        tg_field: &'static str,
    ) -> Result<BindInput, Error> {
        let uid = match uid {
            Some(u) if !u.is_empty() => uid::check(u, "uid")?,
            _ => return Err(Error::field(Code::MissingField, "uid", "`uid` is required")),
        };
        let tg = match tg {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(Error::field(
                    Code::MissingField,
                    tg_field,
                    format!("`{tg_field}` (the Telegram user id) is required"),
                ));
            }
        };
        Ok(BindInput {
            uid,
            tg_id: parse_tg_id(&tg, tg_field)?,
        })
    }
}

/// The text of a Telegram id in a JSON body: a JSON integer's text or a string (checked by
/// [`parse_tg_id`]). Like every field, another JSON type (`true`, `[1]`, `{}`) is `invalid_json`.
pub fn tg_id_text(raw: &RawValue, field: &'static str) -> Result<String, Error> {
    match json_number_text(raw) {
        Some(n) => Ok(n.to_owned()),
        None => input::json_string(raw, field)
            .map_err(|_| input::wrong_type(field, "a positive integer or a string of digits", raw)),
    }
}

/// A Telegram user id: 1..=2^53-1, digits only.
pub fn parse_tg_id(text: &str, field: &'static str) -> Result<u64, Error> {
    let bad = |why: &str| {
        Error::field(
            Code::InvalidTgId,
            field,
            format!(
                "`{field}` must be a positive integer up to 2^53-1; {} {why}",
                quoted(text)
            ),
        )
    };
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(if text.starts_with('-') {
            "is negative"
        } else {
            "is not a whole number"
        }));
    }
    match text.parse::<u64>() {
        Ok(0) => Err(bad("is zero")),
        Ok(n) if n <= MAX_TG_ID => Ok(n),
        _ => Err(bad("is too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_uids_sort_by_time_and_keep_128_random_bits() {
        let times = [
            0,
            1,
            61,
            62,
            1_799_999_999_999,
            1_800_000_000_000,
            UID_TIME_MAX,
        ];
        let uids: Vec<String> = times.iter().map(|&t| new_uid(t)).collect();
        for (uid, t) in uids.iter().zip(times) {
            assert_eq!(uid.len(), UID_TIME_LEN + 22, "{uid}");
            assert!(uid.bytes().all(|b| b.is_ascii_alphanumeric()), "{uid}");
            assert!(crate::domain::uid::is_start_parameter(uid), "{uid}");
            assert_eq!(
                &uid[..UID_TIME_LEN],
                &new_uid(t)[..UID_TIME_LEN],
                "the prefix is the time's alone"
            );
        }
        assert!(uids.windows(2).all(|w| w[0] < w[1]), "{uids:?}");
        assert_eq!(&new_uid(0)[..UID_TIME_LEN], "0000000");
        // Past the year 2081 the prefix stays at its largest, and the uid is still well formed.
        assert_eq!(
            &new_uid(u64::MAX)[..UID_TIME_LEN],
            &uids[uids.len() - 1][..UID_TIME_LEN]
        );
        for (uid, t) in uids.iter().zip(times) {
            assert_eq!(uid_time(uid), Some(t), "{uid}");
            assert!(uids_from(t) <= *uid, "{uid}");
            assert!(t == UID_TIME_MAX || uids_from(t + 1) > *uid, "{uid}");
        }
        assert_eq!(uid_time(&crate::domain::credential::random_id()), None);
        assert_eq!(uid_time(&format!("{}-", &uids[0][..28])), None);
        // The same millisecond: the random part differs.
        let (a, b) = (new_uid(5), new_uid(5));
        assert_ne!(a[UID_TIME_LEN..], b[UID_TIME_LEN..]);
    }

    fn click(body: &str) -> Result<NewClick, Error> {
        NewClick::from_json(body.as_bytes(), 1)
    }

    #[test]
    fn click_field_bounds() {
        for (field, max) in CLICK_FIELD_BOUNDS {
            let inside = format!(r#"{{"{field}":"{}"}}"#, "é".repeat(max));
            let outside = format!(r#"{{"{field}":"{}"}}"#, "a".repeat(max + 1));
            assert!(click(&inside).is_ok(), "{field} at {max}");
            let err = click(&outside).unwrap_err();
            assert_eq!((err.code, err.field), (Code::InvalidField, Some(field)));
        }
        assert_eq!(
            click(r#"{"fbclid":7}"#).unwrap_err().code,
            Code::InvalidJson
        );
        assert_eq!(click(r#"{"uid":"x"}"#).unwrap_err().code, Code::InvalidJson);
        assert_eq!(
            click("{}").unwrap(),
            NewClick {
                link_slug: None,
                fbclid: None,
                campaign_name: None,
                raw_query: None,
                clicked_at_ms: 1,
                hints: None,
            }
        );
        assert_eq!(click(r#"{"fbclid":""}"#).unwrap().fbclid, None);
    }

    #[test]
    fn tg_id_bounds() {
        let bind =
            |tg: &str| BindInput::from_json(format!(r#"{{"uid":"u","tg_id":{tg}}}"#).as_bytes());
        assert_eq!(bind("1").unwrap().tg_id, 1);
        assert_eq!(bind("9007199254740991").unwrap().tg_id, MAX_TG_ID);
        assert_eq!(bind(r#""42""#).unwrap().tg_id, 42);
        for bad in [
            "0",
            "9007199254740992",
            "-1",
            "1.5",
            r#""12a""#,
            r#""-3""#,
            "1e3",
        ] {
            let err = bind(bad).unwrap_err();
            assert_eq!(err.code, Code::InvalidTgId, "{bad}: {}", err.message);
        }
        for wrong_type in ["true", "[1]", "{}"] {
            assert_eq!(
                bind(wrong_type).unwrap_err().code,
                Code::InvalidJson,
                "{wrong_type}"
            );
        }
        assert_eq!(bind(r#""""#).unwrap_err().code, Code::MissingField);
    }

    #[test]
    fn bind_requires_both_fields() {
        let err = BindInput::from_json(br#"{"tg_id":5}"#).unwrap_err();
        assert_eq!((err.code, err.field), (Code::MissingField, Some("uid")));
        let err = BindInput::from_query(&Query::parse("uid=abc")).unwrap_err();
        assert_eq!((err.code, err.field), (Code::MissingField, Some("tg")));
        let err = BindInput::from_query(&Query::parse("uid=abc&tg={user_id}")).unwrap_err();
        assert_eq!(err.code, Code::InvalidTgId);
        assert_eq!(
            BindInput::from_query(&Query::parse("uid=abc&tg=7"))
                .unwrap()
                .tg_id,
            7
        );
    }

    /// Pins the index key of an fbclid: the `CLICKS_BY_FBCLID` rows of existing files were
    /// written with it, so a change would answer a known fbclid with a new click. The expected
    /// values were computed once and are written out; the second pins UTF-8 (not UTF-16, not
    /// characters) as the bytes that are hashed.
    #[test]
    fn fbclid_key_is_stable() {
        assert_eq!(
            fbclid_key("IwAR3q9Zx7LbKc2Wm8fT1vYp0sN4hJdEuGaR5oQiXkMzB6nCyVtPlSwHeUjFrD"),
            0x3dac_e438_78d6_7596_459c_0b1b_b559_06df
        );
        assert_eq!(
            fbclid_key("fbclid-é"),
            0x70cf_3da5_4c15_9dd8_d529_bfd4_bc9c_905a
        );
    }
}
