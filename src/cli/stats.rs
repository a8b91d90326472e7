//! The answer of `tracker stats` as a table: a line per group, its counts, the share of its
//! clicks that were bound, then each currency's revenue, cost, return, cost per first deposit
//! (CPA) and revenue per click (EPC), worded as the admin pages word them (`domain::display`);
//! where a group had channel joins or leaves, its joins, subscribers kept and cost per
//! subscriber kept after them.

use std::fmt::Write as _;

use crate::control::StatsShown;
use crate::domain::display;
use crate::domain::event::EventKind;
use crate::domain::stats::GroupStats;

pub(super) fn table_text(shown: &StatsShown) -> String {
    let mut text = format!(
        "{:<24} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}  revenue / cost / roi / cpa / epc\n",
        shown.by, "clicks", "bound", "regs", "deps", "first", "bound%"
    );
    let channels = shown.groups.iter().any(|g| g.joins != 0 || g.leaves != 0);
    if channels {
        text.insert_str(text.len() - 1, " | joins / kept / cost per kept");
    }
    for g in &shown.groups {
        let mut line = group_line(g);
        if channels {
            let _ = write!(
                line,
                " | {} / {} / {}",
                g.joins,
                g.subscribers_kept,
                display::money(&g.cost_per_subscriber)
            );
        }
        let _ = writeln!(text, "{line}");
    }
    if shown.groups.is_empty() {
        text.push_str("no clicks, events or costs in this range");
    }
    text.trim_end().to_owned()
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
            rates: Rates {
                bound: Some("0.7500".into()),
                registration: Some("0.4000".into()),
                first_deposit: Some("0.3333".into()),
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
