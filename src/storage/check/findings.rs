//! What `tracker check` finds and what it keeps to repair: a [`Finding`] per thing wrong, the
//! [`Report`] both ways in answer with, and the [`Checker`] every check of a table adds its
//! findings (and the fixes of the derivable ones) to.

use serde::{Deserialize, Serialize};

use super::fixes::Fix;

/// One thing wrong, in plain words, with the table and key where it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Finding {
    pub table: String,
    pub key: String,
    pub problem: String,
    /// Whether `--repair` can fix it (it is derived from other rows).
    pub repairable: bool,
}

/// What `tracker check` found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// redb's page check: `Some(true)` passed, `Some(false)` failed and redb repaired it, `None`
    /// not run (through a running server, which shares the file; see docs/backups.md).
    pub redb_integrity: Option<bool>,
    /// The rows of every table, counted as `tracker backup` counts what it copies
    /// (`schema::count_rows`), so the two agree about the same file.
    pub rows: u64,
    pub findings: Vec<Finding>,
    /// Findings fixed by `--repair` (then `findings` is what a second check found).
    pub repaired: Vec<Finding>,
}

impl Report {
    #[must_use]
    pub fn clean(&self) -> bool {
        self.findings.is_empty() && self.redb_integrity != Some(false)
    }
}

/// One run of the checks: the rows it counted, what it found, and the fixes of the derivable
/// findings, in the order found.
#[derive(Default)]
pub(super) struct Checker {
    pub(super) rows: u64,
    pub(super) findings: Vec<Finding>,
    pub(super) fixes: Vec<Fix>,
}

impl Checker {
    pub(super) fn damaged(
        &mut self,
        table: &str,
        key: impl Into<String>,
        problem: impl Into<String>,
    ) {
        self.findings.push(Finding {
            table: table.to_owned(),
            key: key.into(),
            problem: problem.into(),
            repairable: false,
        });
    }

    pub(super) fn derivable(
        &mut self,
        table: &str,
        key: impl Into<String>,
        problem: impl Into<String>,
        fix: Fix,
    ) {
        self.findings.push(Finding {
            table: table.to_owned(),
            key: key.into(),
            problem: problem.into(),
            repairable: true,
        });
        self.fixes.push(fix);
    }
}
