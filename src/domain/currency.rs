//! Currencies: the codes of ISO 4217, which Meta's Conversions API takes and no other; the
//! rates a destination converts any other currency by (Telegram Stars `XTR`, `USDT`, ...), and
//! the rates a space's stats convert every currency to its reporting currency by: one
//! conversion, exact decimals, for both.

use std::collections::BTreeMap;

use crate::domain::decimal::Decimal;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The active codes of ISO 4217 (list one, funds and precious metals left out), sorted, so a
/// code is found by binary search.
pub const ISO_4217: &[&str] = &[
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT",
    "BGN", "BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD",
    "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD",
    "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ",
    "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD",
    "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR",
    "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR",
    "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN",
    "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR",
    "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB",
    "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS",
    "VES", "VND", "VUV", "WST", "XAF", "XCD", "XCG", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWG",
];

/// Whether `code` (upper case) is an ISO 4217 currency.
#[must_use]
pub fn is_iso_4217(code: &str) -> bool {
    ISO_4217.binary_search(&code).is_ok()
}

/// How much of an ISO currency one unit of another currency is worth: `"0.013 USD"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_unit: Decimal,
    pub to: String,
}

/// A destination's rates, by the currency they convert from (upper case).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrencyRates(pub BTreeMap<String, Rate>);

/// Decimal places a converted amount is rounded to: finer than any currency's minor unit.
const CONVERTED_PLACES: u8 = 6;

impl CurrencyRates {
    /// A destination's rates, from `{"XTR": "0.013 USD"}`: each key a currency the tracker
    /// takes (3 to 10 letters or digits) and not an ISO one, each value a positive amount and
    /// an ISO code.
    pub fn parse(rates: &BTreeMap<String, String>) -> Result<CurrencyRates, Error> {
        Self::parse_under(rates, false)
    }

    /// A space's rates, which its stats convert to the reporting currency by
    /// (`{"EUR": "1.08 USD", "XTR": "0.013 USD"}`): as a destination's, ISO currencies among the
    /// keys too, none worth itself.
    pub fn parse_for_reporting(rates: &BTreeMap<String, String>) -> Result<CurrencyRates, Error> {
        Self::parse_under(rates, true)
    }

    fn parse_under(
        rates: &BTreeMap<String, String>,
        iso_keys: bool,
    ) -> Result<CurrencyRates, Error> {
        let invalid = |why: String| Error::field(Code::InvalidField, "currency_rates", why);
        let mut out = BTreeMap::new();
        for (from, text) in rates {
            let from = crate::domain::event::check_currency(from)
                .map_err(|e| invalid(format!("currency_rates: {}", e.message)))?;
            if !iso_keys && is_iso_4217(&from) {
                return Err(invalid(format!(
                    "currency_rates converts the currencies the ad platform does not take \
                     (those not in ISO 4217); {from} is ISO 4217 and is sent as it is"
                )));
            }
            let shape = || {
                invalid(format!(
                    "currency_rates.{from} is an amount and an ISO 4217 code such as \
                     \"0.013 USD\", got {}",
                    quoted(text)
                ))
            };
            let (amount, to) = text.trim().split_once(' ').ok_or_else(shape)?;
            let per_unit = Decimal::parse(amount.trim()).map_err(|_| shape())?;
            let to = to.trim().to_ascii_uppercase();
            if !is_iso_4217(&to) || per_unit.is_negative() || per_unit.is_zero() || to == from {
                return Err(shape());
            }
            out.insert(from, Rate { per_unit, to });
        }
        Ok(CurrencyRates(out))
    }

    /// A space's rates from a setting's text, `EUR=1.08 USD, XTR=0.013 USD`, as the
    /// destinations' forms write them; the error finishes the sentence "`currency_rates` ...".
    pub fn from_text(text: &str) -> Result<CurrencyRates, String> {
        CurrencyRates::parse_for_reporting(&Self::text_pairs(text)?)
            .map_err(|e| e.message.trim_start_matches("currency_rates: ").to_owned())
    }

    /// The pairs of a rates text (commas or new lines between them), by currency.
    pub fn text_pairs(text: &str) -> Result<BTreeMap<String, String>, String> {
        text.split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                    .ok_or_else(|| {
                        format!(
                            "is rates such as EUR=1.08 USD, XTR=0.013 USD (a currency, =, what \
                             one unit is worth in an ISO 4217 currency), got {}",
                            quoted(p)
                        )
                    })
            })
            .collect()
    }

    /// The rates as a setting's text: `EUR=1.08 USD, XTR=0.013 USD`.
    #[must_use]
    pub fn text(&self) -> String {
        self.shown()
            .iter()
            .map(|(from, rate)| format!("{from}={rate}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The rates as they are written: `{"XTR": "0.013 USD"}`.
    #[must_use]
    pub fn shown(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(from, r)| (from.clone(), format!("{} {}", r.per_unit, r.to)))
            .collect()
    }

    /// The rates a destination converts by in its space: the destination's own rate for a
    /// currency wins; a currency it has none for is converted by the space's `currency_rates`.
    /// The one rule every ad platform's sender and the Google Ads file follow.
    #[must_use]
    pub fn of_destination(own: &CurrencyRates, space: &CurrencyRates) -> CurrencyRates {
        own.over(space)
    }

    /// These rates with `under`'s for the currencies these have none for: a rate of these
    /// wins for its currency.
    #[must_use]
    pub fn over(&self, under: &CurrencyRates) -> CurrencyRates {
        let mut rates = under.0.clone();
        rates.extend(
            self.0
                .iter()
                .map(|(from, rate)| (from.clone(), rate.clone())),
        );
        CurrencyRates(rates)
    }

    /// `value` in `currency` as an amount in an ISO 4217 currency: as it is when `currency`
    /// is one, converted by its rate when not. The error says what is missing or wrong, for a
    /// delivery that cannot be sent.
    pub fn to_iso(&self, value: &str, currency: &str) -> Result<(Decimal, String), String> {
        let amount = Decimal::parse(value).map_err(|_| {
            format!(
                "not sent: the value {} is no amount an ad platform can take",
                quoted(value)
            )
        })?;
        if amount.is_negative() {
            return Err(format!(
                "not sent: the value {value} is negative, and the ad platforms take no negative value"
            ));
        }
        let currency = currency.to_ascii_uppercase();
        if is_iso_4217(&currency) {
            return Ok((amount, currency));
        }
        let rate = self.0.get(&currency).ok_or_else(|| {
            format!(
                "not sent: {currency} is not an ISO 4217 currency, which the ad platforms require, and \
                 there is no rate for {currency} in the destination's currency_rates or its \
                 space's (such as {{\"{currency}\": \"0.013 USD\"}})"
            )
        })?;
        let converted = at_rate(amount, rate.per_unit).ok_or_else(|| {
            format!(
                "not sent: {value} {currency} at {} {} is too large",
                rate.per_unit, rate.to
            )
        })?;
        Ok((converted.normalized(), rate.to.clone()))
    }

    /// `amount` in `from` as an amount in `to`: as it is when they are one currency; by the
    /// rate of `from` into `to`; by the rate of `to` into `from`, inverted; or through a third
    /// currency both have a rate into (`{"EUR": "1.08 USD", "XTR": "0.013 USD"}` converts XTR
    /// to EUR); or through the currency its rate is in, when that one has a rate into `to`
    /// (`{"XTR": "0.013 USD", "USD": "0.92 EUR"}` converts XTR to EUR). `None` when no rate
    /// leads there, or the amount is too large.
    #[must_use]
    pub fn convert(&self, amount: Decimal, from: &str, to: &str) -> Option<Decimal> {
        if from == to {
            return Some(amount);
        }
        let (into_from, into_to) = (self.0.get(from), self.0.get(to));
        let onward = into_from.and_then(|a| self.0.get(&a.to).filter(|b| b.to == to));
        let converted = match (into_from, into_to) {
            (Some(r), _) if r.to == to => at_rate(amount, r.per_unit)?,
            (_, Some(r)) if r.to == from => amount.ratio(r.per_unit, CONVERTED_PLACES)?,
            (Some(a), Some(b)) if a.to == b.to => {
                at_rate(amount, a.per_unit)?.ratio(b.per_unit, CONVERTED_PLACES)?
            }
            (Some(a), _) if onward.is_some() => {
                at_rate(at_rate(amount, a.per_unit)?, onward?.per_unit)?
            }
            _ => return None,
        };
        Some(converted.normalized())
    }
}

/// `amount` times `per_unit`, rounded to [`CONVERTED_PLACES`]; `None` when too large.
fn at_rate(amount: Decimal, per_unit: Decimal) -> Option<Decimal> {
    amount
        .checked_mul(per_unit)
        .and_then(|v| v.ratio(Decimal::one(), CONVERTED_PLACES))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(pairs: &[(&str, &str)]) -> Result<CurrencyRates, Error> {
        CurrencyRates::parse(
            &pairs
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn the_table_is_sorted_and_has_no_crypto_or_stars() {
        assert!(ISO_4217.windows(2).all(|w| w[0] < w[1]));
        assert!(is_iso_4217("USD") && is_iso_4217("EUR") && is_iso_4217("RUB"));
        assert!(!is_iso_4217("XTR") && !is_iso_4217("USDT") && !is_iso_4217("usd"));
    }

    #[test]
    fn a_rate_converts_and_its_absence_says_which_is_missing() {
        let r = rates(&[("xtr", "0.013 usd")]).unwrap();
        let (v, c) = r.to_iso("100", "XTR").unwrap();
        assert_eq!((v.to_string(), c.as_str()), ("1.3".to_owned(), "USD"));
        let (v, c) = r.to_iso("12.50", "eur").unwrap();
        assert_eq!((v.to_string(), c.as_str()), ("12.50".to_owned(), "EUR"));
        let missing = r.to_iso("5", "USDT").unwrap_err();
        assert!(missing.contains("no rate for USDT"), "{missing}");
        assert!(r.to_iso("-1", "USD").unwrap_err().contains("negative"));
        assert_eq!(r.shown()["XTR"], "0.013 USD");
    }

    #[test]
    fn a_destinations_own_rate_wins_and_the_space_rates_the_rest() {
        let space = CurrencyRates::from_text("XTR=0.013 USD, USDT=0.9 EUR").unwrap();
        let own = rates(&[("XTR", "0.02 USD")]).unwrap();
        let used = CurrencyRates::of_destination(&own, &space);
        assert_eq!(used.to_iso("100", "XTR").unwrap().0.to_string(), "2");
        assert_eq!(used.to_iso("10", "USDT").unwrap().0.to_string(), "9");
        let none = CurrencyRates::of_destination(&CurrencyRates::default(), &space);
        assert_eq!(none.to_iso("100", "XTR").unwrap().0.to_string(), "1.3");
    }

    /// A space's rates take ISO currencies as keys, and convert directly, inverted and
    /// through a currency both have a rate into; without a rate there is no amount.
    #[test]
    fn a_spaces_rates_convert_every_way_a_rate_leads() {
        let d = |t| Decimal::parse(t).unwrap();
        let pairs = [("EUR", "1.08 USD"), ("XTR", "0.013 USD")];
        let r = CurrencyRates::parse_for_reporting(
            &pairs
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        )
        .unwrap();
        let convert = |v, from, to| r.convert(d(v), from, to).map(|x| x.to_string());
        assert_eq!(convert("100", "EUR", "USD").as_deref(), Some("108"));
        assert_eq!(convert("100", "XTR", "USD").as_deref(), Some("1.3"));
        assert_eq!(convert("108", "USD", "EUR").as_deref(), Some("100"));
        assert_eq!(convert("108", "XTR", "EUR").as_deref(), Some("1.3"));
        assert_eq!(convert("7.10", "USD", "USD").as_deref(), Some("7.10"));
        assert_eq!(convert("5", "RUBLES", "USD"), None);
        assert_eq!(convert("5", "USD", "GBP"), None);
        let onward = CurrencyRates::from_text("XTR=0.013 USD, USD=0.9 EUR").unwrap();
        let through = onward
            .convert(d("1000"), "XTR", "EUR")
            .map(|x| x.to_string());
        assert_eq!(
            through.as_deref(),
            Some("11.7"),
            "1000 XTR = 13 USD = 11.7 EUR"
        );
        assert_eq!(onward.convert(d("1000"), "XTR", "GBP"), None);
        assert!(
            rates(&[("EUR", "1.08 USD")]).is_err(),
            "a destination's rule"
        );
        let itself =
            CurrencyRates::parse_for_reporting(&[("USD".to_owned(), "1 USD".to_owned())].into());
        assert!(itself.is_err(), "a currency is not worth itself");
    }

    #[test]
    fn rates_have_rules() {
        for bad in [
            ("USD", "1 EUR"),
            ("XTR", "0.013"),
            ("XTR", "0.013 XTR"),
            ("XTR", "0 USD"),
            ("XTR", "-1 USD"),
            ("X!", "1 USD"),
        ] {
            let e = rates(&[bad]).unwrap_err();
            assert_eq!(e.field, Some("currency_rates"), "{bad:?}");
        }
    }
}
