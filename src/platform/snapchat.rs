//! Snapchat's Conversions API (v3), whole: a `snap_capi` destination's settings and their
//! rules, the event it sends for each of the tracker's, its request, and what Snap's answer
//! means.
//!
//! Snap's page "Using the API" (developers.snap.com/api/marketing-api/Conversions-API/
//! UsingTheAPI): `POST https://tr.snapchat.com/v3/{PIXEL_ID}/events?access_token={TOKEN}`, a
//! body of `{"data": [...]}`, each event with `event_name`, `event_time`, `action_source`,
//! `user_data` and, for a purchase, `custom_data` `value` and `currency`. Its "Parameters" page
//! names `sc_click_id` (the `ScCid` its ads add to a landing page's address, sent as it came)
//! and `external_id` (hashed, SHA-256) among the user data. Its introduction: "events can have
//! a date (timestamp) of maximum 37 days back to be eligible to be reported". Snap names no
//! event of a refused request, so a refusal is searched by halves (`halves.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ad_rules::{
    ACCESS_TOKEN, API_URL, AdRules, CURRENCY_RATES, EVENT_NAMES, access_token, base_url,
    platform_event_id, sha256_hex,
};
use super::address::is_private;
use super::currency::iso_value;
use super::delivery::{Outcome, outcome_of};
use super::face::{Answer, ClickFacts, Platform, Request, Sending, THROTTLE_WAIT_MS};
use super::given::{DestinationFields, Field, missing};
use crate::domain::click::ClientHints;
use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::domain::secret::Secret;
use crate::error::{Code, Error};

/// Snap's Conversions API, where a `snap_capi` destination sends unless told otherwise.
pub const DEFAULT_SNAP_API_URL: &str = "https://tr.snapchat.com";

/// Snap takes an event up to 37 days after it happened; an hour is left for the request to
/// arrive.
pub const SNAP_SEND_WITHIN_MS: u64 = 37 * 24 * 3_600_000 - 3_600_000;

/// The most events one request to Snap carries: well under the 2000 its schema allows, as
/// Meta's and `TikTok`'s batches are.
pub const SNAP_BATCH: usize = 1000;

/// Where the conversions happen: in a Telegram chat with the bot, not on a web page or in an
/// app. Snap's offline events are those "outside of digital channels", chat-based sales among
/// them ("Offline Events" page).
pub const SNAP_ACTION_SOURCE: &str = "OFFLINE";

/// Snap's standard event names, as its "Parameters" page lists them: the only names it takes.
const SNAP_EVENT_NAMES: [&str; 30] = [
    "PAGE_VIEW",
    "VIEW_CONTENT",
    "ADD_CART",
    "ADD_TO_WISHLIST",
    "SIGN_UP",
    "SEARCH",
    "PURCHASE",
    "ADD_BILLING",
    "COMPLETE_TUTORIAL",
    "SUBSCRIBE",
    "AD_CLICK",
    "AD_VIEW",
    "START_CHECKOUT",
    "RATE",
    "LIST_VIEW",
    "ADD_TO_CART",
    "LEVEL_COMPLETE",
    "ACHIEVEMENT_UNLOCKED",
    "SPEND_CREDITS",
    "SAVE",
    "SHARE",
    "INVITE",
    "LOGIN",
    "RESERVE",
    "START_TRIAL",
    "CUSTOM_EVENT_1",
    "CUSTOM_EVENT_2",
    "CUSTOM_EVENT_3",
    "CUSTOM_EVENT_4",
    "CUSTOM_EVENT_5",
];

/// Snap's Conversions API: the pixel and the token that may send to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snap {
    /// The Snap Pixel's id (a UUID), in the request's path.
    pub pixel_id: String,
    /// Sent as the `access_token` query parameter, as Snap documents it.
    pub access_token: Secret,
    /// The API's base address, without a trailing `/`.
    pub api_url: String,
    pub rules: AdRules,
}

impl Snap {
    /// The settings given in `f`, checked by Snap's rules.
    fn check_fields(f: &DestinationFields, allow_private: bool) -> Result<Snap, Error> {
        let pixel_id = f.text("pixel_id").ok_or_else(|| {
            missing(
                "pixel_id",
                "(the Snap Pixel's id from Snapchat's Events Manager)",
            )
        })?;
        if !(1..=64).contains(&pixel_id.len())
            || !pixel_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(Error::field(
                Code::InvalidField,
                "pixel_id",
                format!(
                    "pixel_id is Snap's pixel id, 1 to 64 letters, digits and '-', got {}",
                    quoted(&pixel_id)
                ),
            ));
        }
        let access_token = access_token(
            f.text("access_token"),
            "(a Conversions API token from Snapchat's Events Manager)",
        )?;
        let api_url = base_url(
            "api_url",
            f.text("api_url").as_deref().unwrap_or(DEFAULT_SNAP_API_URL),
            allow_private,
        )?;
        let rules = AdRules::from_fields(f)?;
        if let Some((kind, name)) = rules
            .event_names
            .0
            .iter()
            .find(|(_, name)| !SNAP_EVENT_NAMES.contains(&name.as_str()))
        {
            return Err(Error::field(
                Code::InvalidField,
                "event_names",
                format!(
                    "event_names: Snap takes only its standard events (SIGN_UP, PURCHASE, \
                     SUBSCRIBE, CUSTOM_EVENT_1, ...), got {} for {kind}",
                    quoted(name)
                ),
            ));
        }
        Ok(Snap {
            pixel_id,
            access_token,
            api_url,
            rules,
        })
    }
}

impl Platform for Snap {
    fn fields() -> &'static [Field] {
        &[
            Field {
                name: "pixel_id",
                required: true,
                label: "Snap Pixel id",
                help: "Snapchat Events Manager: the Snap Pixel's id.",
                schema: r#"{"type": ["string", "null"], "pattern": "^([A-Za-z0-9-]{1,64})?$"}"#,
                ..Field::TEXT
            },
            Field {
                help: "Snapchat Events Manager: the pixel's Conversions API tokens, Generate \
                       token.",
                ..ACCESS_TOKEN
            },
            Field {
                default: Some(DEFAULT_SNAP_API_URL),
                ..API_URL
            },
            Field {
                help: "The event name sent for each kind of event: contact, subscribed, \
                       registration, deposit or first_deposit, such as deposit=PURCHASE: one \
                       of Snap's standard events (SIGN_UP, PURCHASE, SUBSCRIBE, \
                       CUSTOM_EVENT_1, ...).",
                default: Some(
                    "contact CUSTOM_EVENT_1, subscribed SUBSCRIBE, registration SIGN_UP, \
                     deposit PURCHASE",
                ),
                ..EVENT_NAMES
            },
            CURRENCY_RATES,
        ]
    }

    fn title() -> &'static str {
        "Snapchat Conversions API"
    }

    fn sending() -> Sending {
        Sending::Together { batch: SNAP_BATCH }
    }

    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Snap, Error> {
        Snap::check_fields(f, allow_private)
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_text("pixel_id", Some(self.pixel_id.clone()));
        f.set_text("access_token", Some(self.access_token.expose().to_owned()));
        f.set_text("api_url", Some(self.api_url.clone()));
        self.rules.fields_of(f);
    }

    fn moved_address(&self, before: &Snap) -> Option<&'static str> {
        (self.api_url != before.api_url).then_some("api_url")
    }

    fn token(&self) -> &str {
        self.access_token.expose()
    }

    fn address(&self) -> &str {
        &self.api_url
    }

    fn matches(&self, click: ClickFacts) -> bool {
        click.has_id_for("snap_capi")
    }

    /// An event Snap could not take (too old, nothing to match, a currency without a rate) is
    /// refused here.
    fn entry(
        &self,
        event: &FeedEvent,
        hints: Option<&ClientHints>,
        space_rates: &CurrencyRates,
        now_ms: u64,
    ) -> Result<Value, String> {
        if now_ms.saturating_sub(event.occurred_at_ms) > SNAP_SEND_WITHIN_MS {
            return Err(
                "not sent: the event happened more than 37 days less one hour ago, \
                        and Snap takes no event older than 37 days"
                    .to_owned(),
            );
        }
        snap_event(event, hints, &self.rules.in_space(space_rates))
    }

    /// The token goes in the query, where Snap documents it; the log and every answer shown
    /// redact a URL's `token=`.
    fn request_of(&self, entries: &[Value], _test_code: Option<&str>) -> Option<Request> {
        let url = format!(
            "{}/v3/{}/events?access_token={}",
            self.api_url,
            self.pixel_id,
            url::form_urlencoded::byte_serialize(self.access_token.expose().as_bytes())
                .collect::<String>()
        );
        let body = serde_json::to_vec(&json!({ "data": entries })).unwrap_or_default();
        Some(Request::post_json(url, Vec::new(), body))
    }

    fn judge(&self, status: u16, body: &str) -> Answer {
        snap_answer(status, body)
    }

    fn took(&self, status: u16, body: &str) -> bool {
        snap_answer(status, body) == Answer::Delivered
    }
}

/// Snap's standard event for each of the tracker's event kinds; a contact has none of its own.
fn snap_standard_name(event: &str) -> &'static str {
    match event {
        "contact" => "CUSTOM_EVENT_1",
        "subscribed" => "SUBSCRIBE",
        "registration" => "SIGN_UP",
        _ => "PURCHASE",
    }
}

/// One entry of a request's `data`; or why the event cannot be sent to Snap at all: nothing
/// it could match the event to, a currency without a rate.
fn snap_event(
    event: &FeedEvent,
    hints: Option<&ClientHints>,
    rules: &AdRules,
) -> Result<Value, String> {
    let mut user = Map::new();
    if let Some(sccid) = &event.sccid {
        user.insert("sc_click_id".into(), json!(sccid));
    }
    if let Some(tg) = event.tg_id {
        user.insert("external_id".into(), json!([sha256_hex(&tg.to_string())]));
    }
    if let Some(h) = hints {
        // A private address is a proxy's, never the visitor's.
        if let Some(ip) = h.ip.filter(|ip| !is_private(*ip)) {
            user.insert("client_ip_address".into(), json!(ip.to_string()));
        }
        if let Some(agent) = &h.user_agent {
            user.insert("client_user_agent".into(), json!(agent));
        }
    }
    if user.is_empty() {
        return Err(
            "not sent: the event has no ScCid, Telegram id or visitor hints for Snap to match"
                .into(),
        );
    }
    let name = rules.event_names.name_or(
        &event.event,
        event.first_deposit == Some(true),
        snap_standard_name,
    );
    let mut e = json!({
        "event_name": name,
        "event_time": event.occurred_at_ms / 1000,
        "event_id": platform_event_id(event),
        "action_source": SNAP_ACTION_SOURCE,
        "user_data": user,
    });
    if event.event == "deposit" {
        e["custom_data"] = iso_value(event, &rules.currency_rates, "Snap")?;
    }
    Ok(e)
}

/// What an answer of `status` with `body` from Snap's Conversions API means: a `2xx` whose
/// `status` is `SUCCESS` took the events; `401` and `403` say the token no longer works;
/// `429` is a throttle; `5xx` and a timeout are worth another try; any other `4xx` refused the
/// request.
fn snap_answer(status: u16, body: &str) -> Answer {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let said = |key: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (state, reason) = (said("status"), said("reason"));
    let message = if reason.is_empty() {
        format!("Snap: {}", body.chars().take(300).collect::<String>())
    } else {
        format!("Snap: {reason}")
    };
    match status {
        401 | 403 => return Answer::TokenRejected { message },
        429 => {
            return Answer::Retry {
                after_ms: Some(THROTTLE_WAIT_MS),
            };
        }
        _ => {}
    }
    match outcome_of(status) {
        Outcome::Delivered if state == "SUCCESS" => Answer::Delivered,
        // A 2xx that is not Snap's answer (a proxy's page, an `api_url` that is not Snap's)
        // took nothing, and is tried again rather than counted delivered.
        Outcome::Delivered | Outcome::Failed | Outcome::Held => Answer::Retry { after_ms: None },
        Outcome::Refused => Answer::Refused {
            named: Vec::new(),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ad_rules::tests::{xtr_deposit, xtr_rules};

    fn event() -> FeedEvent {
        let mut e = xtr_deposit();
        e.sccid = Some("a3f4b5c6-d7e8-9012-3456-7890abcdef12".into());
        e
    }

    fn rules() -> AdRules {
        xtr_rules()
    }

    #[test]
    fn snap_gets_its_documented_fields() {
        let e = snap_event(&event(), None, &rules()).unwrap();
        assert_eq!(e["event_name"], "PURCHASE");
        assert_eq!(e["event_time"], 1_700_000_000);
        assert_eq!(e["event_id"], "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b");
        assert_eq!(e["action_source"], "OFFLINE");
        assert_eq!(
            e["user_data"]["sc_click_id"],
            "a3f4b5c6-d7e8-9012-3456-7890abcdef12"
        );
        assert_eq!(e["user_data"]["external_id"], json!([sha256_hex("777")]));
        assert_eq!(e["custom_data"], json!({"value": 1.3, "currency": "USD"}));
        assert!(
            snap_event(&event(), None, &AdRules::default())
                .unwrap_err()
                .contains("no rate for XTR")
        );
        let mut registration = event();
        registration.event = "registration".into();
        let r = snap_event(&registration, None, &rules()).unwrap();
        assert_eq!(r["event_name"], "SIGN_UP");
        assert!(r.get("custom_data").is_none());
        let mut unmatched = event();
        unmatched.sccid = None;
        unmatched.tg_id = None;
        assert!(snap_event(&unmatched, None, &rules()).is_err());
    }

    /// 37 days less one hour is sent; a millisecond more is not.
    #[test]
    fn an_event_older_than_snaps_window_is_never_sent() {
        let snap = crate::platform::fields::tests::fields("snap_capi")
            .check(false)
            .unwrap()
            .target;
        let mut e = event();
        e.event = "registration".into();
        let inside = e.occurred_at_ms + SNAP_SEND_WITHIN_MS;
        let rates = CurrencyRates::default();
        assert!(snap.platform().entry(&e, None, &rates, inside).is_ok());
        let outside = snap
            .platform()
            .entry(&e, None, &rates, inside + 1)
            .unwrap_err();
        assert!(outside.contains("37 days"), "{outside}");
    }

    #[test]
    fn the_status_and_snaps_own_word_decide() {
        assert_eq!(
            snap_answer(200, r#"{"status":"SUCCESS","reason":"SUCCESS"}"#),
            Answer::Delivered
        );
        let again = Answer::Retry { after_ms: None };
        assert_eq!(snap_answer(200, "<html>nginx</html>"), again);
        assert_eq!(snap_answer(500, "oops"), again);
        assert_eq!(snap_answer(503, "down"), again);
        assert_eq!(
            snap_answer(429, "slow down"),
            Answer::Retry {
                after_ms: Some(THROTTLE_WAIT_MS)
            }
        );
        for status in [401, 403] {
            assert!(
                matches!(
                    snap_answer(status, r#"{"status":"FAILED","reason":"Invalid token"}"#),
                    Answer::TokenRejected { .. }
                ),
                "{status}"
            );
        }
        let Answer::Refused { named, message } =
            snap_answer(400, r#"{"status":"FAILED","reason":"bad event_name"}"#)
        else {
            panic!()
        };
        assert!(named.is_empty());
        assert_eq!(message, "Snap: bad event_name");
    }

    /// Each rule of a Snap destination's fields, with a value just inside and one just outside.
    #[test]
    fn snap_takes_its_own_fields_each_by_its_rule() {
        let set = |field: &str, value: &str| {
            let mut f = crate::platform::fields::tests::fields("snap_capi");
            if field == "event_names" {
                f.set_pairs(field, Some([("deposit".into(), value.into())].into()));
            } else {
                f.set_text(field, Some(value.to_owned()));
            }
            f.check(false)
        };
        for (field, inside, outside) in [
            ("pixel_id", "a".repeat(64), "a".repeat(65)),
            ("pixel_id", "a3f4-b5c6".into(), "a3f4 b5c6".into()),
            ("access_token", "t".repeat(1024), "t".repeat(1025)),
            ("event_names", "CUSTOM_EVENT_5".into(), "Purchase".into()),
            (
                "api_url",
                "https://tr.snapchat.com/".into(),
                "http://tr.snapchat.com".into(),
            ),
        ] {
            assert!(set(field, &inside).is_ok(), "{field} {inside}");
            assert_eq!(
                set(field, &outside).unwrap_err().field,
                Some(field),
                "{field} {outside}"
            );
        }
        for other in ["pixel_code", "graph_url", "test_event_code", "url"] {
            assert_eq!(set(other, "1").unwrap_err().field, Some(other), "{other}");
        }
    }

    /// The token goes where Snap documents it, percent-encoded; the body holds the events only.
    #[test]
    fn the_request_is_snaps_documented_one() {
        let snap = Snap {
            pixel_id: "a3f4-b5c6".into(),
            access_token: Secret::new("tok&en=1".into()),
            api_url: DEFAULT_SNAP_API_URL.into(),
            rules: AdRules::default(),
        };
        let r = snap.request_of(&[json!({"n": 1})], None).unwrap();
        assert_eq!(
            r.url,
            "https://tr.snapchat.com/v3/a3f4-b5c6/events?access_token=tok%26en%3D1"
        );
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body, json!({"data": [{"n": 1}]}));
    }
}
