//! The body of `PATCH /space` as it is read: a JSON object's fields in order, each kept raw
//! until `settings.rs` reads it by its setting's JSON type (and gives its schema, from the one
//! list of settings).

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A JSON object's fields in order, each a raw value; a field given twice is an error.
pub struct SettingsBody<'a>(pub(crate) Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for SettingsBody<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = SettingsBody<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut fields: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, &'de RawValue>()? {
                    if fields.iter().any(|(n, _)| *n == name) {
                        return Err(de::Error::custom(format!("duplicate field `{name}`")));
                    }
                    fields.push((name, value));
                }
                Ok(SettingsBody(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}
