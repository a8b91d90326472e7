//! What `TikTok`'s Events API is sent (`docs/api.md#tiktoks-events-api`): each event as an entry
//! of a request (a pure function of the event, so a test can check it field by field), and the
//! request itself. A batch is sent as Meta's is (`meta::send_batch_judged`, with `TikTok`'s
//! answers read by `tiktok_answer`): one bad event never sinks the others, a throttle is
//! retried, a token that no longer works pauses the destination.

use serde_json::{Map, Value, json};

use super::format::{iso_value, platform_event_id, sha256_hex};
use crate::domain::click::ClientHints;
use crate::domain::destination::{MetaRules, Tiktok, is_private, tiktok_standard_name};
use crate::domain::feed::FeedEvent;

/// The most events one request to `TikTok` carries, as its Events API allows.
pub const TIKTOK_BATCH: usize = 1000;

/// Where a web pixel's events come from, in `TikTok`'s terms.
const EVENT_SOURCE: &str = "web";

/// One entry of a request's `data`, by the destination's `rules`; or why the event cannot be
/// sent to `TikTok` at all: nothing it could match the event to (no `ttclid`, no Telegram id,
/// no hints), a currency without a rate, a value it cannot take.
pub fn tiktok_event(
    event: &FeedEvent,
    hints: Option<&ClientHints>,
    rules: &MetaRules,
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
        e["properties"] = iso_value(event, rules, "TikTok")?;
    }
    Ok(e)
}

/// The address of a `TikTok` destination's requests.
#[must_use]
pub fn tiktok_url(tiktok: &Tiktok) -> String {
    format!("{}/open_api/v1.3/event/track/", tiktok.api_url)
}

/// The body of one request: the pixel, the events, and the test code when set. The access
/// token goes in a header, never in the body or the URL.
#[must_use]
pub fn tiktok_body(tiktok: &Tiktok, data: &[Value]) -> Vec<u8> {
    let mut body = json!({
        "event_source": EVENT_SOURCE,
        "event_source_id": tiktok.pixel_code,
        "data": data,
    });
    if let Some(code) = &tiktok.test_event_code {
        body["test_event_code"] = json!(code);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The `POST` of a batch of events to `TikTok`.
pub fn tiktok_request(
    client: &reqwest::Client,
    url: reqwest::Url,
    tiktok: &Tiktok,
    data: &[Value],
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("Access-Token", tiktok.access_token.expose())
        .body(tiktok_body(tiktok, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::currency::CurrencyRates;
    use crate::domain::destination::{EventNames, Secret};

    fn event() -> FeedEvent {
        let mut e = super::super::format::test_event(1_700_000_000_123);
        e.event_id = "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b".into();
        e.value = Some("100".into());
        e.currency = "XTR".into();
        e.tg_id = Some(777);
        e.ttclid = Some("E.C.P.tt-click".into());
        e
    }

    fn rules() -> MetaRules {
        MetaRules {
            event_names: EventNames::default(),
            currency_rates: CurrencyRates::parse(
                &[("XTR".to_owned(), "0.013 USD".to_owned())].into(),
            )
            .unwrap(),
        }
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
            tiktok_event(&event(), None, &MetaRules::default())
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
            rules: MetaRules::default(),
        };
        assert_eq!(
            tiktok_url(&t),
            "https://business-api.tiktok.com/open_api/v1.3/event/track/"
        );
        let body: Value = serde_json::from_slice(&tiktok_body(&t, &[json!({"n": 1})])).unwrap();
        assert_eq!(body["event_source"], "web");
        assert_eq!(body["event_source_id"], "C4AB");
        assert_eq!(body["test_event_code"], "TEST123");
        assert_eq!(body["data"], json!([{"n": 1}]));
        assert!(!body.to_string().contains("tt-secret-token"));
    }
}
