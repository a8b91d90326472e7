//! The sums of a space's costs (`COST_SUMS`): per campaign and for the whole space, by day and
//! by blocks of 8 and 64 days, written again by the writer in the transaction that changes a
//! cost. Costs are kept per ad (Meta's insights give them so), five rows a campaign a day or
//! more; stats by campaign or by day read the sums instead, a row per campaign per block of
//! the range, so a dashboard over months reads a few rows per campaign whatever the number of
//! ads (`docs/benchmarks` has the figures).

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadOnlyTable, ReadableTable, Table};

use crate::domain::decimal::Decimal;
use crate::storage::error::StoreError;
use crate::storage::records::{self, CostSumRecord};

/// Days a sum row covers at each level: a day, 8 days, 64 days. Period `n` of a level covers
/// the days `n * size` to `n * size + size - 1`.
pub(crate) const LEVEL_DAYS: [u32; 3] = [1, 8, 64];

/// Added to a level for the whole space's sums (campaign "").
pub(crate) const WHOLE_SPACE: u8 = 0x80;

/// The key of `COSTS`: space, day, campaign, ad set, ad.
pub(crate) type CostKey = (u32, u32, &'static str, &'static str, &'static str);
/// The key of `COST_SUMS`: space, level, period, campaign.
pub(crate) type SumKey = (u32, u8, u32, &'static str);

/// Sums by currency.
pub(crate) type Sums = BTreeMap<String, Decimal>;
/// Every sum row, by key (space, level, period, campaign).
pub(crate) type AllSums = BTreeMap<(u32, u8, u32, String), Sums>;

/// The days and campaigns of a space whose costs one transaction changed: the sums to write
/// again before it commits.
#[derive(Default)]
pub(crate) struct Touched(BTreeSet<(u32, u32, String)>);

impl Touched {
    pub(crate) fn add(&mut self, space: u32, day: u32, campaign: &str) {
        self.0.insert((space, day, campaign.to_owned()));
    }
}

/// Writes again every sum that covers a day and campaign of `touched`, from `costs` as they are
/// now: each campaign's day, the whole space's day, then each block from the level below.
pub(crate) fn resum(
    costs: &impl ReadableTable<CostKey, &'static [u8]>,
    sums: &mut Table<'_, SumKey, &'static [u8]>,
    touched: &Touched,
) -> Result<(), StoreError> {
    let mut rows: BTreeSet<(u32, u8, u32, &str)> = BTreeSet::new();
    for (space, day, campaign) in &touched.0 {
        let (space, day) = (*space, *day);
        let mut total = Sums::new();
        for entry in costs.range((space, day, campaign.as_str(), "", "")..)? {
            let (key, bytes) = entry?;
            let (s, d, c, _, _) = key.value();
            if (s, d, c) != (space, day, campaign.as_str()) {
                break;
            }
            records::with_cost_row(bytes.value(), |r| add(&mut total, r.currency, r.amount))??;
        }
        put(sums, (space, 0, day, campaign.as_str()), &total)?;
        rows.insert((space, WHOLE_SPACE, day, ""));
        for (level, size) in LEVEL_DAYS.iter().enumerate().skip(1) {
            rows.insert((space, level as u8, day / size, campaign.as_str()));
        }
    }
    // The whole space's days: every campaign's sum of the day.
    let days: Vec<(u32, u32)> = rows
        .iter()
        .filter(|r| r.1 == WHOLE_SPACE)
        .map(|r| (r.0, r.2))
        .collect();
    for (space, day) in days {
        let mut total = Sums::new();
        for entry in sums.range((space, 0, day, "")..(space, 0, day.saturating_add(1), ""))? {
            let (_, bytes) = entry?;
            add_sums(&mut total, bytes.value())?;
        }
        put(sums, (space, WHOLE_SPACE, day, ""), &total)?;
        for (level, size) in LEVEL_DAYS.iter().enumerate().skip(1) {
            rows.insert((space, WHOLE_SPACE | level as u8, day / size, ""));
        }
    }
    // Each block from the blocks (or days) below it, lower levels first.
    for level in 1..LEVEL_DAYS.len() {
        let ratio = LEVEL_DAYS[level] / LEVEL_DAYS[level - 1];
        for &(space, code, block, campaign) in &rows {
            if code & !WHOLE_SPACE != level as u8 {
                continue;
            }
            let below = (code & WHOLE_SPACE) | (level as u8 - 1);
            let mut total = Sums::new();
            for period in block * ratio..(block + 1) * ratio {
                if let Some(bytes) = sums.get((space, below, period, campaign))? {
                    add_sums(&mut total, bytes.value())?;
                }
            }
            put(sums, (space, code, block, campaign), &total)?;
        }
    }
    Ok(())
}

/// Every sum row `costs` makes, counted whole from the costs rather than kept: what the
/// table must hold (`tracker check` compares them, and a repair writes them).
pub(crate) fn all_sums(
    costs: &impl ReadableTable<CostKey, &'static [u8]>,
) -> Result<AllSums, StoreError> {
    let mut all = AllSums::new();
    for entry in costs.iter()? {
        let (key, bytes) = entry?;
        let (space, day, campaign, _, _) = key.value();
        records::with_cost_row(bytes.value(), |r| {
            for (level, size) in LEVEL_DAYS.iter().enumerate() {
                let level = level as u8;
                for (code, group) in [(level, campaign), (WHOLE_SPACE | level, "")] {
                    let row = all.entry((space, code, day / size, group.to_owned()));
                    add(row.or_default(), r.currency, r.amount)?;
                }
            }
            Ok::<_, StoreError>(())
        })??;
    }
    Ok(all)
}

/// Replaces every row of `sums` with `all`.
pub(crate) fn rewrite(
    sums: &mut Table<'_, SumKey, &'static [u8]>,
    all: &AllSums,
) -> Result<(), StoreError> {
    sums.retain(|_, _| false)?;
    for ((space, code, period, campaign), total) in all {
        put(sums, (*space, *code, *period, campaign.as_str()), total)?;
    }
    Ok(())
}

/// A stored sum row, read: each currency's sum.
pub(crate) fn stored(bytes: &[u8]) -> Result<Sums, StoreError> {
    let mut total = Sums::new();
    add_sums(&mut total, bytes)?;
    Ok(total)
}

/// Stores `total` at `key`, or removes the row when nothing was spent.
fn put(
    sums: &mut Table<'_, SumKey, &'static [u8]>,
    key: (u32, u8, u32, &str),
    total: &Sums,
) -> Result<(), StoreError> {
    if total.is_empty() {
        sums.remove(key)?;
    } else {
        let record = CostSumRecord {
            sums: total
                .iter()
                .map(|(currency, sum)| (currency.clone(), sum.to_string()))
                .collect(),
        };
        sums.insert(key, records::encode(&record).as_slice())?;
    }
    Ok(())
}

/// Adds each currency's sum of a stored sum row to `total`.
fn add_sums(total: &mut Sums, bytes: &[u8]) -> Result<(), StoreError> {
    records::with_cost_sum_row(bytes, |row| {
        row.sums
            .iter()
            .try_for_each(|&(currency, sum)| add(total, currency, sum))
    })?
}

/// Adds the stored decimal text `amount` to `total`'s sum in `currency`.
fn add(total: &mut Sums, currency: &str, amount: &str) -> Result<(), StoreError> {
    let amount = Decimal::parse(amount)
        .map_err(|e| StoreError::Corrupt(format!("a cost in {currency}: {e}")))?;
    add_amount(total, currency, amount)
}

/// Adds `amount` to `total`'s sum in `currency`, allocating only a currency not seen before.
pub(crate) fn add_amount(
    total: &mut Sums,
    currency: &str,
    amount: Decimal,
) -> Result<(), StoreError> {
    let sum = match total.get_mut(currency) {
        Some(sum) => sum,
        None => total
            .entry(currency.to_owned())
            .or_insert_with(Decimal::zero),
    };
    *sum = sum
        .checked_add(amount)
        .ok_or_else(|| StoreError::Corrupt(format!("a sum of costs in {currency} overflowed")))?;
    Ok(())
}

/// The key ranges of sum rows that cover the days `[first, last]` once each, as `(level, lo,
/// hi)` periods of that level: the whole blocks of the top level inside the range, then each
/// end's rest covered the same way one level down, so a range of months reads a row per 64 days
/// and at most 14 rows of days and 8-day blocks at its ends. Computed per level, not per
/// period: an all-time range spans tens of millions of days.
pub(crate) fn pieces(first: u32, last: u32) -> Vec<(u8, u32, u32)> {
    fn cover(lo: u64, hi: u64, level: usize, out: &mut Vec<(u8, u32, u32)>) {
        if lo >= hi {
            return;
        }
        let size = u64::from(LEVEL_DAYS[level]);
        let (a, b) = (lo.div_ceil(size), hi / size);
        if level == 0 || a >= b {
            if level == 0 {
                out.push((0, period(lo), period(hi)));
            } else {
                cover(lo, hi, level - 1, out);
            }
            return;
        }
        cover(lo, a * size, level - 1, out);
        out.push((level as u8, period(a), period(b)));
        cover(b * size, hi, level - 1, out);
    }
    fn period(n: u64) -> u32 {
        u32::try_from(n).unwrap_or(u32::MAX)
    }
    let mut out = Vec::new();
    cover(
        u64::from(first),
        u64::from(last) + 1,
        LEVEL_DAYS.len() - 1,
        &mut out,
    );
    out
}

/// The sums table as a reader sees it.
pub(crate) type SumTable = ReadOnlyTable<SumKey, &'static [u8]>;

/// Calls `each` with each campaign's spending over the days `[first, last]`, a currency and
/// an amount at a time (a campaign comes once per row read, so the caller adds them up); with
/// `campaign`, that campaign's only. Each piece is one range of keys, whichever: the rows that
/// exist are read, never a lookup per period of a range that may span centuries.
pub(crate) fn each_campaign_sum(
    table: &SumTable,
    space: u32,
    (first, last): (u32, u32),
    campaign: Option<&str>,
    mut each: impl FnMut(&str, &str, Decimal) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if first > last {
        return Ok(());
    }
    for (level, lo, hi) in pieces(first, last) {
        for entry in table.range((space, level, lo, "")..(space, level, hi, ""))? {
            let (key, bytes) = entry?;
            let (_, _, _, name) = key.value();
            if campaign.is_none_or(|c| c == name) {
                each_in_row(bytes.value(), |currency, sum| each(name, currency, sum))?;
            }
        }
    }
    Ok(())
}

/// Calls `each` with each day of `[first, last]` that has a cost, a currency and an amount at
/// a time: the whole space's, or with `campaign` that campaign's.
pub(crate) fn each_day_sum(
    table: &SumTable,
    space: u32,
    (first, last): (u32, u32),
    campaign: Option<&str>,
    mut each: impl FnMut(u32, &str, Decimal) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if first > last {
        return Ok(());
    }
    match campaign {
        None => {
            let end = (space, WHOLE_SPACE, last.saturating_add(1), "");
            for entry in table.range((space, WHOLE_SPACE, first, "")..end)? {
                let (key, bytes) = entry?;
                let day = key.value().2;
                each_in_row(bytes.value(), |currency, sum| each(day, currency, sum))?;
            }
        }
        Some(c) => campaign_days(table, space, (first, last), c, |day, bytes| {
            each_in_row(bytes, |currency, sum| each(day, currency, sum))
        })?,
    }
    Ok(())
}

/// Calls `each` with each day of `[first, last]` on which `campaign` has a cost, and its day
/// sum's stored bytes, in order: the 64-day blocks of the range are read (a row per campaign
/// with a cost in the block), and a day looked up only inside a block where `campaign` has one.
pub(crate) fn campaign_days(
    table: &SumTable,
    space: u32,
    (first, last): (u32, u32),
    campaign: &str,
    mut each: impl FnMut(u32, &[u8]) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let top = LEVEL_DAYS.len() - 1;
    let size = LEVEL_DAYS[top];
    let (lo, hi) = (first / size, last / size);
    let mut blocks = Vec::new();
    for entry in table.range((space, top as u8, lo, "")..=(space, top as u8, hi, campaign))? {
        let (key, _) = entry?;
        let (_, _, block, name) = key.value();
        if name == campaign {
            blocks.push(block);
        }
    }
    for block in blocks {
        let from = (block * size).max(first);
        let to = (block * size + (size - 1)).min(last);
        for day in from..=to {
            if let Some(bytes) = table.get((space, 0, day, campaign))? {
                each(day, bytes.value())?;
            }
        }
    }
    Ok(())
}

/// Calls `each` with each currency and sum of a stored sum row.
fn each_in_row(
    bytes: &[u8],
    mut each: impl FnMut(&str, Decimal) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    records::with_cost_sum_row(bytes, |row| {
        row.sums.iter().try_for_each(|&(currency, sum)| {
            let sum = Decimal::parse(sum)
                .map_err(|e| StoreError::Corrupt(format!("a sum of costs in {currency}: {e}")))?;
            each(currency, sum)
        })
    })?
}

#[cfg(test)]
mod tests {
    use super::{LEVEL_DAYS, pieces};

    /// The days a piece's rows cover.
    fn days((level, lo, hi): (u8, u32, u32)) -> std::ops::Range<u32> {
        let size = LEVEL_DAYS[usize::from(level)];
        lo * size..hi * size
    }

    #[test]
    fn pieces_cover_each_day_of_a_range_once() {
        let edges = [
            0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 200, 511, 512, 20_000, 20_089,
        ];
        let mut levels_used = [0; 3];
        for &first in &edges {
            for &last in &edges {
                let got = pieces(first, last);
                let mut covered: Vec<u32> = got.iter().flat_map(|&p| days(p)).collect();
                covered.sort_unstable();
                let want: Vec<u32> = (first..=last).collect();
                assert_eq!(covered, want, "pieces({first}, {last}) = {got:?}");
                for p in &got {
                    levels_used[usize::from(p.0)] += 1;
                }
                // Each level's periods are in one range, at most two ranges per level.
                for level in 0..3 {
                    assert!(got.iter().filter(|p| p.0 == level).count() <= 2, "{got:?}");
                }
            }
        }
        assert!(levels_used.iter().all(|&n| n > 0), "{levels_used:?}");
        // All time: one range of 64-day blocks, whatever its length.
        assert_eq!(pieces(0, u32::MAX), vec![(2, 0, 67_108_864)]);
        assert_eq!(pieces(3, 40_000_000).len(), 4);
        // 90 days from a block's start: one 64-day block, three 8-day blocks, two days.
        assert_eq!(
            pieces(128, 217),
            vec![(2, 2, 3), (1, 24, 27), (0, 216, 218)]
        );
    }
}
