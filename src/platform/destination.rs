//! A stored destination and what is not any one platform's: the events it takes, whether it
//! waits for a click, its pause, the directory of a space's destinations the writer keeps, and
//! the synthetic event a test of any destination sends.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use super::face::{ClickFacts, Sending};
use super::registry::Target;
use crate::domain::event::EventKind;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The most live destinations a space has: each costs a delivery row per event it takes and a
/// sender task.
pub const MAX_DESTINATIONS: usize = 32;

/// Why and since when a destination sends nothing: the remote no longer takes its credential.
/// Its open deliveries wait, and a `PATCH` of the destination resumes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paused {
    pub at_ms: u64,
    pub reason: String,
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
    /// only attributed events, one with a click its platform can match to an ad of its own
    /// (an ad platform's click id: without it the platform cannot match it to an ad).
    #[must_use]
    pub fn wants(&self, kind: EventKind, click: Option<ClickFacts>) -> bool {
        // A platform that fetches (Google Ads) has no event wait in a queue for it.
        if !self.events.contains(kind) || self.target.sending() == Sending::Fetched {
            return false;
        }
        if !self.only_attributed {
            return true;
        }
        click.is_some_and(|c| self.target.matches(c))
    }
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

/// The synthetic event a test of a destination sends: a deposit of 1.00 USD by a click with
/// an `fbclid` and a Telegram user, received now, with a new `event_id` each time (so a
/// receiver that deduplicates shows every test).
#[must_use]
pub fn test_event(now_ms: u64) -> FeedEvent {
    FeedEvent {
        event_id: crate::domain::event::EventId::random().to_string(),
        inbox_id: "0".into(),
        event: "deposit".into(),
        uid: Some("test".into()),
        value: Some("1.00".into()),
        currency: "USD".into(),
        eid: None,
        occurred_at_ms: now_ms,
        received_at_ms: now_ms,
        source: Some("post".into()),
        matched: true,
        link_slug: Some("test".into()),
        fbclid: Some("test".into()),
        campaign_name: Some("test".into()),
        clicked_at_ms: Some(now_ms),
        tg_id: Some(1),
        fbc: Some(crate::domain::feed::fbc(now_ms, "test")),
        attributed_by: Some("uid".into()),
        first_deposit: Some(true),
        // The click ids of its click: none.
        ..FeedEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::fields::tests::fields;

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
        let with = Some(ClickFacts::of(
            true,
            &crate::domain::click::ClickIds::default(),
        ));
        let mut ttclid = crate::domain::click::ClickIds::default();
        ttclid.set("ttclid", Some("E.C.P.x".into()));
        let without = Some(ClickFacts::of(false, &ttclid));
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
        d.target = fields("google_ads").check(false).unwrap().target;
        d.only_attributed = false;
        assert!(
            !d.wants(EventKind::Deposit, with),
            "nothing is queued for Google"
        );
    }
}
