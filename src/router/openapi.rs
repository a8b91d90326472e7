//! The served `/openapi.json`, assembled once from the route table: `openapi/base.json` (the
//! document's head, the credentials and the shared error answers), then each endpoint's
//! [`Operation`]: its file, with the request body and the success answer's schema derived from
//! their Rust types.
//!
//! The schemas come from schemars, as JSON Schema 2020-12 (what `OpenAPI` 3.1 uses), with
//! serde's attributes respected: a request body is described as it is deserialized (its
//! `deny_unknown_fields` is `additionalProperties: false`), an answer as it is serialized (a
//! field left out by `skip_serializing_if` is not required). Every object of an answer is
//! closed (`additionalProperties: false`), so an answer that carries a field its type's schema
//! does not describe fails `tests/it/openapi.rs`. The operation's `security` is written here
//! from the endpoint's guard, so the document cannot disagree with the router about who may
//! call what. The document is kept true by `tests/it/openapi.rs`, which checks real answers of
//! every endpoint against it, and by `.ci/schemathesis`, which fuzzes the server from it.

use std::sync::LazyLock;

use schemars::Schema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::transform::RecursiveTransform;
use serde_json::{Map, Value, json};

use super::table::{Guard, Operation, ROUTES};
use crate::surface::respond::{Done, ErrorBody};

const BASE: &str = include_str!("openapi/base.json");

/// Where the schemas of the types are, in the document.
const SCHEMAS: &str = "/components/schemas";

/// The document, as served.
#[must_use]
pub fn document() -> &'static str {
    static DOCUMENT: LazyLock<String> = LazyLock::new(|| assemble().to_string());
    &DOCUMENT
}

/// The generator of the request bodies' schemas: as the server reads them.
fn bodies() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .for_deserialize()
        .with(|s| s.definitions_path = SCHEMAS.into())
        .with_transform(RecursiveTransform(unwrap_description))
        .into_generator()
}

/// The generator of the answers' schemas: as the server writes them, every object closed.
fn answers() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|s| s.definitions_path = SCHEMAS.into())
        .with_transform(RecursiveTransform(close_object))
        .with_transform(RecursiveTransform(unwrap_description))
        .into_generator()
}

/// A description from a doc comment as its paragraphs, each on one line: the comment's line
/// breaks are the source's width, not the reader's.
fn unwrap_description(schema: &mut Schema) {
    let Some(Value::String(text)) = schema.get_mut("description") else {
        return;
    };
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect();
    *text = paragraphs.join("\n\n");
}

/// `additionalProperties: false` on an object schema with named properties that says nothing
/// of others: an answer never carries a field its type does not name.
fn close_object(schema: &mut Schema) {
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_none() {
        schema.insert("additionalProperties".into(), false.into());
    }
}

/// Builds the document. Panics on a malformed piece: the pieces are compiled in, and the unit
/// test below builds it, so a broken piece fails the tests, never a running server.
fn assemble() -> Value {
    let mut doc: Value = serde_json::from_str(BASE).expect("openapi/base.json is JSON");
    let (mut bodies, mut answers) = (bodies(), answers());
    // The shared answers of `base.json` name these two.
    answers.subschema_for::<ErrorBody>();
    answers.subschema_for::<Done>();
    for endpoint in &ROUTES {
        let Some(Operation { file, body, answer }) = &endpoint.openapi else {
            continue;
        };
        let mut operation: Value = serde_json::from_str(file)
            .unwrap_or_else(|e| panic!("the operation of {} is not JSON: {e}", endpoint.label()));
        assert!(
            operation["responses"].is_object(),
            "the operation of {} has no responses",
            endpoint.label()
        );
        operation["security"] = match endpoint.guard {
            Guard::Secret(_) => json!([{"secret": []}]),
            Guard::IngestToken(_) => json!([{"ingestToken": []}]),
            // A public endpoint may name its own scheme (the conversions file's basic
            // authentication, checked by its handler).
            Guard::Public(_) | Guard::Page(_) => operation
                .get("security")
                .cloned()
                .unwrap_or_else(|| json!([])),
        };
        if let Some(body) = body {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": body(&mut bodies)}},
            });
        }
        if let Some((status, answer)) = answer {
            let response = &mut operation["responses"][status.to_string()];
            assert!(
                response["description"].is_string(),
                "the operation of {} does not describe its {status}",
                endpoint.label()
            );
            response["content"]["application/json"] = json!({"schema": answer(&mut answers)});
        }
        let method = endpoint.method.as_str().to_ascii_lowercase();
        let path = entry(&mut doc, &["paths", endpoint.path]);
        assert!(
            path.insert(method, operation).is_none(),
            "{} twice",
            endpoint.label()
        );
    }
    let schemas = entry(&mut doc, &["components", "schemas"]);
    for (name, schema) in bodies
        .take_definitions(true)
        .into_iter()
        .chain(answers.take_definitions(true))
    {
        if let Some(known) = schemas.get(&name) {
            assert_eq!(
                *known, schema,
                "two types are described as {name}, differently"
            );
        }
        schemas.insert(name, schema);
    }
    doc
}

/// The object at `keys` under `doc`, made empty where it is missing.
fn entry<'a>(doc: &'a mut Value, keys: &[&str]) -> &'a mut Map<String, Value> {
    let mut at = doc;
    for key in keys {
        at = at
            .as_object_mut()
            .expect("an object")
            .entry(*key)
            .or_insert_with(|| Value::Object(Map::new()));
    }
    at.as_object_mut().expect("an object")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `v`.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_has_every_json_endpoint_and_no_dangling_reference() {
        let doc = assemble();
        for e in ROUTES.iter().filter(|e| e.openapi.is_some()) {
            let op = &doc["paths"][e.path][e.method.as_str().to_ascii_lowercase()];
            assert!(op["operationId"].is_string(), "{}", e.label());
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(!all.is_empty());
        for r in all {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "dangling {r}");
        }
    }

    /// The schema `r` (`#/components/schemas/Name`) points to.
    fn target<'a>(doc: &'a Value, r: &str) -> &'a Value {
        doc.pointer(r.trim_start_matches('#'))
            .expect("no dangling reference")
    }

    /// Every object schema with named properties in `v`, following references.
    fn objects<'a>(
        doc: &'a Value,
        v: &'a Value,
        seen: &mut Vec<&'a str>,
        out: &mut Vec<&'a Value>,
    ) {
        match v {
            Value::Object(m) => {
                if m.contains_key("properties") {
                    out.push(v);
                }
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) if !seen.contains(&r.as_str()) => {
                            seen.push(r);
                            objects(doc, target(doc, r), seen, out);
                        }
                        _ => objects(doc, v, seen, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| objects(doc, v, seen, out)),
            _ => {}
        }
    }

    /// Every object of every answer names all its fields and no others, so a real answer with a
    /// field that its type's schema leaves out fails `tests/it/openapi.rs`.
    #[test]
    fn every_object_of_an_answer_is_closed() {
        let doc = assemble();
        let mut answer_objects = Vec::new();
        for operations in doc["paths"].as_object().unwrap().values() {
            for operation in operations.as_object().unwrap().values() {
                objects(
                    &doc,
                    &operation["responses"],
                    &mut Vec::new(),
                    &mut answer_objects,
                );
            }
        }
        objects(
            &doc,
            &doc["components"]["responses"],
            &mut Vec::new(),
            &mut answer_objects,
        );
        assert!(answer_objects.len() > 20, "{}", answer_objects.len());
        for object in answer_objects {
            // `allOf` pieces that narrow the error body's `status` only add to a closed body.
            if object["properties"]
                .as_object()
                .unwrap()
                .keys()
                .eq(["status"])
                && object.get("type").is_none()
            {
                continue;
            }
            assert_eq!(object["additionalProperties"], false, "{object}");
        }
    }

    /// Every request body refuses a field it does not know, as the server does: closed, or
    /// one of closed shapes.
    #[test]
    fn every_request_body_is_closed() {
        let doc = assemble();
        let mut bodies = 0;
        for operations in doc["paths"].as_object().unwrap().values() {
            for operation in operations.as_object().unwrap().values() {
                let Some(schema) =
                    operation.pointer("/requestBody/content/application~1json/schema")
                else {
                    continue;
                };
                let schema = target(&doc, schema["$ref"].as_str().expect("a named type"));
                let shapes = ["oneOf", "anyOf"]
                    .iter()
                    .find_map(|c| schema[c].as_array())
                    .map_or_else(|| vec![schema], |shapes| shapes.iter().collect());
                for shape in shapes {
                    assert_eq!(shape["additionalProperties"], false, "{shape}");
                }
                bodies += 1;
            }
        }
        assert_eq!(bodies, 13);
    }

    /// The enums of answers are written by serde under the names the rest of the code gives
    /// them (`as_str`: logs, exports, the command line).
    #[test]
    fn an_answers_enum_is_written_as_its_name() {
        use crate::domain::dedup::Basis;
        use crate::domain::event::{AttributedBy, EventKind};
        use crate::domain::stats::Dimension::{Ad, AdSet, Campaign, Day, Link};
        fn same<T: serde::Serialize>(values: &[T], name: fn(&T) -> &'static str) {
            for v in values {
                assert_eq!(serde_json::to_value(v).unwrap(), name(v));
            }
        }
        same(
            &[
                Basis::Eid,
                Basis::Milestone,
                Basis::Fingerprint,
                Basis::None,
            ],
            |b| b.as_str(),
        );
        same(&[AttributedBy::Uid, AttributedBy::TgId], |a| a.as_str());
        same(&EventKind::ALL, |k| k.as_str());
        same(&[Campaign, Link, Day, Ad, AdSet], |d| d.as_str());
    }

    #[test]
    fn security_follows_the_guard() {
        let doc = assemble();
        assert_eq!(
            doc["paths"]["/events"]["post"]["security"],
            json!([{"secret": []}])
        );
        assert_eq!(
            doc["paths"]["/e"]["get"]["security"],
            json!([{"ingestToken": []}])
        );
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
    }
}
