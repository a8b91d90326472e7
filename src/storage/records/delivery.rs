//! The records of conversions out: a destination (`DESTINATIONS`), where its deliveries stand
//! (`DELIVERY_STATES`), and each delivery that has been tried (`DELIVERIES`).

use serde::{Deserialize, Serialize};

use super::codec::Record;

/// A destination (`DESTINATIONS`): its space, name and kind, which events it takes, and its
/// kind's fields; the access token and signing secret as they must be used (so the data file is
/// kept private). A removed destination keeps its row, without its credentials, so that its
/// deliveries still name it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DestinationRecord {
    pub space_no: u32,
    pub name: String,
    /// `destination::Kind` as its stored discriminant.
    pub kind: u8,
    /// `destination::EventSet`'s bits.
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    /// A postback's URL template, a webhook's URL.
    pub url: Option<String>,
    pub signing_secret: Option<String>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
}
impl Record for DestinationRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "destination";
}

/// Where a destination's deliveries stand (`DELIVERY_STATES`): how many are in each state
/// (`destination::State as usize`), the last `inbox_id` whose delivery has left `pending`
/// (every later delivery of the destination is pending), and its last failure.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryStateRecord {
    pub counts: [u64; 5],
    pub sent_through: u64,
    pub last_error: Option<LastErrorRecord>,
}
impl Record for DeliveryStateRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "delivery state";
}

/// A destination's last failure: when, for which event (0: a test), the answer's status (0:
/// none came) and its first bytes, or what went wrong.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LastErrorRecord {
    pub at_ms: u64,
    pub inbox_id: u64,
    pub status: u16,
    pub answer: String,
}

/// A delivery that has been tried (`DELIVERIES`). One not yet tried is stored as an empty value,
/// which no record encodes to: a new event's deliveries cost their keys and nothing more.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// `destination::State` as its stored discriminant.
    pub state: u8,
    pub attempts: u32,
    pub last_attempt_ms: u64,
    /// Set while `retrying`: when it is tried next.
    pub next_attempt_ms: Option<u64>,
    /// Where `delivery_max_age` counts from when not the event's receipt: the time a retry was
    /// asked for by hand.
    pub since_ms: Option<u64>,
    /// The last answer's HTTP status; 0 when none came.
    pub last_status: u16,
    /// The last answer's first 300 bytes, or what went wrong.
    pub last_answer: String,
}
impl Record for DeliveryRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "delivery";
}
