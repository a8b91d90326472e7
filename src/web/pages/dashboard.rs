//! A space's dashboard: a range of days of the space's time zone, its totals against the
//! period before, the funnel, clicks by day, and the campaigns (sortable, downloadable as CSV),
//! all from the same reads as `GET /stats`; with `campaign=`, that campaign's drill-down
//! (`campaign.rs`). What the table rows share with the drill-down is here.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::chart::{self, Chart, DayFigures};
use super::tables::{
    CAMPAIGN_COLUMNS, CHANNEL_COLUMNS, GroupRow, Period, VIEW_COLUMNS, group_rows, has_channels,
    has_views, table_csv,
};
use super::{Frame, campaign, frame_of, html, in_query, space};
use crate::domain::stats::{self, Dimension};
use crate::error::{Code, Error};
use crate::web::context::Ctx;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
struct DashboardPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    period: Period,
    charts: Vec<Chart>,
    figures: Vec<DayFigures>,
    /// No clicks on any day of the range: the chart says so in words.
    no_clicks: bool,
    columns: Vec<(&'static str, &'static str)>,
    sort: String,
    rows: Vec<GroupRow>,
    /// Some campaign had channel joins or leaves: the table shows them.
    channels: bool,
    /// Some campaign's links had views of their landing pages: the table shows them.
    views: bool,
}
/// `GET .../dashboard?days=|from=&to=&sort=&format=csv`: a period's totals against the period
/// before, the funnel, clicks by day, and the campaigns (sortable, downloadable as CSV); days
/// of the space's time zone, all from the same reads as `GET /stats`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let name = ctx.param("space");
    let space = space(ctx).await?;
    let settings = ctx.app.space_settings(&space).await?;
    let reporting = ctx.app.reporting(&space).await?;
    let zone_name = settings.time_zone;
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
    period.fill(&now_days, &before_days, &reporting)?;
    let (charts, figures) = chart::charts((first, last), &now_days);
    let sort = q
        .get("sort")
        .filter(|s| {
            CAMPAIGN_COLUMNS
                .iter()
                .chain(&CHANNEL_COLUMNS)
                .chain(&VIEW_COLUMNS)
                .any(|(k, _)| k == s)
        })
        .unwrap_or("clicks");
    let rows = group_rows(campaigns, "campaign", sort);
    if q.get("format") == Some("csv") {
        let (from, to) = (&period.from, &period.to);
        return table_csv(&rows, &format!("{name}-campaigns-{from}-{to}"));
    }
    let channels = has_channels(&rows);
    let mut columns = CAMPAIGN_COLUMNS.to_vec();
    if channels {
        columns.extend(CHANNEL_COLUMNS);
    }
    let views = has_views(&rows);
    if views {
        columns.extend(VIEW_COLUMNS);
    }
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &DashboardPage {
            frame,
            name,
            period,
            no_clicks: figures.iter().all(|f| f.clicks == 0),
            charts,
            figures,
            columns,
            sort: sort.to_owned(),
            rows,
            channels,
            views,
        },
    ))
}

/// The range's presets as `(query, label, selected)`, each keeping the drill-down's `campaign`
/// (none: "").
fn range_presets(
    q: &crate::domain::input::Query,
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
fn dashboard_days(
    q: &crate::domain::input::Query,
    preset: &str,
    today: u32,
) -> Result<(u32, u32), Error> {
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
