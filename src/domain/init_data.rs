//! A Telegram Mini App's `initData` (`Telegram.WebApp.initData`), checked as Telegram documents
//! it, and what it says: the Telegram user and the `start_param` the Mini App was opened with.
//!
//! The string is signed with the bot's token, so it is the Mini App's credential: a browser never
//! holds the space's secret. Telegram's "Validating data received via the Mini App"
//! (<https://core.telegram.org/bots/webapps#validating-data-received-via-the-mini-app>):
//!
//! > You can verify the integrity of the data received by comparing the received hash parameter
//! > with the hexadecimal representation of the HMAC-SHA-256 signature of the data-check-string
//! > with the secret key, which is the HMAC-SHA-256 signature of the bot's token with the
//! > constant string WebAppData used as a key.
//! >
//! > Data-check-string is a chain of all received fields, sorted alphabetically, in the format
//! > key=<value> with a line feed character ('\n', 0x0A) used as separator
//!
//! > To prevent the use of outdated data, you can additionally check the auth_date field, which
//! > contains a Unix timestamp of when it was received by the Mini App.

use hmac::{KeyInit as _, Mac as _};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::domain::click::parse_tg_id;
use crate::domain::event::{Freshness, Stale};
use crate::domain::input;
use crate::domain::uid;
use crate::error::{Code, Error};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The field of a request that carries `initData`, named in every error about it.
pub const FIELD: &str = "init_data";

/// What a checked `initData` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MiniAppUser {
    /// `user.id`: the Telegram user who opened the Mini App.
    pub tg_id: u64,
    /// `start_param`: what followed `startapp=` in the link that opened it, as sent.
    pub start_param: Option<String>,
}

impl MiniAppUser {
    /// The `start_param` as a click's `uid`: what a tracking link's target puts there.
    ///
    /// # Errors
    /// `missing_field` without one, `invalid_uid` for one that is not a `uid`.
    pub fn uid(&self) -> Result<String, Error> {
        match &self.start_param {
            Some(param) => uid::check(param.clone(), FIELD),
            None => Err(Error::field(
                Code::MissingField,
                FIELD,
                "`init_data` has no start_param: open the Mini App through a tracking link whose \
                 target ends in startapp={uid}",
            )),
        }
    }
}

/// The body of `POST /miniapp/<space>/bind`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MiniAppBindBody<'a> {
    /// `Telegram.WebApp.initData`, exactly as the Mini App got it: signed by the space's bot,
    /// its `start_param` the click's `uid`.
    #[serde(borrow)]
    #[schemars(with = "String", length(min = 1))]
    init_data: Option<&'a RawValue>,
}

/// The body of `POST /miniapp/<space>/events`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MiniAppEventBody<'a> {
    /// `Telegram.WebApp.initData`, exactly as the Mini App got it.
    #[serde(borrow)]
    #[schemars(with = "String", length(min = 1))]
    init_data: Option<&'a RawValue>,
    /// `contact` or `registration`: a browser sends no money.
    #[serde(borrow)]
    #[schemars(with = "String", pattern(r"^(contact|registration)$"))]
    event: Option<&'a RawValue>,
    /// The sender's own event id: permanent dedup key with `event`.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        length(min = 1, max = 256),
        pattern(r"^[!-~]+$")
    )]
    eid: Option<&'a RawValue>,
}

/// A Mini App's request body, read: its `initData` and, for an event, the event's fields.
#[derive(Debug, Default)]
pub struct MiniAppRequest {
    pub init_data: String,
    pub event: Option<String>,
    pub eid: Option<String>,
}

impl MiniAppRequest {
    /// Reads a `POST /miniapp/<space>/bind` body.
    ///
    /// # Errors
    /// `invalid_json` for a body that is not the object, `missing_field` without `init_data`.
    pub fn bind_from_json(body: &[u8]) -> Result<MiniAppRequest, Error> {
        let b: MiniAppBindBody = input::parse_body(body)?;
        Ok(MiniAppRequest {
            init_data: required_init_data(b.init_data)?,
            ..MiniAppRequest::default()
        })
    }

    /// Reads a `POST /miniapp/<space>/events` body; the event's own fields are checked as
    /// `POST /events` checks them.
    ///
    /// # Errors
    /// As [`MiniAppRequest::bind_from_json`], and `invalid_json` for a field of another type.
    pub fn event_from_json(body: &[u8]) -> Result<MiniAppRequest, Error> {
        let b: MiniAppEventBody = input::parse_body(body)?;
        let string =
            |raw: Option<&RawValue>, name| raw.map(|r| input::json_string(r, name)).transpose();
        Ok(MiniAppRequest {
            init_data: required_init_data(b.init_data)?,
            event: string(b.event, "event")?,
            eid: string(b.eid, "eid")?,
        })
    }
}

fn required_init_data(raw: Option<&RawValue>) -> Result<String, Error> {
    match raw.map(|r| input::json_string(r, FIELD)).transpose()? {
        Some(text) if !text.is_empty() => Ok(text),
        _ => Err(Error::field(
            Code::MissingField,
            FIELD,
            "`init_data` (Telegram.WebApp.initData, as it is) is required",
        )),
    }
}

/// The one answer to a signature that does not hold, whatever the reason, so a forger learns
/// nothing about which part failed.
#[must_use]
pub fn not_signed() -> Error {
    Error::unauthorized("`init_data` is not signed by this space's Telegram bot")
}

/// Checks `init_data` with `bot_token` and reads its user and `start_param`.
///
/// # Errors
/// `unauthorized` for a missing or wrong `hash`, a field given twice, and an `auth_date` that is
/// missing, older than `max_age_ms` or ahead of now by more than `max_skew_ms`;
/// `missing_field` or `invalid_tg_id` (naming `init_data`) for signed data without a usable
/// `user.id`.
pub fn verify(init_data: &str, bot_token: &str, at: Freshness) -> Result<MiniAppUser, Error> {
    let mut fields: Vec<(String, String)> = url::form_urlencoded::parse(init_data.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    fields.sort();
    if fields.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return Err(not_signed());
    }
    let at_hash = fields
        .iter()
        .position(|(k, _)| k == "hash")
        .ok_or_else(not_signed)?;
    let (_, hash) = fields.remove(at_hash);
    let hash = hex::decode(hash).map_err(|_| not_signed())?;
    let data_check_string = fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("\n");
    signer(bot_token)
        .chain_update(&data_check_string)
        // `verify_slice` compares in constant time.
        .verify_slice(&hash)
        .map_err(|_| not_signed())?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    check_auth_date(field("auth_date"), at)?;
    let user = field("user").ok_or_else(|| {
        Error::field(
            Code::MissingField,
            FIELD,
            "`init_data` has no user: send Telegram.WebApp.initData of a Mini App opened by a user",
        )
    })?;
    Ok(MiniAppUser {
        tg_id: user_id(user)?,
        start_param: field("start_param").map(str::to_owned),
    })
}

/// The HMAC whose key is the secret key of `bot_token`: `HMAC_SHA256(<bot_token>, "WebAppData")`
/// in Telegram's notation, the bot's token signed with the key `WebAppData`.
fn signer(bot_token: &str) -> HmacSha256 {
    let secret_key = keyed(b"WebAppData")
        .chain_update(bot_token)
        .finalize()
        .into_bytes();
    keyed(&secret_key)
}

fn keyed(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length")
}

/// `auth_date`, Unix seconds, within `miniapp_max_age` before now and `max_clock_skew` after.
fn check_auth_date(auth_date: Option<&str>, at: Freshness) -> Result<(), Error> {
    let signed_ms = auth_date
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(not_signed)?
        .saturating_mul(1000);
    match at.check(signed_ms) {
        Ok(()) => Ok(()),
        Err(Stale::Ahead) => Err(Error::unauthorized(
            "`init_data` is dated in the future: check this server's clock",
        )),
        Err(Stale::TooOld) => Err(Error::unauthorized(
            "`init_data` is older than miniapp_max_age: reopen the Mini App",
        )),
    }
}

/// `user`'s `id`, from the JSON object Telegram serializes into it.
fn user_id(user: &str) -> Result<u64, Error> {
    #[derive(Deserialize)]
    struct User {
        id: Option<serde_json::Number>,
    }
    let id = serde_json::from_str::<User>(user)
        .ok()
        .and_then(|u| u.id)
        .ok_or_else(|| {
            Error::field(
                Code::MissingField,
                FIELD,
                "`init_data`'s user has no id: send Telegram.WebApp.initData as it is",
            )
        })?;
    parse_tg_id(&id.to_string(), FIELD)
}

/// `initData` as Telegram signs it: the fields, `auth_date` and the `hash` of them all under
/// `bot_token`, form-encoded. For tests and the benchmark, which stand in for Telegram.
#[must_use]
pub fn sign(fields: &[(&str, &str)], bot_token: &str) -> String {
    let mut sorted: Vec<(&str, &str)> = fields.to_vec();
    sorted.sort_unstable();
    let data_check_string = sorted
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("\n");
    let hash = signer(bot_token)
        .chain_update(&data_check_string)
        .finalize()
        .into_bytes();
    let mut encoded = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields {
        encoded.append_pair(k, v);
    }
    encoded.append_pair("hash", &hex::encode(hash));
    encoded.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
    const NOW_S: u64 = 1_790_000_000;
    const DAY_MS: u64 = 86_400_000;

    fn at(now_s: u64) -> Freshness {
        Freshness {
            now_ms: now_s * 1000,
            max_age_ms: DAY_MS,
            max_skew_ms: 600_000,
        }
    }

    fn signed(auth_date: u64) -> String {
        let date = auth_date.to_string();
        sign(
            &[
                ("query_id", "AAHdF6IQAAAAAN0XohDhrOrc"),
                ("user", r#"{"id":279058397,"first_name":"Vlad & co"}"#),
                ("auth_date", &date),
                ("start_param", "Ab3_x"),
            ],
            TOKEN,
        )
    }

    #[test]
    fn data_signed_with_the_token_gives_its_user_and_start_param() {
        let user = verify(&signed(NOW_S), TOKEN, at(NOW_S)).unwrap();
        assert_eq!(user.tg_id, 279_058_397);
        assert_eq!(user.uid().unwrap(), "Ab3_x");
    }

    #[test]
    fn the_check_follows_telegrams_recipe_on_a_string_signed_elsewhere() {
        // Signed by hand, as Telegram's page describes, with another token: the hash of
        // "auth_date=1790000000\nuser={\"id\":5}" under HMAC(HMAC("WebAppData", token)).
        let token = "123:abc";
        let secret = HmacSha256::new_from_slice(b"WebAppData")
            .unwrap()
            .chain_update(token)
            .finalize()
            .into_bytes();
        let hash = HmacSha256::new_from_slice(&secret)
            .unwrap()
            .chain_update("auth_date=1790000000\nuser={\"id\":5}")
            .finalize()
            .into_bytes();
        let data = format!(
            "user=%7B%22id%22%3A5%7D&hash={}&auth_date=1790000000",
            hex::encode(hash)
        );
        assert_eq!(verify(&data, token, at(NOW_S)).unwrap().tg_id, 5);
    }

    #[test]
    fn a_forged_or_unsigned_string_is_unauthorized() {
        let good = signed(NOW_S);
        let forged = good.replace("279058397", "279058398");
        let unsigned = good.split("&hash=").next().unwrap().to_owned();
        let twice = format!("{good}&auth_date={NOW_S}");
        for data in [forged, unsigned, twice, String::new(), "hash=zz".into()] {
            let e = verify(&data, TOKEN, at(NOW_S)).unwrap_err();
            assert_eq!(e.code, Code::Unauthorized, "{data}");
        }
        let e = verify(&good, "7000000001:other", at(NOW_S)).unwrap_err();
        assert_eq!(e.code, Code::Unauthorized);
    }

    #[test]
    fn auth_date_is_bounded_by_max_age_and_clock_skew() {
        let day_s = DAY_MS / 1000;
        assert!(verify(&signed(NOW_S - day_s), TOKEN, at(NOW_S)).is_ok());
        let old = verify(&signed(NOW_S - day_s - 1), TOKEN, at(NOW_S)).unwrap_err();
        assert_eq!(old.code, Code::Unauthorized);
        assert!(old.message.contains("miniapp_max_age"), "{}", old.message);
        assert!(verify(&signed(NOW_S + 600), TOKEN, at(NOW_S)).is_ok());
        let ahead = verify(&signed(NOW_S + 601), TOKEN, at(NOW_S)).unwrap_err();
        assert_eq!(ahead.code, Code::Unauthorized);
        assert!(ahead.message.contains("future"), "{}", ahead.message);
    }

    #[test]
    fn signed_data_without_a_user_or_uid_names_init_data() {
        let date = NOW_S.to_string();
        let no_user = sign(&[("auth_date", &date)], TOKEN);
        let e = verify(&no_user, TOKEN, at(NOW_S)).unwrap_err();
        assert_eq!((e.code, e.field), (Code::MissingField, Some(FIELD)));
        let no_param = sign(&[("auth_date", &date), ("user", r#"{"id":7}"#)], TOKEN);
        let user = verify(&no_param, TOKEN, at(NOW_S)).unwrap();
        assert_eq!(user.uid().unwrap_err().code, Code::MissingField);
        let zero = sign(&[("auth_date", &date), ("user", r#"{"id":0}"#)], TOKEN);
        let e = verify(&zero, TOKEN, at(NOW_S)).unwrap_err();
        assert_eq!((e.code, e.field), (Code::InvalidTgId, Some(FIELD)));
    }
}
