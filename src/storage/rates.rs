//! A space's currency rates by the day they took effect (`CURRENCY_RATES`): a set written, and
//! the space's whole history read, typed and ECB sets apart (`domain::rate_history`).

use redb::ReadableTable as _;

use crate::domain::cost::Day;
use crate::domain::currency::CurrencyRates;
use crate::domain::ecb::EcbRates;
use crate::domain::rate_history::{RateHistory, RateSource};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::schema::CURRENCY_RATES;

impl Txn<'_> {
    /// Keeps `rates` (their text) as `space`'s set of `source` from `day` on, in place of one
    /// of that day. The same rates as the set in force on `day` (none for no rates) are no
    /// new set: a form saved again with its rates as they were adds no change of rates.
    pub fn record_rates(
        &mut self,
        space: u32,
        source: RateSource,
        day: Day,
        rates: &str,
    ) -> Result<(), StoreError> {
        let mut table = self.transaction.open_table(CURRENCY_RATES)?;
        let in_force = table
            .range((space, source as u8, 0)..=(space, source as u8, day))?
            .next_back()
            .transpose()?
            .map(|(_, set)| set.value().to_owned());
        if in_force.as_deref().unwrap_or("") != rates {
            table.insert((space, source as u8, day), rates)?;
        }
        Ok(())
    }
}

impl Snapshot {
    /// Every set of rates `space` has had, typed and from the ECB.
    pub fn rate_history(&self, space: u32) -> Result<RateHistory, StoreError> {
        let table = self.txn().open_table(CURRENCY_RATES)?;
        let corrupt = |day: Day| {
            StoreError::Corrupt(format!(
                "the currency rates of space {space} from day {day}"
            ))
        };
        let mut typed = Vec::new();
        let mut ecb = Vec::new();
        for entry in table.range((space, 0, 0)..=(space, u8::MAX, Day::MAX))? {
            let (key, text) = entry?;
            let (_, source, day) = key.value();
            let text = text.value();
            if source == RateSource::Typed as u8 {
                typed.push((
                    day,
                    CurrencyRates::from_text(text).map_err(|_| corrupt(day))?,
                ));
            } else if source == RateSource::Ecb as u8 {
                ecb.push((day, EcbRates::from_text(text).ok_or_else(|| corrupt(day))?));
            }
        }
        Ok(RateHistory::new(typed, ecb))
    }
}
