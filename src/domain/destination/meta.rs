//! The rules of a Meta destination beyond its fields: which event name each kind is sent as,
//! and what Meta's answer to a request means for the events in it. Meta's error codes decide,
//! not only the HTTP status: Meta answers a throttle with `400`, and names the events it
//! refused as `data[i]` in its message.

use std::collections::BTreeMap;

use serde_json::Value;

use super::named::{check_named, named};
use super::{Outcome, outcome_of};
use crate::domain::currency::CurrencyRates;
use crate::error::Error;

/// The event name sent for each kind, where the destination sets one; Meta's standard event
/// for the kind otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventNames(pub BTreeMap<String, String>);

impl EventNames {
    /// From `{"deposit": "Purchase", "first_deposit": "FirstDeposit"}`: each key one of
    /// [`NAMED_KINDS`](super::NAMED_KINDS), each name one of Meta's standard events or a custom name of 1 to 40
    /// letters, digits, `_` and spaces.
    pub fn parse(names: &BTreeMap<String, String>) -> Result<EventNames, Error> {
        check_named(
            "event_names",
            names,
            "one of Meta's standard events (Purchase, Lead, ...) or 1 to 40 of A-Z, a-z, 0-9, \
             '_' and ' '",
            |name| {
                (1..=40).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
            },
        )?;
        Ok(EventNames(names.clone()))
    }

    /// The name an event of kind `event` is sent as; `first_deposit` for a deposit that was
    /// its customer's first.
    #[must_use]
    pub fn name_for(&self, event: &str, first_deposit: bool) -> &str {
        self.name_or(event, first_deposit, standard_name)
    }

    /// The name an event of kind `event` is sent as, where the destination sets one;
    /// `standard`'s name for the kind otherwise (each platform has its own standard events).
    #[must_use]
    pub fn name_or(
        &self,
        event: &str,
        first_deposit: bool,
        standard: fn(&str) -> &'static str,
    ) -> &str {
        named(&self.0, event, first_deposit).unwrap_or_else(|| standard(event))
    }
}

/// What a Meta destination decides about each event beyond its target: the names it sends
/// and the rates it converts currencies Meta does not take by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaRules {
    pub event_names: EventNames,
    pub currency_rates: CurrencyRates,
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

/// How long a throttled destination waits before it sends again, at least.
pub const THROTTLE_WAIT_MS: u64 = 60_000;

/// What Meta's answer to one request means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaAnswer {
    Delivered,
    /// Worth sending again: a transient error, a throttle (no sooner than `after_ms`), a
    /// timeout, a `5xx`.
    Retry {
        after_ms: Option<u64>,
    },
    /// The access token no longer works (expired, revoked, its permission withdrawn), the
    /// pixel it names is not there for it, or the API version is no longer served: no event
    /// could ever go, so nothing is sent until the destination is changed (a new token, pixel
    /// or `api_version`), rather than each event going dead.
    TokenRejected {
        message: String,
    },
    /// Refused for good: the events it names (`data[i]`), or, when it names none, some of them.
    Refused {
        named: Vec<usize>,
        message: String,
    },
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
pub fn meta_answer(status: u16, body: &str) -> MetaAnswer {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let Some(error) = error else {
        return match outcome_of(status) {
            Outcome::Delivered => MetaAnswer::Delivered,
            Outcome::Failed | Outcome::Held => MetaAnswer::Retry { after_ms: None },
            Outcome::Refused => MetaAnswer::Refused {
                named: Vec::new(),
                message: body.to_owned(),
            },
        };
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
        MetaAnswer::TokenRejected { message }
    } else if is_throttle(code) {
        MetaAnswer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        }
    } else if transient || matches!(code, 1 | 2) || outcome_of(status) == Outcome::Failed {
        MetaAnswer::Retry { after_ms: None }
    } else if outcome_of(status) == Outcome::Delivered {
        MetaAnswer::Delivered
    } else {
        let mut named: Vec<usize> = ["message", "error_user_title", "error_user_msg"]
            .into_iter()
            .flat_map(|f| named_events(text(f)))
            .collect();
        named.sort_unstable();
        named.dedup();
        MetaAnswer::Refused { named, message }
    }
}

/// The `i` of every `data[i]` in `text`.
fn named_events(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("data[") {
        let after = &rest[at + 5..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after.as_bytes().get(digits) == Some(&b']') {
            if let Ok(i) = after[..digits].parse() {
                out.push(i);
            }
        }
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: i64, extra: &str) -> String {
        format!(
            r#"{{"error":{{"message":"Invalid parameter","type":"OAuthException","code":{code}{extra},"fbtrace_id":"x"}}}}"#
        )
    }

    #[test]
    fn codes_decide_not_only_the_status() {
        assert_eq!(
            meta_answer(200, r#"{"events_received":3}"#),
            MetaAnswer::Delivered
        );
        let throttled = MetaAnswer::Retry {
            after_ms: Some(THROTTLE_WAIT_MS),
        };
        for code in [4, 17, 32, 341, 368, 613, 80_000, 80_014] {
            assert_eq!(meta_answer(400, &error(code, "")), throttled, "{code}");
        }
        let again = MetaAnswer::Retry { after_ms: None };
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
                    MetaAnswer::TokenRejected { .. }
                ),
                "{code}"
            );
        }
        for code in [80_015, 2634, 2636, 11, 13, 101, 103, 367, 369] {
            assert!(
                matches!(
                    meta_answer(400, &error(code, "")),
                    MetaAnswer::Refused { .. }
                ),
                "{code}"
            );
        }
        // A pixel that is not there pauses; another subcode of 100 is the events' fault.
        assert!(matches!(
            meta_answer(400, &error(100, r#","error_subcode":33"#)),
            MetaAnswer::TokenRejected { .. }
        ));
        for other in [r#","error_subcode":32"#, r#","error_subcode":34"#, ""] {
            assert!(
                matches!(
                    meta_answer(400, &error(100, other)),
                    MetaAnswer::Refused { .. }
                ),
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
        let MetaAnswer::Refused { named, message } = meta_answer(400, &body) else {
            panic!()
        };
        assert_eq!(named, [3, 17]);
        assert!(message.contains("Invalid currency"), "{message}");
        let MetaAnswer::Refused { named, .. } = meta_answer(400, &error(100, "")) else {
            panic!()
        };
        assert!(named.is_empty());
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
        assert_eq!(none.name_for("deposit", true), "Purchase");
        assert_eq!(none.name_for("registration", false), "CompleteRegistration");
        let dep = set(&[("deposit", "Deposit made")]).unwrap();
        assert_eq!(dep.name_for("deposit", true), "Deposit made");
        let first = set(&[("deposit", "Purchase"), ("first_deposit", "FirstDeposit")]).unwrap();
        assert_eq!(first.name_for("deposit", true), "FirstDeposit");
        assert_eq!(first.name_for("deposit", false), "Purchase");
        assert_eq!(first.name_for("contact", false), "Contact");
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
