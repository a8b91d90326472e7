//! Costs in the data file: what each campaign, ad set or ad spent on a day, set by hand or
//! fetched from Meta. For the writer (methods of [`Txn`]): setting costs, and setting those a
//! fetch from Meta read, each keeping the sums (`cost_sums.rs`) in step in the same
//! transaction; for the readers (methods of [`Snapshot`]): the costs of some days, and each
//! cost in turn, which the stats (`read_stats.rs`) read as well.

use redb::ReadableTable;

use crate::domain::cost::{self, Cost};
use crate::domain::decimal::Decimal;
use crate::storage::cost_sums;
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records;
use crate::storage::schema::{COST_SUMS, COSTS};

impl Txn<'_> {
    /// Sets what each campaign, ad set or ad of `costs` spent on its day in `space`, replacing
    /// what was set before, wherever it came from; an amount of 0 removes it. Answers how many
    /// were set and removed.
    pub fn set_costs(&mut self, space: u32, costs: &[Cost]) -> Result<(usize, usize), StoreError> {
        let (mut set, mut removed) = (0, 0);
        let mut touched = cost_sums::Touched::default();
        for c in costs {
            touched.add(space, c.day, &c.campaign_name);
            if c.amount.is_zero() {
                removed += usize::from(self.costs.open()?.remove(cost_key(space, c))?.is_some());
            } else {
                self.insert_cost(space, c, c.source.code())?;
                set += 1;
            }
        }
        self.resum_costs(&touched)?;
        Ok((set, removed))
    }

    /// Stores cost `c` of `space`, from `source`, over the one its key had.
    fn insert_cost(&mut self, space: u32, c: &Cost, source: u8) -> Result<(), StoreError> {
        let record = records::CostRecord {
            amount: c.amount.to_string(),
            currency: c.currency.clone(),
            source,
        };
        self.costs
            .open()?
            .insert(cost_key(space, c), records::encode(&record).as_slice())?;
        Ok(())
    }

    /// Writes again the sums of the costs `touched` names (`storage/cost_sums.rs`).
    fn resum_costs(&mut self, touched: &cost_sums::Touched) -> Result<(), StoreError> {
        let mut sums = self.transaction.open_table(COST_SUMS)?;
        cost_sums::resum(&*self.costs.open()?, &mut sums, touched)
    }

    /// A fetch of Meta's spend for the days `[from, to]` of `space`: each of `costs` (from
    /// Meta, of those days) is set over the cost Meta gave its day, campaign, ad set and ad
    /// before, or removed where it is 0; a cost set by hand with the same key stays. A cost from
    /// Meta that `costs` does not name stays too: Meta's answer may leave an ad out (one deleted
    /// since, say), which is no sign that it spent nothing. Answers how many were set and
    /// removed.
    pub fn set_meta_costs(
        &mut self,
        space: u32,
        (from, to): (u32, u32),
        costs: &[Cost],
    ) -> Result<(usize, usize), StoreError> {
        let meta = crate::domain::cost::Source::Meta.code();
        let (mut set, mut removed) = (0, 0);
        let mut touched = cost_sums::Touched::default();
        for c in costs.iter().filter(|c| (from..=to).contains(&c.day)) {
            let stored = self
                .costs
                .open()?
                .get(cost_key(space, c))?
                .map(|bytes| records::with_cost_row(bytes.value(), |r| r.source));
            match stored {
                // Set by hand (or a row that does not read, not known to be Meta's): it stays.
                Some(source) if source.as_ref().ok() != Some(&meta) => continue,
                Some(_) if c.amount.is_zero() => {
                    self.costs.open()?.remove(cost_key(space, c))?;
                    removed += 1;
                }
                None if c.amount.is_zero() => continue,
                _ => {
                    self.insert_cost(space, c, meta)?;
                    set += 1;
                }
            }
            touched.add(space, c.day, &c.campaign_name);
        }
        self.resum_costs(&touched)?;
        Ok((set, removed))
    }
}

/// The `COSTS` key of cost `c` of `space`: its day, campaign, ad set and ad.
fn cost_key(space: u32, c: &Cost) -> (u32, u32, &str, &str, &str) {
    (
        space,
        c.day,
        c.campaign_name.as_str(),
        c.adset_name.as_str(),
        c.ad_name.as_str(),
    )
}

impl Snapshot {
    /// `space`'s costs on the days `[from, to]` (both included), by day, then campaign, ad set and
    /// ad.
    pub fn costs(&self, space: u32, days: (cost::Day, cost::Day)) -> Result<Vec<Cost>, StoreError> {
        let mut costs = Vec::new();
        each_cost(self, space, days, None, |row| {
            costs.push(Cost {
                day: row.day,
                campaign_name: row.campaign.to_owned(),
                adset_name: row.adset.to_owned(),
                ad_name: row.ad.to_owned(),
                amount: row.amount,
                currency: row.currency.to_owned(),
                source: row.source,
            });
            Ok(())
        })?;
        Ok(costs)
    }
}

/// One stored cost, its text borrowed from the stored key and value.
pub(crate) struct CostAt<'a> {
    pub(crate) day: cost::Day,
    pub(crate) campaign: &'a str,
    pub(crate) adset: &'a str,
    pub(crate) ad: &'a str,
    pub(crate) amount: Decimal,
    pub(crate) currency: &'a str,
    pub(crate) source: cost::Source,
}

/// Calls `each` with each of `space`'s costs on the days `[from, to]` (both included), by day,
/// then campaign, ad set and ad; with `campaign`, that campaign's only, read day by day from
/// the days its sums say it has a cost.
pub(crate) fn each_cost(
    s: &Snapshot,
    space: u32,
    (from, to): (cost::Day, cost::Day),
    campaign: Option<&str>,
    mut each: impl FnMut(CostAt<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if from > to {
        return Ok(());
    }
    let table = s.txn().open_table(COSTS)?;
    let mut read = |range: std::ops::RangeFrom<(u32, u32, &str, &str, &str)>,
                    until: (u32, Option<&str>)| {
        for entry in table.range(range)? {
            let (key, bytes) = entry?;
            let (s, day, campaign, adset, ad) = key.value();
            if s != space || day > until.0 || until.1.is_some_and(|c| c != campaign) {
                break;
            }
            records::with_cost_row(bytes.value(), |r| {
                let amount = Decimal::parse(r.amount).map_err(|e| {
                    StoreError::Corrupt(format!("cost of {campaign:?} on day {day}: {e}"))
                })?;
                each(CostAt {
                    day,
                    campaign,
                    adset,
                    ad,
                    amount,
                    currency: r.currency,
                    source: cost::Source::of_code(r.source),
                })
            })??;
        }
        Ok::<_, StoreError>(())
    };
    match campaign {
        None => read((space, from, "", "", "").., (to, None)),
        Some(c) => {
            let sums = s.txn().open_table(COST_SUMS)?;
            cost_sums::campaign_days(&sums, space, (from, to), c, |day, _| {
                read((space, day, c, "", "").., (day, Some(c)))
            })
        }
    }
}
