//! A destination's rows in the data file, as the writer (`outbox.rs`) and the readers
//! (`outbox_read.rs`) both read them: the stored record and the domain's destination each way,
//! the live destinations of a space, and the counts per state.

use redb::ReadableTable;

use crate::domain::currency::CurrencyRates;
use crate::error::{Code, Error};
use crate::platform::{
    AdRules, ConversionNames, Destination, EventNames, EventSet, Fetches, Google, Kind, LastError,
    Meta, PasswordDigest, Paused, Postback, PreviousSecret, Secret, Statuses, Target, Tiktok,
    Webhook,
};
use crate::storage::StoreError;
use crate::storage::records::{self, DeliveryStateRecord, DestinationRecord, LastErrorRecord};
use crate::storage::schema::{DELIVERY_STATES, DESTINATIONS};

/// `DELIVERY_QUEUE`'s due time of a dead delivery: never, until a retry is asked for.
pub(crate) const DEAD: u64 = u64::MAX;

pub(crate) fn no_destination(name: &str) -> StoreError {
    StoreError::Refused(Error::new(
        Code::NotFound,
        format!("no destination {name:?} in this space"),
    ))
}

/// The stored form of a destination.
pub(crate) fn record_of(d: &Destination) -> DestinationRecord {
    let mut r = DestinationRecord {
        space_no: d.space,
        name: d.name.clone(),
        kind: d.target.kind() as u8,
        events: d.events.0,
        only_attributed: d.only_attributed,
        created_at_ms: d.created_at_ms,
        paused_at_ms: d.paused.as_ref().map(|p| p.at_ms),
        paused_reason: d.paused.as_ref().map(|p| p.reason.clone()),
        ..DestinationRecord::default()
    };
    let pairs = |map: &std::collections::BTreeMap<String, String>| {
        map.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    match &d.target {
        Target::MetaCapi(m) => {
            r.pixel_id = Some(m.pixel_id.clone());
            r.access_token = Some(m.access_token.expose().to_owned());
            r.test_event_code.clone_from(&m.test_event_code);
            r.api_version = Some(m.api_version.clone());
            r.graph_url = Some(m.graph_url.clone());
            r.event_names = pairs(&m.rules.event_names.0);
            r.currency_rates = pairs(&m.rules.currency_rates.shown());
        }
        Target::Postback(Postback { url, statuses }) => {
            r.url = Some(url.clone());
            r.statuses = pairs(&statuses.0);
        }
        Target::Webhook(Webhook {
            url,
            signing_secret,
            previous,
        }) => {
            r.url = Some(url.clone());
            r.signing_secret = Some(signing_secret.expose().to_owned());
            r.previous_secret = previous.as_ref().map(|p| p.secret.expose().to_owned());
            r.previous_secret_until_ms = previous.as_ref().map(|p| p.until_ms);
        }
        Target::TiktokEvents(t) => {
            r.pixel_id = Some(t.pixel_code.clone());
            r.access_token = Some(t.access_token.expose().to_owned());
            r.test_event_code.clone_from(&t.test_event_code);
            r.graph_url = Some(t.api_url.clone());
            r.event_names = pairs(&t.rules.event_names.0);
            r.currency_rates = pairs(&t.rules.currency_rates.shown());
        }
        Target::GoogleAds(g) => {
            r.conversion_names = pairs(&g.conversion_names.0);
            r.user = Some(g.user.clone());
            r.password_digest = Some(g.password.0);
            r.last_fetched_ms = g.fetches.last_at_ms;
            r.last_fetch_rows = g.fetches.last_rows;
            r.fetches = g.fetches.count;
        }
    }
    r
}

/// A stored destination as the domain sees it; `None` for a removed one.
pub(crate) fn destination_of(
    no: u32,
    r: DestinationRecord,
) -> Result<Option<Destination>, StoreError> {
    if r.removed_at_ms.is_some() {
        return Ok(None);
    }
    let corrupt = |what: &str| {
        StoreError::Corrupt(format!("destination {no} ({:?}) lacks its {what}", r.name))
    };
    let kind = Kind::from_u8(r.kind).ok_or_else(|| corrupt("kind"))?;
    let rules = || -> Result<AdRules, StoreError> {
        Ok(AdRules {
            event_names: EventNames(r.event_names.iter().cloned().collect()),
            currency_rates: CurrencyRates::parse(&r.currency_rates.iter().cloned().collect())
                .map_err(|e| {
                    StoreError::Corrupt(format!(
                        "destination {no} ({:?}) has a rate that does not read: {}",
                        r.name, e.message
                    ))
                })?,
        })
    };
    let target = match kind {
        Kind::MetaCapi => Target::MetaCapi(Meta {
            pixel_id: r.pixel_id.clone().ok_or_else(|| corrupt("pixel_id"))?,
            access_token: Secret::new(r.access_token.clone().ok_or_else(|| corrupt("token"))?),
            test_event_code: r.test_event_code.clone(),
            api_version: r
                .api_version
                .clone()
                .ok_or_else(|| corrupt("api_version"))?,
            graph_url: r.graph_url.clone().ok_or_else(|| corrupt("graph_url"))?,
            rules: rules()?,
        }),
        Kind::TiktokEvents => Target::TiktokEvents(Tiktok {
            pixel_code: r.pixel_id.clone().ok_or_else(|| corrupt("pixel code"))?,
            access_token: Secret::new(r.access_token.clone().ok_or_else(|| corrupt("token"))?),
            test_event_code: r.test_event_code.clone(),
            api_url: r.graph_url.clone().ok_or_else(|| corrupt("api_url"))?,
            rules: rules()?,
        }),
        Kind::Postback => Target::Postback(Postback {
            url: r.url.clone().ok_or_else(|| corrupt("url"))?,
            statuses: Statuses(r.statuses.iter().cloned().collect()),
        }),
        Kind::Webhook => Target::Webhook(Webhook {
            url: r.url.clone().ok_or_else(|| corrupt("url"))?,
            signing_secret: Secret::new(
                r.signing_secret
                    .clone()
                    .ok_or_else(|| corrupt("signing secret"))?,
            ),
            previous: match (&r.previous_secret, r.previous_secret_until_ms) {
                (Some(secret), Some(until_ms)) => Some(PreviousSecret {
                    secret: Secret::new(secret.clone()),
                    until_ms,
                }),
                _ => None,
            },
        }),
        Kind::GoogleAds => Target::GoogleAds(Google {
            conversion_names: ConversionNames(r.conversion_names.iter().cloned().collect()),
            user: r.user.clone().ok_or_else(|| corrupt("user"))?,
            password: PasswordDigest(r.password_digest.ok_or_else(|| corrupt("password"))?),
            new_password: None,
            fetches: Fetches {
                last_at_ms: r.last_fetched_ms,
                last_rows: r.last_fetch_rows,
                count: r.fetches,
            },
        }),
    };
    let paused = r.paused_at_ms.map(|at_ms| Paused {
        at_ms,
        reason: r.paused_reason.clone().unwrap_or_default(),
    });
    Ok(Some(Destination {
        no,
        space: r.space_no,
        name: r.name,
        events: EventSet(r.events),
        only_attributed: r.only_attributed,
        target,
        created_at_ms: r.created_at_ms,
        paused,
    }))
}

/// The live destinations of `space` (of every space: `None`), oldest first.
pub(crate) fn live_destinations(
    table: &impl ReadableTable<u32, &'static [u8]>,
    space: Option<u32>,
) -> Result<Vec<Destination>, StoreError> {
    let mut out = Vec::new();
    for entry in table.iter()? {
        let (no, bytes) = entry?;
        let record: DestinationRecord = records::decode(bytes.value())?;
        if space.is_some_and(|s| s != record.space_no) {
            continue;
        }
        if let Some(d) = destination_of(no.value(), record)? {
            out.push(d);
        }
    }
    Ok(out)
}

/// Every live destination of the file: what the directory holds.
pub fn all_destinations(txn: &redb::ReadTransaction) -> Result<Vec<Destination>, StoreError> {
    live_destinations(&txn.open_table(DESTINATIONS)?, None)
}

/// The deliveries of every destination in each state: the totals of `/metrics`.
pub fn state_totals(txn: &redb::ReadTransaction) -> Result<[u64; 5], StoreError> {
    let mut totals = [0; 5];
    for entry in txn.open_table(DELIVERY_STATES)?.iter()? {
        let record: DeliveryStateRecord = records::decode(entry?.1.value())?;
        for (t, n) in totals.iter_mut().zip(record.counts) {
            *t += n;
        }
    }
    Ok(totals)
}

pub(crate) fn stored_state(
    table: &impl ReadableTable<u32, &'static [u8]>,
    no: u32,
) -> Result<DeliveryStateRecord, StoreError> {
    Ok(match table.get(no)? {
        Some(bytes) => records::decode(bytes.value())?,
        None => DeliveryStateRecord::default(),
    })
}

pub(crate) fn last_error_of(r: Option<LastErrorRecord>) -> Option<LastError> {
    r.map(|e| LastError {
        at_ms: e.at_ms,
        inbox_id: (e.inbox_id > 0).then(|| e.inbox_id.to_string()),
        status: (e.status > 0).then_some(e.status),
        answer: e.answer,
    })
}
