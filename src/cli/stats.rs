//! The answer of `tracker stats` as a table: a line per group, its counts, the share of its
//! clicks that were bound, then each currency's revenue, cost, return, cost per first deposit
//! (CPA) and revenue per click (EPC), worded as the admin pages word them (`domain::display`);
//! then the same in the space's reporting currency (a currency without a rate said, on its line
//! and below with the command that adds one); where a group had channel joins or leaves, its
//! joins, subscribers kept and cost per subscriber kept after them; where a group had views of
//! its landing pages, the views and the view-to-click rate last.

use std::fmt::Write as _;

use crate::control::StatsShown;
use crate::domain::display;
use crate::domain::event::EventKind;
use crate::domain::reporting;
use crate::domain::stats::{GroupStats, Reported, percent};

pub(super) fn table_text(shown: &StatsShown) -> String {
    let mut text = format!(
        "{:<24} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  revenue / cost / roi / cpa / epc\n",
        shown.by, "clicks", "bound", "regs", "deps", "first", "bound%"
    );
    let reporting = shown.groups.iter().find_map(|g| g.reported.as_ref());
    if let Some(r) = reporting {
        let heading = format!(" | in {}: revenue / cost / roi / cpa / epc", r.currency);
        text.insert_str(text.len() - 1, &heading);
    }
    let channels = shown.groups.iter().any(|g| g.joins != 0 || g.leaves != 0);
    if channels {
        text.insert_str(text.len() - 1, " | joins / kept / cost per kept");
    }
    let views = shown.groups.iter().any(|g| g.views.is_some_and(|v| v > 0));
    if views {
        text.insert_str(text.len() - 1, " | views / view-to-click");
    }
    for g in &shown.groups {
        let mut line = group_line(g);
        if let Some(r) = &g.reported {
            line.push_str(&reported_part(g, r));
        }
        if channels {
            let _ = write!(
                line,
                " | {} / {} / {}",
                g.joins,
                g.subscribers_kept,
                display::money(&g.cost_per_subscriber)
            );
        }
        if views {
            let count = g
                .views
                .map_or_else(|| display::NOTHING.to_owned(), |v| v.to_string());
            let rate = display::rate(g.rates.view_to_click.as_deref());
            let _ = write!(line, " | {count} / {rate}");
        }
        let _ = writeln!(text, "{line}");
    }
    if shown.groups.is_empty() {
        text.push_str("no clicks, events or costs in this range");
    }
    let mut missing: Vec<String> = shown
        .groups
        .iter()
        .filter_map(|g| g.reported.as_ref())
        .flat_map(|r| r.missing_rates.iter().cloned())
        .collect();
    missing.sort();
    missing.dedup();
    if let Some(fix) = reporting.and_then(|r| reporting::fix(&missing, &r.currency)) {
        let _ = writeln!(
            text,
            "\n{fix}; here: tracker space set {} currency_rates=\"{}=... {}\"",
            shown.space,
            missing[0],
            reporting.map_or("", |r| r.currency.as_str())
        );
    }
    text.trim_end().to_owned()
}

/// A group's money in the reporting currency: revenue, cost, return, CPA and EPC, each
/// `no rate` where an amount it needs has none, the dash where there is nothing to show.
fn reported_part(g: &GroupStats, r: &Reported) -> String {
    let unconverted = |m: &std::collections::BTreeMap<String, String>| {
        m.keys().any(|c| r.missing_rates.contains(c))
    };
    let (revenue_missing, cost_missing) = (unconverted(&g.deposits), unconverted(&g.cost));
    let shown = |v: Option<String>, missing: bool| {
        v.unwrap_or_else(|| if missing { "no rate" } else { display::NOTHING }.to_owned())
    };
    format!(
        " | {} / {} / {} / {} / {}",
        shown(r.revenue.clone(), revenue_missing),
        shown(r.cost.clone(), cost_missing),
        shown(
            r.roi.as_deref().map(percent),
            (revenue_missing || cost_missing) && !g.cost.is_empty()
        ),
        shown(r.cpa.clone(), cost_missing && g.first_deposits > 0),
        shown(r.epc.clone(), revenue_missing && g.clicks > 0),
    )
}

fn group_line(g: &GroupStats) -> String {
    let events = |kind: EventKind| g.events.get(kind.as_str()).copied().unwrap_or(0);
    format!(
        "{:<24} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  {} / {} / {} / {} / {}",
        g.group.as_deref().unwrap_or("(none)"),
        g.clicks,
        g.bound_clicks,
        events(EventKind::Registration),
        events(EventKind::Deposit),
        g.first_deposits,
        display::rate(g.rates.bound.as_deref()),
        display::money(&g.deposits),
        display::money(&g.cost),
        display::or_nothing(display::returns(&g.roi, &g.cost)),
        display::money(&g.cpa),
        display::money(&g.epc),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stats::Rates;

    fn group(name: Option<&str>) -> GroupStats {
        let money = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(c, v)| ((*c).to_owned(), (*v).to_owned()))
                .collect()
        };
        GroupStats {
            group: name.map(Into::into),
            clicks: 40,
            bound_clicks: 30,
            events: [("registration".into(), 12), ("deposit".into(), 5)].into(),
            first_deposits: 4,
            deposits: money(&[("USD", "120.50")]),
            cost: money(&[("USD", "100")]),
            roi: money(&[("USD", "0.2050")]),
            cpa: money(&[("USD", "25")]),
            epc: money(&[("USD", "3.0125")]),
            joins: 0,
            leaves: 0,
            subscribers_kept: 0,
            cost_per_subscriber: money(&[]),
            reported: None,
            views: None,
            rates: Rates {
                bound: Some("0.7500".into()),
                registration: Some("0.4000".into()),
                first_deposit: Some("0.3333".into()),
                view_to_click: None,
            },
        }
    }

    #[test]
    fn a_group_reads_as_its_counts_then_money_by_currency() {
        let shown = StatsShown {
            space: "default".into(),
            by: "campaign_name".into(),
            groups: vec![group(Some("spring"))],
        };
        let text = table_text(&shown);
        let line = text.lines().nth(1).unwrap();
        assert!(line.starts_with("spring "), "{line}");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            words[1..7],
            ["40", "30", "12", "5", "4", "75.00%"],
            "{line}"
        );
        assert!(
            line.ends_with("  120.50 USD / 100 USD / 20.50% / 25 USD / 3.0125 USD"),
            "{line}"
        );
        assert!(
            text.starts_with("campaign_name ")
                && text.lines().next().unwrap().ends_with("roi / cpa / epc")
        );
    }

    /// Channel figures follow on every line once any group had a join or a leave, and not
    /// before.
    #[test]
    fn channel_joins_show_only_where_some_group_had_them() {
        let mut shown = StatsShown {
            space: "default".into(),
            by: "campaign_name".into(),
            groups: vec![group(Some("spring")), group(Some("bots"))],
        };
        assert!(!table_text(&shown).contains("joins"));
        let spring = &mut shown.groups[0];
        (spring.joins, spring.leaves, spring.subscribers_kept) = (12, 2, 10);
        spring.cost_per_subscriber = [("USD".to_owned(), "10".to_owned())].into();
        let text = table_text(&shown);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with("epc | joins / kept / cost per kept"),
            "{text}"
        );
        assert!(lines[1].ends_with(" | 12 / 10 / 10 USD"), "{text}");
        assert!(lines[2].ends_with(" | 0 / 0 / —"), "{text}");
    }

    /// Views and the view-to-click rate follow on every line once any group had a view, and
    /// not before; a group whose views are not known shows a dash.
    #[test]
    fn views_show_only_where_some_group_had_them() {
        let mut shown = StatsShown {
            space: "default".into(),
            by: "campaign_name".into(),
            groups: vec![group(Some("spring")), group(None)],
        };
        shown.groups[1].views = Some(0);
        assert!(!table_text(&shown).contains("views"));
        shown.groups[0] = group(Some("spring")).with_views(Some(160));
        let text = table_text(&shown);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("epc | views / view-to-click"), "{text}");
        assert!(lines[1].ends_with(" | 160 / 25.00%"), "{text}");
        assert!(lines[2].ends_with(" | 0 / —"), "{text}");
        shown.groups[1].views = None;
        assert!(table_text(&shown).ends_with(" | — / —"), "{text}");
    }

    /// Money in the reporting currency follows the amounts as they came; a missing rate is
    /// said, on its line and once below with the command that adds it.
    #[test]
    fn money_in_the_reporting_currency_follows_and_a_missing_rate_is_said() {
        let mut g = group(Some("spring"));
        g.reported = Some(Reported {
            currency: "USD".into(),
            revenue: Some("171.50".into()),
            cost: Some("100.00".into()),
            roi: Some("0.7150".into()),
            cpa: Some("25.0000".into()),
            epc: Some("4.2875".into()),
            missing_rates: Vec::new(),
            fix: None,
            sums: crate::domain::stats::ReportedSums::default(),
        });
        let mut shown = StatsShown {
            space: "default".into(),
            by: "campaign_name".into(),
            groups: vec![g],
        };
        let text = table_text(&shown);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(" | in USD: revenue / cost / roi / cpa / epc"),
            "{text}"
        );
        assert!(
            text.ends_with(" | 171.50 / 100.00 / 71.50% / 25.0000 / 4.2875"),
            "{text}"
        );
        let g = &mut shown.groups[0];
        g.deposits.insert("RUBLES".into(), "500".into());
        let r = g.reported.as_mut().unwrap();
        (r.revenue, r.roi, r.epc) = (None, None, None);
        r.missing_rates = vec!["RUBLES".into()];
        let text = table_text(&shown);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].ends_with(" | no rate / 100.00 / no rate / 25.0000 / no rate"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("no rate for RUBLES into USD: Settings -> currency rates"),
            "{text}"
        );
        assert!(
            lines[3].ends_with("tracker space set default currency_rates=\"RUBLES=... USD\""),
            "{text}"
        );
    }

    /// Nothing to show is the pages' dash, never a blank or a zero.
    #[test]
    fn a_group_without_money_or_clicks_shows_dashes() {
        let mut g = group(None);
        g.deposits.clear();
        g.roi.clear();
        g.epc.clear();
        g.rates.bound = None;
        let line = group_line(&g);
        assert!(line.starts_with("(none) "), "{line}");
        assert!(line.ends_with("—  — / 100 USD / — / 25 USD / —"), "{line}");
    }
}
