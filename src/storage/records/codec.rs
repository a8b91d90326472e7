//! The [`Record`] trait every stored record implements: a version byte, then the body of that
//! version, `postcard` unless the record writes its own; [`encode`] and [`decode`], and the
//! helpers a record's own decoding shares (a `postcard` body that fills the record exactly, the
//! error for a version this binary does not read).

use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::storage::error::StoreError;

/// A record type, the version byte in front of its current encoding, and how its body is written
/// and read (`postcard`, unless the type overrides `encode_body` and `decode_body`).
pub trait Record: Serialize + DeserializeOwned {
    /// The newest version `encode` writes.
    const VERSION: u8;
    const NAME: &'static str;

    /// The version this record is written as: `VERSION`, unless the type writes a record that
    /// does not use its newest field as the older version it still is (so that it keeps its
    /// bytes, and an older release still reads it).
    fn version(&self) -> u8 {
        Self::VERSION
    }

    /// Appends the body of version `VERSION` to `out`.
    ///
    /// # Panics
    /// Never: serialising into a `Vec` cannot fail.
    fn encode_body(&self, out: &mut Vec<u8>) {
        postcard::to_io(self, out).expect("postcard encoding into a Vec");
    }

    /// Reads a body written under `version`.
    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        if version == Self::VERSION {
            from_postcard(body)
        } else {
            Err(unreadable_version::<Self>(version))
        }
    }
}

#[must_use]
pub fn encode<R: Record>(record: &R) -> Vec<u8> {
    let mut out = vec![record.version()];
    record.encode_body(&mut out);
    out
}

pub fn decode<R: Record>(bytes: &[u8]) -> Result<R, StoreError> {
    match bytes.split_first() {
        Some((&version, body)) => R::decode_body(version, body),
        None => Err(StoreError::Corrupt(format!("{} record is empty", R::NAME))),
    }
}

/// A `postcard` body that must fill the record exactly: bytes after it mean damage.
pub(super) fn from_postcard<R: Record>(body: &[u8]) -> Result<R, StoreError> {
    postcard_in_place(R::NAME, body)
}

/// [`from_postcard`] for a view that borrows its text from `body` (`name`: the record's).
pub(super) fn postcard_in_place<'a, T: Deserialize<'a>>(
    name: &str,
    body: &'a [u8],
) -> Result<T, StoreError> {
    let corrupt =
        |what: String| StoreError::Corrupt(format!("{name} record does not decode: {what}"));
    match postcard::take_from_bytes(body) {
        Ok((record, [])) => Ok(record),
        Ok((_, rest)) => Err(corrupt(format!("{} bytes after its end", rest.len()))),
        Err(e) => Err(corrupt(e.to_string())),
    }
}

pub(super) fn unreadable_version<R: Record>(found: u8) -> StoreError {
    StoreError::Corrupt(format!(
        "{} record has version {found}, which this binary does not read (it writes version {})",
        R::NAME,
        R::VERSION
    ))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::storage::records::SpaceRecord;

    /// A time the golden records are written at.
    pub(crate) const T: u64 = 1_773_500_000_000;

    /// `encode` gives exactly `bytes`, and `decode` gives `record` back from them.
    pub(crate) fn assert_golden<R: Record + std::fmt::Debug + PartialEq>(record: &R, bytes: &[u8]) {
        assert_eq!(encode(record), bytes, "{} record encoding changed", R::NAME);
        assert_eq!(&decode::<R>(bytes).unwrap(), record);
    }

    #[test]
    fn space_record_round_trips_and_versions_are_checked() {
        let r = SpaceRecord {
            no: 7,
            created_at_ms: 1_800_000_000_000,
        };
        let bytes = encode(&r);
        assert_eq!(bytes[0], 1);
        assert_eq!(decode::<SpaceRecord>(&bytes).unwrap(), r);
        let mut newer = bytes.clone();
        newer[0] = 2;
        assert!(decode::<SpaceRecord>(&newer).is_err());
        assert!(decode::<SpaceRecord>(&[]).is_err());
        let mut longer = bytes;
        longer.push(0);
        assert!(decode::<SpaceRecord>(&longer).is_err());
    }
}
