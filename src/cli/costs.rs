//! The answer of `tracker costs import` as text: what the import did, in a sentence.

use crate::control::CostsImported;

pub(super) fn imported_text(done: &CostsImported) -> String {
    if done.summary.is_empty() {
        // A server from before the summary answered only these two.
        format!("{} cost(s) set, {} removed", done.set, done.removed)
    } else {
        done.summary.clone()
    }
}
