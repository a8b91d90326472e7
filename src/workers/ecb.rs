//! The ECB's reference rates fetched for the stats (`docs/api.md#reporting-currency`): for each
//! space with an `ecb_rates_url`, the daily file (`domain::ecb`) once a day, its rates kept as
//! the space's ECB set of the file's day (`storage/rates.rs`), which the stats cross through
//! the euro into the reporting currency; a rate typed in `currency_rates` wins over them.
//!
//! A fetch that fails (no answer, an error status, a body that is not the file) changes
//! nothing: the last rates stay in force. It is logged once when a space's fetches start to
//! fail and once when they work again, and tried again the next day, not sooner: no storm of
//! retries at the ECB. A space whose address changes is fetched at the loop's next look.
//!
//! Like `spend/`, the loop is handed a narrow [`Shared`] rather than the application.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::cost::Day;
use crate::domain::ecb::EcbRates;
use crate::domain::rate_history::RateSource;
use crate::outbound::error_words;
use crate::storage::Store;
use crate::workers::Worker;

/// The next fetch of a space after one, whether it worked or failed: the ECB publishes once a
/// working day.
const FETCH_EVERY_MS: u64 = 24 * 3_600_000;
/// How often the loop looks for spaces whose address is new.
const LOOK_EVERY: Duration = Duration::from_secs(30);
/// The most of an answer read: the daily file is about 2 KB.
const ANSWER_BYTES: usize = 256 * 1024;

/// What the loop is handed.
pub struct Shared {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
}

/// Fetches `space`'s ECB rates from `url` and keeps them as its set of the file's day;
/// answers that day. A failure says what went wrong, and keeps nothing.
///
/// # Errors
/// The address is refused (a private one where not allowed), the ECB did not answer or
/// answered an error, its body is not the daily file, or the store failed.
pub async fn fetch(shared: &Shared, space: u32, url: &str) -> Result<Day, String> {
    let allow_private = shared.settings.delivery.allow_private_destinations;
    let url = crate::outbound::check_before_send(url, allow_private)?;
    let client = crate::outbound::client(&shared.settings.delivery)
        .map_err(|e| format!("no HTTP client: {}", error_words(&e)))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("the ECB did not answer: {}", error_words(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the ECB answered {status}"));
    }
    let body = crate::outbound::read_bounded(response, ANSWER_BYTES)
        .await
        .map_err(|e| format!("the ECB's answer: {e}"))?;
    let (day, rates) = EcbRates::parse_xml(&String::from_utf8_lossy(&body))
        .map_err(|e| format!("the ECB's answer is not its daily file: {e}"))?;
    let text = rates.text();
    shared
        .store
        .write(move |t| t.record_rates(space, RateSource::Ecb, day, &text))
        .await
        .map_err(|e| e.message)?;
    Ok(day)
}

/// Fetches each space's rates once a day, until the task is dropped.
pub async fn run(shared: Shared) {
    // Each space's address and when it is fetched next.
    let mut due: HashMap<u32, (String, u64)> = HashMap::new();
    let mut failing: HashSet<u32> = HashSet::new();
    loop {
        let now = shared.clock.now_ms();
        for (space, url) in with_addresses(&shared).await {
            if due
                .get(&space)
                .is_some_and(|(was, at)| *was == url && now < *at)
            {
                continue;
            }
            due.insert(space, (url.clone(), now.saturating_add(FETCH_EVERY_MS)));
            match fetch(&shared, space, &url).await {
                Ok(day) => {
                    if failing.remove(&space) {
                        tracing::info!(space, "the ECB's rates are fetched again");
                    }
                    tracing::debug!(space, day, "the ECB's rates fetched");
                }
                Err(e) => {
                    if failing.insert(space) {
                        tracing::warn!(
                            space,
                            error = ?e,
                            "the ECB's rates not fetched; the last ones stay, tried again tomorrow"
                        );
                    }
                }
            }
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// The spaces with an `ecb_rates_url`, and it.
async fn with_addresses(shared: &Shared) -> Vec<(u32, String)> {
    let spaces = match shared.store.read(|s| s.list_spaces(&HashMap::new())).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "listing spaces for the ECB's rates");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for summary in spaces {
        let Some(url) = summary.settings.ecb_rates_url.clone() else {
            continue;
        };
        let name = summary.space.clone();
        if let Ok(space) = shared.store.read(move |s| s.space_no(&name)).await {
            out.push((space, url));
        }
    }
    out
}

impl Worker for Shared {
    const NAME: &'static str = "ecb";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}
