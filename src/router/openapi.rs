//! The served `/openapi.json`, assembled once from the route table: `openapi/base.json` (the
//! document's head, the credentials and the shared answers) and each endpoint's operation file.
//!
//! Each operation file is `{"operation": {...}, "schemas": {...}}`: the operation object, and
//! the schemas it introduces under `components.schemas`. The operation's `security` is written
//! here from the endpoint's guard, so the document cannot disagree with the router about who
//! may call what. The document is kept true by `tests/it/openapi.rs`, which checks real answers
//! of every endpoint against it, and by `.ci/schemathesis`, which fuzzes the server from it.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::table::{Guard, ROUTES};

const BASE: &str = include_str!("openapi/base.json");

/// The document, as served.
#[must_use]
pub fn document() -> &'static str {
    static DOCUMENT: LazyLock<String> = LazyLock::new(|| assemble().to_string());
    &DOCUMENT
}

/// Builds the document. Panics on a malformed piece: the pieces are compiled in, and the unit
/// test below builds it, so a broken piece fails the tests, never a running server.
fn assemble() -> Value {
    let mut doc: Value = serde_json::from_str(BASE).expect("openapi/base.json is JSON");
    for endpoint in &ROUTES {
        let Some(piece) = endpoint.openapi else {
            continue;
        };
        let mut piece: Value = serde_json::from_str(piece)
            .unwrap_or_else(|e| panic!("the operation of {} is not JSON: {e}", endpoint.label()));
        let mut operation = piece["operation"].take();
        assert!(
            operation.is_object(),
            "the piece of {} has no operation",
            endpoint.label()
        );
        operation["security"] = match endpoint.guard {
            Guard::Secret(_) => json!([{"secret": []}]),
            Guard::IngestToken(_) => json!([{"ingestToken": []}]),
            Guard::Public(_) | Guard::Page(_) => json!([]),
        };
        let method = endpoint.method.as_str().to_ascii_lowercase();
        let path = entry(&mut doc, &["paths", endpoint.path]);
        assert!(
            path.insert(method, operation).is_none(),
            "{} twice",
            endpoint.label()
        );
        if let Value::Object(schemas) = piece["schemas"].take() {
            let known = entry(&mut doc, &["components", "schemas"]);
            for (name, schema) in schemas {
                assert!(
                    known.insert(name.clone(), schema).is_none(),
                    "schema {name} defined twice (again by {})",
                    endpoint.label()
                );
            }
        }
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
