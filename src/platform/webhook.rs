//! A webhook, whole: a `POST` of each event as the feed shows it to the team's own systems,
//! signed as Standard Webhooks specifies, with a signing secret that a rotation replaces and
//! whose predecessor still signs for a grace.

use hmac::{KeyInit as _, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::address::{URL, check_url};
use super::face::{Platform, Request, Sending};
use super::given::{DestinationFields, Field, missing};
use crate::domain::feed::FeedEvent;
use crate::domain::secret::Secret;
use crate::error::Error;

/// How long a webhook's replaced signing secret still signs beside the new one, as a
/// credential's grace.
pub const ROTATION_GRACE_MS: u64 = 24 * 3_600_000;

/// Deliveries per batch of a webhook, sent at once each in a request of its own.
const BATCH: usize = 256;

/// A webhook's settings: its URL and the secrets it signs with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub url: String,
    pub signing_secret: Secret,
    /// The secret it had before a rotation, while it still signs.
    pub previous: Option<PreviousSecret>,
}

/// A webhook's signing secret that was replaced: it still signs beside the new one until
/// `until_ms`, so a receiver can be given the new one without losing a delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousSecret {
    pub secret: Secret,
    pub until_ms: u64,
}

impl Webhook {
    /// The settings given in `f`, checked, with a new signing secret.
    fn check_fields(f: &DestinationFields, allow_private: bool) -> Result<Webhook, Error> {
        let url = f
            .text("url")
            .ok_or_else(|| missing("url", "(where the events are sent)"))?;
        check_url("url", &url, allow_private)?;
        Ok(Webhook {
            url,
            signing_secret: new_signing_secret(),
            previous: None,
        })
    }

    /// The secrets it signs with at `now_ms`: its own, and the one a rotation replaced while
    /// that one's grace lasts.
    #[must_use]
    pub fn signing_secrets(&self, now_ms: u64) -> Vec<&str> {
        std::iter::once(self.signing_secret.expose())
            .chain(
                self.previous
                    .iter()
                    .filter(|p| now_ms < p.until_ms)
                    .map(|p| p.secret.expose()),
            )
            .collect()
    }
}

impl Platform for Webhook {
    fn fields() -> &'static [Field] {
        &[Field {
            required: true,
            label: "URL",
            help: "Where the team's own system takes the signed events.",
            ..URL
        }]
    }

    fn title() -> &'static str {
        "webhook"
    }

    fn sending() -> Sending {
        Sending::Alone { batch: BATCH }
    }

    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Webhook, Error> {
        Webhook::check_fields(f, allow_private)
    }

    /// A webhook feeds the team's own systems, which want every event.
    fn only_attributed_by_default() -> bool {
        false
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_text("url", Some(self.url.clone()));
    }

    fn shown_fields() -> &'static [(&'static str, &'static str)] {
        &[(
            "previous_secret_until_ms",
            r#"{"type": "integer", "minimum": 0, "description": "A replaced secret still signs beside the new one until then."}"#,
        )]
    }

    fn shown(&self, view: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(p) = &self.previous {
            view.insert("previous_secret_until_ms".into(), p.until_ms.into());
        }
    }

    /// A webhook keeps its signing secrets: a rotation replaces them, never a change.
    fn keep_from(&mut self, before: &Webhook) {
        self.signing_secret.clone_from(&before.signing_secret);
        self.previous.clone_from(&before.previous);
    }

    fn address(&self) -> &str {
        &self.url
    }

    /// The signed `POST` of one event, as Standard Webhooks specifies: a signature under each
    /// of its secrets.
    fn request_alone(
        &self,
        event: &FeedEvent,
        _click_query: Option<&str>,
        now_ms: u64,
    ) -> Option<Request> {
        let body = webhook_body(event);
        let id = webhook_id(event);
        let timestamp_s = now_ms / 1000;
        let headers = vec![
            (
                "webhook-signature",
                webhook_signature(&self.signing_secrets(now_ms), id, timestamp_s, &body),
            ),
            ("webhook-timestamp", timestamp_s.to_string()),
            ("webhook-id", id.to_owned()),
        ];
        Some(Request::post_json(self.url.clone(), headers, body))
    }
}

/// A webhook's new signing secret, as Standard Webhooks writes one: `whsec_` and the base64
/// of 32 random bytes, the key of its HMAC-SHA256.
///
/// # Panics
/// Only on a broken system, whose random source fails.
#[must_use]
pub fn new_signing_secret() -> Secret {
    use base64::Engine as _;
    let mut key = [0u8; 32];
    // The system's random source fails only on a broken system, where nothing else would work.
    getrandom::fill(&mut key).expect("the system's random source");
    Secret::new(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    ))
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

/// `webhook-id`: the event's `event_id`, the same for every attempt at one event, so a
/// receiver drops a second copy, and never another event's.
#[must_use]
pub(super) fn webhook_id(event: &FeedEvent) -> &str {
    &event.event_id
}

#[cfg(test)]
mod tests {
    use super::*;

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
