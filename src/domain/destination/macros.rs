//! A postback's URL template: the macros it may name, how they are filled in for each event,
//! and the check of a template when its destination is made.

use super::check_url;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The macros of a postback URL, each replaced percent-encoded, or empty where unknown.
pub const MACROS: [&str; 12] = [
    "uid",
    "event",
    "value",
    "currency",
    "eid",
    "inbox_id",
    "event_id",
    "tg_id",
    "fbclid",
    "campaign_name",
    "link_slug",
    "occurred_at_ms",
];

/// `template` with each `{macro}` replaced by `value(macro)`, percent-encoded (everything but
/// `A-Z a-z 0-9 - . _ ~`), or by nothing when it has none. A brace that opens no macro is kept
/// as it is (the template was checked when the destination was made).
#[must_use]
pub fn fill_macros(template: &str, value: impl Fn(&str) -> Option<String>) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if MACROS.contains(&&after[..close]) => {
                if let Some(v) = value(&after[..close]) {
                    out.extend(utf8_percent_encode(&v, UNRESERVED));
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Checks a postback URL template: every `{name}` is one of [`MACROS`], and the URL with them
/// filled is a destination URL ([`check_url`]).
pub(super) fn check_postback(text: &str, allow_private: bool) -> Result<(), Error> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name = after.find('}').map(|close| &after[..close]);
        match name {
            Some(name) if MACROS.contains(&name) => rest = &after[name.len() + 1..],
            _ => {
                let shown = name.map_or_else(|| after.to_owned(), |n| format!("{{{n}}}"));
                return Err(Error::field(
                    Code::InvalidField,
                    "url",
                    format!(
                        "url has {}, which is no macro; the macros are {}",
                        quoted(&shown),
                        MACROS.map(|m| format!("{{{m}}}")).join(", ")
                    ),
                ));
            }
        }
    }
    check_url(
        "url",
        &fill_macros(text, |_| Some("0".into())),
        allow_private,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fields::tests::fields;
    use super::*;

    #[test]
    fn macros_are_filled_percent_encoded() {
        let filled = fill_macros(
            "https://n.example/pb?s={uid}&e={event}&v={value}&x={eid}&c={campaign_name}&z={tg_id}&k={x}",
            |m| match m {
                "uid" => Some("abc".into()),
                "event" => Some("deposit".into()),
                "value" => Some("12.50".into()),
                "eid" => Some("a&b=c d".into()),
                "campaign_name" => Some("Осень/50%".into()),
                _ => None,
            },
        );
        assert_eq!(
            filled,
            "https://n.example/pb?s=abc&e=deposit&v=12.50&x=a%26b%3Dc%20d\
             &c=%D0%9E%D1%81%D0%B5%D0%BD%D1%8C%2F50%25&z=&k={x}"
        );
    }

    #[test]
    fn a_postback_takes_only_known_macros() {
        let mut f = fields("postback");
        f.url = Some("https://n.example/pb?s={uid}&t={tid}".into());
        let e = f.check(false).unwrap_err();
        assert_eq!(e.field, Some("url"));
        assert!(e.message.contains("{tid}"), "{}", e.message);
        let mut f = fields("postback");
        f.url = Some("https://n.example/pb?s={uid".into());
        assert_eq!(f.check(false).unwrap_err().field, Some("url"));
        let mut f = fields("postback");
        f.url = Some(format!(
            "https://n.example/pb?{}",
            MACROS.map(|m| format!("{m}={{{m}}}")).join("&")
        ));
        assert!(f.check(false).is_ok());
    }
}
