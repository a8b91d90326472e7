//! The tracker's operations, shared by every way in (HTTP endpoints, the control socket, the
//! command line), as methods of [`App`], a file per resource: who a request acts for
//! (`auth.rs`), events, clicks and bindings (`events.rs`), links (`links.rs`), the feed, stats
//! and rejections (`reads.rs`), costs (`costs.rs`), a space's settings (`settings.rs`),
//! spaces, credentials and backups (`spaces.rs`), destinations (`destinations.rs`), the admin
//! page's users (`users.rs`) and the audit log of what they and others changed (`audit.rs`).
//!
//! An [`App`] holds what they need: the store, the settings, the clock and the rate limiters;
//! this file makes it and hands the background tasks their narrow parts of it. Nothing here
//! knows about HTTP; handlers turn requests into these calls and answers into JSON.

pub mod audit;
pub mod auth;
pub mod batch;
pub mod conversions;
pub mod costs;
pub mod destinations;
pub mod events;
pub mod links;
pub mod miniapp;
pub mod reads;
pub mod second_factor;
pub mod settings;
pub mod spaces;
pub mod users;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::clock::Clock;
use crate::config::Settings;
use crate::domain::event::EventRules;
use crate::domain::rate::{Limiter, SpaceLimiter};
use crate::domain::warnings::QuietWarnings;
use crate::metrics::Metrics;
use crate::storage::Store;

pub struct App {
    pub store: Arc<Store>,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    /// Requests, events and clicks counted for `/metrics` (the writer counts its own).
    pub metrics: Arc<Metrics>,
    rules: EventRules,
    dedup_window_ms: u64,
    limiter: SpaceLimiter,
    /// The per-address limit of the public paths.
    address_limiter: Limiter<IpAddr>,
    /// Whether the log has said that an `X-Forwarded-For` came from an untrusted peer.
    warned_untrusted_forwarded: AtomicBool,
    /// The warnings any client can cause, written once a minute per address and kind.
    warnings: QuietWarnings,
    /// Requests of each space waiting on `GET /events/wait` now.
    waiting: Arc<Mutex<HashMap<u32, usize>>>,
    /// Wakes the senders (`delivery/`) to look for due deliveries now: after a retry by hand,
    /// or a step of a test's clock.
    pub delivery_wake: Arc<tokio::sync::Notify>,
    /// What the Telegram tasks report (each bot's name, each channel link's last Bot API
    /// error), and their wake-up (`workers/telegram/`).
    pub telegram: Arc<crate::workers::telegram::Status>,
    /// Each space's last fetch of spend from Meta, and the fetch loop's wake-up (`workers/spend/`).
    pub spend: Arc<crate::workers::spend::Status>,
    /// The split links' targets the health checks hold down (`workers/health.rs`).
    pub health: Arc<crate::domain::split::Health>,
    /// Where the workers hand the alerts they notice (`workers/alerts.rs`), and the queue the
    /// alerts' worker takes when it starts.
    pub alerts: crate::workers::alerts::AlertSender,
    alert_queue: Mutex<Option<crate::workers::alerts::AlertQueue>>,
}

impl App {
    #[must_use]
    pub fn new(settings: Settings, store: Arc<Store>, clock: Arc<dyn Clock>) -> App {
        let (alerts, alert_queue) = crate::workers::alerts::AlertSender::new();
        App {
            alerts,
            alert_queue: Mutex::new(Some(alert_queue)),
            rules: settings.event_rules(),
            dedup_window_ms: settings.dedup_window_ms(),
            limiter: SpaceLimiter::new(settings.rate_limit),
            address_limiter: Limiter::new(settings.address_rate_limit),
            warned_untrusted_forwarded: AtomicBool::new(false),
            warnings: QuietWarnings::default(),
            waiting: Arc::default(),
            delivery_wake: Arc::default(),
            telegram: Arc::default(),
            spend: Arc::default(),
            health: Arc::default(),
            metrics: Arc::new(Metrics::default()),
            store,
            settings,
            clock,
        }
    }

    /// What the senders of conversions out are handed: the parts of the application they use.
    #[must_use]
    pub fn senders(&self) -> crate::delivery::Senders {
        crate::delivery::Senders {
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            settings: self.settings.delivery,
            wake: self.delivery_wake.clone(),
        }
    }

    /// What the fetch of spend from Meta is handed (`workers/spend/`).
    #[must_use]
    pub fn spend_tasks(&self) -> crate::workers::spend::Shared {
        crate::workers::spend::Shared {
            store: self.store.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
            status: self.spend.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// What the fetch of the ECB's rates is handed (`workers/ecb.rs`).
    #[must_use]
    pub fn ecb_tasks(&self) -> crate::workers::ecb::Shared {
        crate::workers::ecb::Shared {
            store: self.store.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
        }
    }

    /// What retention is handed (`workers/retention.rs`).
    #[must_use]
    pub fn retention(&self) -> crate::workers::retention::Retention {
        crate::workers::retention::Retention::new(
            self.store.clone(),
            self.clock.clone(),
            self.metrics.clone(),
            &self.settings,
        )
    }

    /// What the backup schedule is handed (`workers/backups.rs`).
    #[must_use]
    pub fn backups(
        &self,
        schedule: crate::config::BackupSchedule,
    ) -> crate::workers::backups::Backups {
        crate::workers::backups::Backups {
            store: self.store.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            schedule,
        }
    }

    /// What the health checks of links' targets are handed (`workers/health.rs`).
    #[must_use]
    pub fn health_checks(&self) -> crate::workers::health::HealthChecks {
        crate::workers::health::HealthChecks {
            store: self.store.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
            health: self.health.clone(),
            metrics: self.metrics.clone(),
            alerts: self.alerts.clone(),
        }
    }

    /// What the alerts' worker is handed (`workers/alerts.rs`): the queue, once.
    #[must_use]
    pub fn alert_tasks(&self) -> Option<crate::workers::alerts::AlertTasks> {
        let queue = self
            .alert_queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        Some(crate::workers::alerts::AlertTasks {
            store: self.store.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
            queue,
        })
    }

    /// What the Telegram tasks are handed (`workers/telegram/`).
    #[must_use]
    pub fn telegram_tasks(&self) -> crate::workers::telegram::Shared {
        crate::workers::telegram::Shared::new(
            self.store.clone(),
            self.settings.clone(),
            self.clock.clone(),
            self.telegram.clone(),
            self.metrics.clone(),
        )
    }

    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Whether to write the warning `what`, which `client` caused, now: `Some` with the lines
    /// of it left out since the last, at most once a minute per address and kind.
    #[must_use]
    pub fn admit_warning(&self, client: Option<IpAddr>, what: &'static str) -> Option<u64> {
        let address = client.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        self.warnings.admit(address, what, self.now_ms())
    }
}
