//! A destination's fields as every way in gives them (a body, flags, the admin form), before
//! any platform's rules check them: what each room reads its settings from. Beside its name,
//! kind and events, a destination's fields are its platform's own, held by name
//! ([`DestinationFields::own`]) as its room declares them ([`Field`]): a new field is a line of
//! its room, not of every way in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

/// What a field of a platform's holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A string.
    Text,
    /// An object of strings: `{"deposit": "Purchase"}`.
    Pairs,
}

/// One field of its own a platform's destinations take, as its room declares it: how a body
/// gives it, whether it is required, how answers show it, and what a form says of it.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: Shape,
    /// A destination of the platform cannot do without it: `missing_field` when absent.
    pub required: bool,
    /// A credential: answers show its last 4 characters only.
    pub secret: bool,
    /// What it is, as a form labels it.
    pub label: &'static str,
    /// Where to find its value, or what it does.
    pub help: &'static str,
    /// What it is when not given, as a form shows it.
    pub default: Option<&'static str>,
    /// Its JSON Schema in `/openapi.json`, as JSON text.
    pub schema: &'static str,
}

impl Field {
    /// An optional text field; the rest as the room's declaration sets it.
    pub const TEXT: Field = Field {
        name: "",
        shape: Shape::Text,
        required: false,
        secret: false,
        label: "",
        help: "",
        default: None,
        schema: r#"{"type": ["string", "null"]}"#,
    };

    /// An optional object of strings.
    pub const PAIRS: Field = Field {
        shape: Shape::Pairs,
        schema: r#"{"type": ["object", "null"], "additionalProperties": {"type": "string"}}"#,
        ..Field::TEXT
    };
}

/// A platform's field as a way in gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Given {
    Text(String),
    Pairs(BTreeMap<String, String>),
}

/// A destination's fields as every way in gives them, before they are checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DestinationFields {
    pub name: Option<String>,
    pub kind: Option<String>,
    /// Event names; `None`: all four.
    pub events: Option<Vec<String>>,
    pub only_attributed: Option<bool>,
    /// Its platform's fields, by name ([`Field`]); an absent one is not given.
    #[serde(default)]
    pub own: BTreeMap<String, Given>,
}

/// `missing_field` for `field`, which is required `why`.
pub(super) fn missing(field: &'static str, why: &str) -> Error {
    Error::field(
        Code::MissingField,
        field,
        format!("{field} is required {why}"),
    )
}

impl DestinationFields {
    /// The platform's fields that were given.
    pub(super) fn given(&self) -> Vec<&str> {
        self.own.keys().map(String::as_str).collect()
    }

    /// The text field `name`, where given.
    #[must_use]
    pub fn text(&self, name: &str) -> Option<String> {
        match self.own.get(name) {
            Some(Given::Text(text)) => Some(text.clone()),
            _ => None,
        }
    }

    /// The object field `name`, where given.
    #[must_use]
    pub fn pairs(&self, name: &str) -> Option<BTreeMap<String, String>> {
        match self.own.get(name) {
            Some(Given::Pairs(pairs)) => Some(pairs.clone()),
            _ => None,
        }
    }

    /// Gives the text field `name`, or takes it away (`None`).
    pub fn set_text(&mut self, name: &str, value: Option<String>) {
        match value {
            Some(text) => self.own.insert(name.to_owned(), Given::Text(text)),
            None => self.own.remove(name),
        };
    }

    /// Gives the object field `name`, or takes it away (`None`).
    pub fn set_pairs(&mut self, name: &str, value: Option<BTreeMap<String, String>>) {
        match value {
            Some(pairs) => self.own.insert(name.to_owned(), Given::Pairs(pairs)),
            None => self.own.remove(name),
        };
    }
}
