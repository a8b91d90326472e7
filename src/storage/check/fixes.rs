//! `tracker check --repair`'s writes: a [`Fix`] for each repairable finding, one write to a
//! derived table, and [`apply`], which makes them all in one write transaction.

use redb::WriteTransaction;

use crate::storage::cost_sums;
use crate::storage::error::StoreError;
use crate::storage::index::dedup_buffer::TableKey;
use crate::storage::records::{self, TgTouchRecord};
use crate::storage::rollup;
use crate::storage::schema::{
    CLICKS_BY_FBCLID, CLICKS_BY_TG, COST_SUMS, COSTS, DEDUP, LINKS_BY_SPACE, META,
    REJECTION_COUNTS, TG_TOUCHES,
};

/// A fix for a repairable finding: one write to a derived table.
pub(super) enum Fix {
    InsertDedup(TableKey, (u64, u64)),
    RemoveDedup(TableKey),
    InsertFbclid((u32, u128), String),
    RemoveFbclid((u32, u128)),
    InsertTg((u32, u64, String)),
    RemoveTg((u32, u64, String)),
    SetTouch((u32, u64), TgTouchRecord),
    RemoveTouch((u32, u64)),
    InsertLinkBySpace((u32, String)),
    RemoveLinkBySpace((u32, String)),
    RebuildStats,
    RebuildCostSums,
    SetMeta(&'static str, u64),
    SetRejectionCount(u32, u64),
}

pub(super) fn apply(txn: &WriteTransaction, fixes: Vec<Fix>) -> Result<(), StoreError> {
    let mut dedup = txn.open_table(DEDUP)?;
    let mut by_fbclid = txn.open_table(CLICKS_BY_FBCLID)?;
    let mut by_tg = txn.open_table(CLICKS_BY_TG)?;
    let mut touches = txn.open_table(TG_TOUCHES)?;
    let mut links_by_space = txn.open_table(LINKS_BY_SPACE)?;
    let mut meta = txn.open_table(META)?;
    let mut counts = txn.open_table(REJECTION_COUNTS)?;
    let mut rebuild_stats = false;
    let mut rebuild_cost_sums = false;
    for fix in fixes {
        match fix {
            Fix::InsertDedup(k, v) => {
                dedup.insert(k, v)?;
            }
            Fix::RemoveDedup(k) => {
                dedup.remove(k)?;
            }
            Fix::InsertFbclid(k, uid) => {
                by_fbclid.insert(k, uid.as_str())?;
            }
            Fix::RemoveFbclid(k) => {
                by_fbclid.remove(k)?;
            }
            Fix::InsertTg((s, tg, uid)) => {
                by_tg.insert((s, tg, uid.as_str()), ())?;
            }
            Fix::RemoveTg((s, tg, uid)) => {
                by_tg.remove((s, tg, uid.as_str()))?;
            }
            Fix::SetTouch(key, touch) => {
                touches.insert(key, records::encode(&touch).as_slice())?;
            }
            Fix::RemoveTouch(key) => {
                touches.remove(key)?;
            }
            Fix::InsertLinkBySpace((s, slug)) => {
                links_by_space.insert((s, slug.as_str()), ())?;
            }
            Fix::RemoveLinkBySpace((s, slug)) => {
                links_by_space.remove((s, slug.as_str()))?;
            }
            Fix::RebuildStats => rebuild_stats = true,
            Fix::RebuildCostSums => rebuild_cost_sums = true,
            Fix::SetMeta(name, v) => {
                meta.insert(name, v)?;
            }
            Fix::SetRejectionCount(space, n) => {
                counts.insert(space, n)?;
            }
        }
    }
    if rebuild_stats {
        rollup::rebuild_in(txn, |_| Ok(()))?;
    }
    if rebuild_cost_sums {
        let all = cost_sums::all_sums(&txn.open_table(COSTS)?)?;
        cost_sums::rewrite(&mut txn.open_table(COST_SUMS)?, &all)?;
    }
    Ok(())
}
