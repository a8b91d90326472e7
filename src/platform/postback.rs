//! A postback, whole: a `GET` of a URL template per event (an affiliate network's). The macros
//! the template may name, how they are filled in for each event, the words of `{status}`, the
//! click's own query parameters of `{q.NAME}`, and the check of a template when its
//! destination is made.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::address::{URL, check_url};
use super::face::{Platform, Request, Sending};
use super::given::{DestinationFields, Field, missing};
use super::names::{check_named, named};
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The macros of a postback URL, each replaced percent-encoded, or empty where unknown; and
/// `{q.NAME}`, the parameter `NAME` of the click's own query ([`QUERY_MACRO`]).
pub const MACROS: [&str; 14] = [
    "uid",
    "event",
    "event_id",
    "value",
    "currency",
    "eid",
    "inbox_id",
    "tg_id",
    "fbclid",
    "campaign_name",
    "link_slug",
    "occurred_at_ms",
    "first_deposit",
    "status",
];

/// The prefix of a macro that names a parameter of the click's query: `{q.subid}`.
pub const QUERY_MACRO: &str = "q.";

/// Whether `name` (between the braces) is a macro: one of [`MACROS`], or `q.` and a parameter
/// name of 1 to 64 letters, digits, `_`, `-`, `.`, `[` and `]`.
fn is_macro(name: &str) -> bool {
    MACROS.contains(&name)
        || name.strip_prefix(QUERY_MACRO).is_some_and(|param| {
            (1..=64).contains(&param.len())
                && param
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.[]".contains(&b))
        })
}

/// The value of parameter `name` in `query` (a URL's query, a leading `?` ignored): the first
/// one that is not empty, as everywhere in the tracker, percent-decoded, `+` as a space; `None`
/// when it has none.
#[must_use]
pub fn query_param(query: &str, name: &str) -> Option<String> {
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(&text.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    let query = query.strip_prefix('?').unwrap_or(query);
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (!v.is_empty() && decode(k) == name).then(|| decode(v))
    })
}

/// The word a postback's `{status}` gives for each event kind, where the destination sets one
/// (`{"registration": "ftd_reg"}`); the networks' own word otherwise ([`NETWORK_WORDS`]), else
/// the kind itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statuses(pub BTreeMap<String, String>);

impl Statuses {
    /// From `{"registration": "lead"}`: each key an event kind or `first_deposit`, each word 1
    /// to 40 letters, digits, `_`, `-` and `.`.
    pub fn parse(words: &BTreeMap<String, String>) -> Result<Statuses, Error> {
        check_named(
            "statuses",
            words,
            "1 to 40 of A-Z, a-z, 0-9, '_', '-' and '.'",
            |word| {
                (1..=40).contains(&word.len())
                    && word
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            },
        )?;
        Ok(Statuses(words.clone()))
    }

    /// The word for an event of kind `event`; a first deposit's own, else a deposit's; where
    /// the destination names none, the networks' word, else the kind.
    #[must_use]
    pub fn word_for<'a>(&'a self, event: &'a str, first_deposit: bool) -> &'a str {
        named(&self.0, event, first_deposit)
            .or_else(|| {
                NETWORK_WORDS
                    .iter()
                    .find(|(kind, _)| *kind == event)
                    .map(|(_, word)| *word)
            })
            .unwrap_or(event)
    }
}

/// What affiliate networks call a conversion's status (Keitaro's and Binom's postbacks: `lead`
/// for a sign-up, `sale` for a payment): a network that reads a status it does not know as a
/// rejection, or as an update of the click's earlier conversion, counts these right without a
/// setting. A first deposit is a deposit. A kind not here is sent as its own name.
pub const NETWORK_WORDS: [(&str, &str); 2] = [("registration", "lead"), ("deposit", "sale")];

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
            Some(close) if is_macro(&after[..close]) => {
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
fn check_postback(text: &str, allow_private: bool) -> Result<(), Error> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name = after.find('}').map(|close| &after[..close]);
        match name {
            Some(name) if is_macro(name) => rest = &after[name.len() + 1..],
            _ => {
                let shown = name.map_or_else(|| after.to_owned(), |n| format!("{{{n}}}"));
                return Err(Error::field(
                    Code::InvalidField,
                    "url",
                    format!(
                        "url has {}, which is no macro; the macros are {} and {{q.NAME}}",
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

/// A postback's settings: its URL template, and the words of its `{status}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Postback {
    pub url: String,
    /// The words `{status}` gives per event kind.
    pub statuses: Statuses,
}

impl Postback {
    /// The settings given in `f`, checked.
    fn check_fields(f: &DestinationFields, allow_private: bool) -> Result<Postback, Error> {
        let url = f
            .text("url")
            .ok_or_else(|| missing("url", "(where the events are sent)"))?;
        check_postback(&url, allow_private)?;
        let statuses = match &f.pairs("statuses") {
            Some(words) => Statuses::parse(words)?,
            None => Statuses::default(),
        };
        Ok(Postback { url, statuses })
    }
}

/// Deliveries per batch of a postback, sent at once each in a request of its own.
const BATCH: usize = 256;

impl Platform for Postback {
    fn fields() -> &'static [Field] {
        &[
            Field {
                required: true,
                label: "URL template",
                help: "The network's postback address with the tracker's macros: {uid}, \
                       {event}, {event_id}, {status}, {value}, {q.NAME}, ...",
                ..URL
            },
            Field {
                name: "statuses",
                label: "Status words",
                help: "For each kind of event, the word that takes the place of {status}, \
                       such as registration=lead, deposit=sale.",
                default: Some("the kind"),
                ..Field::PAIRS
            },
        ]
    }

    fn title() -> &'static str {
        "postback"
    }

    fn sending() -> Sending {
        Sending::Alone { batch: BATCH }
    }

    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Postback, Error> {
        Postback::check_fields(f, allow_private)
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_text("url", Some(self.url.clone()));
        f.set_pairs("statuses", Some(self.statuses.0.clone()));
    }

    fn address(&self) -> &str {
        &self.url
    }

    fn request_alone(
        &self,
        event: &FeedEvent,
        click_query: Option<&str>,
        _now_ms: u64,
    ) -> Option<Request> {
        Some(Request::get(postback_url(
            &self.url,
            event,
            &self.statuses,
            click_query,
        )))
    }
}

/// A postback's address for `event`: each macro replaced percent-encoded, or by nothing;
/// `{status}` by the destination's `statuses`, `{q.NAME}` from the click's query.
#[must_use]
pub(super) fn postback_url(
    template: &str,
    event: &FeedEvent,
    statuses: &Statuses,
    click_query: Option<&str>,
) -> String {
    let first_deposit = event.first_deposit == Some(true);
    fill_macros(template, |name| match name {
        "uid" => event.uid.clone(),
        "event" => Some(event.event.clone()),
        "event_id" => Some(event.event_id.clone()),
        "first_deposit" => Some(if first_deposit { "1" } else { "0" }.to_owned()),
        "status" => Some(statuses.word_for(&event.event, first_deposit).to_owned()),
        _ if name.starts_with(QUERY_MACRO) => {
            click_query.and_then(|q| query_param(q, &name[QUERY_MACRO.len()..]))
        }
        "value" => event.value.clone(),
        "currency" => event.value.as_ref().map(|_| event.currency.clone()),
        "eid" => event.eid.clone(),
        "inbox_id" => Some(event.inbox_id.clone()),
        "tg_id" => event.tg_id.map(|t| t.to_string()),
        "fbclid" => event.fbclid.clone(),
        "campaign_name" => event.campaign_name.clone(),
        "link_slug" => event.link_slug.clone(),
        "occurred_at_ms" => Some(event.occurred_at_ms.to_string()),
        _ => None,
    })
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
        f.set_text("url", Some("https://n.example/pb?s={uid}&t={tid}".into()));
        let e = f.check(false).unwrap_err();
        assert_eq!(e.field, Some("url"));
        assert!(e.message.contains("{tid}"), "{}", e.message);
        let mut f = fields("postback");
        f.set_text("url", Some("https://n.example/pb?s={uid".into()));
        assert_eq!(f.check(false).unwrap_err().field, Some("url"));
        let mut f = fields("postback");
        f.set_text(
            "url",
            Some(format!(
                "https://n.example/pb?{}",
                MACROS.map(|m| format!("{m}={{{m}}}")).join("&")
            )),
        );
        assert!(f.check(false).is_ok());
        for (name, ok) in [
            ("q.subid", true),
            (&format!("q.{}", "a".repeat(64)), true),
            (&format!("q.{}", "a".repeat(65)), false),
            ("q.", false),
            ("q.a b", false),
            ("q.x[0]", true),
        ] {
            let mut f = fields("postback");
            f.set_text("url", Some(format!("https://n.example/pb?s={{{name}}}")));
            assert_eq!(f.check(false).is_ok(), ok, "{name}");
        }
    }

    #[test]
    fn query_parameters_are_read_decoded_and_first_wins() {
        let q = "subid=abc%20d&clickid=1+2&subid=second&flag&e=%D0%AF&k=&k=7";
        assert_eq!(query_param(q, "subid").as_deref(), Some("abc d"));
        assert_eq!(query_param(q, "clickid").as_deref(), Some("1 2"));
        assert_eq!(query_param(q, "flag"), None, "empty: absent");
        assert_eq!(
            query_param(q, "k").as_deref(),
            Some("7"),
            "the first not empty"
        );
        assert_eq!(query_param("?subid=9&x=1", "subid").as_deref(), Some("9"));
        assert_eq!(query_param(q, "e").as_deref(), Some("Я"));
        assert_eq!(query_param(q, "none"), None);
        let filled = fill_macros("https://n.example/?s={q.subid}&c={q.none}", |m| {
            m.strip_prefix(QUERY_MACRO).and_then(|p| query_param(q, p))
        });
        assert_eq!(filled, "https://n.example/?s=abc%20d&c=");
    }

    #[test]
    fn statuses_have_rules_and_fall_back_to_the_networks_words_then_the_kind() {
        let set = |pairs: &[(&str, &str)]| {
            Statuses::parse(
                &pairs
                    .iter()
                    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                    .collect(),
            )
        };
        let s = set(&[("registration", "lead"), ("deposit", "sale")]).unwrap();
        assert_eq!(s.word_for("registration", false), "lead");
        assert_eq!(s.word_for("deposit", true), "sale");
        assert_eq!(s.word_for("contact", false), "contact");
        let unset = Statuses::default();
        assert_eq!(
            ["registration", "deposit", "contact", "subscribed"]
                .map(|kind| unset.word_for(kind, false)),
            ["lead", "sale", "contact", "subscribed"],
            "the networks' words where none is set"
        );
        assert_eq!(unset.word_for("deposit", true), "sale");
        let own = set(&[("registration", "reg")]).unwrap();
        assert_eq!(
            own.word_for("registration", false),
            "reg",
            "a set word wins"
        );
        assert_eq!(own.word_for("deposit", false), "sale");
        let first = set(&[("deposit", "sale"), ("first_deposit", "ftd")]).unwrap();
        assert_eq!(first.word_for("deposit", true), "ftd");
        assert_eq!(first.word_for("deposit", false), "sale");
        assert!(set(&[("deposit", &"a".repeat(40))]).is_ok());
        for bad in [
            ("deposit", &"a".repeat(41)[..]),
            ("deposit", ""),
            ("deposit", "a b"),
            ("refund", "r"),
        ] {
            assert_eq!(set(&[bad]).unwrap_err().field, Some("statuses"), "{bad:?}");
        }
    }
}
