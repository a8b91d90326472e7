//! The stats' money in one currency, the space's reporting currency
//! (`docs/api.md#reporting-currency`): a group's revenue and cost converted, each stretch of
//! days at the rates in force on it (`domain::rate_history`, through the one conversion of
//! `domain::currency`), the return, cost per first deposit and revenue per click that follow
//! from them, and every currency no rate converts, named with where to add its rate. An amount
//! without a rate is never counted as nothing: what it would change is left blank and said why.

use std::collections::BTreeMap;

use crate::domain::cost::Day;
use crate::domain::currency::CurrencyRates;
use crate::domain::decimal::Decimal;
use crate::domain::rate_history::RateHistory;
use jiff::tz::TimeZone;

use crate::domain::stats::{self, GroupStats, RATIO_PLACES, Reported, ReportedSums};

/// Decimal places of a converted sum as shown: a cent of most currencies. The return and the
/// prices are computed from the sums before they are rounded.
const MONEY_PLACES: u8 = 2;

/// What a space's stats convert to: its reporting currency and its rates over time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reporting {
    pub currency: String,
    pub history: RateHistory,
}

impl Reporting {
    /// The rates that convert `day`'s money into the reporting currency.
    #[must_use]
    pub fn rates_on(&self, day: Day) -> CurrencyRates {
        self.history.on(day, &self.currency)
    }

    /// The stretches of the quarters `[from, to)` that each have one set of rates, in `zone`:
    /// the first day of each, whose rates convert it, and its quarters. None for no quarters.
    #[must_use]
    pub fn stretches(&self, (from, to): (u32, u32), zone: &TimeZone) -> Vec<(Day, (u32, u32))> {
        if from >= to {
            return Vec::new();
        }
        let first = stats::local_day(zone, from);
        let changes = self
            .history
            .changes_within(first, stats::local_day(zone, to - 1));
        let starts: Vec<(Day, u32)> = std::iter::once((first, from))
            .chain(changes.into_iter().map(|d| (d, stats::day_start(zone, d))))
            .collect();
        let ends = starts.iter().skip(1).map(|(_, q)| *q).chain([to]);
        starts
            .iter()
            .zip(ends)
            .map(|(&(day, start), end)| (day, (start, end)))
            .collect()
    }

    /// The day whose rates convert the quarters `[from, to)` when they have one set: their
    /// first; for no quarters, today's.
    #[must_use]
    pub fn first_day(&self, (from, to): (u32, u32), zone: &TimeZone) -> Day {
        if from < to {
            stats::local_day(zone, from)
        } else {
            Day::MAX
        }
    }

    /// `group`'s money in the reporting currency, from its `parts`: the group's stats over
    /// stretches of days that together make its range, each with the first day of its
    /// stretch, whose rates convert it.
    #[must_use]
    pub fn report(&self, group: &GroupStats, parts: &[(Day, &GroupStats)]) -> Reported {
        let mut missing = Vec::new();
        let mut revenue = Some(Decimal::zero());
        let mut cost = Some(Decimal::zero());
        for (day, part) in parts {
            let rates = self.rates_on(*day);
            let earned = sum(&rates, &self.currency, &part.deposits, &mut missing);
            let spent = sum(&rates, &self.currency, &part.cost, &mut missing);
            revenue = revenue.zip(earned).and_then(|(a, b)| a.checked_add(b));
            cost = cost.zip(spent).and_then(|(a, b)| a.checked_add(b));
        }
        self.finish(group, ReportedSums { revenue, cost }, missing)
    }

    /// `group`'s money with all of it at the rates in force now (a group whose days all have
    /// today's rates).
    #[must_use]
    pub fn report_now(&self, group: &GroupStats) -> Reported {
        self.report(group, &[(Day::MAX, group)])
    }

    /// The money of `total`, the sum of `groups`, from theirs: each group's days at their own
    /// rates, as they were reported (a group not yet reported at the rates in force now).
    #[must_use]
    pub fn report_total(&self, total: &GroupStats, groups: &[GroupStats]) -> Reported {
        let mut missing = Vec::new();
        let mut sums = ReportedSums {
            revenue: Some(Decimal::zero()),
            cost: Some(Decimal::zero()),
        };
        for g in groups {
            let reported = g.reported.clone().unwrap_or_else(|| self.report_now(g));
            let add = |a: Option<Decimal>, b: Option<Decimal>| {
                a.zip(b).and_then(|(a, b)| a.checked_add(b))
            };
            sums.revenue = add(sums.revenue, reported.sums.revenue);
            sums.cost = add(sums.cost, reported.sums.cost);
            missing.extend(reported.missing_rates);
        }
        self.finish(total, sums, missing)
    }

    /// The reported money of `group` from its converted sums.
    fn finish(&self, group: &GroupStats, sums: ReportedSums, mut missing: Vec<String>) -> Reported {
        missing.sort();
        missing.dedup();
        // No deposits is a revenue of zero for the return, and none to show.
        let revenue = sums.revenue;
        let cost = sums.cost.filter(|_| !group.cost.is_empty());
        let count = |n: u64| Decimal::parse(&n.to_string()).ok();
        let roi = match (revenue, cost) {
            (Some(earned), Some(spent)) => earned
                .checked_sub(spent)
                .and_then(|gain| gain.ratio(spent, RATIO_PLACES)),
            _ => None,
        };
        let cpa = cost.and_then(|c| c.ratio(count(group.first_deposits)?, RATIO_PLACES));
        let epc = revenue
            .filter(|_| !group.deposits.is_empty())
            .and_then(|r| r.ratio(count(group.clicks)?, RATIO_PLACES));
        let shown = |d: Option<Decimal>| {
            d.and_then(|d| d.ratio(Decimal::one(), MONEY_PLACES))
                .map(|d| d.to_string())
        };
        Reported {
            revenue: shown(revenue.filter(|_| !group.deposits.is_empty())),
            cost: shown(cost),
            roi: roi.map(|r| r.to_string()),
            cpa: cpa.map(|c| c.to_string()),
            epc: epc.map(|e| e.to_string()),
            fix: fix(&missing, &self.currency),
            missing_rates: missing,
            currency: self.currency.clone(),
            sums,
        }
    }
}

/// The sum of `amounts` (currency → decimal text) in `to` at `rates`; `None` when one has no
/// rate (added to `missing`) or the sum is too large.
fn sum(
    rates: &CurrencyRates,
    to: &str,
    amounts: &BTreeMap<String, String>,
    missing: &mut Vec<String>,
) -> Option<Decimal> {
    let mut total = Some(Decimal::zero());
    for (currency, text) in amounts {
        let converted = Decimal::parse(text)
            .ok()
            .and_then(|amount| rates.convert(amount, currency, to));
        if converted.is_none() {
            missing.push(currency.clone());
        }
        total = total.zip(converted).and_then(|(t, c)| t.checked_add(c));
    }
    total
}

/// The sentence that names the currencies `missing` a rate into `to` and where to add one;
/// `None` when none is.
#[must_use]
pub fn fix(missing: &[String], to: &str) -> Option<String> {
    let first = missing.first()?;
    Some(format!(
        "no rate for {} into {to}: Settings -> currency rates (such as {first}=1.00 {to}), \
         or fix the currency the events were sent with",
        missing.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stats::Counts;

    fn reporting(rates: &[(&str, &str)]) -> Reporting {
        let rates = rates
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        let rates = CurrencyRates::parse_for_reporting(&rates).unwrap();
        Reporting {
            currency: "USD".into(),
            history: RateHistory::new(vec![(0, rates)], vec![]),
        }
    }

    fn group(deposits: &[(&str, &str)], cost: &[(&str, &str)]) -> GroupStats {
        let money = |pairs: &[(&str, &str)]| -> BTreeMap<String, Decimal> {
            pairs
                .iter()
                .map(|(c, v)| ((*c).to_owned(), Decimal::parse(v).unwrap()))
                .collect()
        };
        let counts = Counts {
            clicks: 40,
            first_deposits: 4,
            deposits: money(deposits),
            ..Counts::default()
        };
        GroupStats::new(None, &counts, &money(cost))
    }

    /// Deposits in EUR, USD and XTR and costs in USD: one revenue, one return, one price.
    #[test]
    fn mixed_currencies_make_one_return_in_the_reporting_currency() {
        let r = reporting(&[("EUR", "1.08 USD"), ("XTR", "0.013 USD")]);
        let g = group(
            &[("EUR", "100"), ("USD", "50.50"), ("XTR", "1000")],
            &[("USD", "100")],
        );
        let shown = r.report_now(&g);
        assert_eq!(shown.revenue.as_deref(), Some("171.50"), "108 + 50.50 + 13");
        assert_eq!(shown.cost.as_deref(), Some("100.00"));
        assert_eq!(shown.roi.as_deref(), Some("0.7150"));
        assert_eq!(shown.cpa.as_deref(), Some("25.0000"));
        assert_eq!(shown.epc.as_deref(), Some("4.2875"));
        assert!(shown.missing_rates.is_empty() && shown.fix.is_none());
    }

    /// A currency without a rate is named with its fix, and what it would change is blank,
    /// never a total that silently left it out.
    #[test]
    fn a_currency_without_a_rate_is_named_with_its_fix() {
        let r = reporting(&[("EUR", "1.08 USD")]);
        let shown = r.report_now(&group(&[("EUR", "10"), ("RUBLES", "500")], &[("USD", "5")]));
        assert_eq!(shown.missing_rates, ["RUBLES"]);
        let fix = shown.fix.unwrap();
        assert!(
            fix.starts_with("no rate for RUBLES into USD: Settings -> currency rates"),
            "{fix}"
        );
        assert_eq!((shown.revenue, shown.roi, shown.epc), (None, None, None));
        assert_eq!(shown.cost.as_deref(), Some("5.00"));
        assert_eq!(shown.cpa.as_deref(), Some("1.2500"), "the cost converted");
    }

    /// Spent and nothing earned is a return of -100%; nothing spent has none; nothing at all
    /// is no revenue to show per click.
    #[test]
    fn a_return_needs_a_cost_and_a_price_needs_its_count() {
        let r = reporting(&[]);
        assert_eq!(
            r.report_now(&group(&[], &[("USD", "5")])).roi.as_deref(),
            Some("-1.0000")
        );
        let earned = r.report_now(&group(&[("USD", "5")], &[]));
        assert_eq!((earned.roi, earned.cost, earned.cpa), (None, None, None));
        assert_eq!(earned.revenue.as_deref(), Some("5.00"));
        let nothing = r.report_now(&group(&[], &[]));
        assert_eq!((nothing.revenue, nothing.epc), (None, None));
    }
}
