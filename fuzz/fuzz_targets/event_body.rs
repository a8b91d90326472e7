//! `POST /events`, `/clicks`, `/bind`, `/links` bodies: the bytes go through the same decoders
//! and validation the handlers call (`http/handlers.rs`, `app.rs`). Any panic is a finding; an
//! accepted event must also keep its value's text exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracker::domain::click::{BindInput, NewClick};
use tracker::domain::decimal::Decimal;
use tracker::domain::event::{EventInput, EventRules, POST_NAMES, validate};
use tracker::domain::link::NewLink;

const NOW_MS: u64 = 1_800_000_000_000;

fuzz_target!(|body: &[u8]| {
    let rules = EventRules {
        default_currency: "USD".into(),
        max_event_age_ms: 90 * 86_400_000,
        max_clock_skew_ms: 600_000,
    };
    if let Ok(input) = EventInput::from_json(body) {
        if let Ok(event) = validate(input, &POST_NAMES, &rules, NOW_MS) {
            if let Some(value) = event.value {
                let text = value.to_string();
                assert_eq!(Decimal::parse(&text), Ok(value), "{text}");
            }
        }
    }
    let _ = NewClick::from_json(body, NOW_MS);
    let _ = BindInput::from_json(body);
    let _ = NewLink::from_json(body);
});
