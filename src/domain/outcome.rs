//! What the storage operations answer, in the domain's words: the result of recording an event,
//! back-filling a click, binding one, and changing credentials.
//!
//! These are the values the writer decides inside its transaction; the operations (`app`) and
//! every way in above them turn them into answers. They live here, not in `storage`, so that nothing above
//! storage imports the writer to name a result.

use crate::domain::credential::{self, CredentialDigest, Kind};
use crate::domain::event::{AttributedBy, EventId};

/// What storing one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventOutcome {
    /// The event repeated an earlier one under its dedup key; nothing new was stored.
    pub duplicate: bool,
    /// The new event's place in the inbox, or the earlier event's for a duplicate.
    pub inbox_id: u64,
    /// The new event's identity, or the earlier event's for a duplicate.
    pub event_id: EventId,
    /// Whether it is attributed to a click of the space.
    pub matched: bool,
    /// How: by its `uid`, or by its Telegram id; `None` when no click was found.
    pub attributed_by: Option<AttributedBy>,
}

/// What a back-fill did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickOutcome {
    pub uid: String,
    /// `false` when an existing click with the same `fbclid` was answered.
    pub created: bool,
}

/// What a compare-and-set binding found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindOutcome {
    /// No click with that uid in the space; nothing stored.
    Unmatched,
    /// The click is bound to `tg_id`; `conflict` if that was another id than the one asked for.
    Bound { tg_id: u64, conflict: bool },
}

/// A credential about to be stored: never its text, only its digest and public prefix.
#[derive(Clone, Debug)]
pub struct NewCredential {
    pub kind: Kind,
    pub digest: CredentialDigest,
    pub public_prefix: String,
}

impl From<&credential::Issued> for NewCredential {
    fn from(c: &credential::Issued) -> Self {
        NewCredential {
            kind: c.kind,
            digest: c.digest,
            public_prefix: c.public_prefix().to_owned(),
        }
    }
}

/// Where a sweep of retention stands: the last windowed dedup entry looked at, as
/// `(generation, space, rule, digest)`; the next step starts after it.
pub type PruneCursor = (u32, u32, u8, u128);

/// What one step of retention did (`Store::prune_dedup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneStep {
    /// Windowed entries looked at.
    pub scanned: u64,
    /// Of those, the expired ones removed.
    pub removed: u64,
    /// Where the next step starts; `None` when this one reached the end of the table.
    pub next: Option<PruneCursor>,
}
