//! How figures read for people, the same on the admin pages and on the command line: money by
//! currency (`12.50 USD, 3 EUR`), the dash that stands for nothing to show, and where a link
//! sends its visitors. Percentages and returns are the stats' own ([`super::stats::percent`],
//! [`super::stats::returns_text`]); this module is where the two surfaces' other shared words
//! live, so a page and a command never disagree on how an amount looks.

use std::collections::BTreeMap;

use super::link::LinkView;
use super::stats;

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

/// A group's return (`roi`, by currency of the cost) as percentages, given what it spent
/// (`cost`): [`stats::returns_text`]; empty when there is none.
#[must_use]
pub fn returns(roi: &BTreeMap<String, String>, cost: &BTreeMap<String, String>) -> String {
    stats::returns_text(
        roi.iter().map(|(c, v)| (c.as_str(), v.as_str())),
        cost.len(),
    )
}

/// Where a link sends its visitors: `@bot` for a Telegram bot, else its target URL.
#[must_use]
pub fn goes_to(link: &LinkView) -> String {
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
