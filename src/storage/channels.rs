//! Telegram channels in the data file (`docs/channels.md`), for the writer (methods of [`Txn`])
//! and the readers: a channel link's pool of invite links made ahead (filled by the background
//! task, taken one per click in the click's own transaction), the bot's updates applied with
//! the offset that acknowledges them in one transaction, and the invite links to revoke.
//!
//! Each operation opens the channel tables it uses when it runs, rather than every batch: a
//! batch of events or bot links never pays for them.

use redb::{ReadableTable, Table};

use crate::domain::channel::{self, ChannelUpdate, UpdatesApplied};
use crate::domain::dedup;
use crate::domain::event::{EventKind, Source, ValidEvent};
use crate::domain::stats::{Dimension, quarter_of};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records::{self, ChannelStateRecord, ClickRecord, InviteRecord, MemberRecord};
use crate::storage::rollup;
use crate::storage::schema::{
    CHANNEL_MEMBERS, CHANNEL_STATES, CHANNEL_STATS, INVITE_POOL, INVITES, INVITES_HANDED,
    TELEGRAM_OFFSETS,
};

/// A channel link's counts with its pool's size, as the readers answer them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounts {
    pub state: ChannelStateRecord,
    /// Invite links in the pool now.
    pub pool: u64,
}

fn state_of(
    table: &Table<'_, &'static str, &'static [u8]>,
    slug: &str,
) -> Result<ChannelStateRecord, StoreError> {
    match table.get(slug)? {
        Some(bytes) => records::decode(bytes.value()),
        None => Ok(ChannelStateRecord::default()),
    }
}

impl Txn<'_> {
    /// A visit of channel link `slug` by click `uid`: takes the first invite link of the pool,
    /// which is never handed out again, or counts a visit sent to the fallback.
    pub(crate) fn take_invite(
        &mut self,
        slug: &str,
        uid: &str,
        now_ms: u64,
    ) -> Result<Option<String>, StoreError> {
        let mut pool = self.transaction.open_table(INVITE_POOL)?;
        let first = pool
            .range((slug, 0)..=(slug, u64::MAX))?
            .next()
            .transpose()?
            .map(|(k, v)| (k.value().1, v.value().to_owned()));
        let mut states = self.transaction.open_table(CHANNEL_STATES)?;
        let mut state = state_of(&states, slug)?;
        let Some((number, url)) = first else {
            state.fallbacks += 1;
            states.insert(slug, records::encode(&state).as_slice())?;
            return Ok(None);
        };
        let mut invites = self.transaction.open_table(INVITES)?;
        let mut invite: InviteRecord = match invites.get(url.as_str())? {
            Some(bytes) => records::decode(bytes.value())?,
            None => {
                return Err(StoreError::Corrupt(format!(
                    "the invite pool of {slug:?} names {url:?}, which has no record"
                )));
            }
        };
        invite.uid = Some(uid.to_owned());
        invite.handed_at_ms = Some(now_ms);
        pool.remove((slug, number))?;
        invites.insert(url.as_str(), records::encode(&invite).as_slice())?;
        self.transaction
            .open_table(INVITES_HANDED)?
            .insert((now_ms, url.as_str()), ())?;
        state.handed_out += 1;
        states.insert(slug, records::encode(&state).as_slice())?;
        Ok(Some(url))
    }

    /// Puts invite links made for channel link `slug` of `space` into its pool.
    pub fn add_invites(
        &mut self,
        space: u32,
        slug: &str,
        urls: &[String],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut invites = self.transaction.open_table(INVITES)?;
        let mut pool = self.transaction.open_table(INVITE_POOL)?;
        let mut states = self.transaction.open_table(CHANNEL_STATES)?;
        let mut state = state_of(&states, slug)?;
        for url in urls {
            if invites.get(url.as_str())?.is_some() {
                continue;
            }
            let record = InviteRecord {
                space_no: space,
                slug: slug.to_owned(),
                created_at_ms: now_ms,
                uid: None,
                handed_at_ms: None,
                used_by: None,
                revoked_at_ms: None,
            };
            invites.insert(url.as_str(), records::encode(&record).as_slice())?;
            pool.insert((slug, state.next), url.as_str())?;
            state.next += 1;
            state.made += 1;
        }
        states.insert(slug, records::encode(&state).as_slice())?;
        Ok(())
    }

    /// Marks invite links revoked (or gone at Telegram): they are no longer waited on.
    pub fn invites_revoked(&mut self, urls: &[String], now_ms: u64) -> Result<(), StoreError> {
        let mut handed = self.transaction.open_table(INVITES_HANDED)?;
        let mut invites = self.transaction.open_table(INVITES)?;
        let mut states = self.transaction.open_table(CHANNEL_STATES)?;
        for url in urls {
            let Some(bytes) = invites.get(url.as_str())? else {
                continue;
            };
            let mut record: InviteRecord = records::decode(bytes.value())?;
            drop(bytes);
            if let Some(at) = record.handed_at_ms {
                handed.remove((at, url.as_str()))?;
            }
            if record.revoked_at_ms.is_none() {
                record.revoked_at_ms = Some(now_ms);
                let mut state = state_of(&states, &record.slug)?;
                state.revoked += 1;
                states.insert(record.slug.as_str(), records::encode(&state).as_slice())?;
            }
            invites.insert(url.as_str(), records::encode(&record).as_slice())?;
        }
        Ok(())
    }

    /// Applies a run of the bot of `space`'s updates and stores `next_offset`, the update to
    /// read next, if given (the poller's), in the same transaction: an update's effects are
    /// committed before it is acknowledged, and one read again after a crash finds them there
    /// and changes nothing.
    pub fn apply_updates(
        &mut self,
        space: u32,
        updates: &[ChannelUpdate],
        next_offset: Option<u64>,
        currency: &str,
        now_ms: u64,
    ) -> Result<UpdatesApplied, StoreError> {
        let mut applied = UpdatesApplied::default();
        for update in updates {
            match update {
                ChannelUpdate::Member {
                    chat_id,
                    tg_id,
                    was_member,
                    is_member,
                    invite_link,
                    at_ms,
                } => {
                    let times = (channel::happened_at(*at_ms, now_ms), now_ms);
                    let key = (space, *chat_id, *tg_id);
                    match channel::member_change(*was_member, *is_member) {
                        channel::MemberChange::Joined => {
                            let link = invite_link.as_deref();
                            self.joined(key, link, currency, times, &mut applied)?;
                        }
                        channel::MemberChange::Left => {
                            self.left(key, times.0, &mut applied)?;
                        }
                        channel::MemberChange::Other => {}
                    }
                }
                ChannelUpdate::JoinRequest {
                    chat_id,
                    tg_id,
                    invite_link,
                } => {
                    let mut members = self.transaction.open_table(CHANNEL_MEMBERS)?;
                    let key = (space, *chat_id, *tg_id);
                    let mut member: MemberRecord = match members.get(key)? {
                        Some(bytes) => records::decode(bytes.value())?,
                        None => MemberRecord::default(),
                    };
                    // The latest request is the one a join without a link answers.
                    if member.requested_via != *invite_link {
                        member.requested_via.clone_from(invite_link);
                        members.insert(key, records::encode(&member).as_slice())?;
                    }
                    applied.join_requests += 1;
                }
                ChannelUpdate::Other => {}
            }
        }
        if let Some(next_offset) = next_offset {
            self.transaction
                .open_table(TELEGRAM_OFFSETS)?
                .insert(space, next_offset)?;
        }
        Ok(applied)
    }

    /// User `tg_id` joined channel `chat_id` of `space`: counted once per change of membership;
    /// through an invite link of a link's pool (or one the user asked to join by), the link's
    /// click is bound to the user and a `subscribed` event is recorded, once per user and channel.
    fn joined(
        &mut self,
        (space, chat_id, tg_id): (u32, i64, u64),
        invite_link: Option<&str>,
        currency: &str,
        (at_ms, now_ms): (u64, u64),
        applied: &mut UpdatesApplied,
    ) -> Result<(), StoreError> {
        let key = (space, chat_id, tg_id);
        let mut member: MemberRecord = {
            let members = self.transaction.open_table(CHANNEL_MEMBERS)?;
            match members.get(key)? {
                Some(bytes) => records::decode(bytes.value())?,
                None => MemberRecord::default(),
            }
        };
        if member.member {
            // Seen already: the same update read again.
            return Ok(());
        }
        // A join answers the user's request, whatever link it names: the request is spent, and
        // a later join without a link (through search) is not credited to it.
        let requested_via = member.requested_via.take();
        let via = invite_link.map(str::to_owned).or(requested_via);
        let invite = match &via {
            Some(url) => match self.transaction.open_table(INVITES)?.get(url.as_str())? {
                Some(bytes) => Some(records::decode::<InviteRecord>(bytes.value())?),
                None => None,
            },
            None => None,
        }
        .filter(|i| i.space_no == space);
        // Never before the click took its invite link: Telegram's clock may run behind ours.
        let at_ms = invite
            .as_ref()
            .and_then(|i| i.handed_at_ms)
            .map_or(at_ms, |handed| at_ms.max(handed));
        member.member = true;
        member.joined_at_ms = at_ms;
        member.left_at_ms = None;
        let groups;
        if let Some(mut invite) = invite {
            let url = via.unwrap_or_default();
            let campaign = match &invite.uid {
                Some(uid) => {
                    let times = (at_ms, now_ms);
                    self.join_through(space, uid, tg_id, chat_id, currency, times, applied)?
                }
                None => None,
            };
            if invite.uid.is_none() {
                // Used while still in the pool (an admin posted it from the channel's list of
                // invite links): never handed to a click after, which would credit that click
                // with everyone who joins through it.
                self.take_out_of_pool(&invite.slug, &url)?;
            }
            // `used` counts invite links used, once each: not again when their user comes
            // back through the same link, nor for another user it was passed to.
            let first_use = invite.used_by.is_none();
            if first_use {
                invite.used_by = Some(tg_id);
                if let Some(at) = invite.handed_at_ms {
                    self.transaction
                        .open_table(INVITES_HANDED)?
                        .remove((at, url.as_str()))?;
                }
                self.transaction
                    .open_table(INVITES)?
                    .insert(url.as_str(), records::encode(&invite).as_slice())?;
            }
            let mut states = self.transaction.open_table(CHANNEL_STATES)?;
            let mut state = state_of(&states, &invite.slug)?;
            state.used += u64::from(first_use);
            state.joins += 1;
            states.insert(invite.slug.as_str(), records::encode(&state).as_slice())?;
            groups = channel_groups(Some(&invite.slug), campaign.as_deref());
            member.slug = Some(invite.slug);
            member.campaign_name = campaign;
            applied.joins += 1;
        } else {
            member.slug = None;
            member.campaign_name = None;
            applied.unattributed_joins += 1;
            groups = channel_groups(None, None);
        }
        self.transaction
            .open_table(CHANNEL_MEMBERS)?
            .insert(key, records::encode(&member).as_slice())?;
        self.count_channel(space, &groups, at_ms, (1, 0))
    }

    /// Removes invite link `url` from the pool of channel link `slug`, if it is there.
    fn take_out_of_pool(&mut self, slug: &str, url: &str) -> Result<(), StoreError> {
        let mut pool = self.transaction.open_table(INVITE_POOL)?;
        let mut found = None;
        for entry in pool.range((slug, 0)..=(slug, u64::MAX))? {
            let (key, value) = entry?;
            if value.value() == url {
                found = Some(key.value().1);
                break;
            }
        }
        if let Some(number) = found {
            pool.remove((slug, number))?;
        }
        Ok(())
    }

    /// Binds click `uid` to `tg_id` (the first binding wins) and records its `subscribed` event
    /// through the event path (attribution, dedup, stats, deliveries); answers the click's
    /// campaign.
    #[allow(clippy::too_many_arguments)]
    fn join_through(
        &mut self,
        space: u32,
        uid: &str,
        tg_id: u64,
        chat_id: i64,
        currency: &str,
        (at_ms, now_ms): (u64, u64),
        applied: &mut UpdatesApplied,
    ) -> Result<Option<String>, StoreError> {
        let campaign = match self.clicks.get((space, uid))? {
            Some(bytes) => records::decode::<ClickRecord>(bytes.value())?.campaign_name,
            // A click of this batch is in its buffer, not yet the table: no visit and join
            // of the same user can share a batch (the invite link is answered after it).
            None => None,
        };
        self.bind(space, uid, tg_id, at_ms)?;
        let event = ValidEvent {
            kind: EventKind::Subscribed,
            uid: Some(uid.to_owned()),
            tg_id: Some(tg_id),
            value: None,
            currency: currency.to_owned(),
            eid: Some(channel::subscribed_eid(chat_id, tg_id)),
            occurred_at_ms: at_ms,
            time_supplied: false,
            received_at_ms: now_ms,
            source: Source::Telegram,
        };
        let key = dedup::dedup_key(&event, 0);
        if !self.record_event(space, event, key)?.duplicate {
            applied.subscribed += 1;
        }
        Ok(campaign)
    }

    /// User `tg_id` left channel `chat_id` (or was removed): a leave of the link the user
    /// joined through, counted once per change of membership.
    fn left(
        &mut self,
        key: (u32, i64, u64),
        now_ms: u64,
        applied: &mut UpdatesApplied,
    ) -> Result<(), StoreError> {
        let mut members = self.transaction.open_table(CHANNEL_MEMBERS)?;
        let mut member: MemberRecord = match members.get(key)? {
            Some(bytes) => records::decode(bytes.value())?,
            // A member from before the tracker: its leave counts for the channel alone.
            None => MemberRecord {
                member: true,
                ..MemberRecord::default()
            },
        };
        if !member.member {
            return Ok(());
        }
        member.member = false;
        member.left_at_ms = Some(now_ms);
        members.insert(key, records::encode(&member).as_slice())?;
        drop(members);
        if let Some(slug) = &member.slug {
            let mut states = self.transaction.open_table(CHANNEL_STATES)?;
            let mut state = state_of(&states, slug)?;
            state.leaves += 1;
            states.insert(slug.as_str(), records::encode(&state).as_slice())?;
        }
        let groups = channel_groups(member.slug.as_deref(), member.campaign_name.as_deref());
        applied.leaves += 1;
        self.count_channel(key.0, &groups, now_ms, (0, 1))
    }

    /// Adds `(joins, leaves)` to each group's row of the quarter of `at_ms`.
    fn count_channel(
        &mut self,
        space: u32,
        groups: &[(u8, String)],
        at_ms: u64,
        (joins, leaves): (u64, u64),
    ) -> Result<(), StoreError> {
        let mut table = self.transaction.open_table(CHANNEL_STATS)?;
        let quarter = quarter_of(at_ms);
        for (dimension, group) in groups {
            let key = (space, *dimension, group.as_str(), quarter);
            let (j, l) = table.get(key)?.map_or((0, 0), |v| v.value());
            table.insert(key, (j + joins, l + leaves))?;
        }
        Ok(())
    }
}

/// The `CHANNEL_STATS` groups (dimension code, group) a join or leave counts in, as `STATS` keys
/// a click's: the whole space; and through a channel link, the link, its campaign (`""` for
/// none) and the link within the campaign (a campaign's drill-down).
fn channel_groups(slug: Option<&str>, campaign: Option<&str>) -> Vec<(u8, String)> {
    let mut groups = vec![(Dimension::Day.code(), String::new())];
    if let Some(slug) = slug {
        let campaign = campaign.unwrap_or_default();
        groups.push((Dimension::Link.code(), slug.to_owned()));
        groups.push((Dimension::Campaign.code(), campaign.to_owned()));
        // As `STATS`: a campaign's drill-down rows only for a click with a campaign.
        if let Some(code) = Dimension::Link
            .in_campaign_code()
            .filter(|_| !campaign.is_empty())
        {
            groups.push((code, rollup::in_campaign(campaign, slug)));
        }
    }
    groups
}

impl Snapshot {
    /// Up to `limit` invite links of the spaces `of_space` takes, handed out before `before_ms` and
    /// never used: to revoke. A read: the pool's loop asks every second, and an idle server must not
    /// commit (and flush) for it.
    pub fn invites_to_revoke(
        &self,
        before_ms: u64,
        limit: usize,
        of_space: impl Fn(u32) -> bool,
    ) -> Result<Vec<(u32, String, String)>, StoreError> {
        let handed = self.txn.open_table(INVITES_HANDED)?;
        let invites = self.txn.open_table(INVITES)?;
        let mut out = Vec::new();
        for entry in handed.range((0, "")..(before_ms, ""))? {
            if out.len() == limit {
                break;
            }
            let (key, _) = entry?;
            let url = key.value().1;
            if let Some(bytes) = invites.get(url)? {
                let record: InviteRecord = records::decode(bytes.value())?;
                // A space passed over (its bot asked to wait) never holds the others back.
                if of_space(record.space_no) {
                    out.push((record.space_no, record.slug, url.to_owned()));
                }
            }
        }
        Ok(out)
    }

    /// The counts and pool of channel link `slug`.
    pub fn channel_counts(&self, slug: &str) -> Result<ChannelCounts, StoreError> {
        let state = match self.txn.open_table(CHANNEL_STATES)?.get(slug)? {
            Some(bytes) => records::decode(bytes.value())?,
            None => ChannelStateRecord::default(),
        };
        let pool = self
            .txn
            .open_table(INVITE_POOL)?
            .range((slug, 0)..=(slug, u64::MAX))?
            .count() as u64;
        Ok(ChannelCounts { state, pool })
    }

    /// The next update of `space`'s bot to read.
    pub fn telegram_offset(&self, space: u32) -> Result<u64, StoreError> {
        Ok(self
            .txn
            .open_table(TELEGRAM_OFFSETS)?
            .get(space)?
            .map_or(0, |v| v.value()))
    }
}

/// Calls `each` with the group, quarter and `(joins, leaves)` of each of `space`'s channel rows
/// of dimension `code` in the quarters `[from, to)`: of the one group `group` names, or of the
/// groups that begin with `prefix` (every group of the dimension for `""`).
pub fn each_channel_row(
    s: &Snapshot,
    (space, code): (u32, u8),
    group: ChannelGroups<'_>,
    (from, to): (u32, u32),
    mut each: impl FnMut(&str, u32, (u64, u64)),
) -> Result<(), StoreError> {
    let table = s.txn.open_table(CHANNEL_STATS)?;
    match group {
        ChannelGroups::One(group) => {
            for entry in
                table.range((space, code, group, from)..(space, code, group, to.max(from)))?
            {
                let (key, value) = entry?;
                each(group, key.value().3, value.value());
            }
        }
        ChannelGroups::Prefixed(prefix) => {
            use std::ops::Bound;
            // One seek per group, then its rows in the range: the history before and after
            // the range is not read.
            let end = Bound::Excluded((space, code + 1, "", 0));
            let mut previous: Option<String> = None;
            loop {
                let start = match &previous {
                    None => Bound::Included((space, code, prefix, 0)),
                    Some(group) => Bound::Excluded((space, code, group.as_str(), u32::MAX)),
                };
                let Some(first) = table.range::<(u32, u8, &str, u32)>((start, end))?.next() else {
                    break;
                };
                let group = first?.0.value().2.to_owned();
                if !group.starts_with(prefix) {
                    break;
                }
                let g = group.as_str();
                for entry in table.range((space, code, g, from)..(space, code, g, to.max(from)))? {
                    let (key, value) = entry?;
                    each(g, key.value().3, value.value());
                }
                previous = Some(group);
            }
        }
    }
    Ok(())
}

/// Which groups of a dimension [`each_channel_row`] reads.
#[derive(Clone, Copy, Debug)]
pub enum ChannelGroups<'a> {
    One(&'a str),
    Prefixed(&'a str),
}
