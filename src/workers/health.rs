//! The health checks of the targets links lead to (`docs/api.md#target-health`): every
//! `target_check_every`, for each space, `getMe` of its bot (`telegram_bot_token`) and of each
//! of its `watched_bot_tokens`, and for each of its channel links `getChat` and the main bot's
//! own `getChatMember` (still an admin that may invite). Two failed checks in a row hold a
//! target down in [`Health`], which every visit reads to pass it by; one pass brings it back.
//! Each change is logged once, counted in `/metrics` and handed to the alerts.
//!
//! Only Telegram's own refusals count as a failure (`401` a revoked token, `400` chat not
//! found, `403` the bot kicked, the bot no longer an admin): a network failure to reach
//! Telegram at all, or a `429`, says nothing about the target and changes nothing.
//!
//! A revoked token's `getMe` answers `401` without the bot's username, so the username each
//! token answered with is remembered from its last success; a token that never answered names
//! no target. Tokens are held only in memory here and never logged.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::alert::Alert;
use crate::domain::destination::Destination;
use crate::domain::split::Health;
use crate::error::Code;
use crate::metrics::Metrics;
use crate::storage::Store;
use crate::workers::Worker;
use crate::workers::alerts::AlertSender;
use crate::workers::telegram::api::{ApiError, BotApi, Me};

/// What the health checks are handed.
pub struct HealthChecks {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    pub alerts: AlertSender,
}

impl Worker for HealthChecks {
    const NAME: &'static str = "health";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// What one check of a target found.
enum Verdict {
    Pass,
    /// Telegram refused: its words.
    Fail(String),
    /// No answer that says anything about the target.
    Unknown,
}

impl Verdict {
    fn of<T>(result: &Result<T, ApiError>) -> Verdict {
        match result {
            Ok(_) => Verdict::Pass,
            Err(e @ (ApiError::Unauthorized(_) | ApiError::Refused(..))) => {
                Verdict::Fail(e.to_string())
            }
            Err(ApiError::Transport(_) | ApiError::RetryAfter(_)) => Verdict::Unknown,
        }
    }
}

/// What the checks keep from round to round.
#[derive(Default)]
struct Memory {
    /// A client of each token, kept while the token is set (a client keeps its connections).
    clients: HashMap<String, BotApi>,
    /// The bot each token answered `getMe` with last.
    bots: HashMap<String, Me>,
    /// Failed checks in a row, by space and watched name.
    failures: HashMap<(u32, String), u32>,
}

/// Checks every `target_check_every` until the server stops.
async fn run(checks: HealthChecks) {
    let mut memory = Memory::default();
    loop {
        check_all(&checks, &mut memory).await;
        tokio::time::sleep(checks.settings.telegram.check_every).await;
    }
}

/// A space's tokens and channel links, as the checks need them.
struct Watched {
    space: u32,
    name: String,
    main: Option<String>,
    others: Vec<String>,
    /// Each channel link's channel: its name as the link gives it, and its chat id.
    channels: Vec<(String, i64)>,
}

async fn watched_spaces(store: &Store) -> Option<Vec<Watched>> {
    let spaces = match store.read(|s| s.list_spaces(&HashMap::new())).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "listing spaces for the health checks");
            return None;
        }
    };
    let mut out = Vec::new();
    for summary in spaces {
        let settings = summary.settings;
        if settings.telegram_bot_token.is_none() && settings.watched_bot_tokens.is_empty() {
            continue;
        }
        let name = summary.space.clone();
        let read = store
            .read(move |s| {
                let no = s.space_no(&name)?;
                Ok((no, s.links(no)?))
            })
            .await;
        let (space, links) = match read {
            Ok(found) => found,
            Err(e) if matches!(e.code, Code::NotFound | Code::InvalidField) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "reading a space's links for the health checks");
                return None;
            }
        };
        let channels = links
            .iter()
            .filter_map(|(link, _, _)| match &link.destination {
                Destination::Channel(c) => Some((c.chat.clone(), c.chat_id)),
                _ => None,
            })
            .collect();
        out.push(Watched {
            space,
            name: summary.space,
            main: settings.telegram_bot_token.map(|t| t.expose().to_owned()),
            others: settings
                .watched_bot_tokens
                .iter()
                .map(|t| t.expose().to_owned())
                .collect(),
            channels,
        });
    }
    Some(out)
}

/// One round: every space's bots and channels.
async fn check_all(checks: &HealthChecks, memory: &mut Memory) {
    let Some(spaces) = watched_spaces(&checks.store).await else {
        return;
    };
    let tokens: HashSet<&String> = spaces
        .iter()
        .flat_map(|w| w.main.iter().chain(&w.others))
        .collect();
    memory.clients.retain(|t, _| tokens.contains(t));
    memory.bots.retain(|t, _| tokens.contains(t));
    let mut watched: HashSet<(u32, String)> = HashSet::new();
    for space in &spaces {
        let mut main_bot = None;
        for (i, token) in space.main.iter().chain(&space.others).enumerate() {
            let Some(api) = client(checks, memory, token) else {
                continue;
            };
            let answer = api.get_me().await;
            if let Ok(me) = &answer {
                memory.bots.insert(token.clone(), me.clone());
            }
            if i == 0 && space.main.is_some() {
                main_bot = answer.as_ref().ok().cloned();
            }
            let Some(me) = memory.bots.get(token) else {
                continue;
            };
            let name = me.username.to_ascii_lowercase();
            let label = format!("@{}", me.username);
            watched.insert((space.space, name.clone()));
            judge(checks, memory, space, &name, &label, Verdict::of(&answer));
        }
        let Some(main) = space.main.as_ref() else {
            continue;
        };
        for (chat, chat_id) in &space.channels {
            let name = chat.to_ascii_lowercase();
            watched.insert((space.space, name.clone()));
            let Some(api) = client(checks, memory, main) else {
                continue;
            };
            let verdict = check_channel(&api, main_bot.as_ref(), chat, *chat_id).await;
            judge(
                checks,
                memory,
                space,
                &name,
                &format!("channel {chat}"),
                verdict,
            );
        }
    }
    memory.failures.retain(|key, _| watched.contains(key));
    checks
        .health
        .keep_only(|space, name| watched.contains(&(space, name.to_owned())));
    let down = checks.health.down_count();
    let total = watched.len().max(down);
    checks
        .metrics
        .set_link_targets((total - down) as u64, down as u64);
}

/// `getChat` of the channel, then whether the main bot may still invite there. The bot's own
/// `getMe` failing (a revoked token) fails the channel too: no invite link can be made.
async fn check_channel(api: &BotApi, bot: Option<&Me>, chat: &str, chat_id: i64) -> Verdict {
    let found = api
        .call(
            "getChat",
            &serde_json::json!({"chat_id": chat_id}),
            std::time::Duration::ZERO,
        )
        .await;
    match Verdict::of(&found) {
        Verdict::Pass => {}
        other => return other,
    }
    let Some(bot) = bot else {
        return Verdict::Unknown;
    };
    match api.may_invite(chat_id, bot.id).await {
        Ok(true) => Verdict::Pass,
        Ok(false) => Verdict::Fail(format!(
            "the bot @{} is no longer an admin of {chat} allowed to invite users",
            bot.username
        )),
        Err(e) => Verdict::of::<()>(&Err(e)),
    }
}

fn client(checks: &HealthChecks, memory: &mut Memory, token: &str) -> Option<BotApi> {
    if let Some(api) = memory.clients.get(token) {
        return Some(api.clone());
    }
    match BotApi::new(&checks.settings.telegram, &checks.settings.delivery, token) {
        Ok(api) => {
            memory.clients.insert(token.to_owned(), api.clone());
            Some(api)
        }
        Err(e) => {
            tracing::error!(error = %e, "a client of the Bot API");
            None
        }
    }
}

/// Two failures in a row hold `name` down; a pass brings it back. A change is logged once and
/// handed to the alerts.
fn judge(
    checks: &HealthChecks,
    memory: &mut Memory,
    space: &Watched,
    name: &str,
    label: &str,
    verdict: Verdict,
) {
    let key = (space.space, name.to_owned());
    match verdict {
        Verdict::Unknown => {}
        Verdict::Pass => {
            memory.failures.remove(&key);
            if checks.health.set(space.space, name, None) {
                tracing::info!(space = %space.name, target = %label, "target back up");
                checks.alerts.send(
                    space.space,
                    Alert::TargetBack {
                        target: label.to_owned(),
                    },
                );
            }
        }
        Verdict::Fail(why) => {
            let failures = memory.failures.entry(key).or_default();
            *failures += 1;
            if *failures >= FAILURES_TO_DOWN
                && checks
                    .health
                    .set(space.space, name, Some(checks.clock.now_ms()))
            {
                tracing::warn!(
                    space = %space.name, target = %label, error = ?why,
                    "target down: its visits go to the link's other targets"
                );
                checks.alerts.send(
                    space.space,
                    Alert::TargetDown {
                        target: label.to_owned(),
                        why,
                    },
                );
            }
        }
    }
}

/// Failed checks in a row that hold a target down: one may be Telegram's passing hiccup.
const FAILURES_TO_DOWN: u32 = 2;
