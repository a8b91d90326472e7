//! A split link's figures by variant (`GET /stats?by=variant&link=SLUG`): each target's counts
//! and stats, its rates per click, and whether each rate's difference from the best variant's
//! is significant at 95% (a two-proportion z-test), or not yet.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::event::EventKind;
use crate::domain::split::TargetView;
use crate::domain::stats::{Counts, GroupStats};

/// The rates a split compares, each a share of the variant's clicks: bound (or joined), each
/// event kind, and first deposits.
pub const COMPARED: [&str; 6] = [
    "bound",
    "contact",
    "subscribed",
    "registration",
    "deposit",
    "first_deposit",
];

/// |z| beyond which a difference is significant at 95%, two-sided.
const Z_95: f64 = 1.959_964;

/// One variant of a split link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariantStats {
    /// The variant: the target's place in `targets`, from 0.
    pub variant: u8,
    /// The target, its weight and health.
    pub target: TargetView,
    /// Its counts and what follows from them, as a `GET /stats` group (its `group` the
    /// target's name).
    pub stats: GroupStats,
    /// Each compared rate ([`COMPARED`]): what share of its clicks got there, to 4 places.
    pub per_click: BTreeMap<String, String>,
    /// Each compared rate: `best` (the highest of the variants), `significant` (below the
    /// best's, and a two-proportion z-test says so at 95%), or `not_yet` (the difference may be
    /// chance so far).
    pub significance: BTreeMap<String, String>,
}

/// The successes of each compared rate out of `counts.clicks`, none above the clicks (an
/// event kind may come more than once per click).
fn successes(counts: &Counts) -> [u64; 6] {
    let kind = |k: EventKind| counts.events[k as usize - 1];
    [
        counts.bound_clicks + counts.joins,
        kind(EventKind::Contact),
        kind(EventKind::Subscribed),
        kind(EventKind::Registration),
        kind(EventKind::Deposit),
        counts.first_deposits,
    ]
    .map(|n| n.min(counts.clicks))
}

/// Whether `x1 / n1` and `x2 / n2` differ significantly at 95%: the two-proportion z-test
/// with the pooled proportion. Never with a variant of no clicks, or when neither had any.
#[must_use]
pub fn significant(x1: u64, n1: u64, x2: u64, n2: u64) -> bool {
    if n1 == 0 || n2 == 0 {
        return false;
    }
    #[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
    let (x1, n1, x2, n2) = (x1 as f64, n1 as f64, x2 as f64, n2 as f64);
    let pooled = (x1 + x2) / (n1 + n2);
    let spread = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    spread > 0.0 && ((x1 / n1 - x2 / n2) / spread).abs() > Z_95
}

/// The variants' figures from each one's target and counts, in variant order.
#[must_use]
pub fn compare(variants: &[(TargetView, Counts)]) -> Vec<VariantStats> {
    let rates: Vec<[u64; 6]> = variants.iter().map(|(_, c)| successes(c)).collect();
    let share = |x: u64, n: u64| {
        #[allow(clippy::cast_precision_loss)]
        let r = if n == 0 { 0.0 } else { x as f64 / n as f64 };
        r
    };
    variants
        .iter()
        .enumerate()
        .map(|(i, (target, counts))| {
            let mut per_click = BTreeMap::new();
            let mut significance = BTreeMap::new();
            for (r, name) in COMPARED.iter().enumerate() {
                let mine = (rates[i][r], counts.clicks);
                let best = (0..variants.len())
                    .max_by(|a, b| {
                        share(rates[*a][r], variants[*a].1.clicks)
                            .total_cmp(&share(rates[*b][r], variants[*b].1.clicks))
                    })
                    .unwrap_or(i);
                let best_n = (rates[best][r], variants[best].1.clicks);
                let verdict = if share(mine.0, mine.1) >= share(best_n.0, best_n.1) {
                    "best"
                } else if significant(mine.0, mine.1, best_n.0, best_n.1) {
                    "significant"
                } else {
                    "not_yet"
                };
                if counts.clicks > 0 {
                    per_click.insert((*name).to_owned(), format!("{:.4}", share(mine.0, mine.1)));
                }
                significance.insert((*name).to_owned(), verdict.to_owned());
            }
            VariantStats {
                variant: u8::try_from(i).unwrap_or(u8::MAX),
                stats: GroupStats::new(Some(target.label()), counts, &BTreeMap::new()),
                target: target.clone(),
                per_click,
                significance,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Textbook figures: 200 of 1000 against 250 of 1000 gives z = 2.68 (significant); 20 of
    /// 100 against 25 of 100 gives z = 0.85 (not yet).
    #[test]
    fn the_z_test_tells_a_real_difference_from_chance() {
        assert!(significant(200, 1000, 250, 1000));
        assert!(!significant(20, 100, 25, 100));
        // Just either side of 1.96: 100 of 1000 against 127 and 128 of 1000.
        assert!(!significant(100, 1000, 127, 1000));
        assert!(significant(100, 1000, 128, 1000));
        assert!(!significant(0, 0, 5, 10));
        assert!(!significant(0, 10, 0, 10));
    }

    #[test]
    fn each_rate_is_judged_against_the_best_variant() {
        let counts = |clicks, bound| Counts {
            clicks,
            bound_clicks: bound,
            ..Counts::default()
        };
        let target = |bot: &str| TargetView {
            bot: Some(bot.into()),
            ..TargetView::default()
        };
        let got = compare(&[
            (target("a_bot"), counts(1000, 250)),
            (target("b_bot"), counts(1000, 200)),
            (target("c_bot"), counts(100, 20)),
        ]);
        let verdict = |i: usize| got[i].significance["bound"].as_str();
        assert_eq!(
            (verdict(0), verdict(1), verdict(2)),
            ("best", "significant", "not_yet")
        );
        assert_eq!(got[1].per_click["bound"], "0.2000");
        assert_eq!(got[0].stats.group.as_deref(), Some("@a_bot"));
    }
}
