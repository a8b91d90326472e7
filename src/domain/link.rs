//! Tracking links (`docs/api.md#tracking-links`): the tracker's own landing page. The rules of a link's
//! fields, where a click on it sends the visitor, which requests are link previews rather than
//! people, and the click a visit records.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::domain::channel::{self, Channel, ChatRef};
use crate::domain::click::{
    AD_CLICK_IDS, CAMPAIGN_NAME_MAX_CHARS, CLICK_FIELD_BOUNDS, CLICK_ID_MAX_CHARS, ClickIds,
    ClientHints, FBC_MAX_CHARS, FBP_MAX_CHARS, NewClick, meta_cookie,
};
pub use crate::domain::destination::{
    Destination, MAX_TARGET_LEN, bot_or_target, check_bot, check_target,
};
use crate::domain::input::{self, Query, quoted};
pub use crate::domain::origins::{MAX_ALLOWED_ORIGINS, allows_view_from, check_origins};
use crate::domain::split::{self, Split, TargetView};
use crate::error::{Code, Error};

/// The most links a space holds, deleted ones included (a deleted link keeps its slug).
pub const MAX_LINKS_PER_SPACE: usize = 10_000;

/// How a link answers a visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename_all = "snake_case")]
pub enum Mode {
    /// `302` straight to the destination.
    Redirect,
    /// A small page that opens Telegram and shows a button: for in-app browsers where a
    /// redirect to t.me often fails.
    Page,
}

impl Mode {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Redirect => "redirect",
            Mode::Page => "page",
        }
    }

    pub fn parse(text: &str) -> Result<Mode, Error> {
        match text {
            "redirect" => Ok(Mode::Redirect),
            "page" => Ok(Mode::Page),
            other => Err(Error::field(
                Code::InvalidField,
                "mode",
                format!(
                    "mode must be \"redirect\" or \"page\", got {}",
                    quoted(other)
                ),
            )),
        }
    }
}

/// A link as created: checked, not yet stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLink {
    pub slug: String,
    pub destination: Destination,
    pub campaign_name: Option<String>,
    pub mode: Mode,
    /// Where a landing page that counts views of this link may be served from
    /// ([`check_origins`]); none: no view is counted.
    pub allowed_origins: Vec<String>,
    /// A split test's targets (`destination` is the first of them) and fallback.
    pub split: Option<Split>,
}

/// A stored link, as the public path and the management API see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub space: u32,
    pub slug: String,
    pub destination: Destination,
    pub campaign_name: Option<String>,
    pub mode: Mode,
    pub created_at_ms: u64,
    pub deleted: bool,
    /// Origins (`https://host[:port]`) whose pages' views are counted.
    pub allowed_origins: Vec<String>,
    /// A split test's targets (`destination` is the first of them) and fallback.
    pub split: Option<Split>,
}

/// A link as `GET /links` and `tracker link list` show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LinkView {
    pub slug: String,
    /// The Telegram bot a click is sent to, for a link that has one (else `target`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bot: Option<String>,
    /// The URL template a click is sent to, for a link that has one (else `bot`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    /// The Telegram channel a click is sent to (`@username` or chat id), for a channel link.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channel: Option<String>,
    /// A channel link's state: its channel, its pool of invite links, joins and leaves.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channel_state: Option<Box<ChannelView>>,
    pub campaign_name: Option<String>,
    #[schemars(with = "Mode")]
    pub mode: String,
    /// The public address to put in an ad.
    pub url: String,
    pub created_at_ms: u64,
    pub clicks: u64,
    pub bound_clicks: u64,
    /// Origins whose landing pages' views are counted (`POST /l/<slug>/view`).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Views of landing pages with this link's script, all time.
    #[serde(default)]
    pub views: u64,
    /// A split test's targets, each with its weight, variant and health (then no `bot` or
    /// `target`), and where visits go when all are down.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub targets: Option<Vec<TargetView>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fallback: Option<TargetView>,
}

/// A channel link's state, as `GET /links`, the Links page and `tracker link list` show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChannelView {
    /// The channel's title, as Telegram answered it when the link was made.
    pub title: String,
    pub chat_id: i64,
    pub join_requests: bool,
    /// Where a visitor goes when no invite link is left in the pool.
    pub fallback: String,
    /// Invite links made ahead and not yet handed out.
    pub pool: u64,
    /// Invite links handed out to visitors, ever.
    pub handed_out: u64,
    /// Invite links a visitor joined the channel through.
    pub used: u64,
    /// Visits sent to the fallback because the pool was empty (their joins cannot be
    /// attributed).
    pub fallbacks: u64,
    /// Joins through the link's invite links, and leaves of those who joined through them.
    pub joins: u64,
    pub leaves: u64,
    /// The last error the Bot API answered for this link's channel, if the last call failed.
    pub last_error: Option<String>,
    /// Why joins through the link may count as unattributed: the channel is public (Telegram
    /// answered its `@username`), and Telegram's apps often join a public channel directly.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub warning: Option<String>,
}

impl LinkView {
    #[must_use]
    pub fn new(link: &Link, public_url: &str, clicks: u64, bound_clicks: u64) -> LinkView {
        let (bot, target, channel) = match (&link.destination, &link.split) {
            (_, Some(_)) => (None, None, None),
            (Destination::Bot(b), None) => (Some(b.clone()), None, None),
            (Destination::Target(t), None) => (None, Some(t.clone()), None),
            (Destination::Channel(c), None) => (None, None, Some(c.chat.clone())),
        };
        let channel_state = match &link.destination {
            Destination::Channel(c) => Some(Box::new(ChannelView {
                title: c.title.clone(),
                chat_id: c.chat_id,
                join_requests: c.join_requests,
                fallback: c.fallback.clone(),
                ..ChannelView::default()
            })),
            _ => None,
        };
        LinkView {
            slug: link.slug.clone(),
            bot,
            target,
            channel,
            channel_state,
            campaign_name: link.campaign_name.clone(),
            mode: link.mode.as_str().to_owned(),
            url: format!("{}/l/{}", public_url.trim_end_matches('/'), link.slug),
            created_at_ms: link.created_at_ms,
            clicks,
            bound_clicks,
            allowed_origins: link.allowed_origins.clone(),
            views: 0,
            targets: link.split.as_ref().map(|s| s.views(link.space, None)),
            fallback: link
                .split
                .as_ref()
                .and_then(|s| s.fallback.as_ref().map(TargetView::of)),
        }
    }

    /// The line a landing page pastes in for this link (`docs/landing-pages.md`): the script
    /// under the same public address as the link's `url`.
    #[must_use]
    pub fn script_line(&self) -> String {
        let base = self
            .url
            .strip_suffix(&format!("/l/{}", self.slug))
            .unwrap_or(&self.url);
        format!(
            "<script src=\"{base}/t.js\" data-link=\"{}\" defer></script>",
            self.slug
        )
    }
}

/// The running server's view of every link, by slug, so that a visit finds its link without a
/// read of the file, and of how many links each space holds. Read whole at start; then the
/// writer applies each committed batch's changed links, before that commit is answered (never
/// a read of every link per change).
#[derive(Default)]
pub struct Directory {
    links: RwLock<Links>,
}

#[derive(Default)]
struct Links {
    by_slug: HashMap<String, Arc<Link>>,
    /// Links of each space, deleted ones included ([`MAX_LINKS_PER_SPACE`]).
    per_space: HashMap<u32, usize>,
}

impl Directory {
    /// Sets every link, as read from the file.
    pub fn replace(&self, links: Vec<Link>) {
        let mut all = Links::default();
        for link in links {
            all.add(link);
        }
        *self.links.write().unwrap_or_else(PoisonError::into_inner) = all;
    }

    /// Puts in links a commit created or changed (a deletion is a change).
    pub fn apply(&self, changed: Vec<Link>) {
        let mut all = self.links.write().unwrap_or_else(PoisonError::into_inner);
        for link in changed {
            all.add(link);
        }
    }

    #[must_use]
    pub fn get(&self, slug: &str) -> Option<Arc<Link>> {
        self.links
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_slug
            .get(slug)
            .cloned()
    }

    /// How many links `space` holds, deleted ones included.
    #[must_use]
    pub fn count(&self, space: u32) -> usize {
        self.links
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .per_space
            .get(&space)
            .copied()
            .unwrap_or(0)
    }
}

impl Links {
    fn add(&mut self, link: Link) {
        let space = link.space;
        if self
            .by_slug
            .insert(link.slug.clone(), Arc::new(link))
            .is_none()
        {
            *self.per_space.entry(space).or_default() += 1;
        }
    }
}

/// The rule of a slug: 1 to 64 of `A-Za-z0-9_-`.
pub fn check_slug(slug: &str) -> Result<(), Error> {
    // The alphabet and length of a uid: a slug goes into URLs as a uid goes into deep links.
    if crate::domain::uid::is_start_parameter(slug) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "slug",
            format!(
                "a slug is 1 to 64 of A-Z, a-z, 0-9, '_' and '-', got {}",
                quoted(slug)
            ),
        ))
    }
}

/// The body of `POST /links`, as read; in `/openapi.json`, [`NewLinkJson`].
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkBody<'a> {
    #[serde(borrow)]
    #[schemars(with = "String", pattern(r"^[A-Za-z0-9_-]{1,64}$"))]
    slug: Option<&'a RawValue>,
    /// A Telegram bot username (5 to 32 of A-Z, a-z, 0-9, `_`, ending in `bot`); a leading `@`
    /// is dropped.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        pattern(r"^(@?[A-Za-z0-9_]{2,29}[Bb][Oo][Tt])?$")
    )]
    bot: Option<&'a RawValue>,
    /// An `https://` URL template of visible ASCII: a host name, then `{uid}` where the click id
    /// goes, in the path or query.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        length(max = MAX_TARGET_LEN),
        pattern(r"^(https://[A-Za-z0-9.-]+(:[0-9]{1,5})?[/?#][!-~]*\{uid\}[!-~]*)?$")
    )]
    target: Option<&'a RawValue>,
    /// A Telegram channel: its `@username` or chat id (`-100...`); the space's bot must be an
    /// admin of it allowed to invite users.
    #[serde(borrow)]
    #[schemars(
        with = "Option<String>",
        pattern(r"^\s*(@?[A-Za-z][A-Za-z0-9_]{4,31}|-[0-9]{1,18})?\s*$")
    )]
    channel: Option<&'a RawValue>,
    /// For a channel: whether its invite links ask to join (the tracker approves); default
    /// `false`.
    #[serde(default)]
    join_requests: Option<bool>,
    /// For a channel: an invite link of it (`https://t.me/+...`), where visitors go when the
    /// pool of invite links is empty.
    #[serde(borrow)]
    #[schemars(with = "split::FallbackJson")]
    fallback: Option<&'a RawValue>,
    /// A split test: 2 to 16 targets, each a `bot` or a `target` with a `weight`.
    #[serde(borrow)]
    #[schemars(with = "Option<Vec<split::TargetEntry>>")]
    targets: Option<&'a RawValue>,
    #[serde(borrow)]
    #[schemars(with = "Option<String>", length(max = CAMPAIGN_NAME_MAX_CHARS))]
    campaign_name: Option<&'a RawValue>,
    /// `redirect` (the default) or `page`.
    #[serde(borrow)]
    #[schemars(with = "Option<String>", pattern(r"^(redirect|page)?$"))]
    mode: Option<&'a RawValue>,
    /// Where landing pages with the link's script may be served from, for their views to
    /// count: `https://` origins (scheme, host and port, no path).
    #[serde(borrow)]
    #[schemars(with = "Option<Vec<String>>", length(max = MAX_ALLOWED_ORIGINS))]
    allowed_origins: Option<&'a RawValue>,
}

// Read as a `LinkBody`; this type only describes it in `/openapi.json`.
/// The body of `POST /links`: one shape per place a link sends to, a `bot`, a `target` or a
/// `channel` (with its `fallback`).
pub struct NewLinkJson;

impl JsonSchema for NewLinkJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NewLinkBody".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let flat = <LinkBody<'_> as JsonSchema>::json_schema(generator);
        // Each shape's own fields: those it requires, then any optional ones.
        let shape = |title, required: &[&'static str], optional: &[&'static str]| input::Variant {
            title,
            tag: None,
            fields: ["slug", "campaign_name", "mode", "allowed_origins"]
                .iter()
                .chain(required)
                .chain(optional)
                .copied()
                .collect(),
            required: required.to_vec(),
            never: Vec::new(),
        };
        let variants = [
            shape("bot", &["bot"], &[]),
            shape("target", &["target"], &[]),
            shape("channel", &["channel", "fallback"], &["join_requests"]),
            shape("targets", &[], &["targets", "fallback"]),
        ];
        let shapes = input::by_variant(
            &flat,
            &variants,
            true,
            "oneOf",
            "A new link: its slug, and where it sends visitors, one of a Telegram `bot`, a \
             `target` URL, a Telegram `channel` (with its `fallback`), or several weighted \
             `targets` (with an optional `fallback`). An empty string or `null` counts as \
             absent (`missing_field` for none of them, `invalid_field` for two).",
        );
        split::with_split_shape(shapes, generator)
    }
}

impl NewLink {
    /// Reads and checks a `POST /links` body.
    pub fn from_json(body: &[u8]) -> Result<NewLink, Error> {
        let mut b: LinkBody = input::parse_body(body)?;
        let split = split::from_body(b.targets, &mut b.fallback, [b.bot, b.target, b.channel])?;
        let text = |name: &'static str, v: Option<&RawValue>| -> Result<Option<String>, Error> {
            v.map(|raw| input::json_string(raw, name))
                .transpose()
                .map(|s| s.filter(|t| !t.is_empty()))
        };
        let (bot, target) = match split.as_ref() {
            Some(s) => TargetView::of(&s.targets[0].destination).bot_and_target(),
            None => (text("bot", b.bot)?, text("target", b.target)?),
        };
        let channel = ChannelFields {
            channel: text("channel", b.channel)?,
            join_requests: b.join_requests,
            fallback: text("fallback", b.fallback)?,
        };
        let allowed_origins = b
            .allowed_origins
            .map(|raw| input::json_strings(raw, "allowed_origins", "a list of origins (strings)"))
            .transpose()?
            .unwrap_or_default();
        let mut link = NewLink::with_channel(
            text("slug", b.slug)?,
            bot,
            target,
            channel,
            text("campaign_name", b.campaign_name)?,
            text("mode", b.mode)?,
        )?;
        (link.allowed_origins, link.split) = (allowed_origins, split);
        Ok(link)
    }

    /// Checks a link's fields as given (the command line gives them as flags).
    pub fn new(
        slug: Option<String>,
        bot: Option<String>,
        target: Option<String>,
        campaign_name: Option<String>,
        mode: Option<String>,
    ) -> Result<NewLink, Error> {
        NewLink::with_channel(
            slug,
            bot,
            target,
            ChannelFields::default(),
            campaign_name,
            mode,
        )
    }

    /// Checks a link's fields, a channel's among them: a link has one of a bot, a target and a
    /// channel.
    pub fn with_channel(
        slug: Option<String>,
        bot: Option<String>,
        target: Option<String>,
        channel: ChannelFields,
        campaign_name: Option<String>,
        mode: Option<String>,
    ) -> Result<NewLink, Error> {
        let slug = slug.ok_or_else(|| missing("slug"))?;
        check_slug(&slug)?;
        let has_channel = channel.channel.is_some();
        if has_channel && (bot.is_some() || target.is_some()) {
            return Err(Error::field(
                Code::InvalidField,
                "channel",
                "a link has a bot, a target or a channel, only one",
            ));
        }
        let destination = match (bot, target, channel.destination()?) {
            (None, None, Some(channel)) => channel,
            (bot, target, _) => bot_or_target(bot, target)?,
        };
        let campaign_limit = crate::domain::click::CAMPAIGN_NAME_MAX_CHARS;
        if let Some(c) = &campaign_name
            && c.chars().count() > campaign_limit
        {
            return Err(Error::field(
                Code::InvalidField,
                "campaign_name",
                format!("campaign_name must be at most {campaign_limit} characters"),
            ));
        }
        Ok(NewLink {
            slug,
            destination,
            campaign_name: campaign_name.filter(|c| !c.is_empty()),
            mode: mode.map_or(Ok(Mode::Redirect), |m| Mode::parse(&m))?,
            allowed_origins: Vec::new(),
            split: None,
        })
    }
}

/// A channel link's fields, as `POST /links` and `tracker link create --channel` give them.
#[derive(Clone, Debug, Default)]
pub struct ChannelFields {
    pub channel: Option<String>,
    pub join_requests: Option<bool>,
    pub fallback: Option<String>,
}

impl ChannelFields {
    /// The destination these fields make, if a channel is given: its chat as the link names
    /// it, not yet resolved (`chat_id` 0, no title: the space's bot answers those when the link
    /// is created).
    fn destination(self) -> Result<Option<Destination>, Error> {
        let Some(chat) = self.channel else {
            if self.fallback.is_some() || self.join_requests.is_some() {
                return Err(Error::field(
                    Code::InvalidField,
                    if self.fallback.is_some() {
                        "fallback"
                    } else {
                        "join_requests"
                    },
                    "fallback and join_requests belong to a channel link: give channel too",
                ));
            }
            return Ok(None);
        };
        let chat = ChatRef::parse(&chat)?;
        let fallback = self.fallback.ok_or_else(|| {
            Error::field(
                Code::MissingField,
                "fallback",
                "a channel link needs a fallback: an invite link of the channel \
                 (https://t.me/+...) where visitors go when no invite link made ahead is left",
            )
        })?;
        channel::check_fallback(&fallback)?;
        Ok(Some(Destination::Channel(Channel {
            chat: chat.as_param(),
            chat_id: 0,
            title: String::new(),
            join_requests: self.join_requests.unwrap_or(false),
            fallback,
        })))
    }
}

fn missing(field: &'static str) -> Error {
    Error::field(Code::MissingField, field, format!("{field} is required"))
}

#[must_use]
pub fn location(destination: &Destination, uid: &str) -> String {
    match destination {
        Destination::Bot(bot) => format!("https://t.me/{bot}?start={uid}"),
        Destination::Target(t) => t.replace("{uid}", uid),
        // A channel's visitor goes to the invite link the click took, not to an address made
        // from the uid; without one, to the fallback.
        Destination::Channel(c) => c.fallback.clone(),
    }
}

/// The longest query a visit stores with its click (`raw_query`), after what went to the
/// click's own fields is left out: an ad's URL parameters (`utm_source`, `utm_content`, a few
/// of the network's own) are a few hundred characters; a visitor's query of kilobytes is a
/// flood, not an ad.
pub const VISIT_QUERY_BOUND: usize = 1024;

/// The user agents answered without recording a click by default: link previews and crawlers.
pub const DEFAULT_PREVIEW_AGENTS: &str = "TelegramBot,facebookexternalhit,Facebot,WhatsApp,\
Twitterbot,Slackbot,Discordbot,LinkedInBot,Googlebot,bingbot";

/// Whether `user_agent` contains one of `agents` (case-insensitive): a preview, not a person.
#[must_use]
pub fn is_preview(user_agent: Option<&str>, agents: &[String]) -> bool {
    let Some(ua) = user_agent else { return false };
    let ua = ua.to_ascii_lowercase();
    agents
        .iter()
        .any(|a| !a.is_empty() && ua.contains(&a.to_ascii_lowercase()))
}

/// The click a visit records: `fbclid` and the other ad platforms' click ids
/// (`click::AD_CLICK_IDS`) from the query, the campaign from `utm_campaign` or else the
/// link's, and the rest of the query (without the parameters those fields took) cut to
/// [`VISIT_QUERY_BOUND`]. A field over its bound is cut to it (a visitor is never refused for
/// the URL an ad network built), except a click id, which is dropped (and stays in the rest of
/// the query), since a cut one would name no click of the platform's.
#[must_use]
pub fn visit_click(link: &Link, raw_query: &str, now_ms: u64) -> NewClick {
    let q = Query::parse(raw_query);
    let [_, _, campaign_bound, _] = CLICK_FIELD_BOUNDS.map(|(_, n)| n);
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    let click_id = |name: &str| {
        q.get(name)
            .filter(|f| f.chars().count() <= CLICK_ID_MAX_CHARS)
            .map(str::to_owned)
    };
    let fbclid = click_id("fbclid");
    let mut ids = ClickIds::default();
    for id in AD_CLICK_IDS {
        ids.set(id.name, click_id(id.param));
    }
    let utm_campaign = q.get("utm_campaign").map(|c| cut(c, campaign_bound));
    // Meta's cookies, as a landing page's script (`/t.js`) carries them: kept with the shapes
    // and bounds of `POST /clicks`; one that breaks them is dropped and stays in the rest of
    // the query, as an over-long click id does.
    let cookie = |name: &'static str, max: usize| {
        q.get(name)
            .and_then(|text| meta_cookie(text.to_owned(), name, max).ok())
    };
    ids.fbp = cookie("fbp", FBP_MAX_CHARS);
    let fbc = cookie("fbc", FBC_MAX_CHARS);
    let taken = |pair: &&str| {
        let name = pair.split_once('=').map_or(*pair, |(name, _)| name);
        let name = crate::domain::percent::decode(name);
        match name.as_deref() {
            Some("fbclid") => fbclid.is_some(),
            Some("utm_campaign") => utm_campaign.is_some(),
            Some("fbp") => ids.fbp.is_some(),
            Some("fbc") => fbc.is_some(),
            Some(param) => AD_CLICK_IDS
                .iter()
                .find(|id| id.param == param)
                .map_or(pair.is_empty(), |id| ids.get(id.name).is_some()),
            None => pair.is_empty(),
        }
    };
    let rest: Vec<&str> = raw_query.split('&').filter(|p| !taken(p)).collect();
    let rest = cut(&rest.join("&"), VISIT_QUERY_BOUND);
    NewClick {
        link_slug: Some(link.slug.clone()),
        fbclid,
        campaign_name: utm_campaign.or_else(|| link.campaign_name.clone()),
        raw_query: (!rest.is_empty()).then_some(rest),
        clicked_at_ms: now_ms,
        ids,
        // The click's own hints (address, user agent) are added by the visit; this `fbc` is
        // kept with them, only where the space keeps visitors' hints.
        hints: fbc.map(|fbc| ClientHints {
            ip: None,
            user_agent: None,
            fbc: Some(fbc),
        }),
        variant: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_bounds() {
        assert!(check_slug("a").is_ok());
        assert!(check_slug(&"a".repeat(64)).is_ok());
        assert!(check_slug("Spring_sale-2").is_ok());
        for bad in ["", &"a".repeat(65), "a b", "a/b", "ä", "a.b"] {
            assert_eq!(check_slug(bad).unwrap_err().field, Some("slug"), "{bad:?}");
        }
    }

    #[test]
    fn bot_bounds() {
        assert!(check_bot("abbot").is_ok(), "5 characters");
        assert!(check_bot(&format!("{}bot", "a".repeat(29))).is_ok(), "32");
        assert!(check_bot("My_Shop_BOT").is_ok(), "any case");
        for bad in [
            "abot",
            &format!("{}bot", "a".repeat(30)),
            "shop",
            "my-bot",
            "my bot",
        ] {
            assert_eq!(check_bot(bad).unwrap_err().field, Some("bot"), "{bad:?}");
        }
    }

    #[test]
    fn target_bounds() {
        assert!(check_target("https://x.io/?c={uid}").is_ok());
        assert!(check_target("https://app-1.x.io:8443/go#u={uid}").is_ok());
        let long = format!("https://x.io/{{uid}}?{}", "a".repeat(MAX_TARGET_LEN - 19));
        assert_eq!(long.len(), MAX_TARGET_LEN);
        assert!(check_target(&long).is_ok());
        for bad in [
            "http://x.io/{uid}",
            "https://x.io/",
            "https://x.io/{uid} x",
            &format!("{long}a"),
            "https://{uid}",
            // Regression: accepted before a host name was required; not a URL at all (and
            // schemathesis's own URL parsing crashed on the answer).
            "https://[{uid}",
            "https:///{uid}",
            "https://x.io:/{uid}",
            "https://x.io:443x/{uid}",
            "https://{uid}.x.io/",
            "https://x[.io/{uid}",
            "https://user@x.io/{uid}",
        ] {
            assert_eq!(
                check_target(bad).unwrap_err().field,
                Some("target"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_link_has_a_bot_or_a_target() {
        let new = |bot: Option<&str>, target: Option<&str>| {
            NewLink::new(
                Some("s".into()),
                bot.map(Into::into),
                target.map(Into::into),
                None,
                None,
            )
        };
        assert!(
            new(Some("@shop_bot"), None).is_ok(),
            "a leading @ is dropped"
        );
        assert_eq!(new(None, None).unwrap_err().code, Code::MissingField);
        assert_eq!(
            new(Some("shop_bot"), Some("https://x.io/{uid}"))
                .unwrap_err()
                .code,
            Code::InvalidField
        );
    }

    #[test]
    fn previews_are_recognised_in_any_case() {
        let agents: Vec<String> = DEFAULT_PREVIEW_AGENTS.split(',').map(Into::into).collect();
        assert!(is_preview(Some("TelegramBot (like TwitterBot)"), &agents));
        assert!(is_preview(
            Some("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"),
            &agents
        ));
        assert!(!is_preview(
            Some("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) [FBAN/FBIOS]"),
            &agents
        ));
        assert!(!is_preview(None, &agents));
    }

    /// Link `spring` of space 1 to bot `shop_bot`, with `campaign_name`.
    fn spring_link(campaign_name: Option<&str>) -> Link {
        Link {
            allowed_origins: Vec::new(),
            space: 1,
            slug: "spring".into(),
            destination: Destination::Bot("shop_bot".into()),
            campaign_name: campaign_name.map(Into::into),
            mode: Mode::Redirect,
            created_at_ms: 0,
            deleted: false,
            split: None,
        }
    }

    #[test]
    fn a_visit_takes_fbclid_and_utm_campaign_from_the_query() {
        let link = spring_link(Some("link-campaign"));
        let c = visit_click(&link, "fbclid=IwAR1&utm_campaign=ads%201", 5);
        assert_eq!(c.fbclid.as_deref(), Some("IwAR1"));
        assert_eq!(c.campaign_name.as_deref(), Some("ads 1"));
        assert_eq!(c.raw_query, None, "both went to their fields");
        assert_eq!(c.link_slug.as_deref(), Some("spring"));
        let c = visit_click(&link, "", 5);
        assert_eq!(c.campaign_name.as_deref(), Some("link-campaign"));
        assert_eq!(c.raw_query, None);
        let c = visit_click(&link, &format!("fbclid={}", "x".repeat(513)), 5);
        assert_eq!(c.fbclid, None, "an over-long fbclid is dropped, not cut");
        assert_eq!(c.raw_query.unwrap().len(), VISIT_QUERY_BOUND.min(520));
    }

    /// The ad platforms' click ids (`ttclid`, Google's) go to the click's own fields, each up to the bound of
    /// `fbclid`; a longer one is dropped from the fields and stays in the rest of the query.
    #[test]
    fn a_visit_takes_the_ad_platforms_click_ids() {
        let link = spring_link(None);
        let c = visit_click(
            &link,
            "ttclid=E.C.P.x&gclid=Cj0K&utm_source=g&gbraid=0AA&wbraid=Cl1",
            5,
        );
        let mut ids = ClickIds::default();
        for (name, id) in [
            ("ttclid", "E.C.P.x"),
            ("gclid", "Cj0K"),
            ("gbraid", "0AA"),
            ("wbraid", "Cl1"),
        ] {
            ids.set(name, Some(id.into()));
        }
        assert_eq!(c.ids, ids);
        assert_eq!(c.raw_query.as_deref(), Some("utm_source=g"));
        for id in AD_CLICK_IDS {
            let name = id.param;
            let inside = format!("{name}={}", "x".repeat(CLICK_ID_MAX_CHARS));
            let ids = visit_click(&link, &inside, 5).ids;
            assert_eq!(ids.get(id.name).map(str::len), Some(CLICK_ID_MAX_CHARS));
            let outside = format!("{inside}x");
            let c = visit_click(&link, &outside, 5);
            assert_eq!(c.ids, ClickIds::default(), "{name}: dropped, not cut");
            assert!(c.raw_query.unwrap().starts_with(name));
        }
    }

    /// A landing page's script carries Meta's cookies as `fbp` and `fbc`: kept with the bounds
    /// and shapes of `POST /clicks` (`fbc` as a hint, where the space keeps hints); one that
    /// breaks them stays in the rest of the query; the page's address stays there too.
    #[test]
    fn a_visit_takes_meta_cookies_within_their_bounds_and_keeps_the_page_in_the_query() {
        let link = spring_link(None);
        let fbp = format!("fb.1.{}", "1".repeat(FBP_MAX_CHARS - 5));
        let fbc = format!("fb.1.{}", "2".repeat(FBC_MAX_CHARS - 5));
        let query = format!("fbp={fbp}&fbc={fbc}&page=https%3A%2F%2Fland.example%2Fa");
        let c = visit_click(&link, &query, 5);
        assert_eq!(c.ids.fbp.as_deref(), Some(fbp.as_str()));
        assert_eq!(c.hints.and_then(|h| h.fbc).as_deref(), Some(fbc.as_str()));
        assert_eq!(
            c.raw_query.as_deref(),
            Some("page=https%3A%2F%2Fland.example%2Fa")
        );
        for query in [
            format!("fbp={fbp}1&fbc={fbc}2"),
            "fbp=nope&fbc=fb.1.a%20b".to_owned(),
        ] {
            let c = visit_click(&link, &query, 5);
            assert_eq!((c.ids.fbp, c.hints), (None, None), "{query}");
            assert_eq!(c.raw_query.as_deref(), Some(query.as_str()));
        }
    }

    /// A visit's stored query leaves out what went to the click's own fields (`fbclid`,
    /// `utm_campaign`), and is cut to `VISIT_QUERY_BOUND`; other parameters stay, in order.
    #[test]
    fn a_visit_stores_the_rest_of_the_query_bounded() {
        let link = spring_link(None);
        let c = visit_click(
            &link,
            "utm_source=fb&fbclid=IwAR1&utm_campaign=ads%201&utm_content=ad-7&x=1",
            5,
        );
        assert_eq!(
            c.raw_query.as_deref(),
            Some("utm_source=fb&utm_content=ad-7&x=1")
        );
        assert_eq!(
            (c.fbclid.as_deref(), c.campaign_name.as_deref()),
            (Some("IwAR1"), Some("ads 1"))
        );
        let c = visit_click(&link, "fbclid=IwAR1&utm_campaign=x", 5);
        assert_eq!(c.raw_query, None, "nothing left");
        // Just inside the bound, and just outside it.
        let inside = format!("q={}", "x".repeat(VISIT_QUERY_BOUND - 2));
        assert_eq!(
            visit_click(&link, &inside, 5).raw_query.unwrap().len(),
            VISIT_QUERY_BOUND
        );
        let outside = format!("{inside}y");
        assert_eq!(visit_click(&link, &outside, 5).raw_query.unwrap(), inside);
    }

    #[test]
    fn the_redirect_carries_the_uid() {
        assert_eq!(
            location(&Destination::Bot("shop_bot".into()), "abc"),
            "https://t.me/shop_bot?start=abc"
        );
        assert_eq!(
            location(
                &Destination::Target("https://x.io/a?u={uid}&v={uid}".into()),
                "abc"
            ),
            "https://x.io/a?u=abc&v=abc"
        );
    }
}
