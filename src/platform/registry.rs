//! The registry of platforms: the one list of the kinds of destination, each with its stored
//! code, its name and its room's settings. [`Kind`] (its `ALL`, names and [`Kind::parse`]) and
//! [`Target`], a destination's settings as one value over the rooms' settings, are declared
//! from that list, and so is every call that reaches a room through [`Platform`]: the command
//! line's and the control socket's lists of kinds, the admin form, `/openapi.json` and the
//! views come from here. A new platform is a room of its own and one line of the list.

use serde::{Deserialize, Serialize};

use super::face::{ClickFacts, Platform, Sending};
use super::given::{DestinationFields, Field};
use super::google_ads::Google;
use super::meta::Meta;
use super::postback::Postback;
use super::snapchat::Snap;
use super::tiktok::Tiktok;
use super::webhook::Webhook;
use crate::domain::codes::stored_codes;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// Declares [`Kind`] and [`Target`] from the list of platforms, and `Target`'s calls into the
/// rooms by [`Platform`].
macro_rules! platforms {
    ($($(#[$doc:meta])* $variant:ident($room:ty) = $code:literal => $name:literal,)+) => {
        stored_codes! {
            /// Where a destination sends its events.
            #[derive(Serialize, Deserialize, schemars::JsonSchema)]
            #[serde(rename_all = "snake_case")]
            pub enum Kind {
                $($(#[$doc])* $variant = $code => $name,)+
            }
        }

        /// A destination's settings: its platform's, whole. The data file keeps them as one
        /// tagged value whose tag is the platform's place in the list: append, never reorder.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum Target {
            $($variant($room),)+
        }

        impl Kind {
            /// The fields of their own this kind's destinations take; another kind's are refused.
            #[must_use]
            pub fn fields(self) -> &'static [Field] {
                match self {
                    $(Kind::$variant => <$room as Platform>::fields(),)+
                }
            }

            /// The names and JSON Schemas of what answers show of this kind's destinations
            /// beside their fields.
            #[must_use]
            pub fn shown_fields(self) -> &'static [(&'static str, &'static str)] {
                match self {
                    $(Kind::$variant => <$room as Platform>::shown_fields(),)+
                }
            }

            /// How this kind's deliveries leave.
            #[must_use]
            pub fn sending(self) -> Sending {
                match self {
                    $(Kind::$variant => <$room as Platform>::sending(),)+
                }
            }

            /// Its name as a form that offers it shows it.
            #[must_use]
            pub fn title(self) -> &'static str {
                match self {
                    $(Kind::$variant => <$room as Platform>::title(),)+
                }
            }

            /// Whether its destinations take only attributed events unless told otherwise.
            #[must_use]
            pub fn only_attributed_by_default(self) -> bool {
                match self {
                    $(Kind::$variant => <$room as Platform>::only_attributed_by_default(),)+
                }
            }
        }

        impl Target {
            /// The settings of a `kind` destination given in `f`, checked by its room.
            pub(super) fn from_fields(
                kind: Kind,
                f: &DestinationFields,
                allow_private: bool,
            ) -> Result<Target, Error> {
                Ok(match kind {
                    $(Kind::$variant => Target::$variant(<$room>::from_fields(f, allow_private)?),)+
                })
            }

            /// What a change of `before` into these settings leaves as it was, and the field of
            /// a token's address it moved.
            pub(super) fn keep_from(&mut self, before: &Target) -> Option<&'static str> {
                match (self, before) {
                    $((Target::$variant(new), Target::$variant(old)) => {
                        new.keep_from(old);
                        new.moved_address(old)
                    })+
                    _ => None,
                }
            }

            #[must_use]
            pub fn kind(&self) -> Kind {
                match self {
                    $(Target::$variant(_) => Kind::$variant,)+
                }
            }

            /// The platform's face of these settings.
            #[must_use]
            pub fn platform(&self) -> &dyn Platform {
                match self {
                    $(Target::$variant(p) => p,)+
                }
            }
        }
    };
}

platforms! {
    /// Meta's Conversions API: `POST <graph_url>/<api_version>/<pixel_id>/events`.
    MetaCapi(Meta) = 1 => "meta_capi",
    /// A `GET` of a URL template with the event's fields in its macros.
    Postback(Postback) = 2 => "postback",
    /// A `POST` of the event as the feed shows it, signed.
    Webhook(Webhook) = 3 => "webhook",
    /// `TikTok`'s Events API: `POST <api_url>/open_api/v1.3/event/track/`.
    TiktokEvents(Tiktok) = 4 => "tiktok_events",
    /// Nothing pushed: Google Ads fetches a file of conversions (`google_ads.rs`).
    GoogleAds(Google) = 5 => "google_ads",
    /// Snapchat's Conversions API: `POST <api_url>/v3/<pixel_id>/events`.
    SnapCapi(Snap) = 6 => "snap_capi",
}

impl Kind {
    /// Whether this kind's destinations take the field `name`.
    #[must_use]
    pub fn takes(self, name: &str) -> bool {
        self.field(name).is_some()
    }

    /// This kind's field `name`.
    #[must_use]
    pub fn field(self, name: &str) -> Option<&'static Field> {
        self.fields().iter().find(|f| f.name == name)
    }

    /// Of [`Kind::fields`], those a destination cannot do without.
    #[must_use]
    pub fn required(self) -> Vec<&'static str> {
        self.fields()
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect()
    }

    /// The field `name` as the first kind that takes it declares it: how a body gives it.
    #[must_use]
    pub fn any_field(name: &str) -> Option<&'static Field> {
        Kind::ALL.into_iter().find_map(|k| k.field(name))
    }

    /// The kinds' names, for a message: `a, b, c or d`.
    #[must_use]
    pub fn names_listed() -> String {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }

    /// A kind as a body or a command names it.
    ///
    /// # Errors
    /// `invalid_field` for `kind`, naming every kind.
    pub fn parse(text: &str) -> Result<Kind, Error> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "kind",
                    format!("kind is {}, got {}", Kind::names_listed(), quoted(text)),
                )
            })
    }
}

impl Target {
    /// The access token an ad platform is sent, which its answers may quote back: cut out of
    /// every answer before it is kept or shown (`credential::cut_secret`).
    #[must_use]
    pub fn platform_token(&self) -> &str {
        self.platform().token()
    }

    /// The address requests go to, as configured (a postback's with its macros); none for a
    /// destination that is fetched from.
    #[must_use]
    pub fn address(&self) -> &str {
        self.platform().address()
    }

    /// How its deliveries leave.
    #[must_use]
    pub fn sending(&self) -> Sending {
        self.kind().sending()
    }

    /// Whether its platform can match an event with `click` to an ad of its own.
    #[must_use]
    pub fn matches(&self, click: ClickFacts) -> bool {
        self.platform().matches(click)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds' stored bytes and names as they are on users' disks and in answers, and the
    /// list every message names them by.
    #[test]
    fn kinds_keep_their_codes_and_names() {
        let seen: Vec<(u8, &str)> = Kind::ALL
            .into_iter()
            .map(|k| (k as u8, k.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (1, "meta_capi"),
                (2, "postback"),
                (3, "webhook"),
                (4, "tiktok_events"),
                (5, "google_ads"),
                (6, "snap_capi")
            ]
        );
        assert_eq!(
            Kind::names_listed(),
            "meta_capi, postback, webhook, tiktok_events, google_ads or snap_capi"
        );
    }

    /// Every field a room declares says what it is and where to find it, has a schema that
    /// reads, and is declared alike by every kind that takes it: a body reads it one way.
    #[test]
    fn every_field_is_described_and_read_one_way() {
        for kind in Kind::ALL {
            for field in kind.fields() {
                assert!(!field.label.is_empty(), "{kind:?} {}", field.name);
                assert!(!field.help.is_empty(), "{kind:?} {}", field.name);
                // The form shows it: its own terms (name=value), no code quotes or JSON.
                assert!(
                    !field.help.contains('`') && !field.help.contains("{\""),
                    "{kind:?} {}: {}",
                    field.name,
                    field.help
                );
                assert!(
                    serde_json::from_str::<serde_json::Value>(field.schema).is_ok(),
                    "{kind:?} {}",
                    field.name
                );
                let first = Kind::any_field(field.name).unwrap();
                assert_eq!(first.shape, field.shape, "{kind:?} {}", field.name);
                assert_eq!(first.secret, field.secret, "{kind:?} {}", field.name);
            }
        }
    }

    /// Each click id is read by a kind there is, under a stored tag of its own (never `fbp`'s)
    /// and a name and parameter of its own.
    #[test]
    fn each_click_id_belongs_to_a_kind_under_a_tag_of_its_own() {
        use crate::domain::click::{AD_CLICK_IDS, FBP_TAG};
        for (place, id) in AD_CLICK_IDS.iter().enumerate() {
            assert!(Kind::parse(id.platform).is_ok(), "{id:?}");
            assert_ne!(id.tag, FBP_TAG, "{id:?}");
            for other in &AD_CLICK_IDS[place + 1..] {
                assert_ne!(id.tag, other.tag, "{id:?} {other:?}");
                assert_ne!(id.name, other.name, "{id:?} {other:?}");
                assert_ne!(id.param, other.param, "{id:?} {other:?}");
            }
        }
    }
}
