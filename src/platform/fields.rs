//! A destination's fields checked: by its room's rules (`Platform::from_fields`) and those of
//! every destination (its name, its events), into a [`NewDestination`] the writer stores; and a
//! change of a stored destination laid over its fields and checked again.

use serde::{Deserialize, Serialize};

use super::destination::{Destination, EventSet};
use super::given::{DestinationFields, missing};
use super::registry::{Kind, Target};
use crate::domain::input::{self, quoted};
use crate::error::{Code, Error};

/// A destination as given, checked; what the writer stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDestination {
    pub name: String,
    pub events: EventSet,
    pub only_attributed: bool,
    pub target: Target,
}

fn not_for(field: &str, kind: Kind) -> Error {
    let field = Kind::any_field(field).map_or("kind", |f| f.name);
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
                .ok_or_else(|| missing("kind", &format!("({})", Kind::names_listed())))?,
        )?;
        let events = match &self.events {
            None => EventSet::ALL,
            Some(names) => EventSet::parse(names)?,
        };
        if let Some(field) = self.given().into_iter().find(|field| !kind.takes(field)) {
            return Err(not_for(field, kind));
        }
        let target = Target::from_fields(kind, &self, allow_private)?;
        Ok(NewDestination {
            name,
            events,
            only_attributed: self
                .only_attributed
                .unwrap_or(kind.only_attributed_by_default()),
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
        d.target.platform().fields_of(&mut f);
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
        let required_error = |field: &'static str| {
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
        let gave_token = set.own.contains_key("access_token");
        let mut f = DestinationFields::of(current);
        for field in &self.cleared {
            match field.as_str() {
                "name" => return Err(fixed("name")),
                "kind" => return Err(fixed("kind")),
                "events" => f.events = None,
                "only_attributed" => f.only_attributed = None,
                other => {
                    // No kind's required field can be taken away, even from another kind.
                    if let Some(required) = Kind::ALL
                        .into_iter()
                        .flat_map(Kind::required)
                        .find(|r| *r == other)
                    {
                        return Err(required_error(required));
                    }
                    f.own.remove(other);
                }
            }
        }
        if set.events.is_some() {
            f.events = set.events;
        }
        if set.only_attributed.is_some() {
            f.only_attributed = set.only_attributed;
        }
        f.own.extend(set.own);
        let mut new = f.check(allow_private)?;
        let moved = new.target.keep_from(&current.target);
        if let Some(field) = moved.filter(|_| !gave_token) {
            // The stored token, which nobody can read back, goes only to the address it was
            // given for.
            return Err(Error::field(
                Code::InvalidField,
                "access_token",
                format!(
                    "changing {field} sends the access token to another address: give \
                     access_token again in the same change"
                ),
            ));
        }
        Ok(new)
    }
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::platform::given::DestinationFields;
    use crate::platform::meta::DEFAULT_API_VERSION;
    use crate::platform::meta::DEFAULT_GRAPH_URL;
    use crate::platform::tiktok::DEFAULT_TIKTOK_API_URL;
    use crate::platform::webhook::{Webhook, new_signing_secret};

    /// The fields of a valid destination of `kind`, for a test to change one of.
    pub(in crate::platform) fn fields(kind: &str) -> DestinationFields {
        let mut f = DestinationFields {
            name: Some("meta".into()),
            kind: Some(kind.into()),
            ..DestinationFields::default()
        };
        f.set_text(
            "pixel_id",
            match kind {
                "meta_capi" => Some("1234567890".into()),
                "snap_capi" => Some("a3f4b5c6-d7e8-9012-3456-7890abcdef12".into()),
                _ => None,
            },
        );
        f.set_text(
            "access_token",
            matches!(kind, "meta_capi" | "tiktok_events" | "snap_capi")
                .then(|| "EAAB-token-abcd".into()),
        );
        f.set_text(
            "url",
            matches!(kind, "postback" | "webhook").then(|| "https://example.com/pb?c={uid}".into()),
        );
        f.set_text(
            "pixel_code",
            (kind == "tiktok_events").then(|| "C4ABCDEFGHIJ12345678".into()),
        );
        f
    }

    /// `kind_required`, which `/openapi.json` describes, is what `check` asks for: a kind's
    /// smallest valid fields are those, and taking any one away is `missing_field` for it.
    #[test]
    fn the_required_fields_of_each_kind_are_what_check_asks_for() {
        for kind in Kind::ALL {
            let least = fields(kind.as_str());
            let mut given = least.given();
            given.sort_unstable();
            let mut required = kind.required();
            required.sort_unstable();
            assert_eq!(given, required, "{kind:?}");
            assert!(least.clone().check(false).is_ok(), "{kind:?}");
            for field in kind.required() {
                assert!(kind.takes(field), "{field}");
                let mut f = least.clone();
                match field {
                    "pixel_id" => f.set_text("pixel_id", None),
                    "access_token" => f.set_text("access_token", None),
                    "pixel_code" => f.set_text("pixel_code", None),
                    "url" => f.set_text("url", None),
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
                let mut set = DestinationFields::default();
                set.set_text("access_token", token.map(str::to_owned));
                match field {
                    "graph_url" => set.set_text("graph_url", Some(address.to_owned())),
                    _ => set.set_text("api_url", Some(address.to_owned())),
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
                "graph_url" => same.text("graph_url"),
                _ => same.text("api_url"),
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
        let Target::Webhook(Webhook { signing_secret, .. }) = &w.target else {
            panic!("{w:?}")
        };
        assert!(signing_secret.expose().starts_with("whsec_"));
        assert_ne!(signing_secret, &new_signing_secret());
        let mut postback_with_pixel = fields("postback");
        postback_with_pixel.set_text("pixel_id", Some("1".into()));
        assert_eq!(
            postback_with_pixel.check(false).unwrap_err().field,
            Some("pixel_id")
        );
        let mut meta_with_url = fields("meta_capi");
        meta_with_url.set_text("url", Some("https://x.example".into()));
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
                "pixel_id" => f.set_text("pixel_id", v),
                "test_event_code" => f.set_text("test_event_code", v),
                "api_version" => f.set_text("api_version", v),
                _ => f.set_text("graph_url", v),
            }
            assert_eq!(f.check(false).unwrap_err().field, Some(field), "{value}");
        }
        let mut ok = fields("meta_capi");
        ok.set_text("pixel_id", Some("1".repeat(32)));
        ok.set_text("api_version", Some("v9.0".into()));
        ok.set_text("test_event_code", Some("TEST12345".into()));
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
                "pixel_code" => f.set_text("pixel_code", v),
                "access_token" => f.set_text("access_token", v),
                "test_event_code" => f.set_text("test_event_code", v),
                "api_url" => f.set_text("api_url", v),
                "pixel_id" => f.set_text("pixel_id", v),
                "graph_url" => f.set_text("graph_url", v),
                "api_version" => f.set_text("api_version", v),
                "url" => f.set_text("url", v),
                _ => f.set_pairs("statuses", Some([("deposit".into(), value.into())].into())),
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
        no_code.set_text("pixel_code", None);
        assert_eq!(no_code.check(false).unwrap_err().field, Some("pixel_code"));
        for other in ["pixel_id", "graph_url", "api_version", "url", "statuses"] {
            assert_eq!(set(other, "1").unwrap_err().field, Some(other), "{other}");
        }
        let mut meta_with_code = fields("meta_capi");
        meta_with_code.set_text("pixel_code", Some("C4AB".into()));
        assert_eq!(
            meta_with_code.check(false).unwrap_err().field,
            Some("pixel_code")
        );
        let mut meta_with_api_url = fields("meta_capi");
        meta_with_api_url.set_text("api_url", Some("https://x.example".into()));
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
