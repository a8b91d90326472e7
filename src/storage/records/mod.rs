//! Stored record layouts: a version byte, then the record's body.
//!
//! A body is the record's `postcard` encoding unless the record says otherwise. `postcard` has a
//! documented, stable wire format (varint integers, length-prefixed strings), so a file written
//! today reads the same in any later release. A new shape of a record is a new version byte, read
//! beside the old one, or a numbered migration (`open.rs`).
//!
//! A file per family of records: `codec.rs` (the [`Record`] trait, [`encode`] and [`decode`]),
//! `event.rs` (the inbox's events and their packed layout), `stats.rs` (rollup rows and costs,
//! read in place), `space.rs` (spaces, credentials, settings, links, rejections), `channel.rs` (Telegram channels'
//! invite links, members and counts), `click.rs`
//! (clicks, Telegram touches, client hints), `delivery.rs` (destinations and their deliveries), `user.rs` (the admin page's users).

mod channel;
mod click;
mod codec;
mod delivery;
mod event;
mod space;
mod stats;
mod user;

pub use self::channel::{ChannelStateRecord, InviteRecord, MemberRecord};
pub use self::click::{ClickHintsRecord, ClickRecord, TgTouchRecord};
pub use self::codec::{Record, decode, encode};
pub use self::delivery::{
    DeliveryRecord, DeliveryStateRecord, DestinationRecord, DestinationRecordV3, LastErrorRecord,
};
pub use self::event::{EventRecord, EventRecordV1};
pub use self::space::{
    ChannelRecord, CredentialRecord, LinkRecord, RejectionRecord, SpaceRecord, SpaceSettingsRecord,
    SplitRecord, SplitTargetRecord,
};
pub use self::stats::{
    CostRecord, CostRow, CostSumRecord, CostSumRow, StatsRecord, StatsRecordV1, StatsRow,
    with_cost_row, with_cost_sum_row, with_stats_row,
};
pub use self::user::{AuditRecord, SecondFactorRecord, UserRecord};
