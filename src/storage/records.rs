//! Stored record layouts: a version byte, then the record's `postcard` encoding.
//!
//! `postcard` has a documented, stable wire format (varint integers, length-prefixed strings), so
//! a file written today reads the same in any later release. A new shape of a record is a new
//! version byte, read beside the old one, or a numbered migration (`open.rs`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::storage::StoreError;

/// A record type and the version byte in front of its current encoding.
pub trait Record: Serialize + DeserializeOwned {
    const VERSION: u8;
    const NAME: &'static str;
}

/// # Panics
/// Never: serialising into a `Vec` cannot fail.
#[must_use]
pub fn encode<R: Record>(record: &R) -> Vec<u8> {
    let mut out = vec![R::VERSION];
    // Serialising a plain struct into a Vec cannot fail.
    postcard::to_io(record, &mut out).expect("postcard encoding into a Vec");
    out
}

pub fn decode<R: Record>(bytes: &[u8]) -> Result<R, StoreError> {
    match bytes.split_first() {
        Some((&v, body)) if v == R::VERSION => postcard::from_bytes(body)
            .map_err(|e| StoreError::Corrupt(format!("{} record does not decode: {e}", R::NAME))),
        Some((&v, _)) => Err(StoreError::Corrupt(format!(
            "{} record has version {v}, this binary reads version {}",
            R::NAME,
            R::VERSION
        ))),
        None => Err(StoreError::Corrupt(format!("{} record is empty", R::NAME))),
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SpaceRecord {
    pub no: u32,
    pub created_at_ms: u64,
}
impl Record for SpaceRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "space";
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CredentialRecord {
    pub space_no: u32,
    /// `credential::Kind` as its stored discriminant.
    pub kind: u8,
    /// The prefix and first characters, safe to show (`trk_sk_AbCd`).
    pub public_prefix: String,
    pub created_at_ms: u64,
    /// Set when a rotation replaced it: accepted until then.
    pub valid_until_ms: Option<u64>,
    pub revoked_at_ms: Option<u64>,
    pub last_used_ms: u64,
}
impl Record for CredentialRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "credential";
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// `EventKind` as its stored discriminant.
    pub kind: u8,
    pub uid: Option<String>,
    /// The exact decimal text, as the caller wrote it (leading zeros aside).
    pub value: Option<String>,
    pub currency: String,
    pub eid: Option<String>,
    pub occurred_at_ms: u64,
    pub time_supplied: bool,
    pub received_at_ms: u64,
    /// Whether `uid` named a click of the space when the event was stored.
    pub matched: bool,
}
impl Record for EventRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "event";
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ClickRecord {
    pub link_slug: Option<String>,
    pub fbclid: Option<String>,
    pub campaign_name: Option<String>,
    pub raw_query: Option<String>,
    pub clicked_at_ms: u64,
    /// The Telegram user the click is bound to: set once, by compare-and-set.
    pub tg_id: Option<u64>,
    pub bound_at_ms: Option<u64>,
}
impl Record for ClickRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "click";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_version_check() {
        let r = EventRecord {
            kind: 4,
            uid: Some("abc".into()),
            value: Some("12.10".into()),
            currency: "USD".into(),
            eid: None,
            occurred_at_ms: 1_800_000_000_000,
            time_supplied: false,
            received_at_ms: 1_800_000_000_000,
            matched: true,
        };
        let bytes = encode(&r);
        assert_eq!(bytes[0], 1);
        assert_eq!(decode::<EventRecord>(&bytes).unwrap(), r);
        let mut newer = bytes.clone();
        newer[0] = 2;
        assert!(decode::<EventRecord>(&newer).is_err());
        assert!(decode::<EventRecord>(&[]).is_err());
    }

    /// Pins the wire format: if this fails, stored files from earlier builds no longer read.
    #[test]
    fn space_record_bytes_are_stable() {
        let bytes = encode(&SpaceRecord {
            no: 3,
            created_at_ms: 300,
        });
        assert_eq!(bytes, vec![1, 3, 0xAC, 0x02]);
    }
}
