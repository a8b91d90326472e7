//! What the ad platforms, those that match events to their ads, share in their settings and
//! requests: the event names they send by kind, the rates of the currencies they
//! do not take, the rules of an access token, a base address and a test code, and the
//! `event_id` and hashed ids they are sent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::address::{URL, check_url};
use super::given::{DestinationFields, Field, missing};
use super::names::{check_named, named};
use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::domain::secret::Secret;
use crate::error::{Code, Error};

/// The event name sent for each kind, where the destination sets one; Meta's standard event
/// for the kind otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventNames(pub BTreeMap<String, String>);

impl EventNames {
    /// From `{"deposit": "Purchase", "first_deposit": "FirstDeposit"}`: each key one of
    /// [`NAMED_KINDS`](super::names::NAMED_KINDS), each name one of Meta's standard events or a custom name of 1 to 40
    /// letters, digits, `_` and spaces.
    pub fn parse(names: &BTreeMap<String, String>) -> Result<EventNames, Error> {
        check_named(
            "event_names",
            names,
            "one of Meta's standard events (Purchase, Lead, ...) or 1 to 40 of A-Z, a-z, 0-9, \
             '_' and ' '",
            |name| {
                (1..=40).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
            },
        )?;
        Ok(EventNames(names.clone()))
    }

    /// The name an event of kind `event` is sent as, where the destination sets one;
    /// `standard`'s name for the kind otherwise (each platform has its own standard events).
    #[must_use]
    pub fn name_or(
        &self,
        event: &str,
        first_deposit: bool,
        standard: fn(&str) -> &'static str,
    ) -> &str {
        named(&self.0, event, first_deposit).unwrap_or_else(|| standard(event))
    }
}

/// What an ad platform's destination decides about each event beyond its address: the names it
/// sends and the rates it converts currencies the platform does not take by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdRules {
    pub event_names: EventNames,
    /// Kept as written (`"0.013 USD"`), read again by the rules that checked it.
    #[serde(with = "rates_as_written")]
    pub currency_rates: CurrencyRates,
}

impl AdRules {
    /// These rules as a delivery in a space follows them: the currencies converted by
    /// [`CurrencyRates::of_destination`], the space's `currency_rates` where these have none.
    #[must_use]
    pub fn in_space(&self, space_rates: &CurrencyRates) -> AdRules {
        AdRules {
            event_names: self.event_names.clone(),
            currency_rates: CurrencyRates::of_destination(&self.currency_rates, space_rates),
        }
    }
}

/// The fields every ad platform that matches events to its ads declares alike: its access
/// token, a test code, the event names it sends and the rates it converts currencies by. A
/// room gives each its own label and where to find it.
pub(super) const ACCESS_TOKEN: Field = Field {
    name: "access_token",
    required: true,
    secret: true,
    label: "Access token",
    schema: r#"{"type": ["string", "null"], "maxLength": 1024, "pattern": "^[!-~]*$"}"#,
    ..Field::TEXT
};
pub(super) const API_URL: Field = Field {
    name: "api_url",
    label: "API address",
    help: "The platform's API address; settable for a local stand-in.",
    ..URL
};
pub(super) const TEST_EVENT_CODE: Field = Field {
    name: "test_event_code",
    label: "Test event code",
    help: "Events show only in the Test events tab of the platform's Events Manager.",
    schema: r#"{"type": ["string", "null"], "pattern": "^([A-Za-z0-9]{1,64})?$"}"#,
    ..Field::TEXT
};
pub(super) const EVENT_NAMES: Field = Field {
    name: "event_names",
    label: "Event names",
    help: "The event name sent for each kind of event: contact, subscribed, registration, \
           deposit or first_deposit (a customer's first deposit; without it, a deposit's name \
           is used), such as deposit=Purchase: one of the platform's standard events or a \
           name of your own, up to 40 letters, digits, spaces or underscores.",
    default: Some("the platform's standard events"),
    schema: r#"{"type": ["object", "null"], "additionalProperties": {"type": "string"},
        "examples": [{"deposit": "Purchase", "first_deposit": "FirstDeposit"}]}"#,
    ..Field::PAIRS
};
pub(super) const CURRENCY_RATES: Field = Field {
    name: "currency_rates",
    label: "Currency rates",
    help: "What one unit of a currency the platform does not take (one that is not ISO 4217, \
           such as Telegram Stars) is worth in one it does, such as XTR=0.013 USD. A currency \
           without a rate here is converted by the space's currency rates (Settings).",
    ..Field::PAIRS
};

/// The rule of an ad platform's access token: given, at most 1024 visible ASCII characters.
pub(super) fn access_token(token: Option<String>, what: &str) -> Result<Secret, Error> {
    let token = token.ok_or_else(|| missing("access_token", what))?;
    if token.len() > 1024 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        // Never quoted: it is a credential.
        return Err(Error::field(
            Code::InvalidField,
            "access_token",
            "access_token is at most 1024 visible ASCII characters",
        ));
    }
    Ok(Secret::new(token))
}

/// The rule of an ad platform's base address (`graph_url`, `api_url`): an address a
/// destination may reach, without a query; kept without a trailing `/`.
pub(super) fn base_url(
    field: &'static str,
    url: &str,
    allow_private: bool,
) -> Result<String, Error> {
    let parsed = check_url(field, url, allow_private)?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(Error::field(
            Code::InvalidField,
            field,
            format!(
                "{field} is a base address without a query, got {}",
                quoted(url)
            ),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

impl AdRules {
    /// The names and rates as a way in would give them.
    pub(super) fn fields_of(&self, f: &mut DestinationFields) {
        f.set_pairs("event_names", Some(self.event_names.0.clone()));
        f.set_pairs("currency_rates", Some(self.currency_rates.shown()));
    }

    /// The event names and currency rates given in `f`, checked.
    pub(super) fn from_fields(f: &DestinationFields) -> Result<AdRules, Error> {
        Ok(AdRules {
            event_names: match &f.pairs("event_names") {
                Some(names) => EventNames::parse(names)?,
                None => EventNames::default(),
            },
            currency_rates: match &f.pairs("currency_rates") {
                Some(rates) => CurrencyRates::parse(rates)?,
                None => CurrencyRates::default(),
            },
        })
    }
}

/// The rule of an ad platform's test code, the destination's or a test's own: 1 to 64 letters and digits.
pub fn check_test_event_code(code: &str) -> Result<(), Error> {
    if (1..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "test_event_code",
            format!(
                "test_event_code is 1 to 64 letters and digits (TEST12345), got {}",
                quoted(code)
            ),
        ))
    }
}

/// SHA-256 of `text`, in lowercase hex.
#[must_use]
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The `event_id` an ad platform is sent: the event's `eid` when it has one, the payment's own
/// id, under which a pixel or a CRM reporting the same order deduplicates with it; otherwise
/// its own `event_id`, as every other receiver is sent.
#[must_use]
pub fn platform_event_id(event: &FeedEvent) -> &str {
    event.eid.as_deref().unwrap_or(&event.event_id)
}

/// Currency rates as the data file keeps them: as they were written, by currency.
pub(super) mod rates_as_written {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::domain::currency::CurrencyRates;

    pub(in crate::platform) fn serialize<S: Serializer>(
        rates: &CurrencyRates,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        rates.shown().serialize(s)
    }

    pub(in crate::platform) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<CurrencyRates, D::Error> {
        let written = BTreeMap::<String, String>::deserialize(d)?;
        CurrencyRates::parse(&written).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A deposit of 100 `XTR` by Telegram user 777, at a known time and `event_id`: what an ad
    /// platform's tests send, its own click id set by each.
    pub(in crate::platform) fn xtr_deposit() -> FeedEvent {
        let mut e = crate::platform::destination::test_event(1_700_000_000_123);
        e.event_id = "0b5e1f3a-7c2d-4e8f-9a6b-1c2d3e4f5a6b".into();
        e.value = Some("100".into());
        e.currency = "XTR".into();
        e.tg_id = Some(777);
        e
    }

    /// The platform's own names, and a rate for `XTR`: 0.013 USD.
    pub(in crate::platform) fn xtr_rules() -> AdRules {
        AdRules {
            event_names: EventNames::default(),
            currency_rates: CurrencyRates::parse(
                &[("XTR".to_owned(), "0.013 USD".to_owned())].into(),
            )
            .unwrap(),
        }
    }
}
