//! A credential the tracker must be able to use and must never show: a destination's access
//! token or signing secret, a space's bot token.

use std::fmt;

/// A credential the tracker must be able to use (Meta's access token, a webhook's signing
/// secret): kept as it is, never printed by `Debug`, shown only by its last 4 characters.
/// Serialized as its text for the data file alone, which keeps it as it must be used.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn new(text: String) -> Secret {
        Secret(text)
    }

    /// The value itself: for the request that uses it, and for the store.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What answers and pages show: `…` and the last 4 characters.
    #[must_use]
    pub fn last4(&self) -> String {
        let chars: Vec<char> = self.0.chars().collect();
        let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
        format!("…{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", self.last4())
    }
}
