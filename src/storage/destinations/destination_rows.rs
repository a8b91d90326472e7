//! A destination's rows in the data file, as the writer (`outbox.rs`) and the readers
//! (`outbox_read.rs`) both read them: the stored record and the domain's destination each way,
//! the live destinations of a space, and the counts per state.

use redb::ReadableTable;

use crate::error::{Code, Error};
use crate::platform::{Destination, EventSet, LastError, Paused};
use crate::storage::error::StoreError;
use crate::storage::records::{self, DeliveryStateRecord, DestinationRecord, LastErrorRecord};
use crate::storage::schema::{DELIVERY_STATES, DESTINATIONS};

/// `DELIVERY_QUEUE`'s due time of a dead delivery: never, until a retry is asked for.
pub(crate) const DEAD: u64 = u64::MAX;

pub(crate) fn no_destination(name: &str) -> StoreError {
    StoreError::Refused(Error::new(
        Code::NotFound,
        format!("no destination {name:?} in this space"),
    ))
}

/// The stored form of a destination.
pub(crate) fn record_of(d: &Destination) -> DestinationRecord {
    DestinationRecord {
        space_no: d.space,
        name: d.name.clone(),
        kind: d.target.kind() as u8,
        events: d.events.0,
        only_attributed: d.only_attributed,
        created_at_ms: d.created_at_ms,
        removed_at_ms: None,
        paused_at_ms: d.paused.as_ref().map(|p| p.at_ms),
        paused_reason: d.paused.as_ref().map(|p| p.reason.clone()),
        settings: Some(d.target.clone()),
    }
}

/// A stored destination as the domain sees it; `None` for a removed one.
pub(crate) fn destination_of(
    no: u32,
    r: DestinationRecord,
) -> Result<Option<Destination>, StoreError> {
    if r.removed_at_ms.is_some() {
        return Ok(None);
    }
    let target = r.settings.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "destination {no} ({:?}) lacks its settings",
            r.name
        ))
    })?;
    if target.kind() as u8 != r.kind {
        return Err(StoreError::Corrupt(format!(
            "destination {no} ({:?}) is of kind {} with another kind's settings",
            r.name, r.kind
        )));
    }
    let paused = r.paused_at_ms.map(|at_ms| Paused {
        at_ms,
        reason: r.paused_reason.unwrap_or_default(),
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
pub(crate) fn live_destinations(
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

pub(crate) fn stored_state(
    table: &impl ReadableTable<u32, &'static [u8]>,
    no: u32,
) -> Result<DeliveryStateRecord, StoreError> {
    Ok(match table.get(no)? {
        Some(bytes) => records::decode(bytes.value())?,
        None => DeliveryStateRecord::default(),
    })
}

pub(crate) fn last_error_of(r: Option<LastErrorRecord>) -> Option<LastError> {
    r.map(|e| LastError {
        at_ms: e.at_ms,
        inbox_id: (e.inbox_id > 0).then(|| e.inbox_id.to_string()),
        status: (e.status > 0).then_some(e.status),
        answer: e.answer,
    })
}
