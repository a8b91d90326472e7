//! A space's currency rates over time (`docs/api.md#reporting-currency`): each set takes effect
//! on a day of the space's zone and holds until the next, so a rate changed today leaves the
//! days before it at the rates they had; a day before the first set has the first set's rates.
//! Two histories: the rates typed as the space's `currency_rates`, and the ECB's reference
//! rates it fetches (`domain::ecb`); on any day a typed rate wins over the ECB's.
//! [`RateHistory::on`] is the one answer to "which rates convert day D into currency C".

use crate::domain::cost::Day;
use crate::domain::currency::CurrencyRates;
use crate::domain::ecb::EcbRates;

/// Where a set of rates came from: typed, or fetched from the ECB. Its byte is how storage
/// keeps it apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateSource {
    Typed = 0,
    Ecb = 1,
}

/// A space's sets of rates, each with the day it took effect, in order of day.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateHistory {
    typed: Vec<(Day, CurrencyRates)>,
    ecb: Vec<(Day, EcbRates)>,
}

impl RateHistory {
    /// The history of the sets given, in any order; a day holds one set of each source.
    #[must_use]
    pub fn new(mut typed: Vec<(Day, CurrencyRates)>, mut ecb: Vec<(Day, EcbRates)>) -> Self {
        typed.sort_by_key(|(day, _)| *day);
        ecb.sort_by_key(|(day, _)| *day);
        RateHistory { typed, ecb }
    }

    /// The rates that convert `day`'s money into `reporting`: the ECB's of that day crossed
    /// into `reporting`, and over them the typed ones. A typed rate wins for its currency,
    /// and for its pair: `EUR=1.08 USD` typed is the rate between EUR and USD whichever way.
    #[must_use]
    pub fn on(&self, day: Day, reporting: &str) -> CurrencyRates {
        let typed = in_force(&self.typed, day).cloned().unwrap_or_default();
        let Some(ecb) = in_force(&self.ecb, day) else {
            return typed;
        };
        let mut crossed = ecb.crossed_into(reporting);
        let typed_pair_into = |c: &str| typed.0.get(reporting).is_some_and(|r| r.to == c);
        crossed.0.retain(|c, _| !typed_pair_into(c));
        typed.over(&crossed)
    }

    /// The days in `(first, last]` on which a set takes effect: where the rates of a range of
    /// days may change.
    #[must_use]
    pub fn changes_within(&self, first: Day, last: Day) -> Vec<Day> {
        let days = self.typed.iter().map(|(d, _)| *d);
        let mut changes: Vec<Day> = days
            .chain(self.ecb.iter().map(|(d, _)| *d))
            .filter(|d| *d > first && *d <= last)
            .collect();
        changes.sort_unstable();
        changes.dedup();
        changes
    }

    /// The day of the newest ECB set, if the space has one.
    #[must_use]
    pub fn last_ecb_day(&self) -> Option<Day> {
        self.ecb.last().map(|(day, _)| *day)
    }
}

/// The set in force on `day`: the last that took effect on or before it, or the first when
/// `day` is before every set.
fn in_force<T>(sets: &[(Day, T)], day: Day) -> Option<&T> {
    let after = sets.partition_point(|(d, _)| *d <= day);
    sets.get(after.saturating_sub(1)).map(|(_, set)| set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> CurrencyRates {
        CurrencyRates::from_text(text).unwrap()
    }

    fn ecb(text: &str) -> EcbRates {
        EcbRates::from_text(text).unwrap()
    }

    /// A day takes the set in force that day; a day before the first set takes the first.
    #[test]
    fn each_day_has_the_rates_in_force_on_it() {
        let h = RateHistory::new(
            vec![(20, typed("EUR=1.20 USD")), (10, typed("EUR=1.10 USD"))],
            vec![],
        );
        let eur = |day| h.on(day, "USD").shown()["EUR"].clone();
        assert_eq!(eur(5), "1.10 USD", "before the first set");
        assert_eq!(eur(10), "1.10 USD");
        assert_eq!(eur(19), "1.10 USD");
        assert_eq!(eur(20), "1.20 USD", "the day it was set");
        assert_eq!(eur(Day::MAX), "1.20 USD");
        assert_eq!(h.changes_within(10, 20), vec![20]);
        assert_eq!(h.changes_within(9, 19), vec![10]);
        assert!(h.changes_within(20, 30).is_empty());
        assert!(RateHistory::default().on(3, "USD").0.is_empty());
    }

    /// The ECB's rates fill in what was not typed; a typed rate wins for its currency and its
    /// pair.
    #[test]
    fn a_typed_rate_wins_over_the_ecbs() {
        let h = RateHistory::new(
            vec![(0, typed("GBP=1.30 USD, XTR=0.013 USD"))],
            vec![
                (3, ecb("GBP=0.8, USD=1.0812")),
                (4, ecb("GBP=0.8, USD=1.2")),
            ],
        );
        let on = |day| h.on(day, "USD").shown();
        assert_eq!(on(3)["GBP"], "1.30 USD", "typed");
        assert_eq!(on(3)["EUR"], "1.0812 USD", "the ECB's");
        assert_eq!(on(4)["EUR"], "1.2 USD", "the next day's");
        assert_eq!(on(1)["EUR"], "1.0812 USD", "before the first: the first");
        let pair = RateHistory::new(
            vec![(0, typed("USD=0.90 EUR"))],
            vec![(0, ecb("USD=1.0812"))],
        );
        let into_usd = pair.on(0, "USD");
        assert!(
            !into_usd.0.contains_key("EUR"),
            "the typed pair converts EUR to USD"
        );
        assert_eq!(pair.changes_within(0, 9), Vec::<Day>::new());
    }
}
