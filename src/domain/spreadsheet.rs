//! CSV as the tracker writes it, for spreadsheets: RFC 4180 with a header row, and no cell a
//! spreadsheet would run as a formula (`docs/api.md#csv`).
//!
//! A visitor chooses some of what is stored (a click's `utm_campaign`, an event's `eid`), and a
//! spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return
//! before one) as a formula: `=HYPERLINK(...)` in a campaign name would be a live link, or
//! worse, in the marketer's sheet. So every text cell that starts with one of those is written
//! with a `'` in front (OWASP's rule for CSV injection), which spreadsheets show as text. A
//! number is left as it is, a negative one included: `-3.50` is a refund, not a formula.
//!
//! Every CSV the tracker writes goes through [`CsvRows`] (or, for a writer of its own, through
//! [`safe_cell`] for each cell): `tracker export --format csv` does, and so must any later one.

use std::borrow::Cow;
use std::io::Write;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A cell as a spreadsheet may safely read it: `text` itself, or `'` and `text` when a
/// spreadsheet would take `text` for a formula.
#[must_use]
pub fn safe_cell(text: &str) -> Cow<'_, str> {
    // A text that already starts with `'` before one (`'=x`) gets its own `'` as well (`''=x`):
    // else it would be written as it is and read back as `=x`, the text `=x` is written as.
    let after_quotes = text.trim_start_matches('\'');
    let risky = after_quotes
        .bytes()
        .next()
        .is_some_and(|b| matches!(b, b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r'));
    if risky && !is_plain_number(after_quotes) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// A cell's text as it was before [`safe_cell`]: without the `'` it put in front of a text a
/// spreadsheet would take for a formula (`tracker import` reads an export back with it).
#[must_use]
pub fn cell_text(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(text) if safe_cell(text).len() != text.len() => text,
        _ => cell,
    }
}

/// A decimal number and nothing else (`-3.50`, `+12`): no spreadsheet runs it.
fn is_plain_number(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
    !whole.is_empty()
        && !fraction.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

/// Rows of records written as CSV: the header from the first record's field names, every cell
/// through [`safe_cell`]. A record is any flat `Serialize` struct (a field that is a list or an
/// object is written as its JSON text); `None` is an empty cell.
pub struct CsvRows<W: Write> {
    writer: csv::Writer<W>,
    header_written: bool,
}

impl<W: Write> CsvRows<W> {
    pub fn new(out: W) -> CsvRows<W> {
        CsvRows {
            writer: csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(out),
            header_written: false,
        }
    }

    /// Writes `record` as one row (after the header row, for the first).
    pub fn row<T: Serialize>(&mut self, record: &T) -> Result<(), csv::Error> {
        let text = serde_json::to_string(record).map_err(std::io::Error::other)?;
        let Fields(fields) = serde_json::from_str(&text).map_err(std::io::Error::other)?;
        if !self.header_written {
            self.writer.write_record(
                fields
                    .iter()
                    .map(|(name, _)| safe_cell(name))
                    .map(Cow::into_owned),
            )?;
            self.header_written = true;
        }
        self.writer
            .write_record(fields.iter().map(|(_, value)| cell(value)))
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

impl CsvRows<Vec<u8>> {
    /// The bytes written so far, taken out (the header stays written).
    pub fn take_written(&mut self) -> std::io::Result<Vec<u8>> {
        let writer = std::mem::replace(
            &mut self.writer,
            csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new()),
        );
        writer.into_inner().map_err(csv::IntoInnerError::into_error)
    }
}

/// The cell of a JSON value, as the `csv` crate would write the Rust value.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => safe_cell(s).into_owned(),
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        other => safe_cell(&other.to_string()).into_owned(),
    }
}

/// A JSON object's fields in the order they were written (`serde_json`'s own map sorts them).
struct Fields(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fields, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a record")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry()? {
                    fields.push(field);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(InOrder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_reads_back_as_it_was_written() {
        for text in [
            "=1+2", "@x", "-x", "'quoted", "'", "-3.50", "plain", "", "'=x", "''=x", "'-1", "'-x",
            "''", "'-3.50",
        ] {
            assert_eq!(cell_text(&safe_cell(text)), text, "{text:?}");
        }
        // Two texts never share a cell.
        assert_ne!(safe_cell("'=x"), safe_cell("=x"));
    }

    #[test]
    fn a_cell_a_spreadsheet_would_run_is_text() {
        for (given, written) in [
            ("=HYPERLINK(\"https://x\")", "'=HYPERLINK(\"https://x\")"),
            ("+cmd", "'+cmd"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("-", "'-"),
            ("-.5", "'-.5"),
            ("-1.", "'-1."),
            ("1e5", "1e5"),
            ("spring=sale", "spring=sale"),
            (" =1", " =1"),
            ("", ""),
            ("-3.50", "-3.50"),
            ("-12", "-12"),
            ("+7", "+7"),
            ("49.90", "49.90"),
            ("'=1", "''=1"),
            ("'-3.50", "'-3.50"),
            ("'plain", "'plain"),
        ] {
            assert_eq!(safe_cell(given), written, "{given:?}");
        }
    }

    #[derive(Serialize)]
    struct Row<'a> {
        name: &'a str,
        value: Option<&'a str>,
        count: i64,
        bound: bool,
        tg_id: Option<u64>,
    }

    #[test]
    fn rows_have_a_header_and_safe_cells_in_field_order() {
        let mut rows = CsvRows::new(Vec::new());
        for row in [
            Row {
                name: "=1+1",
                value: Some("-3.50"),
                count: -2,
                bound: true,
                tg_id: None,
            },
            Row {
                name: "a,\"b\"",
                value: None,
                count: 3,
                bound: false,
                tg_id: Some(7),
            },
        ] {
            rows.row(&row).unwrap();
        }
        let text = String::from_utf8(rows.take_written().unwrap()).unwrap();
        assert_eq!(
            text,
            "name,value,count,bound,tg_id\n'=1+1,-3.50,-2,true,\n\"a,\"\"b\"\"\",,3,false,7\n"
        );
    }
}
