//! First deposits (`docs/api.md#first-deposits`): whether a new deposit is its user's first,
//! decided when it is written and stored with it, like its attribution, so that the feed and the
//! stats never change after the fact.
//!
//! A deposit's *depositor* is the Telegram user it names (`tg_id`), else the user its click is
//! bound to; without a user, its click. The deposit is first when no earlier stored deposit
//! (duplicates are never stored) had the same depositor: `FIRST_DEPOSITS_BY_TG` and
//! `FIRST_DEPOSITS_BY_CLICK` hold each depositor's first deposit. A deposit with neither a user
//! nor a click (an unknown `uid`, or none) is never first: nothing says whose it is, so counting
//! it would make every unattributed deposit a new customer.
//!
//! A click's deposits made before it is bound belong to the user it is bound to later: binding a
//! click that has a deposit marks its user as having deposited ([`bound`]), so the user's next
//! deposit, through this click or any other, is not first.

use redb::{ReadableTable, Table};

use crate::storage::error::StoreError;

/// The tables of the first deposits, in one write transaction.
pub(crate) struct Depositors<'t> {
    pub by_tg: Table<'t, (u32, u64), u64>,
    pub by_click: Table<'t, (u32, &'static str), u64>,
}

impl Depositors<'_> {
    /// Decides whether deposit `inbox_id` of `space`, by Telegram user `user` and through click
    /// `click` (either may be unknown), is a first deposit, and remembers it as its depositor's
    /// deposit.
    pub(crate) fn decide(
        &mut self,
        space: u32,
        user: Option<u64>,
        click: Option<&str>,
        inbox_id: u64,
    ) -> Result<bool, StoreError> {
        let user_known = match user {
            Some(tg_id) => Some(self.by_tg.get((space, tg_id))?.is_some()),
            None => None,
        };
        let click_known = match click {
            Some(uid) => Some(self.by_click.get((space, uid))?.is_some()),
            None => None,
        };
        let first = match (user_known, click_known) {
            (Some(known), _) | (None, Some(known)) => !known,
            (None, None) => false,
        };
        if let (Some(tg_id), Some(false)) = (user, user_known) {
            self.by_tg.insert((space, tg_id), inbox_id)?;
        }
        if let (Some(uid), Some(false)) = (click, click_known) {
            self.by_click.insert((space, uid), inbox_id)?;
        }
        Ok(first)
    }

    /// Click `uid` of `space` was just bound to `tg_id`: a deposit through it before makes that
    /// user a depositor already.
    pub(crate) fn bound(&mut self, space: u32, uid: &str, tg_id: u64) -> Result<(), StoreError> {
        let Some(inbox_id) = self.by_click.get((space, uid))?.map(|g| g.value()) else {
            return Ok(());
        };
        if self.by_tg.get((space, tg_id))?.is_none() {
            self.by_tg.insert((space, tg_id), inbox_id)?;
        }
        Ok(())
    }
}
