//! Where a command's result goes: its text for people, or with `--json` one JSON document, on
//! standard output; what every command's printing shares, below them all.

use std::io::Write as _;

use serde::Serialize;

/// What a command comes to: done, or an error its message says.
pub(super) type CliResult = Result<(), Box<dyn std::error::Error>>;

/// Prints command results as text or JSON.
#[derive(Clone, Copy)]
pub(super) struct Output {
    pub(super) json: bool,
}

impl Output {
    /// Prints `value` as JSON with `--json`, else `text`.
    pub(super) fn print<T: Serialize>(self, value: &T, text: &str) {
        if self.json {
            write_line(&serde_json::to_string(value).unwrap_or_default());
        } else {
            write_line(text);
        }
    }
}

/// `line` and a newline on standard output, flushed (a failed write, such as a closed pipe,
/// is not the command's failure).
pub(super) fn write_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// A list answer as text: what `item` writes for each, or `none` when there are none, without
/// the last newline.
pub(super) fn list_text<T>(items: &[T], none: &str, item: impl Fn(&mut String, &T)) -> String {
    let mut text = String::new();
    for each in items {
        item(&mut text, each);
    }
    if items.is_empty() {
        text.push_str(none);
    }
    text.trim_end().to_owned()
}
