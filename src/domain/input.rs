//! How a request's fields are read, before any field's own rule: JSON bodies and GET queries.
//!
//! Every endpoint reads its input through these functions, so the same things are true
//! everywhere: unknown body fields are `invalid_json`, a field of the wrong JSON type names
//! itself, an empty query parameter counts as absent, unknown query parameters are ignored, and a
//! postback macro that was never replaced (`{clickid}`, `[uid]`, `%7Bsubid%7D`) is refused with
//! the field's own code and a sentence that says so.

use std::borrow::Cow;

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

/// A JSON string field, or `invalid_json` naming the field if it holds another type, or a
/// string JSON cannot hold as text (a lone surrogate escape such as `"\ud800"`).
pub fn json_string(raw: &RawValue, field: &'static str) -> Result<String, Error> {
    serde_json::from_str::<String>(raw.get()).map_err(|e| {
        if raw.get().starts_with('"') {
            let e = e.to_string();
            let e = e.split(" at line ").next().unwrap_or(&e);
            Error::field(
                Code::InvalidJson,
                field,
                format!("field `{field}` is not a valid string: {e}"),
            )
        } else {
            wrong_type(field, "a string", raw)
        }
    })
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
    /// Name, value, and whether the value's percent-encoding was broken (then the value is
    /// kept as it came, and refused by [`Query::value`]).
    pairs: Vec<(String, String, bool)>,
}

impl Query {
    /// Decodes a raw query string (`+` is a space, `%XX` a byte, the bytes UTF-8), names as well
    /// as values: `%74oken` is `token`. Pairs are split here rather than by
    /// `form_urlencoded::parse`, which splits the same way but hands back only the decoded text,
    /// and a value whose encoding is broken must be kept as it came, to be refused and quoted.
    #[must_use]
    pub fn parse(raw: &str) -> Query {
        let pairs = raw
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                let name = percent_decode(name).unwrap_or_else(|| name.to_owned());
                match percent_decode(value) {
                    Some(v) => (name, v, false),
                    None => (name, value.to_owned(), true),
                }
            })
            .collect();
        Query { pairs }
    }

    fn first(&self, name: &str) -> Option<&(String, String, bool)> {
        self.pairs
            .iter()
            .find(|(k, v, _)| k == name && !v.is_empty())
    }

    /// The first non-empty value of `name`; an empty `uid=` counts as absent.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.first(name).map(|(_, v, _)| v.as_str())
    }

    /// Like [`Query::get`], but refuses, with `code` (the field's own `invalid_*`), a value that
    /// is still an unreplaced postback macro or whose percent-encoding is broken (`%zz`).
    pub fn value(&self, name: &'static str, code: Code) -> Result<Option<&str>, Error> {
        match self.first(name) {
            Some((_, v, _)) if is_unreplaced_macro(v) => Err(Error::field(
                code,
                name,
                format!(
                    "`{name}` is {}, a placeholder the sender never replaced; check the postback \
                     URL's macros",
                    quoted(v)
                ),
            )),
            Some((_, v, true)) => Err(Error::field(
                code,
                name,
                format!(
                    "`{name}` is {}, whose percent-encoding is broken (a % must start %XX with \
                     two hex digits, and the bytes must be UTF-8)",
                    quoted(v)
                ),
            )),
            other => Ok(other.map(|(_, v, _)| v.as_str())),
        }
    }
}

/// Decodes `+` and `%XX` of a query component; `None` if a `%` is not followed by two hex
/// digits or the bytes are not UTF-8.
///
/// The bytes are decoded by `percent-encoding`, the decoder `form_urlencoded` and `url` use.
/// The strictness is ours: a postback whose encoding is broken is refused, never guessed at, but
/// the crate keeps a stray `%` as it came, so the escapes are checked here first, and its strict
/// `decode_utf8` is used, not the lossy decoding of `form_urlencoded::parse`.
#[must_use]
pub fn percent_decode(text: &str) -> Option<String> {
    let escapes_whole = text.split('%').skip(1).all(|after| {
        after
            .get(..2)
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if !escapes_whole {
        return None;
    }
    let spaced = text.replace('+', " ");
    match percent_encoding::percent_decode_str(&spaced).decode_utf8() {
        Ok(Cow::Owned(decoded)) => Some(decoded),
        Ok(Cow::Borrowed(_)) => Some(spaced),
        Err(_) => None,
    }
}

/// The wrappers of postback macros that real networks and trackers use: `{clickid}` (Google
/// Ads, Keitaro, Binom, Voluum), `{{ad.id}}` and `{{ ad.id }}` (Meta), `${uid}`, `[clickid]`
/// and `[[x]]` (`HasOffers` and others), `#clickid#` (Everflow-style), `$x$`, `%x%`, `<x>`,
/// `__CLICKID__` (`TikTok`).
const MACRO_WRAPPERS: [(&str, &str); 11] = [
    ("{{", "}}"),
    ("${", "}"),
    ("{", "}"),
    ("[[", "]]"),
    ("[", "]"),
    ("#", "#"),
    ("$", "$"),
    ("%", "%"),
    ("<", ">"),
    ("__", "__"),
    ("{%", "%}"),
];

/// True for a value that is a whole postback macro left as is, in any of the shapes of
/// [`MACRO_WRAPPERS`], also percent-encoded once or twice more (`%7Bsubid%7D`,
/// `%257Bsubid%257D`): a name of letters, digits and `_ . : -` with at least one letter.
#[must_use]
pub fn is_unreplaced_macro(value: &str) -> bool {
    let mut v = value.trim().to_owned();
    for _ in 0..3 {
        if is_macro_shape(&v) {
            return true;
        }
        match percent_decode(&v) {
            Some(decoded) if decoded != v => decoded.trim().clone_into(&mut v),
            _ => return false,
        }
    }
    false
}

fn is_macro_shape(v: &str) -> bool {
    MACRO_WRAPPERS.iter().any(|(open, close)| {
        v.len() > open.len() + close.len()
            && v.starts_with(open)
            && v.ends_with(close)
            && is_macro_name(v[open.len()..v.len() - close.len()].trim())
    })
}

fn is_macro_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().any(|b| b.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
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
            "{{ad.id}}",
            "{{ ad.id }}",
            "[[clickid]]",
            "#clickid#",
            "$subid$",
            "%clickid%",
            "<clickid>",
            "__CLICKID__",
            "%257Bsubid%257D",
            "%3Cclickid%3E",
            "%23clickid%23",
            "{%uid%}",
            " {clickid} ",
        ] {
            assert!(is_unreplaced_macro(m), "{m}");
        }
        for v in [
            "abc", "{", "{}", "[]", "a{b}", "12.5", "x}", "%7B", "#123#", "$5$", "%%", "<>", "__",
            "{a b}", "-3.50", "tx_1001", "{x}y", "a#b#",
        ] {
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

    #[test]
    fn percent_encoding_is_decoded_strictly() {
        let q = Query::parse("a=%41%62+c&b=%zz&c=%4&d=%ff&e=%C3%A9&f=100%25");
        assert_eq!(q.value("a", Code::InvalidUid).unwrap(), Some("Ab c"));
        for bad in ["b", "c", "d"] {
            let e = q.value(bad, Code::InvalidEid).unwrap_err();
            assert_eq!((e.code, e.field), (Code::InvalidEid, Some(bad)));
            assert!(e.message.contains("percent-encoding"), "{}", e.message);
        }
        assert_eq!(q.value("e", Code::InvalidUid).unwrap(), Some("é"));
        assert_eq!(q.value("f", Code::InvalidUid).unwrap(), Some("100%"));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%").as_deref(), None);
        assert_eq!(percent_decode("%é1"), None);
        assert_eq!(percent_decode("%41").as_deref(), Some("A"));
        assert_eq!(percent_decode("a+b%2Bc").as_deref(), Some("a b+c"));
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn parameter_names_are_decoded_too() {
        let q = Query::parse("%74oken=abc&utm%5Fcampaign=spring+sale&%zz=1&a+b=2");
        assert_eq!(q.get("token"), Some("abc"));
        assert_eq!(q.get("utm_campaign"), Some("spring sale"));
        // A name whose encoding is broken is kept as it came, and matches only itself.
        assert_eq!(q.get("%zz"), Some("1"));
        assert_eq!(q.get("a b"), Some("2"));
    }

    #[test]
    fn a_lone_surrogate_is_named_as_an_invalid_string() {
        let raw: Box<RawValue> = serde_json::from_str(r#""\ud800""#).unwrap();
        let e = json_string(&raw, "uid").unwrap_err();
        assert_eq!((e.code, e.field), (Code::InvalidJson, Some("uid")));
        assert!(!e.message.contains("got a string"), "{}", e.message);
        let raw: Box<RawValue> = serde_json::from_str("5").unwrap();
        assert!(
            json_string(&raw, "uid")
                .unwrap_err()
                .message
                .contains("got a number")
        );
    }
}
