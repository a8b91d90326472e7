//! The records of a click and what hangs on it: the click (`CLICKS`), each Telegram user's
//! first and last bound click (`TG_TOUCHES`), and the visitor's client hints (`CLICK_HINTS`).

use serde::{Deserialize, Serialize};

use super::codec::{Record, from_postcard, postcard_in_place, unreadable_version};
use crate::domain::click::{AD_CLICK_IDS, ClickIds, FBP_TAG};
use crate::storage::error::StoreError;

/// A click. Version 1 is the `postcard` encoding of its first seven fields; version 2 (schema
/// 13) is the same, then the ids the click brought besides `fbclid` as a `postcard` sequence of
/// tagged ids (`OtherId`), usually empty (one byte), so a click without them grows by one byte
/// only, and a new ad platform's id is a new tag (`click::AD_CLICK_IDS`), not a new version.
/// Version 3 (schema 20), written only for a click of a split link, is version 2's body, then
/// `1` and the variant's byte (`postcard`'s `Some(u8)`); a click without a variant stays
/// version 2.
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
    /// The ad platforms' click ids and Meta's browser id, from a prelander (version 2).
    pub ids: ClickIds,
    /// The target of a split link the click went to (version 3).
    pub variant: Option<u8>,
}
impl Record for ClickRecord {
    const VERSION: u8 = 3;
    const NAME: &'static str = "click";

    fn version(&self) -> u8 {
        if self.variant.is_some() { 3 } else { 2 }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        let mut others: Vec<OtherId<'_>> = AD_CLICK_IDS
            .iter()
            .filter_map(|id| Some(OtherId(id.tag, self.ids.get(id.name)?)))
            .chain(self.ids.fbp.as_deref().map(|fbp| OtherId(FBP_TAG, fbp)))
            .collect();
        others.sort_unstable_by_key(|id| id.0);
        let wire = ClickWire {
            link_slug: self.link_slug.as_deref(),
            fbclid: self.fbclid.as_deref(),
            campaign_name: self.campaign_name.as_deref(),
            raw_query: self.raw_query.as_deref(),
            clicked_at_ms: self.clicked_at_ms,
            tg_id: self.tg_id,
            bound_at_ms: self.bound_at_ms,
            others,
        };
        postcard::to_io(&wire, &mut *out).expect("postcard encoding into a Vec");
        if let Some(variant) = self.variant {
            out.extend([1, variant]);
        }
    }

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        match version {
            1 => Ok(from_postcard::<ClickRecordV1>(body)?.into()),
            3 => match body.split_last_chunk::<2>() {
                Some((v2, [1, variant])) => Ok(ClickRecord {
                    variant: Some(*variant),
                    ..Self::decode_body(2, v2)?
                }),
                _ => Err(StoreError::Corrupt(
                    "click record does not decode: version 3 without its variant".into(),
                )),
            },
            2 => {
                let wire: ClickWire<'_> = postcard_in_place(Self::NAME, body)?;
                let mut record = ClickRecord {
                    link_slug: wire.link_slug.map(str::to_owned),
                    fbclid: wire.fbclid.map(str::to_owned),
                    campaign_name: wire.campaign_name.map(str::to_owned),
                    raw_query: wire.raw_query.map(str::to_owned),
                    clicked_at_ms: wire.clicked_at_ms,
                    tg_id: wire.tg_id,
                    bound_at_ms: wire.bound_at_ms,
                    ..ClickRecord::default()
                };
                let corrupt =
                    |why: &str| StoreError::Corrupt(format!("click record does not decode: {why}"));
                for OtherId(tag, text) in wire.others {
                    let twice = if tag == FBP_TAG {
                        record.ids.fbp.replace(text.to_owned()).is_some()
                    } else {
                        let id = AD_CLICK_IDS
                            .iter()
                            .find(|id| id.tag == tag)
                            .ok_or_else(|| corrupt(&format!("an id of unknown tag {tag}")))?;
                        record
                            .ids
                            .ad
                            .insert(id.name.to_owned(), text.to_owned())
                            .is_some()
                    };
                    if twice {
                        return Err(corrupt("an id twice"));
                    }
                }
                Ok(record)
            }
            v => Err(unreadable_version::<Self>(v)),
        }
    }
}

/// The body of a click record of version 2, borrowed from the bytes it is read from.
#[derive(Serialize, Deserialize)]
struct ClickWire<'a> {
    #[serde(borrow)]
    link_slug: Option<&'a str>,
    #[serde(borrow)]
    fbclid: Option<&'a str>,
    #[serde(borrow)]
    campaign_name: Option<&'a str>,
    #[serde(borrow)]
    raw_query: Option<&'a str>,
    clicked_at_ms: u64,
    tg_id: Option<u64>,
    bound_at_ms: Option<u64>,
    #[serde(borrow)]
    others: Vec<OtherId<'a>>,
}

/// One id of a click besides `fbclid`, in a click record of version 2: its tag (a varint:
/// [`AdClickId::tag`](crate::domain::click::AdClickId), 4 `fbp`) and its text, as `postcard`
/// writes an enum's variant, which the first release of version 2 was. The tags are stored:
/// never renumber them.
#[derive(Serialize, Deserialize)]
struct OtherId<'a>(u32, #[serde(borrow)] &'a str);

/// A click as version 1 stored it, before the other ad platforms' ids.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ClickRecordV1 {
    pub link_slug: Option<String>,
    pub fbclid: Option<String>,
    pub campaign_name: Option<String>,
    pub raw_query: Option<String>,
    pub clicked_at_ms: u64,
    pub tg_id: Option<u64>,
    pub bound_at_ms: Option<u64>,
}
impl Record for ClickRecordV1 {
    const VERSION: u8 = 1;
    const NAME: &'static str = "click";
}

impl From<ClickRecordV1> for ClickRecord {
    fn from(r: ClickRecordV1) -> Self {
        ClickRecord {
            link_slug: r.link_slug,
            fbclid: r.fbclid,
            campaign_name: r.campaign_name,
            raw_query: r.raw_query,
            clicked_at_ms: r.clicked_at_ms,
            tg_id: r.tg_id,
            bound_at_ms: r.bound_at_ms,
            ..ClickRecord::default()
        }
    }
}

/// The first and the last click bound to one Telegram user in a space (`TG_TOUCHES`), by
/// binding time (ties by uid), each with when it was bound: what an event that names the user
/// by Telegram id is attributed to, in one read (`storage/attribution.rs`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TgTouchRecord {
    pub first_uid: String,
    pub first_bound_at_ms: u64,
    pub last_uid: String,
    pub last_bound_at_ms: u64,
}
impl Record for TgTouchRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "tg touch";
}

/// What a link visit's request told about the visitor (or a prelander sent with `POST
/// /clicks`), kept for Meta's matching only in spaces that opted in (`meta_client_hints`), and
/// only for 7 days after the click (`CLICK_HINTS`). Version 2 (schema 13) adds `fbc`, and its
/// `ip` may be empty (none given).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ClickHintsRecord {
    pub clicked_at_ms: u64,
    /// The address's 4 or 16 bytes; empty for none.
    pub ip: Vec<u8>,
    pub user_agent: Option<String>,
    /// Meta's click cookie as a prelander's pixel set it (version 2).
    pub fbc: Option<String>,
}
impl Record for ClickHintsRecord {
    const VERSION: u8 = 2;
    const NAME: &'static str = "click hints";

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        match version {
            1 => {
                let (clicked_at_ms, ip, user_agent): (u64, Vec<u8>, Option<String>) =
                    postcard_in_place(Self::NAME, body)?;
                Ok(ClickHintsRecord {
                    clicked_at_ms,
                    ip,
                    user_agent,
                    fbc: None,
                })
            }
            2 => from_postcard(body),
            v => Err(unreadable_version::<Self>(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::codec::tests::{T, assert_golden};
    use crate::storage::records::{CredentialRecord, SpaceSettingsRecord, decode, encode};

    #[test]
    fn click_and_credential_records_round_trip() {
        let click = ClickRecord {
            link_slug: Some("spring".into()),
            tg_id: Some(42),
            clicked_at_ms: 1_800_000_000_000,
            ..ClickRecord::default()
        };
        let bytes = encode(&click);
        assert_eq!(bytes[0], 2);
        assert_eq!(decode::<ClickRecord>(&bytes).unwrap(), click);
        let credential = CredentialRecord {
            space_no: 1,
            kind: 2,
            public_prefix: "trk_it_AbCd".into(),
            created_at_ms: 1,
            valid_until_ms: None,
            revoked_at_ms: Some(2),
            last_used_ms: 3,
        };
        assert_eq!(
            decode::<CredentialRecord>(&encode(&credential)).unwrap(),
            credential
        );
    }

    /// Pins the records of the Telegram users' first and last bound clicks and of a space's
    /// settings.
    #[test]
    fn tg_touch_and_settings_record_bytes_are_stable() {
        #[rustfmt::skip]
        let touch = [
            &[1][..], // version
            &[3], b"u-1", // first_uid
            &[128, 206, 217, 230, 206, 51], // first_bound_at_ms
            &[3], b"u-2", // last_uid
            &[232, 213, 217, 230, 206, 51], // last_bound_at_ms: T + 1000
        ]
        .concat();
        assert_golden(
            &TgTouchRecord {
                first_uid: "u-1".into(),
                first_bound_at_ms: T,
                last_uid: "u-2".into(),
                last_bound_at_ms: T + 1_000,
            },
            &touch,
        );
        #[rustfmt::skip]
        let settings = [
            &[1][..], // version
            &[1], // one value
            &[11], b"attribution", &[10], b"last_touch",
        ]
        .concat();
        assert_golden(
            &SpaceSettingsRecord {
                values: vec![("attribution".into(), "last_touch".into())],
            },
            &settings,
        );
    }

    /// Pins version 2 of a click: version 1's fields, then its other ids, tagged; a click
    /// without them one byte longer than in version 1, whose bytes still read.
    #[test]
    fn click_record_v2_bytes_are_stable() {
        #[rustfmt::skip]
        let with_ids = [
            2, // version
            0, 0, 0, 0, // link_slug, fbclid, campaign_name, raw_query: None
            128, 206, 217, 230, 206, 51, // clicked_at_ms
            0, 0, // tg_id, bound_at_ms: None
            3, // three other ids
            0, 2, b't', b't', // ttclid
            1, 2, b'g', b'c', // gclid
            4, 4, b'f', b'b', b'.', b'1', // fbp
        ];
        let ids = |pairs: &[(&str, &str)]| {
            let mut ids = ClickIds::default();
            for (name, id) in pairs {
                ids.set(name, Some((*id).to_owned()));
            }
            ids
        };
        let record = ClickRecord {
            clicked_at_ms: T,
            ids: ClickIds {
                fbp: Some("fb.1".into()),
                ..ids(&[("ttclid", "tt"), ("gclid", "gc")])
            },
            ..ClickRecord::default()
        };
        assert_golden(&record, &with_ids);
        let bare = ClickRecord {
            clicked_at_ms: T,
            ids: ids(&[("gbraid", "gb"), ("wbraid", "wb")]),
            ..ClickRecord::default()
        };
        let bytes = encode(&bare);
        assert_eq!(
            &bytes[bytes.len() - 9..],
            [2, 2, 2, b'g', b'b', 3, 2, b'w', b'b']
        );
        assert_eq!(decode::<ClickRecord>(&bytes).unwrap(), bare);
        let none = encode(&ClickRecord {
            clicked_at_ms: T,
            ..ClickRecord::default()
        });
        assert_eq!(none, [2, 0, 0, 0, 0, 128, 206, 217, 230, 206, 51, 0, 0, 0]);
        // One id twice, or a tag no writer uses, is damage.
        let mut twice = with_ids.to_vec();
        twice[13] = 4;
        twice.extend([0, 1, b'x']);
        assert!(decode::<ClickRecord>(&twice).is_err());
        let mut unknown = with_ids.to_vec();
        unknown[14] = 6;
        assert!(decode::<ClickRecord>(&unknown).is_err());
    }

    /// Hints of version 1 (a link visit's address and agent) still read; version 2 adds `fbc`
    /// and allows no address.
    #[test]
    fn click_hints_record_bytes_are_stable() {
        #[rustfmt::skip]
        let v1 = [
            1, // version
            128, 206, 217, 230, 206, 51, // clicked_at_ms
            4, 203, 0, 113, 7, // ip: 4 bytes
            1, 2, b'U', b'A', // user_agent
        ];
        let record = ClickHintsRecord {
            clicked_at_ms: T,
            ip: vec![203, 0, 113, 7],
            user_agent: Some("UA".into()),
            fbc: None,
        };
        assert_eq!(decode::<ClickHintsRecord>(&v1).unwrap(), record);
        let mut v2 = v1.to_vec();
        v2[0] = 2;
        v2.extend([1, 3, b'f', b'b', b'.']);
        assert_golden(
            &ClickHintsRecord {
                fbc: Some("fb.".into()),
                ..record
            },
            &v2,
        );
    }

    #[test]
    fn click_record_bytes_are_stable() {
        // Version 1 still reads; written again, it is version 2 with no other ids.
        let assert_v1 = |record: &ClickRecord, v1: &[u8]| {
            assert_eq!(&decode::<ClickRecord>(v1).unwrap(), record);
            assert_eq!(encode(record), [&[2], &v1[1..], &[0]].concat());
        };
        #[rustfmt::skip]
        let unbound = [
            1, // version
            1, 6, b's', b'p', b'r', b'i', b'n', b'g', // link_slug
            1, 6, b'I', b'w', b'A', b'R', b'-', b'x', // fbclid
            1, 11, b'S', b'p', b'r', b'i', b'n', b'g', b' ', b's', b'a', b'l', b'e', // campaign
            1, 33, b'u', b't', b'm', b'_', b'c', b'a', b'm', b'p', b'a', b'i', b'g', b'n', b'=',
            b's', b'p', b'r', b'i', b'n', b'g', b'&', b'f', b'b', b'c', b'l', b'i', b'd', b'=',
            b'I', b'w', b'A', b'R', b'-', b'x', // raw_query
            128, 206, 217, 230, 206, 51, // clicked_at_ms
            0, // tg_id: None
            0, // bound_at_ms: None
        ];
        assert_v1(
            &ClickRecord {
                link_slug: Some("spring".into()),
                fbclid: Some("IwAR-x".into()),
                campaign_name: Some("Spring sale".into()),
                raw_query: Some("utm_campaign=spring&fbclid=IwAR-x".into()),
                clicked_at_ms: T,
                tg_id: None,
                bound_at_ms: None,
                ..ClickRecord::default()
            },
            &unbound,
        );
        #[rustfmt::skip]
        let bound = [
            1, // version
            0, 0, 0, 0, // link_slug, fbclid, campaign_name, raw_query: None
            128, 206, 217, 230, 206, 51, // clicked_at_ms
            1, 255, 255, 255, 255, 255, 255, 255, 15, // tg_id: Some(2^53 - 1)
            1, 232, 213, 217, 230, 206, 51, // bound_at_ms: Some(T + 1000)
        ];
        assert_v1(
            &ClickRecord {
                clicked_at_ms: T,
                tg_id: Some(crate::domain::click::MAX_TG_ID),
                bound_at_ms: Some(T + 1_000),
                ..ClickRecord::default()
            },
            &bound,
        );
    }
}
