//! A destination's fields as every way in gives them, and the rules of each kind's fields: what
//! turns them into a [`NewDestination`] the writer stores.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::address::check_url;
use super::google::{self, ConversionNames, Google};
use super::kind::{Destination, EventSet, Kind, Meta, Secret, Target, Tiktok};
use super::macros::{Statuses, check_postback};
use super::meta::{EventNames, MetaRules};
use crate::domain::currency::CurrencyRates;
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// The Graph API version used unless a destination names one.
pub const DEFAULT_API_VERSION: &str = "v25.0";
pub const DEFAULT_GRAPH_URL: &str = "https://graph.facebook.com";
/// `TikTok`'s Business API, where a `tiktok_events` destination sends unless told otherwise.
pub const DEFAULT_TIKTOK_API_URL: &str = "https://business-api.tiktok.com";

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
    /// `tiktok_events`: the pixel's code.
    pub pixel_code: Option<String>,
    /// `tiktok_events`: the Business API's address.
    pub api_url: Option<String>,
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
        let kind = Kind::parse(&self.kind.take().ok_or_else(|| {
            missing(
                "kind",
                "(meta_capi, postback, webhook, tiktok_events or google_ads)",
            )
        })?)?;
        let events = match &self.events {
            None => EventSet::ALL,
            Some(names) => EventSet::parse(names)?,
        };
        if let Some(field) = self
            .given()
            .into_iter()
            .find(|field| !kind_fields(kind).contains(field))
        {
            return Err(not_for(field, kind));
        }
        let only_attributed = self.only_attributed;
        let target = match kind {
            Kind::MetaCapi => Target::MetaCapi(meta(self, allow_private)?),
            Kind::TiktokEvents => Target::TiktokEvents(tiktok(&self, allow_private)?),
            Kind::GoogleAds => {
                let conversion_names = match &self.conversion_names {
                    Some(names) => ConversionNames::parse(names)?,
                    None => ConversionNames::default(),
                };
                let user = self.user.unwrap_or_else(|| google::DEFAULT_USER.to_owned());
                google::check_user(&user)?;
                Target::GoogleAds(Google::new(conversion_names, user))
            }
            Kind::Postback => {
                let url = self
                    .url
                    .ok_or_else(|| missing("url", "(where the events are sent)"))?;
                check_postback(&url, allow_private)?;
                let statuses = match &self.statuses {
                    Some(words) => Statuses::parse(words)?,
                    None => Statuses::default(),
                };
                Target::Postback { url, statuses }
            }
            Kind::Webhook => {
                let url = self
                    .url
                    .ok_or_else(|| missing("url", "(where the events are sent)"))?;
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

    /// The fields of a kind of their own that were given.
    fn given(&self) -> Vec<&'static str> {
        [
            ("pixel_id", self.pixel_id.is_some()),
            ("access_token", self.access_token.is_some()),
            ("test_event_code", self.test_event_code.is_some()),
            ("api_version", self.api_version.is_some()),
            ("graph_url", self.graph_url.is_some()),
            ("url", self.url.is_some()),
            ("event_names", self.event_names.is_some()),
            ("currency_rates", self.currency_rates.is_some()),
            ("statuses", self.statuses.is_some()),
            ("pixel_code", self.pixel_code.is_some()),
            ("api_url", self.api_url.is_some()),
            ("conversion_names", self.conversion_names.is_some()),
            ("user", self.user.is_some()),
        ]
        .into_iter()
        .filter(|(_, given)| *given)
        .map(|(field, _)| field)
        .collect()
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
            Target::TiktokEvents(t) => {
                f.pixel_code = Some(t.pixel_code.clone());
                f.access_token = Some(t.access_token.expose().to_owned());
                f.test_event_code.clone_from(&t.test_event_code);
                f.api_url = Some(t.api_url.clone());
                f.event_names = Some(t.rules.event_names.0.clone());
                f.currency_rates = Some(t.rules.currency_rates.shown());
            }
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
        let gave_token = set.access_token.is_some();
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
                "api_url" => f.api_url = None,
                "conversion_names" => f.conversion_names = None,
                "user" => f.user = None,
                "pixel_id" => return Err(required("pixel_id")),
                "pixel_code" => return Err(required("pixel_code")),
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
            pixel_code,
            api_url,
            conversion_names,
            user
        );
        let mut new = f.check(allow_private)?;
        check_token_address(&current.target, &new.target, gave_token)?;
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

/// A change that moves an ad platform's address (`graph_url`, `api_url`) from `before` to
/// `after` must give a new token (`gave_token`): the stored token, which nobody can read back,
/// goes only to the address it was given for.
fn check_token_address(before: &Target, after: &Target, gave_token: bool) -> Result<(), Error> {
    let moved = match (before, after) {
        _ if gave_token => None,
        (Target::MetaCapi(b), Target::MetaCapi(a)) if a.graph_url != b.graph_url => {
            Some("graph_url")
        }
        (Target::TiktokEvents(b), Target::TiktokEvents(a)) if a.api_url != b.api_url => {
            Some("api_url")
        }
        _ => None,
    };
    match moved {
        None => Ok(()),
        Some(field) => Err(Error::field(
            Code::InvalidField,
            "access_token",
            format!(
                "changing {field} sends the access token to another address: give access_token \
                 again in the same change"
            ),
        )),
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
    let rules = rules(&f)?;
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
    let access_token = access_token(
        f.access_token,
        "(a Conversions API access token from Events Manager)",
    )?;
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
    let graph_url = base_url(
        "graph_url",
        f.graph_url.as_deref().unwrap_or(DEFAULT_GRAPH_URL),
        allow_private,
    )?;
    Ok(Meta {
        pixel_id,
        access_token,
        test_event_code: f.test_event_code,
        api_version,
        graph_url,
        rules,
    })
}

fn tiktok(f: &DestinationFields, allow_private: bool) -> Result<Tiktok, Error> {
    let pixel_code = f.pixel_code.clone().ok_or_else(|| {
        missing(
            "pixel_code",
            "(the pixel's code from TikTok's Events Manager, letters and digits)",
        )
    })?;
    if !(1..=64).contains(&pixel_code.len())
        || !pixel_code.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(Error::field(
            Code::InvalidField,
            "pixel_code",
            format!(
                "pixel_code is 1 to 64 letters and digits (C4ABCDEFGHIJ12345678), got {}",
                quoted(&pixel_code)
            ),
        ));
    }
    let access_token = access_token(
        f.access_token.clone(),
        "(an Events API access token from TikTok's Events Manager)",
    )?;
    if let Some(code) = &f.test_event_code {
        check_test_event_code(code)?;
    }
    let api_url = base_url(
        "api_url",
        f.api_url.as_deref().unwrap_or(DEFAULT_TIKTOK_API_URL),
        allow_private,
    )?;
    Ok(Tiktok {
        pixel_code,
        access_token,
        test_event_code: f.test_event_code.clone(),
        api_url,
        rules: rules(f)?,
    })
}

/// The rule of an ad platform's access token: given, at most 1024 visible ASCII characters.
fn access_token(token: Option<String>, what: &str) -> Result<Secret, Error> {
    let token = token.ok_or_else(|| missing("access_token", what))?;
    if token.len() > 1024 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        // Never quoted: it is a credential.
        return Err(Error::field(
            Code::InvalidField,
            "access_token",
            "access_token is at most 1024 visible ASCII characters",
        ));
    }
    Ok(Secret::new(token))
}

/// The rule of an ad platform's base address (`graph_url`, `api_url`): an address a
/// destination may reach, without a query; kept without a trailing `/`.
fn base_url(field: &'static str, url: &str, allow_private: bool) -> Result<String, Error> {
    let parsed = check_url(field, url, allow_private)?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(Error::field(
            Code::InvalidField,
            field,
            format!(
                "{field} is a base address without a query, got {}",
                quoted(url)
            ),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// An ad platform's event names and currency rates.
fn rules(f: &DestinationFields) -> Result<MetaRules, Error> {
    Ok(MetaRules {
        event_names: match &f.event_names {
            Some(names) => EventNames::parse(names)?,
            None => EventNames::default(),
        },
        currency_rates: match &f.currency_rates {
            Some(rates) => CurrencyRates::parse(rates)?,
            None => CurrencyRates::default(),
        },
    })
}

/// Of a kind's own fields, those it cannot do without: `missing_field` when absent.
pub(super) fn kind_required(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::MetaCapi => &["pixel_id", "access_token"],
        Kind::Postback | Kind::Webhook => &["url"],
        Kind::TiktokEvents => &["pixel_code", "access_token"],
        Kind::GoogleAds => &[],
    }
}

/// The fields of their own a kind takes; another kind's are refused.
pub(super) fn kind_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::MetaCapi => &[
            "pixel_id",
            "access_token",
            "test_event_code",
            "api_version",
            "graph_url",
            "event_names",
            "currency_rates",
        ],
        Kind::Postback => &["url", "statuses"],
        Kind::Webhook => &["url"],
        Kind::TiktokEvents => &[
            "pixel_code",
            "access_token",
            "test_event_code",
            "api_url",
            "event_names",
            "currency_rates",
        ],
        Kind::GoogleAds => &["conversion_names", "user"],
    }
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
            access_token: matches!(kind, "meta_capi" | "tiktok_events")
                .then(|| "EAAB-token-abcd".into()),
            url: matches!(kind, "postback" | "webhook")
                .then(|| "https://example.com/pb?c={uid}".into()),
            pixel_code: (kind == "tiktok_events").then(|| "C4ABCDEFGHIJ12345678".into()),
            ..DestinationFields::default()
        }
    }

    /// `kind_required`, which `/openapi.json` describes, is what `check` asks for: a kind's
    /// smallest valid fields are those, and taking any one away is `missing_field` for it.
    #[test]
    fn the_required_fields_of_each_kind_are_what_check_asks_for() {
        for kind in Kind::ALL {
            let least = fields(kind.as_str());
            let mut given = least.given();
            given.sort_unstable();
            let mut required = kind_required(kind).to_vec();
            required.sort_unstable();
            assert_eq!(given, required, "{kind:?}");
            assert!(least.clone().check(false).is_ok(), "{kind:?}");
            for &field in kind_required(kind) {
                assert!(kind_fields(kind).contains(&field), "{field}");
                let mut f = least.clone();
                match field {
                    "pixel_id" => f.pixel_id = None,
                    "access_token" => f.access_token = None,
                    "pixel_code" => f.pixel_code = None,
                    "url" => f.url = None,
                    _ => panic!("a required field this test cannot take away: {field}"),
                }
                let e = f.check(false).unwrap_err();
                assert_eq!(
                    (e.code, e.field),
                    (Code::MissingField, Some(field)),
                    "{kind:?}"
                );
            }
        }
    }

    /// A change of the address a stored token is sent to must give the token again; the same
    /// address, or a new token with the new address, is taken.
    #[test]
    fn a_new_platform_address_takes_a_new_token() {
        for (kind, field) in [("meta_capi", "graph_url"), ("tiktok_events", "api_url")] {
            let new = fields(kind).check(false).unwrap();
            let current = Destination {
                no: 1,
                space: 1,
                name: new.name,
                events: new.events,
                only_attributed: new.only_attributed,
                target: new.target,
                created_at_ms: 0,
                paused: None,
            };
            let change = |address: &str, token: Option<&str>| {
                let mut set = DestinationFields {
                    access_token: token.map(str::to_owned),
                    ..DestinationFields::default()
                };
                match field {
                    "graph_url" => set.graph_url = Some(address.to_owned()),
                    _ => set.api_url = Some(address.to_owned()),
                }
                DestinationPatch {
                    set,
                    cleared: Vec::new(),
                }
                .apply(&current, false)
            };
            let elsewhere = "https://collector.example";
            let e = change(elsewhere, None).unwrap_err();
            assert_eq!(
                (e.code, e.field),
                (Code::InvalidField, Some("access_token")),
                "{kind}"
            );
            assert!(e.message.contains(field), "{e:?}");
            assert!(
                change(elsewhere, Some("EAAB-new-token-1")).is_ok(),
                "{kind}"
            );
            let same = DestinationFields::of(&current);
            let same = match field {
                "graph_url" => same.graph_url,
                _ => same.api_url,
            };
            assert!(change(&same.unwrap(), None).is_ok(), "{kind}");
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

    /// Each rule of a `TikTok` destination's fields, with a value just inside and one just
    /// outside it.
    #[test]
    fn tiktok_takes_its_own_fields_each_by_its_rule() {
        let t = fields("tiktok_events").check(false).unwrap();
        assert!(t.only_attributed);
        let Target::TiktokEvents(tiktok) = &t.target else {
            panic!("{t:?}")
        };
        assert_eq!(tiktok.api_url, DEFAULT_TIKTOK_API_URL);
        assert_eq!(tiktok.access_token.last4(), "…abcd");
        assert!(!format!("{t:?}").contains("EAAB"), "{t:?}");
        let set = |field: &str, value: &str| {
            let mut f = fields("tiktok_events");
            let v = Some(value.to_owned());
            match field {
                "pixel_code" => f.pixel_code = v,
                "access_token" => f.access_token = v,
                "test_event_code" => f.test_event_code = v,
                "api_url" => f.api_url = v,
                "pixel_id" => f.pixel_id = v,
                "graph_url" => f.graph_url = v,
                "api_version" => f.api_version = v,
                "url" => f.url = v,
                _ => f.statuses = Some([("deposit".into(), value.into())].into()),
            }
            f.check(false)
        };
        for (field, inside, outside) in [
            ("pixel_code", "A".repeat(64), "A".repeat(65)),
            ("pixel_code", "C4AB12".into(), "C4AB-12".into()),
            ("access_token", "t".repeat(1024), "t".repeat(1025)),
            ("access_token", "a!~".into(), "a b".into()),
            ("test_event_code", "TEST12345".into(), "TEST 12345".into()),
            (
                "api_url",
                "https://business-api.tiktok.com/".into(),
                "http://business-api.tiktok.com".into(),
            ),
            (
                "api_url",
                "https://tiktok.example/base".into(),
                "https://tiktok.example/base?x=1".into(),
            ),
        ] {
            assert!(set(field, &inside).is_ok(), "{field} {inside}");
            assert_eq!(
                set(field, &outside).unwrap_err().field,
                Some(field),
                "{field} {outside}"
            );
        }
        let mut no_code = fields("tiktok_events");
        no_code.pixel_code = None;
        assert_eq!(no_code.check(false).unwrap_err().field, Some("pixel_code"));
        for other in ["pixel_id", "graph_url", "api_version", "url", "statuses"] {
            assert_eq!(set(other, "1").unwrap_err().field, Some(other), "{other}");
        }
        let mut meta_with_code = fields("meta_capi");
        meta_with_code.pixel_code = Some("C4AB".into());
        assert_eq!(
            meta_with_code.check(false).unwrap_err().field,
            Some("pixel_code")
        );
        let mut meta_with_api_url = fields("meta_capi");
        meta_with_api_url.api_url = Some("https://x.example".into());
        assert_eq!(
            meta_with_api_url.check(false).unwrap_err().field,
            Some("api_url")
        );
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
