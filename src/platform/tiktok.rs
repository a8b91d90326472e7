//! `TikTok`'s Events API, whole: a `tiktok_events` destination's settings and their rules,
//! the event it sends for each of the tracker's, its request, and what `TikTok`'s answer means.
//!
//! `TikTok`'s Business API answers most requests with HTTP `200` and says what happened in the
//! body: `{"code": 0, "message": "OK", "request_id": "..."}` when the events were taken, another
//! `code` when not. So its `code` decides, as Meta's error codes do, and its answers mean the
//! same four things ([`Answer`]): taken, worth sending again, a token that no longer works, or
//! refused. `TikTok` names no event of a refused request, so a refusal is searched by halves
//! (`halves.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ad_rules::{
    ACCESS_TOKEN, API_URL, AdRules, CURRENCY_RATES, EVENT_NAMES, TEST_EVENT_CODE, access_token,
    base_url, check_test_event_code, platform_event_id, sha256_hex,
};
use super::address::is_private;
use super::currency::iso_value;
use super::delivery::{Outcome, outcome_of};
use super::face::{Answer, ClickFacts, Platform, Request, Sending, THROTTLE_WAIT_MS, TestView};
use super::given::{DestinationFields, Field, missing};
use crate::domain::click::ClientHints;
use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::domain::secret::Secret;
use crate::error::{Code, Error};

/// `TikTok`'s Business API, where a `tiktok_events` destination sends unless told otherwise.
pub const DEFAULT_TIKTOK_API_URL: &str = "https://business-api.tiktok.com";

/// `TikTok`'s Events API: the pixel and the token that may send to it. Its event names and
/// currency rates follow the rules of Meta's (`TikTok`'s default names are its own).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tiktok {
    /// The pixel's code in Events Manager (`C4ABCDEFGHIJ12345678`), sent as
    /// `event_source_id`.
    pub pixel_code: String,
    /// Sent in the `Access-Token` header.
    pub access_token: Secret,
    /// Sent as `test_event_code`: the events show in Events Manager's Test events tab only.
    pub test_event_code: Option<String>,
    /// The Business API's base address, without a trailing `/`.
    pub api_url: String,
    pub rules: AdRules,
}

impl Tiktok {
    /// The settings given in `f`, checked by `TikTok`'s rules.
    fn check_fields(f: &DestinationFields, allow_private: bool) -> Result<Tiktok, Error> {
        let pixel_code = f.text("pixel_code").ok_or_else(|| {
            missing(
                "pixel_code",
                "(the pixel's code from TikTok's Events Manager, letters and digits)",
            )
        })?;
        if !(1..=64).contains(&pixel_code.len())
            || !pixel_code.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(Error::field(
                Code::InvalidField,
                "pixel_code",
                format!(
                    "pixel_code is 1 to 64 letters and digits (C4ABCDEFGHIJ12345678), got {}",
                    quoted(&pixel_code)
                ),
            ));
        }
        let access_token = access_token(
            f.text("access_token"),
            "(an Events API access token from TikTok's Events Manager)",
        )?;
        if let Some(code) = &f.text("test_event_code") {
            check_test_event_code(code)?;
        }
        let api_url = base_url(
            "api_url",
            f.text("api_url")
                .as_deref()
                .unwrap_or(DEFAULT_TIKTOK_API_URL),
            allow_private,
        )?;
        Ok(Tiktok {
            pixel_code,
            access_token,
            test_event_code: f.text("test_event_code"),
            api_url,
            rules: AdRules::from_fields(f)?,
        })
    }
}

impl Platform for Tiktok {
    fn fields() -> &'static [Field] {
        &[
            Field {
                name: "pixel_code",
                required: true,
                label: "Pixel code",
                help: "TikTok Events Manager: the pixel's code (C4ABCDEFGHIJ12345678).",
                schema: r#"{"type": ["string", "null"], "pattern": "^([A-Za-z0-9]{1,64})?$",
                    "examples": ["C4ABCDEFGHIJ12345678"]}"#,
                ..Field::TEXT
            },
            Field {
                help: "TikTok Events Manager: the pixel's Settings, Events API, Generate access \
                       token.",
                ..ACCESS_TOKEN
            },
            TEST_EVENT_CODE,
            Field {
                default: Some(DEFAULT_TIKTOK_API_URL),
                ..API_URL
            },
            EVENT_NAMES,
            CURRENCY_RATES,
        ]
    }

    fn title() -> &'static str {
        "TikTok Events API"
    }

    fn sending() -> Sending {
        Sending::Together {
            batch: TIKTOK_BATCH,
        }
    }

    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Tiktok, Error> {
        Tiktok::check_fields(f, allow_private)
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_text("pixel_code", Some(self.pixel_code.clone()));
        f.set_text("access_token", Some(self.access_token.expose().to_owned()));
        f.set_text("test_event_code", self.test_event_code.clone());
        f.set_text("api_url", Some(self.api_url.clone()));
        self.rules.fields_of(f);
    }

    fn moved_address(&self, before: &Tiktok) -> Option<&'static str> {
        (self.api_url != before.api_url).then_some("api_url")
    }

    fn token(&self) -> &str {
        self.access_token.expose()
    }

    fn address(&self) -> &str {
        &self.api_url
    }

    fn matches(&self, click: ClickFacts) -> bool {
        click.has_id_for("tiktok_events")
    }

    /// An event it could not take (nothing to match, a currency without a rate) is refused
    /// here.
    fn entry(
        &self,
        event: &FeedEvent,
        hints: Option<&ClientHints>,
        space_rates: &CurrencyRates,
        _now_ms: u64,
    ) -> Result<Value, String> {
        tiktok_event(event, hints, &self.rules.in_space(space_rates))
    }

    /// The access token goes in a header, never in the body or the URL.
    fn request_of(&self, entries: &[Value], test_code: Option<&str>) -> Option<Request> {
        let test_code = test_code.or(self.test_event_code.as_deref());
        Some(Request::post_json(
            tiktok_url(self),
            vec![("Access-Token", self.access_token.expose().to_owned())],
            tiktok_body(self, test_code, entries),
        ))
    }

    fn test_view(&self) -> Option<TestView<'_>> {
        Some(TestView {
            platform: "TikTok",
            conversion: "payment",
            own_code: self.test_event_code.as_deref(),
        })
    }

    fn judge(&self, status: u16, body: &str) -> Answer {
        tiktok_answer(status, body)
    }

    /// `TikTok` answers `200` to a refusal too: its `code` says whether it took the event.
    fn took(&self, status: u16, body: &str) -> bool {
        tiktok_answer(status, body) == Answer::Delivered
    }
}

/// The most events one request to `TikTok` carries, as its Events API allows.
pub const TIKTOK_BATCH: usize = 1000;

/// Where a web pixel's events come from, in `TikTok`'s terms.
const EVENT_SOURCE: &str = "web";

/// One entry of a request's `data`, by the destination's `rules`; or why the event cannot be
/// sent to `TikTok` at all: nothing it could match the event to (no `ttclid`, no Telegram id,
/// no hints), a currency without a rate, a value it cannot take.
fn tiktok_event(
    event: &FeedEvent,
    hints: Option<&ClientHints>,
    rules: &AdRules,
) -> Result<Value, String> {
    let mut user = Map::new();
    if let Some(ttclid) = &event.ttclid {
        user.insert("ttclid".into(), json!(ttclid));
    }
    if let Some(tg) = event.tg_id {
        user.insert("external_id".into(), json!(sha256_hex(&tg.to_string())));
    }
    if let Some(h) = hints {
        // A private address is a proxy's, never the visitor's.
        if let Some(ip) = h.ip.filter(|ip| !is_private(*ip)) {
            user.insert("ip".into(), json!(ip.to_string()));
        }
        if let Some(agent) = &h.user_agent {
            user.insert("user_agent".into(), json!(agent));
        }
    }
    if user.is_empty() {
        return Err(
            "not sent: the event has no ttclid, Telegram id or visitor hints for TikTok to match"
                .into(),
        );
    }
    let name = rules.event_names.name_or(
        &event.event,
        event.first_deposit == Some(true),
        tiktok_standard_name,
    );
    let mut e = json!({
        "event": name,
        "event_time": event.occurred_at_ms / 1000,
        "event_id": platform_event_id(event),
        "user": user,
    });
    if event.event == "deposit" {
        e["properties"] = iso_value(event, &rules.currency_rates, "TikTok")?;
    }
    Ok(e)
}

/// The address of a `TikTok` destination's requests.
fn tiktok_url(tiktok: &Tiktok) -> String {
    format!("{}/open_api/v1.3/event/track/", tiktok.api_url)
}

/// The body of one request: the pixel, the events, and the test code when set. The access
/// token goes in a header, never in the body or the URL.
fn tiktok_body(tiktok: &Tiktok, test_code: Option<&str>, data: &[Value]) -> Vec<u8> {
    let mut body = json!({
        "event_source": EVENT_SOURCE,
        "event_source_id": tiktok.pixel_code,
        "data": data,
    });
    if let Some(code) = test_code {
        body["test_event_code"] = json!(code);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// `TikTok`'s standard event for each of the tracker's event kinds.
#[must_use]
fn tiktok_standard_name(event: &str) -> &'static str {
    match event {
        "contact" => "Contact",
        "subscribed" => "Subscribe",
        "registration" => "CompleteRegistration",
        _ => "CompletePayment",
    }
}

// Which codes mean what. TikTok's own list of the Business API's return codes (behind
// business-api.tiktok.com/portal/docs) could not be read from any public copy, and the
// listings by others disagree (one reads 40001 as invalid parameters, another as no
// permission). So the codes below are those this room was built to, kept as they were, and no
// other code is guessed at: an unknown one is a refusal of the events (`tiktok_answer`).

/// `TikTok`'s rate limit (`40100`, too many requests): sent again no sooner than a throttled
/// Meta destination is.
fn is_throttle(code: i64) -> bool {
    code == 40_100
}

/// A token that no longer works, or one without the permission to send to the pixel: `40001`
/// (no permission), `40104` (no access token) and `40105` (an access token that is invalid or
/// expired).
fn is_token_error(code: i64) -> bool {
    matches!(code, 40_001 | 40_104 | 40_105)
}

/// `TikTok`'s own failures (`5xxxx`): worth sending again.
fn is_server_error(code: i64) -> bool {
    (50_000..60_000).contains(&code)
}

/// What an answer of `status` with `body` from `TikTok`'s Events API means.
#[must_use]
fn tiktok_answer(status: u16, body: &str) -> Answer {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let code = parsed
        .as_ref()
        .and_then(|v| v.get("code"))
        .and_then(Value::as_i64);
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = match code {
        Some(code) if !message.is_empty() => format!("TikTok: {message} (code {code})"),
        Some(code) => format!("TikTok: code {code}"),
        None => body.to_owned(),
    };
    if status == 429 || code.is_some_and(is_throttle) {
        return Answer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
    }
    if status == 401 || code.is_some_and(is_token_error) {
        return Answer::TokenRejected { message };
    }
    if code.is_some_and(is_server_error) {
        return Answer::Retry { after_ms: None };
    }
    match (outcome_of(status), code) {
        (Outcome::Delivered, Some(0)) => Answer::Delivered,
        // TikTok always says its `code`: a 2xx without one (a proxy's page, an `api_url` that
        // is not TikTok's) took nothing, and is tried again rather than counted delivered.
        (Outcome::Delivered, None) | (Outcome::Failed | Outcome::Held, _) => {
            Answer::Retry { after_ms: None }
        }
        _ => Answer::Refused {
            named: Vec::new(),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::secret::Secret;
    use crate::platform::ad_rules::tests::{xtr_deposit, xtr_rules};

    fn event() -> FeedEvent {
        let mut e = xtr_deposit();
        e.ttclid = Some("E.C.P.tt-click".into());
        e
    }

    fn rules() -> AdRules {
        xtr_rules()
    }

    #[test]
    fn tiktok_gets_its_documented_fields() {
        let e = tiktok_event(&event(), None, &rules()).unwrap();
        assert_eq!(e["event"], "CompletePayment");
        assert_eq!(e["event_time"], 1_700_000_000);
        assert_eq!(e["event_id"], "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b");
        assert_eq!(e["user"]["ttclid"], "E.C.P.tt-click");
        assert_eq!(e["user"]["external_id"], sha256_hex("777"));
        assert_eq!(e["properties"], json!({"value": 1.3, "currency": "USD"}));
        let mut with_eid = event();
        with_eid.eid = Some("order-7".into());
        assert_eq!(
            tiktok_event(&with_eid, None, &rules()).unwrap()["event_id"],
            "order-7"
        );
        assert!(
            tiktok_event(&event(), None, &AdRules::default())
                .unwrap_err()
                .contains("no rate for XTR")
        );
        let mut contact = event();
        contact.event = "contact".into();
        let c = tiktok_event(&contact, None, &rules()).unwrap();
        assert_eq!(c["event"], "Contact");
        assert!(c.get("properties").is_none());
        let hints = ClientHints {
            ip: Some("10.0.0.1".parse().unwrap()),
            user_agent: Some("UA".into()),
            fbc: None,
        };
        let h = tiktok_event(&event(), Some(&hints), &rules()).unwrap();
        assert_eq!(h["user"]["user_agent"], "UA");
        assert!(h["user"].get("ip").is_none());
        let mut unmatched = event();
        unmatched.ttclid = None;
        unmatched.tg_id = None;
        assert!(tiktok_event(&unmatched, None, &rules()).is_err());
    }

    #[test]
    fn the_body_names_the_pixel_and_never_the_token() {
        let t = Tiktok {
            pixel_code: "C4AB".into(),
            access_token: Secret::new("tt-secret-token".into()),
            test_event_code: Some("TEST123".into()),
            api_url: "https://business-api.tiktok.com".into(),
            rules: AdRules::default(),
        };
        assert_eq!(
            tiktok_url(&t),
            "https://business-api.tiktok.com/open_api/v1.3/event/track/"
        );
        let body: Value = serde_json::from_slice(&tiktok_body(
            &t,
            t.test_event_code.as_deref(),
            &[json!({"n": 1})],
        ))
        .unwrap();
        assert_eq!(body["event_source"], "web");
        assert_eq!(body["event_source_id"], "C4AB");
        assert_eq!(body["test_event_code"], "TEST123");
        assert_eq!(body["data"], json!([{"n": 1}]));
        assert!(!body.to_string().contains("tt-secret-token"));
    }

    fn answer(code: i64) -> String {
        format!(r#"{{"code":{code},"message":"Invalid","request_id":"2024"}}"#)
    }

    #[test]
    fn the_code_decides_not_only_the_status() {
        assert_eq!(
            tiktok_answer(200, r#"{"code":0,"message":"OK","request_id":"1"}"#),
            Answer::Delivered
        );
        let throttled = Answer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
        assert_eq!(tiktok_answer(200, &answer(40_100)), throttled);
        assert_eq!(tiktok_answer(429, "slow down"), throttled);
        // Just beside the throttle: a refusal.
        assert!(matches!(
            tiktok_answer(200, &answer(40_101)),
            Answer::Refused { .. }
        ));
        for code in [40_001, 40_104, 40_105] {
            let Answer::TokenRejected { message } = tiktok_answer(200, &answer(code)) else {
                panic!("{code}")
            };
            assert_eq!(message, format!("TikTok: Invalid (code {code})"));
        }
        assert!(matches!(
            tiktok_answer(401, "no"),
            Answer::TokenRejected { .. }
        ));
        let again = Answer::Retry { after_ms: None };
        // A 2xx that is not TikTok's answer took nothing.
        assert_eq!(tiktok_answer(200, "<html>Welcome to nginx</html>"), again);
        assert_eq!(tiktok_answer(200, r#"{"message":"OK"}"#), again);
        assert_eq!(tiktok_answer(200, r#"{"code":"0"}"#), again);
        assert_eq!(tiktok_answer(200, &answer(50_000)), again);
        assert_eq!(tiktok_answer(200, &answer(59_999)), again);
        assert_eq!(tiktok_answer(503, "down"), again);
        // A parameter error (40002) is a bad event, not a bad token.
        for code in [40_002, 40_106, 60_000] {
            let Answer::Refused { named, message } = tiktok_answer(200, &answer(code)) else {
                panic!("{code}")
            };
            assert!(named.is_empty());
            assert!(message.contains(&code.to_string()), "{message}");
        }
    }

    #[test]
    fn tiktok_s_own_names_are_the_defaults() {
        use crate::platform::ad_rules::EventNames;
        let none = EventNames::default();
        let name = |event, first| none.name_or(event, first, tiktok_standard_name);
        assert_eq!(name("deposit", true), "CompletePayment");
        assert_eq!(name("contact", false), "Contact");
        assert_eq!(name("subscribed", false), "Subscribe");
        assert_eq!(name("registration", false), "CompleteRegistration");
    }

    /// Only an event whose click brought a `ttclid` can be matched to an ad.
    #[test]
    fn only_a_click_with_a_ttclid_matches() {
        let t = crate::platform::fields::tests::fields("tiktok_events")
            .check(false)
            .unwrap()
            .target;
        let click = |has_fbclid, has_ttclid: bool| {
            let mut ids = crate::domain::click::ClickIds::default();
            ids.set("ttclid", has_ttclid.then(|| "E.C.P.x".to_owned()));
            ClickFacts::of(has_fbclid, &ids)
        };
        assert!(t.matches(click(false, true)));
        assert!(!t.matches(click(true, false)));
    }
}
