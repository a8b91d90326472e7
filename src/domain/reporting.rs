//! The stats' money in one currency, the space's reporting currency
//! (`docs/api.md#reporting-currency`): a group's revenue and cost converted by the space's
//! rates (the one conversion of `domain::currency`), the return, cost per first deposit and
//! revenue per click that follow from them, and every currency no rate converts, named with
//! where to add its rate. An amount without a rate is never counted as nothing: what it would
//! change is left blank and said why.

use std::collections::BTreeMap;

use crate::domain::currency::CurrencyRates;
use crate::domain::decimal::Decimal;
use crate::domain::stats::{GroupStats, RATIO_PLACES, Reported};

/// Decimal places of a converted sum as shown: a cent of most currencies. The return and the
/// prices are computed from the sums before they are rounded.
const MONEY_PLACES: u8 = 2;

/// What a space's stats convert to: its reporting currency and its rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reporting {
    pub currency: String,
    pub rates: CurrencyRates,
}

impl Reporting {
    /// `group`'s money in the reporting currency.
    #[must_use]
    pub fn report(&self, group: &GroupStats) -> Reported {
        let mut missing = Vec::new();
        // No deposits is a revenue of zero for the return, and none to show.
        let revenue = self.sum(&group.deposits, &mut missing);
        let cost = self
            .sum(&group.cost, &mut missing)
            .filter(|_| !group.cost.is_empty());
        missing.sort();
        missing.dedup();
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
            fix: self.fix(&missing),
            missing_rates: missing,
            currency: self.currency.clone(),
        }
    }

    /// The sum of `amounts` (currency → decimal text) in the reporting currency; `None` when
    /// one has no rate (added to `missing`) or the sum is too large.
    fn sum(
        &self,
        amounts: &BTreeMap<String, String>,
        missing: &mut Vec<String>,
    ) -> Option<Decimal> {
        let mut total = Some(Decimal::zero());
        for (currency, text) in amounts {
            let converted = Decimal::parse(text)
                .ok()
                .and_then(|amount| self.rates.convert(amount, currency, &self.currency));
            if converted.is_none() {
                missing.push(currency.clone());
            }
            total = total.zip(converted).and_then(|(t, c)| t.checked_add(c));
        }
        total
    }

    /// The sentence that names the currencies without a rate and where to add one.
    fn fix(&self, missing: &[String]) -> Option<String> {
        fix(missing, &self.currency)
    }
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
        Reporting {
            currency: "USD".into(),
            rates: CurrencyRates::parse_for_reporting(&rates).unwrap(),
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
        let shown = r.report(&g);
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
        let shown = r.report(&group(&[("EUR", "10"), ("RUBLES", "500")], &[("USD", "5")]));
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
            r.report(&group(&[], &[("USD", "5")])).roi.as_deref(),
            Some("-1.0000")
        );
        let earned = r.report(&group(&[("USD", "5")], &[]));
        assert_eq!((earned.roi, earned.cost, earned.cpa), (None, None, None));
        assert_eq!(earned.revenue.as_deref(), Some("5.00"));
        let nothing = r.report(&group(&[], &[]));
        assert_eq!((nothing.revenue, nothing.epc), (None, None));
    }
}
