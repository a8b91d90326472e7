//! Clicks and their bindings in the data file, for the writer (methods of [`Txn`]): a click
//! back-filled (or the one its `fbclid` already names, found through `index/fbclid_buffer.rs`),
//! the batch's new clicks written in key order, and a click bound to a Telegram user, first
//! binding wins. A visit's click is made through a link (`links.rs`); which click an event is
//! attributed to is `attribution.rs`.

use redb::ReadableTable;

use crate::domain::click::{self, NewClick};
use crate::domain::outcome::{BindOutcome, ClickOutcome};
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::records::{self, ClickHintsRecord, ClickRecord};

impl Txn<'_> {
    /// Stores a new click with a fresh `uid`, or answers the click that has the same `fbclid`.
    pub fn back_fill_click(
        &mut self,
        space: u32,
        click: NewClick,
    ) -> Result<ClickOutcome, StoreError> {
        let fbclid_key = click.fbclid.as_deref().map(click::fbclid_key);
        if let Some(k) = fbclid_key {
            // Newest first: this transaction's clicks, then the buffer, then the table.
            let key = (space, k);
            let known = match self
                .fbclid_change
                .get(&key)
                .or_else(|| self.fbclid_pending.get(&key))
            {
                Some(uid) => Some(uid.to_owned()),
                None if self.fbclid_pending.may_be_in_table(&key) => {
                    self.by_fbclid.get(key)?.map(|g| g.value().to_owned())
                }
                None => None,
            };
            if let Some(uid) = known {
                return Ok(ClickOutcome {
                    uid,
                    created: false,
                });
            }
        }
        let uid = loop {
            // 128 random bits: a collision is astronomically unlikely, but never overwrite.
            let uid = click::new_uid(click.clicked_at_ms.max(self.uid_floor));
            if !self.new_clicks.contains_key(&(space, uid.clone()))
                && self.clicks.get((space, uid.as_str()))?.is_none()
            {
                break uid;
            }
        };
        let hints = match click.hints {
            Some(h) if self.settings_of(space)?.meta_client_hints => Some(ClickHintsRecord {
                clicked_at_ms: click.clicked_at_ms,
                ip: match h.ip {
                    Some(std::net::IpAddr::V4(v4)) => v4.octets().to_vec(),
                    Some(std::net::IpAddr::V6(v6)) => v6.octets().to_vec(),
                    None => Vec::new(),
                },
                user_agent: h.user_agent,
                fbc: h.fbc,
            }),
            _ => None,
        };
        let record = ClickRecord {
            link_slug: click.link_slug,
            fbclid: click.fbclid,
            campaign_name: click.campaign_name,
            raw_query: click.raw_query,
            clicked_at_ms: click.clicked_at_ms,
            tg_id: None,
            bound_at_ms: None,
            ids: click.ids,
            variant: click.variant,
        };
        // First the step that can refuse, so that a refusal leaves nothing behind.
        if let Some(k) = fbclid_key {
            self.fbclid_change.add((space, k), &uid)?;
        }
        if let Some(hints) = hints {
            self.new_hints
                .insert((space, uid.clone()), records::encode(&hints));
        }
        self.new_clicks
            .insert((space, uid.clone()), records::encode(&record));
        self.rollup.click(space, &record);
        Ok(ClickOutcome { uid, created: true })
    }

    /// Writes the batch's new clicks in key order; answers the latest time their uids begin with.
    pub(super) fn write_clicks(&mut self) -> Result<Option<u64>, StoreError> {
        let mut newest = None;
        for ((space, uid), record) in std::mem::take(&mut self.new_clicks) {
            self.clicks
                .insert((space, uid.as_str()), record.as_slice())?;
            newest = newest.max(click::uid_time(&uid));
        }
        for ((space, uid), record) in std::mem::take(&mut self.new_hints) {
            self.click_hints
                .open()?
                .insert((space, uid.as_str()), record.as_slice())?;
        }
        Ok(newest)
    }

    /// Binds click `uid` to `tg_id` by compare-and-set: the first binding wins.
    pub fn bind(
        &mut self,
        space: u32,
        uid: &str,
        tg_id: u64,
        now_ms: u64,
    ) -> Result<BindOutcome, StoreError> {
        let mut record: ClickRecord = match self.clicks.get((space, uid))? {
            None => return Ok(BindOutcome::Unmatched),
            Some(bytes) => records::decode(bytes.value())?,
        };
        if let Some(existing) = record.tg_id {
            return Ok(BindOutcome::Bound {
                tg_id: existing,
                conflict: existing != tg_id,
            });
        }
        let touch = attribution::stored_touch(&self.touches, space, tg_id)?;
        record.tg_id = Some(tg_id);
        record.bound_at_ms = Some(now_ms);
        self.clicks
            .insert((space, uid), records::encode(&record).as_slice())?;
        self.by_tg.open()?.insert((space, tg_id, uid), ())?;
        attribution::bound(&mut self.touches, (space, tg_id), touch, uid, now_ms)?;
        self.depositors.bound(space, uid, tg_id)?;
        self.rollup.binding(space, &record);
        Ok(BindOutcome::Bound {
            tg_id,
            conflict: false,
        })
    }
}
