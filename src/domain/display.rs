//! How figures read for people, the same on the admin pages and on the command line: money by
//! currency (`12.50 USD, 3 EUR`) and in the reporting currency with the amounts as they came
//! beside, the dash that stands for nothing to show, and where a link
//! sends its visitors. Percentages and returns are the stats' own ([`super::stats::percent`],
//! [`super::stats::returns_text`]); this module is where the two surfaces' other shared words
//! live, so a page and a command never disagree on how an amount looks.

use std::collections::BTreeMap;

use super::link::LinkView;
use super::stats::{self, Reported};

/// What a cell shows when there is nothing to show (no revenue, no rate): a dash that a minus
/// sign beside it (`-100.00%`) cannot be mistaken for.
pub const NOTHING: &str = "—";

/// Sums or quotients by currency (currency → exact decimal text), in the map's order:
/// `12.50 USD, 3 EUR`; empty when there are none.
#[must_use]
pub fn by_currency(amounts: &BTreeMap<String, String>) -> String {
    amounts
        .iter()
        .map(|(currency, amount)| format!("{amount} {currency}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Money as a cell shows it: [`by_currency`], or [`NOTHING`] when there is none.
#[must_use]
pub fn money(amounts: &BTreeMap<String, String>) -> String {
    or_nothing(by_currency(amounts))
}

/// `text`, or [`NOTHING`] when it is empty.
#[must_use]
pub fn or_nothing(text: String) -> String {
    if text.is_empty() {
        NOTHING.to_owned()
    } else {
        text
    }
}

/// A funnel rate (a quotient) as a percentage, or [`NOTHING`] where the stage before had none.
#[must_use]
pub fn rate(quotient: Option<&str>) -> String {
    quotient.map_or_else(|| NOTHING.to_owned(), stats::percent)
}

/// A funnel stage's rate (`quotient`, its count over the stage before's) in words that say
/// what it is a share of (`of`, the stage before: `registrations`): `40.00% of registrations`;
/// a stage larger than the one before (deposits from users who registered before the range)
/// as a multiple, `1.5 times the registrations`, never `150.00%`; `no registrations` where the
/// stage before had none.
#[must_use]
pub fn share_of(quotient: Option<&str>, of: &str) -> String {
    let Some(q) = quotient else {
        return format!("no {of}");
    };
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    let whole = whole.trim_start_matches('0');
    let at_most_one = whole.is_empty() || (whole == "1" && fraction.bytes().all(|b| b == b'0'));
    let more = !at_most_one;
    if more {
        let cents = fraction.get(..2).unwrap_or(fraction).trim_end_matches('0');
        let times = if cents.is_empty() {
            whole.to_owned()
        } else {
            format!("{whole}.{cents}")
        };
        if times == "1" {
            format!("slightly more than the {of}")
        } else {
            format!("{times} times the {of}")
        }
    } else {
        format!("{} of {of}", stats::percent(q))
    }
}

/// A group's return (`roi`, by currency of the cost) as percentages, given what it spent
/// (`cost`): [`stats::returns_text`]; empty when there is none.
#[must_use]
pub fn returns(roi: &BTreeMap<String, String>, cost: &BTreeMap<String, String>) -> String {
    stats::returns_text(
        roi.iter().map(|(c, v)| (c.as_str(), v.as_str())),
        cost.len(),
    )
}

/// A group's revenue as a cell shows it: in the reporting currency with the amounts as they
/// came beside (`171.50 USD (100 EUR, 50.50 USD, 1000 XTR)`; as it came, exactly, when it came
/// in that currency only), or as they came with which rate is missing; [`NOTHING`] when there
/// is none.
#[must_use]
pub fn revenue(g: &stats::GroupStats) -> String {
    reported_money(g, |r| r.revenue.as_deref(), &g.deposits)
}

/// A group's cost as a cell shows it, as [`revenue`] does.
#[must_use]
pub fn cost(g: &stats::GroupStats) -> String {
    reported_money(g, |r| r.cost.as_deref(), &g.cost)
}

fn reported_money(
    g: &stats::GroupStats,
    converted: impl Fn(&Reported) -> Option<&str>,
    as_came: &BTreeMap<String, String>,
) -> String {
    if as_came.is_empty() {
        return NOTHING.to_owned();
    }
    let originals = by_currency(as_came);
    let Some(r) = &g.reported else {
        return originals;
    };
    match converted(r) {
        // Only the reporting currency: the exact amount, which converting would round.
        Some(_) if as_came.len() == 1 && as_came.contains_key(&r.currency) => originals,
        Some(sum) => format!("{sum} {} ({originals})", r.currency),
        None => format!("{originals} ({})", no_rate(r)),
    }
}

/// `no rate for RUBLES`: the short form of [`Reported::fix`], for a cell.
fn no_rate(r: &Reported) -> String {
    format!("no rate for {}", r.missing_rates.join(", "))
}

/// A group's return as a cell shows it: one percentage in the reporting currency; which rate
/// is missing where one is; [`NOTHING`] without a cost. A group read without a reporting
/// currency shows its returns by currency ([`returns`]).
#[must_use]
pub fn reported_return(g: &stats::GroupStats) -> String {
    match &g.reported {
        Some(r) => match &r.roi {
            Some(q) => stats::percent(q),
            None if !r.missing_rates.is_empty() && !g.cost.is_empty() => no_rate(r),
            None => NOTHING.to_owned(),
        },
        None => or_nothing(returns(&g.roi, &g.cost)),
    }
}

/// A group's price per first deposit (`cpa`) or revenue per click (`epc`) in the reporting
/// currency (`25.0000 USD`), else by currency as they came; [`NOTHING`] when there is none.
#[must_use]
pub fn reported_price(
    g: &stats::GroupStats,
    price: impl Fn(&Reported) -> Option<&str>,
    by_currency: &BTreeMap<String, String>,
) -> String {
    match g
        .reported
        .as_ref()
        .and_then(|r| Some((price(r)?, &r.currency)))
    {
        Some((p, currency)) => format!("{p} {currency}"),
        None => money(by_currency),
    }
}

/// A moment (epoch milliseconds) as the wall clock of `zone`, written by `format`
/// (`strftime`'s directives), or empty when the moment is out of range. Every way a time is
/// written (the pages, the command line, exports, the platforms' files) goes through here.
#[must_use]
pub fn zoned_time(ms: u64, zone: &jiff::tz::TimeZone, format: &str) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(String::new, |t| {
            t.to_zoned_datetime(zone.clone())
                .strftime(format)
                .to_string()
        })
}

/// A moment (epoch milliseconds) as a wall-clock time of `zone`, to the second:
/// `2026-11-24 15:30:07`. The page or command says which zone once, beside it.
#[must_use]
pub fn local_time(ms: u64, zone: &jiff::tz::TimeZone) -> String {
    zoned_time(ms, zone, "%Y-%m-%d %H:%M:%S")
}

/// A moment (epoch milliseconds) as an ISO 8601 time of `zone` with its offset, to the
/// millisecond: `2026-11-25T00:30:07.000+01:00`, for files a program or a spreadsheet reads.
#[must_use]
pub fn iso_time(ms: u64, zone: &jiff::tz::TimeZone) -> String {
    zoned_time(ms, zone, "%Y-%m-%dT%H:%M:%S%.3f%:z")
}

/// Where a link sends its visitors: `@bot` for a Telegram bot, else its target URL.
#[must_use]
pub fn goes_to(link: &LinkView) -> String {
    if let Some(targets) = &link.targets {
        // A split: each target with its weight, and since when the health checks hold it down.
        let each: Vec<String> = targets
            .iter()
            .map(|t| {
                let down = match (t.up, t.down_since_ms) {
                    (Some(false), Some(ms)) => format!(
                        " (down since {} UTC)",
                        local_time(ms, &jiff::tz::TimeZone::UTC)
                    ),
                    (Some(false), None) => " (down)".to_owned(),
                    _ => String::new(),
                };
                format!("{} ×{}{down}", t.label(), t.weight.unwrap_or(0))
            })
            .collect();
        let fallback = link
            .fallback
            .as_ref()
            .map_or(String::new(), |f| format!("; fallback {}", f.label()));
        return format!("{}{fallback}", each.join(", "));
    }
    match (&link.bot, &link.target, &link.channel) {
        (Some(bot), _, _) => format!("@{bot}"),
        (None, Some(target), _) => target.clone(),
        (None, None, Some(channel)) => format!("channel {channel}"),
        (None, None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(c, v)| ((*c).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_time_is_the_zones_wall_clock() {
        let zone = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        // 2026-11-24T23:30:07Z is the next day in Berlin; in Kathmandu (+05:45) a quarter past.
        let ms = 1_795_563_007_000;
        assert_eq!(local_time(ms, &zone), "2026-11-25 00:30:07");
        let kathmandu = jiff::tz::TimeZone::get("Asia/Kathmandu").unwrap();
        assert_eq!(local_time(ms, &kathmandu), "2026-11-25 05:15:07");
        assert_eq!(
            local_time(ms, &jiff::tz::TimeZone::UTC),
            "2026-11-24 23:30:07"
        );
    }

    #[test]
    fn an_iso_time_has_the_zones_offset_and_milliseconds() {
        let ms = 1_795_563_007_042;
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(iso_time(ms, &berlin), "2026-11-25T00:30:07.042+01:00");
        let kathmandu = jiff::tz::TimeZone::get("Asia/Kathmandu").unwrap();
        assert_eq!(iso_time(ms, &kathmandu), "2026-11-25T05:15:07.042+05:45");
        assert_eq!(
            iso_time(1_795_563_007_000, &jiff::tz::TimeZone::UTC),
            "2026-11-24T23:30:07.000+00:00"
        );
    }

    #[test]
    fn a_funnel_rate_says_what_it_is_a_share_of() {
        assert_eq!(
            share_of(Some("0.4000"), "registrations"),
            "40.00% of registrations"
        );
        assert_eq!(share_of(Some("1.0000"), "clicks"), "100.00% of clicks");
        assert_eq!(share_of(Some("0.0000"), "clicks"), "0.00% of clicks");
        assert_eq!(
            share_of(Some("1.5000"), "registrations"),
            "1.5 times the registrations"
        );
        assert_eq!(
            share_of(Some("1.0001"), "registrations"),
            "slightly more than the registrations"
        );
        assert_eq!(
            share_of(Some("12.0000"), "bound clicks"),
            "12 times the bound clicks"
        );
        assert_eq!(share_of(None, "registrations"), "no registrations");
    }

    #[test]
    fn money_is_each_amount_with_its_currency_in_currency_order() {
        let m = amounts(&[("USD", "12.50"), ("EUR", "3")]);
        assert_eq!(by_currency(&m), "3 EUR, 12.50 USD");
        assert_eq!(money(&m), "3 EUR, 12.50 USD");
        assert_eq!(money(&amounts(&[("USD", "-0.0100")])), "-0.0100 USD");
    }

    #[test]
    fn no_money_is_empty_in_a_list_and_a_dash_in_a_cell() {
        let none = BTreeMap::new();
        assert_eq!(by_currency(&none), "");
        assert_eq!(money(&none), "—");
        assert_eq!(or_nothing(String::new()), "—");
        assert_eq!(or_nothing("66.67%".to_owned()), "66.67%");
    }

    #[test]
    fn a_rate_is_a_percentage_or_a_dash() {
        assert_eq!(rate(Some("0.3333")), "33.33%");
        assert_eq!(rate(None), "—");
    }

    #[test]
    fn a_return_names_its_currency_only_when_costs_are_in_more_than_one() {
        let roi = amounts(&[("USD", "3.0000")]);
        assert_eq!(returns(&roi, &amounts(&[("USD", "1")])), "300.00%");
        assert_eq!(
            returns(&roi, &amounts(&[("EUR", "1"), ("USD", "1")])),
            "300.00% (USD)"
        );
        assert_eq!(returns(&BTreeMap::new(), &amounts(&[("USD", "1")])), "");
    }

    fn reported_group(
        deposits: &[(&str, &str)],
        cost: &[(&str, &str)],
        rates: &[(&str, &str)],
    ) -> stats::GroupStats {
        let reporting = crate::domain::reporting::Reporting {
            currency: "USD".into(),
            history: crate::domain::rate_history::RateHistory::new(
                vec![(
                    0,
                    crate::domain::currency::CurrencyRates::parse_for_reporting(&amounts(rates))
                        .unwrap(),
                )],
                vec![],
            ),
        };
        let mut g = stats::GroupStats::new(None, &stats::Counts::default(), &BTreeMap::new());
        (g.deposits, g.cost) = (amounts(deposits), amounts(cost));
        g.reported = Some(reporting.report_now(&g));
        g
    }

    /// Money in the reporting currency with the amounts as they came beside; a missing rate
    /// named in the cell, the return too, never a bare dash.
    #[test]
    fn money_reads_in_the_reporting_currency_with_the_originals_beside() {
        let rates = [("EUR", "1.08 USD"), ("XTR", "0.013 USD")];
        let g = reported_group(&[("EUR", "100"), ("XTR", "1000")], &[("USD", "60")], &rates);
        assert_eq!(revenue(&g), "121.00 USD (100 EUR, 1000 XTR)");
        assert_eq!(cost(&g), "60 USD", "exact, as it came");
        assert_eq!(reported_return(&g), "101.67%");
        let g = reported_group(&[("RUBLES", "500")], &[("USD", "60")], &rates);
        assert_eq!(revenue(&g), "500 RUBLES (no rate for RUBLES)");
        assert_eq!(reported_return(&g), "no rate for RUBLES");
        let g = reported_group(&[], &[], &rates);
        assert_eq!(
            (revenue(&g), cost(&g), reported_return(&g)),
            ("—".into(), "—".into(), "—".into())
        );
    }

    fn link(bot: Option<&str>, target: Option<&str>) -> LinkView {
        LinkView {
            slug: "spring".into(),
            bot: bot.map(Into::into),
            target: target.map(Into::into),
            channel: None,
            channel_state: None,
            campaign_name: None,
            mode: "redirect".into(),
            url: "https://t.example.com/l/spring".into(),
            created_at_ms: 0,
            clicks: 0,
            bound_clicks: 0,
            allowed_origins: Vec::new(),
            views: 0,
            targets: None,
            fallback: None,
        }
    }

    #[test]
    fn a_link_goes_to_its_bot_or_its_target() {
        assert_eq!(goes_to(&link(Some("shop_bot"), None)), "@shop_bot");
        assert_eq!(
            goes_to(&link(None, Some("https://shop.example/?c={uid}"))),
            "https://shop.example/?c={uid}"
        );
        assert_eq!(goes_to(&link(None, None)), "");
    }
}
