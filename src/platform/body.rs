//! What requests about destinations and deliveries carry: the body of `POST /destinations`
//! (read into [`DestinationFields`]), the query of `GET /deliveries` and the body of
//! `POST /deliveries/retry`, each field of its JSON type and named in its error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::address::HttpsUrlJson;
use super::delivery::State;
use super::fields::{DestinationPatch, check_name};
use super::given::{DestinationFields, missing};
use super::registry::Kind;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// The body of `POST /destinations` and of `PATCH /destinations/<name>`, as read. In
/// `/openapi.json` each is described by kind ([`NewDestinationJson`], [`DestinationChangeJson`]).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DestinationBody<'a> {
    #[serde(borrow)]
    #[schemars(with = "String", pattern(r"^[a-z0-9][a-z0-9-]{0,31}$"))]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "super::registry::Kind")]
    kind: Option<&'a RawValue>,
    /// The events it is sent. Default: all four.
    #[serde(borrow)]
    #[schemars(with = "Option<Vec<crate::domain::event::EventKind>>", length(min = 1))]
    events: Option<&'a RawValue>,
    /// Default true, false for a webhook.
    #[serde(borrow)]
    #[schemars(with = "Option<bool>")]
    only_attributed: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^([0-9]{1,32})?$"))]
    pixel_id: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = 1024), pattern(r"^[!-~]*$"))]
    access_token: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^([A-Za-z0-9]{1,64})?$"))]
    test_event_code: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^(v[0-9]{1,3}\.[0-9]{1,3})?$"))]
    api_version: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<HttpsUrlJson>")]
    graph_url: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<HttpsUrlJson>")]
    url: Option<&'a RawValue>,
    /// An ad platform's: the event name sent for `contact`, `subscribed`,
    /// `registration`, `deposit` or `first_deposit` (a customer's first deposit; without one, a
    /// deposit's): one of the platform's standard events or a custom name, `[A-Za-z0-9_ ]{1,40}`.
    #[serde(borrow)]
    #[schemars(
        with = "Option<BTreeMap<String, String>>",
        example = serde_json::json!({"deposit": "Purchase", "first_deposit": "FirstDeposit"})
    )]
    event_names: Option<&'a RawValue>,
    /// An ad platform's: what one unit of a currency the platform does not take
    /// (not ISO 4217) is worth in one that it does: `{"XTR": "0.013 USD"}`.
    #[serde(borrow)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    currency_rates: Option<&'a RawValue>,
    /// `postback`: the word `{status}` gives for each event kind (default: the kind).
    #[serde(borrow)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    statuses: Option<&'a RawValue>,
    /// An ad platform's pixel, by its code in the platform's Events Manager.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        pattern(r"^([A-Za-z0-9]{1,64})?$"),
        example = &"C4ABCDEFGHIJ12345678"
    )]
    pixel_code: Option<&'a RawValue>,
    /// An ad platform's API address. Default: the platform's own (`docs/api.md`).
    #[serde(borrow)]
    #[schemars(with = "Option<HttpsUrlJson>")]
    api_url: Option<&'a RawValue>,
    /// `google_ads`: the name of the conversion action in Google Ads written for each event
    /// kind (and `first_deposit`; without one, a deposit's). Default: the kind.
    #[serde(borrow)]
    #[schemars(
        with = "Option<BTreeMap<String, String>>",
        example = serde_json::json!({"deposit": "Telegram deposit"})
    )]
    conversion_names: Option<&'a RawValue>,
    /// `google_ads`: the user name Google Ads fetches the file with. Default `google`.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^[!-9;-~]{0,64}$"))]
    user: Option<&'a RawValue>,
}

// Read as a `DestinationBody`; this type only describes it in `/openapi.json`.
/// The body of `POST /destinations`: one object per kind (`docs/api.md#destinations`), each
/// with its own fields and those it requires; a field of another kind is refused. An empty
/// string or `null` counts as absent.
pub struct NewDestinationJson;

// Read as a `DestinationBody`; this type only describes it in `/openapi.json`.
/// The body of `PATCH /destinations/<name>`: the fields of the destination's kind to change. An
/// absent field is left as it is, `null` sets it back to its default; a required field cannot
/// be taken away, and the name and kind cannot change.
pub struct DestinationChangeJson;

impl schemars::JsonSchema for NewDestinationJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NewDestinationBody".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        by_kind(generator, true, "oneOf")
    }
}

impl schemars::JsonSchema for DestinationChangeJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DestinationChangeBody".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        by_kind(generator, false, "anyOf")
    }
}

/// `DestinationBody`'s schema as one shape per kind, from the table the checks use
/// ([`Kind::fields`], [`Kind::required`]). A new destination requires its name, kind and the
/// kind's required fields; a change requires nothing (its name and kind, given, must be the
/// destination's: the server's to know) and clears what it gives as `null` or empty.
fn by_kind(
    generator: &mut schemars::SchemaGenerator,
    create: bool,
    combine: &str,
) -> schemars::Schema {
    let flat = <DestinationBody<'_> as schemars::JsonSchema>::json_schema(generator);
    let variants: Vec<input::Variant> = Kind::ALL
        .into_iter()
        .map(|kind| input::Variant {
            title: kind.as_str(),
            tag: Some(("kind", kind.as_str())),
            fields: ["name", "events", "only_attributed"]
                .into_iter()
                .chain(kind.fields().iter().copied())
                .collect(),
            required: kind.required().to_vec(),
            // A change clears a field given as `null` or empty, and no kind's required field
            // can be cleared.
            never: if create {
                Vec::new()
            } else {
                Kind::ALL
                    .into_iter()
                    .flat_map(|k| k.required().iter().copied())
                    .filter(|f| !kind.fields().contains(f))
                    .collect()
            },
        })
        .collect();
    let description = if create {
        "A new destination: the fields of its kind (`docs/api.md#destinations`), those it \
         requires among them; a field of another kind is refused. An empty string or `null` \
         counts as absent."
    } else {
        "A change of a destination: fields of its kind to set. An absent field is left as it \
         is, `null` sets it back to its default; a required field cannot be taken away, and the \
         name and kind cannot change."
    };
    input::by_variant(&flat, &variants, create, combine, description)
}

impl DestinationFields {
    /// Reads a `POST /destinations` body: each field of its JSON type, `null` as absent.
    pub fn from_json(body: &[u8]) -> Result<DestinationFields, Error> {
        let b: DestinationBody = input::parse_body(body)?;
        let text = |name: &'static str, v: Option<&RawValue>| -> Result<Option<String>, Error> {
            match v {
                Some(raw) if raw.get() != "null" => {
                    input::json_string(raw, name).map(|s| Some(s).filter(|t| !t.is_empty()))
                }
                _ => Ok(None),
            }
        };
        let events = match b.events {
            Some(raw) if raw.get() != "null" => Some(input::json_strings(
                raw,
                "events",
                "an array of event names",
            )?),
            _ => None,
        };
        let only_attributed = match b.only_attributed {
            Some(raw) if raw.get() != "null" => Some(input::json_bool(raw, "only_attributed")?),
            _ => None,
        };
        let map = |name: &'static str,
                   v: Option<&RawValue>|
         -> Result<Option<BTreeMap<String, String>>, Error> {
            match v {
                Some(raw) if raw.get() != "null" => {
                    input::json_string_map(raw, name, "an object of strings").map(Some)
                }
                _ => Ok(None),
            }
        };
        Ok(DestinationFields {
            name: text("name", b.name)?,
            kind: text("kind", b.kind)?,
            events,
            only_attributed,
            pixel_id: text("pixel_id", b.pixel_id)?,
            access_token: text("access_token", b.access_token)?,
            test_event_code: text("test_event_code", b.test_event_code)?,
            api_version: text("api_version", b.api_version)?,
            graph_url: text("graph_url", b.graph_url)?,
            url: text("url", b.url)?,
            event_names: map("event_names", b.event_names)?,
            currency_rates: map("currency_rates", b.currency_rates)?,
            statuses: map("statuses", b.statuses)?,
            pixel_code: text("pixel_code", b.pixel_code)?,
            api_url: text("api_url", b.api_url)?,
            conversion_names: map("conversion_names", b.conversion_names)?,
            user: text("user", b.user)?,
        })
    }
}

impl DestinationPatch {
    /// Reads a `PATCH /destinations/<name>` body: the fields of a `POST /destinations` body,
    /// each given one set, each `null` (or empty string) one cleared.
    pub fn from_json(body: &[u8]) -> Result<DestinationPatch, Error> {
        let set = DestinationFields::from_json(body)?;
        let given: BTreeMap<String, &RawValue> = input::parse_body(body)?;
        let cleared = given
            .into_iter()
            .filter(|(_, raw)| matches!(raw.get(), "null" | "\"\""))
            .map(|(name, _)| name)
            .collect();
        Ok(DestinationPatch { set, cleared })
    }
}

/// The body of `POST /destinations/<name>/test`, which may be empty.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestBody {
    /// `meta_capi`: the code of Events Manager's Test events tab, when the destination has
    /// none of its own (or to use another).
    #[schemars(pattern(r"^[A-Za-z0-9]{1,64}$"))]
    pub test_event_code: Option<String>,
}

impl TestBody {
    /// Reads the body of a test: empty, or `{"test_event_code": "TEST12345"}`.
    pub fn from_json(body: &[u8]) -> Result<Option<String>, Error> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let b: TestBody = input::parse_body(body)?;
        Ok(b.test_event_code.filter(|c| !c.is_empty()))
    }
}

/// The most deliveries one `GET /deliveries` answers, and how many unless asked.
pub const MAX_DELIVERIES_PAGE: usize = 1000;
pub const DEFAULT_DELIVERIES_PAGE: usize = 100;

/// What `GET /deliveries` asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryQuery {
    pub destination: Option<String>,
    pub state: Option<State>,
    pub limit: usize,
}

impl DeliveryQuery {
    /// From the query's `destination`, `state` and `limit` (absent: `None`).
    pub fn parse(
        destination: Option<&str>,
        state: Option<&str>,
        limit: Option<&str>,
    ) -> Result<DeliveryQuery, Error> {
        if let Some(d) = destination {
            check_name(d).map_err(|mut e| {
                e.field = Some("destination");
                e
            })?;
        }
        let limit = match limit {
            None => DEFAULT_DELIVERIES_PAGE,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_DELIVERIES_PAGE).contains(n))
                .ok_or_else(|| {
                    Error::field(
                        Code::InvalidField,
                        "limit",
                        format!(
                            "limit must be a whole number from 1 to {MAX_DELIVERIES_PAGE}, got {}",
                            quoted(text)
                        ),
                    )
                })?,
        };
        Ok(DeliveryQuery {
            destination: destination.map(str::to_owned),
            state: state.map(|s| State::parse(s, "state")).transpose()?,
            limit,
        })
    }
}

/// What `POST /deliveries/retry` asks: the dead deliveries of one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryRequest {
    pub destination: String,
    pub state: State,
}

/// The body of `POST /deliveries/retry`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBody<'a> {
    #[serde(borrow)]
    #[schemars(
        with = "String",
        pattern(r"^[a-z0-9][a-z0-9-]{0,31}$"),
        example = "meta-main"
    )]
    destination: Option<&'a RawValue>,
    /// Default `dead`, the only state retried by hand.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^dead$"))]
    state: Option<&'a RawValue>,
}

impl RetryRequest {
    /// Reads a `POST /deliveries/retry` body: `destination` required, `state` `"dead"` (the
    /// default).
    pub fn from_json(body: &[u8]) -> Result<RetryRequest, Error> {
        let b: RetryBody = input::parse_body(body)?;
        let destination = match b.destination {
            Some(raw) if raw.get() != "null" => input::json_string(raw, "destination")?,
            _ => String::new(),
        };
        if destination.is_empty() {
            return Err(missing("destination", "(the name of the destination)"));
        }
        check_name(&destination).map_err(|mut e| {
            e.field = Some("destination");
            e
        })?;
        let state = match b.state {
            Some(raw) if raw.get() != "null" => {
                State::parse(&input::json_string(raw, "state")?, "state")?
            }
            _ => State::Dead,
        };
        Ok(RetryRequest { destination, state })
    }
}
