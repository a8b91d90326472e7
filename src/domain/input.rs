//! How a request's fields are read, before any field's own rule: JSON bodies and GET queries.
//!
//! Every endpoint reads its input through these functions, so the same things are true
//! everywhere: unknown body fields are `invalid_json`, a field of the wrong JSON type names
//! itself, an empty query parameter counts as absent, unknown query parameters are ignored, and a
//! postback macro that was never replaced (`{clickid}`, `[uid]`, `%7Bsubid%7D`) is refused with
//! the field's own code and a sentence that says so.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::domain::percent;
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

// Read by the uid's own rule; this type only describes it in `/openapi.json`, where it stands
// in place (no schema of its own), described as the field.
/// A click id: 1 to 64 of `A-Z a-z 0-9 _ -`, a Telegram `start` parameter. Anything else (an
/// unreplaced macro such as `{clickid}`, `%%CLICK_ID%%` or `$subid`) is `invalid_uid`.
#[derive(JsonSchema)]
#[schemars(inline, transparent)]
pub struct UidJson(#[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z0-9_-]+$"))] pub String);

// Read by `click::tg_id_text`; this type only describes it in `/openapi.json`.
/// A Telegram user id, 1 to 2^53-1 (the largest integer every JSON parser holds exactly): a JSON
/// integer or a string of digits.
#[derive(JsonSchema)]
#[schemars(untagged)]
pub enum TelegramIdJson {
    Integer(#[schemars(range(min = 1, max = 9_007_199_254_740_991_u64))] u64),
    Digits(#[schemars(pattern(r"^0*[1-9][0-9]{0,15}$"))] String),
}

// Read by the field's own rule; this type only describes it in `/openapi.json`.
/// An exact decimal: a JSON number or a string holding one, at most 28 significant digits,
/// with an exponent of 1 to 4 digits allowed (`1.5E3`, as JSON encoders write large and small
/// numbers); no NaN, infinity, `12,5` or hex. Stored exactly as written, an exponent applied.
#[derive(JsonSchema)]
#[schemars(untagged)]
pub enum DecimalJson {
    Number(f64),
    Text(#[schemars(pattern(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,4})?$"))] String),
}

/// One shape of a body whose fields depend on a choice in it (a destination's `kind`, a link's
/// `bot`, `target` or `channel`), for `/openapi.json`.
pub struct Variant {
    pub title: &'static str,
    /// A field whose value picks this shape: `("kind", "webhook")`.
    pub tag: Option<(&'static str, &'static str)>,
    /// The fields it takes, as the body's type describes them.
    pub fields: Vec<&'static str>,
    /// Of its fields, those it cannot do without: given, a non-empty string.
    pub required: Vec<&'static str>,
    /// Of the other fields, those it cannot take even as `null` or empty.
    pub never: Vec<&'static str>,
}

/// A body type's schema (`flat`: every field optional) as one closed object per [`Variant`],
/// combined by `combine` (`oneOf`, or `anyOf` when the shapes overlap). A variant takes its own
/// fields as `flat` describes them, its required ones listed as required when `require` (a
/// change gives only what it changes); every other field of the type only as the server reads
/// it as absent: `null`, or an empty string where the field is text (and those it names
/// `never` not at all).
///
/// # Panics
///
/// If `flat` is not an object schema with properties (the body types are; `/openapi.json` is
/// built in a unit test).
#[must_use]
pub fn by_variant(
    flat: &schemars::Schema,
    variants: &[Variant],
    require: bool,
    combine: &str,
    description: &str,
) -> schemars::Schema {
    use serde_json::{Map, Value, json};
    let properties = flat
        .get("properties")
        .and_then(Value::as_object)
        .expect("a body type has properties");
    let flat_required = |name: &str| {
        flat.get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|f| f == name))
    };
    let shapes: Vec<Value> = variants
        .iter()
        .map(|variant| {
            let mut fields = Map::new();
            let mut required = Vec::new();
            for (name, schema) in properties {
                let name = name.as_str();
                if variant.tag.is_some_and(|(tag, _)| tag == name) || variant.never.contains(&name)
                {
                    continue;
                }
                let mut schema = schema.clone();
                if variant.required.contains(&name) {
                    schema["type"] = "string".into();
                    schema["minLength"] = 1.into();
                    if require {
                        required.push(name);
                    }
                } else if !variant.fields.contains(&name) {
                    let text = match &schema["type"] {
                        Value::String(t) => t == "string",
                        Value::Array(types) => types.iter().any(|t| t == "string"),
                        _ => false,
                    };
                    schema = if text {
                        json!({"type": ["string", "null"], "maxLength": 0})
                    } else {
                        json!({"type": "null"})
                    };
                } else if require && flat_required(name) {
                    required.push(name);
                }
                fields.insert(name.to_owned(), schema);
            }
            if let Some((tag, value)) = variant.tag {
                fields.insert(tag.to_owned(), json!({"const": value}));
                if require {
                    required.push(tag);
                }
            }
            json!({
                "title": variant.title,
                "type": "object",
                "properties": fields,
                "required": required,
                "additionalProperties": false,
            })
        })
        .collect();
    let mut schema = Map::new();
    schema.insert("description".into(), description.into());
    schema.insert(combine.into(), shapes.into());
    schema.into()
}

#[must_use]
pub fn wrong_type(field: &'static str, expected: &str, raw: &RawValue) -> Error {
    let got = type_name(raw);
    Error::field(
        Code::InvalidJson,
        field,
        format!("field `{field}` must be {expected}, got {got}"),
    )
}

/// What JSON type `raw` is, for an error sentence.
fn type_name(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// A JSON array of strings (`expected` says what they are), or `invalid_json` naming the field
/// and, when the array is one, its first item that is not a string.
pub fn json_strings(
    raw: &RawValue,
    field: &'static str,
    expected: &str,
) -> Result<Vec<String>, Error> {
    let items: Vec<&RawValue> =
        serde_json::from_str(raw.get()).map_err(|_| wrong_type(field, expected, raw))?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::from_str(item.get()).map_err(|_| {
                wrong_member(field, expected, ("an array", &format!("item {i}")), item)
            })
        })
        .collect()
}

/// A JSON object of strings (`expected` says what they are), or `invalid_json` naming the field
/// and, when the value is an object, a member that is not a string (the first by name).
pub fn json_string_map(
    raw: &RawValue,
    field: &'static str,
    expected: &str,
) -> Result<BTreeMap<String, String>, Error> {
    let members: BTreeMap<String, &RawValue> =
        serde_json::from_str(raw.get()).map_err(|_| wrong_type(field, expected, raw))?;
    members
        .into_iter()
        .map(|(name, value)| match serde_json::from_str(value.get()) {
            Ok(text) => Ok((name, text)),
            Err(_) => Err(wrong_member(
                field,
                expected,
                ("an object", &quoted(&name)),
                value,
            )),
        })
        .collect()
}

/// The error of a container (`an array`) whose member `which` (`item 2`, `"deposit"`) has the
/// wrong type.
fn wrong_member(
    field: &'static str,
    expected: &str,
    (container, which): (&str, &str),
    member: &RawValue,
) -> Error {
    let got = if member.get().starts_with('"') {
        "not a valid string"
    } else {
        type_name(member)
    };
    Error::field(
        Code::InvalidJson,
        field,
        format!("field `{field}` must be {expected}, got {container} whose {which} is {got}"),
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

/// The rule of a space's or a destination's name: `[a-z0-9][a-z0-9-]{0,31}`.
#[must_use]
pub fn is_lowercase_name(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=32).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
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
                let name = percent::decode(name).unwrap_or_else(|| name.to_owned());
                match percent::decode(value) {
                    Some(v) => (name, v, false),
                    None => (name, value.to_owned(), true),
                }
            })
            .collect();
        Query { pairs }
    }

    /// Fields already decoded (a `multipart/form-data` form's), as a query holds them.
    #[must_use]
    pub fn from_fields(fields: Vec<(String, String)>) -> Query {
        Query {
            pairs: fields.into_iter().map(|(n, v)| (n, v, false)).collect(),
        }
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
        let first = self.first(name);
        if let Some((_, v, _)) = first
            && let Some(syntax) = macro_syntax(v)
        {
            return Err(unreplaced_macro(code, name, v, &syntax));
        }
        match first {
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

/// The refusal of a value that is an unreplaced postback macro of `syntax`, with `code`.
#[must_use]
pub fn unreplaced_macro(
    code: Code,
    field: &'static str,
    value: &str,
    syntax: &MacroSyntax,
) -> Error {
    Error::field(
        code,
        field,
        format!(
            "`{field}` is {}, a placeholder the sender never replaced ({}); check the postback \
             URL's macros",
            quoted(value),
            syntax.describe()
        ),
    )
}

/// A postback macro's wrapper and the syntax it is, in words, for an error sentence.
struct Wrapper {
    open: &'static str,
    close: &'static str,
    what: &'static str,
}

const fn wrapper(open: &'static str, close: &'static str, what: &'static str) -> Wrapper {
    Wrapper { open, close, what }
}

/// The wrappers of postback macros that real networks and trackers use, the most specific
/// first (the first that fits names the syntax): `{{ad.id}}` (Meta's URL parameters), `${uid}`,
/// `{clickid}` (Keitaro, Binom, Voluum), `[clickid]`, `%%CLICK_ID%%`, `##clickid##`,
/// `#s1#`, `$x$`, `%x%`, `<x>`, `__CLICKID__`.
const MACRO_WRAPPERS: [Wrapper; 13] = [
    wrapper(
        "{{",
        "}}",
        "`{{...}}` in double curly braces, as Meta's URL parameters",
    ),
    wrapper("${", "}", "`${...}`"),
    wrapper("{%", "%}", "`{%...%}`"),
    wrapper(
        "{",
        "}",
        "`{...}` in curly braces, the macro syntax of Keitaro, Binom and Voluum",
    ),
    wrapper("[[", "]]", "`[[...]]` in double square brackets"),
    wrapper("[", "]", "`[...]` in square brackets"),
    wrapper("%%", "%%", "`%%...%%` between double percent signs"),
    wrapper("##", "##", "`##...##` between double hashes"),
    wrapper("#", "#", "`#...#` between hashes"),
    wrapper("$", "$", "`$...$` between dollar signs"),
    wrapper("%", "%", "`%...%` between percent signs"),
    wrapper("<", ">", "`<...>` in angle brackets"),
    wrapper("__", "__", "`__...__` between double underscores"),
];

/// The syntax of the postback macro a value is (or looks like), for the sentence that refuses
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacroSyntax {
    /// The syntax in words: "`{...}` in curly braces, the macro syntax of ...".
    pub what: &'static str,
    /// The value was percent-encoded once or twice more around the macro (`%7Bsubid%7D`).
    pub encoded: bool,
}

impl MacroSyntax {
    /// The syntax in words, saying when it came percent-encoded.
    #[must_use]
    pub fn describe(&self) -> String {
        if self.encoded {
            format!("{}, percent-encoded", self.what)
        } else {
            self.what.to_owned()
        }
    }
}

/// True for a value that is a whole postback macro left as is ([`macro_syntax`]).
#[must_use]
pub fn is_unreplaced_macro(value: &str) -> bool {
    macro_syntax(value).is_some()
}

/// The syntax of a value that is a whole postback macro left as is, in any of the shapes of
/// [`MACRO_WRAPPERS`], also percent-encoded once or twice more (`%7Bsubid%7D`,
/// `%257Bsubid%257D`): a name of letters, digits and `_ . : -` with at least one letter. What
/// `GET` query values and every `eid` are refused for.
#[must_use]
pub fn macro_syntax(value: &str) -> Option<MacroSyntax> {
    decodings(value, whole_macro)
}

/// Like [`macro_syntax`], and also the shapes of a macro a sender garbled or a value that holds
/// one: `$subid`, an unclosed `{clickid`, an empty `{}` or `[]`, `https://x/?c={clickid}`. None
/// of them is a click id the tracker made, but an eid or a value may hold such text, so only the
/// sentence that refuses a `uid` looks for them.
#[must_use]
pub fn macro_like(value: &str) -> Option<MacroSyntax> {
    decodings(value, |v| whole_macro(v).or_else(|| garbled_macro(v)))
}

/// `shape` of the trimmed value, or of it percent-decoded once or twice.
fn decodings(value: &str, shape: impl Fn(&str) -> Option<&'static str>) -> Option<MacroSyntax> {
    let mut v = value.trim().to_owned();
    for encoded in [false, true, true] {
        if let Some(what) = shape(&v) {
            return Some(MacroSyntax { what, encoded });
        }
        match percent::decode(&v) {
            Some(decoded) if decoded != v => decoded.trim().clone_into(&mut v),
            _ => return None,
        }
    }
    None
}

/// Voluum's placeholder for a value it has none of: the bare word, in capitals.
const VOLUUM_PLACEHOLDER: &str = "REPLACE";

fn whole_macro(v: &str) -> Option<&'static str> {
    if v == VOLUUM_PLACEHOLDER {
        return Some("`REPLACE`, the placeholder Voluum sends where it has no value");
    }
    MACRO_WRAPPERS
        .iter()
        .find(|w| {
            v.len() > w.open.len() + w.close.len()
                && v.starts_with(w.open)
                && v.ends_with(w.close)
                && is_macro_name(v[w.open.len()..v.len() - w.close.len()].trim())
        })
        .map(|w| w.what)
}

fn garbled_macro(v: &str) -> Option<&'static str> {
    if !v.is_empty() && v.bytes().all(|b| b"{}[]<>".contains(&b)) {
        return Some("an empty `{}` or `[]`: a macro with its name missing");
    }
    if v.strip_prefix('$').is_some_and(is_macro_name) {
        return Some("`$name`, a dollar-sign variable");
    }
    for w in &MACRO_WRAPPERS[..8] {
        if v.strip_prefix(w.open)
            .is_some_and(|name| is_macro_name(name.trim()))
        {
            return Some("the start of a macro whose closing bracket is missing (`{clickid`)");
        }
        if v.strip_suffix(w.close)
            .is_some_and(|name| is_macro_name(name.trim()))
        {
            return Some("the end of a macro whose opening bracket is missing (`clickid}`)");
        }
    }
    // A macro inside a longer value: `{name}` or `[name]` anywhere.
    let inside = ["{", "["].iter().zip(["}", "]"]).any(|(open, close)| {
        v.match_indices(open).any(|(at, _)| {
            v[at + 1..]
                .split_once(close)
                .is_some_and(|(name, _)| is_macro_name(name.trim()))
        })
    });
    inside.then_some("text with a `{...}` or `[...]` macro inside it")
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

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn an_array_of_strings_names_its_first_item_of_another_type() {
        let names = "an array of event names";
        let got = |json: &str| json_strings(&raw(json), "events", names).map_err(|e| e.message);
        assert_eq!(
            got(r#"["deposit", "contact"]"#).unwrap(),
            ["deposit", "contact"]
        );
        assert_eq!(got("[]").unwrap(), Vec::<String>::new());
        let wrong = |json: &str, what: &str| {
            assert_eq!(
                got(json).unwrap_err(),
                format!("field `events` must be an array of event names, got {what}"),
                "{json}"
            );
        };
        wrong(r#"["deposit", {}]"#, "an array whose item 1 is an object");
        wrong("[[]]", "an array whose item 0 is an array");
        wrong(r#"["a", "b", null]"#, "an array whose item 2 is null");
        wrong(
            r#"["\ud800"]"#,
            "an array whose item 0 is not a valid string",
        );
        wrong(r#""deposit""#, "a string");
        wrong("{}", "an object");
    }

    #[test]
    fn an_object_of_strings_names_a_member_of_another_type() {
        let got = |json: &str| {
            json_string_map(&raw(json), "statuses", "an object of strings").map_err(|e| e.message)
        };
        let map = got(r#"{"deposit": "sale", "contact": "lead"}"#).unwrap();
        assert_eq!(map.get("deposit").map(String::as_str), Some("sale"));
        assert_eq!(map.len(), 2);
        let wrong = |json: &str, what: &str| {
            assert_eq!(
                got(json).unwrap_err(),
                format!("field `statuses` must be an object of strings, got {what}"),
                "{json}"
            );
        };
        wrong(
            r#"{"deposit": "sale", "contact": 1}"#,
            r#"an object whose "contact" is a number"#,
        );
        wrong(r#"{"a": ["x"]}"#, r#"an object whose "a" is an array"#);
        wrong(r#"["x"]"#, "an array");
    }

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
            "%%CLICK_ID%%",
            "##clickid##",
            "REPLACE",
            " REPLACE ",
            "%52EPLACE",
        ] {
            assert!(is_unreplaced_macro(m), "{m}");
            assert!(macro_like(m).is_some(), "{m}");
        }
        for v in [
            "abc", "{", "{}", "[]", "a{b}", "12.5", "x}", "%7B", "#123#", "$5$", "%%", "<>", "__",
            "{a b}", "-3.50", "tx_1001", "{x}y", "a#b#", "replace", "Replace", "REPLACED",
            "REPLACE1", "XREPLACE",
        ] {
            assert!(!is_unreplaced_macro(v), "{v}");
        }
    }

    /// Each shape is named by its syntax, the most specific wrapper first, and a network only
    /// where the syntax is that network's.
    #[test]
    fn a_macro_is_named_by_its_syntax() {
        let what = |v: &str| macro_like(v).map(|m| m.describe()).unwrap_or_default();
        assert!(what("{clickid}").contains("Keitaro, Binom and Voluum"));
        assert!(what("{{ad.id}}").contains("double curly braces"));
        assert!(what("%7Bsubid%7D").ends_with(", percent-encoded"));
        assert!(!what("{clickid}").contains("percent-encoded"));
        assert!(what("%%CLICK_ID%%").contains("double percent signs"));
        assert!(what("##clickid##").contains("double hashes"));
        assert!(what("[uid]").contains("square brackets"));
        for (garbled, says) in [
            ("$subid", "dollar-sign"),
            ("{clickid", "closing bracket is missing"),
            ("%7Bclickid", "closing bracket is missing"),
            ("clickid}", "opening bracket is missing"),
            ("{}", "name missing"),
            ("[]", "name missing"),
            ("https://x.example/?c={clickid}", "inside"),
            ("a[sub1]b", "inside"),
        ] {
            assert!(what(garbled).contains(says), "{garbled}: {}", what(garbled));
            assert!(!is_unreplaced_macro(garbled), "{garbled}");
        }
        for plain in [
            "abc", "12.5", "tx_1001", "a-b", "$", "$5", "{1}", "100%", "a{}b{",
        ] {
            assert_eq!(macro_like(plain), None, "{plain}");
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
        assert_eq!(percent::decode("%4"), None);
        assert_eq!(percent::decode("%").as_deref(), None);
        assert_eq!(percent::decode("%é1"), None);
        assert_eq!(percent::decode("%41").as_deref(), Some("A"));
        assert_eq!(percent::decode("a+b%2Bc").as_deref(), Some("a b+c"));
        assert_eq!(percent::decode("plain").as_deref(), Some("plain"));
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
