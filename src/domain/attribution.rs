//! Which of a Telegram user's bound clicks an event that names the user by Telegram id is
//! attributed to: the space setting `attribution` (`docs/api.md#attribution`) and its values.

use crate::domain::input::quoted;

/// Which of a user's bound clicks an event that names the user by Telegram id is attributed to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Attribution {
    /// The click bound first (by binding time): the campaign that brought the user.
    #[default]
    FirstTouch,
    /// The click bound last: the campaign that brought the user back most recently.
    LastTouch,
}

impl Attribution {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Attribution::FirstTouch => "first_touch",
            Attribution::LastTouch => "last_touch",
        }
    }

    pub(crate) fn parse(text: &str) -> Result<Attribution, String> {
        [Attribution::FirstTouch, Attribution::LastTouch]
            .into_iter()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| format!("is first_touch or last_touch, got {}", quoted(text)))
    }
}
