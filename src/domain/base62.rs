//! Base62, the digits `0-9A-Za-z` in ASCII order: credentials, click uids and generated
//! passwords are written in it.
//!
//! The digits are in ASCII order, so equal-width forms sort as their numbers do (a click uid's
//! time prefix relies on it). The packed uid of a stored event (`storage/records.rs`,
//! `event_v2`) spells the same digits out again on purpose: it is an on-disk format, and stored
//! bytes must keep decoding to the same text whatever this module later does.

/// The digits, the value of each its index.
pub const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `n` in base62, left-padded with zeros to `width` characters (the low `width` digits of a
/// larger `n`).
#[must_use]
pub fn encode(mut n: u128, width: usize) -> String {
    let mut out = vec![b'0'; width];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 62) as usize];
        n /= 62;
    }
    out.into_iter().map(char::from).collect()
}

/// The number `text` spells in base62, if it is all base62 digits and fits.
#[must_use]
pub fn decode(text: &str) -> Option<u128> {
    text.bytes().try_fold(0u128, |n, b| {
        let digit = DIGITS.iter().position(|&d| d == b)?;
        n.checked_mul(62)?.checked_add(digit as u128)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_in_ascii_order_and_values_round_trip() {
        assert!(DIGITS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(encode(0, 3), "000");
        assert_eq!(encode(61, 2), "0z");
        assert_eq!(encode(62, 2), "10");
        // Wider than `width`: the low digits.
        assert_eq!(encode(62 * 62 + 1, 2), "01");
        assert_eq!(decode("zz"), Some(62 * 62 - 1));
        assert_eq!(decode(""), Some(0));
        assert_eq!(decode("a-b"), None);
        assert_eq!(decode(&"z".repeat(22)), None, "past u128::MAX");
        for n in [0, 1, 61, 62, 1_773_500_000_000, u128::MAX] {
            assert_eq!(decode(&encode(n, 22)), Some(n));
        }
    }
}
