//! The rules of a `TikTok` destination beyond its fields: which event name each kind is sent as,
//! and what `TikTok`'s answer to a request means for the events in it.
//!
//! `TikTok`'s Business API answers most requests with HTTP `200` and says what happened in the
//! body: `{"code": 0, "message": "OK", "request_id": "..."}` when the events were taken, another
//! `code` when not. So its `code` decides, as Meta's error codes do, and its answers mean the
//! same four things Meta's do ([`MetaAnswer`]): taken, worth sending again, a token that no
//! longer works, or refused. `TikTok` names no event of a refused request, so a refusal is
//! searched by halves (`delivery/meta.rs`).

use serde_json::Value;

use super::{MetaAnswer, Outcome, THROTTLE_WAIT_MS, outcome_of};

/// `TikTok`'s standard event for each of the tracker's event kinds.
#[must_use]
pub fn tiktok_standard_name(event: &str) -> &'static str {
    match event {
        "contact" => "Contact",
        "subscribed" => "Subscribe",
        "registration" => "CompleteRegistration",
        _ => "CompletePayment",
    }
}

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
pub fn tiktok_answer(status: u16, body: &str) -> MetaAnswer {
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
        return MetaAnswer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
    }
    if status == 401 || code.is_some_and(is_token_error) {
        return MetaAnswer::TokenRejected { message };
    }
    if code.is_some_and(is_server_error) {
        return MetaAnswer::Retry { after_ms: None };
    }
    match (outcome_of(status), code) {
        (Outcome::Delivered, Some(0)) => MetaAnswer::Delivered,
        // TikTok always says its `code`: a 2xx without one (a proxy's page, an `api_url` that
        // is not TikTok's) took nothing, and is tried again rather than counted delivered.
        (Outcome::Delivered, None) | (Outcome::Failed | Outcome::Held, _) => {
            MetaAnswer::Retry { after_ms: None }
        }
        _ => MetaAnswer::Refused {
            named: Vec::new(),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: i64) -> String {
        format!(r#"{{"code":{code},"message":"Invalid","request_id":"2024"}}"#)
    }

    #[test]
    fn the_code_decides_not_only_the_status() {
        assert_eq!(
            tiktok_answer(200, r#"{"code":0,"message":"OK","request_id":"1"}"#),
            MetaAnswer::Delivered
        );
        let throttled = MetaAnswer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
        assert_eq!(tiktok_answer(200, &answer(40_100)), throttled);
        assert_eq!(tiktok_answer(429, "slow down"), throttled);
        // Just beside the throttle: a refusal.
        assert!(matches!(
            tiktok_answer(200, &answer(40_101)),
            MetaAnswer::Refused { .. }
        ));
        for code in [40_001, 40_104, 40_105] {
            let MetaAnswer::TokenRejected { message } = tiktok_answer(200, &answer(code)) else {
                panic!("{code}")
            };
            assert_eq!(message, format!("TikTok: Invalid (code {code})"));
        }
        assert!(matches!(
            tiktok_answer(401, "no"),
            MetaAnswer::TokenRejected { .. }
        ));
        let again = MetaAnswer::Retry { after_ms: None };
        // A 2xx that is not TikTok's answer took nothing.
        assert_eq!(tiktok_answer(200, "<html>Welcome to nginx</html>"), again);
        assert_eq!(tiktok_answer(200, r#"{"message":"OK"}"#), again);
        assert_eq!(tiktok_answer(200, r#"{"code":"0"}"#), again);
        assert_eq!(tiktok_answer(200, &answer(50_000)), again);
        assert_eq!(tiktok_answer(200, &answer(59_999)), again);
        assert_eq!(tiktok_answer(503, "down"), again);
        // A parameter error (40002) is a bad event, not a bad token.
        for code in [40_002, 40_106, 60_000] {
            let MetaAnswer::Refused { named, message } = tiktok_answer(200, &answer(code)) else {
                panic!("{code}")
            };
            assert!(named.is_empty());
            assert!(message.contains(&code.to_string()), "{message}");
        }
    }

    #[test]
    fn tiktok_s_own_names_are_the_defaults() {
        use super::super::EventNames;
        let none = EventNames::default();
        let name = |event, first| none.name_or(event, first, tiktok_standard_name);
        assert_eq!(name("deposit", true), "CompletePayment");
        assert_eq!(name("contact", false), "Contact");
        assert_eq!(name("subscribed", false), "Subscribe");
        assert_eq!(name("registration", false), "CompleteRegistration");
    }
}
