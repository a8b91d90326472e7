//! The rollup's rows (`STATS`) and a campaign's costs (`COSTS`), and how a reader reads either
//! in place, borrowing its text from the stored bytes.

use serde::{Deserialize, Serialize};

use super::codec::{Record, decode, from_postcard, postcard_in_place, unreadable_version};
use crate::storage::error::StoreError;

/// The counts of one rollup row (`STATS`). Deposit sums are exact decimal text. Version 2
/// (schema 10) adds `first_deposits` at the end; version 1 rows read with none.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsRecord {
    pub clicks: u64,
    pub bound_clicks: u64,
    /// New events by kind: contact, subscribed, registration, deposit.
    pub events: [u64; 4],
    pub deposits: Vec<(String, String)>,
    pub first_deposits: u64,
}
impl Record for StatsRecord {
    const VERSION: u8 = 2;
    const NAME: &'static str = "stats";

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        match version {
            1 => from_postcard::<StatsRecordV1>(body).map(|r| StatsRecord {
                clicks: r.clicks,
                bound_clicks: r.bound_clicks,
                events: r.events,
                deposits: r.deposits,
                first_deposits: 0,
            }),
            2 => from_postcard(body),
            v => Err(unreadable_version::<Self>(v)),
        }
    }
}

/// A stored [`StatsRecord`] read in place, its deposit sums' text borrowed from the stored
/// bytes: `GET /stats` adds up thousands of rows a request, and copying each row's currency and
/// sum cost more than the rest of the read. The same fields in the same order as the record
/// (a unit test compares the two).
#[derive(Deserialize, Debug, PartialEq, Eq)]
pub struct StatsRow<'a> {
    pub clicks: u64,
    pub bound_clicks: u64,
    pub events: [u64; 4],
    #[serde(borrow)]
    pub deposits: Vec<(&'a str, &'a str)>,
    pub first_deposits: u64,
}

impl StatsRecord {
    /// The row as [`StatsRow`] shows it.
    #[must_use]
    fn row(&self) -> StatsRow<'_> {
        StatsRow {
            clicks: self.clicks,
            bound_clicks: self.bound_clicks,
            events: self.events,
            deposits: self
                .deposits
                .iter()
                .map(|(c, s)| (c.as_str(), s.as_str()))
                .collect(),
            first_deposits: self.first_deposits,
        }
    }
}

/// Calls `f` with the stats row `bytes` holds: read in place when it has the current version,
/// through [`StatsRecord`] when it is older.
pub fn with_stats_row<T>(
    bytes: &[u8],
    f: impl FnOnce(&StatsRow<'_>) -> T,
) -> Result<T, StoreError> {
    match bytes.split_first() {
        Some((&StatsRecord::VERSION, body)) => Ok(f(&postcard_in_place(StatsRecord::NAME, body)?)),
        _ => Ok(f(&decode::<StatsRecord>(bytes)?.row())),
    }
}

/// A stored [`CostRecord`] read in place. The same fields in the same order as the record.
#[derive(Deserialize, Debug, PartialEq, Eq)]
pub struct CostRow<'a> {
    pub amount: &'a str,
    pub currency: &'a str,
    pub source: u8,
}

/// Calls `f` with the cost `bytes` holds: read in place when it has the current version,
/// through [`CostRecord`] when it is older.
pub fn with_cost_row<T>(bytes: &[u8], f: impl FnOnce(&CostRow<'_>) -> T) -> Result<T, StoreError> {
    if let Some((&CostRecord::VERSION, body)) = bytes.split_first() {
        return Ok(f(&postcard_in_place(CostRecord::NAME, body)?));
    }
    let record = decode::<CostRecord>(bytes)?;
    Ok(f(&CostRow {
        amount: &record.amount,
        currency: &record.currency,
        source: record.source,
    }))
}

/// The shape of a `StatsRecord` of version 1 (schemas 3 to 8).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsRecordV1 {
    pub clicks: u64,
    pub bound_clicks: u64,
    pub events: [u64; 4],
    pub deposits: Vec<(String, String)>,
}
impl Record for StatsRecordV1 {
    const VERSION: u8 = 1;
    const NAME: &'static str = "stats";
}

/// What a campaign, ad set or ad spent on a day (`COSTS`): the exact decimal text, its
/// currency, and where it came from (`domain::cost::Source::code`). Version 2 (schema 14) adds
/// `source` at the end; a version 1 body (schemas 10 to 13, in `COSTS_V10`) reads as set by
/// hand.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CostRecord {
    pub amount: String,
    pub currency: String,
    pub source: u8,
}
impl Record for CostRecord {
    const VERSION: u8 = 2;
    const NAME: &'static str = "cost";

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        match version {
            1 => {
                let mut v2 = body.to_vec();
                v2.push(0);
                from_postcard(&v2)
            }
            2 => from_postcard(body),
            v => Err(unreadable_version::<Self>(v)),
        }
    }
}

/// The sum of a campaign's or the whole space's costs over a day or a block of days
/// (`COST_SUMS`), by currency: each currency once, in order, its sum as exact decimal text.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct CostSumRecord {
    pub sums: Vec<(String, String)>,
}
impl Record for CostSumRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "cost sum";
}

/// A stored [`CostSumRecord`] read in place: its currencies and sums borrowed from the stored
/// bytes. The same fields in the same order as the record.
#[derive(Deserialize, Debug, PartialEq, Eq)]
pub struct CostSumRow<'a> {
    #[serde(borrow)]
    pub sums: Vec<(&'a str, &'a str)>,
}

/// Calls `f` with the cost sum `bytes` holds, read in place.
pub fn with_cost_sum_row<T>(
    bytes: &[u8],
    f: impl FnOnce(&CostSumRow<'_>) -> T,
) -> Result<T, StoreError> {
    if let Some((&CostSumRecord::VERSION, body)) = bytes.split_first() {
        return Ok(f(&postcard_in_place(CostSumRecord::NAME, body)?));
    }
    let record = decode::<CostSumRecord>(bytes)?;
    let sums = record
        .sums
        .iter()
        .map(|(c, s)| (c.as_str(), s.as_str()))
        .collect();
    Ok(f(&CostSumRow { sums }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::codec::tests::assert_golden;
    use crate::storage::records::encode;

    #[test]
    fn cost_record_bytes_are_stable() {
        let cost = CostRecord {
            amount: "120.50".into(),
            currency: "USD".into(),
            source: 1,
        };
        let bytes = [&[2, 6][..], b"120.50", &[3], b"USD", &[1]].concat();
        assert_golden(&cost, &bytes);
        // Version 1, as schemas 10 to 13 wrote it: set by hand.
        let v1 = [&[1, 6][..], b"120.50", &[3], b"USD"].concat();
        let read: CostRecord = decode(&v1).unwrap();
        assert_eq!(read, CostRecord { source: 0, ..cost });
        assert_eq!(
            with_cost_row(&v1, |r| r.source).unwrap(),
            0,
            "an old row reads through the record"
        );
    }

    #[test]
    fn cost_sum_record_bytes_are_stable() {
        let sum = CostSumRecord {
            sums: vec![
                ("EUR".into(), "7.5".into()),
                ("USD".into(), "120.50".into()),
            ],
        };
        let bytes = [
            &[1, 2, 3][..],
            b"EUR",
            &[3],
            b"7.5",
            &[3],
            b"USD",
            &[6],
            b"120.50",
        ]
        .concat();
        assert_golden(&sum, &bytes);
        let read = with_cost_sum_row(&bytes, |r| format!("{:?}", r.sums)).unwrap();
        assert_eq!(read, r#"[("EUR", "7.5"), ("USD", "120.50")]"#);
    }

    /// Pins a stats row: version 2 (with first deposits last) as written, version 1 as schemas
    /// 3 to 8 wrote it, read with none.
    #[test]
    fn rows_read_in_place_are_the_records() {
        let stats = StatsRecord {
            clicks: 5,
            bound_clicks: 3,
            events: [1, 2, 3, 4],
            deposits: vec![
                ("EUR".into(), "12.50".into()),
                ("USD".into(), "-0.01".into()),
            ],
            first_deposits: 2,
        };
        let bytes = encode(&stats);
        assert_eq!(
            with_stats_row(&bytes, |r| format!("{r:?}")).unwrap(),
            format!("{:?}", stats.row())
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            with_stats_row(&longer, |_| ()).is_err(),
            "a byte after the row is damage"
        );
        let cost = CostRecord {
            amount: "120.00".into(),
            currency: "USD".into(),
            source: 1,
        };
        assert_eq!(
            with_cost_row(&encode(&cost), |r| (
                r.amount.to_owned(),
                r.currency.to_owned(),
                r.source
            ))
            .unwrap(),
            (cost.amount.clone(), cost.currency.clone(), 1)
        );
    }

    #[test]
    fn stats_record_bytes_are_stable() {
        let row = StatsRecord {
            clicks: 300,
            bound_clicks: 2,
            events: [1, 0, 3, 4],
            deposits: vec![("USD".into(), "1.5".into())],
            first_deposits: 3,
        };
        #[rustfmt::skip]
        let v2 = [
            &[2][..], // version
            &[172, 2, 2], // clicks: 300, bound_clicks: 2
            &[1, 0, 3, 4], // events
            &[1, 3], b"USD", &[3], b"1.5", // deposits: one pair
            &[3], // first_deposits
        ].concat();
        assert_golden(&row, &v2);
        let mut v1 = v2.clone();
        v1[0] = 1;
        v1.pop();
        assert_eq!(
            decode::<StatsRecord>(&v1).unwrap(),
            StatsRecord {
                first_deposits: 0,
                ..row
            }
        );
    }
}
