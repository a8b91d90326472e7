//! Updates by webhook (`docs/channels.md#updates-by-webhook`): with `telegram_webhook = true`,
//! the task of each space's token sets the bot's webhook (`setWebhook`) to
//! `<public_url>/telegram/<space>`, with a secret of that space's own, derived from a key this
//! process made at start ([`WebhookSecret`]: in memory only, never logged or stored), and Telegram then sends each update there, one `POST` at a time.
//!
//! [`receive`] applies an update through the poller's own [`updates::apply`] and answers only
//! once its effects are committed: Telegram sends an update again until it is answered `2xx`. The
//! webhook commits no offset (its updates come in order per user only). An update sent again is
//! told by its id among the latest applied ([`Recent`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::channel;
use crate::domain::credential::{random_id, same_token};
use crate::error::{Code, Error};
use crate::workers::telegram::Shared;
use crate::workers::telegram::api::{BotApi, Me};
use crate::workers::telegram::updates::{self, ALLOWED_UPDATES, pause_after};

/// The header Telegram sends the webhook's `secret_token` in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The key of the webhooks' `secret_token`s: 256 random bits made when the process starts.
/// Each space's bot is given its own token derived from it ([`WebhookSecret::for_space`]), so
/// one bot's token (seen by whoever holds that bot) does not open another space's webhook.
/// Every start sets each webhook again with the new tokens, so none from before a restart is
/// taken. Only ever sent to Telegram; shown nowhere (its `Debug` hides it).
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// The `secret_token` of space `space`'s webhook (`/telegram/<space>`): the hex of an
    /// HMAC-SHA256 of the space's name under the process's key, 64 characters of `0-9a-f`
    /// (Telegram takes 1 to 256 of `A-Za-z0-9_-`).
    ///
    /// # Panics
    /// Never: HMAC takes a key of any length.
    #[must_use]
    pub fn for_space(&self, space: &str) -> String {
        use hmac::{KeyInit as _, Mac as _};
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(self.0.as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(space.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

impl Default for WebhookSecret {
    fn default() -> WebhookSecret {
        WebhookSecret(format!("{}{}", random_id(), random_id()))
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

/// A space whose bot's updates come by webhook: the bot, its client (to approve join requests)
/// and the ids of the updates applied lately, whose lock applies the updates one at a time.
struct Hooked {
    me: Me,
    api: BotApi,
    applied: tokio::sync::Mutex<Recent>,
}

/// How many of the latest applied updates' ids a webhook remembers.
const RECENT_IDS: usize = 4096;

/// The ids of the last [`RECENT_IDS`] updates applied by webhook, to tell an update Telegram
/// sends again (its answer was lost) from a new one. No offset can: Telegram keeps each user's
/// updates in order but not all users' (an update answered `503` comes again after later ones
/// of other users), and after a week without updates it chooses the next id anew. So the
/// webhook stores no offset; the stored one is the poller's, and an update just below it is
/// the poller's last page, not yet acknowledged when the tracker went over to the webhook
/// ([`channel::applied_already`]). An update sent again after a restart, when these ids are
/// forgotten, is applied again and changes nothing: a join or leave that already holds is not
/// counted twice, and no later update of the same user can have come before it.
#[derive(Default)]
struct Recent {
    order: std::collections::VecDeque<u64>,
    ids: std::collections::HashSet<u64>,
}

impl Recent {
    fn contains(&self, id: u64) -> bool {
        self.ids.contains(&id)
    }

    fn add(&mut self, id: u64) {
        if self.ids.insert(id) {
            self.order.push_back(id);
            if self.order.len() > RECENT_IDS
                && let Some(oldest) = self.order.pop_front()
            {
                self.ids.remove(&oldest);
            }
        }
    }
}

/// The spaces whose updates the webhook takes now (by space number).
#[derive(Default)]
pub struct Hooks(Mutex<HashMap<u32, Arc<Hooked>>>);

impl Hooks {
    fn get(&self, space: u32) -> Option<Arc<Hooked>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&space)
            .cloned()
    }

    fn insert(&self, space: u32, hooked: Hooked) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(space, Arc::new(hooked));
    }

    pub(super) fn remove(&self, space: u32) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&space);
    }
}

/// The task of one space's token when `telegram_webhook` is on: learns the bot (`getMe`), takes
/// its updates at the webhook from then on, and sets the webhook, trying until Telegram accepts
/// it (the Settings page shows why not meanwhile). It then has nothing more to do.
pub async fn run(shared: Arc<Shared>, space: u32, name: String, api: BotApi) {
    let me = updates::who(&shared, space, &api).await;
    shared.status.hooks.insert(
        space,
        Hooked {
            me,
            api: api.clone(),
            applied: tokio::sync::Mutex::new(Recent::default()),
        },
    );
    let url = format!("{}/telegram/{name}", shared.settings.public_url);
    let params = json!({
        "url": url,
        "secret_token": shared.status.secret.for_space(&name),
        "allowed_updates": ALLOWED_UPDATES,
        // One update at a time.
        "max_connections": 1,
    });
    while let Err(e) = api.call("setWebhook", &params, Duration::ZERO).await {
        shared.status.bot_failed(space, &e);
        tokio::time::sleep(pause_after(&e)).await;
    }
    tracing::info!(space, %url, "Telegram webhook set");
    shared.status.webhook_set(space);
    std::future::pending::<()>().await;
}

/// The token of `space`'s bot was removed or replaced: its webhook is deleted, so that the bot
/// does not keep sending its updates to an address that now answers `404` and can be read by
/// `getUpdates` elsewhere (the updates Telegram holds are kept for that reader). One try in the
/// background; a failure (a token Telegram revoked) is logged.
pub(super) fn forget(shared: &Shared, space: u32, token: &str) {
    let api = match shared.api(token) {
        Ok(api) => api,
        Err(e) => {
            tracing::warn!(space, error = %e, "a client of the Bot API");
            return;
        }
    };
    tokio::spawn(async move {
        let params = json!({"drop_pending_updates": false});
        match api.call("deleteWebhook", &params, Duration::ZERO).await {
            Ok(_) => tracing::info!(space, "Telegram webhook deleted: the bot token was removed"),
            Err(e) => {
                tracing::warn!(space, error = ?e.to_string(), "deleting the webhook of a removed bot");
            }
        }
    });
}

/// Checks the `X-Telegram-Bot-Api-Secret-Token` of a request to the webhook, before anything
/// else is read: `401` when it is missing or not the secret this process gave `space`'s webhook.
///
/// # Errors
/// `unauthorized`, the same for a missing and a wrong secret; `not_found` while
/// `telegram_webhook` is off.
pub fn authenticate(shared: &Shared, space: &str, secret: Option<&str>) -> Result<(), Error> {
    if !shared.settings.telegram.webhook {
        return Err(Error::new(
            Code::NotFound,
            "updates by webhook are off (telegram_webhook = false)",
        ));
    }
    match secret {
        Some(s) if same_token(s, &shared.status.secret.for_space(space)) => Ok(()),
        Some(_) => Err(Error::unauthorized(
            "the X-Telegram-Bot-Api-Secret-Token is not the one this webhook was set with",
        )),
        None => Err(Error::unauthorized(
            "an update needs the X-Telegram-Bot-Api-Secret-Token header Telegram sends",
        )),
    }
}

/// `POST /telegram/<space>` once [`authenticate`]d: applies the `Update` in `body` to `space`
/// (its name), committed before this answers. An update applied already changes nothing.
///
/// # Errors
/// `not_found` for a space that is not there or whose bot's updates are not taken here (yet);
/// `invalid_json` for a body that is not an `Update`; the store's error when a read or the
/// commit fails, and `unavailable` when a join request cannot be approved now (nothing is
/// recorded, and Telegram sends the update again).
pub async fn receive(shared: &Shared, space: &str, body: &[u8]) -> Result<(), Error> {
    let not_here = || {
        Error::new(
            Code::NotFound,
            "no Telegram bot of a space of that name takes its updates here",
        )
    };
    // Only a space that is not there is `not_found` (as for the conversions file): a read that
    // fails (the file let go of after a failed commit) is the store's error, a 5xx, as a
    // failed commit is.
    let name = space.to_owned();
    let no = shared
        .store
        .read(move |s| s.space_no(&name))
        .await
        .map_err(|e| match e.code {
            Code::NotFound | Code::InvalidField => not_here(),
            _ => e,
        })?;
    let hooked = shared.status.hooks.get(no).ok_or_else(not_here)?;
    let update: Value = serde_json::from_slice(body)
        .map_err(|e| Error::new(Code::InvalidJson, format!("not an Update: {e}")))?;
    let Some(id) = update["update_id"].as_u64() else {
        return Err(Error::new(
            Code::InvalidJson,
            "an Update has a numeric update_id",
        ));
    };
    let mut applied = hooked.applied.lock().await;
    let offset = shared.store.read(move |s| s.telegram_offset(no)).await?;
    if applied.contains(id) || channel::applied_already(id, offset) {
        return Ok(());
    }
    let mut page = updates::page(&Value::Array(vec![update]), &hooked.me, |_| false);
    updates::apply(shared, no, &hooked.api, &mut page, None).await?;
    applied.add(id);
    Ok(())
}
