//! The stats rollup (`STATS`): which rows a click, a binding or an event counts in (the rule of
//! `domain::stats`), the counts a batch adds up in memory, and writing them to the table once
//! per batch.
//!
//! The writer and the migration that builds the rollup from an older file both count through
//! [`Rollup`], so the two cannot disagree. A batch of events of one campaign touches its few
//! rows once, not once per event.

use std::collections::{BTreeMap, HashMap};

use redb::{ReadableTable, Table, WriteTransaction};

use crate::domain::event::EventKind;
use crate::domain::input::Query;

use crate::domain::decimal::Decimal;
use crate::domain::stats::{Counts, Dimension, QUARTERS_PER_DAY, quarter_of};
use crate::storage::error::StoreError;
use crate::storage::records::{self, ClickRecord, EventRecord, StatsRecord, StatsRow};
use crate::storage::schema::{CLICKS, INBOX, STATS};

/// A `STATS` key: `(space, dimension, group, quarter)`, or with [`DAY_ROWS`] set in the
/// dimension, `(space, dimension | DAY_ROWS, group, day)`, or with [`BLOCK_ROWS`],
/// `(space, dimension | BLOCK_ROWS, group, block)`.
pub type RowKey = (u32, u8, String, u32);

/// Set in a `STATS` key's dimension byte: the row counts a whole UTC day (days since the
/// epoch), the sum of that day's 96 quarter rows. A range of whole UTC days reads one row per
/// group and day instead of 96, and only its partial first and last days read quarters.
pub const DAY_ROWS: u8 = 0x80;

/// Set in a `STATS` key's dimension byte (schema 12): the row counts a block of [`BLOCK_DAYS`]
/// whole UTC days (block `n` holds days `n * BLOCK_DAYS` to `(n + 1) * BLOCK_DAYS - 1`), the
/// sum of its day rows. A range of months reads one row per group and block instead of one per
/// day; only the partial blocks at its ends read days.
pub const BLOCK_ROWS: u8 = 0x40;

/// The UTC days a [`BLOCK_ROWS`] row counts.
pub const BLOCK_DAYS: u32 = 32;

/// The group of a campaign's drill-down row (`Dimension::in_campaign_code`): the campaign's
/// byte length, `:`, the campaign, NUL, then the link, ad or ad set ("" for none). The length
/// makes it unambiguous whatever either name holds (a NUL included), and every row of one
/// campaign begins with [`in_campaign_prefix`]: one range of keys per dimension.
#[must_use]
pub fn in_campaign(campaign: &str, sub: &str) -> String {
    format!("{}{sub}", in_campaign_prefix(campaign))
}

/// What every drill-down group of `campaign` begins with, and no other campaign's does.
#[must_use]
pub fn in_campaign_prefix(campaign: &str) -> String {
    format!("{}:{campaign}\0", campaign.len())
}

/// The groups of `campaign`'s drill-down rows: from its prefix (included) to the first group
/// past them (excluded).
#[must_use]
pub fn in_campaign_range(campaign: &str) -> (String, String) {
    let start = in_campaign_prefix(campaign);
    // The prefix ends with NUL: every group that begins with it is below the same with 1.
    let end = format!("{}\u{1}", &start[..start.len() - 1]);
    (start, end)
}

/// The dimension byte (schema 20) of a split link's rows by variant: each group the link and
/// the variant ([`variant_group`]), so one link's variants are one range of keys. Part of the
/// rollup's key: changing it is a schema version.
pub const VARIANT_ROWS: u8 = 8;

/// The group of a split link's row by variant: the link as a campaign's drill-down writes a
/// campaign ([`in_campaign_prefix`]), then the variant's number.
#[must_use]
pub fn variant_group(slug: &str, variant: u8) -> String {
    in_campaign(slug, &variant.to_string())
}

/// The UTC day (days since the epoch) of a quarter since the epoch.
#[must_use]
pub fn day_of(quarter: u32) -> u32 {
    quarter / QUARTERS_PER_DAY
}

/// Counts added since the last write: first folded by the groups they fall in, then spread
/// over their rows.
///
/// Why two steps: one event counts in up to 24 rows (each of its up to eight groups by quarter,
/// day and block), and most events of a batch fall in the same few groups (one campaign's
/// link, ad and ad set, in the current quarter). So an event adds its counts to one fold entry
/// (its space, quarter and the click fields its groups come from), and each fold entry is
/// spread over its rows once, when the rows are written (or [`count_all`] ends). The sums are
/// the same either way: counts only add up.
#[derive(Debug, Default)]
pub struct Rollup {
    /// Counts by the fold key [`fold_key`] writes, not yet spread over rows.
    folded: HashMap<String, Folded>,
    /// The fold key of the latest count, kept to make the next one without an allocation.
    key: String,
    rows: BTreeMap<RowKey, Counts>,
}

/// Counts of one space and quarter whose click fields give the same groups.
#[derive(Debug)]
struct Folded {
    space: u32,
    quarter: u32,
    /// The click's campaign and link ("" for none), and its query if it names a `utm_`
    /// parameter (the ad and the ad set come from it).
    campaign: String,
    link: String,
    query: Option<String>,
    /// The target of a split link the click went to.
    variant: Option<u8>,
    counts: Counts,
}

/// The click fields the groups of a count come from: its campaign and link (`""` for none, as
/// a group has it), its query, if it names a `utm_` parameter (the ad and the ad set), and its
/// variant.
type GroupFields<'a> = (&'a str, &'a str, Option<&'a str>, Option<u8>);

fn group_fields(click: Option<&ClickRecord>) -> GroupFields<'_> {
    fn field(f: Option<&Option<String>>) -> &str {
        f.and_then(Option::as_deref).unwrap_or("")
    }
    (
        field(click.map(|c| &c.campaign_name)),
        field(click.map(|c| &c.link_slug)),
        click
            .and_then(|c| c.raw_query.as_deref())
            .filter(|q| q.contains("utm_")),
        click.and_then(|c| c.variant),
    )
}

/// Writes into `key` what tells one fold entry from another: the space, the quarter, and the
/// group fields, each but the last after its length, so no two differ only in where one ends.
fn fold_key(key: &mut String, space: u32, quarter: u32, fields: GroupFields<'_>) {
    use std::fmt::Write as _;
    let (campaign, link, query, variant) = fields;
    key.clear();
    if let Some(v) = variant {
        let _ = write!(key, "{v}#");
    }
    // Writing to a `String` cannot fail.
    let _ = write!(
        key,
        "{space}/{quarter}/{}:{campaign}{}:{link}",
        campaign.len(),
        link.len()
    );
    if let Some(q) = query {
        key.push('?');
        key.push_str(q);
    }
}

impl Rollup {
    /// A new click, in the quarter it was made.
    pub fn click(&mut self, space: u32, click: &ClickRecord) {
        self.add(space, Some(click), click.clicked_at_ms, &Counts::click());
    }

    /// A click that was just bound, under the click's quarter.
    pub fn binding(&mut self, space: u32, click: &ClickRecord) {
        self.add(
            space,
            Some(click),
            click.clicked_at_ms,
            &Counts::bound_click(),
        );
    }

    /// A new event, in the quarter it occurred, under its click (if its uid names one).
    pub fn event(
        &mut self,
        space: u32,
        click: Option<&ClickRecord>,
        occurred_at_ms: u64,
        counts: &Counts,
    ) {
        self.add(space, click, occurred_at_ms, counts);
    }

    /// Adds `counts` to its fold entry.
    fn add(&mut self, space: u32, click: Option<&ClickRecord>, at_ms: u64, counts: &Counts) {
        let quarter = quarter_of(at_ms);
        let fields = group_fields(click);
        fold_key(&mut self.key, space, quarter, fields);
        let added = if let Some(folded) = self.folded.get_mut(self.key.as_str()) {
            folded.counts.add(counts)
        } else {
            let (campaign, link, query, variant) = fields;
            self.folded.insert(
                self.key.clone(),
                Folded {
                    space,
                    quarter,
                    campaign: campaign.to_owned(),
                    link: link.to_owned(),
                    query: query.map(str::to_owned),
                    variant,
                    counts: counts.clone(),
                },
            );
            Ok(())
        };
        if let Err(e) = added {
            tracing::error!(error = %e, space, "stats rollup");
        }
    }

    /// Spreads every fold entry over the rows it counts in.
    fn spread(&mut self) {
        for (_, f) in self.folded.drain() {
            let query = f.query.as_deref().map(Query::parse);
            let utm = |name: &str| {
                query
                    .as_ref()
                    .and_then(|q| q.get(name))
                    .unwrap_or("")
                    .to_owned()
            };
            let campaign = f.campaign;
            // At most 9 groups: one allocation.
            let mut groups = Vec::with_capacity(9);
            groups.push((Dimension::Day.code(), String::new()));
            if let Some(variant) = f.variant {
                groups.push((VARIANT_ROWS, variant_group(&f.link, variant)));
            }
            for (dimension, sub) in [
                (Dimension::Link, f.link),
                (Dimension::Ad, utm("utm_content")),
                (Dimension::AdSet, utm("utm_term")),
            ] {
                // A campaign's drill-down row; its days are its own campaign rows, read by day,
                // and the group without a campaign has none.
                if let (Some(code), false) = (dimension.in_campaign_code(), campaign.is_empty()) {
                    groups.push((code, in_campaign(&campaign, &sub)));
                }
                groups.push((dimension.code(), sub));
            }
            groups.push((Dimension::Campaign.code(), campaign));
            let (space, quarter) = (f.space, f.quarter);
            for (code, group) in groups {
                for key in [
                    (
                        space,
                        code | BLOCK_ROWS,
                        group.clone(),
                        day_of(quarter) / BLOCK_DAYS,
                    ),
                    (space, code | DAY_ROWS, group.clone(), day_of(quarter)),
                    (space, code, group, quarter),
                ] {
                    if let Err(e) = self.rows.entry(key).or_default().add(&f.counts) {
                        tracing::error!(error = %e, space, "stats rollup");
                    }
                }
            }
        }
    }

    /// The rows counted so far, once spread: a rollup from [`count_all`] is spread whole.
    #[must_use]
    pub fn rows(&self) -> &BTreeMap<RowKey, Counts> {
        debug_assert!(
            self.folded.is_empty(),
            "rows read before the folds were spread"
        );
        &self.rows
    }

    /// How many fold entries and rows are held: what a rebuild bounds.
    fn held(&self) -> usize {
        self.folded.len() + self.rows.len()
    }

    /// Adds every row's counts to the table and empties the rollup.
    pub fn write(
        &mut self,
        table: &mut Table<'_, (u32, u8, &'static str, u32), &'static [u8]>,
    ) -> Result<(), StoreError> {
        self.spread();
        for ((space, dimension, group, hour), counts) in std::mem::take(&mut self.rows) {
            let key = (space, dimension, group.as_str(), hour);
            let stored = match table.get(key)? {
                Some(bytes) => counts_in(bytes.value()),
                None => Ok(Counts::default()),
            };
            // A damaged row must not fail every batch after it: it starts again from this
            // batch's counts, and `tracker check` reports the difference.
            let mut total = stored.unwrap_or_else(|e| {
                tracing::error!(error = %e, space, "stats row does not decode; counting it again from now");
                Counts::default()
            });
            if let Err(e) = total.add(&counts) {
                tracing::error!(error = %e, space, "stats rollup");
            }
            table.insert(key, records::encode(&record_of(&total)).as_slice())?;
        }
        Ok(())
    }
}

/// The counts a stored row's bytes hold.
pub fn counts_in(bytes: &[u8]) -> Result<Counts, StoreError> {
    let mut counts = Counts::default();
    records::with_stats_row(bytes, |row| add_stored(&mut counts, row))??;
    Ok(counts)
}

/// Adds the counts a stored row holds to `total`, without a copy of the row's counts.
pub fn add_stored(total: &mut Counts, r: &StatsRow<'_>) -> Result<(), StoreError> {
    total
        .add(&Counts {
            clicks: r.clicks,
            bound_clicks: r.bound_clicks,
            events: r.events,
            deposits: BTreeMap::new(),
            first_deposits: r.first_deposits,
            ..Counts::default()
        })
        .map_err(StoreError::Corrupt)?;
    for &(currency, sum) in &r.deposits {
        let sum = Decimal::parse(sum)
            .map_err(|e| StoreError::Corrupt(format!("stats deposit sum {sum:?}: {e}")))?;
        total
            .add_deposit(currency, sum)
            .map_err(StoreError::Corrupt)?;
    }
    Ok(())
}

/// The stored form of `c`.
pub fn record_of(c: &Counts) -> StatsRecord {
    StatsRecord {
        clicks: c.clicks,
        bound_clicks: c.bound_clicks,
        events: c.events,
        deposits: c
            .deposits
            .iter()
            .map(|(currency, sum)| (currency.clone(), sum.to_string()))
            .collect(),
        first_deposits: c.first_deposits,
    }
}

/// Counts every click, binding and event the tables hold, by the rule the writer counts new ones
/// with: what the rollup should hold. `tracker check` compares `STATS` with it. A record that
/// does not decode goes to `damaged`, which decides whether counting stops (`Err`) or goes on
/// without it (`Ok`).
pub fn count_all(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    inbox: &impl ReadableTable<(u32, u64), &'static [u8]>,
    damaged: impl FnMut(StoreError) -> Result<(), StoreError>,
) -> Result<Rollup, StoreError> {
    count(clicks, inbox, damaged, |_| Ok(()))
}

/// The rows a rebuild holds in memory before it adds them to the table: a few tens of
/// megabytes, whatever the size of the file.
pub const REBUILD_ROWS: usize = 100_000;

/// Empties `stats` and counts into it what [`count_all`] counts, adding the rows counted to the
/// table whenever `max_rows` of them are in memory ([`REBUILD_ROWS`]), so memory stays bounded
/// however many clicks and events the file holds. The migrations that build the rollup and
/// `tracker check --repair` use it.
pub fn rebuild(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    inbox: &impl ReadableTable<(u32, u64), &'static [u8]>,
    stats: &mut Table<'_, (u32, u8, &'static str, u32), &'static [u8]>,
    damaged: impl FnMut(StoreError) -> Result<(), StoreError>,
    max_rows: usize,
) -> Result<(), StoreError> {
    stats.retain(|_, _| false)?;
    let mut rest = count(clicks, inbox, damaged, |rollup| {
        if rollup.held() >= max_rows {
            rollup.write(stats)?;
        }
        Ok(())
    })?;
    rest.write(stats)
}

/// [`rebuild`] of `txn`'s `STATS` from its clicks and inbox, [`REBUILD_ROWS`] at a time.
pub fn rebuild_in(
    txn: &WriteTransaction,
    damaged: impl FnMut(StoreError) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    rebuild(
        &txn.open_table(CLICKS)?,
        &txn.open_table(INBOX)?,
        &mut txn.open_table(STATS)?,
        damaged,
        REBUILD_ROWS,
    )
}

/// [`count_all`], calling `after_each` after each click and each event with the rows so far.
fn count(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    inbox: &impl ReadableTable<(u32, u64), &'static [u8]>,
    mut damaged: impl FnMut(StoreError) -> Result<(), StoreError>,
    mut after_each: impl FnMut(&mut Rollup) -> Result<(), StoreError>,
) -> Result<Rollup, StoreError> {
    let mut rollup = Rollup::default();
    for entry in clicks.iter()? {
        let (key, bytes) = entry?;
        let click: ClickRecord = match records::decode(bytes.value()) {
            Ok(c) => c,
            Err(e) => {
                damaged(e)?;
                continue;
            }
        };
        let space = key.value().0;
        rollup.click(space, &click);
        if click.tg_id.is_some() {
            rollup.binding(space, &click);
        }
        after_each(&mut rollup)?;
    }
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let counted = event_counts(bytes.value(), inbox_id).and_then(|(event, counts)| {
            let click: Option<ClickRecord> = match &event.uid {
                Some(uid) => match clicks.get((space, uid.as_str()))? {
                    // A click that does not decode was reported above; counted as no click.
                    Some(bytes) => records::decode(bytes.value()).ok(),
                    None => None,
                },
                None => None,
            };
            Ok((event, click, counts))
        });
        match counted {
            Ok((event, click, counts)) => {
                rollup.event(space, click.as_ref(), event.occurred_at_ms, &counts);
            }
            Err(e) => damaged(e)?,
        }
        after_each(&mut rollup)?;
    }
    rollup.spread();
    Ok(rollup)
}

/// A stored event and what it counts.
fn event_counts(bytes: &[u8], inbox_id: u64) -> Result<(EventRecord, Counts), StoreError> {
    let event: EventRecord = records::decode(bytes)?;
    let kind = EventKind::from_u8(event.kind).ok_or_else(|| {
        StoreError::Corrupt(format!("event {inbox_id} has unknown kind {}", event.kind))
    })?;
    let value = event
        .value
        .as_deref()
        .map(Decimal::parse)
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("event {inbox_id}: {e}")))?;
    let counts = Counts::event(kind, value, &event.currency, event.first_deposit);
    Ok((event, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drill-down's groups are part of the file: fixed bytes, and one campaign's never
    /// begin with another's prefix, whatever the names hold.
    #[test]
    fn drill_groups_are_fixed_and_unambiguous() {
        assert_eq!(in_campaign("spring-sale", "ad-1"), "11:spring-sale\0ad-1");
        assert_eq!(in_campaign("", ""), "0:\0");
        assert_eq!(in_campaign_prefix("Осень"), "10:Осень\0");
        assert_ne!(in_campaign("a\0b", "c"), in_campaign("a", "b\0c"));
        assert!(in_campaign("ab", "").starts_with(&in_campaign_prefix("ab")));
        assert!(!in_campaign("abc", "").starts_with(&in_campaign_prefix("ab")));
        assert!(!in_campaign("a", "\0x").starts_with(&in_campaign_prefix("a\0")));
    }

    /// Folding counts by their groups before spreading them over rows counts what spreading
    /// each alone does: events of one click and quarter add up in one fold entry, and clicks
    /// whose fields differ (a campaign, a link, a `utm_` query, none, an empty name) or other
    /// quarters and spaces keep entries of their own.
    #[test]
    fn folded_counts_equal_each_count_spread_alone() {
        let click = |campaign: Option<&str>, link: Option<&str>, query: Option<&str>| {
            Some(ClickRecord {
                campaign_name: campaign.map(str::to_owned),
                link_slug: link.map(str::to_owned),
                raw_query: query.map(str::to_owned),
                ..ClickRecord::default()
            })
        };
        let clicks = [
            click(
                Some("spring"),
                Some("l1"),
                Some("utm_content=ad1&utm_term=s1"),
            ),
            click(Some("spring"), Some("l1"), Some("utm_content=ad2")),
            click(Some("spring"), Some("l2"), Some("ref=x")),
            click(Some(""), Some("l1"), None),
            click(None, None, None),
            // The same fields split differently must not share a fold entry.
            click(Some("ab"), Some(""), None),
            click(Some("a"), Some("b"), None),
            None,
        ];
        let quarter_ms = 15 * 60_000;
        let mut folded = Rollup::default();
        let mut alone = BTreeMap::<RowKey, Counts>::new();
        for i in 0..200_u64 {
            let space = 1 + u32::try_from(i / 8 % 2).unwrap();
            let c = clicks[(i % 8) as usize].as_ref();
            let at_ms = 1_700_000_000_000 + (i % 3) * quarter_ms + i;
            let kind = [EventKind::Contact, EventKind::Deposit][(i % 2) as usize];
            let value = Decimal::parse(&format!("{}.25", i % 7)).unwrap();
            let currency = ["USD", "EUR"][(i % 4 / 2) as usize];
            let counts = Counts::event(kind, Some(value), currency, i % 5 == 0);
            folded.event(space, c, at_ms, &counts);
            let mut one = Rollup::default();
            one.event(space, c, at_ms, &counts);
            if i % 10 == 0 {
                folded.click(space, c.unwrap_or(&ClickRecord::default()));
                one.click(space, c.unwrap_or(&ClickRecord::default()));
            }
            one.spread();
            for (key, counts) in one.rows {
                alone.entry(key).or_default().add(&counts).unwrap();
            }
        }
        folded.spread();
        assert_eq!(folded.rows(), &alone);
        let day_rows = alone
            .iter()
            .filter(|((_, code, _, _), _)| *code == Dimension::Day.code() | DAY_ROWS)
            .map(|(_, c)| c.events.iter().sum::<u64>())
            .sum::<u64>();
        assert_eq!(day_rows, 200, "each event once in its day row");
    }

    /// A rebuild that writes out every row as soon as it is counted holds what one that keeps
    /// every row in memory holds, which is what `count_all` counts.
    #[test]
    fn a_bounded_rebuild_counts_what_one_in_memory_does() {
        let (_dir, db) = crate::storage::engine::open::test_database();
        let txn = db.begin_write().unwrap();
        {
            let mut clicks = txn.open_table(CLICKS).unwrap();
            for i in 0..40_u64 {
                let click = ClickRecord {
                    campaign_name: (i % 4 != 0).then(|| format!("c{}", i % 3)),
                    link_slug: (i % 5 != 0).then(|| format!("l{}", i % 2)),
                    raw_query: Some(format!("utm_content=ad{}&utm_term=s{}", i % 3, i % 2)),
                    clicked_at_ms: i * 40 * 60_000,
                    tg_id: (i % 2 == 0).then_some(i),
                    ..ClickRecord::default()
                };
                let uid = format!("u{i}");
                let space = u32::try_from(1 + i % 2).unwrap();
                clicks
                    .insert((space, uid.as_str()), records::encode(&click).as_slice())
                    .unwrap();
            }
        }
        let table = |max_rows| {
            let mut stats = txn.open_table(STATS).unwrap();
            let (clicks, inbox) = (
                txn.open_table(CLICKS).unwrap(),
                txn.open_table(INBOX).unwrap(),
            );
            rebuild(&clicks, &inbox, &mut stats, Err, max_rows).unwrap();
            let mut rows = BTreeMap::new();
            for entry in stats.iter().unwrap() {
                let (key, bytes) = entry.unwrap();
                let (space, code, group, at) = key.value();
                let counts = counts_in(bytes.value()).unwrap();
                rows.insert((space, code, group.to_owned(), at), counts);
            }
            rows
        };
        let bounded = table(1);
        let in_memory = table(usize::MAX);
        let (clicks, inbox) = (
            txn.open_table(CLICKS).unwrap(),
            txn.open_table(INBOX).unwrap(),
        );
        let counted = count_all(&clicks, &inbox, Err).unwrap();
        assert_eq!(&bounded, counted.rows());
        assert_eq!(bounded, in_memory);
        assert!(
            bounded.keys().any(|(_, code, _, _)| *code == 5 | DAY_ROWS),
            "drill rows are counted"
        );
    }
}
