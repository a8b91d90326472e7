//! The records of a space and what belongs to it: the space itself, its credentials, its
//! settings, its tracking links, and its log of rejected requests.

use serde::{Deserialize, Serialize};

use super::codec::Record;
use crate::domain::rejection::Rejection;

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

/// One rejected request (`REJECTIONS`), with its number in the space's log. `postcard` writes a
/// nested struct as its fields in order with nothing around them, so this is the number followed
/// by `Rejection`'s fields: `domain::rejection::Rejection` is part of the stored layout, and the
/// golden test below fails on any change to it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct RejectionRecord {
    pub number: u64,
    pub rejection: Rejection,
}
impl Record for RejectionRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "rejection";
}

/// A tracking link (`LINKS`). Exactly one of `bot`, `target` and `channel` is set.
///
/// Version 2 added `channel` at the end; a version 1 body is a version 2 body without it, which
/// `postcard` reads as `None` once the one byte of a `None` is put after it. Version 3 added
/// `allowed_origins` after it, which reads as empty from the one byte of an empty list.
/// Version 4 (schema 20), written only for a split link, adds `split` after them; a link
/// without one stays version 3 (its body is version 4's without the last byte, `None`). A
/// split link's `bot` or `target` is its first target's.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    pub space_no: u32,
    pub bot: Option<String>,
    pub target: Option<String>,
    pub campaign_name: Option<String>,
    /// 0 redirect, 1 page.
    pub mode: u8,
    pub created_at_ms: u64,
    pub deleted_at_ms: Option<u64>,
    pub channel: Option<ChannelRecord>,
    pub allowed_origins: Vec<String>,
    pub split: Option<SplitRecord>,
}
impl Record for LinkRecord {
    const VERSION: u8 = 4;
    const NAME: &'static str = "link";

    fn version(&self) -> u8 {
        if self.split.is_some() { 4 } else { 3 }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        postcard::to_io(self, &mut *out).expect("postcard encoding into a Vec");
        if self.split.is_none() {
            // Version 3's body: without the `None` of the split.
            out.pop();
        }
    }

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, crate::storage::error::StoreError> {
        match version {
            1..=3 => {
                let mut v4 = body.to_vec();
                // The `None` of a channel, the empty list of origins, the `None` of a split.
                v4.extend_from_slice(&[0, 0, 0][usize::from(version - 1)..]);
                super::codec::from_postcard(&v4)
            }
            4 => super::codec::from_postcard(body),
            other => Err(super::codec::unreadable_version::<Self>(other)),
        }
    }
}

/// The channel of a channel link (`domain::channel::Channel`), as stored in its [`LinkRecord`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ChannelRecord {
    pub chat: String,
    pub chat_id: i64,
    pub title: String,
    pub join_requests: bool,
    pub fallback: String,
}

/// A split link's targets and fallback (`domain::split::Split`), in its [`LinkRecord`]: each
/// a bot or a target URL, and a target's weight (0 for the fallback).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SplitRecord {
    pub targets: Vec<SplitTargetRecord>,
    pub fallback: Option<SplitTargetRecord>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SplitTargetRecord {
    pub bot: Option<String>,
    pub target: Option<String>,
    pub weight: u32,
}

/// A space's settings (`SPACE_SETTINGS`): each setting by name, its value as text, as
/// `domain::settings` writes and reads them. Stored by name so that a new setting is no new
/// layout: a record without it reads as its default.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct SpaceSettingsRecord {
    pub values: Vec<(String, String)>,
}
impl Record for SpaceSettingsRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "space settings";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::codec::tests::{T, assert_golden};
    use crate::storage::records::encode;

    /// A link of version 1 (before channels) reads as a link without a channel, and one of
    /// version 2 as a link without allowed origins; version 3 is version 1's body, the channel
    /// (one `0` byte for none) and the origins (their count, then each).
    #[test]
    fn link_records_of_versions_1_and_2_still_read() {
        use crate::storage::records::decode;
        let record = LinkRecord {
            space_no: 7,
            bot: Some("ab".into()),
            target: None,
            campaign_name: None,
            mode: 1,
            created_at_ms: 5,
            deleted_at_ms: None,
            channel: None,
            allowed_origins: Vec::new(),
            split: None,
        };
        let v1 = [1, 7, 1, 2, b'a', b'b', 0, 0, 1, 5, 0];
        assert_eq!(decode::<LinkRecord>(&v1).unwrap(), record);
        let v2 = [2, 7, 1, 2, b'a', b'b', 0, 0, 1, 5, 0, 0];
        assert_eq!(decode::<LinkRecord>(&v2).unwrap(), record);
        assert_eq!(
            encode(&record),
            [3, 7, 1, 2, b'a', b'b', 0, 0, 1, 5, 0, 0, 0]
        );
        let with_origin = LinkRecord {
            allowed_origins: vec!["https://a.io".into()],
            ..record
        };
        #[rustfmt::skip]
        let v3 = [
            3, 7, 1, 2, b'a', b'b', 0, 0, 1, 5, 0, 0,
            1, 12, b'h', b't', b't', b'p', b's', b':', b'/', b'/', b'a', b'.', b'i', b'o',
        ];
        assert_eq!(encode(&with_origin), v3);
        assert_eq!(decode::<LinkRecord>(&v3).unwrap(), with_origin);
        assert!(decode::<LinkRecord>(&[5, 7]).is_err());
        assert!(decode::<LinkRecord>(&[1, 7, 1, 2, b'a', b'b', 0, 0, 1, 5, 0, 0]).is_err());
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

    /// Pins the `postcard` records (version byte 1): a change of field order, type or encoding
    /// fails here before it reaches a data file.
    #[test]
    fn space_and_credential_record_bytes_are_stable() {
        #[rustfmt::skip]
        let space = [
            1, // version
            240, 162, 4, // no: 70000, a three-byte varint
            128, 206, 217, 230, 206, 51, // created_at_ms
        ];
        assert_golden(
            &SpaceRecord {
                no: 70_000,
                created_at_ms: T,
            },
            &space,
        );
        #[rustfmt::skip]
        let credential = [
            1, // version
            3, // space_no
            1, // kind
            11, b't', b'r', b'k', b'_', b's', b'k', b'_', b'A', b'b', b'C', b'd', // public_prefix
            128, 206, 217, 230, 206, 51, // created_at_ms
            1, 128, 134, 243, 143, 207, 51, // valid_until_ms: Some(T + 1 day)
            0, // revoked_at_ms: None
            136, 245, 217, 230, 206, 51, // last_used_ms: T + 5000
        ];
        assert_golden(
            &CredentialRecord {
                space_no: 3,
                kind: 1,
                public_prefix: "trk_sk_AbCd".into(),
                created_at_ms: T,
                valid_until_ms: Some(T + 86_400_000),
                revoked_at_ms: None,
                last_used_ms: T + 5_000,
            },
            &credential,
        );
    }

    /// Pins the rejection log's record (`REJECTIONS`): its number, then the refused request's
    /// fields in order, as `postcard` writes them.
    #[test]
    fn rejection_record_bytes_are_stable() {
        #[rustfmt::skip]
        let with_field = [
            &[1][..], // version
            &[233, 7], // number: 1001
            &[128, 206, 217, 230, 206, 51], // at_ms
            &[3], b"GET", // method
            &[2], b"/e", // endpoint
            &[166, 3], // http_status: 422
            &[13], b"invalid_value", // status
            &[1, 5], b"value", // field: Some
            &[30], b"value must be a decimal number", // error
            &[0], // query: None
        ]
        .concat();
        assert_golden(
            &RejectionRecord {
                number: 1001,
                rejection: Rejection {
                    at_ms: T,
                    method: "GET".into(),
                    endpoint: "/e".into(),
                    http_status: 422,
                    status: "invalid_value".into(),
                    field: Some("value".into()),
                    error: "value must be a decimal number".into(),
                    query: None,
                },
            },
            &with_field,
        );
        #[rustfmt::skip]
        let with_query = [
            &[1][..], // version
            &[0], // number: 0
            &[128, 206, 217, 230, 206, 51], // at_ms
            &[4], b"POST", // method
            &[7], b"/events", // endpoint
            &[145, 3], // http_status: 401
            &[12], b"unauthorized", // status
            &[0], // field: None
            &[13], b"no credential", // error
            &[1, 20], b"token=[redacted]&x=1", // query: Some
        ]
        .concat();
        assert_golden(
            &RejectionRecord {
                number: 0,
                rejection: Rejection {
                    at_ms: T,
                    method: "POST".into(),
                    endpoint: "/events".into(),
                    http_status: 401,
                    status: "unauthorized".into(),
                    field: None,
                    error: "no credential".into(),
                    query: Some("token=[redacted]&x=1".into()),
                },
            },
            &with_query,
        );
    }
}
