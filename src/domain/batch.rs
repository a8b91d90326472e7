//! Many events at once (`POST /events/batch`, `tracker import`): the bounds of a batch and its
//! body. Each event in it is read and checked by the rules of a single event
//! ([`EventInput::from_json`](crate::domain::event::EventInput::from_json) and
//! [`validate`](crate::domain::event::validate)); only the envelope is this file's.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::domain::input;
use crate::error::{Code, Error};

/// The most events one batch holds (Meta's Conversions API takes as many per request).
pub const MAX_BATCH_EVENTS: usize = 1000;
/// The largest batch body, in bytes: 1 MiB.
pub const MAX_BATCH_BYTES: u64 = 1 << 20;

/// The body of `POST /events/batch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody<'a> {
    /// Up to 1000 events, each with the fields of `POST /events`. Each is checked on its own:
    /// one that breaks a rule (or is not even an object) is answered in its place in `results`,
    /// and the others are stored. So the schema takes any value here; what an event may hold is
    /// `EventBody`. The bound of 1000 is not a `maxItems`: more is answered `413` (the batch is
    /// too large), not `422`, as a body over 1 MiB is.
    #[serde(borrow)]
    #[schemars(with = "Vec<serde_json::Value>", required)]
    events: Option<Vec<&'a RawValue>>,
}

/// Reads a batch body into its events' texts: `invalid_json` for what is not `{"events":
/// [...]}`, `missing_field` without `events`, and `payload_too_large` naming the bound for more
/// than [`MAX_BATCH_EVENTS`] events.
pub fn events_of(body: &[u8]) -> Result<Vec<&RawValue>, Error> {
    let batch: BatchBody = input::parse_body(body)?;
    let events = batch
        .events
        .ok_or_else(|| Error::field(Code::MissingField, "events", "`events` is required"))?;
    check_count(events.len())?;
    Ok(events)
}

/// Refuses a batch of more than [`MAX_BATCH_EVENTS`] events, whole.
pub fn check_count(events: usize) -> Result<(), Error> {
    if events > MAX_BATCH_EVENTS {
        return Err(Error::new(
            Code::PayloadTooLarge,
            format!("a batch holds at most {MAX_BATCH_EVENTS} events; this one has {events}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_holds_up_to_the_bound() {
        let body = |n: usize| format!("{{\"events\": [{}]}}", vec!["{}"; n].join(","));
        let full = body(MAX_BATCH_EVENTS);
        assert_eq!(events_of(full.as_bytes()).unwrap().len(), MAX_BATCH_EVENTS);
        let over = body(MAX_BATCH_EVENTS + 1);
        let e = events_of(over.as_bytes()).err().unwrap();
        assert_eq!(e.code, Code::PayloadTooLarge);
        assert!(e.message.contains("1000"), "{}", e.message);
    }

    #[test]
    fn the_envelope_is_strict_and_its_events_are_not() {
        let e = events_of(br#"{"events": [], "dry_run": true}"#)
            .err()
            .unwrap();
        assert_eq!(e.code, Code::InvalidJson);
        let e = events_of(br#"{"events": {}}"#).err().unwrap();
        assert_eq!(e.code, Code::InvalidJson);
        let e = events_of(br"{}").err().unwrap();
        assert_eq!((e.code, e.field), (Code::MissingField, Some("events")));
        let events = events_of(br#"{"events": [1, "x", {"event": "contact"}]}"#).unwrap();
        assert_eq!(events.len(), 3);
    }
}
