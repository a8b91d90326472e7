//! What every key's check shares: the error a configuration problem is, and durations read and
//! bounded.

use std::time::Duration;

/// A configuration problem, as one sentence naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The longest duration any key accepts: 100 years (`"100y"`, humantime's year of 365.25 days).
/// Durations are used as whole milliseconds in a `u64` (good for 584 million years), so with
/// this bound the conversion never truncates and `now + duration` never comes near overflow.
pub(super) const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// The least a duration must be where 0 would quietly turn a rule off (`max_event_age`,
/// `dedup_window`): one millisecond, the unit the rules count in, so `"500us"` is refused too.
pub(super) const POSITIVE: Duration = Duration::from_millis(1);

/// A duration key, read and bounded to `min..=MAX_DURATION`.
pub(super) fn duration(
    key: &str,
    value: Option<String>,
    default: &str,
    min: Duration,
) -> Result<Duration, ConfigError> {
    let text = value.unwrap_or_else(|| default.to_owned());
    let d = humantime::parse_duration(&text).map_err(|e| {
        ConfigError(format!(
            "`{key}` must be a duration such as \"24h\" or \"10m\", got {text:?}: {e}"
        ))
    })?;
    if !(min..=MAX_DURATION).contains(&d) {
        let max = humantime::format_duration(MAX_DURATION);
        return Err(ConfigError(if min.is_zero() {
            format!("`{key}` must be at most {max}, got {text:?}")
        } else {
            format!(
                "`{key}` must be between {} and {max}, got {text:?}",
                humantime::format_duration(min)
            )
        }));
    }
    Ok(d)
}

/// Whole milliseconds of a duration; `check` bounds every configured one far below `u64::MAX`.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
