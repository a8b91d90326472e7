//! Destinations and deliveries as answers and pages show them: never a credential.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::delivery::{State, StateCounts};
use super::destination::Destination;
use super::given::DestinationFields;
use super::registry::{Kind, Target};
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

/// A destination as answers show it: never its access token (its last 4 characters only), and
/// its signing secret only in the answer that created it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DestinationView {
    pub name: String,
    pub kind: Kind,
    pub events: Vec<String>,
    pub only_attributed: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pixel_id: Option<String>,
    /// `…` and the token's last 4 characters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub access_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub test_event_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub graph_url: Option<String>,
    /// An ad platform's: the event names it sets, by kind (and `first_deposit`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub event_names: Option<BTreeMap<String, String>>,
    /// An ad platform's: its rates, `{"XTR": "0.013 USD"}`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub currency_rates: Option<BTreeMap<String, String>>,
    /// `postback`: the words of `{status}`, by kind.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub statuses: Option<BTreeMap<String, String>>,
    /// An ad platform's pixel, by its code.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pixel_code: Option<String>,
    /// An ad platform's API address.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub api_url: Option<String>,
    /// Only in the answer that created a webhook or rotated its secret: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signing_secret: Option<String>,
    /// A webhook's replaced secret still signs beside the new one until then.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub previous_secret_until_ms: Option<u64>,
    pub created_at_ms: u64,
    pub state: DestinationState,
    /// Why it is paused (the remote's answer), while it is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub paused_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub paused_at_ms: Option<u64>,
    pub deliveries: StateCounts,
    pub last_error: Option<LastError>,
    /// `google_ads`: the conversion names it sets, by kind (and `first_deposit`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub conversion_names: Option<BTreeMap<String, String>>,
    /// `google_ads`: the user name Google Ads fetches the file with.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub user: Option<String>,
    /// `google_ads`: the password, only in the answer that created the destination or gave it
    /// a new one: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub password: Option<String>,
    /// `google_ads`: when Google Ads last fetched the file (absent: never yet).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub last_fetched_at_ms: Option<u64>,
    /// `google_ads`: the rows the last fetch was served.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rows_served: Option<u64>,
    /// `google_ads`: how many times the file was fetched.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fetches: Option<u64>,
}

impl DestinationView {
    #[must_use]
    pub fn new(d: &Destination, deliveries: StateCounts, last_error: Option<LastError>) -> Self {
        let mut view = DestinationView {
            name: d.name.clone(),
            kind: d.target.kind(),
            events: d.events.names(),
            only_attributed: d.only_attributed,
            url: None,
            pixel_id: None,
            access_token: None,
            test_event_code: None,
            api_version: None,
            graph_url: None,
            event_names: None,
            currency_rates: None,
            statuses: None,
            pixel_code: None,
            api_url: None,
            signing_secret: None,
            previous_secret_until_ms: None,
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
            conversion_names: None,
            user: None,
            password: None,
            last_fetched_at_ms: None,
            rows_served: None,
            fetches: None,
        };
        // What a way in would give, as answers show it: a token by its last 4 characters, a
        // `token=` in a URL (the receiver's credential) redacted, as the log and the delivery's
        // answer show it.
        let mut f = DestinationFields::default();
        d.target.platform().fields_of(&mut f);
        view.url = f.url.map(|url| redact_url_token(&url));
        view.pixel_id = f.pixel_id;
        view.access_token = f.access_token.map(|token| Secret::new(token).last4());
        view.test_event_code = f.test_event_code;
        view.api_version = f.api_version;
        view.graph_url = f.graph_url;
        view.event_names = f.event_names;
        view.currency_rates = f.currency_rates;
        view.statuses = f.statuses;
        view.pixel_code = f.pixel_code;
        view.api_url = f.api_url;
        view.conversion_names = f.conversion_names;
        view.user = f.user;
        match &d.target {
            Target::Webhook(w) => {
                view.previous_secret_until_ms = w.previous.as_ref().map(|p| p.until_ms);
            }
            Target::GoogleAds(g) => {
                view.last_fetched_at_ms = g.fetches.last_at_ms;
                view.rows_served = Some(g.fetches.last_rows);
                view.fetches = Some(g.fetches.count);
            }
            _ => {}
        }
        view
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
