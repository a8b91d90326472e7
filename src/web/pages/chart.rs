//! The dashboard's charts by day, drawn on the server as SVG (no script, no outside resource):
//! clicks, first deposits, and revenue against cost in each currency that has a cost.
//!
//! The SVG has no `viewBox`: it is as wide as the page and a fixed height, every horizontal
//! position is a percentage of its width and every vertical one a pixel, so bars stretch with
//! the screen while the axes' words stay at the page's font size, readable at 375 px as at
//! 1280 px. Values sit above their grid lines at the left edge (no margin to guess the width
//! of), dates below the bars; which dates are written depends on how many days fit, with the
//! ones that fit only on a wide screen hidden on a narrow one by the stylesheet. Each day's
//! numbers are its `<title>` (shown on hover) and, for screen readers, in a table.

// Geometry in pixels and percentages: a count or an amount far past what a pixel can show
// loses nothing that matters by becoming an `f64`, and a position is never negative.
#![allow(clippy::cast_precision_loss, clippy::cast_sign_loss)]

use std::collections::BTreeMap;

use crate::domain::cost::{Day, date_of, day_text};
use crate::domain::display;
use crate::domain::stats::GroupStats;

/// The SVG's height in pixels, and where its plot area starts and ends.
const HEIGHT: u32 = 190;
const PLOT_TOP: u32 = 18;
const PLOT_BOTTOM: u32 = 164;
/// Widths (px) the plot has on a phone and on a desktop, and what one date label takes.
const NARROW_PX: u32 = 320;
const WIDE_PX: u32 = 1100;
const LABEL_PX: u32 = 56;

/// One bar: its place (percent of the width) and height (px), and its series' class.
pub(super) struct Bar {
    pub(super) x: String,
    pub(super) width: String,
    pub(super) y: u32,
    pub(super) height: u32,
    pub(super) class: &'static str,
}

/// One day of a chart: the slot it takes, its bars, and its numbers as words.
pub(super) struct ChartDay {
    pub(super) x: String,
    pub(super) width: String,
    pub(super) bars: Vec<Bar>,
    pub(super) title: String,
}

/// A grid line with its value written above it.
pub(super) struct Tick {
    pub(super) y: u32,
    pub(super) label: String,
}

/// A date under the bars; `wide` ones are left out on a narrow screen.
pub(super) struct DateLabel {
    pub(super) x: String,
    pub(super) anchor: &'static str,
    pub(super) text: String,
    pub(super) wide: bool,
}

/// One chart: a title, what each bar's colour means, axes and days.
pub(super) struct Chart {
    pub(super) id: String,
    pub(super) title: String,
    /// `(class, name)` of each series, for the legend.
    pub(super) legend: Vec<(&'static str, String)>,
    pub(super) ticks: Vec<Tick>,
    pub(super) dates: Vec<DateLabel>,
    pub(super) days: Vec<ChartDay>,
    /// The SVG's height, the axis's `y` and the dates' baseline, in px.
    pub(super) height: u32,
    pub(super) baseline: u32,
    pub(super) date_y: u32,
}

/// One row of the table for screen readers: a day's figures.
pub(super) struct DayFigures {
    pub(super) day: String,
    pub(super) clicks: u64,
    pub(super) first_deposits: u64,
    pub(super) revenue: String,
    pub(super) cost: String,
}

/// The charts of the days `[first, last]` from the stats by day (`now_days`), and the table
/// of their figures: clicks, first deposits, then revenue against cost for each currency that
/// has a cost in the range.
pub(super) fn charts(
    (first, last): (Day, Day),
    now_days: &[GroupStats],
) -> (Vec<Chart>, Vec<DayFigures>) {
    let by_day: BTreeMap<&str, &GroupStats> = now_days
        .iter()
        .filter_map(|g| Some((g.group.as_deref()?, g)))
        .collect();
    let days: Vec<(Day, Option<&GroupStats>)> = (first..=last)
        .map(|d| (d, by_day.get(day_text(d).as_str()).copied()))
        .collect();
    let count = |f: fn(&GroupStats) -> u64| -> Vec<Vec<f64>> {
        days.iter()
            .map(|(_, g)| vec![g.map_or(0.0, |g| f(g) as f64)])
            .collect()
    };
    let mut charts = vec![
        chart(
            "clicks",
            "Clicks by day".to_owned(),
            &days,
            &[("clicks", "Clicks".to_owned())],
            &count(|g| g.clicks),
            &|d, v| format!("{d}: {} clicks", v[0]),
        ),
        chart(
            "first-deposits",
            "First deposits by day".to_owned(),
            &days,
            &[("deposits", "First deposits".to_owned())],
            &count(|g| g.first_deposits),
            &|d, v| format!("{d}: {} first deposits", v[0]),
        ),
    ];
    let currencies: std::collections::BTreeSet<&str> = now_days
        .iter()
        .flat_map(|g| g.cost.keys().map(String::as_str))
        .collect();
    for currency in currencies {
        let amount =
            |m: &BTreeMap<String, String>| m.get(currency).and_then(|a| a.parse::<f64>().ok());
        let values: Vec<Vec<f64>> = days
            .iter()
            .map(|(_, g)| {
                vec![
                    g.and_then(|g| amount(&g.deposits)).unwrap_or(0.0),
                    g.and_then(|g| amount(&g.cost)).unwrap_or(0.0),
                ]
            })
            .collect();
        let exact: Vec<(String, String)> = days
            .iter()
            .map(|(_, g)| {
                let text = |m: Option<&BTreeMap<String, String>>| {
                    m.and_then(|m| m.get(currency))
                        .map_or_else(|| "0".to_owned(), Clone::clone)
                };
                (text(g.map(|g| &g.deposits)), text(g.map(|g| &g.cost)))
            })
            .collect();
        let mut money = chart(
            &format!("money-{}", currency.to_ascii_lowercase()),
            format!("Revenue and cost by day, {currency}"),
            &days,
            &[
                ("revenue", format!("Revenue ({currency})")),
                ("cost", format!("Cost ({currency})")),
            ],
            &values,
            &|_, _| String::new(),
        );
        for ((day, (revenue, cost)), (d, _)) in money.days.iter_mut().zip(&exact).zip(&days) {
            day.title = format!(
                "{}: revenue {revenue} {currency}, cost {cost} {currency}",
                day_text(*d)
            );
        }
        charts.push(money);
    }
    let figures = days
        .iter()
        .map(|(d, g)| DayFigures {
            day: day_text(*d),
            clicks: g.map_or(0, |g| g.clicks),
            first_deposits: g.map_or(0, |g| g.first_deposits),
            revenue: g.map_or_else(
                || display::NOTHING.to_owned(),
                |g| display::money(&g.deposits),
            ),
            cost: g.map_or_else(|| display::NOTHING.to_owned(), |g| display::money(&g.cost)),
        })
        .collect();
    (charts, figures)
}

/// A percentage of the chart's width, as an SVG attribute takes it.
fn pct(part: f64) -> String {
    format!("{:.3}%", part * 100.0)
}

/// A chart of `values` (per day, one per series), each day's title from `title`.
fn chart(
    id: &str,
    title: String,
    days: &[(Day, Option<&GroupStats>)],
    series: &[(&'static str, String)],
    values: &[Vec<f64>],
    day_title: &dyn Fn(&str, &[f64]) -> String,
) -> Chart {
    let biggest = values.iter().flatten().copied().fold(0.0_f64, f64::max);
    let (step, top) = scale(biggest);
    let plot = f64::from(PLOT_BOTTOM - PLOT_TOP);
    let y_of = |v: f64| PLOT_BOTTOM - ((v / top * plot).round() as u32).min(PLOT_BOTTOM - PLOT_TOP);
    let mut ticks = Vec::new();
    let mut value = 0.0;
    while value <= top + step / 2.0 {
        ticks.push(Tick {
            y: y_of(value),
            label: tick_text(value, step),
        });
        value += step;
    }
    let n = days.len().max(1);
    let slot = 1.0 / n as f64;
    let group = slot * 0.7;
    let bar = group / series.len() as f64;
    let chart_days = days
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, ((d, _), v))| {
            let start = i as f64 * slot;
            ChartDay {
                x: pct(start),
                width: pct(slot),
                bars: v
                    .iter()
                    .zip(series)
                    .enumerate()
                    .map(|(j, (value, (class, _)))| {
                        let y = y_of(*value);
                        Bar {
                            x: pct(start + slot * 0.15 + j as f64 * bar),
                            width: pct(bar),
                            y,
                            height: PLOT_BOTTOM - y,
                            class,
                        }
                    })
                    .collect(),
                title: day_title(&day_text(*d), v),
            }
        })
        .collect();
    Chart {
        id: id.to_owned(),
        title,
        legend: series.to_vec(),
        ticks,
        dates: date_labels(days),
        days: chart_days,
        height: HEIGHT,
        baseline: PLOT_BOTTOM,
        date_y: HEIGHT - 6,
    }
}

/// The grid's step and top for values up to `biggest`: a step of 1, 2 or 5 times a power of
/// ten, at most four steps to the top (at least 1, so an empty chart still has an axis).
fn scale(biggest: f64) -> (f64, f64) {
    let biggest = biggest.max(1.0);
    let mut power = 10f64.powi(biggest.log10().floor() as i32 - 1).max(1.0);
    loop {
        for m in [1.0, 2.0, 5.0] {
            let step = m * power;
            let steps = (biggest / step).ceil();
            if steps <= 4.0 {
                return (step, steps.max(1.0) * step);
            }
        }
        power *= 10.0;
    }
}

/// A grid value: a whole number, with thousands as `k` where it is a round thousand.
fn tick_text(value: f64, step: f64) -> String {
    let whole = value.round() as u64;
    if step >= 1000.0 && whole.is_multiple_of(1000) {
        format!("{}k", whole / 1000)
    } else {
        whole.to_string()
    }
}

/// The dates under the bars: as many as fit on a wide screen, those that also fit on a narrow
/// one marked so, counted back from the last day (today, most often), which is always written.
/// A date near an edge is aligned to it, so none runs past the chart's sides.
fn date_labels(days: &[(Day, Option<&GroupStats>)]) -> Vec<DateLabel> {
    let n = days.len();
    // Days between two dates: a label's width apart, and one and a half where the last date
    // is aligned to the right edge and its neighbour is centred.
    let step_for = |px: u32| {
        let per_label = f64::from(LABEL_PX) * n as f64 / f64::from(px);
        (per_label.max(per_label * 1.5 - 0.5).ceil() as usize).max(1)
    };
    let (wide, narrow) = (step_for(WIDE_PX), step_for(NARROW_PX));
    let narrow = narrow.div_ceil(wide) * wide;
    // How far (px, on a phone) a centred date's middle is from the left and the right edge.
    let room = |slots: f64| slots * f64::from(NARROW_PX) / n as f64;
    let half = f64::from(LABEL_PX) / 2.0;
    days.iter()
        .enumerate()
        .filter(|(i, _)| (n - 1 - i).is_multiple_of(wide))
        .map(|(i, (d, _))| {
            let (x, anchor) = if n == 1 {
                (pct(0.5), "middle")
            } else if room(i as f64 + 0.5) < half {
                (pct(i as f64 / n as f64), "start")
            } else if room((n - i) as f64 - 0.5) < half {
                (pct((i + 1) as f64 / n as f64), "end")
            } else {
                (pct((i as f64 + 0.5) / n as f64), "middle")
            };
            DateLabel {
                x,
                anchor,
                text: date_of(*d).strftime("%b %-d").to_string(),
                wide: !(n - 1 - i).is_multiple_of(narrow),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_steps_by_one_two_or_five() {
        assert_eq!(scale(0.0), (1.0, 1.0));
        assert_eq!(scale(3.0), (1.0, 3.0));
        assert_eq!(scale(7.0), (2.0, 8.0));
        assert_eq!(scale(12.0), (5.0, 15.0));
        assert_eq!(scale(120.0), (50.0, 150.0));
        assert_eq!(scale(4001.0), (2000.0, 6000.0));
    }

    #[test]
    fn dates_fit_the_screen() {
        let days: Vec<(Day, Option<&GroupStats>)> = (20_000..20_030).map(|d| (d, None)).collect();
        let labels = date_labels(&days);
        let last = labels.last().unwrap();
        assert_eq!((last.anchor, last.wide), ("end", false));
        assert_eq!(last.text, date_of(20_029).strftime("%b %-d").to_string());
        let narrow: Vec<_> = labels.iter().filter(|l| !l.wide).collect();
        assert!(narrow.len() >= 3 && narrow.len() * LABEL_PX as usize <= NARROW_PX as usize);
        assert!(labels.len() * LABEL_PX as usize <= WIDE_PX as usize);
        let one = date_labels(&days[..1]);
        assert_eq!(
            (one.len(), one[0].anchor, one[0].wide),
            (1, "middle", false)
        );
        // A week: every day on a desktop, every other on a phone, today at the right edge.
        let week = date_labels(&days[..7]);
        assert_eq!(week.len(), 7);
        let shown: Vec<_> = week.iter().map(|l| (l.anchor, l.wide)).collect();
        assert_eq!(
            shown,
            [
                ("start", false),
                ("middle", true),
                ("middle", false),
                ("middle", true),
                ("middle", false),
                ("middle", true),
                ("end", false)
            ]
        );
    }
}
