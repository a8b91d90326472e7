//! Where a command's result goes: its text for people, or with `--json` one JSON document, on
//! standard output. Each answer of a request is matched here to its command's text (`space.rs`,
//! `link.rs`, ...), so an answer without a text does not compile.

use std::io::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{admin, costs, data_file, destination, link, space, stats};
use crate::control::Answer;

/// Prints command results as text or JSON.
#[derive(Clone, Copy)]
pub(super) struct Output {
    pub(super) json: bool,
}

impl Output {
    /// Prints a request's answer, as JSON with `--json` (the answer's own fields, as the API
    /// gives them), else as text (with `base`, the public address, where a new space's lines use
    /// it; naming `dest`, where a backup went).
    pub(super) fn answer(self, answer: &Answer, base: &str, dest: Option<&Path>) {
        if self.json {
            self.print(&answer.json(), "");
            return;
        }
        let text = match answer {
            Answer::SpaceCreated(created) => space::created_text(created, base),
            Answer::Spaces(spaces) => space::list_text(spaces),
            Answer::SpaceSettings(set) => space::settings_set_text(set),
            Answer::Rotated(rotated) => space::rotated_text(rotated),
            Answer::Revoked(revoked) => space::revoked_text(revoked),
            // `check` prints its own report (`data_file::check`); an export page is data.
            Answer::Page(_) | Answer::Checked(_) => answer.json().to_string(),
            Answer::PasswordSet(_) => admin::PASSWORD_SET.to_owned(),
            Answer::LinkCreated(created) => link::created_text(created),
            Answer::Links(links) => link::list_text(links),
            Answer::LinkDeleted(deleted) => link::deleted_text(deleted),
            Answer::DestinationCreated(created) => destination::created_text(created),
            Answer::Destinations(list) => destination::list_text(list),
            Answer::DestinationDeleted(deleted) => destination::deleted_text(deleted),
            Answer::Deliveries(list) => destination::deliveries_text(list),
            Answer::Retried(retried) => destination::retried_text(retried),
            Answer::Stats(shown) => stats::table_text(shown),
            Answer::CostsImported(done) => costs::imported_text(done),
            Answer::BackedUp(done) => data_file::backed_up_text(done, dest),
        };
        write_line(&text);
    }

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
fn write_line(line: &str) {
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
