//! Where a command's result goes: its text for people, or with `--json` one JSON document, on
//! standard output; what every command's printing shares, below them all.
//!
//! Text for people passes through [`visible`] on its way out: a space name, a campaign from a
//! visitor's link or a destination's error may hold control characters, and printed as they
//! are they would move the cursor, clear the screen or retitle the terminal of whoever runs
//! the command. JSON needs no such care: its strings are escaped by the encoder.

use std::io::Write as _;
use std::path::Path;

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
/// is not the command's failure). Control characters in it are shown escaped ([`visible`]).
pub(super) fn write_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", visible(line));
    let _ = stdout.flush();
}

/// `text` with every control character but the newline shown as its escape (`\u{1b}`): C0
/// (tab and carriage return too, which can hide what is before them), DEL and C1. What every
/// line of text the command line prints for people goes through.
#[must_use]
pub(super) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
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

/// A new file at `path`, its owner's alone (`0600`), never one that is there already nor
/// through a link someone put at that name (`O_EXCL`, `O_NOFOLLOW`).
pub(super) fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0))
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            visible("plain text\nsecond line"),
            "plain text\nsecond line"
        );
        assert_eq!(visible("caf\u{e9} \u{1f600}"), "caf\u{e9} \u{1f600}");
        assert_eq!(visible("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(visible("\u{0}\t\r"), "\\u{0}\\u{9}\\u{d}");
        assert_eq!(visible("del\u{7f}"), "del\\u{7f}");
        assert_eq!(visible("c1\u{9b}2J\u{85}"), "c1\\u{9b}2J\\u{85}");
        // Just outside: the first characters after C1 are printed as they are.
        assert_eq!(visible("\u{a0}\u{a1}"), "\u{a0}\u{a1}");
    }
}
