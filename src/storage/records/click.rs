//! The records of a click and what hangs on it: the click (`CLICKS`), each Telegram user's
//! first and last bound click (`TG_TOUCHES`), and the visitor's client hints (`CLICK_HINTS`).

use serde::{Deserialize, Serialize};

use super::codec::Record;

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

/// What a link visit's request told about the visitor, kept for Meta's matching only in spaces
/// that opted in (`meta_client_hints`), and only until `delivery_max_age` after the click
/// (`CLICK_HINTS`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ClickHintsRecord {
    pub clicked_at_ms: u64,
    /// The address's 4 or 16 bytes.
    pub ip: Vec<u8>,
    pub user_agent: Option<String>,
}
impl Record for ClickHintsRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "click hints";
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
        assert_eq!(bytes[0], 1);
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

    #[test]
    fn click_record_bytes_are_stable() {
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
        assert_golden(
            &ClickRecord {
                link_slug: Some("spring".into()),
                fbclid: Some("IwAR-x".into()),
                campaign_name: Some("Spring sale".into()),
                raw_query: Some("utm_campaign=spring&fbclid=IwAR-x".into()),
                clicked_at_ms: T,
                tg_id: None,
                bound_at_ms: None,
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
        assert_golden(
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
