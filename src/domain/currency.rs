//! Currencies: the codes of ISO 4217, which Meta's Conversions API takes and no other, and the
//! rates a destination converts any other currency by (Telegram Stars `XTR`, `USDT`, ...).

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
    /// From `{"XTR": "0.013 USD"}`: each key a currency the tracker takes (3 to 10 letters or
    /// digits) and not an ISO one, each value a positive amount and an ISO code.
    pub fn parse(rates: &BTreeMap<String, String>) -> Result<CurrencyRates, Error> {
        let invalid = |why: String| Error::field(Code::InvalidField, "currency_rates", why);
        let mut out = BTreeMap::new();
        for (from, text) in rates {
            let from = crate::domain::event::check_currency(from)
                .map_err(|e| invalid(format!("currency_rates: {}", e.message)))?;
            if is_iso_4217(&from) {
                return Err(invalid(format!(
                    "currency_rates converts currencies Meta does not take; {from} is ISO 4217 \
                     and is sent as it is"
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
            if !is_iso_4217(&to) || per_unit.is_negative() || per_unit.is_zero() {
                return Err(shape());
            }
            out.insert(from, Rate { per_unit, to });
        }
        Ok(CurrencyRates(out))
    }

    /// The rates as they are written: `{"XTR": "0.013 USD"}`.
    #[must_use]
    pub fn shown(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(from, r)| (from.clone(), format!("{} {}", r.per_unit, r.to)))
            .collect()
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
                 the destination's currency_rates has no rate for {currency} (such as \
                 {{\"{currency}\": \"0.013 USD\"}})"
            )
        })?;
        let converted = amount
            .checked_mul(rate.per_unit)
            .and_then(|v| v.ratio(Decimal::one(), CONVERTED_PLACES))
            .ok_or_else(|| {
                format!(
                    "not sent: {value} {currency} at {} {} is too large",
                    rate.per_unit, rate.to
                )
            })?;
        Ok((converted.normalized(), rate.to.clone()))
    }
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
