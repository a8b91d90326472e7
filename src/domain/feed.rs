//! The event feed: what one stored event looks like when it is read back (`docs/api.md#get-events`),
//! with its attribution joined at read time, and the rules of paging through it.
//!
//! `GET /events`, `GET /events/wait`, `tracker export` and the admin page all show these values,
//! serialised by this one definition, so every way out has the same fields with the same names.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::event::{AttributedBy, EventKind};
use crate::error::{Code, Error};

/// The most events one page holds, and how many a page holds unless asked.
pub const MAX_PAGE: usize = 1000;
pub const DEFAULT_PAGE: usize = 100;
/// The longest `GET /events/wait` waits, and how long unless asked.
pub const MAX_WAIT_S: u64 = 60;
pub const DEFAULT_WAIT_S: u64 = 30;
/// Requests of one space waiting on `GET /events/wait` at once, at most.
pub const MAX_WAITERS_PER_SPACE: usize = 32;

/// One stored event and its attribution. Its `Default` is no event: what a constructor
/// leaves out (the click ids, until `attribute`) is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FeedEvent {
    /// A decimal string, as `POST /events` answers it.
    #[schemars(pattern(r"^[0-9]+$"))]
    pub inbox_id: String,
    #[schemars(with = "EventKind")]
    pub event: String,
    pub uid: Option<String>,
    /// The exact decimal text that was stored.
    pub value: Option<String>,
    pub currency: String,
    pub eid: Option<String>,
    pub occurred_at_ms: u64,
    pub received_at_ms: u64,
    /// `post` or `get`; `null` for events stored before the tracker kept it (schema 2).
    pub source: Option<String>,
    /// Whether `uid` names a click of the space (for an event attributed by its Telegram id, the
    /// click the id resolved to when it was stored).
    pub matched: bool,
    pub link_slug: Option<String>,
    pub fbclid: Option<String>,
    pub campaign_name: Option<String>,
    pub clicked_at_ms: Option<u64>,
    /// The Telegram user the event named, where it named one; else the one its click is bound
    /// to.
    pub tg_id: Option<u64>,
    /// Meta's click id cookie, `fb.1.<clicked_at_ms>.<fbclid>`, where the click has an fbclid.
    pub fbc: Option<String>,
    /// How the event was attributed when it was stored: `uid`, `tg_id`, or `null` when no click
    /// was found. Last, so that the columns of an export made before it keep their places.
    #[schemars(with = "Option<AttributedBy>")]
    pub attributed_by: Option<String>,
    /// For a deposit, whether it was its user's first (`docs/api.md#first-deposits`), decided
    /// when it was stored; `null` for every other kind. After `attributed_by`, for the same
    /// reason.
    pub first_deposit: Option<bool>,
    /// The event's identity: a UUID made when it was stored, never the same for two events, in
    /// this data file or another (`inbox_id` counts anew in each). What receivers deduplicate
    /// by. The fields from here on come last for the same reason as `attributed_by`.
    #[schemars(
        length(equal = 36),
        pattern(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    )]
    pub event_id: String,
    /// The click's `ttclid`, an ad platform's click id, where it has one.
    pub ttclid: Option<String>,
    /// The click's Google click id, where it has one.
    pub gclid: Option<String>,
    /// The click's Google click id for iOS app campaigns (web to app), where it has one.
    pub gbraid: Option<String>,
    /// The click's Google click id for iOS web campaigns (app to web), where it has one.
    pub wbraid: Option<String>,
    /// Meta's browser id (the `_fbp` cookie) a prelander sent with the click, where it did.
    pub fbp: Option<String>,
    /// The click's Snapchat click id (`ScCid`), where it has one.
    pub sccid: Option<String>,
}

/// The click an event is attributed to, as the feed shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    pub link_slug: Option<String>,
    pub fbclid: Option<String>,
    pub campaign_name: Option<String>,
    pub clicked_at_ms: u64,
    pub tg_id: Option<u64>,
    pub ids: crate::domain::click::ClickIds,
}

/// The `fbc` value Meta's Conversions API takes for a click: `fb.1.<clicked_at_ms>.<fbclid>`.
#[must_use]
pub fn fbc(clicked_at_ms: u64, fbclid: &str) -> String {
    format!("fb.1.{clicked_at_ms}.{fbclid}")
}

impl FeedEvent {
    /// Fills in the attribution fields from the event's click, if it has one.
    pub fn attribute(&mut self, click: Option<Attribution>) {
        self.matched = click.is_some();
        if let Some(c) = click {
            self.fbc = c.fbclid.as_deref().map(|f| fbc(c.clicked_at_ms, f));
            self.link_slug = c.link_slug;
            self.fbclid = c.fbclid;
            self.campaign_name = c.campaign_name;
            self.clicked_at_ms = Some(c.clicked_at_ms);
            self.tg_id = c.tg_id;
            self.ttclid = c.ids.owned("ttclid");
            self.gclid = c.ids.owned("gclid");
            self.gbraid = c.ids.owned("gbraid");
            self.wbraid = c.ids.owned("wbraid");
            self.sccid = c.ids.owned("sccid");
            self.fbp = c.ids.fbp;
        }
    }
}

/// One page of the feed. `next` is where the following page starts; `None` when this page
/// reached the end of what is committed now (resume then from the last event's `inbox_id`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedPage {
    pub events: Vec<FeedEvent>,
    pub next: Option<String>,
}

/// Which page to read: after which `inbox_id` (0: from the start), and at most how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    pub after: u64,
    pub limit: usize,
}

impl PageRequest {
    /// Reads `after` and `limit` as the caller sent them (absent: `None`).
    pub fn parse(after: Option<&str>, limit: Option<&str>) -> Result<PageRequest, Error> {
        let after = match after {
            None => 0,
            Some(text) => parse_id(text).ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "after",
                    format!(
                        "after must be an inbox_id from this feed (a decimal number), got {}",
                        crate::domain::input::quoted(text)
                    ),
                )
            })?,
        };
        let limit = match limit {
            None => DEFAULT_PAGE,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_PAGE).contains(n))
                .ok_or_else(|| {
                    Error::field(
                        Code::InvalidField,
                        "limit",
                        format!(
                            "limit must be a whole number from 1 to {MAX_PAGE}, got {}",
                            crate::domain::input::quoted(text)
                        ),
                    )
                })?,
        };
        Ok(PageRequest { after, limit })
    }
}

/// The seconds `GET /events/wait` may wait: `timeout_s`, 0..=60, default 30.
pub fn parse_wait(timeout_s: Option<&str>) -> Result<u64, Error> {
    match timeout_s {
        None => Ok(DEFAULT_WAIT_S),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= MAX_WAIT_S)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "timeout_s",
                    format!(
                        "timeout_s must be a whole number of seconds from 0 to {MAX_WAIT_S}, got {}",
                        crate::domain::input::quoted(text)
                    ),
                )
            }),
    }
}

/// An `inbox_id` as written: decimal digits only, no sign, no leading `+`.
fn parse_id(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The error for a cursor that names no event of the space (another space's, or made up).
#[must_use]
pub fn foreign_cursor(after: u64) -> Error {
    Error::field(
        Code::InvalidField,
        "after",
        format!(
            "after={after} is not an event of this space; resume from the `next` of a page of \
             this space's feed, or from an inbox_id it showed"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fbc_is_metas_format() {
        assert_eq!(
            fbc(1_700_000_000_123, "IwAR1x"),
            "fb.1.1700000000123.IwAR1x"
        );
    }

    #[test]
    fn limit_bounds() {
        let limit = |l| PageRequest::parse(None, Some(l)).map(|p| p.limit);
        assert_eq!(limit("1"), Ok(1));
        assert_eq!(limit("1000"), Ok(1000));
        assert_eq!(limit("0").unwrap_err().field, Some("limit"));
        assert_eq!(limit("1001").unwrap_err().field, Some("limit"));
        assert_eq!(limit("-1").unwrap_err().field, Some("limit"));
        assert_eq!(PageRequest::parse(None, None).unwrap().limit, DEFAULT_PAGE);
    }

    #[test]
    fn after_is_a_plain_decimal_id() {
        let after = |a| PageRequest::parse(Some(a), None).map(|p| p.after);
        assert_eq!(after("0"), Ok(0));
        assert_eq!(after("18446744073709551615"), Ok(u64::MAX));
        for bad in ["18446744073709551616", "-1", "+1", "1.0", "abc", " 1"] {
            assert_eq!(after(bad).unwrap_err().code, Code::InvalidField, "{bad}");
        }
    }

    #[test]
    fn wait_bounds() {
        assert_eq!(parse_wait(Some("0")), Ok(0));
        assert_eq!(parse_wait(Some("60")), Ok(60));
        assert_eq!(parse_wait(None), Ok(DEFAULT_WAIT_S));
        assert_eq!(parse_wait(Some("61")).unwrap_err().field, Some("timeout_s"));
        assert!(parse_wait(Some("1.5")).is_err());
    }
}

/// Which events the admin page's feed shows: of one kind, of one campaign, of one `uid`, of one
/// Telegram user; every one given must hold. Each is checked by the rule of its field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedFilter {
    pub kind: Option<crate::domain::event::EventKind>,
    pub campaign: Option<String>,
    pub uid: Option<String>,
    pub tg_id: Option<u64>,
}

impl FeedFilter {
    /// From the page's query: `kind`, `campaign`, `uid`, `tg` (absent or empty: any).
    pub fn parse(
        kind: Option<&str>,
        campaign: Option<&str>,
        uid: Option<&str>,
        tg: Option<&str>,
    ) -> Result<FeedFilter, Error> {
        let kind = kind
            .map(|k| {
                crate::domain::event::EventKind::from_name(k).ok_or_else(|| {
                    Error::field(
                        Code::InvalidField,
                        "kind",
                        format!(
                            "kind is contact, subscribed, registration or deposit, got {}",
                            crate::domain::input::quoted(k)
                        ),
                    )
                })
            })
            .transpose()?;
        Ok(FeedFilter {
            kind,
            campaign: campaign.map(str::to_owned),
            uid: uid
                .map(|u| crate::domain::uid::check(u.to_owned(), "uid"))
                .transpose()?,
            tg_id: tg
                .map(|t| crate::domain::click::parse_tg_id(t, "tg"))
                .transpose()?,
        })
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == FeedFilter::default()
    }

    #[must_use]
    pub fn matches(&self, e: &FeedEvent) -> bool {
        self.kind.is_none_or(|k| e.event == k.as_str())
            && self
                .campaign
                .as_ref()
                .is_none_or(|c| e.campaign_name.as_ref() == Some(c))
            && self.uid.as_ref().is_none_or(|u| e.uid.as_ref() == Some(u))
            && self.tg_id.is_none_or(|t| e.tg_id == Some(t))
    }
}
