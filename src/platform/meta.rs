//! Meta's Conversions API, whole: a `meta_capi` destination's settings and their rules, the
//! event it sends for each of the tracker's, its request, and what Meta's answer means. Meta's
//! error codes decide, not only the HTTP status: Meta answers a throttle with `400`, and names
//! the events it refused as `data[i]` in its message.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ad_rules::{
    ACCESS_TOKEN, AdRules, CURRENCY_RATES, EVENT_NAMES, TEST_EVENT_CODE, access_token, base_url,
    check_test_event_code, platform_event_id, sha256_hex,
};
use super::address::{URL, is_private};
use super::currency::iso_value;
use super::delivery::{Outcome, outcome_of};
use super::face::{
    Answer, ClickFacts, Platform, Request, Sending, THROTTLE_WAIT_MS, TestView, answer_by_status,
};
use super::given::{DestinationFields, Field, missing};
use crate::domain::click::ClientHints;
use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::domain::secret::Secret;
use crate::domain::settings::is_graph_version;
use crate::error::{Code, Error};

/// The Graph API version used unless a destination names one.
pub const DEFAULT_API_VERSION: &str = "v25.0";
pub const DEFAULT_GRAPH_URL: &str = "https://graph.facebook.com";
/// Meta refuses a whole request when one of its events happened more than 7 days before.
pub const META_MAX_EVENT_AGE_MS: u64 = 7 * 24 * 3_600_000;
/// The most events one request to Meta carries, as Meta allows.
pub const META_BATCH: usize = 1000;
/// Where the conversions happen: in a Telegram chat with the bot. Meta's `chat` is "a
/// conversion made via a messaging app, SMS, or online messaging feature".
pub const ACTION_SOURCE: &str = "chat";

/// An event older than this is never put in a request: Meta refuses one more than 7 days old,
/// and an hour is left for the request to arrive.
pub const META_SEND_WITHIN_MS: u64 = META_MAX_EVENT_AGE_MS - 3_600_000;

/// Meta's Conversions API: the pixel (dataset) and the token that may write to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub pixel_id: String,
    pub access_token: Secret,
    /// Sent as `test_event_code`: the events show in Events Manager's test tab only.
    pub test_event_code: Option<String>,
    pub api_version: String,
    /// Graph API's base address, without a trailing `/`.
    pub graph_url: String,
    /// The event names it sends and the rates it converts other currencies by.
    pub rules: AdRules,
    /// Limited Data Use, sent with every event where set.
    pub data_processing: Option<DataProcessing>,
}

/// Meta's data processing options, set: Limited Data Use. "Limited Data Use is sent through a
/// parameter called Data Processing Options, and it can optionally be sent alongside a user's
/// country and state. If an advertiser is not sure of the country or state, they can opt for
/// Meta to determine if the event or record is from an applicable state."
/// (developers.facebook.com/docs/marketing-apis/data-processing-options): `["LDU"]`, with a
/// country and state (`1` and `1000`: the United States, California; `0` and `0`: Meta
/// geolocates) or without. Unset, nothing of it is sent, which Meta reads as its empty list
/// (Limited Data Use not enabled).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataProcessing {
    pub country: Option<u32>,
    pub state: Option<u32>,
}

impl Meta {
    /// The settings given in `f`, checked by Meta's rules.
    fn check_fields(f: &DestinationFields, allow_private: bool) -> Result<Meta, Error> {
        let rules = AdRules::from_fields(f)?;
        let invalid =
            |field: &'static str, why: String| Error::field(Code::InvalidField, field, why);
        let pixel_id = f
            .text("pixel_id")
            .ok_or_else(|| missing("pixel_id", "(the Meta pixel or dataset id, digits)"))?;
        if !(1..=32).contains(&pixel_id.len()) || !pixel_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(
                "pixel_id",
                format!("pixel_id is 1 to 32 digits, got {}", quoted(&pixel_id)),
            ));
        }
        let access_token = access_token(
            f.text("access_token"),
            "(a Conversions API access token from Events Manager)",
        )?;
        if let Some(code) = &f.text("test_event_code") {
            check_test_event_code(code)?;
        }
        let api_version = f
            .text("api_version")
            .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
        if !is_graph_version(&api_version) {
            return Err(invalid(
                "api_version",
                format!(
                    "api_version is a Graph API version such as {DEFAULT_API_VERSION}, got {}",
                    quoted(&api_version)
                ),
            ));
        }
        let graph_url = base_url(
            "graph_url",
            f.text("graph_url").as_deref().unwrap_or(DEFAULT_GRAPH_URL),
            allow_private,
        )?;
        Ok(Meta {
            pixel_id,
            access_token,
            test_event_code: f.text("test_event_code"),
            api_version,
            graph_url,
            rules,
            data_processing: DataProcessing::from_fields(f)?,
        })
    }
}

/// The largest country or state code taken: Meta's are `0` (Meta geolocates), `1` (the United
/// States) and from `1000` for states (`1000`: California).
const MAX_PLACE_CODE: u32 = 9999;

impl DataProcessing {
    /// From the fields `data_processing_options` (`LDU`), `data_processing_options_country`
    /// and `_state` (both or neither, integers 0 to [`MAX_PLACE_CODE`], only with `LDU`).
    /// `None` when none is given: nothing is sent.
    fn from_fields(f: &DestinationFields) -> Result<Option<DataProcessing>, Error> {
        let invalid =
            |field: &'static str, why: String| Error::field(Code::InvalidField, field, why);
        let code = |field: &'static str| -> Result<Option<u32>, Error> {
            let Some(text) = f.text(field) else {
                return Ok(None);
            };
            text.parse::<u32>()
                .ok()
                .filter(|n| *n <= MAX_PLACE_CODE && text.bytes().all(|b| b.is_ascii_digit()))
                .map(Some)
                .ok_or_else(|| {
                    invalid(
                        field,
                        format!(
                            "{field} is an integer from 0 to {MAX_PLACE_CODE} (0: Meta \
                             geolocates the event; country 1: the United States; state 1000: \
                             California), got {}",
                            quoted(&text)
                        ),
                    )
                })
        };
        let (country, state) = (
            code("data_processing_options_country")?,
            code("data_processing_options_state")?,
        );
        let Some(options) = f.text("data_processing_options") else {
            if country.is_some() || state.is_some() {
                return Err(missing(
                    "data_processing_options",
                    "(LDU) where a country or state is given",
                ));
            }
            return Ok(None);
        };
        if options != "LDU" {
            return Err(invalid(
                "data_processing_options",
                format!(
                    "data_processing_options is LDU (Limited Data Use), or unset for none, got {}",
                    quoted(&options)
                ),
            ));
        }
        if country.is_some() != state.is_some() {
            return Err(invalid(
                if country.is_some() {
                    "data_processing_options_state"
                } else {
                    "data_processing_options_country"
                },
                "data_processing_options_country and data_processing_options_state are given \
                 together"
                    .to_owned(),
            ));
        }
        Ok(Some(DataProcessing { country, state }))
    }

    /// The fields a way in gives them as.
    fn fields_of(this: Option<&DataProcessing>, f: &mut DestinationFields) {
        let text = |n: Option<u32>| n.map(|n| n.to_string());
        f.set_text("data_processing_options", this.map(|_| "LDU".to_owned()));
        f.set_text(
            "data_processing_options_country",
            text(this.and_then(|d| d.country)),
        );
        f.set_text(
            "data_processing_options_state",
            text(this.and_then(|d| d.state)),
        );
    }

    /// Into an event of a request: `data_processing_options`, and the country and state where
    /// set.
    fn write_into(&self, event: &mut Value) {
        event["data_processing_options"] = json!(["LDU"]);
        if let (Some(country), Some(state)) = (self.country, self.state) {
            event["data_processing_options_country"] = json!(country);
            event["data_processing_options_state"] = json!(state);
        }
    }
}

impl Platform for Meta {
    fn fields() -> &'static [Field] {
        &[
            Field {
                name: "pixel_id",
                required: true,
                label: "Pixel (dataset) id",
                help: "Events Manager: Data sources, the pixel or dataset, its id (digits).",
                schema: r#"{"type": ["string", "null"], "pattern": "^([0-9]{1,32})?$"}"#,
                ..Field::TEXT
            },
            Field {
                help: "Events Manager: the pixel's Settings, Conversions API, Generate access \
                       token.",
                ..ACCESS_TOKEN
            },
            TEST_EVENT_CODE,
            Field {
                name: "api_version",
                label: "Graph API version",
                help: "The Graph API version requests name.",
                default: Some(DEFAULT_API_VERSION),
                schema: r#"{"type": ["string", "null"], "pattern": "^(v[0-9]{1,3}\\.[0-9]{1,3})?$"}"#,
                ..Field::TEXT
            },
            Field {
                name: "graph_url",
                label: "Graph API address",
                help: "Settable for a local stand-in.",
                default: Some(DEFAULT_GRAPH_URL),
                ..URL
            },
            EVENT_NAMES,
            CURRENCY_RATES,
            Field {
                name: "data_processing_options",
                label: "Data processing options",
                help: "LDU sends every event with Limited Data Use; left empty, events are \
                       sent without it.",
                schema: r#"{"type": ["string", "null"], "enum": ["LDU", null]}"#,
                ..Field::TEXT
            },
            Field {
                name: "data_processing_options_country",
                label: "Limited Data Use: country",
                help: "With LDU: 1 for the United States, or 0 to let Meta find where the \
                       event came from; given together with the state.",
                schema: r#"{"type": ["string", "null"], "pattern": "^[0-9]{1,4}$"}"#,
                ..Field::TEXT
            },
            Field {
                name: "data_processing_options_state",
                label: "Limited Data Use: state",
                help: "With LDU: 1000 for California, or 0 to let Meta find where the event \
                       came from; given together with the country.",
                schema: r#"{"type": ["string", "null"], "pattern": "^[0-9]{1,4}$"}"#,
                ..Field::TEXT
            },
        ]
    }

    fn title() -> &'static str {
        "Meta Conversions API"
    }

    fn sending() -> Sending {
        Sending::Together { batch: META_BATCH }
    }

    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Meta, Error> {
        Meta::check_fields(f, allow_private)
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_text("pixel_id", Some(self.pixel_id.clone()));
        f.set_text("access_token", Some(self.access_token.expose().to_owned()));
        f.set_text("test_event_code", self.test_event_code.clone());
        f.set_text("api_version", Some(self.api_version.clone()));
        f.set_text("graph_url", Some(self.graph_url.clone()));
        self.rules.fields_of(f);
        DataProcessing::fields_of(self.data_processing.as_ref(), f);
    }

    fn moved_address(&self, before: &Meta) -> Option<&'static str> {
        (self.graph_url != before.graph_url).then_some("graph_url")
    }

    fn token(&self) -> &str {
        self.access_token.expose()
    }

    fn address(&self) -> &str {
        &self.graph_url
    }

    fn matches(&self, click: ClickFacts) -> bool {
        click.has_fbclid
    }

    /// An event Meta would refuse (older than 7 days less one hour, nothing to match, a
    /// currency without a rate) is refused here.
    fn entry(
        &self,
        event: &FeedEvent,
        hints: Option<&ClientHints>,
        space_rates: &CurrencyRates,
        now_ms: u64,
    ) -> Result<Value, String> {
        if now_ms.saturating_sub(event.occurred_at_ms) > META_SEND_WITHIN_MS {
            return Err(
                "not sent: the event happened more than 7 days less one hour ago, and \
                        Meta refuses an event older than 7 days"
                    .to_owned(),
            );
        }
        let mut entry = meta_event(event, hints, &self.rules.in_space(space_rates))?;
        if let Some(data_processing) = &self.data_processing {
            data_processing.write_into(&mut entry);
        }
        Ok(entry)
    }

    fn request_of(&self, entries: &[Value], test_code: Option<&str>) -> Option<Request> {
        let test_code = test_code.or(self.test_event_code.as_deref());
        Some(Request::post_json(
            meta_url(self),
            Vec::new(),
            meta_body(self, test_code, entries),
        ))
    }

    fn test_view(&self) -> Option<TestView<'_>> {
        Some(TestView {
            platform: "Meta",
            conversion: "purchase",
            own_code: self.test_event_code.as_deref(),
        })
    }

    fn judge(&self, status: u16, body: &str) -> Answer {
        meta_answer(status, body)
    }
}

/// Meta's standard event for each of the tracker's event kinds.
#[must_use]
pub fn standard_name(event: &str) -> &'static str {
    match event {
        "contact" => "Contact",
        "subscribed" => "Subscribe",
        "registration" => "CompleteRegistration",
        _ => "Purchase",
    }
}

/// Meta's throttling codes: the application's, the user's, the page's, the ad account's, the
/// Conversions API's and the business use cases' rate limits, and `368` (temporarily blocked
/// for a policy: "wait and retry", as Meta's error guide says).
fn is_throttle(code: i64) -> bool {
    matches!(code, 4 | 17 | 32 | 341 | 368 | 613 | 80_000..=80_014)
}

/// A refusal that is the destination's, not an event's, so that no event could ever go until
/// the destination is changed: a token that no longer works (`190` invalid or expired, `102`
/// its session, `10` and `200` to `299` a permission it lacks), or an API version Meta no
/// longer serves (`2635` "a deprecated version of the Ads API", `12` "this API version is
/// deprecated"), which a new `api_version` mends.
fn is_token_error(code: i64) -> bool {
    matches!(code, 10 | 102 | 190 | 200..=299) || is_old_version(code)
}

/// An API version Meta no longer serves: `2635` and `12`.
fn is_old_version(code: i64) -> bool {
    matches!(code, 12 | 2635)
}

/// `100` with subcode `33`: "Unsupported post request. Object with ID ... does not exist,
/// cannot be loaded due to missing permissions, or does not support this operation": the id
/// asked for (a pixel, an ad account) is wrong, or the token may not use it.
fn is_unknown_object(code: i64, subcode: Option<i64>) -> bool {
    code == 100 && subcode == Some(33)
}

/// Whether Meta's error answer `body` says the object asked for is unknown or out of the
/// token's reach ([`is_unknown_object`]), which [`meta_answer`] takes for a refused token.
#[must_use]
pub fn names_unknown_object(body: &str) -> bool {
    error_codes(body).is_some_and(|(code, subcode)| is_unknown_object(code, subcode))
}

/// Whether Meta's error answer `body` asks for less data at once: `100` with subcode
/// `1504018`, or `2` with `1504038` ("Please reduce the amount of data you're asking for"),
/// which an insights read answers by asking for a shorter range.
#[must_use]
pub fn asks_for_less(body: &str) -> bool {
    error_codes(body)
        .is_some_and(|codes| matches!(codes, (100, Some(1_504_018)) | (2, Some(1_504_038))))
}

/// Whether Meta's error answer `body` says the API version asked for is no longer served
/// ([`is_old_version`]), which [`meta_answer`] takes for a refusal of the destination.
#[must_use]
pub fn names_old_version(body: &str) -> bool {
    error_codes(body).is_some_and(|(code, _)| is_old_version(code))
}

/// The `code` and `error_subcode` of Meta's error answer `body`.
fn error_codes(body: &str) -> Option<(i64, Option<i64>)> {
    let parsed: Value = serde_json::from_str(body).ok()?;
    let error = parsed.get("error")?;
    Some((
        error.get("code").and_then(Value::as_i64).unwrap_or(0),
        error.get("error_subcode").and_then(Value::as_i64),
    ))
}

/// What an answer of `status` with `body` means (`None`: no answer came).
#[must_use]
pub fn meta_answer(status: u16, body: &str) -> Answer {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let Some(error) = error else {
        return answer_by_status(status, body);
    };
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let transient = error.get("is_transient").and_then(Value::as_bool) == Some(true);
    let text = |field: &str| error.get(field).and_then(Value::as_str).unwrap_or_default();
    let mut parts: Vec<&str> = Vec::new();
    for part in [
        text("message"),
        text("error_user_title"),
        text("error_user_msg"),
    ] {
        if !part.is_empty() && !parts.contains(&part) {
            parts.push(part);
        }
    }
    let message = parts.join(": ");
    let message = if message.is_empty() {
        body.to_owned()
    } else {
        format!("Meta: {message} (code {code})")
    };
    let subcode = error.get("error_subcode").and_then(Value::as_i64);
    if is_token_error(code) || is_unknown_object(code, subcode) {
        Answer::TokenRejected { message }
    } else if is_throttle(code) {
        Answer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        }
    } else if transient || matches!(code, 1 | 2) || outcome_of(status) == Outcome::Failed {
        Answer::Retry { after_ms: None }
    } else if outcome_of(status) == Outcome::Delivered {
        Answer::Delivered
    } else {
        let mut named: Vec<usize> = ["message", "error_user_title", "error_user_msg"]
            .into_iter()
            .flat_map(|f| named_events(text(f)))
            .collect();
        named.sort_unstable();
        named.dedup();
        Answer::Refused { named, message }
    }
}

/// The `i` of every `data[i]` in `text`.
fn named_events(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("data[") {
        let after = &rest[at + 5..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && after.as_bytes().get(digits) == Some(&b']')
            && let Ok(i) = after[..digits].parse()
        {
            out.push(i);
        }
        rest = after;
    }
    out
}

/// One entry of a request's `data`, by the destination's `rules`; or why the event cannot be
/// sent to Meta at all: nothing Meta could match it to (no click id, no Telegram id, no
/// hints), a currency without a rate, a value Meta cannot take.
fn meta_event(
    event: &FeedEvent,
    hints: Option<&ClientHints>,
    rules: &AdRules,
) -> Result<Value, String> {
    let mut user = Map::new();
    // The cookie the prelander's pixel set, when it sent one, else the one made from the
    // click's fbclid.
    if let Some(fbc) = hints.and_then(|h| h.fbc.as_ref()).or(event.fbc.as_ref()) {
        user.insert("fbc".into(), json!(fbc));
    }
    if let Some(fbp) = &event.fbp {
        user.insert("fbp".into(), json!(fbp));
    }
    if let Some(tg) = event.tg_id {
        user.insert("external_id".into(), json!([sha256_hex(&tg.to_string())]));
    }
    if let Some(h) = hints {
        // A private address is a proxy's, never the visitor's: Meta would match nothing by it.
        if let Some(ip) = h.ip.filter(|ip| !is_private(*ip)) {
            user.insert("client_ip_address".into(), json!(ip.to_string()));
        }
        if let Some(agent) = &h.user_agent {
            user.insert("client_user_agent".into(), json!(agent));
        }
    }
    if user.is_empty() {
        return Err(
            "not sent: the event has no fbc, Telegram id or visitor hints for Meta \
                    to match"
                .into(),
        );
    }
    let name = rules.event_names.name_or(
        &event.event,
        event.first_deposit == Some(true),
        standard_name,
    );
    let mut e = json!({
        "event_name": name,
        "event_time": event.occurred_at_ms / 1000,
        "event_id": platform_event_id(event),
        "action_source": ACTION_SOURCE,
        "user_data": user,
    });
    if event.event == "deposit" {
        e["custom_data"] = iso_value(event, &rules.currency_rates, "Meta")?;
    }
    Ok(e)
}

/// The address of a Meta destination's requests.
fn meta_url(meta: &Meta) -> String {
    format!(
        "{}/{}/{}/events",
        meta.graph_url, meta.api_version, meta.pixel_id
    )
}

/// The body of one request to Meta: the events, the access token (in the body, never in the
/// URL, which proxies and logs keep), and the test code when set.
fn meta_body(meta: &Meta, test_code: Option<&str>, data: &[Value]) -> Vec<u8> {
    let mut body = json!({
        "data": data,
        "access_token": meta.access_token.expose(),
    });
    if let Some(code) = test_code {
        body["test_event_code"] = json!(code);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::click::ClientHints;
    use crate::platform::ad_rules::EventNames;

    fn event() -> FeedEvent {
        let mut e = crate::platform::destination::test_event(1_700_000_000_123);
        e.inbox_id = "42".into();
        e.event_id = "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b".into();
        e.value = Some("12.50".into());
        e.currency = "usdt".into();
        e.tg_id = Some(777);
        e
    }

    fn usd_event() -> FeedEvent {
        let mut e = event();
        e.currency = "usd".into();
        e
    }

    #[test]
    fn meta_gets_its_documented_fields() {
        let rules = AdRules::default();
        let e = meta_event(&usd_event(), None, &rules).unwrap();
        assert_eq!(e["event_name"], "Purchase");
        assert_eq!(e["event_time"], 1_700_000_000);
        assert_eq!(e["event_id"], "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b");
        assert_eq!(e["action_source"], "chat");
        assert_eq!(e["user_data"]["fbc"], "fb.1.1700000000123.test");
        assert_eq!(e["user_data"]["external_id"], json!([sha256_hex("777")]));
        assert!(
            meta_event(&event(), None, &rules)
                .unwrap_err()
                .contains("no rate for USDT")
        );
        let mut usd = event();
        usd.currency = "usd".into();
        let e = meta_event(&usd, None, &rules).unwrap();
        assert_eq!(e["custom_data"], json!({"value": 12.5, "currency": "USD"}));
        let mut contact = event();
        contact.event = "contact".into();
        let c = meta_event(&contact, None, &rules).unwrap();
        assert_eq!(c["event_name"], "Contact");
        assert!(c.get("custom_data").is_none());
        let mut unmatched = event();
        unmatched.fbc = None;
        unmatched.tg_id = None;
        assert!(meta_event(&unmatched, None, &rules).is_err());
    }

    /// An ad platform's `event_id` is the payment's `eid` when there is one, else the
    /// event's own id; a webhook's and a postback's is always the event's own id.
    #[test]
    fn each_receiver_gets_the_event_id_it_deduplicates_by() {
        let mut e = usd_event();
        let own = e.event_id.clone();
        assert_eq!(platform_event_id(&e), own);
        e.eid = Some("order-7".into());
        let sent = meta_event(&e, None, &AdRules::default()).unwrap();
        assert_eq!(sent["event_id"], "order-7");
        assert_eq!(crate::platform::webhook::webhook_id(&e), own);
        assert_eq!(
            crate::platform::postback::postback_url(
                "https://x.io/pb?id={event_id}&n={inbox_id}",
                &e,
                &crate::platform::postback::Statuses::default(),
                None
            ),
            format!("https://x.io/pb?id={own}&n=42")
        );
        assert_ne!(
            crate::platform::destination::test_event(1).event_id,
            crate::platform::destination::test_event(1).event_id
        );
    }

    /// `fbp` is sent when the click brought one; a prelander's `fbc` is sent instead of the one
    /// made from the fbclid; a hint without an address sends none.
    #[test]
    fn meta_gets_fbp_and_the_prelanders_fbc() {
        let rules = AdRules::default();
        let mut e = usd_event();
        let sent = meta_event(&e, None, &rules).unwrap();
        assert!(sent["user_data"].get("fbp").is_none());
        e.fbp = Some("fb.1.1700000000000.42".into());
        let hints = ClientHints {
            ip: None,
            user_agent: Some("UA".into()),
            fbc: Some("fb.1.1699999999999.IwAR-pixel".into()),
        };
        let sent = meta_event(&e, Some(&hints), &rules).unwrap();
        assert_eq!(sent["user_data"]["fbp"], "fb.1.1700000000000.42");
        assert_eq!(sent["user_data"]["fbc"], "fb.1.1699999999999.IwAR-pixel");
        assert_eq!(sent["user_data"]["client_user_agent"], "UA");
        assert!(sent["user_data"].get("client_ip_address").is_none());
        // Only the prelander's cookies: enough for Meta to match.
        let mut bare = usd_event();
        bare.fbc = None;
        bare.tg_id = None;
        bare.fbp = Some("fb.1.1700000000000.42".into());
        assert!(meta_event(&bare, None, &rules).is_ok());
    }

    fn error(code: i64, extra: &str) -> String {
        format!(
            r#"{{"error":{{"message":"Invalid parameter","type":"OAuthException","code":{code}{extra},"fbtrace_id":"x"}}}}"#
        )
    }

    #[test]
    fn codes_decide_not_only_the_status() {
        assert_eq!(
            meta_answer(200, r#"{"events_received":3}"#),
            Answer::Delivered
        );
        let throttled = Answer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
        for code in [4, 17, 32, 341, 368, 613, 80_000, 80_014] {
            assert_eq!(meta_answer(400, &error(code, "")), throttled, "{code}");
        }
        let again = Answer::Retry { after_ms: None };
        assert_eq!(meta_answer(400, &error(1, "")), again);
        assert_eq!(meta_answer(400, &error(2, "")), again);
        assert_eq!(
            meta_answer(400, &error(100, r#","is_transient":true"#)),
            again
        );
        assert_eq!(meta_answer(503, "down"), again);
        for code in [190, 102, 10, 200, 299, 2635, 12] {
            assert!(
                matches!(
                    meta_answer(400, &error(code, "")),
                    Answer::TokenRejected { .. }
                ),
                "{code}"
            );
        }
        for code in [80_015, 2634, 2636, 11, 13, 101, 103, 367, 369] {
            assert!(
                matches!(meta_answer(400, &error(code, "")), Answer::Refused { .. }),
                "{code}"
            );
        }
        // A pixel that is not there pauses; another subcode of 100 is the events' fault.
        assert!(matches!(
            meta_answer(400, &error(100, r#","error_subcode":33"#)),
            Answer::TokenRejected { .. }
        ));
        for other in [r#","error_subcode":32"#, r#","error_subcode":34"#, ""] {
            assert!(
                matches!(meta_answer(400, &error(100, other)), Answer::Refused { .. }),
                "{other}"
            );
        }
    }

    #[test]
    fn refused_events_are_read_from_data_i() {
        let body = error(
            100,
            r#","error_user_title":"Invalid currency","error_user_msg":"data[3].custom_data.currency and data[17] are invalid; data[x] is not""#,
        );
        let Answer::Refused { named, message } = meta_answer(400, &body) else {
            panic!()
        };
        assert_eq!(named, [3, 17]);
        assert!(message.contains("Invalid currency"), "{message}");
        let Answer::Refused { named, .. } = meta_answer(400, &error(100, "")) else {
            panic!()
        };
        assert!(named.is_empty());
    }

    fn name<'a>(names: &'a EventNames, event: &'a str, first_deposit: bool) -> &'a str {
        names.name_or(event, first_deposit, standard_name)
    }

    #[test]
    fn names_fall_back_from_first_deposit_to_deposit_to_meta_s() {
        let set = |pairs: &[(&str, &str)]| {
            EventNames::parse(
                &pairs
                    .iter()
                    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                    .collect(),
            )
        };
        let none = set(&[]).unwrap();
        assert_eq!(name(&none, "deposit", true), "Purchase");
        assert_eq!(name(&none, "registration", false), "CompleteRegistration");
        let dep = set(&[("deposit", "Deposit made")]).unwrap();
        assert_eq!(name(&dep, "deposit", true), "Deposit made");
        let first = set(&[("deposit", "Purchase"), ("first_deposit", "FirstDeposit")]).unwrap();
        assert_eq!(name(&first, "deposit", true), "FirstDeposit");
        assert_eq!(name(&first, "deposit", false), "Purchase");
        assert_eq!(name(&first, "contact", false), "Contact");
        for bad in [
            ("refund", "Refund"),
            ("deposit", ""),
            ("deposit", "Bad-Name"),
        ] {
            assert_eq!(
                set(&[bad]).unwrap_err().field,
                Some("event_names"),
                "{bad:?}"
            );
        }
        assert!(set(&[("deposit", &"a".repeat(41))]).is_err());
    }
}
