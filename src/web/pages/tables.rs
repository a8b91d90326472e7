//! What the dashboard and a campaign's drill-down share: the period's controls, totals and
//! funnel, and their sortable tables with the CSV download.

use std::collections::BTreeMap;

use warp::reply::Response;

use super::{csv_response, in_query};
use crate::domain::display;
use crate::domain::reporting::Reporting;
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
    /// Channel joins through the group's links, and joins less leaves.
    pub(super) joins: u64,
    pub(super) kept: i64,
    /// Views of the group's landing pages (`None` where a view cannot be placed: ads, ad
    /// sets), and clicks per view as a percentage.
    pub(super) views: Option<u64>,
    pub(super) view_to_click: String,
}

impl GroupRow {
    /// The views as the table shows them: the count, or a dash where none can be known.
    pub(super) fn views_text(&self) -> String {
        self.views
            .map_or_else(|| display::NOTHING.to_owned(), |v| v.to_string())
    }
}

/// A row of the CSV download: the group under its own label, then the figures; a table whose
/// groups had channel joins or leaves ([`has_channels`]) also has `joins` and
/// `subscribers_kept`, and one whose groups had views ([`has_views`]) `views` and
/// `view_to_click`, as the page shows them.
struct CsvRow<'a> {
    row: &'a GroupRow,
    channels: bool,
    views: bool,
}

impl serde::Serialize for CsvRow<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.row;
        let mut row = serializer.serialize_map(None)?;
        row.serialize_entry(r.label, &r.group)?;
        row.serialize_entry("clicks", &r.clicks)?;
        row.serialize_entry("registrations", &r.registrations)?;
        row.serialize_entry("first_deposits", &r.first_deposits)?;
        row.serialize_entry("revenue", &r.revenue)?;
        row.serialize_entry("cost", &r.cost)?;
        row.serialize_entry("roi", &r.roi)?;
        if self.channels {
            row.serialize_entry("joins", &r.joins)?;
            row.serialize_entry("subscribers_kept", &r.kept)?;
        }
        if self.views {
            row.serialize_entry("views", &r.views_text())?;
            row.serialize_entry("view_to_click", &r.view_to_click)?;
        }
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
    /// Which currencies of the period have no rate into the reporting currency, and where to
    /// add one; `None` when every amount converted.
    pub(super) missing_rates: Option<String>,
    /// The period has no cost: the page says where to give one.
    pub(super) no_cost: bool,
}

impl Period {
    /// The totals of `now` (the period's groups) against `then` (the period before's), their
    /// money in the reporting currency, the funnel, and what the page says of missing rates
    /// and costs.
    pub(super) fn fill(
        &mut self,
        now: &[stats::GroupStats],
        then: &[stats::GroupStats],
        reporting: &Reporting,
    ) -> Result<(), Error> {
        let total = |groups| -> Result<stats::GroupStats, Error> {
            let mut total = stats::period_totals(groups)?;
            total.reported = Some(reporting.report_total(&total, groups));
            Ok(total)
        };
        let (now, then) = (total(now)?, total(then)?);
        (self.totals, self.funnel) = totals_and_funnel(&now, &then);
        self.missing_rates = now.reported.as_ref().and_then(|r| r.fix.clone());
        self.no_cost = now.cost.is_empty();
        Ok(())
    }
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

/// The columns a table adds where its groups had channel joins or leaves.
pub(super) const CHANNEL_COLUMNS: [(&str, &str); 2] =
    [("joins", "Channel joins"), ("kept", "Subscribers kept")];

/// Whether any of `rows` had a channel join or leave: its table shows [`CHANNEL_COLUMNS`].
pub(super) fn has_channels(rows: &[GroupRow]) -> bool {
    rows.iter().any(|r| r.joins != 0 || r.kept != 0)
}

/// The columns a table adds where its groups had views of their landing pages.
pub(super) const VIEW_COLUMNS: [(&str, &str); 2] =
    [("views", "Views"), ("view_to_click", "View-to-click")];

/// Whether any of `rows` had a view: its table shows [`VIEW_COLUMNS`].
pub(super) fn has_views(rows: &[GroupRow]) -> bool {
    rows.iter().any(|r| r.views.is_some_and(|v| v > 0))
}

/// `+12%`, `-3%`, or `—` with nothing before.
fn change(now: u64, before: u64) -> String {
    stats::change_percent(now, before)
        .map_or_else(|| display::NOTHING.to_owned(), |pct| format!("{pct:+}%"))
}

/// The funnel's stages as the totals' rows and the funnel name them, and as the stage after
/// names them when its rate is a share of them.
const STAGES: [(stats::Stage, &str, &str); 4] = [
    (stats::Stage::Clicks, "Clicks", "clicks"),
    (
        stats::Stage::BoundClicks,
        "Reached the bot",
        "clicks that reached the bot",
    ),
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
fn totals_and_funnel(
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
            display::revenue(now),
            display::revenue(then),
            String::new(),
        ),
        (
            "Cost",
            display::cost(now),
            display::cost(then),
            String::new(),
        ),
        (
            "Return (ROI)",
            display::reported_return(now),
            display::reported_return(then),
            String::new(),
        ),
    ]);
    // A space whose ads lead to channels: its joins, and the subscribers they kept.
    if [now, then].iter().any(|g| g.joins != 0 || g.leaves != 0) {
        totals.extend([
            (
                "Channel joins",
                now.joins.to_string(),
                then.joins.to_string(),
                change(now.joins, then.joins),
            ),
            (
                "Subscribers kept",
                now.subscribers_kept.to_string(),
                then.subscribers_kept.to_string(),
                String::new(),
            ),
            (
                "Cost per subscriber kept",
                display::money(&now.cost_per_subscriber),
                display::money(&then.cost_per_subscriber),
                String::new(),
            ),
        ]);
    }
    // A space with landing pages of its own: their views, and the share that led to a click.
    if [now, then].iter().any(|g| g.views.is_some_and(|v| v > 0)) {
        let (a, b) = (now.views.unwrap_or(0), then.views.unwrap_or(0));
        totals.extend([
            (
                "Landing page views",
                a.to_string(),
                b.to_string(),
                change(a, b),
            ),
            (
                "View-to-click",
                display::rate(now.rates.view_to_click.as_deref()),
                display::rate(then.rates.view_to_click.as_deref()),
                String::new(),
            ),
        ]);
    }
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
                revenue: display::revenue(&g),
                cost: display::cost(&g),
                roi: display::reported_return(&g),
                joins: g.joins,
                kept: g.subscribers_kept,
                views: g.views,
                view_to_click: display::rate(g.rates.view_to_click.as_deref()),
            };
            (g, row)
        })
        .collect();
    // Only the order of rows comes from floating point; every amount shown is exact.
    let amount = |reported: Option<&str>, m: &BTreeMap<String, String>| {
        reported
            .or_else(|| m.values().next().map(String::as_str))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::MIN)
    };
    let revenue = |g: &stats::GroupStats| {
        amount(
            g.reported.as_ref().and_then(|r| r.revenue.as_deref()),
            &g.deposits,
        )
    };
    let cost = |g: &stats::GroupStats| {
        amount(g.reported.as_ref().and_then(|r| r.cost.as_deref()), &g.cost)
    };
    let roi =
        |g: &stats::GroupStats| amount(g.reported.as_ref().and_then(|r| r.roi.as_deref()), &g.roi);
    let view_to_click =
        |g: &stats::GroupStats| amount(g.rates.view_to_click.as_deref(), &BTreeMap::new());
    rows.sort_by(|(a, ra), (b, rb)| match sort {
        "group" => ra.group.cmp(&rb.group),
        "registrations" => rb.registrations.cmp(&ra.registrations),
        "first_deposits" => rb.first_deposits.cmp(&ra.first_deposits),
        "revenue" => revenue(b).total_cmp(&revenue(a)),
        "cost" => cost(b).total_cmp(&cost(a)),
        "roi" => roi(b).total_cmp(&roi(a)),
        "joins" => rb.joins.cmp(&ra.joins),
        "kept" => rb.kept.cmp(&ra.kept),
        "views" => rb.views.cmp(&ra.views),
        "view_to_click" => view_to_click(b).total_cmp(&view_to_click(a)),
        _ => rb.clicks.cmp(&ra.clicks),
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// A table as a CSV download named `file` (every cell formula-safe: `domain::spreadsheet`).
pub(super) fn table_csv(rows: &[GroupRow], file: &str) -> Result<Response, Error> {
    let mut csv = crate::domain::spreadsheet::CsvRows::new(Vec::new());
    let (channels, views) = (has_channels(rows), has_views(rows));
    for row in rows {
        csv.row(&CsvRow {
            row,
            channels,
            views,
        })
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    }
    let body = csv
        .take_written()
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    Ok(csv_response(body, file))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::stats::{Counts, GroupStats};

    fn group(joins: u64, leaves: u64) -> GroupStats {
        let counts = Counts {
            clicks: 10,
            joins,
            leaves,
            ..Counts::default()
        };
        GroupStats::new(None, &counts, &BTreeMap::new())
    }

    /// A space without channel links sees no channel rows in its totals; one with joins (in
    /// either period) sees joins, subscribers kept and their price.
    #[test]
    fn the_totals_show_channel_figures_only_where_there_were_joins_or_leaves() {
        let whats = |now: &GroupStats, then: &GroupStats| -> Vec<&'static str> {
            totals_and_funnel(now, then)
                .0
                .into_iter()
                .map(|t| t.0)
                .collect()
        };
        assert!(!whats(&group(0, 0), &group(0, 0)).contains(&"Channel joins"));
        let (totals, _) = totals_and_funnel(&group(4, 1), &group(0, 0));
        let row = |what| totals.iter().find(|t| t.0 == what).cloned().unwrap();
        assert_eq!(row("Channel joins").1, "4");
        assert_eq!(row("Subscribers kept").1, "3");
        assert!(whats(&group(0, 0), &group(0, 2)).contains(&"Subscribers kept"));
    }

    /// The CSV download has the channel columns exactly when the page's table does.
    #[test]
    fn the_csv_has_channel_columns_only_where_the_table_does() {
        let header = |rows: &[GroupRow]| {
            let mut csv = crate::domain::spreadsheet::CsvRows::new(Vec::new());
            let (channels, views) = (has_channels(rows), has_views(rows));
            for row in rows {
                csv.row(&CsvRow {
                    row,
                    channels,
                    views,
                })
                .unwrap();
            }
            let text = String::from_utf8(csv.take_written().unwrap()).unwrap();
            text.lines().next().unwrap().to_owned()
        };
        let plain = group_rows(vec![group(0, 0)], "campaign", "clicks");
        assert_eq!(
            header(&plain),
            "campaign,clicks,registrations,first_deposits,revenue,cost,roi"
        );
        let joined = group_rows(vec![group(0, 0), group(3, 1)], "campaign", "clicks");
        assert!(header(&joined).ends_with(",roi,joins,subscribers_kept"));
    }

    /// Views show in the totals, the table and the CSV exactly where some group had one; a
    /// group whose views cannot be known (an ad) shows a dash.
    #[test]
    fn views_show_where_some_group_had_one() {
        let viewed = group(0, 0).with_views(Some(40));
        let (totals, _) = totals_and_funnel(&viewed, &group(0, 0));
        let row = |what| totals.iter().find(|t| t.0 == what).cloned();
        assert_eq!(row("Landing page views").unwrap().1, "40");
        assert_eq!(row("View-to-click").unwrap().1, "25.00%");
        let (totals, _) = totals_and_funnel(&group(0, 0).with_views(Some(0)), &group(0, 0));
        assert!(totals.iter().all(|t| t.0 != "Landing page views"));
        let rows = group_rows(
            vec![group(0, 0).with_views(Some(0)), group(0, 0)],
            "link",
            "clicks",
        );
        assert!(!has_views(&rows));
        let rows = group_rows(vec![group(0, 0), viewed], "link", "views");
        assert!(has_views(&rows));
        assert_eq!(
            (rows[0].views_text(), rows[1].views_text()),
            ("40".to_owned(), "—".to_owned())
        );
        let mut csv = crate::domain::spreadsheet::CsvRows::new(Vec::new());
        for row in &rows {
            let (channels, views) = (false, true);
            csv.row(&CsvRow {
                row,
                channels,
                views,
            })
            .unwrap();
        }
        let body = String::from_utf8(csv.take_written().unwrap()).unwrap();
        assert!(
            body.starts_with(
                "link,clicks,registrations,first_deposits,revenue,cost,roi,views,view_to_click\n"
            ),
            "{body}"
        );
        assert!(body.contains(",40,25.00%\n"), "{body}");
    }

    /// The campaign table shows its channel columns where some campaign had them.
    #[test]
    fn a_table_has_channels_when_any_row_had_a_join_or_leave() {
        let rows = group_rows(vec![group(0, 0), group(0, 0)], "campaign", "clicks");
        assert!(!has_channels(&rows));
        let rows = group_rows(vec![group(0, 0), group(0, 1)], "campaign", "kept");
        assert!(has_channels(&rows));
        assert_eq!(rows[0].kept, 0, "sorted by kept, largest first");
    }
}
