//! Destinations and deliveries as answers and pages show them: never a credential.

use serde::{Deserialize, Serialize};

use super::{Destination, Kind, State, StateCounts, Target};

/// A destination's last failure, as its list shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastError {
    pub at_ms: u64,
    pub inbox_id: Option<String>,
    pub status: Option<u16>,
    pub answer: String,
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
    /// Only in the answer that created a webhook: shown once.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signing_secret: Option<String>,
    pub created_at_ms: u64,
    pub deliveries: StateCounts,
    pub last_error: Option<LastError>,
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
            signing_secret: None,
            created_at_ms: d.created_at_ms,
            deliveries,
            last_error,
        };
        match &d.target {
            Target::MetaCapi(m) => {
                view.pixel_id = Some(m.pixel_id.clone());
                view.access_token = Some(m.access_token.last4());
                view.test_event_code.clone_from(&m.test_event_code);
                view.api_version = Some(m.api_version.clone());
                view.graph_url = Some(m.graph_url.clone());
            }
            Target::Postback { url } | Target::Webhook { url, .. } => view.url = Some(url.clone()),
        }
        view
    }
}

/// One delivery as `GET /deliveries` shows it: never a credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeliveryView {
    pub inbox_id: String,
    pub destination: String,
    pub state: State,
    pub attempts: u32,
    pub last_attempt_at_ms: Option<u64>,
    pub next_attempt_at_ms: Option<u64>,
    pub last_status: Option<u16>,
    pub last_answer: Option<String>,
}
