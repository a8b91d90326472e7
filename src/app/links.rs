//! Tracking links: created (a channel link checked with the space's bot first), listed with
//! their clicks and channel counts, deleted, and visited.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::domain::click::{ClientHints, MAX_USER_AGENT, NewClick};
use crate::domain::keyring::SpaceRef;
use crate::domain::link::{self, Link, LinkView, NewLink};
use crate::domain::{split, variants};
use crate::error::{Code, Error};

/// What a visit of a tracking link found.
#[derive(Debug)]
pub enum Visit {
    /// No link has that slug.
    Unknown,
    /// The link was deleted.
    Gone,
    /// A link preview or crawler: answered without a click.
    Preview(Arc<Link>),
    /// A person: the click was recorded with `uid`; for a channel link, with the invite link
    /// it took (`None`: the pool was empty, the visitor goes to the fallback). `to`: where the
    /// visitor goes, the link's destination or the target of a split link the visit picked.
    Clicked {
        link: Arc<Link>,
        uid: String,
        invite: Option<String>,
        to: link::Destination,
    },
}

/// What a view of a landing page did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewed {
    /// No link has that slug.
    Unknown,
    /// The link was deleted.
    Gone,
    /// Counted, and committed.
    Counted,
    /// A link preview or crawler: not counted.
    NotCounted,
}

impl App {
    /// Creates a link of `space` from a `POST /links` body or the command line's flags.
    pub async fn create_link(
        &self,
        space: &SpaceRef,
        mut link: NewLink,
    ) -> Result<LinkView, Error> {
        link.allowed_origins = link::check_origins(
            std::mem::take(&mut link.allowed_origins),
            self.settings.delivery.allow_private_destinations,
        )?;
        if let link::Destination::Channel(c) = &mut link.destination {
            self.resolve_channel(space, c).await?;
        }
        let is_channel = matches!(link.destination, link::Destination::Channel(_));
        let (no, now) = (space.no, self.now_ms());
        let link = self
            .store
            .write(move |t| t.create_link(no, &link, now))
            .await?;
        if is_channel {
            self.telegram.wake.notify_one();
        }
        let mut view = LinkView::new(&link, &self.settings.public_url(), 0, 0);
        if let Some(split) = &link.split {
            view.targets = Some(split.views(link.space, Some(&self.health)));
        }
        self.fill_channel_state(&mut view).await?;
        Ok(view)
    }

    /// Asks the space's bot about the channel a new link names: it must be a channel, and the
    /// bot an admin of it allowed to invite users. Fills in its chat id and title.
    async fn resolve_channel(
        &self,
        space: &SpaceRef,
        channel: &mut crate::domain::channel::Channel,
    ) -> Result<(), Error> {
        use crate::workers::telegram::api::ApiError;
        let bad = |message: String| Error::field(Code::InvalidField, "channel", message);
        let no = space.no;
        let token = self
            .store
            .read(move |s| s.space_settings(no))
            .await?
            .telegram_bot_token
            .ok_or_else(|| {
                bad(
                    "a channel link needs the space's Telegram bot: set telegram_bot_token \
                     first (docs/channels.md)"
                        .to_owned(),
                )
            })?;
        let api = self.telegram_tasks().api(token.expose()).map_err(|e| {
            tracing::error!(error = %e, "a client of the Bot API");
            Error::internal()
        })?;
        let refused = |e: ApiError| match e {
            ApiError::Refused(_, d) => bad(format!(
                "Telegram does not know the channel {} or the bot cannot see it ({d}); add \
                 the bot to the channel as an admin first",
                channel.chat
            )),
            other => bad(format!("the channel could not be checked: {other}")),
        };
        let me = api.get_me().await.map_err(|e| bad(e.to_string()))?;
        let chat = api
            .call(
                "getChat",
                &serde_json::json!({"chat_id": channel.chat}),
                Duration::ZERO,
            )
            .await
            .map_err(refused)?;
        if chat["type"] != "channel" {
            return Err(bad(format!(
                "{} is a {}, not a channel",
                channel.chat,
                chat["type"].as_str().unwrap_or("chat of another kind")
            )));
        }
        let chat_id = chat["id"]
            .as_i64()
            .ok_or_else(|| bad("getChat answered no id".into()))?;
        let username = chat["username"].as_str();
        self.telegram.chat_seen(chat_id, username);
        if let (Some(username), true) = (username, channel.join_requests) {
            return Err(Error::field(
                Code::InvalidField,
                "join_requests",
                crate::domain::channel::public_join_requests_refusal(username),
            ));
        }
        let may_invite = api.may_invite(chat_id, me.id).await.map_err(refused)?;
        if !may_invite {
            return Err(bad(format!(
                "the bot @{} is not an admin of {} allowed to invite users: in the channel's \
                 Administrators, add the bot and turn on \"Invite users via link\"",
                me.username, channel.chat
            )));
        }
        channel.chat_id = chat_id;
        chat["title"]
            .as_str()
            .unwrap_or_default()
            .clone_into(&mut channel.title);
        Ok(())
    }

    /// A channel link's counts, pool and last Bot API error, into its view.
    async fn fill_channel_state(&self, view: &mut LinkView) -> Result<(), Error> {
        let Some(state) = &mut view.channel_state else {
            return Ok(());
        };
        let slug = view.slug.clone();
        let counts = self.store.read(move |s| s.channel_counts(&slug)).await?;
        state.pool = counts.pool;
        state.handed_out = counts.state.handed_out;
        state.used = counts.state.used;
        state.fallbacks = counts.state.fallbacks;
        state.joins = counts.state.joins;
        state.leaves = counts.state.leaves;
        state.last_error = self.telegram.link_error(&view.slug);
        state.warning = self
            .telegram
            .public_username(state.chat_id)
            .map(|u| crate::domain::channel::public_channel_warning(&u));
        Ok(())
    }

    /// The space's links with their click counts.
    pub async fn links(&self, space: &SpaceRef) -> Result<Vec<LinkView>, Error> {
        let public_url = self.settings.public_url();
        let no = space.no;
        let mut views: Vec<LinkView> = self
            .store
            .read(move |s| s.links(no))
            .await?
            .iter()
            .map(|(link, clicks, bound)| {
                let mut view = LinkView::new(link, &public_url, *clicks, *bound);
                if let Some(split) = &link.split {
                    view.targets = Some(split.views(link.space, Some(&self.health)));
                }
                view
            })
            .collect();
        let views_by_day = self
            .store
            .read(move |s| s.link_views(no, 0, u32::MAX))
            .await?;
        for (slug, _, count) in views_by_day {
            if let Some(view) = views.iter_mut().find(|v| v.slug == slug) {
                view.views += count;
            }
        }
        for view in &mut views {
            self.fill_channel_state(view).await?;
        }
        Ok(views)
    }

    /// Deletes a link of the space: its address answers `410` from now on.
    pub async fn delete_link(&self, space: &SpaceRef, slug: String) -> Result<(), Error> {
        let (no, now) = (space.no, self.now_ms());
        self.store
            .write(move |t| t.delete_link(no, &slug, now))
            .await
    }

    /// A view of a landing page with the link's script (`POST /l/<slug>/view`), counted per
    /// link per day once committed: never a click, and no `uid`. Only from one of the link's
    /// `allowed_origins` (`forbidden` otherwise, and nothing is counted); link previews and
    /// crawlers are answered as a count of none.
    pub async fn view(
        &self,
        slug: &str,
        origin: Option<&str>,
        user_agent: Option<&str>,
    ) -> Result<Viewed, Error> {
        let Some(link) = self.store.link(slug) else {
            return Ok(Viewed::Unknown);
        };
        if link.deleted {
            return Ok(Viewed::Gone);
        }
        if !link::allows_view_from(&link.allowed_origins, origin) {
            return Err(Error::new(
                Code::Forbidden,
                format!(
                    "views of this link count only from its allowed_origins, and this page's \
                     origin ({}) is not one of them",
                    origin.unwrap_or("none sent")
                ),
            ));
        }
        if link::is_preview(user_agent, &self.settings.link_preview_agents) {
            return Ok(Viewed::NotCounted);
        }
        let (space, viewed, now) = (link.space, slug.to_owned(), self.now_ms());
        self.store
            .write(move |t| t.link_view(space, &viewed, now))
            .await?;
        Ok(Viewed::Counted)
    }

    /// A visit of `/l/<slug>`: what to answer, and the click it recorded (committed before
    /// this returns). Link previews, crawlers and `HEAD` record nothing.
    pub async fn visit(
        &self,
        slug: &str,
        raw_query: &str,
        user_agent: Option<&str>,
        client: Option<IpAddr>,
        head: bool,
    ) -> Result<Visit, Error> {
        let Some(link) = self.store.link(slug) else {
            return Ok(Visit::Unknown);
        };
        if link.deleted {
            return Ok(Visit::Gone);
        }
        if head || link::is_preview(user_agent, &self.settings.link_preview_agents) {
            return Ok(Visit::Preview(link));
        }
        let mut click = link::visit_click(&link, raw_query, self.now_ms());
        let to = self.split_target(&link, &mut click);
        // Kept only where the space opted in (`meta_client_hints`): the writer decides.
        let fbc = click.hints.take().and_then(|h| h.fbc);
        click.hints = (client.is_some() || fbc.is_some()).then(|| ClientHints {
            ip: client,
            user_agent: client
                .and(user_agent)
                .map(|a| a.chars().take(MAX_USER_AGENT).collect()),
            fbc,
        });
        let channel = matches!(link.destination, link::Destination::Channel(_));
        let visited = slug.to_owned();
        match self
            .store
            .write(move |t| t.link_click(&visited, click, channel))
            .await
        {
            Ok((outcome, invite)) => {
                self.metrics.click();
                if channel {
                    // The pool is one shorter: its loop makes another.
                    self.telegram.wake.notify_one();
                    if invite.is_none() {
                        self.metrics.telegram("fallback_visits", 1);
                    }
                }
                Ok(Visit::Clicked {
                    link,
                    uid: outcome.uid,
                    invite,
                    to,
                })
            }
            // Deleted between the look-up and the write.
            Err(e) if e.code == Code::NotFound => Ok(Visit::Gone),
            Err(e) => Err(e),
        }
    }
}

impl App {
    /// Where a visit of `link` goes: its destination, or for a split link the target
    /// `split::pick` chose (recorded on `click` as its variant), or the fallback when every
    /// target is down.
    fn split_target(&self, link: &Link, click: &mut NewClick) -> link::Destination {
        let Some(s) = &link.split else {
            return link.destination.clone();
        };
        let point = split::sticky_point(&link.slug, click);
        match split::pick(&s.targets, point, |d| self.health.is_up(link.space, d)) {
            split::Pick::Variant(i) => {
                click.variant = Some(i);
                s.targets[usize::from(i)].destination.clone()
            }
            split::Pick::Fallback => {
                // Without a fallback, the targets as if all were up: a visit still goes on.
                s.fallback.clone().unwrap_or_else(|| {
                    let i = split::pick(&s.targets, point, |_| true);
                    let i = match i {
                        split::Pick::Variant(i) => i,
                        split::Pick::Fallback => 0,
                    };
                    click.variant = Some(i);
                    s.targets[usize::from(i)].destination.clone()
                })
            }
        }
    }
}

impl App {
    /// A split link's figures by variant (`GET /stats?by=variant&link=SLUG`, `tracker stats
    /// --by variant --link SLUG`), all time: every target, with or without clicks.
    pub async fn variant_stats(
        &self,
        space: &SpaceRef,
        slug: &str,
    ) -> Result<Vec<variants::VariantStats>, Error> {
        let link = self
            .store
            .link(slug)
            .filter(|l| l.space == space.no && !l.deleted)
            .ok_or_else(|| {
                Error::field(
                    Code::NotFound,
                    "link",
                    format!("no link {slug:?} in this space"),
                )
            })?;
        let Some(split) = &link.split else {
            return Err(Error::field(
                Code::InvalidField,
                "link",
                format!("the link {slug:?} has one target: stats by variant need a split link"),
            ));
        };
        let (no, slug) = (space.no, slug.to_owned());
        let counts = self
            .store
            .read(move |s| s.variant_counts(no, &slug))
            .await?;
        let each: Vec<_> = split
            .views(link.space, Some(&self.health))
            .into_iter()
            .enumerate()
            .map(|(i, target)| {
                let of_it = counts.iter().find(|(v, _)| usize::from(*v) == i);
                (target, of_it.map(|(_, c)| c.clone()).unwrap_or_default())
            })
            .collect();
        Ok(variants::compare(&each))
    }
}
