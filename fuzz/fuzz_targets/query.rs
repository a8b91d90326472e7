//! `GET /e` and `GET /bind` query strings: parsed, decoded and validated as the handlers do
//! (`http/handlers.rs`). Any panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracker::domain::click::BindInput;
use tracker::domain::event::{EventInput, EventRules, GET_NAMES, validate};
use tracker::domain::input::Query;

const NOW_MS: u64 = 1_800_000_000_000;

fuzz_target!(|raw: &str| {
    let rules = EventRules {
        default_currency: "USD".into(),
        max_event_age_ms: 90 * 86_400_000,
        max_clock_skew_ms: 600_000,
    };
    let q = Query::parse(raw);
    if let Ok(input) = EventInput::from_query(&q) {
        let _ = validate(input, &GET_NAMES, &rules, NOW_MS);
    }
    let _ = BindInput::from_query(&q);
});
