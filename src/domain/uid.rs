//! The rule of a click's `uid`, wherever one is taken (`docs/api.md#field-rules`): 1 to 64 of
//! `A-Z a-z 0-9 _ -`, the alphabet and length of a Telegram `start` parameter.
//!
//! Every uid that can match a click is one the tracker made (`click::new_uid`) and that rode a
//! deep link, so anything else is a mistake, most often a postback macro the sender never
//! replaced (`{clickid}`, `%%CLICK_ID%%`, `$subid`): the refusal says so, and which syntax it
//! resembles. Only what comes in is checked: stored uids, also those of events stored before
//! the rule, are read, shown and exported as they are.

use crate::domain::input::{macro_like, quoted};
use crate::error::{Code, Error};

/// The longest uid: a Telegram `start` parameter's 64 characters.
pub const MAX_LEN: usize = 64;

/// Whether `text` is 1 to 64 of `A-Z a-z 0-9 _ -`: what a Telegram `start` parameter carries.
#[must_use]
pub fn is_start_parameter(text: &str) -> bool {
    (1..=MAX_LEN).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a `uid` as the caller sent it under `field`; `invalid_uid` with a sentence that says
/// what is wrong, and when it looks like an unreplaced macro, which syntax.
pub fn check(text: String, field: &'static str) -> Result<String, Error> {
    if is_start_parameter(&text) {
        return Ok(text);
    }
    let why = if text.is_empty() {
        "must not be empty".to_owned()
    } else if let Some(syntax) = macro_like(&text) {
        format!(
            "is {}, which looks like a postback macro the sender never replaced ({}); check \
             the URL's macros",
            quoted(&text),
            syntax.describe()
        )
    } else if text.len() > MAX_LEN {
        format!(
            "must be at most {MAX_LEN} characters (a Telegram start parameter), got {}",
            text.len()
        )
    } else {
        let bad = text
            .chars()
            .find(|c| !c.is_ascii_alphanumeric() && !matches!(c, '_' | '-'))
            .unwrap_or(' ');
        format!(
            "must be letters, digits, `_` and `-` only (what a Telegram start parameter \
             carries), but {} contains {bad:?}",
            quoted(&text)
        )
    };
    Err(Error::field(
        Code::InvalidUid,
        field,
        format!("`{field}` {why}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_a_telegram_start_parameter() {
        for ok in ["a", "Z", "0", "_", "-", "tx_1001-b", &"a".repeat(64)] {
            assert_eq!(check(ok.to_owned(), "uid").as_deref(), Ok(ok), "{ok:?}");
        }
        for bad in ["", &"a".repeat(65), "a.b", "a b", "é", "a/b", "a+b", "!~"] {
            let e = check(bad.to_owned(), "uid").unwrap_err();
            assert_eq!(
                (e.code, e.field),
                (Code::InvalidUid, Some("uid")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_macro_is_named_as_one() {
        for m in [
            "{clickid}",
            "%%CLICK_ID%%",
            "##clickid##",
            "$subid",
            "{clickid",
            "{}",
            "[]",
            "[uid]",
            "%7Bclickid%7D",
        ] {
            let e = check(m.to_owned(), "uid").unwrap_err();
            assert!(e.message.contains("never replaced"), "{m}: {}", e.message);
        }
        let plain = check("a.b".to_owned(), "uid").unwrap_err().message;
        assert!(!plain.contains("macro"), "{plain}");
        assert!(plain.contains("'.'"), "{plain}");
        let long = check("a".repeat(65), "uid").unwrap_err().message;
        assert!(long.contains("at most 64"), "{long}");
    }

    /// Every uid the tracker makes passes the rule it checks.
    #[test]
    fn generated_uids_pass() {
        for t in [0, 1_800_000_000_000, u64::MAX] {
            let uid = crate::domain::click::new_uid(t);
            assert!(is_start_parameter(&uid), "{uid}");
        }
        assert!(is_start_parameter(&crate::domain::credential::random_id()));
    }
}
