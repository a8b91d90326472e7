//! A delivery's life: its states, how an attempt's answer decides the next one, and how long
//! the sender waits before it tries again.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::domain::codes::stored_codes;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

stored_codes! {
    /// The state of one delivery (`docs/api.md#deliveries`).
    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum State {
        /// Not tried yet (or tried, and the outcome not yet committed).
        Pending = 0 => "pending",
        Delivered = 1 => "delivered",
        /// Failed, and tried again at `next_attempt_at_ms`.
        Retrying = 2 => "retrying",
        /// Refused for good, or still failing after `delivery_max_age`.
        Dead = 3 => "dead",
        /// Its destination was removed before it was delivered.
        Cancelled = 4 => "cancelled",
        /// Waiting while its destination is paused (its credential no longer taken). Never
        /// stored in a delivery's row: an open delivery of a paused destination is shown so.
        Paused = 5 => "paused",
    }
}

/// How many states are stored in a destination's counts: every state but [`State::Paused`].
pub const STORED_STATES: usize = 5;

impl State {
    /// A state as a query or body names it; the error names `field`.
    pub fn parse(text: &str, field: &'static str) -> Result<State, Error> {
        State::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    field,
                    format!(
                        "{field} is pending, delivered, retrying, dead, cancelled or paused, \
                         got {}",
                        quoted(text)
                    ),
                )
            })
    }

    /// Whether the delivery may still be sent.
    #[must_use]
    pub fn is_open(self) -> bool {
        matches!(self, State::Pending | State::Retrying)
    }
}

/// How many of a destination's deliveries are in each state, indexed by `State as usize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts(pub [u64; 6]);

impl StateCounts {
    /// The counts as a destination's row stores them; while it is `paused`, its open
    /// deliveries count as paused.
    #[must_use]
    pub fn of_stored(stored: [u64; STORED_STATES], paused: bool) -> StateCounts {
        let mut counts = [0; 6];
        counts[..STORED_STATES].copy_from_slice(&stored);
        if paused {
            for open in [State::Pending, State::Retrying] {
                counts[State::Paused as usize] += counts[open as usize];
                counts[open as usize] = 0;
            }
        }
        StateCounts(counts)
    }

    #[must_use]
    pub fn get(&self, state: State) -> u64 {
        self.0[state as usize]
    }

    /// Moves one delivery from `from` (`None`: a new one) to `to`.
    pub fn moved(&mut self, from: Option<State>, to: State) {
        if let Some(from) = from {
            self.0[from as usize] = self.0[from as usize].saturating_sub(1);
        }
        self.0[to as usize] += 1;
    }
}

impl Serialize for StateCounts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(State::ALL.len()))?;
        for s in State::ALL {
            map.serialize_entry(s.as_str(), &self.get(s))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StateCounts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = HashMap::<String, u64>::deserialize(deserializer)?;
        let mut counts = StateCounts::default();
        for s in State::ALL {
            counts.0[s as usize] = map.get(s.as_str()).copied().unwrap_or(0);
        }
        Ok(counts)
    }
}

/// The first retry comes about this long after the first failure ...
pub const FIRST_RETRY_MS: u64 = 10_000;
/// ... each later one twice as long after the one before, and never more than this.
pub const MAX_RETRY_MS: u64 = 3_600_000;
/// How much of an answer is kept: enough to read an error, never a whole page.
pub const ANSWER_BYTES: usize = 300;

/// The pause before attempt `attempts + 1`, after `attempts` failed ones: 10 s doubling to at
/// most 1 h, spread by `jitter` (0..1) over 80% to 120% so that deliveries that failed together
/// do not all come back together; at least what the receiver asked for in `Retry-After`, itself
/// at most 1 h.
#[must_use]
pub fn retry_delay_ms(attempts: u32, jitter: f64, retry_after_ms: Option<u64>) -> u64 {
    let doubled = FIRST_RETRY_MS.saturating_mul(1 << attempts.saturating_sub(1).min(20));
    let base = doubled.min(MAX_RETRY_MS);
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_sign_loss,
        clippy::cast_possible_truncation
    )]
    let spread = (base as f64 * (0.8 + 0.4 * jitter.clamp(0.0, 1.0))) as u64;
    spread
        .min(MAX_RETRY_MS)
        .max(retry_after_ms.unwrap_or(0).min(MAX_RETRY_MS))
}

/// What one attempt at a delivery came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub inbox_id: u64,
    pub at_ms: u64,
    /// The answer's HTTP status; `None` when none came (refused, timed out, not sent).
    pub status: Option<u16>,
    /// The first [`ANSWER_BYTES`] of the answer, or what went wrong when none came.
    pub answer: String,
    pub outcome: Outcome,
    /// Seconds the receiver asked to wait (`Retry-After`), in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// 0..1, for [`retry_delay_ms`].
    pub jitter: f64,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Delivered,
    /// Worth another try: a timeout, a refused connection, `408`, `429`, `5xx`.
    Failed,
    /// Never worth another try: any other `4xx`, or an event the receiver cannot take.
    Refused,
    /// Not taken because the destination's credential no longer works: the delivery waits,
    /// due again as soon as the destination is resumed, and never dead for its age meanwhile.
    Held,
}

/// What an answer's HTTP status means for the delivery: `2xx` delivered; `408`, `429` and
/// `5xx` worth another try; any other status refused for good (a `3xx` too: redirects are not
/// followed, since one could lead anywhere).
#[must_use]
pub fn outcome_of(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered,
        408 | 429 | 500..=599 => Outcome::Failed,
        _ => Outcome::Refused,
    }
}

/// How long a delivery is tried: `delivery_max_age` (`ms`), counted from its first attempt,
/// but never from before `floor_ms`, when its destination last resumed from a pause as its
/// sender saw it (0: not since the sender started), so that a delivery already retrying when
/// the destination paused is not dead at its first failure after the pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxAge {
    pub ms: u64,
    pub floor_ms: u64,
}

/// A delivery's state after `attempt`, its attempts so far, and when it is next tried.
/// `since_ms` is where `delivery_max_age` counts from: a failure after that is `dead`.
#[must_use]
pub fn next_state(
    attempt: &Attempt,
    attempts: u32,
    since_ms: u64,
    max_age_ms: u64,
) -> (State, Option<u64>) {
    match attempt.outcome {
        Outcome::Delivered => (State::Delivered, None),
        Outcome::Refused => (State::Dead, None),
        Outcome::Held => (State::Retrying, Some(attempt.at_ms)),
        Outcome::Failed => {
            let next = attempt.at_ms.saturating_add(retry_delay_ms(
                attempts,
                attempt.jitter,
                attempt.retry_after_ms,
            ));
            if next > since_ms.saturating_add(max_age_ms) {
                (State::Dead, None)
            } else {
                (State::Retrying, Some(next))
            }
        }
    }
}

/// The first [`ANSWER_BYTES`] of `text`, cut at a character boundary.
#[must_use]
pub fn answer_head(text: &str) -> String {
    let mut end = text.len().min(ANSWER_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_10_s_to_1_h() {
        assert_eq!(retry_delay_ms(1, 0.5, None), 10_000);
        assert_eq!(retry_delay_ms(2, 0.5, None), 20_000);
        assert_eq!(retry_delay_ms(1, 0.0, None), 8_000);
        assert_eq!(retry_delay_ms(1, 1.0, None), 12_000);
        assert_eq!(retry_delay_ms(9, 0.5, None), 2_560_000);
        assert_eq!(retry_delay_ms(10, 0.5, None), MAX_RETRY_MS);
        assert_eq!(retry_delay_ms(40, 1.0, None), MAX_RETRY_MS);
        assert_eq!(retry_delay_ms(1, 0.5, Some(120_000)), 120_000);
        assert_eq!(retry_delay_ms(1, 0.5, Some(9_000)), 10_000);
        assert_eq!(retry_delay_ms(1, 0.5, Some(86_400_000)), MAX_RETRY_MS);
    }

    #[test]
    fn statuses_decide_outcomes_and_age_makes_a_failure_dead() {
        assert_eq!(outcome_of(200), Outcome::Delivered);
        assert_eq!(outcome_of(299), Outcome::Delivered);
        assert_eq!(outcome_of(408), Outcome::Failed);
        assert_eq!(outcome_of(429), Outcome::Failed);
        assert_eq!(outcome_of(500), Outcome::Failed);
        assert_eq!(outcome_of(400), Outcome::Refused);
        assert_eq!(outcome_of(404), Outcome::Refused);
        assert_eq!(outcome_of(302), Outcome::Refused);
        let attempt = Attempt {
            inbox_id: 1,
            at_ms: 1_000,
            status: Some(500),
            answer: String::new(),
            outcome: Outcome::Failed,
            retry_after_ms: None,
            jitter: 0.5,
        };
        assert_eq!(
            next_state(&attempt, 1, 0, 11_000),
            (State::Retrying, Some(11_000))
        );
        assert_eq!(next_state(&attempt, 1, 0, 10_999), (State::Dead, None));
        let held = Attempt {
            outcome: Outcome::Held,
            ..attempt
        };
        assert_eq!(
            next_state(&held, 40, 0, 10_999),
            (State::Retrying, Some(1_000)),
            "a held delivery never dies of age"
        );
        let counts = StateCounts::of_stored([1, 2, 3, 4, 5], true);
        assert_eq!(counts.0, [0, 2, 0, 4, 5, 4]);
        assert_eq!(
            StateCounts::of_stored([1, 2, 3, 4, 5], false).0,
            [1, 2, 3, 4, 5, 0]
        );
    }

    #[test]
    fn answers_are_cut_at_a_character() {
        assert_eq!(answer_head("ok"), "ok");
        let long = "é".repeat(200);
        let head = answer_head(&long);
        assert_eq!(head.len(), ANSWER_BYTES);
        let odd = format!("a{long}");
        assert_eq!(answer_head(&odd).len(), ANSWER_BYTES - 1);
    }
}
