//! Destinations and the platforms they send to (`docs/api.md#destinations`): a room per
//! platform, each holding it whole (its settings and their rules, the request it builds, what
//! its answers mean, its event names), what the platforms share, and what every destination
//! has whatever its platform (its events, its deliveries' states, the addresses it may reach).
//! Pure: no HTTP client, no storage; the sender (`delivery/`) sends the plain requests the
//! rooms build, and storage keeps their settings.
//!
//! The rooms: `meta.rs` (Meta's Conversions API), `tiktok.rs` (`TikTok`'s Events API),
//! `google_ads.rs` (the file Google Ads fetches, and who may fetch it), `postback.rs` (an
//! affiliate network's URL template and its macros), `webhook.rs` (a signed `POST` of each
//! event), `snapchat.rs` (Snapchat's Conversions API). Each implements [`Platform`] (`face.rs`), the platforms' shared face, and is one
//! line of the registry (`registry.rs`), the only list of kinds ([`Kind`]) from which every
//! list of kinds the command line, the control socket, the admin page and `/openapi.json`
//! show comes. (The trait and the registry each have a file of their own, not this one:
//! the rooms use the trait and the registry uses the rooms, and a file's imports never run in
//! a circle.)
//!
//! What the platforms share: the search by halves that finds the events a platform refused
//! (`halves.rs`), the rules and ids the ad platforms share (`ad_rules.rs`: event names, the
//! rules of a token and an address), currency conversion (`currency.rs`), settings by event
//! kind (`names.rs`).
//!
//! Every way in (`POST /destinations`, `tracker destination create`, the admin page) turns what
//! it was given into [`DestinationFields`] (`given.rs`) and then into a [`NewDestination`]
//! (`fields.rs`), so a destination is checked by one set of rules. The writer decides which
//! destinations an event goes to with [`Destination::wants`], against the [`Directory`] it
//! holds in memory (`destination.rs`); the sender moves a delivery from state to state with
//! [`next_state`] (`delivery.rs`). Beside them: `address.rs` (which addresses a destination may
//! reach), `body.rs` (the bodies and queries that name destinations and deliveries) and
//! `view.rs` (what answers show).

mod ad_rules;
mod address;
mod body;
mod currency;
mod delivery;
mod destination;
mod face;
mod fields;
mod given;
pub mod google_ads;
pub mod halves;
pub mod meta;
mod names;
pub mod postback;
mod registry;
pub mod snapchat;
pub mod tiktok;
mod view;
pub mod webhook;

pub use ad_rules::{AdRules, EventNames, check_test_event_code};
pub use address::{
    HttpsUrlJson, MAX_FILLED_URL_LEN, MAX_URL_LEN, check_url, check_url_of, is_private,
    private_address,
};
pub use body::{
    DEFAULT_DELIVERIES_PAGE, DeliveryQuery, DestinationBody, DestinationChangeJson,
    MAX_DELIVERIES_PAGE, NewDestinationJson, RetryBody, RetryRequest, TestBody,
};
pub use delivery::{
    ANSWER_BYTES, Attempt, FIRST_RETRY_MS, MAX_RETRY_MS, MaxAge, Outcome, STORED_STATES, State,
    StateCounts, answer_head, next_state, outcome_of, retry_delay_ms,
};
pub use destination::{Destination, Directory, EventSet, MAX_DESTINATIONS, Paused, test_event};
pub use face::{
    Answer, ClickFacts, Method, Platform, Request, Sending, THROTTLE_WAIT_MS, TestView,
    answer_by_status,
};
pub use fields::{DestinationPatch, NewDestination, check_name};
pub use given::{DestinationFields, Field, Given, Shape};
pub use google_ads::{
    BRAID_COLUMNS, COLUMNS, Conversion, ConversionNames, DATA_MANAGER_COLUMNS, DEFAULT_USER,
    DataManagerFile, Fetches, Google, GoogleClick, NotSent, Password, PasswordDigest, REALM,
    TIME_ZONE_PARAMETER, Template, WINDOW_MS, belongs_in, conversion_file, conversion_time,
    is_conversion, iso_time, new_password, served_file,
};
pub use meta::{
    DEFAULT_API_VERSION, DEFAULT_GRAPH_URL, DataProcessing, Meta, asks_for_less, meta_answer,
    names_old_version, names_unknown_object,
};
pub use names::NAMED_KINDS;
pub use postback::{MACROS, Postback, QUERY_MACRO, Statuses, fill_macros, query_param};
pub use registry::{Kind, Target};
pub use snapchat::{DEFAULT_SNAP_API_URL, Snap};
pub use tiktok::{DEFAULT_TIKTOK_API_URL, Tiktok};
pub use view::{DeliveryView, DestinationState, DestinationView, LastError};
pub use webhook::{PreviousSecret, ROTATION_GRACE_MS, Webhook, new_signing_secret};

pub use crate::domain::secret::Secret;
