//! A request's answer on standard output: each [`Answer`] matched to its command's text
//! (`space.rs`, `link.rs`, ...), so an answer without a text does not compile.

use std::path::Path;

use super::output::{Output, write_line};
use super::{admin, costs, data_file, destination, link, space, stats, user};
use crate::control::Answer;

/// Prints a request's answer, as JSON with `--json` (the answer's own fields, as the API
/// gives them), else as text (with `base`, the public address, where a new space's lines use
/// it; naming `dest`, where a backup went).
pub(super) fn print(out: Output, answer: &Answer, base: &str, dest: Option<&Path>) {
    if out.json {
        out.print(&answer.json(), "");
        return;
    }
    let text = match answer {
        Answer::SpaceCreated(created) => space::created_text(created, base),
        Answer::Spaces(spaces) => space::list_text(spaces),
        Answer::SpaceSettings(set) => space::settings_set_text(set),
        Answer::Rotated(rotated) => space::rotated_text(rotated),
        Answer::Revoked(revoked) => space::revoked_text(revoked),
        // `check` prints its own report (`data_file::check`), and `import` its summary
        // (`import.rs`); an export page is data.
        Answer::Page(_) | Answer::Checked(_) | Answer::EventsImported(_) => {
            answer.json().to_string()
        }
        Answer::PasswordSet(_) => admin::PASSWORD_SET.to_owned(),
        Answer::LinkCreated(created) => link::created_text(created),
        Answer::Links(links) => link::list_text(links),
        Answer::LinkDeleted(deleted) => link::deleted_text(deleted),
        Answer::DestinationCreated(created) => destination::created_text(created),
        Answer::DestinationChanged(changed) => destination::changed_text(changed),
        Answer::Destinations(list) => destination::list_text(list),
        Answer::DestinationDeleted(deleted) => destination::deleted_text(deleted),
        Answer::Deliveries(list) => destination::deliveries_text(list),
        Answer::Retried(retried) => destination::retried_text(retried),
        Answer::Stats(shown) => stats::table_text(shown),
        Answer::CostsImported(done) => costs::imported_text(done),
        Answer::CostsFetched(done) => costs::fetched_text(done),
        Answer::BackedUp(done) => data_file::backed_up_text(done, dest),
        Answer::Invited(invited) => user::invited_text(invited),
        Answer::Users(users) => user::list_text(users),
        Answer::UserRemoved(removed) => user::removed_text(removed),
        Answer::UserChanged(changed) => user::changed_text(changed),
        Answer::SecondFactorRule(rule) => user::rule_text(*rule),
        Answer::Audit(entries) => user::audit_text(entries),
    };
    write_line(&text);
}
