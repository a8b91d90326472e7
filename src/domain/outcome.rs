//! What the storage operations answer, in the domain's words: the result of recording an event,
//! back-filling a click, binding one, and changing credentials.
//!
//! These are the values the writer decides inside its transaction; `app`, `admin` and the HTTP
//! handlers turn them into answers. They live here, not in `storage`, so that nothing above
//! storage imports the writer to name a result.

use crate::domain::credential::{self, CredentialDigest, Kind};

/// What storing one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventOutcome {
    /// The event repeated an earlier one under its dedup key; nothing new was stored.
    pub duplicate: bool,
    /// The new event's id, or the earlier event's for a duplicate.
    pub inbox_id: u64,
    /// Whether its `uid` names a click of the space.
    pub matched: bool,
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
