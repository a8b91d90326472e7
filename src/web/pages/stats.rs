//! A space's stats page: the same read as `GET /stats`, by campaign, link, day, ad or ad set,
//! over today, 7 days, 30 days or all time of the space's time zone.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::domain::display;
use crate::domain::event::EventKind;
use crate::domain::stats::{self, Dimension};
use crate::error::{Code, Error};
use crate::web::context::Ctx;

struct StatsRow {
    group: String,
    clicks: u64,
    bound: u64,
    /// `(kind, count)` of each kind of event.
    events: Vec<(&'static str, u64)>,
    first_deposits: u64,
    deposits: String,
    cost: String,
    roi: String,
}

#[derive(Template)]
#[template(path = "admin/stats.html")]
struct StatsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    /// `(value, label, selected)` of the two choices.
    dimensions: Vec<(&'static str, &'static str, bool)>,
    ranges: Vec<(&'static str, &'static str, bool)>,
    group_label: &'static str,
    kinds: Vec<&'static str>,
    groups: Vec<StatsRow>,
    /// The currencies of any group without a rate into the reporting currency, and where to
    /// add one.
    missing_rates: Option<String>,
}

/// `GET .../stats?by=&days=`: the same read as `GET /stats`, over the last `days` days of the
/// space's time zone (today included) or everything.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let by = Dimension::parse(ctx.query.get("by"))?;
    let days = ctx.query.get("days").unwrap_or("30");
    let zone = ctx.app.space_settings(&space).await?.time_zone.zone();
    let range = match days {
        "all" => stats::Range::Hours(0, u32::MAX),
        "1" | "7" | "30" => {
            let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
            let back = days.parse::<u32>().unwrap_or(30) - 1;
            stats::Range::Days(today.saturating_sub(back), u32::MAX)
        }
        _ => {
            return Err(Error::field(
                Code::InvalidField,
                "days",
                "days is 1, 7, 30 or all",
            ));
        }
    };
    let kinds: Vec<&'static str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
    let (_, read) = ctx
        .app
        .stats(&space, stats::Grouping::all(by), range)
        .await?;
    let mut missing: Vec<String> = read
        .iter()
        .filter_map(|g| g.reported.as_ref())
        .flat_map(|r| r.missing_rates.iter().cloned())
        .collect();
    missing.sort();
    missing.dedup();
    let reporting_currency = read
        .first()
        .and_then(|g| g.reported.as_ref())
        .map(|r| r.currency.clone())
        .unwrap_or_default();
    let missing_rates = crate::domain::reporting::fix(&missing, &reporting_currency);
    let groups = read
        .into_iter()
        .map(|g| StatsRow {
            roi: display::reported_return(&g),
            deposits: display::revenue(&g),
            cost: display::cost(&g),
            group: g.group.unwrap_or_else(|| "(none)".to_owned()),
            clicks: g.clicks,
            bound: g.bound_clicks,
            events: kinds
                .iter()
                .map(|k| (*k, g.events.get(*k).copied().unwrap_or(0)))
                .collect(),
            first_deposits: g.first_deposits,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &StatsPage {
            frame,
            name: ctx.param("space"),
            dimensions: [
                ("campaign_name", "campaign"),
                ("link_slug", "link"),
                ("day", "day"),
                ("utm_content", "ad"),
                ("utm_term", "ad set"),
            ]
            .into_iter()
            .map(|(value, label)| (value, label, value == by.as_str()))
            .collect(),
            ranges: [
                ("1", "today"),
                ("7", "7 days"),
                ("30", "30 days"),
                ("all", "all time"),
            ]
            .into_iter()
            .map(|(value, label)| (value, label, value == days))
            .collect(),
            group_label: match by {
                Dimension::Campaign => "Campaign",
                Dimension::Link => "Link",
                Dimension::Day => "Day",
                Dimension::Ad => "Ad (utm_content)",
                Dimension::AdSet => "Ad set (utm_term)",
            },
            kinds,
            groups,
            missing_rates,
        },
    ))
}
