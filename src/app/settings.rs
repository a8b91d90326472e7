//! A space's settings (`docs/api.md#space-settings`): read and changed the one way every way in
//! does (`PATCH /space`, `tracker space set`, the Settings page). A new Telegram bot token is
//! checked with Telegram here before the store takes it; the store holds the rules that need
//! every space (one bot serves one space).

use crate::app::App;
use crate::domain::keyring::SpaceRef;
use crate::domain::rate_history::RateSource;
use crate::domain::settings::{SettingsPatch, SpaceSettings};
use crate::domain::stats::{local_day, quarter_of};
use crate::error::{Code, Error};
use crate::workers::telegram::api::{ApiError, Me};

impl App {
    /// The space's settings.
    pub async fn space_settings(&self, space: &SpaceRef) -> Result<SpaceSettings, Error> {
        let no = space.no;
        self.store.read(move |s| s.space_settings(no)).await
    }

    /// Changes the space's settings (`PATCH /space`, `tracker space set`, the Settings page):
    /// committed, and in force for every event written after, before this answers.
    pub async fn update_settings(
        &self,
        space: &SpaceRef,
        patch: SettingsPatch,
    ) -> Result<SpaceSettings, Error> {
        let token = patch.value("telegram_bot_token").map(str::to_owned);
        let bot = match token.as_deref().filter(|t| !t.is_empty()) {
            Some(token) => Some(self.check_bot_token(token).await?),
            None => None,
        };
        let meta = [
            "meta_ads_account",
            "meta_ads_token",
            "meta_graph_url",
            "meta_graph_version",
        ]
        .iter()
        .any(|name| patch.value(name).is_some());
        // Meta's and the ECB's addresses are held to a destination's rule: a private one only
        // where allowed.
        for name in ["meta_graph_url", "ecb_rates_url"] {
            if let Some(url) = patch.value(name).filter(|u| !u.is_empty()) {
                crate::platform::check_url_of(
                    name,
                    url,
                    self.settings.delivery.allow_private_destinations,
                    crate::platform::MAX_URL_LEN,
                )?;
            }
        }
        // Alerts go where a destination may: a private address only where allowed.
        if let Some(url) = patch.value("alert_webhook_url").filter(|u| !u.is_empty()) {
            crate::platform::check_url_of(
                "alert_webhook_url",
                url,
                self.settings.delivery.allow_private_destinations,
                crate::platform::MAX_URL_LEN,
            )?;
        }
        // The store may still refuse the token (another space's bot): the space's bot is
        // reported only once it is the space's.
        let no = space.no;
        // New rates take effect today, in the zone the space has after this change; the days
        // before keep theirs.
        let rates_set = patch.value("currency_rates").is_some();
        let now = self.now_ms();
        let settings = self
            .store
            .write(move |t| {
                let settings = t.update_settings(no, &patch)?;
                if rates_set {
                    let today = local_day(&settings.time_zone.zone(), quarter_of(now));
                    let rates = settings.currency_rates.text();
                    t.record_rates(no, RateSource::Typed, today, &rates)?;
                }
                Ok(settings)
            })
            .await?;
        match bot {
            Some(Ok(me)) => self.telegram.bot_found(space.no, &me),
            Some(Err(e)) => self.telegram.bot_failed(space.no, &e),
            None => {}
        }
        if token.is_some() {
            self.telegram.wake.notify_one();
        }
        if meta {
            self.spend.settings_changed(space.no);
        }
        Ok(settings)
    }

    /// `getMe` with a new bot token: a token Telegram refuses is refused here, and nothing is
    /// stored; one that cannot be checked now (Telegram unreachable) is kept, and the Settings
    /// page says why it is not yet in use. Answers the bot, or why it is not known yet.
    async fn check_bot_token(&self, token: &str) -> Result<Result<Me, ApiError>, Error> {
        let api = self.telegram_tasks().api(token).map_err(|e| {
            tracing::error!(error = %e, "a client of the Bot API");
            Error::internal()
        })?;
        match api.get_me().await {
            Err(e @ ApiError::Unauthorized(_)) => Err(Error::field(
                Code::InvalidField,
                "telegram_bot_token",
                format!("`telegram_bot_token`: {e}"),
            )),
            bot => Ok(bot),
        }
    }

    /// The space's Telegram bot in a sentence: its `@username`, or why it is not in use.
    pub async fn telegram_bot(&self, space: &SpaceRef) -> Result<Option<String>, Error> {
        let no = space.no;
        let settings = self.store.read(move |s| s.space_settings(no)).await?;
        Ok(settings.telegram_bot_token.map(|_| {
            self.telegram
                .bot(space.no)
                .map_or_else(|| "not asked yet".to_owned(), |b| b.describe())
        }))
    }
}
