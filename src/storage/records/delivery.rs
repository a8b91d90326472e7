//! The records of conversions out: a destination (`DESTINATIONS`), where its deliveries stand
//! (`DELIVERY_STATES`), and each delivery that has been tried (`DELIVERIES`).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::codec::{Record, from_postcard, unreadable_version};
use crate::domain::currency::CurrencyRates;
use crate::platform::{
    AdRules, ConversionNames, EventNames, Fetches, Google, Kind, Meta, PasswordDigest, Postback,
    PreviousSecret, Secret, Snap, Statuses, Target, Template, Tiktok, Webhook,
};
use crate::storage::error::StoreError;

/// A destination (`DESTINATIONS`): its space, name and kind, which events it takes, its pause,
/// and its platform's settings as one tagged value (`platform::Target`), with the access token
/// and signing secrets as they must be used (so the data file is kept private). A removed
/// destination keeps its row, without its settings (and so its credentials), so that its
/// deliveries still name it.
///
/// Version 5 holds the settings as that one value; version 4 ([`TargetV4`], before Meta's
/// data processing options and Google Ads' template, rates and conversions left out) is read
/// into it as it is, Google Ads keeping the legacy template. Versions 1 to 3 (a column per
/// kind's field, [`DestinationRecordV3`]) are read into it by kind, and `migrate_to_v17`
/// rewrote them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct DestinationRecord {
    pub space_no: u32,
    pub name: String,
    /// `platform::Kind` as its stored discriminant.
    pub kind: u8,
    /// `platform::EventSet`'s bits.
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    /// Set while it is paused: since when, and why.
    pub paused_at_ms: Option<u64>,
    pub paused_reason: Option<String>,
    /// Its platform's settings; `None` once it is removed.
    pub settings: Option<Target>,
}
impl Record for DestinationRecord {
    const VERSION: u8 = 5;
    const NAME: &'static str = "destination";

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        let v3 = match version {
            1 => from_postcard::<DestinationRecordV1>(body).map(DestinationRecordV3::from)?,
            2 => from_postcard::<DestinationRecordV2>(body).map(DestinationRecordV3::from)?,
            3 => from_postcard::<DestinationRecordV3>(body)?,
            4 => return from_postcard::<DestinationRecordV4>(body).map(DestinationRecord::from),
            5 => return from_postcard(body),
            v => return Err(unreadable_version::<Self>(v)),
        };
        DestinationRecord::try_from(v3)
    }
}

/// The shape of a `DestinationRecord` of version 4: its settings of [`TargetV4`]'s shapes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct DestinationRecordV4 {
    pub space_no: u32,
    pub name: String,
    pub kind: u8,
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    pub paused_at_ms: Option<u64>,
    pub paused_reason: Option<String>,
    pub settings: Option<TargetV4>,
}
impl Record for DestinationRecordV4 {
    const VERSION: u8 = 4;
    const NAME: &'static str = "destination";
}

/// A version 4 record's settings: `Target` as it was, its tags in the same places.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum TargetV4 {
    MetaCapi(MetaV4),
    Postback(Postback),
    Webhook(Webhook),
    TiktokEvents(Tiktok),
    GoogleAds(GoogleV4),
    SnapCapi(Snap),
}

/// Meta's settings in a version 4 record: no data processing options.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MetaV4 {
    pub pixel_id: String,
    pub access_token: Secret,
    pub test_event_code: Option<String>,
    pub api_version: String,
    pub graph_url: String,
    pub rules: AdRules,
}

/// Google Ads' settings in a version 4 record: the legacy file, no rates, nothing counted as
/// left out. (Its fetches were a struct of their own; postcard writes a struct's fields one
/// after another, so they read as these three.)
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GoogleV4 {
    pub conversion_names: ConversionNames,
    pub user: String,
    pub password: PasswordDigest,
    pub last_fetched_ms: Option<u64>,
    pub last_fetch_rows: u64,
    pub fetches: u64,
}

impl From<DestinationRecordV4> for DestinationRecord {
    fn from(r: DestinationRecordV4) -> Self {
        let settings = r.settings.map(|t| match t {
            TargetV4::MetaCapi(m) => Target::MetaCapi(Meta {
                pixel_id: m.pixel_id,
                access_token: m.access_token,
                test_event_code: m.test_event_code,
                api_version: m.api_version,
                graph_url: m.graph_url,
                rules: m.rules,
                data_processing: None,
            }),
            TargetV4::Postback(p) => Target::Postback(p),
            TargetV4::Webhook(w) => Target::Webhook(w),
            TargetV4::TiktokEvents(t) => Target::TiktokEvents(t),
            TargetV4::GoogleAds(g) => Target::GoogleAds(Google {
                conversion_names: g.conversion_names,
                user: g.user,
                password: g.password,
                new_password: None,
                fetches: Fetches {
                    last_at_ms: g.last_fetched_ms,
                    last_rows: g.last_fetch_rows,
                    count: g.fetches,
                    ..Fetches::default()
                },
                template: Template::Legacy,
                currency_rates: CurrencyRates::default(),
            }),
            TargetV4::SnapCapi(s) => Target::SnapCapi(s),
        });
        DestinationRecord {
            space_no: r.space_no,
            name: r.name,
            kind: r.kind,
            events: r.events,
            only_attributed: r.only_attributed,
            created_at_ms: r.created_at_ms,
            removed_at_ms: r.removed_at_ms,
            paused_at_ms: r.paused_at_ms,
            paused_reason: r.paused_reason,
            settings,
        }
    }
}

impl TryFrom<DestinationRecordV3> for DestinationRecord {
    type Error = StoreError;

    /// The settings of a record of version 3 or before, from the columns of its kind; a
    /// removed destination's none.
    fn try_from(r: DestinationRecordV3) -> Result<Self, StoreError> {
        let corrupt =
            |what: &str| StoreError::Corrupt(format!("destination {:?} lacks its {what}", r.name));
        let settings = if r.removed_at_ms.is_some() {
            None
        } else {
            Some(settings_of_columns(&r, &corrupt)?)
        };
        Ok(DestinationRecord {
            space_no: r.space_no,
            name: r.name,
            kind: r.kind,
            events: r.events,
            only_attributed: r.only_attributed,
            created_at_ms: r.created_at_ms,
            removed_at_ms: r.removed_at_ms,
            paused_at_ms: r.paused_at_ms,
            paused_reason: r.paused_reason,
            settings,
        })
    }
}

/// A version 3 record's settings, from the columns its kind used.
// Every later kind falls to one arm: it never had columns.
#[allow(clippy::match_wildcard_for_single_variants)]
fn settings_of_columns(
    r: &DestinationRecordV3,
    corrupt: &dyn Fn(&str) -> StoreError,
) -> Result<Target, StoreError> {
    let map = |pairs: &[(String, String)]| pairs.iter().cloned().collect::<BTreeMap<_, _>>();
    let rules = || -> Result<AdRules, StoreError> {
        Ok(AdRules {
            event_names: EventNames(map(&r.event_names)),
            currency_rates: CurrencyRates::parse(&map(&r.currency_rates)).map_err(|e| {
                StoreError::Corrupt(format!(
                    "destination {:?} has a rate that does not read: {}",
                    r.name, e.message
                ))
            })?,
        })
    };
    let text = |column: &Option<String>, what: &str| column.clone().ok_or_else(|| corrupt(what));
    let kind = Kind::from_u8(r.kind).ok_or_else(|| corrupt("kind"))?;
    Ok(match kind {
        Kind::MetaCapi => Target::MetaCapi(Meta {
            pixel_id: text(&r.pixel_id, "pixel_id")?,
            access_token: Secret::new(text(&r.access_token, "token")?),
            test_event_code: r.test_event_code.clone(),
            api_version: text(&r.api_version, "api_version")?,
            graph_url: text(&r.graph_url, "graph_url")?,
            rules: rules()?,
            data_processing: None,
        }),
        Kind::TiktokEvents => Target::TiktokEvents(Tiktok {
            pixel_code: text(&r.pixel_id, "pixel code")?,
            access_token: Secret::new(text(&r.access_token, "token")?),
            test_event_code: r.test_event_code.clone(),
            api_url: text(&r.graph_url, "api_url")?,
            rules: rules()?,
        }),
        Kind::Postback => Target::Postback(Postback {
            url: text(&r.url, "url")?,
            statuses: Statuses(map(&r.statuses)),
        }),
        Kind::Webhook => Target::Webhook(Webhook {
            url: text(&r.url, "url")?,
            signing_secret: Secret::new(text(&r.signing_secret, "signing secret")?),
            previous: match (&r.previous_secret, r.previous_secret_until_ms) {
                (Some(secret), Some(until_ms)) => Some(PreviousSecret {
                    secret: Secret::new(secret.clone()),
                    until_ms,
                }),
                _ => None,
            },
        }),
        Kind::GoogleAds => Target::GoogleAds(Google {
            conversion_names: ConversionNames(map(&r.conversion_names)),
            user: text(&r.user, "user")?,
            password: PasswordDigest(r.password_digest.ok_or_else(|| corrupt("password"))?),
            new_password: None,
            fetches: Fetches {
                last_at_ms: r.last_fetched_ms,
                last_rows: r.last_fetch_rows,
                count: r.fetches,
                ..Fetches::default()
            },
            template: Template::Legacy,
            currency_rates: CurrencyRates::default(),
        }),
        // No release stored a destination of a later kind in columns.
        #[allow(unreachable_patterns)]
        _ => return Err(corrupt("columns of a kind that never had them")),
    })
}

/// The shape of a `DestinationRecord` of version 3: a column for each kind's fields, read into
/// version 4's settings by kind.
///
/// Version 2 added the fields after `graph_url` (its settings, a rotated secret's grace, a
/// pause); a version 1 record is read with them empty. Version 3 added those after
/// `paused_reason` (a Google Ads destination's names, credential and fetches); a version 2
/// record is read with them empty. Kind 4 kept its pixel code in `pixel_id` and its `api_url`
/// in `graph_url`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DestinationRecordV3 {
    pub space_no: u32,
    pub name: String,
    /// `destination::Kind` as its stored discriminant.
    pub kind: u8,
    /// `destination::EventSet`'s bits.
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    /// A postback's URL template, a webhook's URL.
    pub url: Option<String>,
    pub signing_secret: Option<String>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
    /// Meta's event names by kind, sorted by kind.
    pub event_names: Vec<(String, String)>,
    /// Meta's currency rates as written (`"0.013 USD"`), sorted by currency.
    pub currency_rates: Vec<(String, String)>,
    /// A postback's `{status}` words by kind, sorted by kind.
    pub statuses: Vec<(String, String)>,
    /// A webhook's signing secret before its rotation, and until when it still signs.
    pub previous_secret: Option<String>,
    pub previous_secret_until_ms: Option<u64>,
    /// Set while it is paused: since when, and why.
    pub paused_at_ms: Option<u64>,
    pub paused_reason: Option<String>,
    /// Google Ads' conversion names by kind, sorted by kind.
    pub conversion_names: Vec<(String, String)>,
    /// The user name Google Ads fetches the file with.
    pub user: Option<String>,
    /// The SHA-256 of the password Google Ads fetches the file with (never the password).
    pub password_digest: Option<[u8; 32]>,
    /// Google Ads' last fetch of the file: when, and the rows it was served; and how many.
    pub last_fetched_ms: Option<u64>,
    pub last_fetch_rows: u64,
    pub fetches: u64,
}
impl Record for DestinationRecordV3 {
    const VERSION: u8 = 3;
    const NAME: &'static str = "destination";
}

/// The shape of a `DestinationRecord` of version 2.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DestinationRecordV2 {
    pub space_no: u32,
    pub name: String,
    /// `destination::Kind` as its stored discriminant.
    pub kind: u8,
    /// `destination::EventSet`'s bits.
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    /// A postback's URL template, a webhook's URL.
    pub url: Option<String>,
    pub signing_secret: Option<String>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
    /// Meta's event names by kind, sorted by kind.
    pub event_names: Vec<(String, String)>,
    /// Meta's currency rates as written (`"0.013 USD"`), sorted by currency.
    pub currency_rates: Vec<(String, String)>,
    /// A postback's `{status}` words by kind, sorted by kind.
    pub statuses: Vec<(String, String)>,
    /// A webhook's signing secret before its rotation, and until when it still signs.
    pub previous_secret: Option<String>,
    pub previous_secret_until_ms: Option<u64>,
    /// Set while it is paused: since when, and why.
    pub paused_at_ms: Option<u64>,
    pub paused_reason: Option<String>,
}
impl Record for DestinationRecordV2 {
    const VERSION: u8 = 2;
    const NAME: &'static str = "destination";
}

impl From<DestinationRecordV2> for DestinationRecordV3 {
    fn from(v2: DestinationRecordV2) -> Self {
        DestinationRecordV3 {
            space_no: v2.space_no,
            name: v2.name,
            kind: v2.kind,
            events: v2.events,
            only_attributed: v2.only_attributed,
            created_at_ms: v2.created_at_ms,
            removed_at_ms: v2.removed_at_ms,
            url: v2.url,
            signing_secret: v2.signing_secret,
            pixel_id: v2.pixel_id,
            access_token: v2.access_token,
            test_event_code: v2.test_event_code,
            api_version: v2.api_version,
            graph_url: v2.graph_url,
            event_names: v2.event_names,
            currency_rates: v2.currency_rates,
            statuses: v2.statuses,
            previous_secret: v2.previous_secret,
            previous_secret_until_ms: v2.previous_secret_until_ms,
            paused_at_ms: v2.paused_at_ms,
            paused_reason: v2.paused_reason,
            ..DestinationRecordV3::default()
        }
    }
}

/// The shape of a `DestinationRecord` of version 1.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DestinationRecordV1 {
    pub space_no: u32,
    pub name: String,
    /// `destination::Kind` as its stored discriminant.
    pub kind: u8,
    /// `destination::EventSet`'s bits.
    pub events: u8,
    pub only_attributed: bool,
    pub created_at_ms: u64,
    pub removed_at_ms: Option<u64>,
    /// A postback's URL template, a webhook's URL.
    pub url: Option<String>,
    pub signing_secret: Option<String>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
}
impl Record for DestinationRecordV1 {
    const VERSION: u8 = 1;
    const NAME: &'static str = "destination";
}

impl From<DestinationRecordV1> for DestinationRecordV3 {
    fn from(v1: DestinationRecordV1) -> Self {
        DestinationRecordV3 {
            space_no: v1.space_no,
            name: v1.name,
            kind: v1.kind,
            events: v1.events,
            only_attributed: v1.only_attributed,
            created_at_ms: v1.created_at_ms,
            removed_at_ms: v1.removed_at_ms,
            url: v1.url,
            signing_secret: v1.signing_secret,
            pixel_id: v1.pixel_id,
            access_token: v1.access_token,
            test_event_code: v1.test_event_code,
            api_version: v1.api_version,
            graph_url: v1.graph_url,
            ..DestinationRecordV3::default()
        }
    }
}

/// Where a destination's deliveries stand (`DELIVERY_STATES`): how many are in each state
/// (`destination::State as usize`), the last `inbox_id` whose delivery has left `pending`
/// (every later delivery of the destination is pending), and its last failure.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryStateRecord {
    pub counts: [u64; 5],
    pub sent_through: u64,
    pub last_error: Option<LastErrorRecord>,
}
impl Record for DeliveryStateRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "delivery state";
}

/// A destination's last failure: when, for which event (0: a test), the answer's status (0:
/// none came) and its first bytes, or what went wrong.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LastErrorRecord {
    pub at_ms: u64,
    pub inbox_id: u64,
    pub status: u16,
    pub answer: String,
}

/// A delivery that has been tried (`DELIVERIES`). One not yet tried is stored as an empty value,
/// which no record encodes to: a new event's deliveries cost their keys and nothing more.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// `destination::State` as its stored discriminant.
    pub state: u8,
    pub attempts: u32,
    pub last_attempt_ms: u64,
    /// Set while `retrying`: when it is tried next.
    pub next_attempt_ms: Option<u64>,
    /// Where `delivery_max_age` counts from: the first attempt, or the first after a pause, or
    /// the time a retry was asked for by hand. `None` after a held attempt (its destination
    /// paused): the next attempt sets it. (A row an earlier release wrote may hold `None` after a
    /// failed attempt, which meant the event's receipt; it now counts from its next attempt,
    /// which gives it at most one more `delivery_max_age`. An older release reads both as it
    /// did.)
    pub since_ms: Option<u64>,
    /// The last answer's HTTP status; 0 when none came.
    pub last_status: u16,
    /// The last answer's first 300 bytes, or what went wrong.
    pub last_answer: String,
}
impl Record for DeliveryRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "delivery";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::{DataProcessing, NotSent};
    use crate::storage::records::codec::{decode, encode, tests::assert_golden};

    #[test]
    fn a_version_1_destination_reads_with_empty_settings() {
        let v1 = DestinationRecordV1 {
            space_no: 1,
            name: "m".into(),
            kind: 1,
            events: 15,
            only_attributed: true,
            created_at_ms: 5,
            pixel_id: Some("1".into()),
            access_token: Some("t".into()),
            api_version: Some("v25.0".into()),
            graph_url: Some("https://graph.facebook.com".into()),
            ..DestinationRecordV1::default()
        };
        let read: DestinationRecord = decode(&encode(&v1)).unwrap();
        assert_eq!(read.name, "m");
        let Some(Target::MetaCapi(meta)) = &read.settings else {
            panic!("{read:?}")
        };
        assert_eq!(meta.access_token.expose(), "t");
        assert!(meta.rules.event_names.0.is_empty() && read.paused_at_ms.is_none());
    }

    #[test]
    fn a_version_2_destination_reads_without_googles_fields() {
        let v2 = DestinationRecordV2 {
            space_no: 1,
            name: "w".into(),
            kind: 3,
            url: Some("u".into()),
            signing_secret: Some("s".into()),
            paused_reason: Some("r".into()),
            ..DestinationRecordV2::default()
        };
        let read: DestinationRecordV3 = DestinationRecordV3::from(v2.clone());
        assert!(read.user.is_none() && read.password_digest.is_none() && read.fetches == 0);
        let read: DestinationRecord = decode(&encode(&v2)).unwrap();
        assert_eq!(read.paused_reason.as_deref(), Some("r"));
        assert!(
            matches!(read.settings, Some(Target::Webhook(_))),
            "{read:?}"
        );
    }

    #[test]
    fn a_version_3_destination_has_its_bytes() {
        let r = DestinationRecordV3 {
            space_no: 1,
            name: "g".into(),
            kind: 5,
            events: 15,
            only_attributed: true,
            created_at_ms: 1,
            conversion_names: vec![("contact".into(), "c".into())],
            user: Some("u".into()),
            password_digest: Some([7; 32]),
            last_fetched_ms: Some(2),
            last_fetch_rows: 3,
            fetches: 4,
            ..DestinationRecordV3::default()
        };
        let mut bytes = vec![
            3, // version
            1, 1, b'g', 5, 15, 1, 1, // space, name, kind, events, only_attributed, created
            0, // removed_at_ms
            0, 0, 0, 0, 0, 0, 0, // url ... graph_url
            0, 0, 0, // event_names, currency_rates, statuses
            0, 0, 0, 0, // previous_secret, its until, paused
            1, 7, b'c', b'o', b'n', b't', b'a', b'c', b't', 1, b'c', // conversion_names
            1, 1, b'u', // user
            1,    // password_digest
        ];
        bytes.extend([7; 32]);
        bytes.extend([1, 2, 3, 4]); // last fetched, its rows, fetches
        assert_golden(&r, &bytes);
        let read: DestinationRecord = decode(&bytes).unwrap();
        let Some(Target::GoogleAds(g)) = &read.settings else {
            panic!("{read:?}")
        };
        assert_eq!((g.user.as_str(), g.fetches.count), ("u", 4));
    }

    /// Version 4: the settings one tagged value, the tag the platform's place in the
    /// registry's list (a postback: 1), then its fields.
    #[test]
    fn a_version_4_destination_has_its_bytes() {
        let r = DestinationRecordV4 {
            space_no: 1,
            name: "p".into(),
            kind: 2,
            events: 15,
            only_attributed: true,
            created_at_ms: 1,
            removed_at_ms: None,
            paused_at_ms: None,
            paused_reason: None,
            settings: Some(TargetV4::Postback(Postback {
                url: "u".into(),
                statuses: Statuses([("deposit".into(), "sale".into())].into()),
            })),
        };
        #[rustfmt::skip]
        let bytes = [
            4, // version
            1, 1, b'p', 2, 15, 1, 1, // space, name, kind, events, only_attributed, created
            0, 0, 0, // removed_at_ms, paused
            1, 1, // settings: some, the postback
            1, b'u', // url
            1, 7, b'd', b'e', b'p', b'o', b's', b'i', b't', 4, b's', b'a', b'l', b'e', // statuses
        ];
        assert_golden(&r, &bytes);
    }

    /// The bytes of a version 4 Google Ads destination (tag 4).
    fn google_v4_bytes() -> Vec<u8> {
        let mut bytes = vec![
            4, // version
            1, 1, b'g', 5, 15, 1, 1, // space, name, kind, events, only_attributed, created
            0, 0, 0, // removed_at_ms, paused
            1, 4, // settings: some, Google Ads
            0, // conversion_names
            1, b'u', // user
        ];
        bytes.extend([7; 32]); // password digest
        bytes.extend([1, 2, 3, 4]); // last fetched, its rows, fetches
        bytes
    }

    #[test]
    fn a_version_4_google_destination_reads_with_the_legacy_template() {
        let read: DestinationRecord = decode(&google_v4_bytes()).unwrap();
        let Some(Target::GoogleAds(g)) = &read.settings else {
            panic!("{read:?}")
        };
        assert_eq!(g.template, Template::Legacy);
        assert_eq!((g.user.as_str(), g.password.0), ("u", [7; 32]));
        assert_eq!(
            g.fetches,
            Fetches {
                last_at_ms: Some(2),
                last_rows: 3,
                count: 4,
                last_not_sent: NotSent::default()
            }
        );
        assert!(g.currency_rates.0.is_empty());
    }

    /// Version 5: Google Ads' fields then what the last fetch left out, its template (Data
    /// Manager's: 1) and its rates as written.
    #[test]
    fn a_version_5_google_destination_has_its_bytes() {
        let mut v4 = google_v4_bytes();
        let v4_read: DestinationRecord = decode(&v4).unwrap();
        let mut r = v4_read.clone();
        let Some(Target::GoogleAds(g)) = &mut r.settings else {
            panic!("{r:?}")
        };
        g.fetches.last_not_sent = NotSent {
            click_ids: 5,
            currency: 6,
        };
        g.template = Template::DataManager;
        g.currency_rates =
            CurrencyRates::parse(&[("XTR".to_owned(), "0.013 USD".to_owned())].into()).unwrap();
        v4[0] = 5;
        v4.extend([5, 6, 1]); // not sent: click ids, currency; the template
        v4.extend([1, 3, b'X', b'T', b'R', 9]);
        v4.extend(b"0.013 USD");
        assert_golden(&r, &v4);
    }

    /// Version 5: Meta's fields then its data processing options (some: Limited Data Use, the
    /// country and the state).
    #[test]
    fn a_version_5_meta_destination_has_its_bytes() {
        let r = DestinationRecord {
            space_no: 1,
            name: "m".into(),
            kind: 1,
            events: 15,
            only_attributed: true,
            created_at_ms: 1,
            removed_at_ms: None,
            paused_at_ms: None,
            paused_reason: None,
            settings: Some(Target::MetaCapi(Meta {
                pixel_id: "1".into(),
                access_token: Secret::new("t".into()),
                test_event_code: None,
                api_version: "v".into(),
                graph_url: "g".into(),
                rules: AdRules::default(),
                data_processing: Some(DataProcessing {
                    country: Some(1),
                    state: Some(1000),
                }),
            })),
        };
        #[rustfmt::skip]
        let bytes = [
            5, // version
            1, 1, b'm', 1, 15, 1, 1, // space, name, kind, events, only_attributed, created
            0, 0, 0, // removed_at_ms, paused
            1, 0, // settings: some, Meta
            1, b'1', 1, b't', 0, 1, b'v', 1, b'g', // pixel, token, test code, version, address
            0, 0, // event names, rates
            1, 1, 1, 1, 0xe8, 0x07, // data processing: some; country 1; state 1000
        ];
        assert_golden(&r, &bytes);
        let mut v4 = bytes[..bytes.len() - 6].to_vec();
        v4[0] = 4;
        let read: DestinationRecord = decode(&v4).unwrap();
        let Some(Target::MetaCapi(m)) = &read.settings else {
            panic!("{read:?}")
        };
        assert_eq!((m.pixel_id.as_str(), &m.data_processing), ("1", &None));
    }

    #[test]
    fn a_removed_destination_of_version_3_reads_without_settings() {
        let r = DestinationRecordV3 {
            space_no: 1,
            name: "m".into(),
            kind: 1,
            removed_at_ms: Some(9),
            ..DestinationRecordV3::default()
        };
        let read: DestinationRecord = decode(&encode(&r)).unwrap();
        assert_eq!((read.removed_at_ms, read.settings), (Some(9), None));
    }

    #[test]
    fn a_version_2_destination_has_its_bytes() {
        let r = DestinationRecordV2 {
            space_no: 1,
            name: "p".into(),
            kind: 2,
            events: 15,
            only_attributed: true,
            created_at_ms: 1,
            url: Some("u".into()),
            statuses: vec![("deposit".into(), "sale".into())],
            paused_at_ms: Some(2),
            paused_reason: Some("r".into()),
            ..DestinationRecordV2::default()
        };
        #[rustfmt::skip]
        let bytes = [
            2, // version
            1, 1, b'p', 2, 15, 1, 1, // space, name, kind, events, only_attributed, created
            0, // removed_at_ms
            1, 1, b'u', // url
            0, 0, 0, 0, 0, 0, // signing_secret ... graph_url
            0, 0, // event_names, currency_rates
            1, 7, b'd', b'e', b'p', b'o', b's', b'i', b't', 4, b's', b'a', b'l', b'e', // statuses
            0, 0, // previous_secret, its until
            1, 2, 1, 1, b'r', // paused
        ];
        assert_golden(&r, &bytes);
    }
}
