//! `tracker import`: each line of a file turned into the JSON of one `POST /events` event, and
//! the `eid` made for a line that has none, so that importing the same file again stores
//! nothing twice.
//!
//! A line is an NDJSON object, or a CSV row under a header row. Its fields are those of
//! `POST /events` and the columns of `tracker export` (the feed's fields): the export's columns
//! that are not event fields (`inbox_id`, `matched`, `link_slug`, ...) are what the tracker
//! works out when it stores an event, so they are left out, and anything else is refused as an
//! unknown field, as `POST /events` refuses it. A CSV cell written with a leading `'` by the
//! export (a text that a spreadsheet would take for a formula, `spreadsheet.rs`) is read back
//! without it; an empty cell, like a JSON `null`, is an absent field. A field named twice in a
//! line (a key twice, a column twice in the header) is refused, as `POST /events` refuses it.
//!
//! **The made `eid`.** A line without an `eid` (absent, `null` or empty) gets
//! `import-` followed by the first 32 hex digits of the SHA-256 of its event fields' text:
//! `event`, `uid`, `tg_id`, `value`, `currency` and `occurred_at_ms`, in that order, each as
//! given (a string's content, a number's digits as written, a CSV time without its leading
//! zeros, absent as nothing), joined by the unit separator U+001F. The same event in NDJSON
//! and in CSV gets the same `eid`; two lines with the same event fields are the same event.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::domain::event::EventBody;
use crate::domain::export::ExportedEvent;
use crate::error::{Code, Error};

/// The fields the made `eid` is a digest of, in order.
const KEYED_FIELDS: [&str; 6] = [
    "event",
    "uid",
    "tg_id",
    "value",
    "currency",
    "occurred_at_ms",
];

/// What the made `eid` starts with.
pub const MADE_EID_PREFIX: &str = "import-";

/// The names of a type's fields, from its schema: the one list of them there is.
fn field_names(schema: &schemars::Schema) -> Vec<String> {
    schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The export's columns that are not fields of an event: left out of an imported line.
static EXPORT_ONLY: LazyLock<Vec<String>> = LazyLock::new(|| {
    let event_fields = field_names(&schemars::schema_for!(EventBody<'static>));
    field_names(&schemars::schema_for!(ExportedEvent<'static>))
        .into_iter()
        .filter(|name| !event_fields.contains(name))
        .collect()
});

/// One NDJSON line as the JSON of one event. `Ok(None)` for a blank line.
pub fn ndjson_line(line: &str) -> Result<Option<String>, Error> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let Pairs(fields) = serde_json::from_str(line).map_err(|e| {
        let text = e.to_string();
        let text = text.split(" at line ").next().unwrap_or(&text);
        Error::new(
            Code::InvalidJson,
            format!("the line is not a JSON object: {text}"),
        )
    })?;
    let fields = once(
        fields
            .into_iter()
            .map(|(name, raw)| (name, raw.get().to_owned())),
    )?;
    Ok(Some(event_json(fields)))
}

/// A JSON object's fields in their order, a repeated name as often as it comes (a map would
/// keep one of them without a word).
struct Pairs<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Pairs<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Pairs<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Pairs<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(pair);
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A line's fields by name, each named once: a name given twice is refused, as `POST /events`
/// refuses a body with a field twice, rather than one of the two kept.
fn once<V>(fields: impl Iterator<Item = (String, V)>) -> Result<BTreeMap<String, V>, Error> {
    let mut out = BTreeMap::new();
    for (name, json) in fields {
        if out.contains_key(&name) {
            return Err(Error::new(
                Code::InvalidJson,
                format!("duplicate field `{name}`: give each field once"),
            ));
        }
        out.insert(name, json);
    }
    Ok(out)
}

/// A CSV header row, checked: a column named twice is refused, as every row under it would be.
///
/// # Errors
/// `invalid_json` naming the column.
pub fn csv_header(names: &[String]) -> Result<(), Error> {
    once(names.iter().map(|n| (n.clone(), ()))).map(|_| ())
}

/// One CSV row, under `header`, as the JSON of one event.
pub fn csv_row(header: &[String], row: &[String]) -> Result<String, Error> {
    if row.len() != header.len() {
        return Err(Error::new(
            Code::InvalidJson,
            format!(
                "the row has {} cells and the header {}",
                row.len(),
                header.len()
            ),
        ));
    }
    let fields = header.iter().zip(row).map(|(name, cell)| {
        // An empty cell is an absent field, left out once the names are checked: a column
        // twice in the header is refused whatever its cells hold.
        if cell.is_empty() {
            return (name.clone(), None);
        }
        let cell = crate::domain::spreadsheet::cell_text(cell);
        // `occurred_at_ms` is a JSON integer in an event, which has no leading zeros (a cell is
        // text: `0170...` holds the number `170...`); every other field takes a string.
        let json = if name == "occurred_at_ms" && cell.bytes().all(|b| b.is_ascii_digit()) {
            let digits = cell.trim_start_matches('0');
            if digits.is_empty() { "0" } else { digits }.to_owned()
        } else {
            serde_json::Value::String(cell.to_owned()).to_string()
        };
        (name.clone(), Some(json))
    });
    let fields = once(fields)?
        .into_iter()
        .filter_map(|(name, json)| Some((name, json?)))
        .collect();
    Ok(event_json(fields))
}

/// The JSON of an event from a line's fields (each a JSON text): the export's own columns
/// left out, `null` as absent, and an `eid` made when there is none.
fn event_json(mut fields: BTreeMap<String, String>) -> String {
    fields.retain(|name, json| json != "null" && !EXPORT_ONLY.contains(name));
    if fields.get("eid").is_none_or(|eid| eid == "\"\"") {
        let eid = made_eid(&fields);
        fields.insert("eid".into(), serde_json::Value::String(eid).to_string());
    }
    let mut out = String::from("{");
    for (i, (name, json)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}:{json}", serde_json::Value::String(name.clone()));
    }
    out.push('}');
    out
}

/// The `eid` of a line without one (the module's doc says how it is made).
fn made_eid(fields: &BTreeMap<String, String>) -> String {
    let mut hash = Sha256::new();
    for (i, name) in KEYED_FIELDS.iter().enumerate() {
        if i > 0 {
            hash.update([0x1f]);
        }
        if let Some(json) = fields.get(*name) {
            hash.update(field_text(json).as_bytes());
        }
    }
    let digest = hash.finalize();
    format!("{MADE_EID_PREFIX}{}", hex::encode(&digest[..16]))
}

/// A field's text as given: a JSON string's content, or any other JSON value as written.
///
/// Only a string is parsed: reading any other value as a string would build a refusal's message
/// to throw away, for every number of every line.
fn field_text(json: &str) -> String {
    if !json.trim_start().starts_with('"') {
        return json.to_owned();
    }
    serde_json::from_str::<String>(json).unwrap_or_else(|_| json.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CSV cell is text: `occurred_at_ms` with leading zeros is the same number, and the
    /// same event (a JSON integer cannot be written with them).
    #[test]
    fn a_csv_time_with_leading_zeros_is_the_same_number() {
        let header = [
            "event".to_owned(),
            "uid".to_owned(),
            "occurred_at_ms".to_owned(),
        ];
        let row = |at: &str| ["contact".to_owned(), "u1".to_owned(), at.to_owned()];
        let plain = csv_row(&header, &row("1700000000000")).unwrap();
        assert_eq!(csv_row(&header, &row("001700000000000")).unwrap(), plain);
        let parsed: serde_json::Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(parsed["occurred_at_ms"], 1_700_000_000_000_u64);
        let zero: serde_json::Value =
            serde_json::from_str(&csv_row(&header, &row("000")).unwrap()).unwrap();
        assert_eq!(zero["occurred_at_ms"], 0);
    }

    fn fields(json: &str) -> serde_json::Value {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn an_ndjson_line_keeps_its_fields_as_written() {
        let json = ndjson_line(r#"{"event":"deposit","uid":"u1","value":12.10,"eid":"tx-1"}"#)
            .unwrap()
            .unwrap();
        assert!(json.contains(r#""value":12.10"#), "{json}");
        assert_eq!(fields(&json)["eid"], "tx-1");
        assert_eq!(ndjson_line("  ").unwrap(), None);
        assert_eq!(ndjson_line("[1]").err().unwrap().code, Code::InvalidJson);
    }

    #[test]
    fn a_field_given_twice_is_refused_in_either_format() {
        for refused in [
            ndjson_line(r#"{"event":"contact","uid":"a","uid":"b"}"#).map(|_| ()),
            csv_row(
                &["event".into(), "uid".into(), "uid".into()],
                &["contact".into(), "a".into(), String::new()],
            )
            .map(|_| ()),
        ] {
            let e = refused.unwrap_err();
            assert_eq!(e.code, Code::InvalidJson);
            assert!(e.message.contains("duplicate field `uid`"), "{}", e.message);
        }
        // Once each, and an empty cell, still are an event.
        assert!(ndjson_line(r#"{"event":"contact","uid":"a"}"#).is_ok());
        let row = csv_row(
            &["event".into(), "uid".into(), "tg_id".into()],
            &["contact".into(), "a".into(), String::new()],
        )
        .unwrap();
        assert!(!row.contains("tg_id"), "{row}");
    }

    #[test]
    fn the_export_columns_are_left_out_and_others_kept() {
        let json = ndjson_line(
            r#"{"inbox_id":"7","event":"contact","uid":"u1","matched":true,"link_slug":null,"fbc":"x","eid":"e","occured_at_ms":1}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            fields(&json),
            fields(r#"{"event":"contact","uid":"u1","eid":"e","occured_at_ms":1}"#)
        );
    }

    #[test]
    fn the_made_eid_is_the_same_for_the_same_event_in_either_format() {
        let from_ndjson = ndjson_line(
            r#"{"event":"deposit","uid":"u1","value":"12.10","occurred_at_ms":1700000000000}"#,
        )
        .unwrap()
        .unwrap();
        let header: Vec<String> = ["inbox_id", "event", "uid", "value", "eid", "occurred_at_ms"]
            .map(String::from)
            .to_vec();
        let row: Vec<String> = ["3", "deposit", "u1", "12.10", "", "1700000000000"]
            .map(String::from)
            .to_vec();
        let from_csv = csv_row(&header, &row).unwrap();
        let (a, b) = (fields(&from_ndjson), fields(&from_csv));
        assert_eq!(a["eid"], b["eid"]);
        assert_eq!(a["occurred_at_ms"], 1_700_000_000_000_u64);
        let eid = a["eid"].as_str().unwrap();
        assert!(
            eid.starts_with(MADE_EID_PREFIX) && eid.len() == 7 + 32,
            "{eid}"
        );
        // Another value is another event.
        let other = ndjson_line(
            r#"{"event":"deposit","uid":"u1","value":"12.1","occurred_at_ms":1700000000000}"#,
        )
        .unwrap()
        .unwrap();
        assert_ne!(fields(&other)["eid"], a["eid"]);
        // A field moved to another is another event: the separator keeps them apart.
        let moved = ndjson_line(
            r#"{"event":"deposit","tg_id":"u1","value":"12.10","occurred_at_ms":1700000000000}"#,
        )
        .unwrap()
        .unwrap();
        assert_ne!(fields(&moved)["eid"], a["eid"]);
    }

    /// The made `eid` is the documented digest, so a file imported by an older release answers
    /// `duplicate` when imported again: a string by its content, a number as written.
    #[test]
    fn the_made_eid_is_the_digest_of_the_fields_as_written() {
        let json = ndjson_line(
            r#"{"event":"deposit","uid":"u\u0031","value":"12.10","occurred_at_ms":1700000000000}"#,
        )
        .unwrap()
        .unwrap();
        let digest = Sha256::digest("deposit\u{1f}u1\u{1f}\u{1f}12.10\u{1f}\u{1f}1700000000000");
        let expected = format!("import-{}", hex::encode(&digest[..16]));
        assert_eq!(fields(&json)["eid"], expected.as_str());
    }

    #[test]
    fn a_given_eid_is_kept_and_an_empty_one_is_made() {
        let kept = ndjson_line(r#"{"event":"contact","eid":"mine"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(fields(&kept)["eid"], "mine");
        let made = ndjson_line(r#"{"event":"contact","eid":null}"#)
            .unwrap()
            .unwrap();
        assert!(
            fields(&made)["eid"]
                .as_str()
                .unwrap()
                .starts_with(MADE_EID_PREFIX)
        );
    }

    #[test]
    fn a_csv_cell_escaped_for_spreadsheets_is_read_back() {
        let header: Vec<String> = ["event", "eid", "value"].map(String::from).to_vec();
        let row: Vec<String> = ["deposit", "'=1+2", "-3.50"].map(String::from).to_vec();
        let json = fields(&csv_row(&header, &row).unwrap());
        assert_eq!(json["eid"], "=1+2");
        assert_eq!(json["value"], "-3.50");
        let short: Vec<String> = ["deposit"].map(String::from).to_vec();
        assert_eq!(
            csv_row(&header, &short).err().unwrap().code,
            Code::InvalidJson
        );
    }
}
