//! Destinations and deliveries (`docs/api.md#destinations`): where a space's events are sent
//! on to (Meta's Conversions API, an affiliate postback, a signed webhook, `TikTok`'s Events
//! API), the rules of their
//! fields, which events each one takes, and the states a delivery goes through.
//!
//! Every way in (`POST /destinations`, `tracker destination create`, the admin page) turns what
//! it was given into a [`NewDestination`] here, so a destination is checked by one set of rules.
//! The writer decides which destinations an event goes to with [`Destination::wants`], against
//! the [`Directory`] it holds in memory; the sender (`delivery/`) moves a delivery from state to
//! state with [`next_state`].
//!
//! This file holds the kinds and what a stored destination is; beside it: `fields.rs` (the rules
//! of each kind's fields), `address.rs` (which addresses a destination may reach), `macros.rs`
//! (a postback's URL macros), `named.rs` (settings by event kind: names and status words),
//! `meta.rs` (Meta's event names and what its answers mean), `google.rs` (the file Google Ads
//! fetches, and who may fetch it),
//! `request.rs` (the bodies and queries that name destinations and deliveries), `delivery.rs`
//! (a delivery's states and its retries), `view.rs` (what answers show) and `tiktok.rs`
//! (`TikTok`'s event names and what its answers mean).

mod address;
mod delivery;
mod fields;
mod google;
mod kind;
mod macros;
mod meta;
mod named;
mod request;
mod tiktok;
mod view;

pub use address::{
    HttpsUrlJson, MAX_FILLED_URL_LEN, MAX_URL_LEN, check_url, check_url_of, is_private,
    private_address,
};
pub use delivery::{
    ANSWER_BYTES, Attempt, FIRST_RETRY_MS, MAX_RETRY_MS, MaxAge, Outcome, STORED_STATES, State,
    StateCounts, answer_head, next_state, outcome_of, retry_delay_ms,
};
pub use fields::{
    DEFAULT_API_VERSION, DEFAULT_GRAPH_URL, DEFAULT_TIKTOK_API_URL, DestinationFields,
    DestinationPatch, NewDestination, check_name, check_test_event_code, new_signing_secret,
};
pub use google::{
    BRAID_COLUMNS, COLUMNS, Conversion, ConversionNames, DEFAULT_USER, Fetches, Google,
    GoogleClick, Password, PasswordDigest, REALM, TIME_ZONE_PARAMETER, WINDOW_MS, conversion_file,
    conversion_time, new_password,
};
pub use kind::{
    ClickFacts, Destination, Directory, EventSet, Kind, MAX_DESTINATIONS, Meta, Paused,
    PreviousSecret, ROTATION_GRACE_MS, Secret, Target, Tiktok,
};
pub use macros::{MACROS, QUERY_MACRO, Statuses, fill_macros, query_param};
pub use meta::{
    EventNames, MetaAnswer, MetaRules, THROTTLE_WAIT_MS, meta_answer, names_old_version,
    names_unknown_object, standard_name,
};
pub use named::NAMED_KINDS;
pub use request::{
    DEFAULT_DELIVERIES_PAGE, DeliveryQuery, DestinationBody, DestinationChangeJson,
    MAX_DELIVERIES_PAGE, NewDestinationJson, RetryBody, RetryRequest, TestBody,
};
pub use tiktok::{tiktok_answer, tiktok_standard_name};
pub use view::{DeliveryView, DestinationState, DestinationView, LastError};
