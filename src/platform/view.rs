//! Destinations and deliveries as answers and pages show them: never a credential.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::delivery::{State, StateCounts};
use super::destination::Destination;
use super::given::{DestinationFields, Given, Shape};
use super::registry::Kind;
use crate::domain::credential::{cut_secret, redact_url_token};
use crate::domain::secret::Secret;

/// A destination's last failure, as its list shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastError {
    pub at_ms: u64,
    pub inbox_id: Option<String>,
    pub status: Option<u16>,
    pub answer: String,
}

/// Whether a destination sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DestinationState {
    Active,
    /// Its credential is no longer taken: it sends nothing, its deliveries wait (`paused`)
    /// until a `PATCH` resumes it.
    Paused,
}

/// A destination as answers show it: what every destination has, and its platform's fields
/// (`settings`, beside the others in the same object): never its access token (its last 4
/// characters only), and its signing secret only in the answer that created it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(transform = with_settings)]
pub struct DestinationView {
    pub name: String,
    pub kind: Kind,
    pub events: Vec<String>,
    pub only_attributed: bool,
    /// Only in the answer that created a webhook or rotated its secret: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signing_secret: Option<String>,
    pub created_at_ms: u64,
    pub state: DestinationState,
    /// Why it is paused (the remote's answer), while it is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub paused_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub paused_at_ms: Option<u64>,
    pub deliveries: StateCounts,
    pub last_error: Option<LastError>,
    /// `google_ads`: the password, only in the answer that created the destination or gave it
    /// a new one: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub password: Option<String>,
    /// Its platform's fields (`docs/api.md#destinations`), a token by its last 4 characters,
    /// and what its platform shows beside them (a webhook's `previous_secret_until_ms`, Google
    /// Ads' `last_fetched_at_ms`, `rows_served` and `fetches`).
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

/// `DestinationView`'s schema closed over every kind's fields as answers show them, each as its
/// room declares it, and what the rooms show beside them.
fn with_settings(schema: &mut schemars::Schema) {
    let object = schema.ensure_object();
    let properties = object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    for kind in Kind::ALL {
        for field in kind.fields() {
            // As stored, not as a body may give it: a token by its last 4 characters, an
            // address that a private network allowed.
            let mut shown = match field.shape {
                Shape::Text => serde_json::json!({"type": "string"}),
                Shape::Pairs => {
                    serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}})
                }
            };
            if !field.help.is_empty() {
                shown["description"] = field.help.into();
            }
            properties[field.name] = shown;
        }
        for (name, shown) in kind.shown_fields() {
            properties[*name] = serde_json::from_str(shown).unwrap_or_default();
        }
    }
    object.insert("additionalProperties".into(), false.into());
}

impl DestinationView {
    #[must_use]
    pub fn new(d: &Destination, deliveries: StateCounts, last_error: Option<LastError>) -> Self {
        // What a way in would give, as answers show it: a token by its last 4 characters, a
        // `token=` in a URL (the receiver's credential) redacted, as the log and the delivery's
        // answer show it.
        let mut f = DestinationFields::default();
        d.target.platform().fields_of(&mut f);
        let kind = d.target.kind();
        let mut settings = Map::new();
        for (name, given) in f.own {
            let secret = kind.field(&name).is_some_and(|field| field.secret);
            let shown = match given {
                Given::Text(text) if secret => Value::from(Secret::new(text).last4()),
                Given::Text(text) => Value::from(redact_url_token(&text)),
                Given::Pairs(pairs) => Value::from(
                    pairs
                        .into_iter()
                        .map(|(k, v)| (k, Value::from(v)))
                        .collect::<Map<_, _>>(),
                ),
            };
            settings.insert(name, shown);
        }
        d.target.platform().shown(&mut settings);
        DestinationView {
            name: d.name.clone(),
            kind,
            events: d.events.names(),
            only_attributed: d.only_attributed,
            signing_secret: None,
            created_at_ms: d.created_at_ms,
            state: if d.paused.is_some() {
                DestinationState::Paused
            } else {
                DestinationState::Active
            },
            // Cut again when shown: an answer kept by an older release may quote the token.
            paused_reason: d
                .paused
                .as_ref()
                .map(|p| cut_secret(&p.reason, d.target.platform_token())),
            paused_at_ms: d.paused.as_ref().map(|p| p.at_ms),
            deliveries,
            last_error: last_error.map(|e| LastError {
                answer: cut_secret(&e.answer, d.target.platform_token()),
                ..e
            }),
            password: None,
            settings,
        }
    }

    /// Its platform's text field `name`, as shown.
    #[must_use]
    pub fn text(&self, name: &str) -> Option<&str> {
        self.settings.get(name).and_then(Value::as_str)
    }

    /// Its platform's number `name` (what a fetch came to), as shown.
    #[must_use]
    pub fn number(&self, name: &str) -> Option<u64> {
        self.settings.get(name).and_then(Value::as_u64)
    }

    /// Its platform's object field `name`, as shown.
    #[must_use]
    pub fn pairs(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let object = self.settings.get(name)?.as_object()?;
        Some(
            object
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect(),
        )
    }
}

/// One delivery as `GET /deliveries` shows it: never a credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeliveryView {
    pub inbox_id: String,
    /// The event's `event_id`, which receivers deduplicate by; `None` once retention removed
    /// the event.
    pub event_id: Option<String>,
    pub destination: String,
    pub state: State,
    pub attempts: u32,
    pub last_attempt_at_ms: Option<u64>,
    pub next_attempt_at_ms: Option<u64>,
    pub last_status: Option<u16>,
    pub last_answer: Option<String>,
}
