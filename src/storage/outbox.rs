//! Conversions out in the data file (`docs/api.md#destinations`): destinations, and the outbox
//! of their deliveries, for the writer (methods of [`Txn`]) and the readers alike.
//!
//! An event's deliveries are written in the event's own transaction ([`Txn::enqueue_deliveries`],
//! called by `record_event` for a new event only: a duplicate or a dry run makes none), one key
//! per matching destination with an empty value, appended at the end of that destination's
//! range of `DELIVERIES`. Which destinations match is read from the directory in memory, or,
//! after a change of destinations earlier in the same batch, from the table. The counts per
//! state are kept in one row per destination (`DELIVERY_STATES`), changed in memory through the
//! batch and written once at its end ([`Txn::write_delivery_states`]).
//!
//! The sender (`delivery/`) reads what is due on a snapshot ([`due`]): the retries whose time
//! has come (`DELIVERY_QUEUE`), then the pending deliveries after the destination's
//! `sent_through`. It records what each attempt came to through the writer
//! ([`Txn::record_attempts`]), and only then does a delivery leave `pending` or `retrying`: a
//! crash before that commit sends it again.
//!
//! Removing a destination rewrites none of its deliveries: its open ones count as `cancelled`
//! from then on (their rows keep the state they had; a reader shows them cancelled), so a
//! removal is one small write however many deliveries wait.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Bound;
use std::sync::Arc;

use redb::{ReadableTable, Table};

use crate::domain::click::ClientHints;
use crate::domain::currency::CurrencyRates;
use crate::domain::destination::{
    Attempt, ClickFacts, ConversionNames, DeliveryQuery, DeliveryView, Destination,
    DestinationPatch, DestinationView, EventNames, EventSet, Fetches, Google, Kind, LastError,
    MAX_DESTINATIONS, Meta, MetaRules, NewDestination, PasswordDigest, Paused, PreviousSecret,
    Secret, State, StateCounts, Statuses, Target, Tiktok, new_password, next_state,
};
use crate::domain::event::EventKind;
use crate::domain::feed::FeedEvent;
use crate::error::{Code, Error};
use crate::storage::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::{self, Snapshot};
use crate::storage::records::{
    self, ClickHintsRecord, ClickRecord, DeliveryRecord, DeliveryStateRecord, DestinationRecord,
    EventRecord, LastErrorRecord,
};
use crate::storage::schema::{
    CLICK_HINTS, CLICKS, DELIVERIES, DELIVERY_QUEUE, DELIVERY_STATES, DESTINATIONS, INBOX,
    META_DESTINATION_SEQ,
};

/// `DELIVERY_QUEUE`'s due time of a dead delivery: never, until a retry is asked for.
const DEAD: u64 = u64::MAX;

/// The state row of destination `no`: this batch's, or the stored one, or a new one.
fn state_of<'b>(
    states: &'b mut HashMap<u32, DeliveryStateRecord>,
    table: &Table<'_, u32, &'static [u8]>,
    no: u32,
) -> Result<&'b mut DeliveryStateRecord, StoreError> {
    Ok(match states.entry(no) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(match table.get(no)? {
            Some(bytes) => records::decode(bytes.value())?,
            None => DeliveryStateRecord::default(),
        }),
    })
}

fn counts_mut(state: &mut DeliveryStateRecord) -> StateCountsMut<'_> {
    StateCountsMut(&mut state.counts)
}

/// A state row's counts, moved one delivery at a time.
struct StateCountsMut<'a>(&'a mut [u64; 5]);

impl StateCountsMut<'_> {
    fn moved(&mut self, from: Option<State>, to: State, totals: &mut [i64; 5]) {
        if let Some(from) = from {
            self.0[from as usize] = self.0[from as usize].saturating_sub(1);
        }
        self.0[to as usize] += 1;
        if let Some(from) = from {
            totals[from as usize] -= 1;
        }
        totals[to as usize] += 1;
    }
}

impl Txn<'_> {
    /// The destinations of `space` that take an event of `kind` (with `click`, its resolved
    /// click's facts), each one's state row read and decoded now: everything enqueuing reads, so
    /// that the event's writes, which come after, cannot stop halfway on a damaged row.
    pub(crate) fn deliveries_for(
        &mut self,
        space: u32,
        kind: EventKind,
        click: Option<ClickFacts>,
    ) -> Result<Vec<u32>, StoreError> {
        let list: Arc<[Arc<Destination>]> = if self.outbox.changed {
            if !self.outbox.read_since_change.contains_key(&space) {
                let live = live_destinations(&self.destinations, Some(space))?;
                self.outbox
                    .read_since_change
                    .insert(space, live.into_iter().map(Arc::new).collect());
            }
            Arc::from(self.outbox.read_since_change[&space].as_slice())
        } else {
            match self.directory.of_space(space) {
                Some(list) => list,
                None => return Ok(Vec::new()),
            }
        };
        let mut wanted = Vec::new();
        for d in list.iter().filter(|d| d.wants(kind, click)) {
            state_of(&mut self.outbox.states, &self.delivery_states, d.no)?;
            wanted.push(d.no);
        }
        Ok(wanted)
    }

    /// New event `inbox_id`'s deliveries to `wanted` ([`Txn::deliveries_for`]), pending, each
    /// counted in its destination's state row.
    pub(crate) fn enqueue_deliveries(
        &mut self,
        inbox_id: u64,
        wanted: &[u32],
    ) -> Result<(), StoreError> {
        for &no in wanted {
            self.deliveries.insert((no, inbox_id), &[][..])?;
            let state = state_of(&mut self.outbox.states, &self.delivery_states, no)?;
            counts_mut(state).moved(None, State::Pending, &mut self.outbox.moved);
        }
        Ok(())
    }

    /// Stores a new destination of `space`; a name taken by a live destination of the space is
    /// refused with `conflict`.
    pub(crate) fn create_destination(
        &mut self,
        space: u32,
        new: &NewDestination,
        now_ms: u64,
    ) -> Result<Destination, StoreError> {
        let live = live_destinations(&self.destinations, Some(space))?;
        if live.len() >= MAX_DESTINATIONS {
            return Err(StoreError::Refused(Error::new(
                Code::Conflict,
                format!(
                    "this space has {MAX_DESTINATIONS} destinations, the most a space has; \
                     remove one first"
                ),
            )));
        }
        if live.iter().any(|d| d.name == new.name) {
            return Err(StoreError::Refused(Error::field(
                Code::Conflict,
                "name",
                format!(
                    "this space has a destination named {:?}; remove it or choose another name",
                    new.name
                ),
            )));
        }
        let no = self
            .meta
            .get(META_DESTINATION_SEQ)?
            .map_or(0, |v| v.value())
            + 1;
        let no = u32::try_from(no)
            .map_err(|_| StoreError::Corrupt("destination numbers exhausted".into()))?;
        self.meta.insert(META_DESTINATION_SEQ, u64::from(no))?;
        let destination = Destination {
            no,
            space,
            name: new.name.clone(),
            events: new.events,
            only_attributed: new.only_attributed,
            target: new.target.clone(),
            created_at_ms: now_ms,
            paused: None,
        };
        self.destinations
            .insert(no, records::encode(&record_of(&destination)).as_slice())?;
        self.destinations_changed();
        Ok(destination)
    }

    /// The destinations the writer and the senders use are read again after this batch.
    fn destinations_changed(&mut self) {
        self.outbox.changed = true;
        self.outbox.read_since_change.clear();
    }

    /// The live destination `name` of `space`.
    fn live_destination(&self, space: u32, name: &str) -> Result<Destination, StoreError> {
        live_destinations(&self.destinations, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| no_destination(name))
    }

    /// Changes destination `name` of `space` by `patch`, checked as a new one is: the same
    /// number, so its deliveries stay its own; a paused destination resumes (its waiting
    /// deliveries are due at once).
    pub(crate) fn change_destination(
        &mut self,
        space: u32,
        name: &str,
        patch: DestinationPatch,
        allow_private: bool,
    ) -> Result<Destination, StoreError> {
        let current = self.live_destination(space, name)?;
        let new = patch
            .apply(&current, allow_private)
            .map_err(StoreError::Refused)?;
        let changed = Destination {
            events: new.events,
            only_attributed: new.only_attributed,
            target: new.target,
            paused: None,
            ..current
        };
        self.destinations
            .insert(changed.no, records::encode(&record_of(&changed)).as_slice())?;
        self.destinations_changed();
        Ok(changed)
    }

    /// Gives webhook `name` of `space` a new signing secret; the one it replaces still signs
    /// until `grace_until_ms`.
    pub(crate) fn rotate_signing_secret(
        &mut self,
        space: u32,
        name: &str,
        new_secret: Secret,
        now_ms: u64,
        grace_until_ms: u64,
    ) -> Result<Destination, StoreError> {
        let mut d = self.live_destination(space, name)?;
        if let Target::GoogleAds(g) = &mut d.target {
            // Google Ads is given the new password by hand, at once: no grace.
            g.set_password(new_password());
            self.destinations
                .insert(d.no, records::encode(&record_of(&d)).as_slice())?;
            self.destinations_changed();
            return Ok(d);
        }
        let Target::Webhook {
            signing_secret,
            previous,
            ..
        } = &mut d.target
        else {
            return Err(StoreError::Refused(Error::new(
                Code::Conflict,
                format!(
                    "{name} is a {} destination; only a webhook has a signing secret and only \
                     google_ads a password",
                    d.target.kind().as_str()
                ),
            )));
        };
        let old = std::mem::replace(signing_secret, new_secret);
        // A secret rotated twice within the grace signs no longer: only the one just replaced
        // does, as the receiver was last given it.
        *previous = Some(PreviousSecret {
            secret: old,
            until_ms: grace_until_ms.max(now_ms),
        });
        self.destinations
            .insert(d.no, records::encode(&record_of(&d)).as_slice())?;
        self.destinations_changed();
        Ok(d)
    }

    /// Records that Google Ads fetched the file of destination `no` at `at_ms` and was served
    /// `rows` rows. A destination removed since is left as it is.
    pub(crate) fn record_fetch(
        &mut self,
        no: u32,
        at_ms: u64,
        rows: u64,
    ) -> Result<(), StoreError> {
        let Some(bytes) = self.destinations.get(no)? else {
            return Ok(());
        };
        let mut record: DestinationRecord = records::decode(bytes.value())?;
        drop(bytes);
        if record.removed_at_ms.is_some() || record.kind != Kind::GoogleAds as u8 {
            return Ok(());
        }
        record.last_fetched_ms = Some(at_ms);
        record.last_fetch_rows = rows;
        record.fetches += 1;
        self.destinations
            .insert(no, records::encode(&record).as_slice())?;
        Ok(())
    }

    /// Removes a live destination of `space`: it sends nothing more, and its open deliveries
    /// count as cancelled. Its row stays, without its credentials.
    pub(crate) fn remove_destination(
        &mut self,
        space: u32,
        name: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let Some(d) = live_destinations(&self.destinations, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
        else {
            return Err(no_destination(name));
        };
        let mut record = record_of(&d);
        record.removed_at_ms = Some(now_ms);
        record.access_token = None;
        record.signing_secret = None;
        record.previous_secret = None;
        record.password_digest = None;
        self.destinations
            .insert(d.no, records::encode(&record).as_slice())?;
        let state = state_of(&mut self.outbox.states, &self.delivery_states, d.no)?;
        for open in [State::Pending, State::Retrying] {
            let n = state.counts[open as usize];
            state.counts[open as usize] = 0;
            state.counts[State::Cancelled as usize] += n;
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            self.outbox.moved[open as usize] -= n;
            self.outbox.moved[State::Cancelled as usize] += n;
        }
        self.destinations_changed();
        Ok(())
    }

    /// Records what `attempts` at deliveries of destination `no` came to: each leaves `pending`
    /// or `retrying` for `delivered`, `retrying` (again, later) or `dead`. `sent_through` is the
    /// last pending delivery the sender took. An attempt at a delivery that is no longer open
    /// (its destination removed, or a stale answer) changes nothing. Answers each attempt's new
    /// state, `None` where nothing changed.
    ///
    /// With `pause` (the remote no longer takes the destination's credential, and says so), the
    /// destination is paused in the same write; answers whether this write paused it.
    pub(crate) fn record_attempts(
        &mut self,
        no: u32,
        attempts: &[Attempt],
        sent_through: Option<u64>,
        max_age_ms: u64,
        pause: Option<Paused>,
    ) -> Result<(Vec<Option<State>>, bool), StoreError> {
        let Some(mut destination) = self
            .destinations
            .get(no)?
            .map(|bytes| records::decode::<DestinationRecord>(bytes.value()))
            .transpose()?
            .filter(|r| r.removed_at_ms.is_none())
        else {
            return Ok((vec![None; attempts.len()], false));
        };
        let mut paused_now = false;
        if let Some(pause) = pause {
            if destination.paused_at_ms.is_none() {
                destination.paused_at_ms = Some(pause.at_ms);
                destination.paused_reason = Some(pause.reason);
                self.destinations
                    .insert(no, records::encode(&destination).as_slice())?;
                self.destinations_changed();
                paused_now = true;
            }
        }
        let mut stored = Vec::with_capacity(attempts.len());
        for a in attempts {
            stored.push(match self.deliveries.get((no, a.inbox_id))? {
                None => None,
                Some(bytes) if bytes.value().is_empty() => Some(None),
                Some(bytes) => Some(Some(records::decode::<DeliveryRecord>(bytes.value())?)),
            });
        }
        let mut results = Vec::with_capacity(attempts.len());
        let mut last_error = None;
        for (a, before) in attempts.iter().zip(stored) {
            let Some(before) = before else {
                results.push(None);
                continue;
            };
            let (from, attempts_before, since, queued_at) = match &before {
                None => (State::Pending, 0, None, None),
                Some(r) => (
                    State::from_u8(r.state).unwrap_or(State::Dead),
                    r.attempts,
                    r.since_ms,
                    r.next_attempt_ms,
                ),
            };
            if !from.is_open() {
                results.push(None);
                continue;
            }
            let tried = attempts_before + 1;
            let since_ms = since.unwrap_or(a.received_at_ms);
            let (to, next) = next_state(a, tried, since_ms, max_age_ms);
            if let Some(due) = queued_at {
                self.delivery_queue.remove((no, due, a.inbox_id))?;
            }
            match to {
                State::Retrying => {
                    let due = next.unwrap_or(a.at_ms);
                    self.delivery_queue.insert((no, due, a.inbox_id), ())?;
                }
                State::Dead => {
                    self.delivery_queue.insert((no, DEAD, a.inbox_id), ())?;
                }
                _ => {}
            }
            let record = DeliveryRecord {
                state: to as u8,
                attempts: tried,
                last_attempt_ms: a.at_ms,
                next_attempt_ms: next,
                since_ms: since,
                last_status: a.status.unwrap_or(0),
                last_answer: a.answer.clone(),
            };
            self.deliveries
                .insert((no, a.inbox_id), records::encode(&record).as_slice())?;
            let state = state_of(&mut self.outbox.states, &self.delivery_states, no)?;
            counts_mut(state).moved(Some(from), to, &mut self.outbox.moved);
            if to != State::Delivered {
                last_error = Some(LastErrorRecord {
                    at_ms: a.at_ms,
                    inbox_id: a.inbox_id,
                    status: a.status.unwrap_or(0),
                    answer: a.answer.clone(),
                });
            }
            results.push(Some(to));
        }
        let state = state_of(&mut self.outbox.states, &self.delivery_states, no)?;
        if let Some(through) = sent_through {
            state.sent_through = state.sent_through.max(through);
        }
        if last_error.is_some() {
            state.last_error = last_error;
        } else if results.contains(&Some(State::Delivered))
            && state.counts[State::Dead as usize] == 0
            && state.counts[State::Retrying as usize] == 0
        {
            // Everything owed was delivered: an old failure would only mislead.
            state.last_error = None;
        }
        Ok((results, paused_now))
    }

    /// Puts up to `limit` dead deliveries of destination `name` of `space` back in the queue,
    /// due now, with `delivery_max_age` counted from now. Answers how many, and whether more
    /// are dead.
    pub(crate) fn retry_dead(
        &mut self,
        space: u32,
        name: &str,
        now_ms: u64,
        limit: usize,
    ) -> Result<(u64, bool), StoreError> {
        let Some(d) = live_destinations(&self.destinations, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
        else {
            return Err(no_destination(name));
        };
        let mut dead = Vec::new();
        for entry in self
            .delivery_queue
            .range((d.no, DEAD, 0)..=(d.no, DEAD, u64::MAX))?
            .take(limit + 1)
        {
            dead.push(entry?.0.value().2);
        }
        let more = dead.len() > limit;
        dead.truncate(limit);
        let mut records = Vec::with_capacity(dead.len());
        for inbox_id in &dead {
            let record = match self.deliveries.get((d.no, *inbox_id))? {
                Some(bytes) if !bytes.value().is_empty() => {
                    records::decode::<DeliveryRecord>(bytes.value())?
                }
                _ => {
                    return Err(StoreError::Corrupt(format!(
                        "the delivery queue names event {inbox_id} of destination {}, which \
                         has no tried delivery",
                        d.no
                    )));
                }
            };
            records.push(record);
        }
        for (inbox_id, mut record) in dead.iter().copied().zip(records) {
            self.delivery_queue.remove((d.no, DEAD, inbox_id))?;
            self.delivery_queue.insert((d.no, now_ms, inbox_id), ())?;
            record.state = State::Retrying as u8;
            record.next_attempt_ms = Some(now_ms);
            record.since_ms = Some(now_ms);
            self.deliveries
                .insert((d.no, inbox_id), records::encode(&record).as_slice())?;
            let state = state_of(&mut self.outbox.states, &self.delivery_states, d.no)?;
            counts_mut(state).moved(Some(State::Dead), State::Retrying, &mut self.outbox.moved);
        }
        Ok((dead.len() as u64, more))
    }

    /// One step of retention: removes up to `limit` visitors' hints of clicks made before
    /// `before_ms`, from space `from` on. A space's hints are in click order (uids begin with
    /// their time), so its old ones are its first. Answers how many it removed, and the space
    /// to go on from (`None`: every space is done).
    pub(crate) fn prune_click_hints(
        &mut self,
        from: u32,
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<u32>), StoreError> {
        let mut old: Vec<(u32, String)> = Vec::new();
        let mut space = Some(from);
        while let Some(s) = space {
            for entry in self.click_hints.range((s, "")..=(s, "\u{10ffff}"))? {
                let (key, bytes) = entry?;
                let record: ClickHintsRecord = records::decode(bytes.value())?;
                if record.clicked_at_ms >= before_ms || old.len() >= limit {
                    break;
                }
                old.push((s, key.value().1.to_owned()));
            }
            if old.len() >= limit {
                break;
            }
            space = match s.checked_add(1) {
                Some(next) => self
                    .click_hints
                    .range((next, "")..)?
                    .next()
                    .transpose()?
                    .map(|(k, _)| k.value().0),
                None => None,
            };
        }
        let removed = old.len() as u64;
        for (s, uid) in old {
            self.click_hints.remove((s, uid.as_str()))?;
        }
        Ok((removed, space))
    }

    /// One step of the deliveries' retention: deletes the rows of `delivered` deliveries last
    /// tried before `before_ms`, and of a destination removed before then its `cancelled` ones
    /// too, looking at up to `limit` rows from `from` (destination, `inbox_id`) on. Dead
    /// deliveries stay, and so do the counts. A destination's rows are in event order, and its
    /// deliveries were mostly tried in that order: its sweep stops at the first row tried since
    /// `before_ms` (a later row delivered earlier, after retries, goes at a later sweep).
    /// Answers how many it deleted, and where to go on (`None`: done).
    pub(crate) fn prune_deliveries(
        &mut self,
        from: (u32, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<(u32, u64)>), StoreError> {
        let mut doomed: Vec<((u32, u64), Option<u64>)> = Vec::new();
        let mut looked = 0;
        let mut cursor = Some(from);
        while let Some((no, after)) = cursor {
            let removed_before = match self.destinations.get(no)? {
                Some(bytes) => records::decode::<DestinationRecord>(bytes.value())?
                    .removed_at_ms
                    .is_some_and(|at| at < before_ms),
                None => false,
            };
            let mut go_on = None;
            for entry in self.deliveries.range((no, after)..=(no, u64::MAX))? {
                let (key, bytes) = entry?;
                let inbox_id = key.value().1;
                if looked == limit {
                    go_on = Some((no, inbox_id));
                    break;
                }
                looked += 1;
                if bytes.value().is_empty() {
                    // Not tried: every later one is pending too.
                    if removed_before {
                        doomed.push(((no, inbox_id), None));
                        continue;
                    }
                    break;
                }
                let r: DeliveryRecord = records::decode(bytes.value())?;
                let state = State::from_u8(r.state).unwrap_or(State::Dead);
                if removed_before && state.is_open() {
                    doomed.push(((no, inbox_id), r.next_attempt_ms));
                } else if r.last_attempt_ms >= before_ms && !removed_before {
                    break;
                } else if state == State::Delivered && r.last_attempt_ms < before_ms {
                    doomed.push(((no, inbox_id), None));
                }
            }
            if go_on.is_some() {
                cursor = go_on;
                break;
            }
            cursor = match no.checked_add(1) {
                Some(next) => self
                    .deliveries
                    .range((next, 0)..)?
                    .next()
                    .transpose()?
                    .map(|(k, _)| (k.value().0, 0)),
                None => None,
            };
        }
        for ((no, inbox_id), queued) in &doomed {
            self.deliveries.remove((*no, *inbox_id))?;
            if let Some(due) = queued {
                self.delivery_queue.remove((*no, *due, *inbox_id))?;
            }
        }
        Ok((doomed.len() as u64, cursor))
    }

    /// Writes the state rows this batch changed.
    pub(crate) fn write_delivery_states(&mut self) -> Result<(), StoreError> {
        for (no, state) in std::mem::take(&mut self.outbox.states) {
            self.delivery_states
                .insert(no, records::encode(&state).as_slice())?;
        }
        Ok(())
    }
}

fn no_destination(name: &str) -> StoreError {
    StoreError::Refused(Error::new(
        Code::NotFound,
        format!("no destination {name:?} in this space"),
    ))
}

/// The stored form of a destination.
fn record_of(d: &Destination) -> DestinationRecord {
    let mut r = DestinationRecord {
        space_no: d.space,
        name: d.name.clone(),
        kind: d.target.kind() as u8,
        events: d.events.0,
        only_attributed: d.only_attributed,
        created_at_ms: d.created_at_ms,
        paused_at_ms: d.paused.as_ref().map(|p| p.at_ms),
        paused_reason: d.paused.as_ref().map(|p| p.reason.clone()),
        ..DestinationRecord::default()
    };
    let pairs = |map: &std::collections::BTreeMap<String, String>| {
        map.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    match &d.target {
        Target::MetaCapi(m) => {
            r.pixel_id = Some(m.pixel_id.clone());
            r.access_token = Some(m.access_token.expose().to_owned());
            r.test_event_code.clone_from(&m.test_event_code);
            r.api_version = Some(m.api_version.clone());
            r.graph_url = Some(m.graph_url.clone());
            r.event_names = pairs(&m.rules.event_names.0);
            r.currency_rates = pairs(&m.rules.currency_rates.shown());
        }
        Target::Postback { url, statuses } => {
            r.url = Some(url.clone());
            r.statuses = pairs(&statuses.0);
        }
        Target::Webhook {
            url,
            signing_secret,
            previous,
        } => {
            r.url = Some(url.clone());
            r.signing_secret = Some(signing_secret.expose().to_owned());
            r.previous_secret = previous.as_ref().map(|p| p.secret.expose().to_owned());
            r.previous_secret_until_ms = previous.as_ref().map(|p| p.until_ms);
        }
        Target::TiktokEvents(t) => {
            r.pixel_id = Some(t.pixel_code.clone());
            r.access_token = Some(t.access_token.expose().to_owned());
            r.test_event_code.clone_from(&t.test_event_code);
            r.graph_url = Some(t.api_url.clone());
            r.event_names = pairs(&t.rules.event_names.0);
            r.currency_rates = pairs(&t.rules.currency_rates.shown());
        }
        Target::GoogleAds(g) => {
            r.conversion_names = pairs(&g.conversion_names.0);
            r.user = Some(g.user.clone());
            r.password_digest = Some(g.password.0);
            r.last_fetched_ms = g.fetches.last_at_ms;
            r.last_fetch_rows = g.fetches.last_rows;
            r.fetches = g.fetches.count;
        }
    }
    r
}

/// A stored destination as the domain sees it; `None` for a removed one.
fn destination_of(no: u32, r: DestinationRecord) -> Result<Option<Destination>, StoreError> {
    if r.removed_at_ms.is_some() {
        return Ok(None);
    }
    let corrupt = |what: &str| {
        StoreError::Corrupt(format!("destination {no} ({:?}) lacks its {what}", r.name))
    };
    let kind = Kind::from_u8(r.kind).ok_or_else(|| corrupt("kind"))?;
    let rules = || -> Result<MetaRules, StoreError> {
        Ok(MetaRules {
            event_names: EventNames(r.event_names.iter().cloned().collect()),
            currency_rates: CurrencyRates::parse(&r.currency_rates.iter().cloned().collect())
                .map_err(|e| {
                    StoreError::Corrupt(format!(
                        "destination {no} ({:?}) has a rate that does not read: {}",
                        r.name, e.message
                    ))
                })?,
        })
    };
    let target = match kind {
        Kind::MetaCapi => Target::MetaCapi(Meta {
            pixel_id: r.pixel_id.clone().ok_or_else(|| corrupt("pixel_id"))?,
            access_token: Secret::new(r.access_token.clone().ok_or_else(|| corrupt("token"))?),
            test_event_code: r.test_event_code.clone(),
            api_version: r
                .api_version
                .clone()
                .ok_or_else(|| corrupt("api_version"))?,
            graph_url: r.graph_url.clone().ok_or_else(|| corrupt("graph_url"))?,
            rules: rules()?,
        }),
        Kind::TiktokEvents => Target::TiktokEvents(Tiktok {
            pixel_code: r.pixel_id.clone().ok_or_else(|| corrupt("pixel code"))?,
            access_token: Secret::new(r.access_token.clone().ok_or_else(|| corrupt("token"))?),
            test_event_code: r.test_event_code.clone(),
            api_url: r.graph_url.clone().ok_or_else(|| corrupt("api_url"))?,
            rules: rules()?,
        }),
        Kind::Postback => Target::Postback {
            url: r.url.clone().ok_or_else(|| corrupt("url"))?,
            statuses: Statuses(r.statuses.iter().cloned().collect()),
        },
        Kind::Webhook => Target::Webhook {
            url: r.url.clone().ok_or_else(|| corrupt("url"))?,
            signing_secret: Secret::new(
                r.signing_secret
                    .clone()
                    .ok_or_else(|| corrupt("signing secret"))?,
            ),
            previous: match (&r.previous_secret, r.previous_secret_until_ms) {
                (Some(secret), Some(until_ms)) => Some(PreviousSecret {
                    secret: Secret::new(secret.clone()),
                    until_ms,
                }),
                _ => None,
            },
        },
        Kind::GoogleAds => Target::GoogleAds(Google {
            conversion_names: ConversionNames(r.conversion_names.iter().cloned().collect()),
            user: r.user.clone().ok_or_else(|| corrupt("user"))?,
            password: PasswordDigest(r.password_digest.ok_or_else(|| corrupt("password"))?),
            new_password: None,
            fetches: Fetches {
                last_at_ms: r.last_fetched_ms,
                last_rows: r.last_fetch_rows,
                count: r.fetches,
            },
        }),
    };
    let paused = r.paused_at_ms.map(|at_ms| Paused {
        at_ms,
        reason: r.paused_reason.clone().unwrap_or_default(),
    });
    Ok(Some(Destination {
        no,
        space: r.space_no,
        name: r.name,
        events: EventSet(r.events),
        only_attributed: r.only_attributed,
        target,
        created_at_ms: r.created_at_ms,
        paused,
    }))
}

/// The live destinations of `space` (of every space: `None`), oldest first.
fn live_destinations(
    table: &impl ReadableTable<u32, &'static [u8]>,
    space: Option<u32>,
) -> Result<Vec<Destination>, StoreError> {
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (no, bytes) = entry?;
        let record: DestinationRecord = records::decode(bytes.value())?;
        if space.is_some_and(|s| s != record.space_no) {
            continue;
        }
        if let Some(d) = destination_of(no.value(), record)? {
            out.push(d);
        }
    }
    Ok(out)
}

/// Every live destination of the file: what the directory holds.
pub fn all_destinations(txn: &redb::ReadTransaction) -> Result<Vec<Destination>, StoreError> {
    live_destinations(&txn.open_table(DESTINATIONS)?, None)
}

/// The deliveries of every destination in each state: the totals of `/metrics`.
pub fn state_totals(txn: &redb::ReadTransaction) -> Result<[u64; 5], StoreError> {
    let mut totals = [0; 5];
    for entry in txn.open_table(DELIVERY_STATES)?.iter()? {
        let record: DeliveryStateRecord = records::decode(entry?.1.value())?;
        for (t, n) in totals.iter_mut().zip(record.counts) {
            *t += n;
        }
    }
    Ok(totals)
}

fn stored_state(
    table: &impl ReadableTable<u32, &'static [u8]>,
    no: u32,
) -> Result<DeliveryStateRecord, StoreError> {
    Ok(match table.get(no)? {
        Some(bytes) => records::decode(bytes.value())?,
        None => DeliveryStateRecord::default(),
    })
}

fn last_error_of(r: Option<LastErrorRecord>) -> Option<LastError> {
    r.map(|e| LastError {
        at_ms: e.at_ms,
        inbox_id: (e.inbox_id > 0).then(|| e.inbox_id.to_string()),
        status: (e.status > 0).then_some(e.status),
        answer: e.answer,
    })
}

/// The live destinations of `space`, oldest first, each with its counts and last failure.
pub fn destinations(s: &Snapshot, space: u32) -> Result<Vec<DestinationView>, StoreError> {
    let states = s.txn().open_table(DELIVERY_STATES)?;
    live_destinations(&s.txn().open_table(DESTINATIONS)?, Some(space))?
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
    s: &Snapshot,
    space: u32,
    since_ms: u64,
) -> Result<Vec<FeedEvent>, StoreError> {
    let inbox = s.txn().open_table(INBOX)?;
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
        let event = read::feed_event(s, space, key.value().1, record)?;
        if event.gclid.is_some() || event.gbraid.is_some() || event.wbraid.is_some() {
            out.push(event);
        }
    }
    out.reverse();
    Ok(out)
}

/// The most delivery rows one `GET /deliveries` looks at per destination, so that a filter that
/// matches little of a long history answers in bounded time.
const SCAN_LIMIT: usize = 100_000;

/// The deliveries of `space` that `query` asks for, newest event first: each destination's
/// (removed ones included, their open deliveries shown `cancelled`), merged.
pub fn deliveries(
    s: &Snapshot,
    space: u32,
    query: &DeliveryQuery,
) -> Result<Vec<DeliveryView>, StoreError> {
    let table = s.txn().open_table(DESTINATIONS)?;
    let states = s.txn().open_table(DELIVERY_STATES)?;
    let deliveries = s.txn().open_table(DELIVERIES)?;
    let queue = s.txn().open_table(DELIVERY_QUEUE)?;
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
    Ok(out.into_iter().map(|(_, v)| v).collect())
}

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

/// Up to `limit` deliveries of `destination` that may be tried at `now_ms`.
pub fn due(
    s: &Snapshot,
    destination: &Destination,
    now_ms: u64,
    limit: usize,
) -> Result<DueBatch, StoreError> {
    let no = destination.no;
    let queue = s.txn().open_table(DELIVERY_QUEUE)?;
    let deliveries = s.txn().open_table(DELIVERIES)?;
    let inbox = s.txn().open_table(INBOX)?;
    let hints = s.txn().open_table(CLICK_HINTS)?;
    let sent_through = stored_state(&s.txn().open_table(DELIVERY_STATES)?, no)?.sent_through;
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
    let want_hints = matches!(
        destination.target.kind(),
        Kind::MetaCapi | Kind::TiktokEvents
    );
    let want_query = destination.target.kind() == Kind::Postback;
    let clicks = s.txn().open_table(CLICKS)?;
    for inbox_id in ids {
        let Some(bytes) = inbox.get((destination.space, inbox_id))? else {
            return Err(StoreError::Corrupt(format!(
                "delivery of destination {no} names event {inbox_id}, which the inbox lacks"
            )));
        };
        let record: EventRecord = records::decode(bytes.value())?;
        let event = read::feed_event(s, destination.space, inbox_id, record)?;
        let hints = match (&event.uid, want_hints) {
            (Some(uid), true) => match hints.get((destination.space, uid.as_str()))? {
                Some(bytes) => hints_of(&records::decode(bytes.value())?),
                None => None,
            },
            _ => None,
        };
        let click_query = match (&event.uid, want_query) {
            (Some(uid), true) => match clicks.get((destination.space, uid.as_str()))? {
                Some(bytes) => records::decode::<ClickRecord>(bytes.value())?.raw_query,
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
