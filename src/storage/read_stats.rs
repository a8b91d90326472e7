//! The reads of what is counted: `GET /stats` from the rollup (`rollup.rs`), a quarter, a day
//! or a block of days a row, with the costs of the same days (`costs.rs`). They run on the
//! reader threads like the rest of `read.rs`, on its [`Snapshot`].

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use redb::ReadOnlyTable;

use crate::domain::cost;
use crate::domain::decimal::Decimal;
use crate::domain::stats::{self, Counts, Dimension, GroupStats, Grouping};
use crate::storage::channels::{self, ChannelGroups};
use crate::storage::cost_sums;
use crate::storage::costs;
use crate::storage::error::StoreError;
use crate::storage::read::Snapshot;
use crate::storage::records;
use crate::storage::rollup;
use crate::storage::schema::{COST_SUMS, STATS};

impl Snapshot {
    /// `space`'s counts by `grouping` over the quarters `[from, to)`, one entry per group, the
    /// groups in order (days ascending; the group without a name first), with days and costs in
    /// `zone`. Whole UTC days are read from the day rows, the rest from the quarter rows
    /// (`rollup::DAY_ROWS`); a day of `zone` is read as its own range, so it is exact in any zone.
    /// One campaign's groups are its drill-down rows (`rollup::in_campaign`), its days its own rows.
    pub fn stats(
        &self,
        space: u32,
        grouping: &Grouping,
        (from, to): (u32, u32),
        zone: &jiff::tz::TimeZone,
    ) -> Result<Vec<GroupStats>, StoreError> {
        let table = self.txn().open_table(STATS)?;
        let rows = Rows {
            table: &table,
            space,
            pieces: pieces(from, to),
        };
        let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
        let campaign = grouping.campaign.as_deref();
        match (grouping.by, campaign) {
            (Dimension::Day, _) => {
                let (code, group) = match campaign {
                    Some(c) => (Dimension::Campaign.code(), c),
                    None => (Dimension::Day.code(), ""),
                };
                rows.by_day(code, group, (from, to), zone, &mut groups)?;
            }
            (Dimension::Campaign, Some(c)) => {
                if let Some(total) = rows.total(Dimension::Campaign.code(), c)? {
                    groups.insert(c.to_owned(), total);
                }
            }
            (by, Some(c)) => {
                let code = by.in_campaign_code().unwrap_or(by.code());
                let (start, end) = rollup::in_campaign_range(c);
                let end = Bound::Excluded((space, code, end.as_str(), 0));
                rows.each_group(code, &start, end, &mut groups)?;
            }
            (by, None) => {
                let end = Bound::Excluded((space, by.code() + 1, "", 0));
                rows.each_group(by.code(), "", end, &mut groups)?;
            }
        }
        add_channel_counts(self, space, grouping, (from, to), zone, &mut groups)?;
        let spent = group_costs(self, space, grouping, (from, to), zone)?;
        let views = group_views(self, space, grouping, (from, to), zone)?;
        for group in spent.keys().chain(views.iter().flat_map(BTreeMap::keys)) {
            if !groups.contains_key(group) {
                groups.insert(group.clone(), Counts::default());
            }
        }
        let none = BTreeMap::new();
        Ok(groups
            .into_iter()
            .map(|(group, counts)| {
                let cost = spent.get(&group).unwrap_or(&none);
                let viewed = views.as_ref().and_then(|v| match v.get(&group) {
                    Some(n) => Some(*n),
                    // Views of no link are none: the group without a link has no view count.
                    None if grouping.by == Dimension::Link && group.is_empty() => None,
                    None => Some(0),
                });
                GroupStats::new((!group.is_empty()).then_some(group), &counts, cost)
                    .with_views(viewed)
            })
            .collect())
    }
}

/// The views of the landing pages of `space`'s links (`LINK_VIEWS`) by the groups of
/// `grouping`: by link, by its campaign, or by day; `None` for the groups a view knows
/// nothing of (ads and ad sets). Views are kept per UTC day: the period's views are those of
/// the UTC days whose dates are the calendar days (in `zone`) of the quarters `[from, to)`, and
/// a day's are those of the UTC day of the same date (`docs/landing-pages.md`). A campaign's
/// views are those of the links made with it (a link without one: no campaign's); within one
/// campaign, its links' only.
fn group_views(
    s: &Snapshot,
    space: u32,
    grouping: &Grouping,
    (from, to): (u32, u32),
    zone: &jiff::tz::TimeZone,
) -> Result<Option<BTreeMap<String, u64>>, StoreError> {
    if !matches!(
        grouping.by,
        Dimension::Link | Dimension::Campaign | Dimension::Day
    ) {
        return Ok(None);
    }
    let mut groups = BTreeMap::new();
    if to <= from {
        return Ok(Some(groups));
    }
    let first = stats::local_day(zone, from);
    let last = if to == u32::MAX {
        u32::MAX
    } else {
        stats::local_day(zone, to - 1)
    };
    let campaigns = s.link_campaigns(space)?;
    let campaign = grouping.campaign.as_deref();
    for (slug, day, views) in s.link_views(space, first, last)? {
        let link_campaign = campaigns.get(&slug).map(String::as_str);
        if campaign.is_some() && campaign != link_campaign {
            continue;
        }
        let group = match grouping.by {
            Dimension::Link => slug,
            Dimension::Campaign => link_campaign.unwrap_or("").to_owned(),
            _ => cost::day_text(day),
        };
        *groups.entry(group).or_insert(0) += views;
    }
    Ok(Some(groups))
}

/// Adds the channel joins and leaves of the quarters `[from, to)` to the groups of `grouping`
/// (a group with some and nothing else is added): by campaign, link and day as the writer
/// counted them (`storage/channels.rs`), a campaign's links and days from its own rows. Ads and
/// ad sets have none: a join is counted by its channel link, not by the click's query.
fn add_channel_counts(
    s: &Snapshot,
    space: u32,
    grouping: &Grouping,
    (from, to): (u32, u32),
    zone: &jiff::tz::TimeZone,
    groups: &mut BTreeMap<String, Counts>,
) -> Result<(), StoreError> {
    let mut add = |group: &str, (joins, leaves): (u64, u64)| {
        let counts = match groups.get_mut(group) {
            Some(c) => c,
            None => groups.entry(group.to_owned()).or_default(),
        };
        counts.joins += joins;
        counts.leaves += leaves;
    };
    let campaign = grouping.campaign.as_deref();
    let quarters = (from, to);
    match (grouping.by, campaign) {
        (Dimension::Day, _) => {
            let (code, group) = match campaign {
                Some(c) => (Dimension::Campaign.code(), c),
                None => (Dimension::Day.code(), ""),
            };
            // Consecutive rows mostly share a day: its name is made once per day.
            let mut day = (u32::MAX, String::new());
            channels::each_channel_row(
                s,
                (space, code),
                ChannelGroups::One(group),
                quarters,
                |_, q, n| {
                    let d = stats::local_day(zone, q);
                    if d != day.0 {
                        day = (d, cost::day_text(d));
                    }
                    add(&day.1, n);
                },
            )
        }
        (Dimension::Campaign, Some(c)) => channels::each_channel_row(
            s,
            (space, Dimension::Campaign.code()),
            ChannelGroups::One(c),
            quarters,
            |g, _, n| add(g, n),
        ),
        (Dimension::Link, Some(c)) => {
            let (prefix, _) = rollup::in_campaign_range(c);
            let code = Dimension::Link
                .in_campaign_code()
                .unwrap_or(Dimension::Link.code());
            channels::each_channel_row(
                s,
                (space, code),
                ChannelGroups::Prefixed(&prefix),
                quarters,
                |g, _, n| {
                    add(g.strip_prefix(prefix.as_str()).unwrap_or(g), n);
                },
            )
        }
        (by @ (Dimension::Campaign | Dimension::Link), None) => channels::each_channel_row(
            s,
            (space, by.code()),
            ChannelGroups::Prefixed(""),
            quarters,
            |g, _, n| add(g, n),
        ),
        (Dimension::Ad | Dimension::AdSet, _) => Ok(()),
    }
}

/// The rollup rows of one space over some quarters (`pieces`).
struct Rows<'a> {
    table: &'a ReadOnlyTable<(u32, u8, &'static str, u32), &'static [u8]>,
    space: u32,
    pieces: Vec<(u8, u32, u32)>,
}

impl Rows<'_> {
    /// The counts of one group over the quarters; `None` when it has no row there.
    fn total(&self, code: u8, group: &str) -> Result<Option<Counts>, StoreError> {
        let mut total = None;
        add_rows(
            self.table,
            (self.space, code, group),
            &self.pieces,
            &mut total,
        )?;
        Ok(total)
    }

    /// Each group of dimension `code` from `start` (a group, or the prefix of the groups) to
    /// `end`, with its counts, named without `start`.
    fn each_group(
        &self,
        code: u8,
        start: &str,
        end: Bound<(u32, u8, &str, u32)>,
        groups: &mut BTreeMap<String, Counts>,
    ) -> Result<(), StoreError> {
        // One seek per group (over the quarter rows, which every group has), then its rows in
        // range.
        let space = self.space;
        // The group after which the next one starts; `None` for the first.
        let mut previous: Option<String> = None;
        loop {
            let from = match &previous {
                None => Bound::Included((space, code, start, 0)),
                Some(group) => Bound::Excluded((space, code, group.as_str(), u32::MAX)),
            };
            let Some(first) = self
                .table
                .range::<(u32, u8, &str, u32)>((from, end))?
                .next()
            else {
                break;
            };
            let group = first?.0.value().2.to_owned();
            if let Some(total) = self.total(code, &group)? {
                let name = group.strip_prefix(start).unwrap_or(&group);
                groups.insert(name.to_owned(), total);
            }
            previous = Some(group);
        }
        Ok(())
    }

    /// The counts of `group` of dimension `code` by day of `zone`, the days from the first
    /// quarter row in `[from, to)` to the last.
    fn by_day(
        &self,
        code: u8,
        group: &str,
        (from, to): (u32, u32),
        zone: &jiff::tz::TimeZone,
        groups: &mut BTreeMap<String, Counts>,
    ) -> Result<(), StoreError> {
        let space = self.space;
        let rows = || {
            self.table
                .range((space, code, group, from)..(space, code, group, to))
        };
        let first = rows()?.next().transpose()?.map(|(k, _)| k.value().3);
        let last = rows()?.next_back().transpose()?.map(|(k, _)| k.value().3);
        if let (Some(first), Some(last)) = (first, last) {
            for day in stats::local_day(zone, first)..=stats::local_day(zone, last) {
                let start = stats::day_start(zone, day).max(from);
                let end = stats::day_start(zone, day + 1).min(to);
                let mut total = None;
                add_rows(
                    self.table,
                    (space, code, group),
                    &pieces(start, end),
                    &mut total,
                )?;
                if let Some(total) = total {
                    groups.insert(cost::day_text(day), total);
                }
            }
        }
        Ok(())
    }
}

/// What each group of `grouping` spent over the quarters `[from, to)`, by currency: the costs
/// of the days of `zone` that begin in the range, by campaign, by day, by ad set (`utm_term`) or
/// by ad (`utm_content`) (a link has none; a cost of no ad set or ad counts for none of those
/// groups), of its one campaign where it has one. A campaign's or a day's cost is the sum of
/// all its rows, read from their sums (`storage/cost_sums.rs`); an ad set's or ad's from the
/// costs themselves.
fn group_costs(
    s: &Snapshot,
    space: u32,
    grouping: &Grouping,
    (from, to): (u32, u32),
    zone: &jiff::tz::TimeZone,
) -> Result<BTreeMap<String, BTreeMap<String, Decimal>>, StoreError> {
    // Summed in a hash map, found by one hash of the name per row rather than a walk of string
    // comparisons; ordered once at the end.
    let mut spent: HashMap<String, BTreeMap<String, Decimal>> = HashMap::new();
    if !grouping.by.has_costs() || from >= to {
        return Ok(BTreeMap::new());
    }
    let mut first = stats::local_day(zone, from);
    if stats::day_start(zone, first) < from {
        first += 1;
    }
    let days = (first, stats::local_day(zone, to - 1));
    let campaign = grouping.campaign.as_deref();
    // Looked up by reference: a row allocates only a group or currency not seen before.
    let mut add = |group: &str, currency: &str, amount: Decimal| {
        let by_currency = match spent.get_mut(group) {
            Some(c) => c,
            None => spent.entry(group.to_owned()).or_default(),
        };
        cost_sums::add_amount(by_currency, currency, amount)
    };
    match grouping.by {
        Dimension::Day => {
            let sums = s.txn().open_table(COST_SUMS)?;
            cost_sums::each_day_sum(&sums, space, days, campaign, |day, currency, amount| {
                add(&cost::day_text(day), currency, amount)
            })?;
        }
        Dimension::AdSet | Dimension::Ad => {
            let by_ad = grouping.by == Dimension::Ad;
            costs::each_cost(s, space, days, campaign, |row| {
                let group = if by_ad { row.ad } else { row.adset };
                if group.is_empty() {
                    return Ok(());
                }
                add(group, row.currency, row.amount)
            })?;
        }
        _ => {
            let sums = s.txn().open_table(COST_SUMS)?;
            cost_sums::each_campaign_sum(&sums, space, days, campaign, &mut add)?;
        }
    }
    Ok(spent.into_iter().collect())
}

/// Adds the counts of each row of one group in `pieces` to `total`, made at the first row (so
/// `None` is left where the group has no row there).
fn add_rows(
    table: &ReadOnlyTable<(u32, u8, &'static str, u32), &'static [u8]>,
    (space, code, group): (u32, u8, &str),
    pieces: &[(u8, u32, u32)],
    total: &mut Option<Counts>,
) -> Result<(), StoreError> {
    for &(flag, lo, hi) in pieces {
        for entry in
            table.range((space, code | flag, group, lo)..(space, code | flag, group, hi))?
        {
            let (_, bytes) = entry?;
            records::with_stats_row(bytes.value(), |row| {
                rollup::add_stored(total.get_or_insert_with(Counts::default), row)
            })??;
        }
    }
    Ok(())
}

/// The `STATS` key ranges that cover the quarters `[from, to)` once each: `(0, quarters)` before
/// the first whole UTC day, `(DAY_ROWS, days)` for the whole days before the first whole block,
/// `(BLOCK_ROWS, blocks)` for the whole blocks, `(DAY_ROWS, days)` after the last, `(0,
/// quarters)` after the last whole day. Empty ranges are left out.
fn pieces(from: u32, to: u32) -> Vec<(u8, u32, u32)> {
    const PER_DAY: u32 = stats::QUARTERS_PER_DAY;
    const PER_BLOCK: u32 = rollup::BLOCK_DAYS;
    if from >= to {
        return Vec::new();
    }
    let first_day = from.div_ceil(PER_DAY);
    let end_day = to / PER_DAY;
    if first_day >= end_day {
        return vec![(0, from, to)];
    }
    let first_block = first_day.div_ceil(PER_BLOCK);
    let end_block = end_day / PER_BLOCK;
    let days = if first_block >= end_block {
        vec![(rollup::DAY_ROWS, first_day, end_day)]
    } else {
        vec![
            (rollup::DAY_ROWS, first_day, first_block * PER_BLOCK),
            (rollup::BLOCK_ROWS, first_block, end_block),
            (rollup::DAY_ROWS, end_block * PER_BLOCK, end_day),
        ]
    };
    let mut all = vec![(0, from, first_day * PER_DAY)];
    all.extend(days);
    all.push((0, end_day * PER_DAY, to));
    all.retain(|&(_, lo, hi)| lo < hi);
    all
}

#[cfg(test)]
mod pieces_tests {
    use super::pieces;
    use crate::domain::stats::QUARTERS_PER_DAY;
    use crate::storage::rollup::{BLOCK_DAYS, BLOCK_ROWS, DAY_ROWS};

    /// The quarters a piece's rows count.
    fn quarters((flag, lo, hi): (u8, u32, u32)) -> std::ops::Range<u32> {
        let per = match flag {
            0 => 1,
            DAY_ROWS => QUARTERS_PER_DAY,
            BLOCK_ROWS => QUARTERS_PER_DAY * BLOCK_DAYS,
            _ => panic!("flag {flag:#x}"),
        };
        lo * per..hi * per
    }

    #[test]
    fn pieces_cover_each_quarter_of_a_range_once() {
        let block = QUARTERS_PER_DAY * BLOCK_DAYS;
        let edges = [
            0,
            1,
            QUARTERS_PER_DAY - 1,
            QUARTERS_PER_DAY,
            block - 1,
            block,
            block + 5,
            3 * block - QUARTERS_PER_DAY,
            3 * block,
            3 * block + 7,
            20_000 * QUARTERS_PER_DAY + 13,
        ];
        let mut blocks_used = 0;
        for &from in &edges {
            for &to in &edges {
                let got = pieces(from, to);
                let mut covered: Vec<u32> = got.iter().flat_map(|&p| quarters(p)).collect();
                covered.sort_unstable();
                let want: Vec<u32> = (from..to.max(from)).collect();
                assert_eq!(covered, want, "pieces({from}, {to}) = {got:?}");
                blocks_used += got.iter().filter(|p| p.0 == BLOCK_ROWS).count();
            }
        }
        assert!(blocks_used > 0, "no range was read by blocks");
        // A range of whole blocks reads blocks only.
        assert_eq!(pieces(block, 3 * block), vec![(BLOCK_ROWS, 1, 3)]);
    }
}
