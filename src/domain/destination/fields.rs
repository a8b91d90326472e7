//! A destination's fields as every way in gives them, and the rules of each kind's fields: what
//! turns them into a [`NewDestination`] the writer stores.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::address::check_url;
use super::google::{self, ConversionNames, Google};
use super::kind::{Destination, EventSet, Kind, Meta, Secret, Target};
use super::macros::{Statuses, check_postback};
use super::meta::{EventNames, MetaRules};
use crate::domain::currency::CurrencyRates;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// The Graph API version used unless a destination names one.
pub const DEFAULT_API_VERSION: &str = "v25.0";
pub const DEFAULT_GRAPH_URL: &str = "https://graph.facebook.com";

/// A destination as given, checked; what the writer stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDestination {
    pub name: String,
    pub events: EventSet,
    pub only_attributed: bool,
    pub target: Target,
}

/// A destination's fields as every way in gives them, before they are checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DestinationFields {
    pub name: Option<String>,
    pub kind: Option<String>,
    /// Event names; `None`: all four.
    pub events: Option<Vec<String>>,
    pub only_attributed: Option<bool>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
    pub url: Option<String>,
    /// `meta_capi`: the event name sent per kind (and `first_deposit`).
    pub event_names: Option<BTreeMap<String, String>>,
    /// `meta_capi`: `{"XTR": "0.013 USD"}`.
    pub currency_rates: Option<BTreeMap<String, String>>,
    /// `postback`: the word `{status}` gives per event kind.
    pub statuses: Option<BTreeMap<String, String>>,
    /// `google_ads`: the conversion action name written per kind (and `first_deposit`).
    pub conversion_names: Option<BTreeMap<String, String>>,
    /// `google_ads`: the user name Google Ads fetches the file with.
    pub user: Option<String>,
}

pub(super) fn missing(field: &'static str, why: &str) -> Error {
    Error::field(
        Code::MissingField,
        field,
        format!("{field} is required {why}"),
    )
}

fn not_for(field: &'static str, kind: Kind) -> Error {
    Error::field(
        Code::InvalidField,
        field,
        format!("{field} is not a field of a {} destination", kind.as_str()),
    )
}

impl DestinationFields {
    /// Checks every field by its kind's rules. A webhook gets its signing secret here.
    pub fn check(mut self, allow_private: bool) -> Result<NewDestination, Error> {
        let name = self
            .name
            .take()
            .ok_or_else(|| missing("name", "(a-z, 0-9 and '-')"))?;
        check_name(&name)?;
        let kind = Kind::parse(
            &self
                .kind
                .take()
                .ok_or_else(|| missing("kind", "(meta_capi, postback, webhook or google_ads)"))?,
        )?;
        let events = match &self.events {
            None => EventSet::ALL,
            Some(names) => EventSet::parse(names)?,
        };
        let meta_fields = [
            ("pixel_id", self.pixel_id.is_some()),
            ("access_token", self.access_token.is_some()),
            ("test_event_code", self.test_event_code.is_some()),
            ("api_version", self.api_version.is_some()),
            ("graph_url", self.graph_url.is_some()),
            ("event_names", self.event_names.is_some()),
            ("currency_rates", self.currency_rates.is_some()),
        ];
        let only_attributed = self.only_attributed;
        let google_fields = [
            ("conversion_names", self.conversion_names.is_some()),
            ("user", self.user.is_some()),
        ];
        if kind != Kind::GoogleAds {
            if let Some((field, _)) = google_fields.iter().find(|(_, given)| *given) {
                return Err(not_for(field, kind));
            }
        }
        let target = if kind == Kind::GoogleAds {
            if let Some((field, _)) = meta_fields.iter().find(|(_, given)| *given) {
                return Err(not_for(field, kind));
            }
            if self.url.is_some() {
                return Err(not_for("url", kind));
            }
            if self.statuses.is_some() {
                return Err(not_for("statuses", kind));
            }
            let conversion_names = match &self.conversion_names {
                Some(names) => ConversionNames::parse(names)?,
                None => ConversionNames::default(),
            };
            let user = self.user.unwrap_or_else(|| google::DEFAULT_USER.to_owned());
            google::check_user(&user)?;
            Target::GoogleAds(Google::new(conversion_names, user))
        } else if kind == Kind::MetaCapi {
            if self.url.is_some() {
                return Err(not_for("url", kind));
            }
            if self.statuses.is_some() {
                return Err(not_for("statuses", kind));
            }
            Target::MetaCapi(meta(self, allow_private)?)
        } else {
            if let Some((field, _)) = meta_fields.iter().find(|(_, given)| *given) {
                return Err(not_for(field, kind));
            }
            let url = self
                .url
                .ok_or_else(|| missing("url", "(where the events are sent)"))?;
            if kind == Kind::Postback {
                check_postback(&url, allow_private)?;
                let statuses = match &self.statuses {
                    Some(words) => Statuses::parse(words)?,
                    None => Statuses::default(),
                };
                Target::Postback { url, statuses }
            } else {
                if self.statuses.is_some() {
                    return Err(not_for("statuses", kind));
                }
                check_url("url", &url, allow_private)?;
                Target::Webhook {
                    url,
                    signing_secret: new_signing_secret(),
                    previous: None,
                }
            }
        };
        Ok(NewDestination {
            name,
            events,
            // A webhook feeds the team's own systems, which want every event; Meta and an
            // affiliate network can use only those they can match to a click of theirs.
            only_attributed: only_attributed.unwrap_or(kind != Kind::Webhook),
            target,
        })
    }

    /// The fields of a stored destination, as a way in would give them (its secrets as they
    /// are): what a change ([`DestinationPatch`]) is laid over and checked again.
    #[must_use]
    pub fn of(d: &Destination) -> DestinationFields {
        let mut f = DestinationFields {
            name: Some(d.name.clone()),
            kind: Some(d.target.kind().as_str().to_owned()),
            events: Some(d.events.names()),
            only_attributed: Some(d.only_attributed),
            ..DestinationFields::default()
        };
        match &d.target {
            Target::MetaCapi(m) => {
                f.pixel_id = Some(m.pixel_id.clone());
                f.access_token = Some(m.access_token.expose().to_owned());
                f.test_event_code.clone_from(&m.test_event_code);
                f.api_version = Some(m.api_version.clone());
                f.graph_url = Some(m.graph_url.clone());
                f.event_names = Some(m.rules.event_names.0.clone());
                f.currency_rates = Some(m.rules.currency_rates.shown());
            }
            Target::Postback { url, statuses } => {
                f.url = Some(url.clone());
                f.statuses = Some(statuses.0.clone());
            }
            Target::Webhook { url, .. } => f.url = Some(url.clone()),
            Target::GoogleAds(g) => {
                f.conversion_names = Some(g.conversion_names.0.clone());
                f.user = Some(g.user.clone());
            }
        }
        f
    }
}

/// A change of a stored destination (`PATCH /destinations/<name>`): the fields given, laid over
/// the destination's, and those cleared (`null`: back to their default). The result is checked
/// by the same rules as a new destination; its deliveries stay, and a paused destination
/// resumes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DestinationPatch {
    pub set: DestinationFields,
    pub cleared: Vec<String>,
}

impl DestinationPatch {
    /// `current` with the change, checked; a webhook keeps its signing secrets (a rotation
    /// replaces them, never a change).
    pub fn apply(
        self,
        current: &Destination,
        allow_private: bool,
    ) -> Result<NewDestination, Error> {
        let fixed = |field: &'static str| {
            Error::field(
                Code::InvalidField,
                field,
                format!(
                    "a destination's {field} cannot be changed; create another destination \
                     instead"
                ),
            )
        };
        let required = |field: &'static str| {
            Error::field(
                Code::InvalidField,
                field,
                format!("{field} is required and cannot be removed; give a new one instead"),
            )
        };
        let set = self.set;
        if set.name.as_ref().is_some_and(|n| *n != current.name) {
            return Err(fixed("name"));
        }
        if set
            .kind
            .as_ref()
            .is_some_and(|k| k != current.target.kind().as_str())
        {
            return Err(fixed("kind"));
        }
        let mut f = DestinationFields::of(current);
        for field in &self.cleared {
            match field.as_str() {
                "name" => return Err(fixed("name")),
                "kind" => return Err(fixed("kind")),
                "events" => f.events = None,
                "only_attributed" => f.only_attributed = None,
                "test_event_code" => f.test_event_code = None,
                "api_version" => f.api_version = None,
                "graph_url" => f.graph_url = None,
                "event_names" => f.event_names = None,
                "currency_rates" => f.currency_rates = None,
                "statuses" => f.statuses = None,
                "conversion_names" => f.conversion_names = None,
                "user" => f.user = None,
                "pixel_id" => return Err(required("pixel_id")),
                "access_token" => return Err(required("access_token")),
                _ => return Err(required("url")),
            }
        }
        macro_rules! overlay {
            ($($field:ident),*) => {
                $(if set.$field.is_some() { f.$field = set.$field; })*
            };
        }
        overlay!(
            events,
            only_attributed,
            pixel_id,
            access_token,
            test_event_code,
            api_version,
            graph_url,
            url,
            event_names,
            currency_rates,
            statuses,
            conversion_names,
            user
        );
        let mut new = f.check(allow_private)?;
        if let (
            Target::Webhook {
                signing_secret,
                previous,
                ..
            },
            Target::Webhook {
                signing_secret: kept,
                previous: kept_previous,
                ..
            },
        ) = (&mut new.target, &current.target)
        {
            signing_secret.clone_from(kept);
            previous.clone_from(kept_previous);
        }
        // Google keeps its password (a rotation replaces it) and what its fetches came to.
        if let (Target::GoogleAds(new), Target::GoogleAds(kept)) =
            (&mut new.target, &current.target)
        {
            new.password = kept.password;
            new.new_password = None;
            new.fetches = kept.fetches;
        }
        Ok(new)
    }
}

/// A webhook's new signing secret, as Standard Webhooks writes one: `whsec_` and the base64
/// of 32 random bytes, the key of its HMAC-SHA256.
///
/// # Panics
/// Only on a broken system, whose random source fails.
#[must_use]
pub fn new_signing_secret() -> Secret {
    use base64::Engine as _;
    let mut key = [0u8; 32];
    // The system's random source fails only on a broken system, where nothing else would work.
    getrandom::fill(&mut key).expect("the system's random source");
    Secret::new(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    ))
}

/// The rule of a destination's name: that of a space, `[a-z0-9][a-z0-9-]{0,31}`.
pub fn check_name(name: &str) -> Result<(), Error> {
    if input::is_lowercase_name(name) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "name",
            format!(
                "a destination's name is 1 to 32 of a-z, 0-9 and '-', not starting with '-'; got {}",
                quoted(name)
            ),
        ))
    }
}

/// The rule of a Meta test code, the destination's or a test's own: 1 to 64 letters and digits.
pub fn check_test_event_code(code: &str) -> Result<(), Error> {
    if (1..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "test_event_code",
            format!(
                "test_event_code is 1 to 64 letters and digits (TEST12345), got {}",
                quoted(code)
            ),
        ))
    }
}

fn meta(f: DestinationFields, allow_private: bool) -> Result<Meta, Error> {
    let invalid = |field: &'static str, why: String| Error::field(Code::InvalidField, field, why);
    let pixel_id = f
        .pixel_id
        .ok_or_else(|| missing("pixel_id", "(the Meta pixel or dataset id, digits)"))?;
    if !(1..=32).contains(&pixel_id.len()) || !pixel_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            "pixel_id",
            format!("pixel_id is 1 to 32 digits, got {}", quoted(&pixel_id)),
        ));
    }
    let access_token = f.access_token.ok_or_else(|| {
        missing(
            "access_token",
            "(a Conversions API access token from Events Manager)",
        )
    })?;
    if access_token.len() > 1024 || !access_token.bytes().all(|b| b.is_ascii_graphic()) {
        // Never quoted: it is a credential.
        return Err(invalid(
            "access_token",
            "access_token is at most 1024 visible ASCII characters".into(),
        ));
    }
    if let Some(code) = &f.test_event_code {
        check_test_event_code(code)?;
    }
    let api_version = f
        .api_version
        .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
    let version_ok = api_version
        .strip_prefix('v')
        .and_then(|v| v.split_once('.'))
        .is_some_and(|(major, minor)| {
            [major, minor]
                .iter()
                .all(|n| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
        });
    if !version_ok {
        return Err(invalid(
            "api_version",
            format!(
                "api_version is a Graph API version such as {DEFAULT_API_VERSION}, got {}",
                quoted(&api_version)
            ),
        ));
    }
    let graph_url = f.graph_url.unwrap_or_else(|| DEFAULT_GRAPH_URL.to_owned());
    let parsed = check_url("graph_url", &graph_url, allow_private)?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(
            "graph_url",
            format!(
                "graph_url is a base address without a query, got {}",
                quoted(&graph_url)
            ),
        ));
    }
    let event_names = match &f.event_names {
        Some(names) => EventNames::parse(names)?,
        None => EventNames::default(),
    };
    let currency_rates = match &f.currency_rates {
        Some(rates) => CurrencyRates::parse(rates)?,
        None => CurrencyRates::default(),
    };
    Ok(Meta {
        pixel_id,
        access_token: Secret::new(access_token),
        test_event_code: f.test_event_code,
        api_version,
        graph_url: graph_url.trim_end_matches('/').to_owned(),
        rules: MetaRules {
            event_names,
            currency_rates,
        },
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The fields of a valid destination of `kind`, for a test to change one of.
    pub(in crate::domain::destination) fn fields(kind: &str) -> DestinationFields {
        DestinationFields {
            name: Some("meta".into()),
            kind: Some(kind.into()),
            pixel_id: (kind == "meta_capi").then(|| "1234567890".into()),
            access_token: (kind == "meta_capi").then(|| "EAAB-token-abcd".into()),
            url: (kind != "meta_capi" && kind != "google_ads")
                .then(|| "https://example.com/pb?c={uid}".into()),
            ..DestinationFields::default()
        }
    }

    #[test]
    fn each_kind_takes_its_own_fields() {
        let m = fields("meta_capi").check(false).unwrap();
        assert!(m.only_attributed);
        let Target::MetaCapi(meta) = &m.target else {
            panic!("{m:?}")
        };
        assert_eq!(meta.api_version, DEFAULT_API_VERSION);
        assert_eq!(meta.graph_url, DEFAULT_GRAPH_URL);
        assert_eq!(meta.access_token.last4(), "…abcd");
        assert!(!format!("{m:?}").contains("EAAB"), "{m:?}");
        let w = fields("webhook").check(false).unwrap();
        assert!(!w.only_attributed);
        let Target::Webhook { signing_secret, .. } = &w.target else {
            panic!("{w:?}")
        };
        assert!(signing_secret.expose().starts_with("whsec_"));
        assert_ne!(signing_secret, &new_signing_secret());
        let mut postback_with_pixel = fields("postback");
        postback_with_pixel.pixel_id = Some("1".into());
        assert_eq!(
            postback_with_pixel.check(false).unwrap_err().field,
            Some("pixel_id")
        );
        let mut meta_with_url = fields("meta_capi");
        meta_with_url.url = Some("https://x.example".into());
        assert_eq!(meta_with_url.check(false).unwrap_err().field, Some("url"));
        for (field, value) in [
            ("pixel_id", "12a"),
            ("pixel_id", &"1".repeat(33)),
            ("test_event_code", "TEST 1"),
            ("api_version", "25.0"),
            ("api_version", "v25"),
            ("graph_url", "http://graph.example"),
        ] {
            let mut f = fields("meta_capi");
            let v = Some(value.to_owned());
            match field {
                "pixel_id" => f.pixel_id = v,
                "test_event_code" => f.test_event_code = v,
                "api_version" => f.api_version = v,
                _ => f.graph_url = v,
            }
            assert_eq!(f.check(false).unwrap_err().field, Some(field), "{value}");
        }
        let mut ok = fields("meta_capi");
        ok.pixel_id = Some("1".repeat(32));
        ok.api_version = Some("v9.0".into());
        ok.test_event_code = Some("TEST12345".into());
        assert!(ok.check(false).is_ok());
    }

    #[test]
    fn names_and_events_have_rules() {
        let mut f = fields("webhook");
        f.name = Some("Bad Name".into());
        assert_eq!(f.check(false).unwrap_err().field, Some("name"));
        let mut f = fields("webhook");
        f.name = Some("a".repeat(33));
        assert_eq!(f.check(false).unwrap_err().field, Some("name"));
        let mut f = fields("webhook");
        f.name = Some("a".repeat(32));
        assert!(f.check(false).is_ok());
        assert_eq!(
            EventSet::parse(&["deposit", "contact"]).unwrap().names(),
            ["contact", "deposit"]
        );
        assert_eq!(
            EventSet::parse::<&str>(&[]).unwrap_err().field,
            Some("events")
        );
        assert_eq!(
            EventSet::parse(&["purchase"]).unwrap_err().field,
            Some("events")
        );
    }
}
