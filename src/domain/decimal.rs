//! Exact decimal amounts: parsed from text, kept as written, compared by value, summed exactly.
//!
//! A deposit of `"12.10"` must come back as `12.10`, never `12.1000000001`, and `7` must be the
//! same deposit as `"7.00"` for deduplication. A `Decimal` is an integer mantissa and a scale, so
//! no binary floating point is ever involved.

use std::fmt;

use crate::domain::input::quoted;

/// The contract's bound: at most 28 significant digits, which also keeps every mantissa (and sums
/// of many of them) inside an `i128`.
pub const MAX_SIGNIFICANT_DIGITS: usize = 28;

/// `mantissa / 10^scale`, with the scale the caller wrote (`12.10` has scale 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    mantissa: i128,
    scale: u8,
}

impl Decimal {
    /// Parses plain decimal notation: an optional `-`, digits, optionally `.` and digits.
    ///
    /// The error is a phrase to follow "value must be a decimal number": it says what was wrong.
    pub fn parse(text: &str) -> Result<Decimal, String> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int_part, frac_part) = match unsigned.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (unsigned, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int_part) || frac_part.is_some_and(|f| !all_digits(f)) {
            return Err(format!(
                "value must be a decimal number such as 12 or -3.50, got {}",
                quoted(text)
            ));
        }
        let frac_part = frac_part.unwrap_or("");
        let digits = || int_part.bytes().chain(frac_part.bytes());
        let significant = digits().skip_while(|&b| b == b'0').count();
        if significant > MAX_SIGNIFICANT_DIGITS || frac_part.len() > MAX_SIGNIFICANT_DIGITS {
            return Err(format!(
                "value must have at most {MAX_SIGNIFICANT_DIGITS} significant digits, got {}",
                quoted(text)
            ));
        }
        let mut mantissa: i128 = 0;
        for b in digits() {
            // Cannot overflow: at most 28 significant digits, 10^28 < 2^127.
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        Ok(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            scale: frac_part.len() as u8,
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
            "", "-", "12,5", "0x10", "1e3", "NaN", "inf", "Infinity", ".5", "5.", "+5", " 5", "5 ",
            "1.2.3", "--1",
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
