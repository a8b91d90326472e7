//! What each kind of destination is sent (`docs/api.md#conversions-out`): Meta's Conversions
//! API request, a postback's URL, a webhook's signed body. Pure functions of the event, so the
//! tests can check each one byte by byte.

use hmac::{KeyInit as _, Mac as _};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::domain::click::ClientHints;
use crate::domain::destination::{
    Meta, MetaRules, QUERY_MACRO, Statuses, fill_macros, is_private, query_param,
};
use crate::domain::feed::FeedEvent;

/// Meta refuses a whole request when one of its events happened more than 7 days before.
pub const META_MAX_EVENT_AGE_MS: u64 = 7 * 24 * 3_600_000;
/// The most events one request to Meta carries, as Meta allows.
pub const META_BATCH: usize = 1000;
/// Where the conversions happen: in a Telegram chat with the bot. Meta's `chat` is "a
/// conversion made via a messaging app, SMS, or online messaging feature".
pub const ACTION_SOURCE: &str = "chat";

/// SHA-256 of `text`, in lowercase hex.
#[must_use]
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The `event_id` of an event, which every receiver deduplicates by: a webhook's
/// `webhook-id`, a postback's `{event_id}`. Never another event's, in any data file, so a
/// receiver drops a retry and nothing else.
#[must_use]
pub fn event_id(event: &FeedEvent) -> &str {
    &event.event_id
}

/// The `event_id` an ad platform (Meta, `TikTok`) is sent: the event's `eid` when it has one, the
/// payment's own id, under which a pixel or a CRM reporting the same order deduplicates with
/// it; otherwise its [`event_id`].
#[must_use]
pub fn platform_event_id(event: &FeedEvent) -> &str {
    event.eid.as_deref().unwrap_or_else(|| event_id(event))
}

/// An event older than this is never put in a request: Meta refuses one more than 7 days old,
/// and an hour is left for the request to arrive.
pub const META_SEND_WITHIN_MS: u64 = META_MAX_EVENT_AGE_MS - 3_600_000;

/// One entry of a request's `data`, by the destination's `rules`; or why the event cannot be
/// sent to Meta at all: nothing Meta could match it to (no click id, no Telegram id, no
/// hints), a currency without a rate, a value Meta cannot take.
pub fn meta_event(
    event: &FeedEvent,
    hints: Option<&ClientHints>,
    rules: &MetaRules,
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
    let name = rules
        .event_names
        .name_for(&event.event, event.first_deposit == Some(true));
    let mut e = json!({
        "event_name": name,
        "event_time": event.occurred_at_ms / 1000,
        "event_id": platform_event_id(event),
        "action_source": ACTION_SOURCE,
        "user_data": user,
    });
    if event.event == "deposit" {
        e["custom_data"] = iso_value(event, rules, "Meta")?;
    }
    Ok(e)
}

/// A deposit's `value` and `currency` as an ad platform (`platform`, named in a refusal) takes
/// them: converted to ISO 4217 by the destination's `currency_rates`, the value a JSON number;
/// or why it cannot be sent (a currency without a rate, a value no number can hold).
pub fn iso_value(event: &FeedEvent, rules: &MetaRules, platform: &str) -> Result<Value, String> {
    let value = event.value.as_deref().unwrap_or("0");
    let (amount, currency) = rules.currency_rates.to_iso(value, &event.currency)?;
    let number = amount
        .to_string()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("not sent: the value {value} is no number {platform} can take"))?;
    Ok(json!({ "value": number, "currency": currency }))
}

/// The address of a Meta destination's requests.
#[must_use]
pub fn meta_url(meta: &Meta) -> String {
    format!(
        "{}/{}/{}/events",
        meta.graph_url, meta.api_version, meta.pixel_id
    )
}

/// The body of one request to Meta: the events, the access token (in the body, never in the
/// URL, which proxies and logs keep), and the test code when set.
#[must_use]
pub fn meta_body(meta: &Meta, data: &[Value]) -> Vec<u8> {
    let mut body = json!({
        "data": data,
        "access_token": meta.access_token.expose(),
    });
    if let Some(code) = &meta.test_event_code {
        body["test_event_code"] = json!(code);
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A postback's address for `event`: each macro replaced percent-encoded, or by nothing;
/// `{status}` by the destination's `statuses`, `{q.NAME}` from the click's query.
#[must_use]
pub fn postback_url(
    template: &str,
    event: &FeedEvent,
    statuses: &Statuses,
    click_query: Option<&str>,
) -> String {
    let first_deposit = event.first_deposit == Some(true);
    fill_macros(template, |name| match name {
        "uid" => event.uid.clone(),
        "event" => Some(event.event.clone()),
        "event_id" => Some(event_id(event).to_owned()),
        "first_deposit" => Some(if first_deposit { "1" } else { "0" }.to_owned()),
        "status" => Some(statuses.word_for(&event.event, first_deposit).to_owned()),
        _ if name.starts_with(QUERY_MACRO) => {
            click_query.and_then(|q| query_param(q, &name[QUERY_MACRO.len()..]))
        }
        "value" => event.value.clone(),
        "currency" => event.value.as_ref().map(|_| event.currency.clone()),
        "eid" => event.eid.clone(),
        "inbox_id" => Some(event.inbox_id.clone()),
        "tg_id" => event.tg_id.map(|t| t.to_string()),
        "fbclid" => event.fbclid.clone(),
        "campaign_name" => event.campaign_name.clone(),
        "link_slug" => event.link_slug.clone(),
        "occurred_at_ms" => Some(event.occurred_at_ms.to_string()),
        _ => None,
    })
}

/// A webhook's body: the event exactly as `GET /events` shows it.
#[must_use]
pub fn webhook_body(event: &FeedEvent) -> Vec<u8> {
    serde_json::to_vec(event).unwrap_or_default()
}

/// The HMAC key of a webhook's signing secret: a Standard Webhooks secret (`whsec_` and
/// base64) is the bytes it encodes; a secret of another form is its text as it is.
#[must_use]
pub fn signing_key(secret: &str) -> Vec<u8> {
    use base64::Engine as _;
    secret
        .strip_prefix("whsec_")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec())
}

/// `webhook-signature`, as Standard Webhooks specifies: `v1,<base64 HMAC-SHA256 of
/// "<id>.<timestamp>.<body>">` under each of `secrets` (two while a rotated one still signs),
/// separated by a space.
///
/// # Panics
/// Never: HMAC takes a key of any length.
#[must_use]
pub fn webhook_signature(secrets: &[&str], id: &str, timestamp_s: u64, body: &[u8]) -> String {
    use base64::Engine as _;
    secrets
        .iter()
        .map(|secret| {
            let mut mac = hmac::Hmac::<Sha256>::new_from_slice(&signing_key(secret))
                .expect("HMAC takes any key");
            mac.update(format!("{id}.{timestamp_s}.").as_bytes());
            mac.update(body);
            let tag = mac.finalize().into_bytes();
            format!(
                "v1,{}",
                base64::engine::general_purpose::STANDARD.encode(tag)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `webhook-id`: the event's [`event_id`], the same for every attempt at one event, so a
/// receiver drops a second copy, and never another event's.
#[must_use]
pub fn webhook_id(event: &FeedEvent) -> &str {
    event_id(event)
}

/// The synthetic event a test of a destination sends: a deposit of 1.00 USD by a click with
/// an `fbclid` and a Telegram user, received now, with a new `event_id` each time (so a
/// receiver that deduplicates shows every test).
#[must_use]
pub fn test_event(now_ms: u64) -> FeedEvent {
    FeedEvent {
        event_id: crate::domain::event::EventId::random().to_string(),
        ttclid: None,
        gclid: None,
        gbraid: None,
        wbraid: None,
        fbp: None,
        inbox_id: "0".into(),
        event: "deposit".into(),
        uid: Some("test".into()),
        value: Some("1.00".into()),
        currency: "USD".into(),
        eid: None,
        occurred_at_ms: now_ms,
        received_at_ms: now_ms,
        source: Some("post".into()),
        matched: true,
        link_slug: Some("test".into()),
        fbclid: Some("test".into()),
        campaign_name: Some("test".into()),
        clicked_at_ms: Some(now_ms),
        tg_id: Some(1),
        fbc: Some(crate::domain::feed::fbc(now_ms, "test")),
        attributed_by: Some("uid".into()),
        first_deposit: Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> FeedEvent {
        let mut e = test_event(1_700_000_000_123);
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
        let rules = MetaRules::default();
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

    /// Meta's and `TikTok`'s `event_id` is the payment's `eid` when there is one, else the
    /// event's own id; a webhook's and a postback's is always the event's own id.
    #[test]
    fn each_receiver_gets_the_event_id_it_deduplicates_by() {
        let mut e = usd_event();
        let own = e.event_id.clone();
        assert_eq!(platform_event_id(&e), own);
        e.eid = Some("order-7".into());
        let sent = meta_event(&e, None, &MetaRules::default()).unwrap();
        assert_eq!(sent["event_id"], "order-7");
        assert_eq!(webhook_id(&e), own);
        assert_eq!(
            postback_url(
                "https://x.io/pb?id={event_id}&n={inbox_id}",
                &e,
                &Statuses::default(),
                None
            ),
            format!("https://x.io/pb?id={own}&n=42")
        );
        assert_ne!(test_event(1).event_id, test_event(1).event_id);
    }

    /// `fbp` is sent when the click brought one; a prelander's `fbc` is sent instead of the one
    /// made from the fbclid; a hint without an address sends none.
    #[test]
    fn meta_gets_fbp_and_the_prelanders_fbc() {
        let rules = MetaRules::default();
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

    #[test]
    fn a_signature_is_an_hmac_of_the_id_time_and_body_under_each_secret() {
        let s = webhook_signature(&["whsec_a2V5"], "m", 1, b"{}");
        assert!(s.starts_with("v1,"), "{s}");
        assert_eq!(s.len(), "v1,".len() + 44);
        assert_ne!(s, webhook_signature(&["whsec_a2V5"], "m", 1, b"{ }"));
        assert_ne!(s, webhook_signature(&["whsec_a2V5"], "m", 2, b"{}"));
        assert_ne!(s, webhook_signature(&["whsec_a2V5"], "n", 1, b"{}"));
        assert_eq!(signing_key("whsec_a2V5"), b"key");
        assert_eq!(signing_key("trk_ws_x"), b"trk_ws_x");
        let both = webhook_signature(&["whsec_a2V5", "whsec_b3RoZXI="], "m", 1, b"{}");
        assert_eq!(both.split(' ').next(), Some(s.as_str()));
        assert_eq!(both.split(' ').count(), 2);
    }
}
