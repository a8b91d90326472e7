//! The checks of the counters against what they count: the `stats` rollup (hour and day rows)
//! against a count of every click, binding and event by the writer's rule, and
//! `rejection_counts` past every stored rejection, and `cost_sums` against the costs.

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable};

use super::findings::{Checker, Finding};
use super::fixes::Fix;
use crate::domain::rejection::KEPT_PER_SPACE;
use crate::domain::stats::Counts;
use crate::storage::cost_sums;
use crate::storage::error::StoreError;
use crate::storage::records::{self, RejectionRecord};
use crate::storage::rollup::{self, RowKey};
use crate::storage::schema::{
    CLICKS, COST_SUMS, COSTS, INBOX, REJECTION_COUNTS, REJECTIONS, STATS,
};

pub(super) fn check_stats(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let mut unreadable = 0;
    let expected = rollup::count_all(&txn.open_table(CLICKS)?, &txn.open_table(INBOX)?, |_| {
        unreadable += 1;
        Ok(())
    })?;
    // Rebuilt without the records that do not decode, the rollup would forget what they
    // counted: then the difference is reported, and the rollup left as it is.
    let repairable = unreadable == 0;
    let mut want: BTreeMap<RowKey, Counts> = expected.rows().clone();
    let mut wrong = Vec::new();
    for entry in txn.open_table(STATS)?.iter()? {
        let (key, bytes) = entry?;
        let (space, dimension, group, at) = key.value();
        let row: RowKey = (space, dimension, group.to_owned(), at);
        let counted = want.remove(&row).unwrap_or_default();
        let stored = rollup::counts_in(bytes.value());
        match stored {
            Ok(stored) if same_counts(&stored, &counted) => {}
            Ok(stored) => wrong.push((
                row,
                format!(
                    "holds {} but the file counts {}",
                    show(&stored),
                    show(&counted)
                ),
            )),
            Err(e) => wrong.push((
                row,
                format!("{e} (it is rebuilt from the clicks and events)"),
            )),
        }
    }
    for (row, counted) in want {
        if counted != Counts::default() {
            wrong.push((
                row,
                format!("is missing; the file counts {}", show(&counted)),
            ));
        }
    }
    let any = !wrong.is_empty();
    for ((space, dimension, group, at), problem) in wrong {
        let (unit, dimension) = if dimension & rollup::DAY_ROWS != 0 {
            ("day", dimension & !rollup::DAY_ROWS)
        } else if dimension & rollup::BLOCK_ROWS != 0 {
            ("block", dimension & !rollup::BLOCK_ROWS)
        } else {
            ("quarter", dimension)
        };
        c.findings.push(Finding {
            table: "stats".into(),
            key: format!("space {space}, dimension {dimension}, group {group:?}, {unit} {at}"),
            problem: if repairable {
                format!("the {unit} row {problem}")
            } else {
                format!(
                    "the {unit} row {problem}; {unreadable} click or event record(s) do not \
                     decode, so it is not rebuilt"
                )
            },
            repairable,
        });
    }
    if any && repairable {
        c.fixes.push(Fix::RebuildStats);
    }
    Ok(())
}

/// Each row of `cost_sums` against the sum of the costs it covers; a wrong, missing or stray
/// row is rebuilt from the costs.
pub(super) fn check_cost_sums(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let mut want = cost_sums::all_sums(&txn.open_table(COSTS)?)?;
    let mut wrong = Vec::new();
    for entry in txn.open_table(COST_SUMS)?.iter()? {
        let (key, bytes) = entry?;
        let (space, code, period, campaign) = key.value();
        let row = (space, code, period, campaign.to_owned());
        let counted = want.remove(&row).unwrap_or_default();
        match cost_sums::stored(bytes.value()) {
            Ok(stored) if stored == counted => {}
            Ok(stored) => wrong.push((
                row,
                format!(
                    "holds {} but the costs add up to {}",
                    show_sums(&stored),
                    show_sums(&counted)
                ),
            )),
            Err(e) => wrong.push((row, e.to_string())),
        }
    }
    for (row, counted) in want {
        wrong.push((
            row,
            format!("is missing; the costs add up to {}", show_sums(&counted)),
        ));
    }
    let any = !wrong.is_empty();
    for ((space, code, period, campaign), problem) in wrong {
        c.findings.push(Finding {
            table: "cost_sums".into(),
            key: format!("space {space}, level {code:#x}, period {period}, campaign {campaign:?}"),
            problem: format!("the sum {problem} (it is rebuilt from the costs)"),
            repairable: true,
        });
    }
    if any {
        c.fixes.push(Fix::RebuildCostSums);
    }
    Ok(())
}

/// Sums by currency as `12.50 USD, 1 EUR`, or `nothing`.
fn show_sums(sums: &cost_sums::Sums) -> String {
    if sums.is_empty() {
        return "nothing".into();
    }
    let each: Vec<String> = sums.iter().map(|(c, s)| format!("{s} {c}")).collect();
    each.join(", ")
}

pub(super) fn check_rejections(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let counts = txn.open_table(REJECTION_COUNTS)?;
    let mut needed: BTreeMap<u32, u64> = BTreeMap::new();
    for entry in txn.open_table(REJECTIONS)?.iter()? {
        let (key, bytes) = entry?;
        let (space, slot) = key.value();
        let at = format!("space {space}, slot {slot}");
        match records::decode::<RejectionRecord>(bytes.value()) {
            Ok(r) => {
                if r.number % u64::from(KEPT_PER_SPACE) != u64::from(slot) {
                    c.damaged(
                        "rejections",
                        &at,
                        format!("rejection number {} is in the wrong slot", r.number),
                    );
                }
                let n = needed.entry(space).or_default();
                *n = (*n).max(r.number + 1);
            }
            Err(e) => c.damaged("rejections", &at, e.to_string()),
        }
    }
    for (space, n) in needed {
        let stored = counts.get(space)?.map_or(0, |v| v.value());
        if stored < n {
            c.derivable(
                "rejection_counts",
                format!("space {space}"),
                format!("counts {stored} rejections but rejection number {} is stored: the next one would overwrite a newer one", n - 1),
                Fix::SetRejectionCount(space, n),
            );
        }
    }
    Ok(())
}

/// Counts equal, deposit sums compared by value (`14` and `14.00` are one sum).
fn same_counts(a: &Counts, b: &Counts) -> bool {
    let sums = |c: &Counts| -> BTreeMap<String, String> {
        c.deposits
            .iter()
            .map(|(k, v)| (k.clone(), v.normalized().to_string()))
            .collect()
    };
    a.clicks == b.clicks
        && a.bound_clicks == b.bound_clicks
        && a.events == b.events
        && sums(a) == sums(b)
}

fn show(c: &Counts) -> String {
    let deposits: Vec<String> = c.deposits.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{} clicks, {} bound, events {:?}, deposits [{}]",
        c.clicks,
        c.bound_clicks,
        c.events,
        deposits.join(", ")
    )
}
