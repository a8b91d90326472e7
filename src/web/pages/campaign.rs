//! A campaign's drill-down (the dashboard with `campaign=`): over the dashboard's range, its
//! totals against the period before, its funnel, and its tables by link, ad, ad set and day
//! (`GET /stats?campaign=`), each sortable and downloadable as CSV.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::tables::{
    CAMPAIGN_COLUMNS, GroupRow, Period, VIEW_COLUMNS, group_rows, has_views, table_csv,
};
use super::{Frame, frame_of, html, in_query};
use crate::domain::keyring::SpaceRef;
use crate::domain::stats::{self, Dimension};
use crate::error::{Code, Error};
use crate::web::context::Ctx;

/// One table of a campaign's drill-down.
struct DrillTable {
    /// Its key in `sort` (`links.clicks`) and `table` (of the CSV download).
    key: &'static str,
    heading: &'static str,
    /// `(sort key, heading)`, the first the group's.
    columns: Vec<(&'static str, &'static str)>,
    sort: &'static str,
    rows: Vec<GroupRow>,
    /// Whether its groups have costs (days, ads and ad sets); links have none, and no Cost and
    /// ROI columns on the page (the CSV keeps them, empty, so every table has one shape).
    costs: bool,
    /// Whether its groups had views of their landing pages (links and days may): the Views and
    /// View-to-click columns.
    views: bool,
}

/// A campaign's drill-down: its totals against the period before, its funnel, and its tables.
#[derive(Template)]
#[template(path = "admin/dashboard_campaign.html")]
struct CampaignPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    period: Period,
    /// The range and the campaign: every link of the page keeps both.
    page_query: String,
    tables: Vec<DrillTable>,
}

/// The tables of a campaign's drill-down: key, heading, grouping, the group's CSV label and
/// heading, and the column it is sorted by unless asked otherwise.
const DRILL_TABLES: [(&str, &str, Dimension, &str, &str, &str); 4] = [
    ("links", "Links", Dimension::Link, "link", "Link", "clicks"),
    ("ads", "Ads", Dimension::Ad, "ad", "Ad", "clicks"),
    (
        "ad_sets",
        "Ad sets",
        Dimension::AdSet,
        "ad_set",
        "Ad set",
        "clicks",
    ),
    ("days", "Days", Dimension::Day, "day", "Day", "group"),
];

/// `GET .../dashboard?campaign=&days=|from=&to=&sort=<table>.<column>&format=csv&table=`: one
/// campaign's drill-down over the dashboard's range: its totals against the period before, its
/// funnel, and its tables by link, ad, ad set and day (`GET /stats?campaign=`), each sortable
/// and downloadable as CSV.
pub(super) async fn drill(
    ctx: &Ctx<'_>,
    space: &SpaceRef,
    period: Period,
    (first, last): (u32, u32),
    before: (u32, u32),
) -> Result<Response, Error> {
    let mut page = CampaignPage {
        frame: frame_of(ctx),
        name: ctx.param("space"),
        page_query: format!(
            "{}&campaign={}",
            period.range_query,
            in_query(&period.campaign)
        ),
        period,
        tables: Vec::new(),
    };
    let q = &ctx.query;
    let campaign = page.period.campaign.clone();
    let one = |by| stats::Grouping {
        by,
        campaign: Some(campaign.clone()),
    };
    let (_, now) = ctx
        .app
        .stats(
            space,
            one(Dimension::Campaign),
            stats::Range::Days(first, last),
        )
        .await?;
    let (_, then) = ctx
        .app
        .stats(
            space,
            one(Dimension::Campaign),
            stats::Range::Days(before.0, before.1),
        )
        .await?;
    let reporting = ctx.app.reporting(space).await?;
    page.period.fill(&now, &then, &reporting)?;
    let asked = q.get("sort").and_then(|s| s.split_once('.'));
    let wanted = q.get("format") == Some("csv");
    let csv_table = q.get("table").filter(|_| wanted);
    if wanted && !DRILL_TABLES.iter().any(|t| Some(t.0) == csv_table) {
        return Err(Error::field(
            Code::InvalidField,
            "table",
            "table is links, ads, ad_sets or days",
        ));
    }
    for (key, heading, by, label, group_heading, default_sort) in DRILL_TABLES {
        if csv_table.is_some_and(|t| t != key) {
            continue;
        }
        let mut columns = CAMPAIGN_COLUMNS.to_vec();
        columns[0] = ("group", group_heading);
        if !by.has_costs() {
            columns.retain(|(k, _)| !matches!(*k, "cost" | "roi"));
        }
        if matches!(by, Dimension::Link | Dimension::Day) {
            columns.extend(VIEW_COLUMNS);
        }
        let sort = asked
            .filter(|(table, _)| *table == key)
            .and_then(|(_, column)| columns.iter().find(|(k, _)| *k == column))
            .map_or(default_sort, |(k, _)| *k);
        let (_, groups) = ctx
            .app
            .stats(space, one(by), stats::Range::Days(first, last))
            .await?;
        let rows = group_rows(groups, label, sort);
        let views = has_views(&rows);
        if !views {
            columns.retain(|column| !VIEW_COLUMNS.contains(column));
        }
        if csv_table.is_some() {
            let safe: String = page
                .period
                .campaign
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let (from, to) = (&page.period.from, &page.period.to);
            let file = format!("{}-{safe}-{key}-{from}-{to}", page.name);
            return table_csv(&rows, &file);
        }
        page.tables.push(DrillTable {
            key,
            heading,
            columns,
            sort,
            rows,
            costs: by.has_costs(),
            views,
        });
    }
    Ok(html(StatusCode::OK, &page))
}
