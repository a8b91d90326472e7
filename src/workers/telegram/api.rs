//! Telegram's Bot API, as far as channel links and the health checks use it: `POST <telegram_api_url>/bot<token>/<method>`
//! with a JSON body, answered `{"ok": true, "result": ...}` or `{"ok": false, "error_code",
//! "description", "parameters": {"retry_after"}}`. The client is the guarded outbound one
//! (`outbound.rs`: no redirects, no proxy, private addresses only where allowed).
//!
//! The token is part of every URL, so no URL of this file is ever logged or put in an error:
//! errors carry Telegram's `description` or the transport's words, with the token cut out.
//! Whoever logs them logs them escaped (`?`), as delivery errors are: a description cannot
//! write escape sequences or a line of its own into the log.
//!
//! An answer is read up to [`ANSWER_BYTES`] and refused past it, whatever `telegram_api_url`
//! names.

use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{Delivery, Telegram};
use crate::outbound::error_words;

/// The largest answer read: a page of `getUpdates` (at most 100 updates of a few kilobytes
/// each) is the largest the Bot API gives, well under it.
pub const ANSWER_BYTES: usize = 4 << 20;

/// Why a call did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// `429`: wait this many seconds (`parameters.retry_after`) before the next call.
    RetryAfter(u64),
    /// `401`: the token is not (or no longer) a bot's.
    Unauthorized(String),
    /// Telegram refused the request (`400`, `403`, ...): its `description`.
    Refused(u16, String),
    /// No answer, or not the Bot API's.
    Transport(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::RetryAfter(s) => {
                write!(f, "Telegram asks to wait {s} s (429 Too Many Requests)")
            }
            ApiError::Unauthorized(d) => write!(
                f,
                "Telegram refuses the bot token ({d}): copy it again from @BotFather"
            ),
            ApiError::Refused(code, d) => write!(f, "Telegram answered {code}: {d}"),
            ApiError::Transport(d) => write!(f, "Telegram's Bot API did not answer: {d}"),
        }
    }
}

/// One bot: its token and the API's address.
#[derive(Clone)]
pub struct BotApi {
    client: reqwest::Client,
    base: String,
    token: String,
}

/// The bot as `getMe` answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Me {
    pub id: u64,
    pub username: String,
}

impl BotApi {
    /// A client of the bot with `token` at the configured address.
    ///
    /// # Errors
    /// If the TLS backend cannot be set up.
    pub fn new(settings: &Telegram, delivery: &Delivery, token: &str) -> Result<BotApi, String> {
        let client = crate::outbound::client(delivery).map_err(|e| e.to_string())?;
        Ok(BotApi {
            client,
            base: settings.api_url.clone(),
            token: token.to_owned(),
        })
    }

    /// Calls `method` with `params`; answers its `result`. `wait` is how long the answer may
    /// take beyond the client's own timeout (a long poll's).
    pub async fn call(
        &self,
        method: &str,
        params: &Value,
        wait: Duration,
    ) -> Result<Value, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(params.to_string());
        if !wait.is_zero() {
            request = request.timeout(wait + Duration::from_secs(10));
        }
        let response = request
            .send()
            .await
            .map_err(|e| ApiError::Transport(self.hide(&error_words(&e))))?;
        let status = response.status().as_u16();
        let body = crate::outbound::read_bounded(response, ANSWER_BYTES)
            .await
            .map_err(|e| ApiError::Transport(self.hide(&e)))?;
        let answer: Value = serde_json::from_slice(&body).map_err(|_| {
            ApiError::Transport(format!("answered {status} with a body that is not JSON"))
        })?;
        if answer["ok"] == json!(true) {
            return Ok(answer["result"].clone());
        }
        let description = self.hide(answer["description"].as_str().unwrap_or("no description"));
        let code = answer["error_code"]
            .as_u64()
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(status);
        Err(match code {
            429 => ApiError::RetryAfter(answer["parameters"]["retry_after"].as_u64().unwrap_or(1)),
            401 => ApiError::Unauthorized(description),
            // A token of the wrong shape is answered 404 Not Found.
            404 if method == "getMe" => ApiError::Unauthorized(description),
            _ => ApiError::Refused(code, description),
        })
    }

    /// `getMe`: the bot's id and username.
    pub async fn get_me(&self) -> Result<Me, ApiError> {
        let me = self.call("getMe", &json!({}), Duration::ZERO).await?;
        match (me["id"].as_u64(), me["username"].as_str()) {
            (Some(id), Some(username)) => Ok(Me {
                id,
                username: username.to_owned(),
            }),
            _ => Err(ApiError::Transport("getMe answered no bot".to_owned())),
        }
    }

    /// `getChatMember` of the bot `bot_id` itself in `chat_id`: whether it may make invite
    /// links there (the channel's creator, or an admin with `can_invite_users`).
    pub async fn may_invite(&self, chat_id: i64, bot_id: u64) -> Result<bool, ApiError> {
        let member = self
            .call(
                "getChatMember",
                &json!({"chat_id": chat_id, "user_id": bot_id}),
                Duration::ZERO,
            )
            .await?;
        Ok(member["status"] == "creator"
            || (member["status"] == "administrator" && member["can_invite_users"] == true))
    }

    /// The token cut out of `text` (an error may quote the URL).
    fn hide(&self, text: &str) -> String {
        text.replace(&self.token, "<token>")
    }
}
