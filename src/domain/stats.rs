//! Stats (`docs/api.md#stats`): per group, clicks, bound clicks, new events of each kind, first
//! deposits and deposit sums per currency, exact; with the costs, the return, the prices and the
//! funnel's rates that follow from them.
//!
//! The writer keeps the counts per space, group and quarter of an hour (a rollup), updated in
//! the same transaction as what they count, so `GET /stats` reads a few rows instead of the
//! inbox. A quarter, not an hour, because every time zone in use is a whole number of quarters
//! off UTC: a day of the space's zone is a whole number of rows, whatever the zone, and changing
//! the zone changes no row. What is counted where (one rule, here, for the writer, the migration
//! that builds the rollup from an older file, and `tracker check`):
//! - a click counts in the quarter it was made, under its `campaign_name` and `link_slug`;
//! - a binding counts as a bound click under the click's quarter and groups;
//! - a new event (never a duplicate) counts in the quarter of its `occurred_at_ms`, under its
//!   click's groups, or under no group when its `uid` names no click. A click's uid is random, so
//!   a click made later never takes an earlier event's uid: the feed, which joins clicks at read
//!   time, and the stats always agree.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::decimal::Decimal;
use crate::domain::event::EventKind;
use crate::error::{Code, Error};

pub const HOUR_MS: u64 = 3_600_000;
pub const DAY_MS: u64 = 24 * HOUR_MS;

/// How `GET /stats` groups, under the name of the field it groups by (as `as_str` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
pub enum Dimension {
    #[serde(rename = "campaign_name")]
    Campaign,
    #[serde(rename = "link_slug")]
    Link,
    /// Every count of the space, grouped by the space's calendar day at read time.
    #[serde(rename = "day")]
    Day,
    /// The ad a click came from: `utm_content` of its query.
    #[serde(rename = "utm_content")]
    Ad,
    /// The ad set a click came from: `utm_term` of its query.
    #[serde(rename = "utm_term")]
    AdSet,
}

impl Dimension {
    /// The stored discriminant (part of the rollup's key: changing it is a schema version).
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Dimension::Campaign => 0,
            Dimension::Link => 1,
            Dimension::Day => 2,
            Dimension::Ad => 3,
            Dimension::AdSet => 4,
        }
    }

    /// The stored discriminant of a campaign's drill-down rows by this grouping: its links (5),
    /// ads (6) and ad sets (7), each group one campaign's link, ad or ad set
    /// (`rollup::in_campaign`). `None` for the campaign and the day, which a campaign's own rows
    /// answer. Part of the rollup's key: changing it is a schema version.
    #[must_use]
    pub fn in_campaign_code(self) -> Option<u8> {
        match self {
            Dimension::Link => Some(5),
            Dimension::Ad => Some(6),
            Dimension::AdSet => Some(7),
            Dimension::Campaign | Dimension::Day => None,
        }
    }

    /// Whether a cost belongs to this grouping's groups: a campaign's or a day's (the sum of
    /// its rows), an ad set's or an ad's (the rows that name it); a link has none.
    #[must_use]
    pub fn has_costs(self) -> bool {
        !matches!(self, Dimension::Link)
    }

    pub fn parse(by: Option<&str>) -> Result<Dimension, Error> {
        match by {
            None | Some("campaign_name") => Ok(Dimension::Campaign),
            Some("link_slug") => Ok(Dimension::Link),
            Some("day") => Ok(Dimension::Day),
            Some("utm_content") => Ok(Dimension::Ad),
            Some("utm_term") => Ok(Dimension::AdSet),
            Some(other) => Err(Error::field(
                Code::InvalidField,
                "by",
                format!(
                    "by must be campaign_name, link_slug, day, utm_content or utm_term, got {}",
                    crate::domain::input::quoted(other)
                ),
            )),
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Campaign => "campaign_name",
            Dimension::Link => "link_slug",
            Dimension::Day => "day",
            Dimension::Ad => "utm_content",
            Dimension::AdSet => "utm_term",
        }
    }
}

/// What `GET /stats` groups by: a dimension, over every campaign or within one
/// (`docs/api.md#one-campaign`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouping {
    pub by: Dimension,
    /// The one campaign whose groups are asked for, by its exact name.
    pub campaign: Option<String>,
}

impl Grouping {
    /// Every campaign's groups by `by`.
    #[must_use]
    pub fn all(by: Dimension) -> Grouping {
        Grouping { by, campaign: None }
    }

    /// From `by` and `campaign` as given (`campaign` absent or empty: every campaign); the
    /// campaign's name is taken as a click's `campaign_name` is, exactly, up to its bound.
    pub fn parse(by: Option<&str>, campaign: Option<&str>) -> Result<Grouping, Error> {
        let by = Dimension::parse(by)?;
        let campaign = campaign.filter(|c| !c.is_empty());
        if let Some(c) = campaign {
            use crate::domain::click::{CAMPAIGN_NAME_MAX_CHARS, within_bound};
            within_bound(c, ("campaign", CAMPAIGN_NAME_MAX_CHARS))?;
        }
        Ok(Grouping {
            by,
            campaign: campaign.map(str::to_owned),
        })
    }
}

/// The rollup's finest grain: a quarter of an hour. Every time zone in use today is a whole
/// number of quarters off UTC, so every local midnight is a quarter's start and a local day is a
/// whole number of quarter rows (`docs/api.md#time-zones`).
pub const QUARTER_MS: u64 = 900_000;
/// Quarters in a UTC day (the rollup's day rows).
pub const QUARTERS_PER_DAY: u32 = 96;

/// The quarter (quarters of an hour since the epoch) of a time in epoch milliseconds.
#[must_use]
pub fn quarter_of(ms: u64) -> u32 {
    u32::try_from(ms / QUARTER_MS).unwrap_or(u32::MAX)
}

/// What `GET /stats`, the command line and the pages ask for: UTC hours (`from_ms`/`to_ms`,
/// widened to whole hours) or calendar days of the space's time zone, both included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// `[from, to)` in hours since the epoch.
    Hours(u32, u32),
    /// `[first, last]` calendar days of the space (days since 1970-01-01).
    Days(u32, u32),
}

impl Range {
    /// `[from, to)` in quarters, in `zone` for days.
    #[must_use]
    pub fn quarters(self, zone: &jiff::tz::TimeZone) -> (u32, u32) {
        match self {
            Range::Hours(from, to) => (from.saturating_mul(4), to.saturating_mul(4)),
            Range::Days(first, last) => (
                day_start(zone, first),
                if last == u32::MAX {
                    u32::MAX
                } else {
                    day_start(zone, last + 1)
                },
            ),
        }
    }
}

/// The quarter at which calendar day `day` (days since 1970-01-01) begins in `zone`: its first
/// instant (after a gap, as at a DST change at midnight, the first that exists), rounded down to
/// a quarter, which it is already in every zone in use today.
#[must_use]
pub fn day_start(zone: &jiff::tz::TimeZone, day: u32) -> u32 {
    let date = crate::domain::cost::date_of(day);
    date.to_zoned_datetime(zone.clone()).map_or(u32::MAX, |z| {
        let ms = z.timestamp().as_millisecond();
        quarter_of(u64::try_from(ms).unwrap_or(0))
    })
}

/// The calendar day, in `zone`, of the instant quarter `q` begins.
#[must_use]
pub fn local_day(zone: &jiff::tz::TimeZone, q: u32) -> u32 {
    let ms = i64::from(q) * 900_000;
    // Past the calendar's end (year 9999): the last day there is.
    jiff::Timestamp::from_millisecond(ms).map_or(u32::MAX, |t| {
        let date = t.to_zoned_datetime(zone.clone()).date();
        u32::try_from((date - jiff::civil::date(1970, 1, 1)).get_days()).unwrap_or(0)
    })
}

/// The UTC hour (hours since the epoch) of a time in epoch milliseconds.
#[must_use]
pub fn hour_of(ms: u64) -> u32 {
    u32::try_from(ms / HOUR_MS).unwrap_or(u32::MAX)
}

/// The counts of one group over some hours.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub clicks: u64,
    pub bound_clicks: u64,
    /// New events by kind, in `EventKind` order (contact, subscribed, registration, deposit).
    pub events: [u64; 4],
    /// Deposit sums by currency, exact.
    pub deposits: BTreeMap<String, Decimal>,
    /// New deposits that were their user's first (`storage/first_deposit.rs`).
    pub first_deposits: u64,
    /// Channel joins and leaves (`storage/channels.rs`: counted in rows of their own).
    pub joins: u64,
    pub leaves: u64,
}

impl Counts {
    #[must_use]
    pub fn click() -> Counts {
        Counts {
            clicks: 1,
            ..Counts::default()
        }
    }

    #[must_use]
    pub fn bound_click() -> Counts {
        Counts {
            bound_clicks: 1,
            ..Counts::default()
        }
    }

    /// One new event; a deposit with a value adds it to its currency's sum, and counts as a
    /// first deposit when `first_deposit`.
    #[must_use]
    pub fn event(
        kind: EventKind,
        value: Option<Decimal>,
        currency: &str,
        first_deposit: bool,
    ) -> Counts {
        let mut c = Counts::default();
        c.events[kind as usize - 1] = 1;
        c.first_deposits = u64::from(first_deposit && kind == EventKind::Deposit);
        if let (EventKind::Deposit, Some(v)) = (kind, value) {
            c.deposits.insert(currency.to_owned(), v);
        }
        c
    }

    /// Adds `other` in. A deposit sum that would overflow 28 significant digits stays at its
    /// last value and the overflow is reported, never wrapped.
    pub fn add(&mut self, other: &Counts) -> Result<(), String> {
        self.clicks += other.clicks;
        self.bound_clicks += other.bound_clicks;
        self.first_deposits += other.first_deposits;
        self.joins += other.joins;
        self.leaves += other.leaves;
        for (mine, theirs) in self.events.iter_mut().zip(other.events) {
            *mine += theirs;
        }
        let mut overflow = Ok(());
        for (currency, amount) in &other.deposits {
            if let Err(e) = self.add_deposit(currency, *amount) {
                overflow = Err(e);
            }
        }
        overflow
    }

    /// Adds `amount` to the deposit sum in `currency`, found by reference (the name is copied
    /// only the first time). A sum that would overflow stays at its last value and the overflow
    /// is reported.
    pub fn add_deposit(&mut self, currency: &str, amount: Decimal) -> Result<(), String> {
        let sum = match self.deposits.get_mut(currency) {
            Some(sum) => sum,
            None => self
                .deposits
                .entry(currency.to_owned())
                .or_insert_with(Decimal::zero),
        };
        match sum.checked_add(amount) {
            Some(s) => *sum = s,
            None => return Err(format!("the {currency} deposit sum overflowed")),
        }
        Ok(())
    }
}

// Also what `tracker stats` decodes from the control socket (hence `Deserialize`).
/// One group of a `GET /stats` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupStats {
    /// The campaign, link slug or UTC day (`2026-11-22`); `null` for events and clicks without
    /// one.
    pub group: Option<String>,
    pub clicks: u64,
    pub bound_clicks: u64,
    /// New events by kind (duplicates are not counted).
    // The kinds' own names, borrowed; owned once decoded from the control socket.
    pub events: BTreeMap<Cow<'static, str>, u64>,
    /// New deposits that were their user's first.
    pub first_deposits: u64,
    /// Deposit sums by currency, as exact decimal strings.
    pub deposits: BTreeMap<String, String>,
    /// What the group's campaigns spent, by currency, exact (`docs/api.md#costs`): by campaign
    /// and by day only (a cost belongs to a campaign's day, not to a link).
    pub cost: BTreeMap<String, String>,
    /// `(revenue - cost) / cost` per currency of the cost, where the revenue has no other
    /// currency.
    pub roi: BTreeMap<String, String>,
    /// Cost per first deposit, per currency of the cost, where there was a first deposit.
    pub cpa: BTreeMap<String, String>,
    /// Revenue per click, per currency of the revenue, where there was a click.
    pub epc: BTreeMap<String, String>,
    /// Users who joined a channel through the group's channel links (a day's and the whole
    /// space's count joins through no tracked link too), and who left one.
    pub joins: u64,
    pub leaves: u64,
    /// Joins less leaves: what the group's channel ads kept (below zero in a period where more
    /// left than joined).
    pub subscribers_kept: i64,
    /// Cost per subscriber kept, per currency of the cost, where some were kept.
    pub cost_per_subscriber: BTreeMap<String, String>,
    /// The funnel's stage rates: `bound` (bound clicks / clicks), `registration`
    /// (registrations / bound clicks), `first_deposit` (first deposits / registrations); `null`
    /// where the stage before had none.
    pub rates: Rates,
    /// The group's money in the space's reporting currency, with any currency that has no
    /// rate named (`docs/api.md#reporting-currency`; made by `domain::reporting`).
    #[serde(default)]
    pub reported: Option<Reported>,
    /// Views of landing pages with the script of the group's links (`docs/landing-pages.md`):
    /// by link, by campaign (its links') and by day; `null` by ad and ad set, which a view does
    /// not know.
    #[serde(default)]
    pub views: Option<u64>,
}

/// A group's money in the reporting currency (`reported` of a `GET /stats` group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Reported {
    /// The reporting currency.
    pub currency: String,
    /// The revenue (every deposit sum) converted, to the cent; `null` without a deposit, or
    /// when a currency of it has no rate.
    pub revenue: Option<String>,
    /// The cost converted, to the cent; `null` when a currency of it has no rate.
    pub cost: Option<String>,
    /// `(revenue - cost) / cost`; `null` without a cost, or when either has an amount without
    /// a rate.
    pub roi: Option<String>,
    /// Cost per first deposit; `null` without a first deposit or a converted cost.
    pub cpa: Option<String>,
    /// Revenue per click; `null` without a click or a converted revenue.
    pub epc: Option<String>,
    /// The currencies of the group's revenue or cost with no rate into the reporting currency.
    pub missing_rates: Vec<String>,
    /// What to do about them, in a sentence; `null` when every amount converted.
    pub fix: Option<String>,
    /// The exact sums `revenue` and `cost` are rounded from, each day at its own rates: what
    /// a period's totals add up. Not in answers.
    #[serde(skip)]
    #[schemars(skip)]
    pub sums: ReportedSums,
}

/// A group's revenue and cost in the reporting currency, exact; `None` where an amount had
/// no rate (or the sum overflowed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportedSums {
    pub revenue: Option<Decimal>,
    pub cost: Option<Decimal>,
}

/// The decimals of a rate, a return or a price per unit (never exact: a quotient).
pub const RATIO_PLACES: u8 = 4;

/// A quotient of the stats (`0.3333`) as the percentage the pages and the command line show,
/// exactly: the point moved two places (`33.33%`; `-1.5000` is `-150.00%`).
#[must_use]
pub fn percent(quotient: &str) -> String {
    let (sign, digits) = quotient
        .strip_prefix('-')
        .map_or(("", quotient), |d| ("-", d));
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction = format!("{fraction:0<2}");
    let (moved, rest) = fraction.split_at(2);
    let whole = format!("{whole}{moved}");
    let whole = match whole.trim_start_matches('0') {
        "" => "0",
        w => w,
    };
    if rest.is_empty() {
        format!("{sign}{whole}%")
    } else {
        format!("{sign}{whole}.{rest}%")
    }
}

/// A group's return (`roi`: currency and quotient) as percentages, given in how many
/// currencies its costs are: `66.67%` when in one, each return with its currency when in more
/// (`300.00% (USD)` for costs in EUR and USD and revenue in USD only: the EUR cost has no
/// return); empty when there is none.
pub fn returns_text<'a>(
    roi: impl Iterator<Item = (&'a str, &'a str)>,
    cost_currencies: usize,
) -> String {
    if cost_currencies == 1 {
        return roi.map(|(_, v)| percent(v)).collect();
    }
    roi.map(|(currency, v)| format!("{} ({currency})", percent(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The funnel's stage rates of a group (see [`GroupStats::rates`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Rates {
    pub bound: Option<String>,
    pub registration: Option<String>,
    pub first_deposit: Option<String>,
    /// Clicks / views of the group's landing pages; `null` without a view.
    #[serde(default)]
    pub view_to_click: Option<String>,
}

/// `n / d` as a rate, `None` when `d` is 0.
fn rate(n: u64, d: u64) -> Option<String> {
    let dec = |x: u64| Decimal::parse(&x.to_string()).ok();
    dec(n)?.ratio(dec(d)?, RATIO_PLACES).map(|r| r.to_string())
}

impl GroupStats {
    /// A group's stats from its counts and what it spent (`cost`, by currency).
    #[must_use]
    pub fn new(
        group: Option<String>,
        counts: &Counts,
        cost: &BTreeMap<String, Decimal>,
    ) -> GroupStats {
        let revenue = &counts.deposits;
        let mut roi = BTreeMap::new();
        let mut cpa = BTreeMap::new();
        let mut cost_per_subscriber = BTreeMap::new();
        let kept = i64::try_from(counts.joins).unwrap_or(i64::MAX)
            - i64::try_from(counts.leaves).unwrap_or(i64::MAX);
        for (currency, spent) in cost {
            let other_revenue = revenue.keys().any(|c| c != currency);
            if !other_revenue {
                let earned = revenue.get(currency).copied().unwrap_or_else(Decimal::zero);
                if let Some(r) = earned
                    .checked_sub(*spent)
                    .and_then(|gain| gain.ratio(*spent, RATIO_PLACES))
                {
                    roi.insert(currency.clone(), r.to_string());
                }
            }
            let firsts = Decimal::parse(&counts.first_deposits.to_string()).ok();
            if let Some(per) = firsts.and_then(|n| spent.ratio(n, RATIO_PLACES)) {
                cpa.insert(currency.clone(), per.to_string());
            }
            let kept = (kept > 0)
                .then(|| Decimal::parse(&kept.to_string()).ok())
                .flatten();
            if let Some(per) = kept.and_then(|n| spent.ratio(n, RATIO_PLACES)) {
                cost_per_subscriber.insert(currency.clone(), per.to_string());
            }
        }
        let clicks = Decimal::parse(&counts.clicks.to_string()).ok();
        let epc = revenue
            .iter()
            .filter_map(|(c, sum)| {
                let per = sum.ratio(clicks?, RATIO_PLACES)?;
                Some((c.clone(), per.to_string()))
            })
            .collect();
        let registrations = counts.events[EventKind::Registration as usize - 1];
        GroupStats {
            cost: cost
                .iter()
                .map(|(c, v)| (c.clone(), v.to_string()))
                .collect(),
            roi,
            cpa,
            epc,
            joins: counts.joins,
            leaves: counts.leaves,
            subscribers_kept: kept,
            cost_per_subscriber,
            rates: Rates {
                bound: rate(counts.bound_clicks, counts.clicks),
                registration: rate(registrations, counts.bound_clicks),
                first_deposit: rate(counts.first_deposits, registrations),
                view_to_click: None,
            },
            group,
            clicks: counts.clicks,
            bound_clicks: counts.bound_clicks,
            events: EventKind::ALL
                .iter()
                .map(|k| (Cow::Borrowed(k.as_str()), counts.events[*k as usize - 1]))
                .collect(),
            first_deposits: counts.first_deposits,
            reported: None,
            views: None,
            deposits: counts
                .deposits
                .iter()
                .map(|(c, v)| (c.clone(), v.to_string()))
                .collect(),
        }
    }
}

impl GroupStats {
    /// The group with its landing pages' views, and the view-to-click rate that follows.
    #[must_use]
    pub fn with_views(mut self, views: Option<u64>) -> GroupStats {
        self.views = views;
        self.rates.view_to_click = views.and_then(|v| rate(self.clicks, v));
        self
    }

    /// New registrations (a stage of the funnel).
    #[must_use]
    pub fn registrations(&self) -> u64 {
        self.events
            .get(EventKind::Registration.as_str())
            .copied()
            .unwrap_or(0)
    }
}

/// The totals of a period (the dashboard's top, a campaign's drill-down): its groups (days, or
/// one campaign) added up, exactly, with the return, prices and rates that follow from the sums.
/// A stored sum that is not a decimal, or a total past 28 significant digits, is an error: a
/// total that silently left it out would look right and be wrong.
pub fn period_totals(groups: &[GroupStats]) -> Result<GroupStats, Error> {
    fn add(
        into: &mut BTreeMap<String, Decimal>,
        from: &BTreeMap<String, String>,
        what: &str,
    ) -> Result<(), Error> {
        for (currency, text) in from {
            let amount = Decimal::parse(text).map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("a stored {what} sum in {currency} is not a decimal ({e})"),
                )
            })?;
            let sum = into.entry(currency.clone()).or_insert_with(Decimal::zero);
            *sum = sum.checked_add(amount).ok_or_else(|| {
                Error::new(
                    Code::Internal,
                    format!("the {what} total in {currency} is past 28 significant digits"),
                )
            })?;
        }
        Ok(())
    }
    let mut counts = Counts::default();
    let mut cost = BTreeMap::new();
    let mut views: Option<u64> = None;
    for g in groups {
        if let Some(v) = g.views {
            views = Some(views.unwrap_or(0) + v);
        }
        counts.clicks += g.clicks;
        counts.bound_clicks += g.bound_clicks;
        counts.first_deposits += g.first_deposits;
        counts.joins += g.joins;
        counts.leaves += g.leaves;
        for (total, kind) in counts.events.iter_mut().zip(EventKind::ALL) {
            *total += g.events.get(kind.as_str()).copied().unwrap_or(0);
        }
        add(&mut counts.deposits, &g.deposits, "deposit")?;
        add(&mut cost, &g.cost, "cost")?;
    }
    Ok(GroupStats::new(None, &counts, &cost).with_views(views))
}

/// The change from `before` to `now` in whole percent, rounded toward zero (`+12`, `-3`);
/// `None` when there was nothing before to compare with.
#[must_use]
pub fn change_percent(now: u64, before: u64) -> Option<i128> {
    (before != 0).then(|| (i128::from(now) - i128::from(before)) * 100 / i128::from(before))
}

/// A stage of the funnel, in order: a click, bound to a user, who registers, then deposits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Clicks,
    BoundClicks,
    Registrations,
    FirstDeposits,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::Clicks,
        Stage::BoundClicks,
        Stage::Registrations,
        Stage::FirstDeposits,
    ];

    /// The stage's count in group `g`.
    #[must_use]
    pub fn count(self, g: &GroupStats) -> u64 {
        match self {
            Stage::Clicks => g.clicks,
            Stage::BoundClicks => g.bound_clicks,
            Stage::Registrations => g.registrations(),
            Stage::FirstDeposits => g.first_deposits,
        }
    }

    /// The share of the stage before that reached this one, in group `g` ([`GroupStats::rates`]);
    /// `None` for the first stage, and where the stage before had none.
    #[must_use]
    pub fn rate(self, g: &GroupStats) -> Option<&str> {
        match self {
            Stage::Clicks => None,
            Stage::BoundClicks => g.rates.bound.as_deref(),
            Stage::Registrations => g.rates.registration.as_deref(),
            Stage::FirstDeposits => g.rates.first_deposit.as_deref(),
        }
    }
}

/// The hours `[from, to)` that `from_ms` (inclusive) and `to_ms` (exclusive) cover, widened to
/// whole UTC hours: the rollup keeps hours, so the answer says which range it counted.
pub fn hours(from_ms: Option<&str>, to_ms: Option<&str>) -> Result<(u32, u32), Error> {
    let ms = |name: &'static str, text: Option<&str>| -> Result<Option<u64>, Error> {
        text.map(|t| {
            t.parse::<u64>().map_err(|_| {
                Error::field(
                    Code::InvalidField,
                    name,
                    format!(
                        "{name} must be epoch milliseconds (a whole number), got {}",
                        crate::domain::input::quoted(t)
                    ),
                )
            })
        })
        .transpose()
    };
    let (from_ms, to_ms) = (ms("from_ms", from_ms)?, ms("to_ms", to_ms)?);
    if let (Some(from), Some(to)) = (from_ms, to_ms)
        && from > to
    {
        return Err(Error::field(
            Code::InvalidField,
            "to_ms",
            "to_ms must not be before from_ms",
        ));
    }
    let from = from_ms.map_or(0, hour_of);
    // The hour count, not its milliseconds: `to_ms` near u64::MAX rounded up to a whole hour
    // in milliseconds overflowed (a panic, answered 500; found by schemathesis).
    let to = to_ms.map_or(u32::MAX, |t| {
        u32::try_from(t.div_ceil(HOUR_MS)).unwrap_or(u32::MAX)
    });
    Ok((from, to))
}

/// The range of `GET /stats`: `from_ms`/`to_ms` (UTC hours), or `from`/`to` (calendar days of
/// the space, both included), not both.
pub fn range(
    (from_ms, to_ms): (Option<&str>, Option<&str>),
    (from, to): (Option<&str>, Option<&str>),
) -> Result<Range, Error> {
    if from.is_some() || to.is_some() {
        if let Some(field) = from_ms.map(|_| "from_ms").or(to_ms.map(|_| "to_ms")) {
            return Err(Error::field(
                Code::InvalidField,
                field,
                format!("{field} and from/to (days) are two ways to give a range: use one"),
            ));
        }
        let (first, last) = crate::domain::cost::day_range(from, to)?;
        return Ok(Range::Days(first, last));
    }
    let (from, to) = hours(from_ms, to_ms)?;
    Ok(Range::Hours(from, to))
}

/// `2026-11-22` for an hour since the epoch.
#[must_use]
pub fn day_label(hour: u32) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(hour) * 3600);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Subscribers kept are joins less leaves, below zero where more left; a cost is priced per
    /// subscriber kept only where some were kept; a period's totals add joins and leaves up.
    #[test]
    fn subscribers_kept_are_joins_less_leaves_and_priced_only_when_some_were_kept() {
        let usd = |v: &str| BTreeMap::from([("USD".to_owned(), Decimal::parse(v).unwrap())]);
        let with = |joins, leaves| Counts {
            joins,
            leaves,
            ..Counts::default()
        };
        let g = GroupStats::new(None, &with(5, 1), &usd("10"));
        assert_eq!((g.joins, g.leaves, g.subscribers_kept), (5, 1, 4));
        assert_eq!(g.cost_per_subscriber["USD"], "2.5000");
        let lost = GroupStats::new(None, &with(1, 3), &usd("10"));
        assert_eq!(lost.subscribers_kept, -2);
        assert!(lost.cost_per_subscriber.is_empty(), "{lost:?}");
        let none = GroupStats::new(None, &with(2, 2), &usd("10"));
        assert!(none.cost_per_subscriber.is_empty(), "{none:?}");
        let total = period_totals(&[g, lost]).unwrap();
        assert_eq!(
            (total.joins, total.leaves, total.subscribers_kept),
            (6, 4, 2)
        );
        assert_eq!(total.cost_per_subscriber["USD"], "10.0000");
    }

    #[test]
    fn a_quotient_is_shown_as_its_exact_percentage() {
        for (quotient, shown) in [
            ("0.3333", "33.33%"),
            ("1.0000", "100.00%"),
            ("0.0000", "0.00%"),
            ("0.0500", "5.00%"),
            ("-1.5000", "-150.00%"),
            ("12.3456", "1234.56%"),
            ("0.5", "50%"),
            ("2", "200%"),
        ] {
            assert_eq!(percent(quotient), shown, "{quotient}");
        }
    }

    #[test]
    fn a_return_names_its_currency_where_costs_are_in_more_than_one() {
        let money = |pairs: &[(&str, &str)]| -> BTreeMap<String, Decimal> {
            pairs
                .iter()
                .map(|(c, v)| ((*c).to_owned(), Decimal::parse(v).unwrap()))
                .collect()
        };
        let shown = |cost: &[(&str, &str)], revenue: &[(&str, &str)]| {
            let counts = Counts {
                deposits: money(revenue),
                ..Counts::default()
            };
            let g = GroupStats::new(None, &counts, &money(cost));
            returns_text(
                g.roi.iter().map(|(c, v)| (c.as_str(), v.as_str())),
                g.cost.len(),
            )
        };
        assert_eq!(shown(&[("USD", "30")], &[("USD", "50")]), "66.67%");
        // Costs in two currencies, revenue in one: only that one has a return, and it is named.
        assert_eq!(
            shown(&[("EUR", "10"), ("USD", "5")], &[("USD", "20")]),
            "300.00% (USD)"
        );
        assert_eq!(
            shown(&[("EUR", "10"), ("USD", "5")], &[]),
            "-100.00% (EUR), -100.00% (USD)"
        );
        assert_eq!(shown(&[], &[("USD", "20")]), "");
    }

    #[test]
    fn counts_add_exactly() {
        let d = |t| Decimal::parse(t).unwrap();
        let mut total = Counts::default();
        total
            .add(&Counts::event(
                EventKind::Deposit,
                Some(d("0.10")),
                "USD",
                true,
            ))
            .unwrap();
        total
            .add(&Counts::event(
                EventKind::Deposit,
                Some(d("0.2")),
                "USD",
                false,
            ))
            .unwrap();
        total
            .add(&Counts::event(
                EventKind::Deposit,
                Some(d("-3")),
                "EUR",
                true,
            ))
            .unwrap();
        total
            .add(&Counts::event(EventKind::Contact, None, "USD", true))
            .unwrap();
        assert_eq!(total.events, [1, 0, 0, 3]);
        assert_eq!(
            total.first_deposits, 2,
            "a contact is never a first deposit"
        );
        assert_eq!(total.deposits["USD"].to_string(), "0.30");
        assert_eq!(total.deposits["EUR"].to_string(), "-3");
    }

    /// A day's group of the stats as the reads give it: counts, and sums as decimal text.
    fn day_group(clicks: u64, deposits: &[(&str, &str)], cost: &[(&str, &str)]) -> GroupStats {
        let text = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(c, v)| ((*c).to_owned(), (*v).to_owned()))
                .collect()
        };
        let counts = Counts {
            clicks,
            bound_clicks: clicks / 2,
            events: [0, 0, clicks / 8, 0],
            first_deposits: 1,
            ..Counts::default()
        };
        let mut g = GroupStats::new(None, &counts, &BTreeMap::new());
        g.deposits = text(deposits);
        g.cost = text(cost);
        g
    }

    #[test]
    fn a_periods_totals_add_its_days_exactly_and_derive_from_the_sums() {
        let days = [
            day_group(8, &[("USD", "0.10")], &[("USD", "0.05")]),
            day_group(4, &[("USD", "0.2"), ("EUR", "-3")], &[]),
        ];
        let total = period_totals(&days).unwrap();
        assert_eq!(
            (total.clicks, total.bound_clicks, total.registrations()),
            (12, 6, 1)
        );
        assert_eq!(total.first_deposits, 2);
        assert_eq!(total.deposits["USD"], "0.30");
        assert_eq!(total.deposits["EUR"], "-3");
        assert_eq!(total.cost["USD"], "0.05");
        assert_eq!(total.rates.bound.as_deref(), Some("0.5000"));
        assert_eq!(period_totals(&[]).unwrap().clicks, 0);
    }

    /// A stored sum that is not a decimal stops the total: counted as zero, the period's
    /// revenue or cost would be shown smaller than it is, with nothing to say so.
    #[test]
    fn a_stored_sum_that_is_not_a_decimal_is_an_error_not_zero() {
        for (deposits, cost) in [
            (&[("USD", "12,50")][..], &[][..]),
            (&[][..], &[("EUR", "ten")][..]),
        ] {
            let days = [
                day_group(1, &[("USD", "1")], &[]),
                day_group(1, deposits, cost),
            ];
            let err = period_totals(&days).unwrap_err();
            assert_eq!(err.code, Code::Internal, "{}", err.message);
            assert!(err.message.contains("not a decimal"), "{}", err.message);
        }
        // 28 places and 28 whole digits: the sum's mantissa is past an i128.
        let (small, large) = (format!("0.{}", "9".repeat(28)), "9".repeat(28));
        let days = [
            day_group(1, &[("USD", &small)], &[]),
            day_group(1, &[("USD", &large)], &[]),
        ];
        assert!(period_totals(&days).is_err(), "an overflow is not a total");
    }

    #[test]
    fn a_change_is_whole_percent_toward_zero_and_none_from_nothing() {
        assert_eq!(change_percent(112, 100), Some(12));
        assert_eq!(change_percent(97, 100), Some(-3));
        assert_eq!(change_percent(1, 3), Some(-66));
        assert_eq!(change_percent(0, 5), Some(-100));
        assert_eq!(change_percent(5, 0), None);
        assert_eq!(change_percent(0, 0), None);
        assert_eq!(
            change_percent(u64::MAX, 1),
            Some(i128::from(u64::MAX - 1) * 100)
        );
    }

    #[test]
    fn each_stage_of_the_funnel_has_its_count_and_its_rate_from_the_one_before() {
        let g = day_group(8, &[], &[]);
        let stages: Vec<(u64, Option<&str>)> = Stage::ALL
            .iter()
            .map(|s| (s.count(&g), s.rate(&g)))
            .collect();
        assert_eq!(
            stages,
            [
                (8, None),
                (4, Some("0.5000")),
                (1, Some("0.2500")),
                (1, Some("1.0000")),
            ]
        );
    }

    #[test]
    fn hours_widen_to_whole_hours() {
        assert_eq!(hours(Some("3600000"), Some("7200000")), Ok((1, 2)));
        assert_eq!(hours(Some("3600001"), Some("7200001")), Ok((1, 3)));
        assert_eq!(hours(Some("3600000"), Some("3600000")), Ok((1, 1)), "empty");
        assert_eq!(hours(None, None), Ok((0, u32::MAX)));
        // Regression: the largest `to_ms` overflowed while rounding up to a whole hour (500).
        assert_eq!(hours(None, Some("18446744073709551615")), Ok((0, u32::MAX)));
        assert_eq!(
            hours(Some("18446744073709551615"), Some("18446744073709551615")),
            Ok((u32::MAX, u32::MAX))
        );
        assert_eq!(hours(Some("x"), None).unwrap_err().field, Some("from_ms"));
        assert_eq!(
            hours(Some("7200000"), Some("3600000")).unwrap_err().field,
            Some("to_ms")
        );
    }

    fn day(text: &str) -> u32 {
        crate::domain::cost::parse_day(text, "day").unwrap()
    }

    fn zone(name: &str) -> jiff::tz::TimeZone {
        jiff::tz::db().get(name).unwrap()
    }

    /// A day of a zone at :30 or :45 begins on a quarter; a DST day is 23 or 25 hours long; and
    /// every quarter of a day is in that day, none of the next.
    #[test]
    fn days_begin_on_quarters_in_every_zone() {
        let utc_day = |d: &str| day(d) * QUARTERS_PER_DAY;
        let cases = [
            ("UTC", "2026-11-24", utc_day("2026-11-24"), 96),
            // 00:00 +05:30 is 18:30 UTC the day before.
            ("Asia/Kolkata", "2026-11-24", utc_day("2026-11-23") + 74, 96),
            // 00:00 +05:45 is 18:15 UTC the day before.
            (
                "Asia/Kathmandu",
                "2026-11-24",
                utc_day("2026-11-23") + 73,
                96,
            ),
            // Spring forward: 23 hours; fall back: 25.
            (
                "Europe/Berlin",
                "2026-03-29",
                utc_day("2026-03-28") + 92,
                92,
            ),
            (
                "Europe/Berlin",
                "2026-10-25",
                utc_day("2026-10-24") + 88,
                100,
            ),
        ];
        for (name, date, start, quarters) in cases {
            let z = zone(name);
            let d = day(date);
            assert_eq!(day_start(&z, d), start, "{name} {date}");
            assert_eq!(day_start(&z, d + 1) - start, quarters, "{name} {date}");
            assert_eq!(local_day(&z, start), d, "{name} {date}: its first quarter");
            assert_eq!(
                local_day(&z, start + quarters - 1),
                d,
                "{name} {date}: its last"
            );
            assert_eq!(
                local_day(&z, start - 1),
                d - 1,
                "{name} {date}: the one before"
            );
        }
        let days = Range::Days(day("2026-11-24"), day("2026-11-24"));
        assert_eq!(
            days.quarters(&zone("Asia/Kolkata")),
            (utc_day("2026-11-23") + 74, utc_day("2026-11-24") + 74)
        );
        assert_eq!(Range::Hours(1, 2).quarters(&zone("Asia/Kolkata")), (4, 8));
    }

    #[test]
    fn a_range_is_hours_or_days_not_both() {
        assert_eq!(
            range((Some("3600000"), None), (None, None)),
            Ok(Range::Hours(1, u32::MAX))
        );
        assert_eq!(
            range((None, None), (Some("2026-11-24"), None)),
            Ok(Range::Days(day("2026-11-24"), u32::MAX))
        );
        assert_eq!(
            range((Some("0"), None), (None, Some("2026-11-24")))
                .unwrap_err()
                .field,
            Some("from_ms")
        );
    }

    #[test]
    fn days_are_utc() {
        assert_eq!(day_label(0), "1970-01-01");
        assert_eq!(day_label(23), "1970-01-01");
        assert_eq!(day_label(24), "1970-01-02");
    }

    /// One campaign by its exact name, at most as long as a click's `campaign_name` may be.
    #[test]
    fn one_campaign_is_named_as_a_click_names_it() {
        let name = |n: usize| "é".repeat(n);
        let one = Grouping::parse(Some("link_slug"), Some(&name(256))).unwrap();
        assert_eq!(
            (one.by, one.campaign.as_deref()),
            (Dimension::Link, Some(name(256).as_str()))
        );
        let err = Grouping::parse(None, Some(&name(257))).unwrap_err();
        assert_eq!(err.field, Some("campaign"));
        assert!(err.message.contains("256"), "{}", err.message);
        assert_eq!(
            Grouping::parse(None, Some(" spaced "))
                .unwrap()
                .campaign
                .as_deref(),
            Some(" spaced ")
        );
        assert_eq!(
            Grouping::parse(None, Some("")).unwrap(),
            Grouping::all(Dimension::Campaign)
        );
        assert_eq!(
            Grouping::parse(Some("week"), Some("a")).unwrap_err().field,
            Some("by")
        );
    }

    #[test]
    fn by_is_one_of_three() {
        assert_eq!(Dimension::parse(Some("day")), Ok(Dimension::Day));
        assert_eq!(Dimension::parse(None), Ok(Dimension::Campaign));
        assert_eq!(
            Dimension::parse(Some("campaign")).unwrap_err().field,
            Some("by")
        );
    }
}
