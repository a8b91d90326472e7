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
use std::sync::Arc;

use redb::{ReadableTable, Table};

use crate::domain::event::EventKind;
use crate::error::{Code, Error};
use crate::platform::{
    Attempt, ClickFacts, Destination, DestinationPatch, MAX_DESTINATIONS, MaxAge, NewDestination,
    NotSent, Outcome, Paused, PreviousSecret, Secret, State, Target, Webhook, new_password,
    next_state,
};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::records::{
    self, ClickHintsRecord, DeliveryRecord, DeliveryStateRecord, DestinationRecord, LastErrorRecord,
};
use crate::storage::schema::META_DESTINATION_SEQ;

use crate::storage::destinations::destination_rows::{
    DEAD, destination_of, live_destinations, no_destination, record_of,
};
pub use crate::storage::destinations::destination_rows::{all_destinations, state_totals};
pub use crate::storage::destinations::outbox_read::Due;

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
                let live = live_destinations(&*self.destinations.open()?, Some(space))?;
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
            state_of(
                &mut self.outbox.states,
                &*self.delivery_states.open()?,
                d.no,
            )?;
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
            self.deliveries.open()?.insert((no, inbox_id), &[][..])?;
            let state = state_of(&mut self.outbox.states, &*self.delivery_states.open()?, no)?;
            counts_mut(state).moved(None, State::Pending, &mut self.outbox.moved);
        }
        Ok(())
    }

    /// Stores a new destination of `space`; a name taken by a live destination of the space is
    /// refused with `conflict`.
    pub fn create_destination(
        &mut self,
        space: u32,
        new: &NewDestination,
        now_ms: u64,
    ) -> Result<Destination, StoreError> {
        let live = live_destinations(&*self.destinations.open()?, Some(space))?;
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
            .open()?
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
    fn live_destination(&mut self, space: u32, name: &str) -> Result<Destination, StoreError> {
        live_destinations(&*self.destinations.open()?, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| no_destination(name))
    }

    /// Changes destination `name` of `space` by `patch`, checked as a new one is: the same
    /// number, so its deliveries stay its own; a paused destination resumes (its waiting
    /// deliveries are due at once).
    pub fn change_destination(
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
            .open()?
            .insert(changed.no, records::encode(&record_of(&changed)).as_slice())?;
        self.destinations_changed();
        Ok(changed)
    }

    /// Gives webhook `name` of `space` a new signing secret; the one it replaces still signs
    /// until `grace_until_ms`.
    pub fn rotate_signing_secret(
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
                .open()?
                .insert(d.no, records::encode(&record_of(&d)).as_slice())?;
            self.destinations_changed();
            return Ok(d);
        }
        let Target::Webhook(Webhook {
            signing_secret,
            previous,
            ..
        }) = &mut d.target
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
            .open()?
            .insert(d.no, records::encode(&record_of(&d)).as_slice())?;
        self.destinations_changed();
        Ok(d)
    }

    /// Records that Google Ads fetched a file of destination `no` at `at_ms` and was served
    /// `rows` rows, `not_sent` left out. A destination removed since is left as it is.
    pub fn record_fetch(
        &mut self,
        no: u32,
        at_ms: u64,
        rows: u64,
        not_sent: NotSent,
    ) -> Result<(), StoreError> {
        let Some(bytes) = self.destinations.open()?.get(no)? else {
            return Ok(());
        };
        let mut record: DestinationRecord = records::decode(bytes.value())?;
        drop(bytes);
        let Some(Target::GoogleAds(google)) = &mut record.settings else {
            return Ok(());
        };
        google.fetches.last_at_ms = Some(at_ms);
        google.fetches.last_rows = rows;
        google.fetches.count += 1;
        google.fetches.last_not_sent = not_sent;
        self.destinations
            .open()?
            .insert(no, records::encode(&record).as_slice())?;
        Ok(())
    }

    /// Removes a live destination of `space`: it sends nothing more, and its open deliveries
    /// count as cancelled. Its row stays, without its credentials.
    pub fn remove_destination(
        &mut self,
        space: u32,
        name: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let Some(d) = live_destinations(&*self.destinations.open()?, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
        else {
            return Err(no_destination(name));
        };
        let mut record = record_of(&d);
        record.removed_at_ms = Some(now_ms);
        record.settings = None;
        // Its state row decoded before the first write (the module's rule).
        let state = state_of(
            &mut self.outbox.states,
            &*self.delivery_states.open()?,
            d.no,
        )?;
        self.destinations
            .open()?
            .insert(d.no, records::encode(&record).as_slice())?;
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
    /// destination is paused in the same write, unless it was changed since it was sent with
    /// (its `Destination` in `pause`): a new token given while the refused request was on its
    /// way is not paused by the old one's refusal, and its held deliveries are due at once.
    /// Answers whether this write paused it.
    pub fn record_attempts(
        &mut self,
        no: u32,
        attempts: &[Attempt],
        sent_through: Option<u64>,
        age: MaxAge,
        pause: Option<(Paused, &Destination)>,
    ) -> Result<(Vec<Option<State>>, bool), StoreError> {
        let Some(mut destination) = self
            .destinations
            .open()?
            .get(no)?
            .map(|bytes| records::decode::<DestinationRecord>(bytes.value()))
            .transpose()?
            .filter(|r| r.removed_at_ms.is_none())
        else {
            return Ok((vec![None; attempts.len()], false));
        };
        // Every read and decode before the first write (the module's rule): the deliveries, and
        // the destination's state row, which `state_of` keeps for the rest of the batch.
        let mut stored = Vec::with_capacity(attempts.len());
        for a in attempts {
            stored.push(match self.deliveries.open()?.get((no, a.inbox_id))? {
                None => None,
                Some(bytes) if bytes.value().is_empty() => Some(None),
                Some(bytes) => Some(Some(records::decode::<DeliveryRecord>(bytes.value())?)),
            });
        }
        state_of(&mut self.outbox.states, &*self.delivery_states.open()?, no)?;
        let paused_now = match pause {
            Some((pause, sent_with)) => self.pause(no, &mut destination, pause, sent_with)?,
            None => false,
        };
        let deliveries = self.deliveries.open()?;
        let queue = self.delivery_queue.open()?;
        let state = state_of(&mut self.outbox.states, &*self.delivery_states.open()?, no)?;
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
            // `delivery_max_age` counts from the first attempt, or the first after a pause (a
            // held attempt leaves none), or a retry by hand: a delivery that waited unsent, its
            // destination paused or its sender busy, is not dead at its first failure.
            let since =
                (a.outcome != Outcome::Held).then(|| since.unwrap_or(a.at_ms).max(age.floor_ms));
            let (to, next) = next_state(a, tried, since.unwrap_or(a.at_ms), age.ms);
            if let Some(due) = queued_at {
                queue.remove((no, due, a.inbox_id))?;
            }
            match to {
                State::Retrying => {
                    let due = next.unwrap_or(a.at_ms);
                    queue.insert((no, due, a.inbox_id), ())?;
                }
                State::Dead => {
                    queue.insert((no, DEAD, a.inbox_id), ())?;
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
            deliveries.insert((no, a.inbox_id), records::encode(&record).as_slice())?;
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

    /// Pauses `destination` (number `no`) for `pause`, unless it is paused already or changed
    /// since it was `sent_with`; answers whether it paused now.
    fn pause(
        &mut self,
        no: u32,
        destination: &mut DestinationRecord,
        pause: Paused,
        sent_with: &Destination,
    ) -> Result<bool, StoreError> {
        if destination.paused_at_ms.is_some() {
            return Ok(false);
        }
        // Changed since the refused request was sent (a new token given meanwhile): not paused
        // by the old one's refusal. Both sides read the same way, so only a change differs.
        let stored = destination_of(no, destination.clone())?.map(|d| record_of(&d));
        if stored != Some(record_of(sent_with)) {
            return Ok(false);
        }
        destination.paused_at_ms = Some(pause.at_ms);
        destination.paused_reason = Some(pause.reason);
        self.destinations
            .open()?
            .insert(no, records::encode(&*destination).as_slice())?;
        self.destinations_changed();
        Ok(true)
    }

    /// Puts up to `limit` dead deliveries of destination `name` of `space`, of events `from` on,
    /// back in the queue, due now, with `delivery_max_age` counted from now. Answers how many,
    /// and the event to go on from when more are dead after them: a caller going through all of
    /// them in steps moves on, and never takes again one that died again meanwhile.
    pub fn retry_dead(
        &mut self,
        space: u32,
        name: &str,
        now_ms: u64,
        from: u64,
        limit: usize,
    ) -> Result<(u64, Option<u64>), StoreError> {
        let Some(d) = live_destinations(&*self.destinations.open()?, Some(space))?
            .into_iter()
            .find(|d| d.name == name)
        else {
            return Err(no_destination(name));
        };
        let mut dead = Vec::new();
        for entry in self
            .delivery_queue
            .open()?
            .range((d.no, DEAD, from)..=(d.no, DEAD, u64::MAX))?
            .take(limit + 1)
        {
            dead.push(entry?.0.value().2);
        }
        let next = (dead.len() > limit).then(|| dead[limit]);
        dead.truncate(limit);
        let mut records = Vec::with_capacity(dead.len());
        for inbox_id in &dead {
            let record = match self.deliveries.open()?.get((d.no, *inbox_id))? {
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
            self.delivery_queue.open()?.remove((d.no, DEAD, inbox_id))?;
            self.delivery_queue
                .open()?
                .insert((d.no, now_ms, inbox_id), ())?;
            record.state = State::Retrying as u8;
            record.next_attempt_ms = Some(now_ms);
            record.since_ms = Some(now_ms);
            self.deliveries
                .open()?
                .insert((d.no, inbox_id), records::encode(&record).as_slice())?;
            let state = state_of(
                &mut self.outbox.states,
                &*self.delivery_states.open()?,
                d.no,
            )?;
            counts_mut(state).moved(Some(State::Dead), State::Retrying, &mut self.outbox.moved);
        }
        Ok((dead.len() as u64, next))
    }

    /// One step of retention: removes up to `limit` visitors' hints of clicks made before
    /// `before_ms`, from space `from` on. A space's hints are in click order (uids begin with
    /// their time), so its old ones are its first. Answers how many it removed, and the space
    /// to go on from (`None`: every space is done).
    pub fn prune_click_hints(
        &mut self,
        from: u32,
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<u32>), StoreError> {
        let mut old: Vec<(u32, String)> = Vec::new();
        let mut space = Some(from);
        while let Some(s) = space {
            for entry in self
                .click_hints
                .open()?
                .range((s, "")..=(s, "\u{10ffff}"))?
            {
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
                    .open()?
                    .range((next, "")..)?
                    .next()
                    .transpose()?
                    .map(|(k, _)| k.value().0),
                None => None,
            };
        }
        let removed = old.len() as u64;
        for (s, uid) in old {
            self.click_hints.open()?.remove((s, uid.as_str()))?;
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
    pub fn prune_deliveries(
        &mut self,
        from: (u32, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<(u32, u64)>), StoreError> {
        let mut doomed: Vec<((u32, u64), Option<u64>)> = Vec::new();
        let mut looked = 0;
        let mut cursor = Some(from);
        while let Some((no, after)) = cursor {
            let removed_before = match self.destinations.open()?.get(no)? {
                Some(bytes) => records::decode::<DestinationRecord>(bytes.value())?
                    .removed_at_ms
                    .is_some_and(|at| at < before_ms),
                None => false,
            };
            let mut go_on = None;
            for entry in self
                .deliveries
                .open()?
                .range((no, after)..=(no, u64::MAX))?
            {
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
                    .open()?
                    .range((next, 0)..)?
                    .next()
                    .transpose()?
                    .map(|(k, _)| (k.value().0, 0)),
                None => None,
            };
        }
        for ((no, inbox_id), queued) in &doomed {
            self.deliveries.open()?.remove((*no, *inbox_id))?;
            if let Some(due) = queued {
                self.delivery_queue.open()?.remove((*no, *due, *inbox_id))?;
            }
        }
        Ok((doomed.len() as u64, cursor))
    }

    /// Deletes the rows (the destination's, and its state's) of up to `limit` destinations
    /// removed before `before_ms` that have no delivery left: a removed destination is kept only
    /// while its deliveries can still be listed, so making and removing destinations cannot
    /// grow the file. Answers how many it deleted.
    pub fn forget_removed_destinations(
        &mut self,
        before_ms: u64,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let mut removed = Vec::new();
        for entry in self.destinations.open()?.iter()? {
            let (key, bytes) = entry?;
            let record: DestinationRecord = records::decode(bytes.value())?;
            if record.removed_at_ms.is_some_and(|at| at < before_ms) {
                removed.push(key.value());
            }
        }
        let mut forgotten = Vec::new();
        for no in removed {
            if forgotten.len() == limit {
                break;
            }
            let has_deliveries = self
                .deliveries
                .open()?
                .range((no, 0)..=(no, u64::MAX))?
                .next()
                .is_some();
            if !has_deliveries {
                forgotten.push(no);
            }
        }
        for no in &forgotten {
            self.destinations.open()?.remove(*no)?;
            self.delivery_states.open()?.remove(*no)?;
            self.outbox.states.remove(no);
        }
        Ok(forgotten.len() as u64)
    }

    /// Writes the state rows this batch changed.
    pub(crate) fn write_delivery_states(&mut self) -> Result<(), StoreError> {
        for (no, state) in std::mem::take(&mut self.outbox.states) {
            self.delivery_states
                .open()?
                .insert(no, records::encode(&state).as_slice())?;
        }
        Ok(())
    }
}
