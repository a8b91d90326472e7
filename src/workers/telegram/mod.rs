//! Telegram channels in the background (`docs/channels.md`): for each space with a
//! `telegram_bot_token`, a task that reads the bot's updates (`updates.rs`) or, with
//! `telegram_webhook`, sets the webhook they come to (`hook.rs`), and one loop that
//! keeps each channel link's pool of invite links full and revokes those handed out and never
//! used (`pool.rs`). The Bot API client is `api.rs`.
//!
//! The tasks are handed a narrow [`Shared`] (store, settings, clock, what they report), not the
//! application; what they report ([`Status`]: each bot's name or why not, each link's last Bot
//! API error, counts for `/metrics`) is read by the application for its answers and pages.

pub mod api;
pub mod hook;
mod pool;
pub mod updates;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::channel::UpdatesApplied;
use crate::error::Code;
use crate::metrics::Metrics;
use crate::storage::Store;
use crate::workers::Worker;
use crate::workers::telegram::api::{ApiError, BotApi, Me};

/// What a space's bot is, as far as the tracker knows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BotStatus {
    /// The bot's id and `@username`, once `getMe` answered.
    pub me: Option<Me>,
    /// Why the last call failed, until one works.
    pub error: Option<String>,
    /// Whether Telegram accepted the webhook (`telegram_webhook`) since this process started.
    pub webhook: bool,
}

impl BotStatus {
    /// In a sentence, for the Settings page and the command line.
    #[must_use]
    pub fn describe(&self) -> String {
        let hooked = if self.webhook {
            ", updates by webhook"
        } else {
            ""
        };
        match (&self.me, &self.error) {
            (Some(me), None) => format!("@{}{hooked}", me.username),
            (Some(me), Some(e)) => format!("@{}: {e}", me.username),
            (None, Some(e)) => e.clone(),
            (None, None) => "not asked yet".to_owned(),
        }
    }
}

/// What the background tasks report, read by the application.
#[derive(Default)]
pub struct Status {
    bots: Mutex<HashMap<u32, BotStatus>>,
    /// The last Bot API error of each channel link (by slug), until a call works again.
    link_errors: Mutex<HashMap<String, String>>,
    /// The `@username` of each channel Telegram answered about since the server started
    /// (`None`: a private channel), by chat id.
    chat_usernames: Mutex<HashMap<i64, Option<String>>>,
    /// Wakes the pool's loop: a click took an invite link, a token or a link was set.
    pub wake: Notify,
    /// Where what happens is counted for `/metrics` (the application's), once the tasks run.
    metrics: std::sync::OnceLock<Arc<Metrics>>,
    /// The `secret_token` of the webhooks this process sets (`hook.rs`).
    secret: hook::WebhookSecret,
    /// The spaces whose updates come by webhook now.
    hooks: hook::Hooks,
}

impl Status {
    #[must_use]
    pub fn bot(&self, space: u32) -> Option<BotStatus> {
        self.bots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&space)
            .cloned()
    }

    pub fn bot_found(&self, space: u32, me: &Me) {
        let mut bots = self.bots.lock().unwrap_or_else(PoisonError::into_inner);
        let status = bots.entry(space).or_default();
        if status.me.as_ref() != Some(me) {
            tracing::info!(space, bot = %me.username, "Telegram bot found");
        }
        *status = BotStatus {
            me: Some(me.clone()),
            error: None,
            webhook: status.webhook,
        };
    }

    /// Counts `n` of `what` for `/metrics` ([`crate::metrics::TELEGRAM_COUNTS`]).
    pub fn count(&self, what: &str, n: u64) {
        if let Some(m) = self.metrics.get() {
            m.telegram(what, n);
        }
    }

    /// Each channel link's invite links (pool, handed out, used) for `/metrics`.
    fn channel_invites(&self, links: std::collections::BTreeMap<String, [u64; 3]>) {
        if let Some(m) = self.metrics.get() {
            m.channel_invites(links);
        }
    }

    pub fn bot_failed(&self, space: u32, error: &ApiError) {
        self.count("bot_api_errors", 1);
        let text = error.to_string();
        let mut bots = self.bots.lock().unwrap_or_else(PoisonError::into_inner);
        let status = bots.entry(space).or_default();
        if status.error.as_deref() != Some(text.as_str()) {
            tracing::warn!(space, error = ?text, "Telegram Bot API");
        }
        if matches!(error, ApiError::Unauthorized(_)) {
            status.me = None;
        }
        status.error = Some(text);
    }

    /// Telegram accepted `space`'s webhook: a call worked.
    fn webhook_set(&self, space: u32) {
        let mut bots = self.bots.lock().unwrap_or_else(PoisonError::into_inner);
        let status = bots.entry(space).or_default();
        status.webhook = true;
        status.error = None;
    }

    pub fn forget_bot(&self, space: u32) {
        self.hooks.remove(space);
        self.bots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&space);
    }

    #[must_use]
    pub fn link_error(&self, slug: &str) -> Option<String> {
        self.link_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(slug)
            .cloned()
    }

    fn set_link_error(&self, slug: &str, error: Option<&ApiError>) {
        let mut errors = self
            .link_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match error {
            Some(e) => {
                self.count("bot_api_errors", 1);
                errors.insert(slug.to_owned(), e.to_string());
            }
            None => {
                errors.remove(slug);
            }
        }
    }

    /// Telegram answered chat `chat_id` with `username` (`None`: it has none, it is private).
    pub fn chat_seen(&self, chat_id: i64, username: Option<&str>) {
        self.chat_usernames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(chat_id, username.map(str::to_owned));
    }

    /// The `@username` of the public channel `chat_id`, as Telegram last answered; `None` for
    /// a private one or one not asked about since the server started.
    #[must_use]
    pub fn public_username(&self, chat_id: i64) -> Option<String> {
        self.chat_usernames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&chat_id)
            .cloned()
            .flatten()
    }

    fn knows_chat(&self, chat_id: i64) -> bool {
        self.chat_usernames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&chat_id)
    }

    fn applied(&self, a: &UpdatesApplied) {
        self.count("joins", a.joins);
        self.count("unattributed_joins", a.unattributed_joins);
        self.count("leaves", a.leaves);
        self.count("join_requests", a.join_requests);
    }
}

/// What the tasks are handed.
pub struct Shared {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    pub status: Arc<Status>,
    /// Where `updates.rs` counts what it applied (the same [`Status`]).
    metrics: Arc<Status>,
}

impl Shared {
    #[must_use]
    pub fn new(
        store: Arc<Store>,
        settings: Settings,
        clock: Arc<dyn Clock>,
        status: Arc<Status>,
        metrics: Arc<Metrics>,
    ) -> Shared {
        let _ = status.metrics.set(metrics);
        Shared {
            store,
            settings,
            clock,
            metrics: status.clone(),
            status,
        }
    }

    /// A client of the bot with `token`.
    ///
    /// # Errors
    /// If the TLS backend cannot be set up.
    pub fn api(&self, token: &str) -> Result<BotApi, String> {
        BotApi::new(&self.settings.telegram, &self.settings.delivery, token)
    }
}

/// A space's bot: its token, a client of it, and the space's name.
type Bot = (String, BotApi, String);

/// How often the loop looks at the spaces' tokens and pools without being woken.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How often it looks while no space has a bot: setting a token wakes it, so this only bounds
/// how late a token set some other way is seen. An idle server reads nothing each second.
const IDLE_LOOK_EVERY: Duration = Duration::from_secs(60);

impl Worker for Shared {
    const NAME: &'static str = "telegram";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// Runs beside the server: a reader of updates per space with a token (started, replaced and
/// stopped as tokens are set), and the pools' loop.
pub async fn run(shared: Shared) {
    let shared = Arc::new(shared);
    let mut readers: HashMap<u32, (String, tokio::task::JoinHandle<()>)> = HashMap::new();
    let webhook = shared.settings.telegram.webhook;
    let mut pools = pool::Pools::default();
    let mut bots = HashMap::new();
    loop {
        let woken = shared.status.wake.notified();
        bots = with_bots(&shared, bots).await;
        readers.retain(|space, (token, task)| {
            let keep = bots.get(space).is_some_and(|(t, _, _)| t == token);
            if !keep {
                task.abort();
                shared.status.forget_bot(*space);
                // Unless another space now has the same bot, whose webhook this would undo.
                if webhook && !bots.values().any(|(t, _, _)| t == token) {
                    hook::forget(&shared, *space, token);
                }
            }
            keep
        });
        for (space, (token, api, name)) in &bots {
            if !readers.contains_key(space) {
                let (shared, space, api) = (shared.clone(), *space, api.clone());
                let task = if webhook {
                    tokio::spawn(hook::run(shared, space, name.clone(), api))
                } else {
                    tokio::spawn(updates::poll(shared, space, api))
                };
                readers.insert(space, (token.clone(), task));
            }
        }
        let look_every = if bots.is_empty() {
            // No bot: no pool is filled or read, and `/metrics` shows none.
            shared
                .status
                .channel_invites(std::collections::BTreeMap::new());
            IDLE_LOOK_EVERY
        } else {
            pools.look(&shared, &bots).await;
            LOOK_EVERY
        };
        let _ = tokio::time::timeout(look_every, woken).await;
    }
}

/// Each space's bot token, its client and the space's name; a client of `before` is kept while
/// its space's token is the same (a client holds its connections and TLS set-up: making one each
/// pass would reconnect to Telegram every second).
async fn with_bots(shared: &Shared, mut before: HashMap<u32, Bot>) -> HashMap<u32, Bot> {
    let mut out = HashMap::new();
    let spaces = match shared.store.read(|s| s.list_spaces(&HashMap::new())).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "listing spaces for their Telegram bots");
            return before;
        }
    };
    for summary in spaces {
        let Some(token) = summary.settings.telegram_bot_token else {
            continue;
        };
        let name = summary.space.clone();
        let space = match shared.store.read(move |s| s.space_no(&name)).await {
            Ok(space) => space,
            // Removed since the listing.
            Err(e) if matches!(e.code, Code::NotFound | Code::InvalidField) => continue,
            // The data file cannot be read now: every bot is kept as it was, as when the
            // listing fails. Dropping one would stop its reader (and delete its webhook at
            // Telegram) until the next look, a minute away once no bot is left.
            Err(e) => {
                tracing::warn!(error = %e, "reading a space for its Telegram bot");
                out.extend(before);
                return out;
            }
        };
        if let Some(kept) = before
            .remove(&space)
            .filter(|(t, _, _)| t.as_str() == token.expose())
        {
            out.insert(space, kept);
            continue;
        }
        match shared.api(token.expose()) {
            Ok(api) => {
                out.insert(
                    space,
                    (token.expose().to_owned(), api, summary.space.clone()),
                );
            }
            Err(e) => tracing::error!(error = %e, "a client of the Bot API"),
        }
    }
    out
}
