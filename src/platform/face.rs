//! The face every platform shows the rest of the tracker: the [`Platform`] trait, what its
//! answers can mean ([`Answer`]), and the request it builds ([`Request`]), a plain value the
//! sender's HTTP client sends. A platform's room implements it; the registry
//! (`registry.rs`) and the sender (`delivery/`) call nothing else of a room.

use serde_json::Value;

use super::delivery::{Outcome, outcome_of};
use super::given::{DestinationFields, Field};
use crate::domain::click::{AD_CLICK_IDS, ClickIds, ClientHints};
use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;
use crate::error::Error;

/// What a destination's platform needs to know of an event's click to match it to an ad:
/// which of the ad platforms' click ids it brought (`fbclid`, and by their place in
/// [`AD_CLICK_IDS`] the others).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClickFacts {
    pub has_fbclid: bool,
    has_ad_ids: u32,
}

impl ClickFacts {
    /// The facts of a click with or without an `fbclid` and with the other click ids `ids`.
    #[must_use]
    pub fn of(has_fbclid: bool, ids: &ClickIds) -> ClickFacts {
        let has_ad_ids = AD_CLICK_IDS
            .iter()
            .enumerate()
            .filter(|(_, id)| ids.get(id.name).is_some())
            .fold(0, |bits, (place, _)| bits | 1 << place);
        ClickFacts {
            has_fbclid,
            has_ad_ids,
        }
    }

    /// Whether the click brought a click id that `platform` (a kind's name) matches events by.
    #[must_use]
    pub fn has_id_for(self, platform: &str) -> bool {
        AD_CLICK_IDS
            .iter()
            .enumerate()
            .any(|(place, id)| id.platform == platform && self.has_ad_ids & (1 << place) != 0)
    }
}

/// How long a throttled destination waits before it sends again, at least.
pub const THROTTLE_WAIT_MS: u64 = 60_000;

/// What a platform's answer to one request means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Delivered,
    /// Worth sending again: a transient error, a throttle (no sooner than `after_ms`), a
    /// timeout, a `5xx`.
    Retry {
        after_ms: Option<u64>,
    },
    /// The access token no longer works (expired, revoked, its permission withdrawn), the
    /// pixel it names is not there for it, or the API version is no longer served: no event
    /// could ever go, so nothing is sent until the destination is changed (a new token, pixel
    /// or `api_version`), rather than each event going dead.
    TokenRejected {
        message: String,
    },
    /// Refused for good: the events it names (`data[i]`), or, when it names none, some of them.
    Refused {
        named: Vec<usize>,
        message: String,
    },
}

/// The HTTP method of a [`Request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

/// One request a platform is sent, as a plain value: what the sender's HTTP client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A `GET` of `url`, without a body.
    #[must_use]
    pub fn get(url: String) -> Request {
        Request {
            method: Method::Get,
            url,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A `POST` of a JSON `body` to `url`, with `headers` beside its content type.
    #[must_use]
    pub fn post_json(url: String, headers: Vec<(&'static str, String)>, body: Vec<u8>) -> Request {
        let mut all = vec![("content-type", "application/json".to_owned())];
        all.extend(headers);
        Request {
            method: Method::Post,
            url,
            headers: all,
            body,
        }
    }
}

/// What a platform's answer means when only its status speaks: `2xx` taken, `408`, `429` and
/// `5xx` worth another try, anything else refused.
#[must_use]
pub fn answer_by_status(status: u16, body: &str) -> Answer {
    match outcome_of(status) {
        Outcome::Delivered => Answer::Delivered,
        Outcome::Failed | Outcome::Held => Answer::Retry { after_ms: None },
        Outcome::Refused => Answer::Refused {
            named: Vec::new(),
            message: body.to_owned(),
        },
    }
}

/// What an ad platform's test needs: its name and the conversion its test event would count
/// as, and the destination's own test code.
#[derive(Clone, Copy, Debug)]
pub struct TestView<'a> {
    pub platform: &'static str,
    pub conversion: &'static str,
    pub own_code: Option<&'a str>,
}

/// How a platform's deliveries leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sending {
    /// Nothing is sent: the platform fetches (Google Ads' file).
    Fetched,
    /// Each event in a request of its own, up to `batch` at a time.
    Alone { batch: usize },
    /// Up to `batch` events in one request, whose answer may refuse some of them: searched
    /// by halves (`halves.rs`).
    Together { batch: usize },
}

/// An ad platform, a postback or a webhook: what the registry and the sender know of each.
pub trait Platform: Sync {
    /// Its fields of its own in a destination's body, each as a body gives it, answers show
    /// it and a form asks for it; another platform's are refused.
    fn fields() -> &'static [Field]
    where
        Self: Sized;

    /// How its deliveries leave.
    fn sending() -> Sending
    where
        Self: Sized;

    /// Its name as a form that offers it shows it (`Meta Conversions API`).
    fn title() -> &'static str
    where
        Self: Sized;

    /// Its settings given in `f` (where no other platform's fields are), checked by its rules;
    /// a secret it makes (a webhook's, Google's password) made here.
    ///
    /// # Errors
    /// The first field that breaks a rule, named.
    fn from_fields(f: &DestinationFields, allow_private: bool) -> Result<Self, Error>
    where
        Self: Sized;

    /// Whether a destination takes only events it can match to a click unless told otherwise:
    /// a platform that matches events to its ads can use no other.
    #[must_use]
    fn only_attributed_by_default() -> bool
    where
        Self: Sized,
    {
        true
    }

    /// Its settings as a way in would give them (its secrets as they are): what a change is
    /// laid over and checked again.
    fn fields_of(&self, f: &mut DestinationFields);

    /// What answers show of it beyond its fields (`fields_of`): what it came to, never a
    /// credential.
    fn shown(&self, view: &mut serde_json::Map<String, Value>) {
        let _ = view;
    }

    /// The names and JSON Schemas of what [`Platform::shown`] adds.
    #[must_use]
    fn shown_fields() -> &'static [(&'static str, &'static str)]
    where
        Self: Sized,
    {
        &[]
    }

    /// What a change leaves as it was in `before`, these settings' predecessor: the secrets
    /// only a rotation replaces, what its fetches came to.
    fn keep_from(&mut self, before: &Self)
    where
        Self: Sized,
    {
        let _ = before;
    }

    /// The field of an address its token is sent to, when a change moved it from `before`'s:
    /// the change must then give the token again.
    fn moved_address(&self, before: &Self) -> Option<&'static str>
    where
        Self: Sized,
    {
        let _ = before;
        None
    }

    /// The access token it is sent, which its answers may quote back: cut out of every
    /// answer before it is kept or shown. Empty for none.
    // Borrowed: a platform's own token is its settings' text.
    #[allow(clippy::unnecessary_literal_bound)]
    fn token(&self) -> &str {
        ""
    }

    /// The address requests go to, as configured (a postback's with its macros); empty for a
    /// platform that fetches.
    // Borrowed: a platform's own address is its settings' text.
    #[allow(clippy::unnecessary_literal_bound)]
    fn address(&self) -> &str {
        ""
    }

    /// Whether it can match an event with `click` to an ad of its own, for a destination that
    /// takes only attributed events.
    fn matches(&self, click: ClickFacts) -> bool {
        let _ = click;
        true
    }

    /// The entry of `event` in a request ([`Sending::Together`]), or why it is never sent;
    /// `space_rates` are its space's `currency_rates`, for a currency the destination has no
    /// rate of its own for.
    ///
    /// # Errors
    /// Why the platform could not take the event.
    fn entry(
        &self,
        event: &FeedEvent,
        hints: Option<&ClientHints>,
        space_rates: &CurrencyRates,
        now_ms: u64,
    ) -> Result<Value, String> {
        let _ = (event, hints, space_rates, now_ms);
        Err("not sent: this destination takes no events in a request".into())
    }

    /// The request of `entries` ([`Sending::Together`]); `test_code` sends to a test
    /// view of the platform's own instead of its settings' one.
    fn request_of(&self, entries: &[Value], test_code: Option<&str>) -> Option<Request> {
        let _ = (entries, test_code);
        None
    }

    /// The request of `event` alone ([`Sending::Alone`]): `click_query` is its click's query,
    /// `now_ms` when it is sent.
    fn request_alone(
        &self,
        event: &FeedEvent,
        click_query: Option<&str>,
        now_ms: u64,
    ) -> Option<Request> {
        let _ = (event, click_query, now_ms);
        None
    }

    /// What an answer of `status` with `body` means.
    fn judge(&self, status: u16, body: &str) -> Answer {
        answer_by_status(status, body)
    }

    /// An ad platform's test view, where a test without a test code would count as a real
    /// conversion; `None` for a receiver that takes a test as any other event.
    fn test_view(&self) -> Option<TestView<'_>> {
        None
    }

    /// Whether a test's answer says the event was taken: a `2xx`, unless the platform says
    /// more in its body.
    fn took(&self, status: u16, body: &str) -> bool {
        let _ = body;
        outcome_of(status) == Outcome::Delivered
    }
}
