//! A Telegram Mini App's ways in (`docs/bots.md#mini-apps`): a bind and the events a browser may
//! send, with the `initData` Telegram signed with the space's bot token as the credential, in
//! place of the space's secret, which a Mini App running in the user's browser must not hold.

use crate::app::App;
use crate::app::events::EventResult;
use crate::domain::click::BindInput;
use crate::domain::event::{EventInput, EventKind, Freshness, POST_NAMES};
use crate::domain::init_data::{self, MiniAppRequest, MiniAppUser};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::BindOutcome;
use crate::error::{Code, Error};

/// The only kinds a browser may send: no money from a browser, whose requests anyone can make;
/// deposits come from a server with the space's secret.
const BROWSER_KINDS: [EventKind; 2] = [EventKind::Contact, EventKind::Registration];

impl App {
    /// `POST /miniapp/<space>/bind`: binds the click named by `start_param` to the user who
    /// opened the Mini App, first binding wins, as `POST /bind` does.
    pub async fn miniapp_bind(
        &self,
        space_name: &str,
        init_data: &str,
    ) -> Result<BindOutcome, Error> {
        let (space, user) = self.miniapp_user(space_name, init_data).await?;
        let input = BindInput {
            uid: user.uid()?,
            tg_id: user.tg_id,
        };
        self.bind(&space, input).await
    }

    /// `POST /miniapp/<space>/events`: a `contact` or `registration` of the user who opened the
    /// Mini App, recorded as `POST /events` records it, with the user's Telegram id and, when
    /// `start_param` is a `uid`, that click.
    pub async fn miniapp_event(
        &self,
        space_name: &str,
        sent: MiniAppRequest,
    ) -> Result<EventResult, Error> {
        if let Some(kind) = sent.event.as_deref()
            && !BROWSER_KINDS.iter().any(|k| k.as_str() == kind)
        {
            return Err(Error::field(
                Code::InvalidEvent,
                "event",
                format!(
                    "a Mini App sends only contact or registration, got {kind:?}: deposits come \
                     from your server with the space's secret (POST /events)"
                ),
            ));
        }
        let (space, user) = self.miniapp_user(space_name, &sent.init_data).await?;
        let input = EventInput {
            event: sent.event,
            uid: user.uid().ok(),
            tg_id: Some(user.tg_id.to_string()),
            eid: sent.eid,
            ..EventInput::default()
        };
        self.record_event(&space, input, &POST_NAMES).await
    }

    /// The space named in the path and the user its bot signed `init_data` for. An unknown space
    /// and one without a bot are answered as a bad signature, so the path tells nothing about
    /// which spaces exist.
    async fn miniapp_user(
        &self,
        space_name: &str,
        init_data: &str,
    ) -> Result<(SpaceRef, MiniAppUser), Error> {
        let wanted = space_name.to_owned();
        let found = self
            .store
            .read(move |s| {
                let no = s.space_no(&wanted)?;
                Ok((no, s.space_settings(no)?.telegram_bot_token))
            })
            .await;
        let (no, token) = match found {
            Ok((no, Some(token))) => (no, token),
            Ok((_, None)) => return Err(init_data::not_signed()),
            Err(e) if e.code == Code::InvalidField => return Err(init_data::not_signed()),
            Err(e) => return Err(e),
        };
        let at = Freshness {
            now_ms: self.now_ms(),
            max_age_ms: self.settings.miniapp_max_age_ms(),
            max_skew_ms: self.rules.max_clock_skew_ms,
        };
        let user = init_data::verify(init_data, token.expose(), at)?;
        let space = SpaceRef {
            no,
            name: space_name.into(),
        };
        Ok((space, user))
    }
}
