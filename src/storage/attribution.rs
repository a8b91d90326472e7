//! Attribution of an event to a click (`docs/api.md#attribution`): by its `uid`, or, when it
//! names only a Telegram user, by that user's first or last bound click.
//!
//! A user's first and last bound click are kept in `TG_TOUCHES`, updated by every binding in its
//! own transaction ([`bound`]), so an event by Telegram id costs one read to resolve, however many
//! clicks the user has. First and last are by binding time, ties by uid; [`touch_of`] derives the
//! same from `CLICKS_BY_TG` and the clicks, for the migration that builds the table and for
//! `tracker check`. The writer ([`resolve`] inside its transaction) and `dry_run` (on a snapshot)
//! decide with the same function, on the space's `attribution` setting read where they read.

use redb::{ReadableTable, Table};

use crate::domain::event::{AttributedBy, ValidEvent};
use crate::domain::settings::{Attribution, SpaceSettings};
use crate::storage::error::StoreError;
use crate::storage::records::{self, ClickRecord, SpaceSettingsRecord, TgTouchRecord};

/// The click an event is attributed to, if any.
pub(crate) struct Resolved {
    /// The click's uid: the event's own, or the one its Telegram id resolved to.
    pub uid: String,
    pub click: ClickRecord,
    pub by: AttributedBy,
}

/// The click `event` is attributed to in `space`: the one its `uid` names (and only that one: a
/// `uid` decides, also when it names no click), else, for a Telegram id, the user's first or
/// last bound click as `attribution` says. `None` when no click is found.
pub(crate) fn resolve(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    touches: &impl ReadableTable<(u32, u64), &'static [u8]>,
    attribution: impl FnOnce() -> Result<Attribution, StoreError>,
    space: u32,
    event: &ValidEvent,
) -> Result<Option<Resolved>, StoreError> {
    let (uid, by) = match (&event.uid, event.tg_id) {
        (Some(uid), _) => (uid.clone(), AttributedBy::Uid),
        (None, Some(tg_id)) => {
            let Some(touch) = stored_touch(touches, space, tg_id)? else {
                return Ok(None);
            };
            let uid = match attribution()? {
                Attribution::FirstTouch => touch.first_uid,
                Attribution::LastTouch => touch.last_uid,
            };
            (uid, AttributedBy::TgId)
        }
        (None, None) => return Ok(None),
    };
    let Some(bytes) = clicks.get((space, uid.as_str()))? else {
        return Ok(None);
    };
    let click = records::decode(bytes.value())?;
    Ok(Some(Resolved { uid, click, by }))
}

/// The settings of `space` as stored, or the defaults when none were set.
pub(crate) fn settings(
    table: &impl ReadableTable<u32, &'static [u8]>,
    space: u32,
) -> Result<SpaceSettings, StoreError> {
    let Some(bytes) = table.get(space)? else {
        return Ok(SpaceSettings::default());
    };
    let record: SpaceSettingsRecord = records::decode(bytes.value())?;
    SpaceSettings::from_pairs(record.values.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .map_err(|what| StoreError::Corrupt(format!("settings of space {space}: {what}")))
}

/// The stored form of `settings`.
pub(crate) fn settings_record(settings: &SpaceSettings) -> SpaceSettingsRecord {
    SpaceSettingsRecord {
        values: settings
            .stored_pairs()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect(),
    }
}

/// `(bound_at_ms, uid)`: the order of a user's bound clicks, first to last.
type Touch = (u64, String);

/// `touch` with the binding `(at, uid)` taken in: a new first or last, or neither.
fn with_binding(touch: Option<TgTouchRecord>, at: u64, uid: &str) -> TgTouchRecord {
    let new: Touch = (at, uid.to_owned());
    let Some(mut t) = touch else {
        return TgTouchRecord {
            first_uid: uid.to_owned(),
            first_bound_at_ms: at,
            last_uid: uid.to_owned(),
            last_bound_at_ms: at,
        };
    };
    if new < (t.first_bound_at_ms, t.first_uid.clone()) {
        (t.first_bound_at_ms, t.first_uid) = new.clone();
    }
    if new > (t.last_bound_at_ms, t.last_uid.clone()) {
        (t.last_bound_at_ms, t.last_uid) = new;
    }
    t
}

/// The first and last bound click of `tg_id` in `space` as stored, read before a binding
/// changes them (so that a record that does not decode refuses the binding before it writes).
pub(crate) fn stored_touch(
    touches: &impl ReadableTable<(u32, u64), &'static [u8]>,
    space: u32,
    tg_id: u64,
) -> Result<Option<TgTouchRecord>, StoreError> {
    match touches.get((space, tg_id))? {
        Some(bytes) => Ok(Some(records::decode(bytes.value())?)),
        None => Ok(None),
    }
}

/// A binding of click `uid` to `tg_id` at `at`, made in this transaction: the user's first and
/// last bound click (`touch`, as [`stored_touch`] read it) take it in.
pub(crate) fn bound(
    touches: &mut Table<'_, (u32, u64), &'static [u8]>,
    (space, tg_id): (u32, u64),
    touch: Option<TgTouchRecord>,
    uid: &str,
    at: u64,
) -> Result<(), StoreError> {
    let touch = with_binding(touch, at, uid);
    touches.insert((space, tg_id), records::encode(&touch).as_slice())?;
    Ok(())
}

/// When click `click` was bound, for ordering: its binding time, or for a binding stored without
/// one, its click time.
fn bound_at(click: &ClickRecord) -> u64 {
    click.bound_at_ms.unwrap_or(click.clicked_at_ms)
}

/// The first and last bound click of `tg_id` in `space`, derived from `CLICKS_BY_TG` and the
/// clicks; index entries whose click is missing or bound to another id are left out (`tracker
/// check` reports them).
pub(crate) fn touch_of(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    by_tg: &impl ReadableTable<(u32, u64, &'static str), ()>,
    space: u32,
    tg_id: u64,
) -> Result<Option<TgTouchRecord>, StoreError> {
    let mut touch = None;
    for entry in by_tg.range((space, tg_id, "")..=(space, tg_id, "\u{10ffff}"))? {
        let (key, _) = entry?;
        let uid = key.value().2;
        let Some(bytes) = clicks.get((space, uid))? else {
            continue;
        };
        let click: ClickRecord = records::decode(bytes.value())?;
        if click.tg_id == Some(tg_id) {
            touch = Some(with_binding(touch, bound_at(&click), uid));
        }
    }
    Ok(touch)
}

/// Every `(space, tg_id)` that `CLICKS_BY_TG` holds, once each, in order, with the user's
/// derived first and last bound click: what `TG_TOUCHES` should hold.
pub(crate) fn every_touch(
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    by_tg: &impl ReadableTable<(u32, u64, &'static str), ()>,
    mut each: impl FnMut((u32, u64), Option<TgTouchRecord>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut after: Option<(u32, u64)> = None;
    loop {
        let next = match after {
            None => by_tg.iter()?.next(),
            Some((space, tg_id)) => match tg_id.checked_add(1) {
                Some(next_tg) => by_tg.range((space, next_tg, "")..)?.next(),
                None => match space.checked_add(1) {
                    Some(next_space) => by_tg.range((next_space, 0, "")..)?.next(),
                    None => None,
                },
            },
        };
        let Some(entry) = next else {
            return Ok(());
        };
        let (key, _) = entry?;
        let (space, tg_id, _) = key.value();
        each((space, tg_id), touch_of(clicks, by_tg, space, tg_id)?)?;
        after = Some((space, tg_id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_and_last_are_by_binding_time_then_uid() {
        let mut t = with_binding(None, 20, "b");
        assert_eq!((t.first_uid.as_str(), t.last_uid.as_str()), ("b", "b"));
        t = with_binding(Some(t), 30, "c");
        t = with_binding(Some(t), 10, "a");
        assert_eq!((t.first_uid.as_str(), t.last_uid.as_str()), ("a", "c"));
        assert_eq!((t.first_bound_at_ms, t.last_bound_at_ms), (10, 30));
        // The same time: the smaller uid is first, the larger last.
        t = with_binding(Some(t), 10, "0");
        t = with_binding(Some(t), 30, "d");
        assert_eq!((t.first_uid.as_str(), t.last_uid.as_str()), ("0", "d"));
        // In between changes nothing.
        let before = t.clone();
        assert_eq!(with_binding(Some(t), 20, "m"), before);
    }
}
