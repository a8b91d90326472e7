//! The read side of conversions out, on a reader's [`Snapshot`]: a space's destinations with
//! their counts, its deliveries as `GET /deliveries` shows them, what a destination's sender
//! may try now ([`due`]), and the events a Google Ads destination's file is made of.

use crate::domain::click::AD_CLICK_IDS;
use std::net::IpAddr;
use std::ops::Bound;

use redb::ReadableTable;

use crate::domain::click::ClientHints;
use crate::domain::feed::FeedEvent;
use crate::platform::{
    DeliveryQuery, DeliveryView, Destination, DestinationView, Kind, Sending, State, StateCounts,
};
use crate::storage::error::StoreError;
use crate::storage::read::{self, Snapshot};
use crate::storage::records::{
    self, ClickHintsRecord, ClickRecord, DeliveryRecord, DestinationRecord, EventRecord,
};
use crate::storage::schema::{
    CLICK_HINTS, CLICKS, DELIVERIES, DELIVERY_QUEUE, DELIVERY_STATES, DESTINATIONS, INBOX,
};

use crate::storage::destinations::destination_rows::{
    DEAD, last_error_of, live_destinations, no_destination, stored_state,
};

impl Snapshot {
    /// The live destinations of `space`, oldest first, each with its counts and last failure.
    pub fn destinations(&self, space: u32) -> Result<Vec<DestinationView>, StoreError> {
        let states = self.txn().open_table(DELIVERY_STATES)?;
        live_destinations(&self.txn().open_table(DESTINATIONS)?, Some(space))?
            .iter()
            .map(|d| {
                let state = stored_state(&states, d.no)?;
                Ok(DestinationView::new(
                    d,
                    StateCounts::of_stored(state.counts, d.paused.is_some()),
                    last_error_of(state.last_error),
                ))
            })
            .collect()
    }

    /// The events of `space` that occurred at `since_ms` or later whose click has a Google click id,
    /// oldest first, with their clicks joined: what a Google Ads destination's file is made of.
    /// The inbox is read newest first and no further back than the first event received before
    /// `since_ms`, so the read is bounded by the window, not by the file.
    pub fn google_conversions(
        &self,
        space: u32,
        since_ms: u64,
    ) -> Result<Vec<FeedEvent>, StoreError> {
        let inbox = self.txn().open_table(INBOX)?;
        let mut out = Vec::new();
        for entry in inbox.range((space, 0)..=(space, u64::MAX))?.rev() {
            let (key, bytes) = entry?;
            let record: EventRecord = records::decode(bytes.value())?;
            if record.received_at_ms < since_ms {
                break;
            }
            if record.occurred_at_ms < since_ms || record.uid.is_none() {
                continue;
            }
            let event = read::feed_event(self, space, key.value().1, record)?;
            if event.gclid.is_some() || event.gbraid.is_some() || event.wbraid.is_some() {
                out.push(event);
            }
        }
        out.reverse();
        Ok(out)
    }

    /// The deliveries of `space` that `query` asks for, newest event first: each destination's
    /// (removed ones included, their open deliveries shown `cancelled`), merged.
    pub fn deliveries(
        &self,
        space: u32,
        query: &DeliveryQuery,
    ) -> Result<Vec<DeliveryView>, StoreError> {
        let table = self.txn().open_table(DESTINATIONS)?;
        let states = self.txn().open_table(DELIVERY_STATES)?;
        let deliveries = self.txn().open_table(DELIVERIES)?;
        let queue = self.txn().open_table(DELIVERY_QUEUE)?;
        let mut found = false;
        let mut out: Vec<(u64, DeliveryView)> = Vec::new();
        for entry in table.iter()? {
            let (no, bytes) = entry?;
            let no = no.value();
            let record: DestinationRecord = records::decode(bytes.value())?;
            if record.space_no != space
                || query
                    .destination
                    .as_ref()
                    .is_some_and(|n| *n != record.name)
            {
                continue;
            }
            let (removed, paused) = (
                record.removed_at_ms.is_some(),
                record.paused_at_ms.is_some(),
            );
            if query.destination.is_some() && removed {
                continue;
            }
            found = true;
            let sent_through = stored_state(&states, no)?.sent_through;
            // A removed destination's open deliveries are cancelled; a paused one's wait.
            let open_shown = match (removed, paused) {
                (true, _) => Some(State::Cancelled),
                (false, true) => Some(State::Paused),
                (false, false) => None,
            };
            let view = |inbox_id: u64, stored: &[u8]| {
                delivery_view(&record.name, inbox_id, stored, open_shown)
            };
            let mut taken = 0;
            if query.state == Some(State::Dead) && !removed {
                for entry in queue
                    .range((no, DEAD, 0)..=(no, DEAD, u64::MAX))?
                    .rev()
                    .take(query.limit)
                {
                    let inbox_id = entry?.0.value().2;
                    if let Some(bytes) = deliveries.get((no, inbox_id))? {
                        out.push((inbox_id, view(inbox_id, bytes.value())?));
                    }
                }
                continue;
            }
            let start = if query.state == Some(State::Pending) && !removed {
                Bound::Excluded((no, sent_through))
            } else {
                Bound::Included((no, 0))
            };
            for entry in deliveries
                .range::<(u32, u64)>((start, Bound::Included((no, u64::MAX))))?
                .rev()
                .take(SCAN_LIMIT)
            {
                let (key, bytes) = entry?;
                let inbox_id = key.value().1;
                let v = view(inbox_id, bytes.value())?;
                if query.state.is_none_or(|want| want == v.state) {
                    out.push((inbox_id, v));
                    taken += 1;
                    if taken == query.limit {
                        break;
                    }
                }
            }
        }
        if let (Some(name), false) = (&query.destination, found) {
            return Err(no_destination(name));
        }
        out.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| a.1.destination.cmp(&b.1.destination))
        });
        out.truncate(query.limit);
        let inbox = self.txn().open_table(INBOX)?;
        out.into_iter()
            .map(|(inbox_id, mut v)| {
                if let Some(bytes) = inbox.get((space, inbox_id))? {
                    let record: EventRecord = records::decode(bytes.value())?;
                    v.event_id = Some(self.event_id(&record, inbox_id)?.to_string());
                }
                Ok(v)
            })
            .collect()
    }

    /// Up to `limit` deliveries of `destination` that may be tried at `now_ms`.
    pub fn due(
        &self,
        destination: &Destination,
        now_ms: u64,
        limit: usize,
    ) -> Result<DueBatch, StoreError> {
        let no = destination.no;
        let queue = self.txn().open_table(DELIVERY_QUEUE)?;
        let deliveries = self.txn().open_table(DELIVERIES)?;
        let inbox = self.txn().open_table(INBOX)?;
        let hints = self.txn().open_table(CLICK_HINTS)?;
        let sent_through = stored_state(&self.txn().open_table(DELIVERY_STATES)?, no)?.sent_through;
        let mut batch = DueBatch::default();
        let mut ids = Vec::new();
        for entry in queue.range((no, 0, 0)..(no, DEAD, 0))? {
            let (due_ms, inbox_id) = {
                let (k, ()) = (entry?.0.value(), ());
                (k.1, k.2)
            };
            if due_ms > now_ms {
                batch.next_due_ms = Some(due_ms);
                break;
            }
            if ids.len() == limit {
                break;
            }
            ids.push(inbox_id);
        }
        if ids.len() < limit {
            for entry in deliveries
                .range((no, sent_through.saturating_add(1))..=(no, u64::MAX))?
                .take(limit - ids.len())
            {
                let inbox_id = entry?.0.value().1;
                ids.push(inbox_id);
                batch.sent_through = Some(inbox_id);
            }
        }
        // An ad platform matches an event to its ads by the visitor's hints too.
        let want_hints = matches!(destination.target.sending(), Sending::Together { .. });
        let want_query = destination.target.kind() == Kind::Postback;
        let clicks = self.txn().open_table(CLICKS)?;
        for inbox_id in ids {
            let Some(bytes) = inbox.get((destination.space, inbox_id))? else {
                return Err(StoreError::Corrupt(format!(
                    "delivery of destination {no} names event {inbox_id}, which the inbox lacks"
                )));
            };
            let record: EventRecord = records::decode(bytes.value())?;
            let event = read::feed_event(self, destination.space, inbox_id, record)?;
            let hints = match (&event.uid, want_hints) {
                (Some(uid), true) => match hints.get((destination.space, uid.as_str()))? {
                    Some(bytes) => hints_of(&records::decode(bytes.value())?),
                    None => None,
                },
                _ => None,
            };
            let click_query = match (&event.uid, want_query) {
                (Some(uid), true) => match clicks.get((destination.space, uid.as_str()))? {
                    Some(bytes) => click_query(&records::decode::<ClickRecord>(bytes.value())?),
                    None => None,
                },
                _ => None,
            };
            batch.items.push(Due {
                inbox_id,
                event,
                hints,
                click_query,
            });
        }
        Ok(batch)
    }
}

/// The most delivery rows one `GET /deliveries` looks at per destination, so that a filter that
/// matches little of a long history answers in bounded time.
const SCAN_LIMIT: usize = 100_000;

/// A delivery's row as `GET /deliveries` shows it (an empty row: pending); an open one shown
/// as `open_shown` when its destination says so (removed, paused).
fn delivery_view(
    destination: &str,
    inbox_id: u64,
    stored: &[u8],
    open_shown: Option<State>,
) -> Result<DeliveryView, StoreError> {
    let mut v = DeliveryView {
        inbox_id: inbox_id.to_string(),
        event_id: None,
        destination: destination.to_owned(),
        state: State::Pending,
        attempts: 0,
        last_attempt_at_ms: None,
        next_attempt_at_ms: None,
        last_status: None,
        last_answer: None,
    };
    if !stored.is_empty() {
        let r: DeliveryRecord = records::decode(stored)?;
        v.state = State::from_u8(r.state).ok_or_else(|| {
            StoreError::Corrupt(format!("delivery {inbox_id} has state {}", r.state))
        })?;
        v.attempts = r.attempts;
        v.last_attempt_at_ms = Some(r.last_attempt_ms);
        v.next_attempt_at_ms = r.next_attempt_ms;
        v.last_status = (r.last_status > 0).then_some(r.last_status);
        v.last_answer = Some(r.last_answer);
    }
    if let (true, Some(shown)) = (v.state.is_open(), open_shown) {
        v.state = shown;
        v.next_attempt_at_ms = None;
    }
    Ok(v)
}

/// One delivery the sender may try now.
#[derive(Clone, Debug)]
pub struct Due {
    pub inbox_id: u64,
    /// The event as the feed shows it, with its click.
    pub event: FeedEvent,
    /// The visitor's hints of its click, where kept (for Meta).
    pub hints: Option<ClientHints>,
    /// The query its click's link was visited with (for a postback's `{q.NAME}`).
    pub click_query: Option<String>,
}

/// What the sender of a destination may try now: due retries first, then pending deliveries;
/// and the last pending one taken (its `sent_through` once recorded).
#[derive(Clone, Debug, Default)]
pub struct DueBatch {
    pub items: Vec<Due>,
    pub sent_through: Option<u64>,
    /// When the earliest retry not yet due is due, if any.
    pub next_due_ms: Option<u64>,
}

/// The query `{q.NAME}` reads for a click: the visit's query as kept, with the click ids the
/// visit took out of it into fields of their own (`fbclid`, `gclid`, ...) put back after it.
fn click_query(c: &ClickRecord) -> Option<String> {
    let ids = std::iter::once(("fbclid", c.fbclid.as_deref()))
        .chain(AD_CLICK_IDS.iter().map(|id| (id.param, c.ids.get(id.name))));
    let mut query = url::form_urlencoded::Serializer::new(c.raw_query.clone().unwrap_or_default());
    for (name, id) in ids {
        if let Some(id) = id {
            query.append_pair(name, id);
        }
    }
    Some(query.finish()).filter(|q| !q.is_empty())
}

fn hints_of(r: &ClickHintsRecord) -> Option<ClientHints> {
    let ip = match r.ip.len() {
        0 => None,
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(r.ip.as_slice()).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(r.ip.as_slice()).ok()?)),
        _ => return None,
    };
    Some(ClientHints {
        ip,
        user_agent: r.user_agent.clone(),
        fbc: r.fbc.clone(),
    })
}
