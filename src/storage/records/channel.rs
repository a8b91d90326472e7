//! The records of Telegram channels (schema 16): an invite link the tracker made, a user's
//! membership of a channel, and a channel link's counts.

use serde::{Deserialize, Serialize};

use super::codec::Record;

/// An invite link the tracker made (`INVITES`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct InviteRecord {
    pub space_no: u32,
    /// The link it was made for.
    pub slug: String,
    pub created_at_ms: u64,
    /// The click it was handed to, and when.
    pub uid: Option<String>,
    pub handed_at_ms: Option<u64>,
    /// The user who joined (or asked to) through it.
    pub used_by: Option<u64>,
    pub revoked_at_ms: Option<u64>,
}
impl Record for InviteRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "invite";
}

/// A user's membership of a channel (`CHANNEL_MEMBERS`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberRecord {
    /// In the channel now, as the last update said.
    pub member: bool,
    /// The link (and its click's campaign) of the user's first join through one of the
    /// tracker's invite links; `None` for a join the tracker cannot attribute.
    pub slug: Option<String>,
    pub campaign_name: Option<String>,
    pub joined_at_ms: u64,
    pub left_at_ms: Option<u64>,
    /// The invite link of the user's latest request to join (`None` for one through no link),
    /// until the join that follows.
    pub requested_via: Option<String>,
}
impl Record for MemberRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "channel member";
}

/// A channel link's counts (`CHANNEL_STATES`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelStateRecord {
    /// The number the next invite link made goes under in `INVITE_POOL`.
    pub next: u64,
    pub made: u64,
    pub handed_out: u64,
    pub used: u64,
    pub fallbacks: u64,
    pub joins: u64,
    pub leaves: u64,
    pub revoked: u64,
}
impl Record for ChannelStateRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "channel state";
}
