//! Currency conversion for the ad platforms: a deposit's value and currency as a platform
//! takes them, ISO 4217, converted by the destination's own rates where the event's currency
//! is not (`XTR`, `USDT`).

use serde_json::{Value, json};

use crate::domain::currency::CurrencyRates;
use crate::domain::feed::FeedEvent;

/// A deposit's `value` and `currency` as an ad platform (`platform`, named in a refusal) takes
/// them: converted to ISO 4217 by the destination's `rates`, the value a JSON number;
/// or why it cannot be sent (a currency without a rate, a value no number can hold).
pub fn iso_value(
    event: &FeedEvent,
    rates: &CurrencyRates,
    platform: &str,
) -> Result<Value, String> {
    let value = event.value.as_deref().unwrap_or("0");
    let (amount, currency) = rates.to_iso(value, &event.currency)?;
    let number = amount
        .to_string()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("not sent: the value {value} is no number {platform} can take"))?;
    Ok(json!({ "value": number, "currency": currency }))
}
