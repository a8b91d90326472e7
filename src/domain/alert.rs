//! Alerts (`docs/api.md#alerts`): what a change of state says, in a sentence for a chat and in
//! JSON for a webhook, and the rules of the settings that say where alerts go.

use serde::Serialize;

use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// A change of state worth telling a person about, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Alert {
    /// A bot or channel failed its health checks twice in a row: its visits go elsewhere.
    TargetDown { target: String, why: String },
    /// A target held down passed a check again.
    TargetBack { target: String },
}

impl Alert {
    /// In a sentence, for a chat, naming the space.
    #[must_use]
    pub fn sentence(&self, space: &str) -> String {
        match self {
            Alert::TargetDown { target, why } => format!(
                "{space}: {target} is down ({why}); its visits go to the other targets of its \
                 links"
            ),
            Alert::TargetBack { target } => {
                format!("{space}: {target} is back up and gets its visits again")
            }
        }
    }
}

/// The rule of `alert_telegram_chat`: a chat id (`-1001234567890`) or a public chat's
/// `@username`; `""` none.
pub fn check_chat(text: &str) -> Result<(), String> {
    let id = text.strip_prefix('-').unwrap_or(text);
    let is_id = (1..=20).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit());
    let is_name = text.strip_prefix('@').is_some_and(|n| {
        (5..=32).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if text.is_empty() || is_id || is_name {
        Ok(())
    } else {
        Err(format!(
            "is a chat id (-1001234567890) or a public chat's @username, or \"\" for none, got {}",
            quoted(text)
        ))
    }
}

/// The rule of `alert_webhook_secret`: a Standard Webhooks secret, `whsec_` and the base64 of
/// 24 to 64 bytes; `""` none. The value itself is never repeated in the error.
pub fn check_webhook_secret(text: &str) -> Result<(), String> {
    use base64::Engine as _;
    let key = text
        .strip_prefix("whsec_")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok());
    if text.is_empty() || key.is_some_and(|k| (24..=64).contains(&k.len())) {
        Ok(())
    } else {
        Err(
            "is a Standard Webhooks secret: whsec_ and the base64 of 24 to 64 random bytes \
             (whsec_$(openssl rand -base64 32)), or \"\" to remove it"
                .to_owned(),
        )
    }
}

/// Alerts to a webhook are signed: `alert_webhook_url` needs `alert_webhook_secret`.
pub fn check_webhook_signed(has_url: bool, has_secret: bool) -> Result<(), Error> {
    if has_url && !has_secret {
        return Err(Error::field(
            Code::InvalidField,
            "alert_webhook_secret",
            "`alert_webhook_url` needs `alert_webhook_secret`, the secret alerts are signed \
             under: give both in the same change",
        ));
    }
    Ok(())
}
