//! The European Central Bank's euro foreign exchange reference rates
//! (`docs/api.md#reporting-currency`), which a space may fetch daily for its stats: the day's
//! file read (`eurofxref-daily.xml`: a `<Cube time="YYYY-MM-DD">` holding a
//! `<Cube currency="USD" rate="1.0812"/>` per currency, each what one euro is worth), the rates
//! kept as text, and crossed through the euro into the rates of a reporting currency.
//!
//! The ECB documents the file and its rates at
//! <https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/html/index.en.html>:
//! "The reference rates are usually updated at around 16:00 CET every working day, except on
//! TARGET closing days." A day without a new file keeps the rates of the last one.

use std::collections::BTreeMap;

use crate::domain::cost::{self, Day};
use crate::domain::currency::{CurrencyRates, Rate, is_iso_4217};
use crate::domain::decimal::Decimal;
use crate::domain::input::quoted;

/// The address of the ECB's daily file, which the setting `ecb_rates_url` is set to to use it.
pub const ECB_DAILY_URL: &str = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml";

/// Decimal places of a rate crossed through the euro: finer than the ECB's five significant
/// digits, so crossing loses nothing a report shows.
const CROSSED_PLACES: u8 = 10;

/// The longest address `ecb_rates_url` takes.
const MAX_URL_CHARS: usize = 512;

/// The setting `ecb_rates_url` from its text: an `http` or `https` address without
/// credentials, or `""` for none. The error finishes the sentence "`ecb_rates_url` ...".
pub fn check_url(text: &str) -> Result<Option<String>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || {
        format!(
            "is an http or https address of at most {MAX_URL_CHARS} characters, such as \
             {ECB_DAILY_URL}, or \"\" for none, got {}",
            quoted(text)
        )
    };
    if text.chars().count() > MAX_URL_CHARS {
        return Err(bad());
    }
    let url = url::Url::parse(text).map_err(|_| bad())?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.username().is_empty()
        && url.password().is_none();
    if !plain {
        return Err(bad());
    }
    Ok(Some(text.to_owned()))
}

/// One day's reference rates: what one euro is worth in each currency (ISO 4217, upper case).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EcbRates(pub BTreeMap<String, Decimal>);

impl EcbRates {
    /// The day and the rates of the ECB's daily file. Anything else (an error page, a file
    /// cut short, a rate that is no positive amount) is refused, saying what was wrong.
    pub fn parse_xml(body: &str) -> Result<(Day, EcbRates), String> {
        let mut day = None;
        let mut rates = BTreeMap::new();
        for tag in body.split("<Cube").skip(1) {
            let tag = tag.split('>').next().unwrap_or("");
            if let Some(time) = attribute(tag, "time") {
                let parsed = cost::parse_day(time, "time")
                    .map_err(|_| format!("the rates' day is no date: {}", quoted(time)))?;
                if day.replace(parsed).is_some() {
                    return Err("the file holds more than one day".to_owned());
                }
            }
            if let Some(currency) = attribute(tag, "currency") {
                let rate = attribute(tag, "rate").unwrap_or("");
                let per_euro = Decimal::parse(rate)
                    .ok()
                    .filter(|r| !r.is_negative() && !r.is_zero())
                    .ok_or_else(|| {
                        format!("the rate of {currency} is no amount: {}", quoted(rate))
                    })?;
                if !is_iso_4217(currency) || currency == "EUR" {
                    return Err(format!("{} is no currency the ECB rates", quoted(currency)));
                }
                rates.insert(currency.to_owned(), per_euro);
            }
        }
        let day = day.ok_or("the file holds no day of rates (no <Cube time=...>)")?;
        if rates.is_empty() {
            return Err("the file holds no rates (no <Cube currency=... rate=...>)".to_owned());
        }
        Ok((day, EcbRates(rates)))
    }

    /// The rates as they are kept: `JPY=162.5, USD=1.0812`.
    #[must_use]
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|(currency, rate)| format!("{currency}={rate}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The rates from their kept text; `None` when it is not what [`EcbRates::text`] writes.
    #[must_use]
    pub fn from_text(text: &str) -> Option<EcbRates> {
        text.split(", ")
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (currency, rate) = pair.split_once('=')?;
                Some((currency.to_owned(), Decimal::parse(rate).ok()?))
            })
            .collect::<Option<_>>()
            .map(EcbRates)
    }

    /// The rates into `to`: what one unit of the euro and of each other currency is worth in
    /// `to`, crossed through the euro. None when the ECB has no rate for `to`.
    #[must_use]
    pub fn crossed_into(&self, to: &str) -> CurrencyRates {
        let per_euro = |c: &str| {
            if c == "EUR" {
                Some(Decimal::one())
            } else {
                self.0.get(c).copied()
            }
        };
        let Some(target) = per_euro(to) else {
            return CurrencyRates::default();
        };
        let currencies = self.0.keys().map(String::as_str).chain(["EUR"]);
        CurrencyRates(
            currencies
                .filter(|c| *c != to)
                .filter_map(|c| {
                    let per_unit = target.ratio(per_euro(c)?, CROSSED_PLACES)?.normalized();
                    let to = to.to_owned();
                    Some((c.to_owned(), Rate { per_unit, to }))
                })
                .collect(),
        )
    }
}

/// The value of `name="..."` (or `name='...'`) in the attributes of a tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = tag;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + name.len()..].trim_start();
        rest = &rest[at + name.len()..];
        if !before.is_some_and(char::is_whitespace) {
            continue;
        }
        let Some(value) = after.strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        let quote = value.chars().next().filter(|q| *q == '"' || *q == '\'')?;
        return value[1..].split(quote).next();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of the ECB's daily file as it serves it (single quotes, a namespace).
    const DAILY: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
        <gesmes:Envelope xmlns:gesmes=\"http://www.gesmes.org/xml/2002-08-01\" \
        xmlns=\"http://www.ecb.int/vocabulary/2002-08-01/eurofxref\">\n\
        <gesmes:subject>Reference rates</gesmes:subject>\n\
        <gesmes:Sender><gesmes:name>European Central Bank</gesmes:name></gesmes:Sender>\n\
        <Cube>\n<Cube time='2026-11-27'>\n\
        <Cube currency='USD' rate='1.0812'/>\n<Cube currency='JPY' rate='162.5'/>\n\
        <Cube currency='GBP' rate='0.8'/>\n</Cube>\n</Cube>\n</gesmes:Envelope>";

    #[test]
    fn the_daily_file_gives_its_day_and_each_currencys_rate() {
        let (day, rates) = EcbRates::parse_xml(DAILY).unwrap();
        assert_eq!(cost::day_text(day), "2026-11-27");
        assert_eq!(rates.text(), "GBP=0.8, JPY=162.5, USD=1.0812");
        assert_eq!(EcbRates::from_text(&rates.text()), Some(rates.clone()));
        let double = DAILY.replace('\'', "\"");
        assert_eq!(EcbRates::parse_xml(&double).unwrap().1, rates);
    }

    #[test]
    fn anything_but_the_daily_file_is_refused_saying_why() {
        for (body, why) in [
            ("<html>Service unavailable</html>", "no day"),
            ("<Cube><Cube time='2026-11-27'></Cube></Cube>", "no rates"),
            (
                "<Cube time='2026-11-27'><Cube currency='USD' rate='abc'/>",
                "no amount",
            ),
            (
                "<Cube time='2026-11-27'><Cube currency='USD' rate='0'/>",
                "no amount",
            ),
            (
                "<Cube time='2026-11-27'><Cube currency='USD' rate='-1'/>",
                "no amount",
            ),
            (
                "<Cube time='2026-11-27'><Cube currency='XTR' rate='1'/>",
                "no currency",
            ),
            (
                "<Cube time='27.11.2026'><Cube currency='USD' rate='1'/>",
                "no date",
            ),
            (
                "<Cube time='2026-11-27'/><Cube time='2026-11-28'><Cube currency='USD' rate='1'/>",
                "more than one day",
            ),
        ] {
            let err = EcbRates::parse_xml(body).unwrap_err();
            assert!(err.contains(why), "{body}: {err}");
        }
        let one = "<Cube time='2026-11-27'><Cube currency='USD' rate='0.0001'/>";
        assert!(
            EcbRates::parse_xml(one).is_ok(),
            "the smallest positive rate is one"
        );
    }

    #[test]
    fn the_address_is_http_or_https_and_empty_turns_it_off() {
        assert_eq!(check_url(""), Ok(None));
        assert_eq!(
            check_url(ECB_DAILY_URL).unwrap().as_deref(),
            Some(ECB_DAILY_URL)
        );
        let longest = format!("https://e.example/{}", "a".repeat(MAX_URL_CHARS - 18));
        assert_eq!(longest.chars().count(), MAX_URL_CHARS);
        assert!(check_url(&longest).is_ok());
        assert!(
            check_url(&format!("{longest}a")).is_err(),
            "one past the bound"
        );
        for bad in [
            "ftp://e.example/x.xml",
            "www.ecb.europa.eu",
            "https://u:p@e.example/",
        ] {
            let err = check_url(bad).unwrap_err();
            assert!(
                err.starts_with("is an http or https address"),
                "{bad}: {err}"
            );
        }
    }

    /// Rates per euro become rates into the reporting currency, the euro's own among them.
    #[test]
    fn rates_cross_through_the_euro_into_the_reporting_currency() {
        let (_, rates) = EcbRates::parse_xml(DAILY).unwrap();
        let into_usd = rates.crossed_into("USD");
        assert_eq!(into_usd.shown()["EUR"], "1.0812 USD");
        assert_eq!(into_usd.shown()["GBP"], "1.3515 USD");
        assert!(!into_usd.0.contains_key("USD"));
        let into_eur = rates.crossed_into("EUR");
        assert_eq!(into_eur.shown()["GBP"], "1.25 EUR");
        assert!(
            rates.crossed_into("XTR").0.is_empty(),
            "the ECB rates no XTR"
        );
    }
}
