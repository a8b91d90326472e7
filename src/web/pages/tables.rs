//! What the dashboard and a campaign's drill-down share: the period's controls, totals and
//! funnel, and their sortable tables with the CSV download.

use std::collections::BTreeMap;

use warp::reply::Response;

use super::{by_currency, csv_response, in_query, returns};
use crate::domain::display;
use crate::domain::stats;
use crate::error::{Code, Error};

/// One group of a dashboard table (a campaign, or a campaign's link, ad, ad set or day), as
/// shown and as downloaded.
pub(super) struct GroupRow {
    /// What the group is, the CSV's first heading: `campaign`, `link`, `ad`, `ad_set` or `day`.
    pub(super) label: &'static str,
    pub(super) group: String,
    /// The query of the campaign's drill-down (campaign rows with a name only).
    pub(super) drill: Option<String>,
    pub(super) clicks: u64,
    pub(super) registrations: u64,
    pub(super) first_deposits: u64,
    pub(super) revenue: String,
    pub(super) cost: String,
    pub(super) roi: String,
}

/// A row of the CSV download: the group under its own label, then the figures.
impl serde::Serialize for GroupRow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut row = serializer.serialize_struct("GroupRow", 7)?;
        row.serialize_field(self.label, &self.group)?;
        row.serialize_field("clicks", &self.clicks)?;
        row.serialize_field("registrations", &self.registrations)?;
        row.serialize_field("first_deposits", &self.first_deposits)?;
        row.serialize_field("revenue", &self.revenue)?;
        row.serialize_field("cost", &self.cost)?;
        row.serialize_field("roi", &self.roi)?;
        row.end()
    }
}

/// The top of the dashboard and of a campaign's drill-down (`admin/dashboard_period.html`): the
/// range and its controls, the totals against the period before, and the funnel.
#[derive(Default)]
pub(super) struct Period {
    pub(super) zone: String,
    pub(super) presets: Vec<(String, &'static str, bool)>,
    pub(super) from: String,
    pub(super) to: String,
    pub(super) days: u32,
    /// The range, as the dashboard's query.
    pub(super) range_query: String,
    /// The drill-down's campaign, which the range's controls keep ("" on the dashboard).
    pub(super) campaign: String,
    /// `(what, this period, the period before, change)`.
    pub(super) totals: Vec<(&'static str, String, String, String)>,
    /// Each stage of the funnel: `(what, count, its rate as a share of the stage before, in
    /// words)`; the first stage has none.
    pub(super) funnel: Vec<(&'static str, u64, String)>,
}

/// The columns of the campaign table: `sort` key and heading.
pub(super) const CAMPAIGN_COLUMNS: [(&str, &str); 7] = [
    ("group", "Campaign"),
    ("clicks", "Clicks"),
    ("registrations", "Registrations"),
    ("first_deposits", "First deposits"),
    ("revenue", "Revenue"),
    ("cost", "Cost"),
    ("roi", "ROI"),
];

/// `+12%`, `-3%`, or `—` with nothing before.
fn change(now: u64, before: u64) -> String {
    stats::change_percent(now, before)
        .map_or_else(|| display::NOTHING.to_owned(), |pct| format!("{pct:+}%"))
}

/// The funnel's stages as the totals' rows and the funnel name them, and as the stage after
/// names them when its rate is a share of them.
const STAGES: [(stats::Stage, &str, &str); 4] = [
    (stats::Stage::Clicks, "Clicks", "clicks"),
    (stats::Stage::BoundClicks, "Bound clicks", "bound clicks"),
    (
        stats::Stage::Registrations,
        "Registrations",
        "registrations",
    ),
    (
        stats::Stage::FirstDeposits,
        "First deposits",
        "first deposits",
    ),
];

/// The totals' rows (what, this period, the one before, the change) and the funnel.
#[allow(clippy::type_complexity)]
pub(super) fn totals_and_funnel(
    now: &stats::GroupStats,
    then: &stats::GroupStats,
) -> (
    Vec<(&'static str, String, String, String)>,
    Vec<(&'static str, u64, String)>,
) {
    let mut totals: Vec<_> = STAGES
        .iter()
        .map(|&(stage, what, _)| {
            let (a, b) = (stage.count(now), stage.count(then));
            (what, a.to_string(), b.to_string(), change(a, b))
        })
        .collect();
    totals.extend([
        (
            "Revenue",
            display::money(&now.deposits),
            display::money(&then.deposits),
            String::new(),
        ),
        (
            "Cost",
            display::money(&now.cost),
            display::money(&then.cost),
            String::new(),
        ),
        (
            "Return (ROI)",
            display::or_nothing(returns(now)),
            display::or_nothing(returns(then)),
            String::new(),
        ),
    ]);
    let funnel = STAGES
        .iter()
        .enumerate()
        .map(|(i, &(stage, what, _))| {
            let rate = i
                .checked_sub(1)
                .map(|before| display::share_of(stage.rate(now), STAGES[before].2))
                .unwrap_or_default();
            (what, stage.count(now), rate)
        })
        .collect();
    (totals, funnel)
}

/// A table's rows, sorted by `sort` (numbers and amounts largest first, names A to Z and days
/// oldest first; amounts by their first currency), each group under `label`; the campaigns'
/// rows (`label` `campaign`) link to their drill-down.
pub(super) fn group_rows(
    groups: Vec<stats::GroupStats>,
    label: &'static str,
    sort: &str,
) -> Vec<GroupRow> {
    let mut rows: Vec<(stats::GroupStats, GroupRow)> = groups
        .into_iter()
        .map(|g| {
            let drill = g
                .group
                .as_deref()
                .filter(|_| label == "campaign")
                .map(in_query);
            let row = GroupRow {
                label,
                group: g.group.clone().unwrap_or_else(|| "(none)".to_owned()),
                drill,
                clicks: g.clicks,
                registrations: g.registrations(),
                first_deposits: g.first_deposits,
                revenue: by_currency(&g.deposits),
                cost: by_currency(&g.cost),
                roi: returns(&g),
            };
            (g, row)
        })
        .collect();
    let first_amount = |m: &BTreeMap<String, String>| {
        m.values()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::MIN)
    };
    rows.sort_by(|(a, ra), (b, rb)| match sort {
        "group" => ra.group.cmp(&rb.group),
        "registrations" => rb.registrations.cmp(&ra.registrations),
        "first_deposits" => rb.first_deposits.cmp(&ra.first_deposits),
        "revenue" => first_amount(&b.deposits).total_cmp(&first_amount(&a.deposits)),
        "cost" => first_amount(&b.cost).total_cmp(&first_amount(&a.cost)),
        "roi" => first_amount(&b.roi).total_cmp(&first_amount(&a.roi)),
        _ => rb.clicks.cmp(&ra.clicks),
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// A table as a CSV download named `file` (every cell formula-safe: `domain::spreadsheet`).
pub(super) fn table_csv(rows: &[GroupRow], file: &str) -> Result<Response, Error> {
    let mut csv = crate::domain::spreadsheet::CsvRows::new(Vec::new());
    for r in rows {
        csv.row(r)
            .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    }
    let body = csv
        .take_written()
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    Ok(csv_response(body, file))
}
