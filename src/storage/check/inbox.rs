//! The inbox's check: every event decodes and belongs to a space, `inbox_seq` is past every
//! `inbox_id`, and `dedup` ↔ `inbox` agree (an entry names the newest event with its key),
//! allowing for the entries still in the writer's memory and those retention may prune.

use std::collections::BTreeSet;

use redb::{ReadTransaction, ReadableTable};

use super::findings::Checker;
use super::fixes::Fix;
use crate::domain::dedup::{self, Expiry};
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer::{self, GEN_ENTRIES, TableKey};
use crate::storage::index::key_filter::GenFilter;
use crate::storage::records::{self, EventRecord};
use crate::storage::schema::{DEDUP, INBOX, META, META_INBOX_SEQ};

pub(super) fn check_inbox(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
    (inbox_seq, redo_from): (u64, u64),
    expiry: Expiry,
) -> Result<(), StoreError> {
    let inbox = txn.open_table(INBOX)?;
    let dedup_table = txn.open_table(DEDUP)?;
    let building = crate::storage::index::dedup_runs::building(&txn.open_table(META)?)?;
    let gens = GenFilter::of_dedup(&dedup_table, building, GEN_ENTRIES)?;
    // A missing entry is written to the newest generation, as the writer would, and to the next
    // once that one is full.
    let mut newest = gens.newest();
    let mut largest = 0;
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let at = format!("space {space}, inbox_id {inbox_id}");
        largest = largest.max(inbox_id);
        if !spaces.contains(&space) {
            c.damaged(
                "inbox",
                &at,
                format!("event of space number {space}, which does not exist"),
            );
        }
        let event = records::decode::<EventRecord>(bytes.value())
            .and_then(|r| dedup_buffer::event_of(r, inbox_id));
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                c.damaged("inbox", &at, e.to_string());
                continue;
            }
        };
        let Some(k) = dedup::dedup_key(&event, 0) else {
            continue;
        };
        let k = dedup_buffer::entry_key(space, &k);
        let stored = dedup_buffer::find(&dedup_table, &gens, &k)?;
        // The entry names the newest event with its key, unless retention may have pruned it.
        let needed = inbox_id < redo_from && !expiry.expired(k.1, event.received_at_ms);
        if needed && stored.is_none_or(|(id, _)| id < inbox_id) {
            let at_key =
                dedup_buffer::table_key(dedup_buffer::next_gen(&mut newest, GEN_ENTRIES), &k);
            c.derivable(
                "dedup",
                dedup_key_text(at_key),
                match stored {
                    None => format!("event {at} has no dedup entry: a retry of it would be stored again"),
                    Some((id, _)) => format!("the dedup entry names inbox_id {id}, older than event {at} with the same key"),
                },
                Fix::InsertDedup(at_key, (inbox_id, event.received_at_ms)),
            );
        }
    }
    if largest > inbox_seq {
        c.derivable(
            "meta",
            META_INBOX_SEQ,
            format!("inbox_seq is {inbox_seq} but inbox_id {largest} exists: the next event would reuse an id"),
            Fix::SetMeta(META_INBOX_SEQ, largest),
        );
    }
    for entry in dedup_table.iter()? {
        let (key, value) = entry?;
        let k = key.value();
        let (inbox_id, received_at_ms) = value.value();
        let (_, space, rule, digest) = k;
        let row = inbox.get((space, inbox_id))?;
        let derived = row
            .map(|bytes| {
                records::decode::<EventRecord>(bytes.value())
                    .and_then(|r| dedup_buffer::event_of(r, inbox_id))
                    .map(|e| (dedup::dedup_key(&e, 0), e.received_at_ms))
            })
            .transpose();
        match derived {
            Ok(None) => c.derivable(
                "dedup",
                dedup_key_text(k),
                format!(
                    "the entry names inbox_id {inbox_id} of space {space}, which is not in the inbox"
                ),
                Fix::RemoveDedup(k),
            ),
            Ok(Some((event_key, at))) => {
                if event_key.map(|e| dedup_buffer::entry_key(space, &e)) != Some((space, rule, digest)) {
                    c.derivable(
                        "dedup",
                        dedup_key_text(k),
                        format!("the entry names inbox_id {inbox_id}, whose event has another key"),
                        Fix::RemoveDedup(k),
                    );
                } else if at != received_at_ms {
                    c.derivable(
                        "dedup",
                        dedup_key_text(k),
                        format!("the entry's time {received_at_ms} is not its event's {at}"),
                        Fix::InsertDedup(k, (inbox_id, at)),
                    );
                }
            }
            // The event does not decode: reported with the inbox.
            Err(_) => {}
        }
    }
    Ok(())
}

fn dedup_key_text((generation, space, rule, digest): TableKey) -> String {
    format!("generation {generation}, space {space}, rule {rule}, digest {digest:032x}")
}
