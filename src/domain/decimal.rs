//! Exact decimal amounts: parsed from text, kept as written, compared by value, summed exactly.
//!
//! A deposit of `"12.10"` must come back as `12.10`, never `12.1000000001`, and `7` must be the
//! same deposit as `"7.00"` for deduplication. A `Decimal` is an integer mantissa and a scale, so
//! no binary floating point is ever involved.

use std::fmt;

use crate::domain::input::quoted;

/// The bound of an amount (`docs/api.md`): at most 28 significant digits, which also keeps every
/// mantissa (and sums of many of them) inside an `i128`.
pub const MAX_SIGNIFICANT_DIGITS: usize = 28;

/// `mantissa / 10^scale`, with the scale the caller wrote (`12.10` has scale 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    mantissa: i128,
    scale: u8,
}

impl Decimal {
    /// Parses decimal notation: an optional `-`, digits, optionally `.` and digits, optionally
    /// an exponent (`1e-7`, `1.5E3`, as JSON encoders write small and large numbers). An
    /// exponent is applied exactly: `1.5E3` is `1500`, `1e-7` is `0.0000001`.
    ///
    /// The error is a sentence about `value` that says what was wrong.
    pub fn parse(text: &str) -> Result<Decimal, String> {
        let not_decimal = || {
            format!(
                "value must be a decimal number such as 12 or -3.50, got {}",
                quoted(text)
            )
        };
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (number, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((n, e)) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty()
                    || digits.len() > 4
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(not_decimal());
                }
                (n, e.parse::<i32>().map_err(|_| not_decimal())?)
            }
            None => (unsigned, 0),
        };
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (number, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int_part) || frac_part.is_some_and(|f| !all_digits(f)) {
            return Err(not_decimal());
        }
        let frac_part = frac_part.unwrap_or("");
        let too_precise = || {
            format!(
                "value must have at most {MAX_SIGNIFICANT_DIGITS} significant digits and \
                 {MAX_SIGNIFICANT_DIGITS} decimal places, got {}",
                quoted(text)
            )
        };
        let digits = || int_part.bytes().chain(frac_part.bytes());
        // Written scale minus the exponent; negative means trailing zeros to append.
        let scale =
            i64::try_from(frac_part.len()).map_err(|_| too_precise())? - i64::from(exponent);
        let significant = digits().skip_while(|&b| b == b'0').count();
        let appended = usize::try_from(-scale).unwrap_or(0);
        if significant > 0 && significant + appended > MAX_SIGNIFICANT_DIGITS {
            return Err(too_precise());
        }
        if usize::try_from(scale).is_ok_and(|s| s > MAX_SIGNIFICANT_DIGITS) {
            return Err(too_precise());
        }
        let mut mantissa: i128 = 0;
        for b in digits().skip_while(|&b| b == b'0') {
            // Cannot overflow: at most 28 significant digits, 10^28 < 2^127.
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        for _ in 0..appended {
            mantissa *= 10;
        }
        Ok(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            scale: u8::try_from(scale.max(0)).map_err(|_| too_precise())?,
        })
    }

    /// The same amount with trailing fractional zeros removed: `7.00` and `7` normalise alike.
    #[must_use]
    pub fn normalized(self) -> Decimal {
        let mut d = self;
        while d.scale > 0 && d.mantissa % 10 == 0 {
            d.mantissa /= 10;
            d.scale -= 1;
        }
        d
    }

    /// Exact sum, at the larger of the two scales; `None` on overflow (sums of ~10^10 maximal
    /// amounts), which callers report rather than wrap.
    #[must_use]
    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let a = self
            .mantissa
            .checked_mul(10_i128.checked_pow(u32::from(scale - self.scale))?)?;
        let b = other
            .mantissa
            .checked_mul(10_i128.checked_pow(u32::from(scale - other.scale))?)?;
        Some(Decimal {
            mantissa: a.checked_add(b)?,
            scale,
        })
    }

    /// Exact difference; `None` on overflow.
    #[must_use]
    pub fn checked_sub(self, other: Decimal) -> Option<Decimal> {
        self.checked_add(Decimal {
            mantissa: other.mantissa.checked_neg()?,
            scale: other.scale,
        })
    }

    /// Exact product, at the sum of the two scales (a deposit times a rate); `None` on
    /// overflow.
    #[must_use]
    pub fn checked_mul(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.checked_add(other.scale)?;
        if usize::from(scale) > 2 * MAX_SIGNIFICANT_DIGITS {
            return None;
        }
        Some(Decimal {
            mantissa: self.mantissa.checked_mul(other.mantissa)?,
            scale,
        })
    }

    #[must_use]
    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    #[must_use]
    pub fn is_negative(self) -> bool {
        self.mantissa < 0
    }

    /// `self / by`, rounded half away from zero to `places` decimals (a rate or a price per
    /// unit, where exact is impossible); `None` when `by` is zero or on overflow.
    #[must_use]
    pub fn ratio(self, by: Decimal, places: u8) -> Option<Decimal> {
        if by.mantissa == 0 {
            return None;
        }
        let pow = |n: u8| 10_i128.checked_pow(u32::from(n));
        // self / by = (m1 / 10^s1) / (m2 / 10^s2) = m1 * 10^(s2 + places) / (m2 * 10^s1), in
        // units of 10^-places.
        let numerator = self
            .mantissa
            .checked_mul(pow(by.scale.checked_add(places)?)?)?;
        let denominator = by.mantissa.checked_mul(pow(self.scale)?)?;
        let (q, r) = (numerator / denominator, numerator % denominator);
        let round_away = r.unsigned_abs().checked_mul(2)? >= denominator.unsigned_abs();
        let negative = (numerator < 0) != (denominator < 0);
        let mantissa = match (round_away, negative) {
            (false, _) => q,
            (true, false) => q.checked_add(1)?,
            (true, true) => q.checked_sub(1)?,
        };
        Some(Decimal {
            mantissa,
            scale: places,
        })
    }

    #[must_use]
    pub fn one() -> Decimal {
        Decimal {
            mantissa: 1,
            scale: 0,
        }
    }

    #[must_use]
    pub fn zero() -> Decimal {
        Decimal {
            mantissa: 0,
            scale: 0,
        }
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let sign = if self.mantissa < 0 { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_round_half_away_from_zero() {
        let d = |t| Decimal::parse(t).unwrap();
        let r = |a, b| d(a).ratio(d(b), 4).map(|x| x.to_string());
        assert_eq!(r("1", "3").as_deref(), Some("0.3333"));
        assert_eq!(r("2", "3").as_deref(), Some("0.6667"));
        assert_eq!(r("-2", "3").as_deref(), Some("-0.6667"));
        assert_eq!(r("0.00005", "1").as_deref(), Some("0.0001"), "half: away");
        assert_eq!(
            r("0.000049", "1").as_deref(),
            Some("0.0000"),
            "just below half"
        );
        assert_eq!(r("120.00", "40").as_deref(), Some("3.0000"));
        assert_eq!(r("1", "0"), None);
        assert_eq!(d("1.5").checked_sub(d("0.25")).unwrap().to_string(), "1.25");
    }

    #[test]
    fn keeps_the_written_scale() {
        for text in ["12.10", "0.10", "-3.5", "12", "0", "0.0000001", "-0.50"] {
            assert_eq!(Decimal::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Decimal::parse("007.50").unwrap().to_string(), "7.50");
    }

    #[test]
    fn equal_amounts_normalise_alike() {
        let seven = Decimal::parse("7").unwrap();
        assert_eq!(Decimal::parse("7.00").unwrap().normalized(), seven);
        assert_eq!(Decimal::parse("7.0").unwrap().normalized(), seven);
        assert_ne!(Decimal::parse("7.01").unwrap().normalized(), seven);
        assert_eq!(
            Decimal::parse("-0.0").unwrap().normalized(),
            Decimal::zero()
        );
    }

    #[test]
    fn rejects_what_is_not_plain_decimal() {
        for text in [
            "", "-", "12,5", "0x10", "NaN", "inf", "Infinity", ".5", "5.", "+5", " 5", "5 ", "1e",
            "1e+", "e5", "1e1.5", "1e99999", "1.2.3", "--1",
        ] {
            assert!(Decimal::parse(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn significant_digit_bound() {
        let ok = "1234567890123456789012345678"; // 28 digits
        let too_many = "12345678901234567890123456789"; // 29 digits
        assert!(Decimal::parse(ok).is_ok());
        assert!(Decimal::parse(too_many).is_err());
        // Leading zeros are not significant; trailing ones are.
        assert!(Decimal::parse(&format!("000{ok}")).is_ok());
        assert!(Decimal::parse("0.1234567890123456789012345678").is_ok());
        assert!(Decimal::parse("0.12345678901234567890123456789").is_err());
    }

    #[test]
    fn exponents_are_applied_exactly() {
        let d = |t: &str| Decimal::parse(t).unwrap().to_string();
        assert_eq!(d("1e-07"), "0.0000001");
        assert_eq!(d("1.5E3"), "1500");
        assert_eq!(d("-2.50e+1"), "-25.0");
        assert_eq!(d("12.10e0"), "12.10");
        assert!(Decimal::parse("1e27").is_ok(), "28 digits");
        assert!(Decimal::parse("1e28").is_err(), "29 digits");
        assert!(Decimal::parse("1e-28").is_ok());
        assert!(Decimal::parse("1e-29").is_err(), "29 decimal places");
        assert!(Decimal::parse("1e400").is_err());
        assert_eq!(d("0e400"), "0");
    }

    #[test]
    fn sums_exactly() {
        let a = Decimal::parse("0.10").unwrap();
        let b = Decimal::parse("0.2").unwrap();
        assert_eq!(a.checked_add(b).unwrap().to_string(), "0.30");
        let refund = Decimal::parse("-12.5").unwrap();
        assert_eq!(
            Decimal::parse("12.5")
                .unwrap()
                .checked_add(refund)
                .unwrap()
                .normalized(),
            Decimal::zero()
        );
    }
}
