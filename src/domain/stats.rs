//! Stats (`docs/api.md#stats`): per group, clicks, bound clicks, new events of each kind, and
//! deposit sums per currency, exact.
//!
//! The writer keeps them as counters per space, group and UTC hour (a rollup), updated in the
//! same transaction as what they count, so `GET /stats` reads a few rows instead of the inbox.
//! What is counted where (one rule, here, for the writer, the migration that builds the rollup
//! from an older file, and `tracker check`):
//! - a click counts in the hour it was made, under its `campaign_name` and `link_slug`;
//! - a binding counts as a bound click under the click's hour and groups;
//! - a new event (never a duplicate) counts in the hour of its `occurred_at_ms`, under its
//!   click's groups, or under no group when its `uid` names no click. A click's uid is random, so
//!   a click made later never takes an earlier event's uid: the feed, which joins clicks at read
//!   time, and the stats always agree.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::decimal::Decimal;
use crate::domain::event::EventKind;
use crate::error::{Code, Error};

pub const HOUR_MS: u64 = 3_600_000;
pub const DAY_MS: u64 = 24 * HOUR_MS;

/// How `GET /stats` groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    Campaign,
    Link,
    /// Every count of the space, grouped by UTC day at read time.
    Day,
}

impl Dimension {
    /// The stored discriminant (part of the rollup's key: changing it is a schema version).
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Dimension::Campaign => 0,
            Dimension::Link => 1,
            Dimension::Day => 2,
        }
    }

    pub fn parse(by: Option<&str>) -> Result<Dimension, Error> {
        match by {
            None | Some("campaign_name") => Ok(Dimension::Campaign),
            Some("link_slug") => Ok(Dimension::Link),
            Some("day") => Ok(Dimension::Day),
            Some(other) => Err(Error::field(
                Code::InvalidField,
                "by",
                format!(
                    "by must be campaign_name, link_slug or day, got {}",
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
        }
    }
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
        for (mine, theirs) in self.events.iter_mut().zip(other.events) {
            *mine += theirs;
        }
        let mut overflow = Ok(());
        for (currency, amount) in &other.deposits {
            let sum = self
                .deposits
                .entry(currency.clone())
                .or_insert_with(Decimal::zero);
            match sum.checked_add(*amount) {
                Some(s) => *sum = s,
                None => overflow = Err(format!("the {currency} deposit sum overflowed")),
            }
        }
        overflow
    }
}

/// One group of a `GET /stats` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupStats {
    /// The campaign, link slug or UTC day (`2026-11-22`); `null` for events and clicks without
    /// one.
    pub group: Option<String>,
    pub clicks: u64,
    pub bound_clicks: u64,
    /// New events by kind (duplicates are not counted).
    pub events: BTreeMap<&'static str, u64>,
    /// New deposits that were their user's first.
    pub first_deposits: u64,
    /// Deposit sums by currency, as exact decimal strings.
    pub deposits: BTreeMap<String, String>,
}

impl GroupStats {
    #[must_use]
    pub fn new(group: Option<String>, counts: &Counts) -> GroupStats {
        GroupStats {
            group,
            clicks: counts.clicks,
            bound_clicks: counts.bound_clicks,
            events: EventKind::ALL
                .iter()
                .map(|k| (k.as_str(), counts.events[*k as usize - 1]))
                .collect(),
            first_deposits: counts.first_deposits,
            deposits: counts
                .deposits
                .iter()
                .map(|(c, v)| (c.clone(), v.to_string()))
                .collect(),
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
    if let (Some(from), Some(to)) = (from_ms, to_ms) {
        if from > to {
            return Err(Error::field(
                Code::InvalidField,
                "to_ms",
                "to_ms must not be before from_ms",
            ));
        }
    }
    let from = from_ms.map_or(0, hour_of);
    // The hour count, not its milliseconds: `to_ms` near u64::MAX rounded up to a whole hour
    // in milliseconds overflowed (a panic, answered 500; found by schemathesis).
    let to = to_ms.map_or(u32::MAX, |t| {
        u32::try_from(t.div_ceil(HOUR_MS)).unwrap_or(u32::MAX)
    });
    Ok((from, to))
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

    #[test]
    fn days_are_utc() {
        assert_eq!(day_label(0), "1970-01-01");
        assert_eq!(day_label(23), "1970-01-01");
        assert_eq!(day_label(24), "1970-01-02");
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
