//! How a request's fields are read, before any field's own rule: JSON bodies and GET queries.
//!
//! Every endpoint reads its input through these functions, so the same things are true
//! everywhere: unknown body fields are `invalid_json`, a field of the wrong JSON type names
//! itself, an empty query parameter counts as absent, unknown query parameters are ignored, and a
//! postback macro that was never replaced (`{clickid}`, `[uid]`, `%7Bsubid%7D`) is refused with
//! the field's own code and a sentence that says so.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Code, Error};

/// Parses a JSON body into `T`, whose fields are `Option<&RawValue>` with
/// `deny_unknown_fields`; serde's message already names an unknown field.
pub fn parse_body<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| {
        let what = if e.is_data() {
            // "unknown field `occured_at_ms`, expected one of ..." or "duplicate field `uid`".
            let text = e.to_string();
            let text = text.split(" at line ").next().unwrap_or(&text).to_owned();
            format!("request body has a field problem: {text}")
        } else if e.is_eof() && body.iter().all(u8::is_ascii_whitespace) {
            "request body is empty; send a JSON object".to_owned()
        } else {
            format!("request body is not valid JSON: {e}")
        };
        Error::new(Code::InvalidJson, what)
    })
}

/// A JSON string field, or `invalid_json` naming the field if it holds another type.
pub fn json_string(raw: &RawValue, field: &'static str) -> Result<String, Error> {
    serde_json::from_str::<String>(raw.get()).map_err(|_| wrong_type(field, "a string", raw))
}

/// A JSON boolean field, or `invalid_json` naming the field.
pub fn json_bool(raw: &RawValue, field: &'static str) -> Result<bool, Error> {
    serde_json::from_str::<bool>(raw.get()).map_err(|_| wrong_type(field, "true or false", raw))
}

/// The JSON text of a number token, or `None` if the value is not a JSON number.
#[must_use]
pub fn json_number_text(raw: &RawValue) -> Option<&str> {
    let text = raw.get();
    let first = text.as_bytes().first()?;
    (first.is_ascii_digit() || *first == b'-').then_some(text)
}

#[must_use]
pub fn wrong_type(field: &'static str, expected: &str, raw: &RawValue) -> Error {
    let got = match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    };
    Error::field(
        Code::InvalidJson,
        field,
        format!("field `{field}` must be {expected}, got {got}"),
    )
}

/// Quotes a caller's value for an error sentence: cut short, so an error never echoes a huge
/// input, and with anything that looks like a credential reduced to its public prefix, so an
/// error never repeats a secret sent in the wrong field.
#[must_use]
pub fn quoted(text: &str) -> String {
    const MAX: usize = 64;
    let text = crate::domain::credential::redact(text);
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut:?}...")
    }
}

/// The parameters of a GET query, decoded once, looked up by name.
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes a raw query string. Invalid percent-encoding is decoded leniently, as browsers do.
    #[must_use]
    pub fn parse(raw: &str) -> Query {
        Query {
            pairs: serde_urlencoded::from_str(raw).unwrap_or_default(),
        }
    }

    /// The first non-empty value of `name`; an empty `uid=` counts as absent.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// Like [`Query::get`], but refuses a value that is still an unreplaced postback macro,
    /// with `code` (the field's own `invalid_*`).
    pub fn value(&self, name: &'static str, code: Code) -> Result<Option<&str>, Error> {
        match self.get(name) {
            Some(v) if is_unreplaced_macro(v) => Err(Error::field(
                code,
                name,
                format!(
                    "`{name}` is {}, a placeholder the sender never replaced; check the postback \
                     URL's macros",
                    quoted(v)
                ),
            )),
            other => Ok(other),
        }
    }
}

/// True for a value that is a whole postback macro left as is: `{clickid}`, `{{uid}}`, `${uid}`,
/// `[uid]`, `%7Bsubid%7D` (double-encoded senders), `%5Buid%5D`.
#[must_use]
pub fn is_unreplaced_macro(value: &str) -> bool {
    let v = value.trim();
    let wrapped = |open: &str, close: &str| {
        v.len() > open.len() + close.len() && v.starts_with(open) && v.ends_with(close)
    };
    let lower = v.to_ascii_lowercase();
    let wrapped_encoded = |open: &str, close: &str| {
        lower.len() > open.len() + close.len() && lower.starts_with(open) && lower.ends_with(close)
    };
    wrapped("{", "}")
        || wrapped("${", "}")
        || wrapped("[", "]")
        || wrapped_encoded("%7b", "%7d")
        || wrapped_encoded("%5b", "%5d")
        || wrapped_encoded("%257b", "%257d")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_are_recognised() {
        for m in [
            "{clickid}",
            "{{uid}}",
            "${uid}",
            "[uid]",
            "%7Bsubid%7D",
            "%7bsub%7d",
            "%5Buid%5D",
        ] {
            assert!(is_unreplaced_macro(m), "{m}");
        }
        for v in ["abc", "{", "{}", "[]", "a{b}", "12.5", "x}", "%7B"] {
            assert!(!is_unreplaced_macro(v), "{v}");
        }
    }

    #[test]
    fn quotes_are_bounded_and_never_repeat_a_credential() {
        assert!(quoted(&"x".repeat(1000)).len() < 80);
        let secret = crate::domain::credential::generate(crate::domain::credential::Kind::Secret);
        let q = quoted(&secret.text);
        assert!(
            q.contains("trk_sk_") && !q.contains(&secret.text[11..]),
            "{q}"
        );
    }

    #[test]
    fn empty_parameters_are_absent_and_first_wins() {
        let q = Query::parse("uid=&uid=abc&uid=def&x=%7Bclickid%7D");
        assert_eq!(q.get("uid"), Some("abc"));
        assert_eq!(q.get("missing"), None);
        assert!(q.value("x", Code::InvalidUid).is_err());
    }
}
