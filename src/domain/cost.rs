//! Costs (`docs/api.md#costs`): what a campaign spent on a day, as the ad network reports it, so
//! that stats can put revenue against it. One rule for every way in: `POST /costs`, `tracker
//! costs import` and the CSV import (our columns, or the header of Meta Ads Manager's daily
//! export).
//!
//! A cost is keyed by the space's calendar day (in its time zone), the campaign name, the ad set
//! name and the ad name (both optional, "" for the campaign as a whole); setting it again
//! replaces it, an amount of 0 removes it. It remembers where it came from ([`Source`]): set by
//! hand (`POST /costs`, a CSV) or fetched from Meta's insights, which replaces only what it
//! fetched before. Amounts are exact decimals; nothing is converted between currencies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::domain::decimal::Decimal;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// The longest campaign name, as a click's `campaign_name`.
pub const MAX_CAMPAIGN_CHARS: usize = crate::domain::click::CAMPAIGN_NAME_MAX_CHARS;
/// The longest ad set or ad name (Meta's names, and a click's `utm_term` or `utm_content`).
pub const MAX_AD_CHARS: usize = 512;
/// The most rows one import takes: 90 days of 1000 campaigns, and some.
pub const MAX_IMPORT_ROWS: usize = 100_000;

/// Our CSV's columns, in the order of the template the admin page offers; an import finds them
/// by name, in any order.
pub const CSV_COLUMNS: [&str; 4] = ["day", "campaign_name", "amount", "currency"];
/// Our CSV's optional columns: the ad set and the ad a cost is of (absent or empty: the whole
/// campaign, or the whole ad set).
pub const CSV_AD_COLUMNS: [&str; 2] = ["adset_name", "ad_name"];
/// The same two in the header of Meta Ads Manager's export (lower case, as compared).
const META_AD_COLUMNS: [&str; 2] = ["ad set name", "ad name"];

/// Where a cost came from: what a fetch from Meta replaces is only what it fetched before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Source {
    /// `POST /costs`, a CSV import (the admin page, `tracker costs import`).
    #[default]
    Hand,
    /// Meta's insights, fetched by the tracker.
    Meta,
}

impl Source {
    /// The stored byte (part of the cost record: changing it is a schema version).
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Source::Hand => 0,
            Source::Meta => 1,
        }
    }

    /// The source of a stored byte; an unknown byte reads as set by hand, which a fetch leaves.
    #[must_use]
    pub fn of_code(code: u8) -> Source {
        if code == 1 {
            Source::Meta
        } else {
            Source::Hand
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Hand => "hand",
            Source::Meta => "meta",
        }
    }
}

/// A calendar day as days since 1970-01-01, as the cost table keys it.
pub type Day = u32;

/// What one campaign, ad set or ad spent on one day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cost {
    pub day: Day,
    pub campaign_name: String,
    /// The ad set, "" for the campaign as a whole.
    pub adset_name: String,
    /// The ad, "" for the ad set (or campaign) as a whole.
    pub ad_name: String,
    pub amount: Decimal,
    pub currency: String,
    pub source: Source,
}

/// A cost as every way out shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CostView {
    pub day: String,
    pub campaign_name: String,
    /// The ad set, "" for the campaign as a whole.
    pub adset_name: String,
    /// The ad, "" for the ad set (or campaign) as a whole.
    pub ad_name: String,
    pub amount: String,
    pub currency: String,
    /// `hand` (`POST /costs`, a CSV import) or `meta` (fetched from Meta's insights).
    pub source: String,
}

impl From<&Cost> for CostView {
    fn from(c: &Cost) -> CostView {
        CostView {
            day: day_text(c.day),
            campaign_name: c.campaign_name.clone(),
            adset_name: c.adset_name.clone(),
            ad_name: c.ad_name.clone(),
            amount: c.amount.to_string(),
            currency: c.currency.clone(),
            source: c.source.as_str().to_owned(),
        }
    }
}

fn epoch() -> jiff::civil::Date {
    jiff::civil::date(1970, 1, 1)
}

/// `2026-11-24` as a [`Day`]; `field` names the field in the error.
pub fn parse_day(text: &str, field: &'static str) -> Result<Day, Error> {
    let bad = || {
        Error::field(
            Code::InvalidField,
            field,
            format!(
                "{field} must be a calendar day YYYY-MM-DD from 1970-01-01, got {}",
                quoted(text)
            ),
        )
    };
    if text.len() != 10 {
        return Err(bad());
    }
    let date: jiff::civil::Date = text.parse().map_err(|_| bad())?;
    let days = (date - epoch()).get_days();
    Day::try_from(days).map_err(|_| bad())
}

/// The text of a [`Day`]: `2026-11-24`.
#[must_use]
pub fn day_text(day: Day) -> String {
    date_of(day).to_string()
}

/// The calendar date of a [`Day`].
#[must_use]
pub fn date_of(day: Day) -> jiff::civil::Date {
    // `Span::days` panics past its range (about 20,000 years), which a `from_ms` in the year
    // 13600 reached (found by schemathesis): every day past the last date is that date.
    jiff::Span::new()
        .try_days(i64::from(day))
        .ok()
        .and_then(|span| epoch().checked_add(span).ok())
        .unwrap_or(jiff::civil::Date::MAX)
}

/// A required field of a JSON body.
fn required<'a>(raw: Option<&'a RawValue>, field: &'static str) -> Result<&'a RawValue, Error> {
    raw.ok_or_else(|| Error::field(Code::MissingField, field, format!("{field} is required")))
}

/// The days `[from, to]` of `GET /costs?from=&to=` (both included; absent: no bound).
pub fn day_range(from: Option<&str>, to: Option<&str>) -> Result<(Day, Day), Error> {
    let from = from.map(|t| parse_day(t, "from")).transpose()?.unwrap_or(0);
    let to = to
        .map(|t| parse_day(t, "to"))
        .transpose()?
        .unwrap_or(Day::MAX);
    if to < from {
        return Err(Error::field(
            Code::InvalidField,
            "to",
            "to must not be before from",
        ));
    }
    Ok((from, to))
}

/// An ad set or ad name as sent, checked: at most [`MAX_AD_CHARS`] characters (the spaces
/// around it included), then trimmed; "" (or only spaces) for none.
fn ad_part(text: &str, field: &'static str) -> Result<String, Error> {
    let chars = text.chars().count();
    if chars > MAX_AD_CHARS {
        return Err(Error::field(
            Code::InvalidField,
            field,
            format!("{field} must be at most {MAX_AD_CHARS} characters, got {chars}"),
        ));
    }
    Ok(text.trim().to_owned())
}

/// The ad set and ad of a cost, as sent: either may be empty.
#[derive(Clone, Copy, Debug, Default)]
pub struct AdNames<'a> {
    pub adset_name: &'a str,
    pub ad_name: &'a str,
}

impl Cost {
    /// One cost of a campaign as a whole from its four fields as text, checked, set by hand.
    pub fn new(
        day: &str,
        campaign_name: &str,
        amount: &str,
        currency: &str,
    ) -> Result<Cost, Error> {
        Cost::of_ad(day, campaign_name, AdNames::default(), amount, currency)
    }

    /// One cost of a campaign, ad set or ad from its fields as text, checked, set by hand (a
    /// fetch from Meta sets [`Cost::source`] after).
    pub fn of_ad(
        day: &str,
        campaign_name: &str,
        ad: AdNames<'_>,
        amount: &str,
        currency: &str,
    ) -> Result<Cost, Error> {
        let day = parse_day(day.trim(), "day")?;
        // The bound holds for the name as sent; the spaces around it are then dropped.
        let chars = campaign_name.chars().count();
        let campaign_name = campaign_name.trim();
        if campaign_name.is_empty() || chars > MAX_CAMPAIGN_CHARS {
            return Err(Error::field(
                Code::InvalidField,
                "campaign_name",
                format!(
                    "campaign_name must be 1 to {MAX_CAMPAIGN_CHARS} characters, not only \
                     spaces, got {chars}"
                ),
            ));
        }
        let amount = amount.trim();
        // Digits first: no sign (not even `-0`), no bare `.5`.
        let amount = Decimal::parse(amount)
            .ok()
            .filter(|_| amount.starts_with(|c: char| c.is_ascii_digit()))
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidValue,
                    "amount",
                    format!(
                        "amount must be a decimal number of at least 0 such as 120.50, got {}",
                        quoted(amount)
                    ),
                )
            })?;
        let currency = crate::domain::event::check_currency(currency.trim())?;
        let adset_name = ad_part(ad.adset_name, "adset_name")?;
        let ad_name = ad_part(ad.ad_name, "ad_name")?;
        Ok(Cost {
            day,
            campaign_name: campaign_name.to_owned(),
            adset_name,
            ad_name,
            amount,
            currency,
            source: Source::Hand,
        })
    }

    /// A `POST /costs` body: `{"day", "campaign_name", "amount", "currency"}`, all required,
    /// and `adset_name`, `ad_name`, optional; `amount` a string or a JSON number.
    pub fn from_json(body: &[u8]) -> Result<Cost, Error> {
        let b: CostBody = input::parse_body(body)?;
        let day = input::json_string(required(b.day, "day")?, "day")?;
        let campaign =
            input::json_string(required(b.campaign_name, "campaign_name")?, "campaign_name")?;
        let amount_raw = required(b.amount, "amount")?;
        let amount = match input::json_number_text(amount_raw) {
            Some(n) => n.to_owned(),
            None => input::json_string(amount_raw, "amount")?,
        };
        let currency = input::json_string(required(b.currency, "currency")?, "currency")?;
        let optional = |raw: Option<&RawValue>, field| match raw {
            None => Ok(String::new()),
            Some(raw) if raw.get() == "null" => Ok(String::new()),
            Some(raw) => input::json_string(raw, field),
        };
        let adset_name = optional(b.adset_name, "adset_name")?;
        let ad_name = optional(b.ad_name, "ad_name")?;
        let ad = AdNames {
            adset_name: &adset_name,
            ad_name: &ad_name,
        };
        Cost::of_ad(&day, &campaign, ad, &amount, &currency)
    }

    /// The campaign, with its ad set and ad where it has them: `autumn / broad / video-1`.
    #[must_use]
    pub fn label(&self) -> String {
        let mut label = self.campaign_name.clone();
        for part in [&self.adset_name, &self.ad_name] {
            if !part.is_empty() {
                label.push_str(" / ");
                label.push_str(part);
            }
        }
        label
    }
}

/// The body of `POST /costs`: every field required but the ad set and the ad.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostBody<'a> {
    /// `YYYY-MM-DD`, a calendar day of the space's time zone, from 1970-01-01.
    #[serde(borrow)]
    #[schemars(
        with = "String",
        pattern(r"^(19[7-9][0-9]|[2-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")
    )]
    day: Option<&'a RawValue>,
    /// 1 to 256 characters, not only spaces (spaces around it are dropped).
    #[serde(borrow)]
    #[schemars(with = "String", length(min = 1, max = MAX_CAMPAIGN_CHARS))]
    campaign_name: Option<&'a RawValue>,
    /// An exact decimal of at least 0 (`120.50`, `1e3`); 0 removes the cost.
    #[serde(borrow)]
    #[schemars(with = "CostAmountJson")]
    amount: Option<&'a RawValue>,
    /// 3 to 10 letters or digits.
    #[serde(borrow)]
    #[schemars(with = "String", pattern(r"^[A-Za-z0-9]{3,10}$"))]
    currency: Option<&'a RawValue>,
    /// The ad set (a click's `utm_term`): at most 512 characters; absent or "" for the campaign
    /// as a whole.
    #[serde(borrow, default)]
    #[schemars(with = "Option<String>", length(max = MAX_AD_CHARS))]
    adset_name: Option<&'a RawValue>,
    /// The ad (a click's `utm_content`): at most 512 characters; absent or "" for the ad set (or
    /// campaign) as a whole.
    #[serde(borrow, default)]
    #[schemars(with = "Option<String>", length(max = MAX_AD_CHARS))]
    ad_name: Option<&'a RawValue>,
}

// Read by `Cost::new`; this type only describes it in `/openapi.json`.
/// A cost's amount: a string that starts with a digit, or a JSON number of at least 0.
#[derive(schemars::JsonSchema)]
#[schemars(untagged)]
pub enum CostAmountJson {
    Text(#[schemars(pattern(r"^[0-9]"))] String),
    Number(#[schemars(range(min = 0))] f64),
}

/// Which column holds what, from a CSV's header row.
struct Columns {
    day: usize,
    campaign: usize,
    amount: usize,
    /// The currency column, or for Meta's export the currency its amount column names.
    currency: Result<usize, String>,
    /// The ad set and ad columns, where the file has them.
    adset: Option<usize>,
    ad: Option<usize>,
}

impl Columns {
    fn of(header: &csv::StringRecord) -> Result<Columns, Error> {
        let names: Vec<String> = header
            .iter()
            .map(|h| h.trim_start_matches('\u{feff}').trim().to_ascii_lowercase())
            .collect();
        let find = |name: &str| names.iter().position(|n| n == name);
        let [day, campaign, amount, currency] = CSV_COLUMNS.map(find);
        if let (Some(day), Some(campaign), Some(amount), Some(currency)) =
            (day, campaign, amount, currency)
        {
            let [adset, ad] = CSV_AD_COLUMNS.map(find);
            return Ok(Columns {
                day,
                campaign,
                amount,
                currency: Ok(currency),
                adset,
                ad,
            });
        }
        let spent = names.iter().enumerate().find_map(|(i, n)| {
            let currency = n.strip_prefix("amount spent (")?.strip_suffix(')')?;
            Some((i, currency.to_ascii_uppercase()))
        });
        if let (Some(day), Some(campaign), Some((amount, currency))) =
            (find("day"), find("campaign name"), spent)
        {
            let [adset, ad] = META_AD_COLUMNS.map(find);
            return Ok(Columns {
                day,
                campaign,
                amount,
                currency: Err(currency),
                adset,
                ad,
            });
        }
        Err(Error::field(
            Code::InvalidField,
            "csv",
            "line 1: the header must have the columns day,campaign_name,amount,currency, or \
             Meta Ads Manager's Day, Campaign name and Amount spent (USD) (the currency in \
             brackets)",
        ))
    }
}

/// The costs of a CSV file, and how many rows it had (blank lines left out): an import reports
/// the rows, days and campaigns it read, so the marketer sees that the whole file went in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvCosts {
    /// One per day, campaign, ad set and ad, in that order.
    pub costs: Vec<Cost>,
    pub rows: usize,
}

impl CsvCosts {
    /// The first and the last day the file names; `None` for a file of no rows.
    #[must_use]
    pub fn days_span(&self) -> Option<(Day, Day)> {
        Some((self.costs.first()?.day, self.costs.last()?.day))
    }

    /// How many different days the file names.
    #[must_use]
    pub fn days(&self) -> usize {
        let mut days: Vec<Day> = self.costs.iter().map(|c| c.day).collect();
        days.dedup();
        days.len()
    }

    /// How many different campaigns the file names.
    #[must_use]
    pub fn campaigns(&self) -> usize {
        self.costs
            .iter()
            .map(|c| c.campaign_name.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }
}

/// The line a record starts on, counted in the text: the reader's own count leaves blank lines
/// out, and its position is before the blank lines it skipped. Records come in order, so the
/// count goes on from the last record's start: the whole file is read once, not once per row.
struct LineCounter<'a> {
    text: &'a str,
    /// A byte offset already counted, and the line it is on.
    counted: usize,
    line: u64,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> LineCounter<'a> {
        LineCounter {
            text,
            counted: 0,
            line: 1,
        }
    }

    fn line_at(&mut self, p: &csv::Position) -> u64 {
        let bytes = self.text.as_bytes();
        let mut start = usize::try_from(p.byte())
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        while matches!(bytes.get(start), Some(b'\n' | b'\r')) {
            start += 1;
        }
        if start < self.counted {
            // Not met with the reader's ordered records; counted afresh, still right.
            self.counted = 0;
            self.line = 1;
        }
        self.line += self
            .text
            .get(self.counted..start)
            .map_or(0, |t| t.matches('\n').count()) as u64;
        self.counted = start;
        self.line
    }
}

/// Every cost of a CSV file: a header row (ours or Meta's, [`Columns`]) and one cost per row. A
/// row with an empty amount spent (Meta's export writes none for a day without spend) is a
/// cost of 0. The ad set and ad columns are optional (ours `adset_name`, `ad_name`; Meta's `Ad
/// set name`, `Ad name`). Rows of the same day, campaign, ad set and ad add up (an export by
/// age or placement has several); in two currencies they are refused. The error names the line
/// at fault.
pub fn parse_csv(text: &str) -> Result<CsvCosts, Error> {
    type Key = (Day, String, String, String);
    let mut lines = LineCounter::new(text);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let at_line =
        |line: u64, e: &Error| Error::field(e.code, "csv", format!("line {line}: {}", e.message));
    let header = reader
        .headers()
        .map_err(|e| Error::field(Code::InvalidField, "csv", format!("line 1: {e}")))?
        .clone();
    let columns = Columns::of(&header)?;
    let mut costs: BTreeMap<Key, (Cost, u64)> = BTreeMap::new();
    let mut rows = 0;
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(row as u64 + 2, |p| lines.line_at(p));
            Error::field(Code::InvalidField, "csv", format!("line {line}: {e}"))
        })?;
        let line = record
            .position()
            .map_or(row as u64 + 2, |p| lines.line_at(p));
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        if row >= MAX_IMPORT_ROWS {
            return Err(Error::field(
                Code::InvalidField,
                "csv",
                format!(
                    "line {line}: an import takes at most {MAX_IMPORT_ROWS} rows; split the file"
                ),
            ));
        }
        let field = |i: usize| record.get(i).unwrap_or("");
        let amount = match field(columns.amount).trim() {
            "" => "0",
            a => a,
        };
        let currency = match &columns.currency {
            Ok(i) => field(*i),
            Err(named) => named.as_str(),
        };
        let ad = AdNames {
            adset_name: columns.adset.map_or("", field),
            ad_name: columns.ad.map_or("", field),
        };
        let cost = Cost::of_ad(
            field(columns.day),
            field(columns.campaign),
            ad,
            amount,
            currency,
        )
        .map_err(|e| at_line(line, &e))?;
        rows += 1;
        let key = (
            cost.day,
            cost.campaign_name.clone(),
            cost.adset_name.clone(),
            cost.ad_name.clone(),
        );
        match costs.entry(key) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((cost, line));
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let (sum, first_line) = o.get_mut();
                if sum.currency != cost.currency {
                    return Err(Error::field(
                        Code::InvalidCurrency,
                        "csv",
                        format!(
                            "line {line}: {} on {} is in {} here and in {} on line {first_line}; \
                             a campaign's day has one currency",
                            quoted(&cost.label()),
                            day_text(cost.day),
                            cost.currency,
                            sum.currency
                        ),
                    ));
                }
                sum.amount = sum.amount.checked_add(cost.amount).ok_or_else(|| {
                    Error::field(
                        Code::InvalidValue,
                        "csv",
                        format!("line {line}: the sum overflows"),
                    )
                })?;
            }
        }
    }
    Ok(CsvCosts {
        costs: costs.into_values().map(|(c, _)| c).collect(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_calendar_days_from_1970() {
        assert_eq!(parse_day("1970-01-01", "day"), Ok(0));
        assert_eq!(
            parse_day("2026-11-24", "day").map(day_text),
            Ok("2026-11-24".into())
        );
        for bad in [
            "1969-12-31",
            "2026-02-30",
            "2026-1-1",
            "24.11.2026",
            "",
            "2026-11-24T00",
        ] {
            assert_eq!(
                parse_day(bad, "day").unwrap_err().field,
                Some("day"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_day_past_the_last_date_is_the_last_date() {
        let last = jiff::civil::date(9999, 12, 31);
        let days = u32::try_from((last - epoch()).get_days()).unwrap();
        assert_eq!(date_of(days), last);
        assert_eq!(date_of(days - 1), jiff::civil::date(9999, 12, 30));
        // Just past jiff's own range of a span's days, and the farthest day there is.
        for far in [days + 1, 7_304_485, u32::MAX] {
            assert_eq!(date_of(far), jiff::civil::Date::MAX, "{far}");
        }
    }

    #[test]
    fn amounts_are_exact_and_never_negative() {
        let c = Cost::new("2026-11-24", "autumn", "120.10", "usd").unwrap();
        assert_eq!(
            (c.amount.to_string(), c.currency.as_str()),
            ("120.10".into(), "USD")
        );
        assert!(Cost::new("2026-11-24", "autumn", "0", "USD").is_ok());
        for bad in ["-0.01", "-0", ".5", "x", ""] {
            let e = Cost::new("2026-11-24", "autumn", bad, "USD").unwrap_err();
            assert_eq!(e.field, Some("amount"), "{bad:?}");
        }
        assert_eq!(
            Cost::new("2026-11-24", "autumn", "1e3", "USD")
                .unwrap()
                .amount
                .to_string(),
            "1000"
        );
        assert_eq!(
            Cost::new("2026-11-24", " ", "1", "USD").unwrap_err().field,
            Some("campaign_name")
        );
        let long = "x".repeat(MAX_CAMPAIGN_CHARS);
        assert!(Cost::new("2026-11-24", &long, "1", "USD").is_ok());
        assert!(Cost::new("2026-11-24", &format!("{long}x"), "1", "USD").is_err());
        // The bound is on the name as sent, spaces around it included.
        assert!(Cost::new("2026-11-24", &format!(" {long}"), "1", "USD").is_err());
    }

    #[test]
    fn our_columns_and_metas_header_both_import() {
        let ours =
            parse_csv("day,campaign_name,amount,currency\n2026-11-24,autumn,120.00,USD\n").unwrap();
        assert_eq!(ours.costs[0].amount.to_string(), "120.00");
        let meta = "\u{feff}Reporting starts,Reporting ends,Campaign name,Day,Amount spent (EUR)\n\
                    2026-11-01,2026-11-30,autumn,2026-11-24,10.5\n\
                    2026-11-01,2026-11-30,autumn,2026-11-24,0.25\n\
                    2026-11-01,2026-11-30,winter,2026-11-25,\n";
        let read = parse_csv(meta).unwrap();
        assert_eq!(
            (read.rows, read.days(), read.campaigns(), read.days_span()),
            (3, 2, 2, Some((20781, 20782)))
        );
        let seen: Vec<_> = read
            .costs
            .iter()
            .map(|c| {
                (
                    day_text(c.day),
                    c.campaign_name.as_str(),
                    c.amount.to_string(),
                    c.currency.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("2026-11-24".into(), "autumn", "10.75".into(), "EUR"),
                ("2026-11-25".into(), "winter", "0".into(), "EUR")
            ]
        );
    }

    #[test]
    fn ad_sets_and_ads_are_optional_and_bounded() {
        let ad = |adset_name, ad_name| AdNames {
            adset_name,
            ad_name,
        };
        let c = Cost::of_ad("2026-11-24", "autumn", ad(" broad ", "v1"), "1", "USD").unwrap();
        assert_eq!((c.adset_name.as_str(), c.ad_name.as_str()), ("broad", "v1"));
        assert_eq!(c.label(), "autumn / broad / v1");
        let long = "x".repeat(MAX_AD_CHARS);
        let over = format!("{long}x");
        assert!(Cost::of_ad("2026-11-24", "a", ad(&long, &long), "1", "USD").is_ok());
        for (adset, ad_name, field) in [(&over, &long, "adset_name"), (&long, &over, "ad_name")] {
            let e = Cost::of_ad("2026-11-24", "a", ad(adset, ad_name), "1", "USD").unwrap_err();
            assert_eq!(e.field, Some(field));
        }
        let body = br#"{"day":"2026-11-24","campaign_name":"a","adset_name":"s","ad_name":"d","amount":1,"currency":"USD"}"#;
        let c = Cost::from_json(body).unwrap();
        assert_eq!((c.adset_name.as_str(), c.ad_name.as_str()), ("s", "d"));
        let plain = br#"{"day":"2026-11-24","campaign_name":"a","amount":1,"currency":"USD"}"#;
        assert_eq!(Cost::from_json(plain).unwrap().adset_name, "");
        let bad =
            br#"{"day":"2026-11-24","campaign_name":"a","ad_name":7,"amount":1,"currency":"USD"}"#;
        assert_eq!(Cost::from_json(bad).unwrap_err().field, Some("ad_name"));
    }

    #[test]
    fn csv_rows_are_kept_per_ad_set_and_ad() {
        let ours = "day,campaign_name,adset_name,ad_name,amount,currency\n\
                    2026-11-24,a,s1,d1,1,USD\n2026-11-24,a,s1,d2,2,USD\n2026-11-24,a,s1,d1,3,USD\n";
        let read = parse_csv(ours).unwrap();
        let seen: Vec<_> = read
            .costs
            .iter()
            .map(|c| (c.label(), c.amount.to_string()))
            .collect();
        assert_eq!(
            seen,
            [
                ("a / s1 / d1".into(), "4".into()),
                ("a / s1 / d2".into(), "2".into())
            ]
        );
        let meta = "Day,Campaign name,Ad set name,Ad name,Amount spent (EUR)\n\
                    2026-11-24,a,s1,d1,1.5\n";
        let c = &parse_csv(meta).unwrap().costs[0];
        assert_eq!(
            (c.label(), c.currency.as_str()),
            ("a / s1 / d1".into(), "EUR")
        );
        let long = format!(
            "day,campaign_name,ad_name,amount,currency\n2026-11-24,a,{},1,USD\n",
            "x".repeat(MAX_AD_CHARS + 1)
        );
        let e = parse_csv(&long).unwrap_err();
        assert!(e.message.starts_with("line 2: ad_name"), "{}", e.message);
    }

    #[test]
    fn a_bad_row_names_its_line() {
        let text = "day,campaign_name,amount,currency\n2026-11-24,a,1,USD\n\n2026-11-25,b,x,USD\n";
        let e = parse_csv(text).unwrap_err();
        assert!(e.message.starts_with("line 4: amount"), "{}", e.message);
        let e = parse_csv("date,campaign,spend\n").unwrap_err();
        assert!(e.message.starts_with("line 1:"), "{}", e.message);
        let two = "day,campaign_name,amount,currency\n2026-11-24,a,1,USD\n2026-11-24,a,1,EUR\n";
        let e = parse_csv(two).unwrap_err();
        assert!(
            e.message.starts_with("line 3:") && e.message.contains("line 2"),
            "{}",
            e.message
        );
    }
}
