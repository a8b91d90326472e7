//! What requests about destinations and deliveries carry: the body of `POST /destinations`
//! (read into [`DestinationFields`]), the query of `GET /deliveries` and the body of
//! `POST /deliveries/retry`, each field of its JSON type and named in its error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::delivery::State;
use super::fields::{DestinationPatch, check_name};
use super::given::{DestinationFields, Shape, missing};
use super::registry::Kind;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

// Read member by member (`DestinationFields::from_json`); this type only describes, in
// `/openapi.json`, the fields every destination has, beside which each kind's own are its
// room's ([`Kind::fields`]).
/// The fields of every destination, whatever its kind.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // Never made: only its schema is used.
pub struct DestinationBody {
    #[schemars(with = "String", pattern(r"^[a-z0-9][a-z0-9-]{0,31}$"))]
    name: (),
    #[schemars(with = "super::registry::Kind")]
    kind: (),
    /// The events it is sent. Default: all four.
    #[schemars(with = "Option<Vec<crate::domain::event::EventKind>>", length(min = 1))]
    events: (),
    /// Default true, false for a webhook.
    #[schemars(with = "Option<bool>")]
    only_attributed: (),
}

/// The fields every destination has, in the order a message lists them.
const COMMON_FIELDS: [&str; 4] = ["name", "kind", "events", "only_attributed"];

/// A JSON object's members in their order, each as its JSON text: a body whose fields are
/// its kind's, so not one struct's.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Members<'de>, M::Error> {
                let mut members: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let known =
                        COMMON_FIELDS.contains(&name.as_str()) || Kind::any_field(&name).is_some();
                    if !known {
                        return Err(serde::de::Error::custom(format!(
                            "unknown field `{name}`, expected one of {}",
                            every_field()
                                .iter()
                                .map(|f| format!("`{f}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                    if members.iter().any(|(seen, _)| *seen == name) {
                        return Err(serde::de::Error::custom(format!(
                            "duplicate field `{name}`"
                        )));
                    }
                    let value = map.next_value::<&'de RawValue>()?;
                    members.push((name, value));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Every field a destination's body may name: those of every destination, then each kind's.
fn every_field() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = COMMON_FIELDS.to_vec();
    for kind in Kind::ALL {
        for field in kind.fields() {
            if !names.contains(&field.name) {
                names.push(field.name);
            }
        }
    }
    names
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
    let common = <DestinationBody as schemars::JsonSchema>::json_schema(generator);
    let description = if create {
        "A new destination: the fields of its kind (`docs/api.md#destinations`), those it \
         requires among them; a field of another kind is refused. An empty string or `null` \
         counts as absent."
    } else {
        "A change of a destination: fields of its kind to set. An absent field is left as it \
         is, `null` sets it back to its default; a required field cannot be taken away, and the \
         name and kind cannot change."
    };
    let shapes: Vec<serde_json::Value> = Kind::ALL
        .into_iter()
        .map(|kind| {
            // Every kind's fields as this kind reads them: its own by its own rules, another's
            // only as absent (`by_variant`).
            let mut flat = common.clone();
            let properties = flat
                .ensure_object()
                .entry("properties")
                .or_insert_with(|| serde_json::json!({}));
            for name in every_field().into_iter().skip(COMMON_FIELDS.len()) {
                let field = kind
                    .field(name)
                    .or_else(|| Kind::any_field(name))
                    .expect("every field is some kind's");
                let mut schema: serde_json::Value =
                    serde_json::from_str(field.schema).expect("a field's schema is JSON");
                if !field.help.is_empty() {
                    schema["description"] = field.help.into();
                }
                properties[name] = schema;
            }
            let variant = input::Variant {
                title: kind.as_str(),
                tag: Some(("kind", kind.as_str())),
                fields: ["name", "events", "only_attributed"]
                    .into_iter()
                    .chain(kind.fields().iter().map(|f| f.name))
                    .collect(),
                required: kind.required(),
                // A change clears a field given as `null` or empty, and no kind's required
                // field can be cleared.
                never: if create {
                    Vec::new()
                } else {
                    Kind::ALL
                        .into_iter()
                        .flat_map(Kind::required)
                        .filter(|f| !kind.takes(f))
                        .collect()
                },
            };
            let one = input::by_variant(&flat, &[variant], create, combine, description);
            one.get(combine)
                .and_then(|shapes| shapes.get(0))
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let mut schema = serde_json::Map::new();
    schema.insert("description".into(), description.into());
    schema.insert(combine.into(), shapes.into());
    schema.into()
}

impl DestinationFields {
    /// Reads a `POST /destinations` body: each field of its JSON type, `null` as absent.
    pub fn from_json(body: &[u8]) -> Result<DestinationFields, Error> {
        let Members(members) = input::parse_body(body)?;
        let mut f = DestinationFields::default();
        for (name, raw) in members {
            if raw.get() == "null" {
                continue;
            }
            let text = |field: &'static str| {
                input::json_string(raw, field).map(|s| Some(s).filter(|t| !t.is_empty()))
            };
            match name.as_str() {
                "name" => f.name = text("name")?,
                "kind" => f.kind = text("kind")?,
                "events" => {
                    f.events = Some(input::json_strings(
                        raw,
                        "events",
                        "an array of event names",
                    )?);
                }
                "only_attributed" => {
                    f.only_attributed = Some(input::json_bool(raw, "only_attributed")?);
                }
                _ => {
                    let Some(field) = Kind::any_field(&name) else {
                        continue;
                    };
                    match field.shape {
                        Shape::Text => f.set_text(field.name, text(field.name)?),
                        Shape::Pairs => f.set_pairs(
                            field.name,
                            Some(input::json_string_map(
                                raw,
                                field.name,
                                "an object of strings",
                            )?),
                        ),
                    }
                }
            }
        }
        Ok(f)
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
