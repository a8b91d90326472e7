//! The kinds of destination and what each holds: its target (Meta's pixel and token, `TikTok`'s
//! pixel code and token, a postback's or a webhook's URL), its secrets (write-only), the events it wants, and the
//! directory of a space's destinations the writer keeps.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};

use super::{Google, MetaRules, Statuses};
use crate::domain::codes::stored_codes;
use crate::domain::event::EventKind;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The most live destinations a space has: each costs a delivery row per event it takes and a
/// sender task.
pub const MAX_DESTINATIONS: usize = 32;

/// How long a webhook's replaced signing secret still signs beside the new one, as a
/// credential's grace.
pub const ROTATION_GRACE_MS: u64 = 24 * 3_600_000;

stored_codes! {
    /// Where a destination sends its events.
    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Kind {
        /// Meta's Conversions API: `POST <graph_url>/<api_version>/<pixel_id>/events`.
        MetaCapi = 1 => "meta_capi",
        /// A `GET` of a URL template with the event's fields in its macros.
        Postback = 2 => "postback",
        /// A `POST` of the event as the feed shows it, signed.
        Webhook = 3 => "webhook",
        /// `TikTok`'s Events API: `POST <api_url>/open_api/v1.3/event/track/`.
        TiktokEvents = 4 => "tiktok_events",
        /// Nothing pushed: Google Ads fetches a file of conversions (`google.rs`).
        GoogleAds = 5 => "google_ads",
    }
}

impl Kind {
    pub(super) fn parse(text: &str) -> Result<Kind, Error> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "kind",
                    format!(
                        "kind is meta_capi, postback, webhook, tiktok_events or google_ads, got {}",
                        quoted(text)
                    ),
                )
            })
    }
}

/// A credential the tracker must be able to use (Meta's access token, a webhook's signing
/// secret): kept as it is, never printed by `Debug`, shown only by its last 4 characters.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The value itself: for the request that uses it, and for the store.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What answers and pages show: `…` and the last 4 characters.
    #[must_use]
    pub fn last4(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
        format!("…{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", self.last4())
    }
}

/// Meta's Conversions API: the pixel (dataset) and the token that may write to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub pixel_id: String,
    pub access_token: Secret,
    /// Sent as `test_event_code`: the events show in Events Manager's test tab only.
    pub test_event_code: Option<String>,
    pub api_version: String,
    /// Graph API's base address, without a trailing `/`.
    pub graph_url: String,
    /// The event names it sends and the rates it converts other currencies by.
    pub rules: MetaRules,
}

/// `TikTok`'s Events API: the pixel and the token that may send to it. Its event names and
/// currency rates follow the rules of Meta's (`TikTok`'s default names are its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiktok {
    /// The pixel's code in Events Manager (`C4ABCDEFGHIJ12345678`), sent as
    /// `event_source_id`.
    pub pixel_code: String,
    /// Sent in the `Access-Token` header.
    pub access_token: Secret,
    /// Sent as `test_event_code`: the events show in Events Manager's Test events tab only.
    pub test_event_code: Option<String>,
    /// The Business API's base address, without a trailing `/`.
    pub api_url: String,
    pub rules: MetaRules,
}

/// A webhook's signing secret that was replaced: it still signs beside the new one until
/// `until_ms`, so a receiver can be given the new one without losing a delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviousSecret {
    pub secret: Secret,
    pub until_ms: u64,
}

/// Why and since when a destination sends nothing: the remote no longer takes its credential.
/// Its open deliveries wait, and a `PATCH` of the destination resumes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paused {
    pub at_ms: u64,
    pub reason: String,
}

/// What a destination sends to, by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    MetaCapi(Meta),
    Postback {
        url: String,
        /// The words `{status}` gives per event kind.
        statuses: Statuses,
    },
    Webhook {
        url: String,
        signing_secret: Secret,
        /// The secret it had before a rotation, while it still signs.
        previous: Option<PreviousSecret>,
    },
    TiktokEvents(Tiktok),
    /// Nothing is sent: Google Ads fetches the file of its conversions.
    GoogleAds(Google),
}

impl Target {
    /// The access token an ad platform is sent, which its answers may quote back: cut out of
    /// every answer before it is kept or shown (`credential::cut_secret`).
    #[must_use]
    pub fn platform_token(&self) -> &str {
        match self {
            Target::MetaCapi(meta) => meta.access_token.expose(),
            Target::TiktokEvents(t) => t.access_token.expose(),
            Target::Postback { .. } | Target::Webhook { .. } | Target::GoogleAds(_) => "",
        }
    }

    #[must_use]
    pub fn kind(&self) -> Kind {
        match self {
            Target::MetaCapi(_) => Kind::MetaCapi,
            Target::Postback { .. } => Kind::Postback,
            Target::Webhook { .. } => Kind::Webhook,
            Target::TiktokEvents(_) => Kind::TiktokEvents,
            Target::GoogleAds(_) => Kind::GoogleAds,
        }
    }

    /// The address requests go to, as configured (a postback's with its macros); none for a
    /// destination that is fetched from.
    #[must_use]
    pub fn address(&self) -> &str {
        match self {
            Target::MetaCapi(m) => &m.graph_url,
            Target::Postback { url, .. } | Target::Webhook { url, .. } => url,
            Target::TiktokEvents(t) => &t.api_url,
            Target::GoogleAds(_) => "",
        }
    }
}

/// The event kinds a destination takes, one bit each (`1 << (kind - 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSet(pub u8);

impl EventSet {
    pub const ALL: EventSet = EventSet(0b1111);

    #[must_use]
    pub fn contains(self, kind: EventKind) -> bool {
        self.0 & (1 << (kind as u8 - 1)) != 0
    }

    #[must_use]
    pub fn names(self) -> Vec<String> {
        EventKind::ALL
            .into_iter()
            .filter(|k| self.contains(*k))
            .map(|k| k.as_str().to_owned())
            .collect()
    }

    /// From event names: each one of the four, at least one.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<EventSet, Error> {
        let mut bits = 0;
        for name in names {
            let name = name.as_ref();
            let kind = EventKind::from_name(name).ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "events",
                    format!(
                        "events are contact, subscribed, registration and deposit, got {}",
                        quoted(name)
                    ),
                )
            })?;
            bits |= 1 << (kind as u8 - 1);
        }
        if bits == 0 {
            return Err(Error::field(
                Code::InvalidField,
                "events",
                "events must name at least one event kind (or be left out: all of them)",
            ));
        }
        Ok(EventSet(bits))
    }
}

/// A stored destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// Its number in the data file: what its deliveries are keyed by.
    pub no: u32,
    pub space: u32,
    pub name: String,
    pub events: EventSet,
    pub only_attributed: bool,
    pub target: Target,
    pub created_at_ms: u64,
    /// Set while it sends nothing, its deliveries waiting.
    pub paused: Option<Paused>,
}

impl Destination {
    /// Whether an event of `kind` goes to this destination: one of its kinds, and when it takes
    /// only attributed events, one with a click (for Meta, a click with an `fbclid`, for
    /// `TikTok` one with a `ttclid`: without it the platform cannot match it to an ad).
    #[must_use]
    pub fn wants(&self, kind: EventKind, click: Option<ClickFacts>) -> bool {
        // Google Ads fetches its file: no event ever waits in a queue for it.
        if !self.events.contains(kind) || self.target.kind() == Kind::GoogleAds {
            return false;
        }
        if !self.only_attributed {
            return true;
        }
        match (self.target.kind(), click) {
            (_, None) => false,
            (Kind::MetaCapi, Some(c)) => c.has_fbclid,
            (Kind::TiktokEvents, Some(c)) => c.has_ttclid,
            (_, Some(_)) => true,
        }
    }
}

/// What [`Destination::wants`] needs to know of an event's click.
#[derive(Clone, Copy, Debug)]
pub struct ClickFacts {
    pub has_fbclid: bool,
    pub has_ttclid: bool,
}

/// The live destinations of every space, in memory: what the writer looks an event's
/// destinations up in, and what the sender starts a task for. Replaced after each commit that
/// changes a destination, as the links' directory is.
#[derive(Default)]
pub struct Directory {
    by_space: RwLock<HashMap<u32, Arc<[Arc<Destination>]>>>,
}

impl Directory {
    pub fn replace(&self, destinations: Vec<Destination>) {
        let mut by_space: HashMap<u32, Vec<Arc<Destination>>> = HashMap::new();
        for d in destinations {
            by_space.entry(d.space).or_default().push(Arc::new(d));
        }
        let map = by_space
            .into_iter()
            .map(|(space, list)| (space, Arc::from(list)))
            .collect();
        *self
            .by_space
            .write()
            .unwrap_or_else(PoisonError::into_inner) = map;
    }

    /// The live destinations of `space` (none: an empty list, without allocating).
    #[must_use]
    pub fn of_space(&self, space: u32) -> Option<Arc<[Arc<Destination>]>> {
        self.by_space
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&space)
            .cloned()
    }

    /// Destination `no` of `space`, if it is live.
    #[must_use]
    pub fn get(&self, space: u32, no: u32) -> Option<Arc<Destination>> {
        self.of_space(space)
            .and_then(|list| list.iter().find(|d| d.no == no).cloned())
    }

    /// Every live destination of every space.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Destination>> {
        self.by_space
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|list| list.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fields::tests::fields;
    use super::*;

    #[test]
    fn meta_takes_only_events_with_an_fbclid_unless_told_otherwise() {
        let mut d = Destination {
            no: 1,
            space: 1,
            name: "m".into(),
            events: EventSet::parse(&["deposit"]).unwrap(),
            only_attributed: true,
            target: fields("meta_capi").check(false).unwrap().target,
            created_at_ms: 0,
            paused: None,
        };
        let with = Some(ClickFacts {
            has_fbclid: true,
            has_ttclid: false,
        });
        let without = Some(ClickFacts {
            has_fbclid: false,
            has_ttclid: true,
        });
        assert!(d.wants(EventKind::Deposit, with));
        assert!(!d.wants(EventKind::Contact, with));
        assert!(!d.wants(EventKind::Deposit, without));
        assert!(!d.wants(EventKind::Deposit, None));
        d.only_attributed = false;
        assert!(d.wants(EventKind::Deposit, None));
        d.target = fields("postback").check(false).unwrap().target;
        d.only_attributed = true;
        assert!(d.wants(EventKind::Deposit, without));
        assert!(!d.wants(EventKind::Deposit, None));
        d.target = fields("tiktok_events").check(false).unwrap().target;
        assert!(d.wants(EventKind::Deposit, without));
        assert!(!d.wants(EventKind::Deposit, with));
        assert!(!d.wants(EventKind::Deposit, None));
        d.target = fields("google_ads").check(false).unwrap().target;
        d.only_attributed = false;
        assert!(
            !d.wants(EventKind::Deposit, with),
            "nothing is queued for Google"
        );
    }
}
