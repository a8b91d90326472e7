//! Alerts (`docs/api.md#alerts`): the workers that notice a change of state hand it here, once
//! per change and never per check, and this worker tells each space where it asked: a chat,
//! by the space's own bot (`sendMessage` into `alert_telegram_chat`), and a webhook
//! (`alert_webhook_url`), signed as webhooks are (`platform/webhook.rs`, the one signing).
//!
//! An alert is tried a few times and then given up, logged: the queue lives in memory, so an
//! alert handed over but not yet sent when the server stops is not sent after it starts again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::alert::Alert;
use crate::domain::event::EventId;
use crate::domain::settings::SpaceSettings;
use crate::platform::webhook::webhook_signature;
use crate::storage::Store;
use crate::workers::Worker;
use crate::workers::telegram::api::BotApi;

/// Where the workers hand their alerts, with the space they concern; cheap to clone.
#[derive(Clone, Debug)]
pub struct AlertSender(mpsc::UnboundedSender<(u32, Alert)>);

/// The queue [`AlertSender`] fills, which the alerts' worker reads.
pub type AlertQueue = mpsc::UnboundedReceiver<(u32, Alert)>;

impl AlertSender {
    /// A sender and the queue it fills.
    #[must_use]
    pub fn new() -> (AlertSender, AlertQueue) {
        let (tx, rx) = mpsc::unbounded_channel();
        (AlertSender(tx), rx)
    }

    /// Hands `alert` of `space` over; dropped when no alerts' worker runs.
    pub fn send(&self, space: u32, alert: Alert) {
        let _ = self.0.send((space, alert));
    }
}

/// What the alerts' worker is handed.
pub struct AlertTasks {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    pub queue: AlertQueue,
}

impl Worker for AlertTasks {
    const NAME: &'static str = "alerts";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// Attempts at one alert, a second, then two, apart.
const ATTEMPTS: u32 = 3;

async fn run(mut tasks: AlertTasks) {
    let client = match crate::outbound::client(&tasks.settings.delivery) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "a client for alerts; none is sent");
            return;
        }
    };
    while let Some((space, alert)) = tasks.queue.recv().await {
        let found = tasks
            .store
            .read(move |s| {
                let name = s
                    .list_spaces(&std::collections::HashMap::new())?
                    .into_iter()
                    .map(|summary| summary.space)
                    .find(|name| s.space_no(name).is_ok_and(|no| no == space));
                Ok(name.map(|name| Ok::<_, crate::error::Error>((name, s.space_settings(space)?))))
            })
            .await;
        let (name, settings) = match found {
            Ok(Some(Ok(found))) => found,
            Ok(None) => continue,
            Ok(Some(Err(e))) | Err(e) => {
                tracing::warn!(error = %e, "reading a space's settings for an alert");
                continue;
            }
        };
        if let Some(chat) = &settings.alert_telegram_chat {
            to_chat(&tasks, &settings, chat, &alert.sentence(&name)).await;
        }
        if let (Some(url), Some(secret)) =
            (&settings.alert_webhook_url, &settings.alert_webhook_secret)
        {
            let body = json!({"space": name, "at_ms": tasks.clock.now_ms(),
                "text": alert.sentence(&name), "alert": alert});
            to_webhook(&tasks, &client, url, secret.expose(), &body).await;
        }
    }
}

/// `sendMessage` by the space's bot into `chat`.
async fn to_chat(tasks: &AlertTasks, settings: &SpaceSettings, chat: &str, text: &str) {
    let Some(token) = &settings.telegram_bot_token else {
        tracing::warn!("an alert for a chat, but the space has no telegram_bot_token");
        return;
    };
    let api = match BotApi::new(
        &tasks.settings.telegram,
        &tasks.settings.delivery,
        token.expose(),
    ) {
        Ok(api) => api,
        Err(e) => {
            tracing::error!(error = %e, "a client of the Bot API");
            return;
        }
    };
    let params = json!({"chat_id": chat, "text": text});
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
        }
        match api.call("sendMessage", &params, Duration::ZERO).await {
            Ok(_) => return,
            Err(e) => last = Some(e.to_string()),
        }
    }
    tracing::warn!(error = ?last, "an alert could not be sent to its chat");
}

/// `POST` of `body` to `url`, signed as a webhook is: `webhook-id`, `webhook-timestamp`,
/// `webhook-signature`.
async fn to_webhook(
    tasks: &AlertTasks,
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    body: &serde_json::Value,
) {
    let body = body.to_string().into_bytes();
    let id = EventId::random().to_string();
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
        }
        let timestamp = tasks.clock.now_ms() / 1000;
        let answer = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                webhook_signature(&[secret], &id, timestamp, &body),
            )
            .body(body.clone())
            .send()
            .await;
        match answer {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => last = format!("answered {}", r.status().as_u16()),
            Err(e) => last = crate::outbound::error_words(&e),
        }
    }
    tracing::warn!(error = ?last, "an alert could not be sent to alert_webhook_url");
}
