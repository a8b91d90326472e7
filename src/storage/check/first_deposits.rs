//! The check of the first-deposit tables (`first_deposits_by_tg`, `first_deposits_by_click`)
//! against the deposits of the inbox and each deposit's `first_deposit` mark. Nothing here is
//! repairable.

use redb::{ReadTransaction, ReadableTable};

use super::findings::Checker;
use crate::storage::error::StoreError;
use crate::storage::records::{self, ClickRecord, EventRecord};
use crate::storage::schema::{CLICKS, FIRST_DEPOSITS_BY_CLICK, FIRST_DEPOSITS_BY_TG, INBOX};

/// A stored deposit as the first-deposit rule sees it (`storage/first_deposit.rs`): the user it
/// names, its click (when it matched one that exists) and that click's user now, and its mark.
struct Deposit {
    tg_id: Option<u64>,
    uid: Option<String>,
    click_tg: Option<u64>,
    first: bool,
}

/// The deposit `inbox_id` of `space`; `None` when the inbox has no event there, or one of another
/// kind. A record that does not decode counts as none here (the inbox's check reports it).
fn deposit_at(
    inbox: &impl ReadableTable<(u32, u64), &'static [u8]>,
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    space: u32,
    inbox_id: u64,
) -> Result<Option<Deposit>, StoreError> {
    match inbox.get((space, inbox_id))? {
        Some(bytes) => deposit_of(bytes.value(), clicks, space),
        None => Ok(None),
    }
}

/// The deposit an inbox record of `space` holds; `None` for an event of another kind or a record
/// that does not decode.
fn deposit_of(
    bytes: &[u8],
    clicks: &impl ReadableTable<(u32, &'static str), &'static [u8]>,
    space: u32,
) -> Result<Option<Deposit>, StoreError> {
    let Ok(event) = records::decode::<EventRecord>(bytes) else {
        return Ok(None);
    };
    if event.kind != crate::domain::event::EventKind::Deposit as u8 {
        return Ok(None);
    }
    let click = match (&event.uid, event.matched) {
        (Some(uid), true) => match clicks.get((space, uid.as_str()))? {
            Some(bytes) => records::decode::<ClickRecord>(bytes.value()).ok(),
            None => None,
        },
        _ => None,
    };
    Ok(Some(Deposit {
        tg_id: event.tg_id,
        uid: click.as_ref().and(event.uid),
        click_tg: click.and_then(|c| c.tg_id),
        first: event.first_deposit,
    }))
}

/// `first_deposits_by_tg` and `first_deposits_by_click` against the deposits of the inbox.
///
/// The writer decides each deposit once, in commit order, and never rewrites an entry, so for
/// every deposit `D` (its user the Telegram id it names, else its click's; a click's entry is
/// its first deposit):
/// - its click's entry exists and is no later than `D`; a first deposit without a Telegram id
///   of its own is its click's entry;
/// - the user it names has an entry: `D` itself when `D` is marked first, an earlier deposit
///   when not; a click bound to a user gives that user an entry too (when the click was bound
///   after its deposit, the binding carries it over);
/// - a deposit not marked first has an earlier one of its user or its click;
/// - a deposit with neither a user nor a click is never first.
///
/// And every entry names a deposit of its own click or user: a click's entry a deposit through
/// that click, and no deposit through it is earlier; a user's entry a deposit naming that user
/// or through a click bound to them, marked first (or first of the other user it named).
///
/// Which of a user's deposits made before and after a binding came first is not stored, so a
/// user's entry is checked against these bounds, not recomputed. Nothing here is repaired: the
/// marks on the events are what the feed and the stats already showed.
pub(super) fn check_first_deposits(
    txn: &ReadTransaction,
    c: &mut Checker,
) -> Result<(), StoreError> {
    const BY_TG: &str = "first_deposits_by_tg";
    const BY_CLICK: &str = "first_deposits_by_click";
    let (inbox, clicks) = (txn.open_table(INBOX)?, txn.open_table(CLICKS)?);
    let by_tg = txn.open_table(FIRST_DEPOSITS_BY_TG)?;
    let by_click = txn.open_table(FIRST_DEPOSITS_BY_CLICK)?;
    for entry in inbox.iter()? {
        let (key, bytes) = entry?;
        let (space, inbox_id) = key.value();
        let Some(d) = deposit_of(bytes.value(), &clicks, space)? else {
            continue;
        };
        let at = |what: String| format!("space {space}, {what}");
        let mark = if d.first {
            "marked first"
        } else {
            "not marked first"
        };
        let click_entry = match &d.uid {
            Some(uid) => by_click.get((space, uid.as_str()))?.map(|v| v.value()),
            None => None,
        };
        let user_entry = |tg: u64| by_tg.get((space, tg)).map(|v| v.map(|v| v.value()));
        if let Some(uid) = &d.uid {
            let problem = match click_entry {
                None => Some(format!(
                    "is missing, but deposit {inbox_id} went through click {uid}"
                )),
                Some(first) if first > inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} through the click is earlier"
                )),
                Some(first) if d.first && d.tg_id.is_none() && first != inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} is {mark} and names no \
                     Telegram id, so it is the click's first"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_CLICK, at(format!("uid {uid}")), problem);
            }
        }
        if let Some(tg) = d.tg_id {
            let problem = match user_entry(tg)? {
                None => Some(format!("is missing, but deposit {inbox_id} names the user")),
                Some(first) if d.first && first != inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark}"
                )),
                Some(first) if !d.first && first >= inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark}, so \
                     an earlier one must be named"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_TG, at(format!("tg_id {tg}")), problem);
            }
        } else if let Some(tg) = d.click_tg {
            let earlier_by_click = click_entry.is_some_and(|first| first < inbox_id);
            let problem = match user_entry(tg)? {
                None => Some(format!(
                    "is missing, but deposit {inbox_id} went through a click bound to the user"
                )),
                Some(first) if !d.first && !earlier_by_click && first >= inbox_id => Some(format!(
                    "names inbox_id {first}, but deposit {inbox_id} of the user is {mark} \
                         and its click has no earlier one, so an earlier one must be named"
                )),
                Some(_) => None,
            };
            if let Some(problem) = problem {
                c.damaged(BY_TG, at(format!("tg_id {tg}")), problem);
            }
        } else if d.uid.is_none() && d.first {
            c.damaged(
                "inbox",
                at(format!("inbox_id {inbox_id}")),
                "the deposit is marked first but names neither a Telegram user nor a known \
                 click, so nothing says whose first it is",
            );
        }
    }
    first_deposit_entries_name_deposits(txn, c, (BY_TG, BY_CLICK))
}

/// Every first-deposit entry names a deposit of its own click or user
/// ([`check_first_deposits`]).
fn first_deposit_entries_name_deposits(
    txn: &ReadTransaction,
    c: &mut Checker,
    (tg_table, click_table): (&str, &str),
) -> Result<(), StoreError> {
    let (inbox, clicks) = (txn.open_table(INBOX)?, txn.open_table(CLICKS)?);
    for entry in txn.open_table(FIRST_DEPOSITS_BY_CLICK)?.iter()? {
        let (key, value) = entry?;
        let ((space, uid), first) = (key.value(), value.value());
        let through = deposit_at(&inbox, &clicks, space, first)?
            .is_some_and(|d| d.uid.as_deref() == Some(uid));
        if !through {
            c.damaged(
                click_table,
                format!("space {space}, uid {uid}"),
                format!("names inbox_id {first}, which is not a deposit through this click"),
            );
        }
    }
    for entry in txn.open_table(FIRST_DEPOSITS_BY_TG)?.iter()? {
        let (key, value) = entry?;
        let ((space, tg), first) = (key.value(), value.value());
        let problem = match deposit_at(&inbox, &clicks, space, first)? {
            None => Some("which is not a deposit in the inbox"),
            Some(d) if d.tg_id != Some(tg) && d.click_tg != Some(tg) => {
                Some("a deposit neither naming this user nor through a click bound to them")
            }
            Some(d) if !d.first && d.tg_id.is_none_or(|named| named == tg) => {
                Some("a deposit not marked first")
            }
            Some(_) => None,
        };
        if let Some(problem) = problem {
            c.damaged(
                tg_table,
                format!("space {space}, tg_id {tg}"),
                format!("names inbox_id {first}, {problem}"),
            );
        }
    }
    Ok(())
}
