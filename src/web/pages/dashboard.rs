//! A space's dashboard: a range of days of the space's time zone, its totals against the
//! period before, the funnel, clicks by day, and the campaigns (sortable, downloadable as CSV),
//! all from the same reads as `GET /stats`; with `campaign=`, that campaign's drill-down
//! (`campaign.rs`). What the table rows share with the drill-down is here.

use std::collections::BTreeMap;

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, by_currency, campaign, csv_response, frame_of, html, in_query, returns, space};
use crate::domain::stats::{self, Dimension};
use crate::error::{Code, Error};
use crate::web::Ctx;

struct Bar {
    day: String,
    clicks: u64,
    x: u64,
    y: u64,
    width: u64,
    height: u64,
}

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
    /// Each stage of the funnel: `(what, count, its rate from the stage before)`; the first
    /// stage's rate is not shown.
    pub(super) funnel: Vec<(&'static str, u64, String)>,
}

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
struct DashboardPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    period: Period,
    chart_width: u64,
    bars: Vec<Bar>,
    /// No clicks on any day of the range: the chart says so in words.
    no_clicks: bool,
    columns: Vec<(&'static str, &'static str)>,
    sort: String,
    rows: Vec<GroupRow>,
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
    stats::change_percent(now, before).map_or_else(|| "—".to_owned(), |pct| format!("{pct:+}%"))
}

fn money(m: &BTreeMap<String, String>) -> String {
    or_dash(by_currency(m))
}

/// `text`, or a dash when it is empty (a total with nothing to show).
fn or_dash(text: String) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        text
    }
}

/// `GET .../dashboard?days=|from=&to=&sort=&format=csv`: a period's totals against the period
/// before, the funnel, clicks by day, and the campaigns (sortable, downloadable as CSV); days
/// of the space's time zone, all from the same reads as `GET /stats`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let name = ctx.param("space");
    let space = space(ctx).await?;
    let zone_name = ctx.app.space_settings(&space).await?.time_zone;
    let zone = zone_name.zone();
    let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
    let q = &ctx.query;
    let preset = q.get("days").unwrap_or("7");
    let (first, last) = dashboard_days(q, preset, today)?;
    let days = last - first + 1;
    let before = (first.saturating_sub(days), first.saturating_sub(1));
    let (from, to) = (
        crate::domain::cost::day_text(first),
        crate::domain::cost::day_text(last),
    );
    let range_query = format!("from={from}&to={to}");
    let campaign = stats::Grouping::parse(None, q.get("campaign"))?.campaign;
    let mut period = Period {
        zone: zone_name.as_str().to_owned(),
        presets: range_presets(q, preset, campaign.as_deref().unwrap_or("")),
        from,
        to,
        days,
        range_query,
        campaign: campaign.unwrap_or_default(),
        ..Period::default()
    };
    if !period.campaign.is_empty() {
        return campaign::drill(ctx, &space, period, (first, last), before).await;
    }
    let read = |by, (from, to)| {
        let range = stats::Range::Days(from, to);
        ctx.app.stats(&space, stats::Grouping::all(by), range)
    };
    let (_, now_days) = read(Dimension::Day, (first, last)).await?;
    let (_, before_days) = read(Dimension::Day, before).await?;
    let (_, campaigns) = read(Dimension::Campaign, (first, last)).await?;
    let (now, then) = (
        stats::period_totals(&now_days)?,
        stats::period_totals(&before_days)?,
    );
    (period.totals, period.funnel) = totals_and_funnel(&now, &then);
    let bars = chart_bars((first, last), &now_days);
    let sort = q
        .get("sort")
        .filter(|s| CAMPAIGN_COLUMNS.iter().any(|(k, _)| k == s))
        .unwrap_or("clicks");
    let rows = group_rows(campaigns, "campaign", sort);
    if q.get("format") == Some("csv") {
        let (from, to) = (&period.from, &period.to);
        return table_csv(&rows, &format!("{name}-campaigns-{from}-{to}"));
    }
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &DashboardPage {
            frame,
            name,
            period,
            chart_width: u64::from(days) * BAR_WIDTH,
            no_clicks: bars.iter().all(|b| b.clicks == 0),
            bars,
            columns: CAMPAIGN_COLUMNS.to_vec(),
            sort: sort.to_owned(),
            rows,
        },
    ))
}

/// The range's presets as `(query, label, selected)`, each keeping the drill-down's `campaign`
/// (none: "").
fn range_presets(
    q: &crate::web::Query,
    preset: &str,
    campaign: &str,
) -> Vec<(String, &'static str, bool)> {
    let campaign = if campaign.is_empty() {
        String::new()
    } else {
        format!("&campaign={}", in_query(campaign))
    };
    [
        ("1", "Today"),
        ("y", "Yesterday"),
        ("7", "7 days"),
        ("30", "30 days"),
    ]
    .into_iter()
    .map(|(v, label)| {
        (
            format!("days={v}{campaign}"),
            label,
            q.get("from").is_none() && v == preset,
        )
    })
    .collect()
}

/// The days the dashboard shows: `from`/`to` (up to today), or a preset (`1` today, `y`
/// yesterday, `7` or `30` days to today); at most 366.
fn dashboard_days(q: &crate::web::Query, preset: &str, today: u32) -> Result<(u32, u32), Error> {
    let (first, last) = if q.get("from").is_some() || q.get("to").is_some() {
        let (first, last) = crate::domain::cost::day_range(q.get("from"), q.get("to"))?;
        (first, last.min(today))
    } else {
        match preset {
            "1" => (today, today),
            "y" => (today.saturating_sub(1), today.saturating_sub(1)),
            "7" | "30" => (
                today.saturating_sub(preset.parse::<u32>().unwrap_or(7) - 1),
                today,
            ),
            _ => {
                return Err(Error::field(
                    Code::InvalidField,
                    "days",
                    "days is 1, y, 7 or 30",
                ));
            }
        }
    };
    let days = last.saturating_sub(first) + 1;
    if days > 366 {
        return Err(Error::field(
            Code::InvalidField,
            "from",
            "a range is at most 366 days",
        ));
    }
    Ok((first, last))
}

/// The funnel's stages as the totals' rows and the funnel name them.
const STAGES: [(stats::Stage, &str, &str); 4] = [
    (stats::Stage::Clicks, "Clicks", "Clicks"),
    (stats::Stage::BoundClicks, "Bound clicks", "bound"),
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
            money(&now.deposits),
            money(&then.deposits),
            String::new(),
        ),
        ("Cost", money(&now.cost), money(&then.cost), String::new()),
        (
            "Return (ROI)",
            or_dash(returns(now)),
            or_dash(returns(then)),
            String::new(),
        ),
    ]);
    let funnel = STAGES
        .iter()
        .map(|&(stage, _, what)| {
            let rate = stage
                .rate(now)
                .map_or_else(|| "—".to_owned(), stats::percent);
            (what, stage.count(now), rate)
        })
        .collect();
    (totals, funnel)
}

/// The chart's width of a day.
const BAR_WIDTH: u64 = 20;

/// One bar a day, every day of `[first, last]`, an empty day at 0, scaled to the busiest.
fn chart_bars((first, last): (u32, u32), now_days: &[stats::GroupStats]) -> Vec<Bar> {
    let by_day: BTreeMap<&str, u64> = now_days
        .iter()
        .filter_map(|g| Some((g.group.as_deref()?, g.clicks)))
        .collect();
    let max = by_day.values().copied().max().unwrap_or(0).max(1);
    (first..=last)
        .enumerate()
        .map(|(i, d)| {
            let day = crate::domain::cost::day_text(d);
            let clicks = by_day.get(day.as_str()).copied().unwrap_or(0);
            let height = clicks * 100 / max;
            Bar {
                x: i as u64 * BAR_WIDTH + 2,
                y: 110 - height,
                width: BAR_WIDTH - 4,
                height,
                clicks,
                day,
            }
        })
        .collect()
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
