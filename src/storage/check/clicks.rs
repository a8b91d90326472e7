//! The checks of the clicks and their indexes: `clicks_by_fbclid` and `clicks_by_tg` →
//! `clicks` and back, and `tg_touches` against the first and last bound click of each
//! Telegram user.

use redb::{ReadTransaction, ReadableTable};

use super::findings::Checker;
use super::fixes::Fix;
use crate::domain::click::fbclid_key;
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::records::{self, ClickRecord, TgTouchRecord};
use crate::storage::schema::{CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, TG_TOUCHES};

pub(super) fn check_clicks(
    txn: &ReadTransaction,
    c: &mut Checker,
    fbclid_redo_from: u64,
) -> Result<(), StoreError> {
    let clicks = txn.open_table(CLICKS)?;
    let by_fbclid = txn.open_table(CLICKS_BY_FBCLID)?;
    let by_tg = txn.open_table(CLICKS_BY_TG)?;
    for entry in clicks.iter()? {
        let (key, bytes) = entry?;
        let (space, uid) = key.value();
        let at = format!("space {space}, uid {uid}");
        let click = match records::decode::<ClickRecord>(bytes.value()) {
            Ok(r) => r,
            Err(e) => {
                c.damaged("clicks", &at, e.to_string());
                continue;
            }
        };
        if let Some(fbclid) = &click.fbclid {
            let k = (space, fbclid_key(fbclid));
            let indexed = by_fbclid.get(k)?.map(|v| v.value().to_owned());
            let buffered =
                crate::domain::click::uid_time(uid).is_some_and(|t| t >= fbclid_redo_from);
            if indexed.is_none() && !buffered {
                c.derivable(
                    "clicks_by_fbclid",
                    format!("space {space}, fbclid {fbclid}"),
                    format!("click {at} is missing from the fbclid index: a back-fill with its fbclid would make a second click"),
                    Fix::InsertFbclid(k, uid.to_owned()),
                );
            }
        }
        if let Some(tg) = click.tg_id
            && by_tg.get((space, tg, uid))?.is_none()
        {
            c.derivable(
                "clicks_by_tg",
                format!("space {space}, tg_id {tg}, uid {uid}"),
                format!("click {at} is bound to {tg} but missing from the Telegram index"),
                Fix::InsertTg((space, tg, uid.to_owned())),
            );
        }
    }
    for entry in by_fbclid.iter()? {
        let (key, uid) = entry?;
        let (space, digest) = key.value();
        let uid = uid.value();
        let at = format!("space {space}, fbclid digest {digest:032x}");
        match clicks.get((space, uid))? {
            None => c.derivable(
                "clicks_by_fbclid",
                at,
                format!("names click {uid}, which does not exist"),
                Fix::RemoveFbclid((space, digest)),
            ),
            Some(bytes) => {
                if let Ok(click) = records::decode::<ClickRecord>(bytes.value())
                    && click.fbclid.as_deref().map(fbclid_key) != Some(digest)
                {
                    c.derivable(
                        "clicks_by_fbclid",
                        at,
                        format!("names click {uid}, whose fbclid is another"),
                        Fix::RemoveFbclid((space, digest)),
                    );
                }
            }
        }
    }
    for entry in by_tg.iter()? {
        let (key, _) = entry?;
        let (space, tg, uid) = key.value();
        let at = format!("space {space}, tg_id {tg}, uid {uid}");
        let fix = Fix::RemoveTg((space, tg, uid.to_owned()));
        match clicks.get((space, uid))? {
            None => c.derivable("clicks_by_tg", at, "names a click that does not exist", fix),
            Some(bytes) => {
                if let Ok(click) = records::decode::<ClickRecord>(bytes.value())
                    && click.tg_id != Some(tg)
                {
                    c.derivable(
                        "clicks_by_tg",
                        at,
                        "names a click not bound to this tg_id",
                        fix,
                    );
                }
            }
        }
    }
    Ok(())
}

/// `tg_touches` against what `clicks_by_tg` and the clicks say: every user's entry, and no
/// entry for a user without a bound click.
pub(super) fn check_touches(txn: &ReadTransaction, c: &mut Checker) -> Result<(), StoreError> {
    let (clicks, by_tg) = (txn.open_table(CLICKS)?, txn.open_table(CLICKS_BY_TG)?);
    let touches = txn.open_table(TG_TOUCHES)?;
    attribution::every_touch(&clicks, &by_tg, |(space, tg), want| {
        let Some(want) = want else { return Ok(()) };
        let at = format!("space {space}, tg_id {tg}");
        let problem = match touches.get((space, tg))? {
            None => "is missing".to_owned(),
            Some(bytes) => match records::decode::<TgTouchRecord>(bytes.value()) {
                Ok(t) if t == want => return Ok(()),
                Ok(t) => format!("names first {} and last {}", t.first_uid, t.last_uid),
                Err(e) => e.to_string(),
            },
        };
        c.derivable(
            "tg_touches",
            at,
            format!(
                "{problem}, but the user's first bound click is {} and the last {}",
                want.first_uid, want.last_uid
            ),
            Fix::SetTouch((space, tg), want),
        );
        Ok(())
    })?;
    for entry in touches.iter()? {
        let (key, _) = entry?;
        let (space, tg) = key.value();
        if attribution::touch_of(&clicks, &by_tg, space, tg)?.is_none() {
            c.derivable(
                "tg_touches",
                format!("space {space}, tg_id {tg}"),
                "names a user with no bound click",
                Fix::RemoveTouch((space, tg)),
            );
        }
    }
    Ok(())
}
