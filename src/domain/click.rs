//! Clicks and bindings: the field rules of `docs/api.md#post-clicks` and `#post-bind`.
//!
//! A back-filled click carries up to four strings, each with its bound. A binding names a click
//! `uid` and a Telegram user id: a positive integer up to 2^53-1 (the largest integer every JSON
//! parser holds exactly), sent as a JSON integer or a string of digits.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
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
    /// The other ad platforms' click ids, and Meta's browser id.
    pub ids: ClickIds,
    /// The visitor's address and user agent, from a link visit (and a prelander's `fbc`, from
    /// `POST /clicks`): kept only in a space with `meta_client_hints` on (the writer decides),
    /// else dropped.
    pub hints: Option<ClientHints>,
    /// The target of a split link the visit went to (`domain::split`): its place in the
    /// link's `targets`.
    pub variant: Option<u8>,
}

/// The ids a click carries besides `fbclid`, each stored with the click and shown with its
/// events: the ad platforms' click ids ([`AD_CLICK_IDS`]), each bounded as `fbclid` is
/// ([`CLICK_ID_MAX_CHARS`]), and Meta's browser id `fbp` (the `_fbp` cookie of a prelander
/// that runs Meta's pixel, [`meta_cookie`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickIds {
    /// The ad platforms' click ids the click brought, by [`AdClickId::name`].
    pub ad: BTreeMap<String, String>,
    pub fbp: Option<String>,
}

impl ClickIds {
    /// The click id `name` ([`AdClickId::name`]), where the click brought one.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.ad.get(name).map(String::as_str)
    }

    /// The click id `name`, as an event shows it.
    #[must_use]
    pub fn owned(&self, name: &str) -> Option<String> {
        self.ad.get(name).cloned()
    }

    /// Keeps `id` as the click id `name`, or none (`None`).
    pub fn set(&mut self, name: &str, id: Option<String>) {
        match id {
            Some(id) => self.ad.insert(name.to_owned(), id),
            None => self.ad.remove(name),
        };
    }
}

/// An ad platform's click id besides `fbclid`: the id its ads add to the landing page's
/// address, kept with the click so that its platform can match the click's events to an ad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdClickId {
    /// The field of `POST /clicks` and of an event in the feed that holds it.
    pub name: &'static str,
    /// The query parameter of a link visit that carries it, as the platform writes it.
    pub param: &'static str,
    /// Its tag in a stored click: stored, so never renumbered (4 is `fbp`'s).
    pub tag: u32,
    /// The kind of destination (`platform::Kind`) that matches events by it.
    pub platform: &'static str,
}

/// The ad platforms' click ids other than `fbclid`: a new one is a line here, and a field of
/// `POST /clicks` and of the feed.
#[rustfmt::skip]
pub const AD_CLICK_IDS: [AdClickId; 5] = [
    AdClickId { name: "ttclid", param: "ttclid", tag: 0, platform: "tiktok_events" },
    AdClickId { name: "gclid", param: "gclid", tag: 1, platform: "google_ads" },
    AdClickId { name: "gbraid", param: "gbraid", tag: 2, platform: "google_ads" },
    AdClickId { name: "wbraid", param: "wbraid", tag: 3, platform: "google_ads" },
    AdClickId { name: "sccid", param: "ScCid", tag: 5, platform: "snap_capi" },
];

/// The stored tag of Meta's browser id `fbp` among a click's ids ([`AdClickId::tag`]).
pub const FBP_TAG: u32 = 4;

/// The most characters of a click id: `fbclid`, and every other ad platform's (their
/// documented ids are a few dozen to a few hundred characters).
pub const CLICK_ID_MAX_CHARS: usize = 512;

/// What the visitor's browser says about them, for Meta's matching: the address and user agent
/// of a link visit, or what a prelander sent with `POST /clicks` (it may send any of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientHints {
    pub ip: Option<std::net::IpAddr>,
    /// At most [`MAX_USER_AGENT`] characters (a link visit's is cut to it).
    pub user_agent: Option<String>,
    /// Meta's click cookie (`_fbc`) as the prelander's pixel set it, sent instead of the one
    /// made from the click's `fbclid`.
    pub fbc: Option<String>,
}

/// The longest user agent kept; real ones are a few hundred characters.
pub const MAX_USER_AGENT: usize = 512;

/// How long the visitors' hints of a click are kept: Meta takes events up to 7 days old, so a
/// hint is of no use after that.
pub const HINTS_KEPT_MS: u64 = 7 * 24 * 3_600_000;

/// The most characters of Meta's cookies `fbp` (`fb.1.<ms>.<random digits>`, about 30) and
/// `fbc` (`fb.1.<ms>.<fbclid>`, with an fbclid of up to [`CLICK_ID_MAX_CHARS`]).
pub const FBP_MAX_CHARS: usize = 256;
pub const FBC_MAX_CHARS: usize = 600;

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
    /// An ad platform's click id, `ttclid`.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CLICK_ID_MAX_CHARS))]
    #[allow(dead_code)]
    ttclid: Option<&'a RawValue>,
    /// Google's click id.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CLICK_ID_MAX_CHARS))]
    #[allow(dead_code)]
    gclid: Option<&'a RawValue>,
    /// Google's click id of an iOS app campaign.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CLICK_ID_MAX_CHARS))]
    #[allow(dead_code)]
    gbraid: Option<&'a RawValue>,
    /// Google's click id of an iOS web campaign.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CLICK_ID_MAX_CHARS))]
    #[allow(dead_code)]
    wbraid: Option<&'a RawValue>,
    /// Snapchat's click id, the `ScCid` its ads add to a landing page's address.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CLICK_ID_MAX_CHARS))]
    #[allow(dead_code)]
    sccid: Option<&'a RawValue>,

    /// Meta's browser id, the prelander's `_fbp` cookie: `fb.` and visible ASCII.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = FBP_MAX_CHARS), pattern(r"^(fb\.[!-~]*)?$"))]
    fbp: Option<&'a RawValue>,
    /// Meta's click id cookie as the prelander's pixel set it (`_fbc`): `fb.` and visible
    /// ASCII. A hint: kept 7 days, only where the space keeps hints (`meta_client_hints`).
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = FBC_MAX_CHARS), pattern(r"^(fb\.[!-~]*)?$"))]
    fbc: Option<&'a RawValue>,
    /// The visitor's IP address (v4 or v6), as the prelander saw it. A hint, as `fbc` is.
    #[serde(borrow)]
    #[schemars(with = "Option<String>")]
    client_ip: Option<&'a RawValue>,
    /// The visitor's user agent, as the prelander saw it. A hint, as `fbc` is.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = MAX_USER_AGENT))]
    user_agent: Option<&'a RawValue>,
}

/// The most characters a campaign's name has, wherever one is given: a click, a link, a cost,
/// a stats filter.
pub const CAMPAIGN_NAME_MAX_CHARS: usize = 256;

/// The bound on each click field, in characters.
pub const CLICK_FIELD_BOUNDS: [(&str, usize); 4] = [
    ("link_slug", 128),
    ("fbclid", CLICK_ID_MAX_CHARS),
    ("campaign_name", CAMPAIGN_NAME_MAX_CHARS),
    ("raw_query", 4096),
];

impl NewClick {
    /// Reads and checks a `POST /clicks` body. An empty string counts as absent.
    pub fn from_json(body: &[u8], now_ms: u64) -> Result<NewClick, Error> {
        let b: ClickBody = input::parse_body(body)?;
        let [slug, fbclid, campaign, raw_query] = CLICK_FIELD_BOUNDS;
        let id = |raw, field| bounded(raw, (field, CLICK_ID_MAX_CHARS));
        let cookie = |raw, field, max| {
            bounded(raw, (field, max))?
                .map(|text| meta_cookie(text, field, max))
                .transpose()
        };
        let ip = bounded(b.client_ip, ("client_ip", 64))?
            .map(|text| {
                text.parse::<std::net::IpAddr>().map_err(|_| {
                    Error::field(
                        Code::InvalidField,
                        "client_ip",
                        format!(
                            "`client_ip` must be an IPv4 or IPv6 address, got {}",
                            quoted(&text)
                        ),
                    )
                })
            })
            .transpose()?;
        let hints = ClientHints {
            ip,
            user_agent: bounded(b.user_agent, ("user_agent", MAX_USER_AGENT))?,
            fbc: cookie(b.fbc, "fbc", FBC_MAX_CHARS)?,
        };
        let any_hint = hints.ip.is_some() || hints.user_agent.is_some() || hints.fbc.is_some();
        Ok(NewClick {
            link_slug: bounded(b.link_slug, slug)?,
            fbclid: bounded(b.fbclid, fbclid)?,
            campaign_name: bounded(b.campaign_name, campaign)?,
            raw_query: bounded(b.raw_query, raw_query)?,
            clicked_at_ms: now_ms,
            ids: {
                let mut ids = ClickIds {
                    fbp: cookie(b.fbp, "fbp", FBP_MAX_CHARS)?,
                    ..ClickIds::default()
                };
                // Read by the list of click ids; `ClickBody` names each for the schema and
                // refuses an unknown field.
                let members: BTreeMap<String, &RawValue> = input::parse_body(body)?;
                for click_id in AD_CLICK_IDS {
                    ids.set(
                        click_id.name,
                        id(members.get(click_id.name).copied(), click_id.name)?,
                    );
                }
                ids
            },
            hints: any_hint.then_some(hints),
            variant: None,
        })
    }
}

/// Meta's cookies `fbp` and `fbc` (`fb.<n>.<ms>.<value>`, maybe with more after): `fb.` and
/// then visible ASCII, at most `max` characters. The parts are not checked one by one: Meta
/// has added to the format before, and what a pixel set is what Meta wants back.
pub fn meta_cookie(text: String, field: &'static str, max: usize) -> Result<String, Error> {
    within_bound(&text, (field, max))?;
    if text.starts_with("fb.") && text.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(text)
    } else {
        Err(Error::field(
            Code::InvalidField,
            field,
            format!(
                "`{field}` must be Meta's cookie value as its pixel set it (`fb.1.<time>.<id>`): \
                 `fb.` and then letters, digits and punctuation, got {}",
                quoted(&text)
            ),
        ))
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
    #[serde(borrow)]
    #[schemars(with = "input::UidJson")]
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
                ids: ClickIds::default(),
                hints: None,
                variant: None,
            }
        );
        assert_eq!(click(r#"{"fbclid":""}"#).unwrap().fbclid, None);
    }

    /// Each ad platform's click id is bounded as `fbclid` is, and stored as sent.
    #[test]
    fn click_id_bounds() {
        for field in AD_CLICK_IDS.map(|id| id.name) {
            let inside = format!(r#"{{"{field}":"{}"}}"#, "é".repeat(CLICK_ID_MAX_CHARS));
            let ids = click(&inside).unwrap().ids;
            assert_eq!(
                ids.get(field),
                Some("é".repeat(CLICK_ID_MAX_CHARS).as_str())
            );
            let outside = format!(r#"{{"{field}":"{}"}}"#, "a".repeat(CLICK_ID_MAX_CHARS + 1));
            let err = click(&outside).unwrap_err();
            assert_eq!((err.code, err.field), (Code::InvalidField, Some(field)));
            assert_eq!(
                click(&format!(r#"{{"{field}":""}}"#)).unwrap().ids,
                ClickIds::default()
            );
        }
    }

    /// `fbp` and `fbc`: `fb.` and visible ASCII, at most their bound.
    #[test]
    fn meta_cookie_bounds() {
        for (field, max) in [("fbp", FBP_MAX_CHARS), ("fbc", FBC_MAX_CHARS)] {
            let at = |len: usize| format!(r#"{{"{field}":"fb.1.{}"}}"#, "7".repeat(len - 5));
            assert!(click(&at(max)).is_ok(), "{field} at {max}");
            let err = click(&at(max + 1)).unwrap_err();
            assert_eq!((err.code, err.field), (Code::InvalidField, Some(field)));
            for bad in ["fb1.1.2", "FB.1.2", "fb.1.2 3", "fb.1.é", "x"] {
                let err = click(&format!(r#"{{"{field}":"{bad}"}}"#)).unwrap_err();
                assert_eq!(
                    (err.code, err.field),
                    (Code::InvalidField, Some(field)),
                    "{bad}"
                );
            }
        }
        let c = click(r#"{"fbp":"fb.1.1700000000000.1234567890"}"#).unwrap();
        assert_eq!(c.ids.fbp.as_deref(), Some("fb.1.1700000000000.1234567890"));
        assert_eq!(c.hints, None, "fbp is the click's, not a hint");
        let c = click(r#"{"fbc":"fb.1.1700000000000.IwAR1"}"#).unwrap();
        assert_eq!(
            c.hints.unwrap().fbc.as_deref(),
            Some("fb.1.1700000000000.IwAR1")
        );
    }

    /// `client_ip` is an address, `user_agent` at most [`MAX_USER_AGENT`] characters; either
    /// alone makes hints.
    #[test]
    fn prelander_hint_bounds() {
        for ip in ["203.0.113.7", "2001:db8::1", "::ffff:198.51.100.1"] {
            let c = click(&format!(r#"{{"client_ip":"{ip}"}}"#)).unwrap();
            assert_eq!(c.hints.unwrap().ip, Some(ip.parse().unwrap()), "{ip}");
        }
        for bad in [
            "203.0.113.256",
            "203.0.113",
            "host.example",
            "[2001:db8::1]",
        ] {
            let err = click(&format!(r#"{{"client_ip":"{bad}"}}"#)).unwrap_err();
            assert_eq!(
                (err.code, err.field),
                (Code::InvalidField, Some("client_ip")),
                "{bad}"
            );
        }
        let agent = |n: usize| format!(r#"{{"user_agent":"{}"}}"#, "é".repeat(n));
        let hints = click(&agent(MAX_USER_AGENT)).unwrap().hints.unwrap();
        assert_eq!(hints.user_agent.unwrap().chars().count(), MAX_USER_AGENT);
        let err = click(&agent(MAX_USER_AGENT + 1)).unwrap_err();
        assert_eq!(
            (err.code, err.field),
            (Code::InvalidField, Some("user_agent"))
        );
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
