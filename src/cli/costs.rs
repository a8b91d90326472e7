//! The answers of `tracker costs import` and `tracker costs fetch` as text: what the import or
//! the fetch did, in a sentence.

use crate::control::{CostsFetched, CostsImported};

pub(super) fn fetched_text(done: &CostsFetched) -> String {
    format!(
        "space {}: spend from Meta: {}",
        done.space, done.fetch.summary
    )
}

pub(super) fn imported_text(done: &CostsImported) -> String {
    if done.summary.is_empty() {
        // A server from before the summary answered only these two.
        format!("{} cost(s) set, {} removed", done.set, done.removed)
    } else {
        done.summary.clone()
    }
}
