//! The one typed request of the command line and the control socket, and its one typed answer.
//!
//! A request is parsed from the command line's arguments (its variants are the subcommands, their
//! doc comments the help text), serialised once (onto the socket) and decoded once (by the
//! server); its answer likewise the other way. The command line prints an [`Answer`] as it is:
//! [`Answer::json`] for `--json`, and its own text for people (`cli`).

use std::path::PathBuf;

use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::control::answer::{
    Answer, CostsFetched, CostsImported, DestinationDeleted, ImportedEvent, LinkDeleted,
    PasswordSet, SpaceSettingsSet, StatsShown,
};
pub use crate::control::user::UserRequest;
use crate::domain::credential::Kind;
use crate::domain::feed::PageRequest;
use crate::domain::link::{ChannelFields, NewLink};
use crate::domain::password::{Password, SecretText};
use crate::domain::settings::SettingsPatch;
use crate::domain::stats::Grouping;
use crate::error::{Code, Error};
use crate::platform::{DeliveryQuery, DestinationFields, DestinationPatch, State};

/// One request of the command line, sent as parsed.
#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Create and list spaces, and change their settings
    Space {
        #[command(subcommand)]
        request: SpaceRequest,
    },
    /// Rotate and revoke credentials
    Keys {
        #[command(subcommand)]
        request: KeysRequest,
    },
    /// Create, list and delete tracking links (the public /l/<slug> addresses for ads)
    Link {
        #[command(subcommand)]
        request: LinkRequest,
    },
    /// Send a space's events on to Meta's Conversions API, postbacks and signed webhooks
    Destination {
        #[command(subcommand)]
        request: DestinationRequest,
    },
    /// The admin page (`/admin/`): set its password
    Admin {
        #[command(subcommand)]
        request: AdminRequest,
    },
    /// The admin page's users: invite one with a role, list, remove, change a role, reset a
    /// password
    User {
        #[command(subcommand)]
        request: UserRequest,
    },
    /// The audit log, newest first: who changed what (users, keys, links, destinations, costs,
    /// settings) and who logged in, when, from which address; kept a year
    Audit {
        #[arg(long)]
        space: Option<String>,
        /// A user's name, `cli` or `api`
        #[arg(long)]
        user: Option<String>,
        /// From this UTC day on, YYYY-MM-DD
        #[arg(long, value_name = "DAY")]
        since: Option<String>,
    },
    /// Stats of a space: per campaign, link or day, clicks, the funnel with its rates, first
    /// deposits, revenue, cost and return (as `GET /stats`)
    Stats {
        space: String,
        #[arg(
            long,
            default_value = "campaign_name",
            help = "campaign_name, link_slug, utm_content (the ad), utm_term (the ad set) or day (a day of the space's time zone)"
        )]
        by: String,
        /// The first day counted, YYYY-MM-DD (default: from the first)
        #[arg(long, value_name = "DAY")]
        from: Option<String>,
        /// The last day counted, included (default: to the last)
        #[arg(long, value_name = "DAY")]
        to: Option<String>,
        /// Only this campaign: its links, ads, ad sets or days as --by says (by campaign, its
        /// own totals)
        #[arg(long, value_name = "NAME")]
        campaign: Option<String>,
    },
    /// What campaigns spent: import a CSV of costs, or fetch them from Meta
    Costs {
        #[command(subcommand)]
        request: CostsRequest,
    },
    /// Write a consistent copy of the data file to DEST (safe while the server runs): a file,
    /// or `s3://BUCKET/KEY` with `[backup_s3]`'s endpoint, region and keys
    Backup {
        /// Where the copy goes, a file or `s3://BUCKET/KEY`; it must not exist
        dest: PathBuf,
    },
    /// `tracker check` on the file the server has open: read-only (see [`execute`]).
    #[command(skip)]
    Check { repair: bool },
    /// A batch of events for a space, for `tracker import`: each the JSON of one event, with
    /// the fields of `POST /events`; sent to the space's destinations only with `send`.
    #[command(skip)]
    ImportEvents {
        space: String,
        events: EventTexts,
        #[serde(default)]
        send: bool,
    },
    /// One page of a space's feed, for `tracker export`.
    #[command(skip)]
    ExportPage {
        space: String,
        after: u64,
        limit: usize,
    },
}

#[derive(Subcommand, Serialize, Deserialize, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SpaceRequest {
    /// Create a space and print its secret and ingest token (shown once)
    Create { name: String },
    /// List spaces, their settings and their credentials (never the credentials themselves)
    List,
    /// Change a space's settings, in force at once for events written after: `tracker space
    /// set SPACE attribution=last_touch`. Settings: `attribution` (`first_touch`, the default,
    /// or `last_touch`: which of a Telegram user's bound clicks an event by `tg_id` goes to)
    Set {
        space: String,
        /// One or more NAME=VALUE
        #[arg(value_name = "NAME=VALUE", required = true)]
        settings: Vec<String>,
    },
}

/// As the control socket logs it: a write-only setting's value (a token) is left out.
impl std::fmt::Debug for SpaceRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpaceRequest::Create { name } => f.debug_struct("Create").field("name", name).finish(),
            SpaceRequest::List => f.write_str("List"),
            SpaceRequest::Set { space, settings } => {
                let shown: Vec<String> = settings
                    .iter()
                    .map(|a| match a.split_once('=') {
                        Some((name, value))
                            if crate::domain::settings::is_write_only(name.trim())
                                && !value.is_empty() =>
                        {
                            format!("{name}=…")
                        }
                        _ => a.clone(),
                    })
                    .collect();
                f.debug_struct("Set")
                    .field("space", space)
                    .field("settings", &shown)
                    .finish()
            }
        }
    }
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum KeysRequest {
    /// Issue a new credential; the replaced one works for `rotation_grace`
    Rotate {
        space: String,
        #[arg(long, value_parser = kind_arg())]
        kind: Kind,
    },
    /// End every credential of that kind at once (for a leaked key)
    Revoke {
        space: String,
        #[arg(long, value_parser = kind_arg())]
        kind: Kind,
    },
}

/// `--kind secret|ingest`, parsed into the one credential kind.
fn kind_arg() -> impl clap::builder::TypedValueParser<Value = Kind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(Kind::ALL.map(Kind::as_str))
        .try_map(|text| text.parse::<Kind>())
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LinkRequest {
    /// Create a link that records a click and sends the visitor to a bot (or a target URL, or
    /// a Telegram channel)
    Create {
        space: String,
        slug: String,
        /// The Telegram bot username (the visitor lands on t.me/<bot>?start=<uid>)
        #[arg(long, value_name = "NAME", required_unless_present_any = ["target", "channel"])]
        bot: Option<String>,
        /// Instead of a bot: an https:// URL with {uid} where the click id goes
        #[arg(long, value_name = "URL", conflicts_with = "bot")]
        target: Option<String>,
        /// Instead of a bot: a Telegram channel (@username or chat id); the visitor lands on an
        /// invite link the space's bot made (`telegram_bot_token`), and the join is counted
        #[arg(long, value_name = "CHANNEL", conflicts_with_all = ["bot", "target"])]
        #[serde(default)]
        channel: Option<String>,
        /// For a channel: invite links that ask to join, approved by the tracker
        #[arg(long, requires = "channel")]
        #[serde(default)]
        join_requests: bool,
        /// For a channel: an invite link of it (`https://t.me/+...`), where visitors go when no
        /// invite link made ahead is left
        #[arg(long, value_name = "URL", requires = "channel")]
        #[serde(default)]
        fallback: Option<String>,
        /// The campaign of the link's clicks (a click's `utm_campaign` wins)
        #[arg(long = "campaign", value_name = "NAME")]
        campaign_name: Option<String>,
        /// redirect: 302 straight to the bot; page: a small page that opens Telegram (for
        /// in-app browsers, where a redirect to t.me often fails)
        #[arg(long, value_parser = ["redirect", "page"], default_value = "redirect")]
        mode: String,
        /// An origin (`https://host[:port]`) whose landing pages with the link's script have
        /// their views counted; repeat it for more than one
        #[arg(long = "allowed-origin", value_name = "ORIGIN")]
        #[serde(default)]
        allowed_origins: Vec<String>,
    },
    /// List a space's links with their public URLs and click counts
    List { space: String },
    /// Delete a link: its address answers 410 Gone, and the slug stays taken
    Delete { space: String, slug: String },
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DestinationRequest {
    /// Create a destination: each new event of the space that it takes is sent there, at least
    /// once. An ad platform's access token (of a kind that requires one) is asked on a
    /// terminal, else read from the first line of standard input (never a flag, which `ps`
    /// would show); a webhook's signing secret is printed once
    Create {
        space: String,
        name: String,
        #[arg(long, value_parser = kind_names())]
        kind: String,
        /// Only these event kinds, comma-separated [default: all four]
        #[arg(long, value_name = "KINDS", value_delimiter = ',')]
        events: Option<Vec<String>>,
        /// Send only events whose click is known (for `meta_capi`: with an `fbclid`) [default:
        /// true, false for a webhook]
        #[arg(long, value_name = "BOOL")]
        only_attributed: Option<bool>,
        /// postback: the URL template with {uid}, {event}, {value}... macros; webhook: the URL
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// `meta_capi`: the pixel (dataset) id
        #[arg(long, value_name = "DIGITS")]
        pixel_id: Option<String>,
        /// `meta_capi`: events show only in Events Manager's test tab
        #[arg(long, value_name = "CODE")]
        test_event_code: Option<String>,
        /// `meta_capi`: the Graph API version
        #[arg(long, value_name = "VERSION")]
        api_version: Option<String>,
        /// `meta_capi`: the Graph API's address
        #[arg(long, value_name = "URL")]
        graph_url: Option<String>,
        #[command(flatten)]
        settings: Box<SettingsFlags>,
        /// Read by the command line, never a flag.
        #[arg(skip)]
        access_token: Option<SecretText>,
    },
    /// Change a destination: its settings, or (with --new-token) its access token, asked as
    /// `create` asks it. Its deliveries stay; a paused destination resumes and sends what
    /// waited
    Change {
        space: String,
        name: String,
        #[command(flatten)]
        fields: Box<ChangeFlags>,
        /// Give an ad platform's destination a new access token (asked, never a
        /// flag)
        #[arg(long)]
        new_token: bool,
        /// Read by the command line, never a flag.
        #[arg(skip)]
        access_token: Option<SecretText>,
    },
    /// Give a webhook a new signing secret, printed once; the old one signs beside it for
    /// 24 hours. A `google_ads` destination gets a new password, printed once
    RotateSecret { space: String, name: String },
    /// List a space's destinations with their deliveries counted by state and the last error
    List { space: String },
    /// Remove a destination: it sends nothing more, and its open deliveries are cancelled
    Delete { space: String, name: String },
    /// The delivery log of a space, newest first
    Deliveries {
        space: String,
        /// Only this destination's
        #[arg(long, value_name = "NAME")]
        destination: Option<String>,
        /// Only deliveries in this state: pending, delivered, retrying, dead or cancelled
        #[arg(long)]
        state: Option<String>,
        /// At most this many, 1 to 1000
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Send a destination's dead deliveries again, now
    Retry { space: String, name: String },
}

/// The kinds of destination `--kind` takes: the registry's.
fn kind_names() -> clap::builder::PossibleValuesParser {
    use crate::platform::Kind;
    clap::builder::PossibleValuesParser::new(Kind::ALL.map(Kind::as_str))
}

/// A destination's settings as flags, for `create` and `change` (given again, each replaces
/// every value set before).
#[derive(clap::Args, Serialize, Deserialize, Debug, Clone, Default)]
pub struct SettingsFlags {
    /// `meta_capi`: the event name sent for a kind (or `first_deposit`); repeatable
    #[arg(long = "event-name", value_name = "KIND=NAME")]
    pub event_names: Vec<String>,
    /// `meta_capi`: a rate for a currency Meta does not take, as `XTR="0.013 USD"`; repeatable
    #[arg(long = "rate", value_name = "CURRENCY=RATE")]
    pub currency_rates: Vec<String>,
    /// postback: the word `{status}` gives for a kind, as `deposit=sale`; repeatable
    #[arg(long = "status", value_name = "KIND=WORD")]
    pub statuses: Vec<String>,
    /// An ad platform's pixel, by its code
    #[arg(long, value_name = "CODE")]
    pub pixel_code: Option<String>,
    /// An ad platform's API address
    #[arg(long, value_name = "URL")]
    pub api_url: Option<String>,
    /// `google_ads`: the conversion action's name for a kind, as `deposit="Telegram deposit"`;
    /// repeatable
    #[arg(long = "conversion-name", value_name = "KIND=NAME")]
    #[serde(default)]
    pub conversion_names: Vec<String>,
    /// `google_ads`: the user name Google Ads fetches the file with (default google)
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub user: Option<String>,
}

/// The fields `tracker destination change` may set; those not given stay as they are.
#[derive(clap::Args, Serialize, Deserialize, Debug, Clone, Default)]
pub struct ChangeFlags {
    /// Only these event kinds, comma-separated
    #[arg(long, value_name = "KINDS", value_delimiter = ',')]
    pub events: Option<Vec<String>>,
    #[arg(long, value_name = "BOOL")]
    pub only_attributed: Option<bool>,
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    #[arg(long, value_name = "DIGITS")]
    pub pixel_id: Option<String>,
    #[arg(long, value_name = "CODE")]
    pub test_event_code: Option<String>,
    #[arg(long, value_name = "VERSION")]
    pub api_version: Option<String>,
    #[arg(long, value_name = "URL")]
    pub graph_url: Option<String>,
    #[command(flatten)]
    pub settings: SettingsFlags,
}

impl SettingsFlags {
    /// The flags as a destination's fields: `fields` with the maps, a pixel's code and an API
    /// address, set where given.
    fn into_fields(self, mut fields: DestinationFields) -> Result<DestinationFields, Error> {
        fields.set_pairs("event_names", pairs("event_names", &self.event_names)?);
        fields.set_pairs(
            "currency_rates",
            pairs("currency_rates", &self.currency_rates)?,
        );
        fields.set_pairs("statuses", pairs("statuses", &self.statuses)?);
        fields.set_text("pixel_code", self.pixel_code);
        fields.set_text("api_url", self.api_url);
        fields.set_pairs(
            "conversion_names",
            pairs("conversion_names", &self.conversion_names)?,
        );
        fields.set_text("user", self.user);
        Ok(fields)
    }
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CostsRequest {
    /// Set costs from a CSV file: a header row `day,campaign_name,amount,currency`, or Meta Ads
    /// Manager's daily export (`Day`, `Campaign name`, `Amount spent (USD)`); each row replaces
    /// what its campaign's day had, an amount of 0 removes it. All rows or none: a bad row is
    /// named by its line and nothing is changed
    Import {
        space: String,
        /// The CSV file (`-`: standard input)
        file: PathBuf,
        /// The file's text, read by the command line (a server has its own working directory).
        #[arg(skip)]
        csv: FileText,
    },
    /// Fetch the space's spend of the last 28 days from Meta now (its `meta_ads_account` and
    /// `meta_ads_token`), replacing those days' costs that came from Meta; costs set by hand or
    /// by CSV stay. The server also fetches on its own, every hour and every day
    Fetch { space: String },
}

/// A file's text carried in a request (a cost CSV): `Debug` shows its size only, so the control
/// socket's log line of the request is a line, not a copy of the spend.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FileText(pub String);

impl std::fmt::Debug for FileText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileText({} bytes)", self.0.len())
    }
}

/// The events of an import's batch: `Debug` shows how many only, so the control socket's log
/// line of the request is a line, not a copy of the events.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventTexts(pub Vec<String>);

impl std::fmt::Debug for EventTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EventTexts({} events)", self.0.len())
    }
}

#[derive(Subcommand, Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AdminRequest {
    /// Set the password of the admin page's user `admin`: asked twice on a terminal, else read
    /// from the first line of standard input. Sessions already logged in stay logged in until
    /// they expire or log out.
    Password {
        /// Read by the command line, never a flag (which `ps` would show).
        #[arg(skip)]
        password: Password,
    },
}

/// Runs `request` against `app` (through [`super::execute`], which writes its audit entry).
// One arm per command, reading top to bottom as the command line's own list does.
#[allow(clippy::too_many_lines)]
pub(super) async fn run(app: &App, request: Request) -> Result<Answer, Error> {
    Ok(match request {
        Request::Space { request } => match request {
            SpaceRequest::Create { name } => Answer::SpaceCreated(app.create_space(&name).await?),
            SpaceRequest::List => Answer::Spaces(app.spaces().await?),
            SpaceRequest::Set { space, settings } => {
                let patch = SettingsPatch::from_assignments(&settings)?;
                let space = app.space_named(space).await?;
                Answer::SpaceSettings(Box::new(SpaceSettingsSet {
                    settings: app.update_settings(&space, patch).await?,
                    space: space.name.to_string(),
                }))
            }
        },
        Request::Keys { request } => match request {
            KeysRequest::Rotate { space, kind } => Answer::Rotated(app.rotate(&space, kind).await?),
            KeysRequest::Revoke { space, kind } => Answer::Revoked(app.revoke(&space, kind).await?),
        },
        Request::Link { request } => match request {
            LinkRequest::Create {
                space,
                slug,
                bot,
                target,
                channel,
                join_requests,
                fallback,
                campaign_name,
                mode,
                allowed_origins,
            } => {
                let channel = ChannelFields {
                    join_requests: channel.is_some().then_some(join_requests),
                    channel,
                    fallback,
                };
                let mut link = NewLink::with_channel(
                    Some(slug),
                    bot,
                    target,
                    channel,
                    campaign_name,
                    Some(mode),
                )?;
                // Checked by `App::create_link`, as the API's are.
                link.allowed_origins = allowed_origins;
                let space = app.space_named(space).await?;
                Answer::LinkCreated(Box::new(app.create_link(&space, link).await?))
            }
            LinkRequest::List { space } => {
                Answer::Links(app.links(&app.space_named(space).await?).await?)
            }
            LinkRequest::Delete { space, slug } => {
                let space_ref = app.space_named(space.clone()).await?;
                app.delete_link(&space_ref, slug.clone()).await?;
                Answer::LinkDeleted(LinkDeleted {
                    deleted: true,
                    space,
                    slug,
                })
            }
        },
        Request::Destination { request } => destination(app, request).await?,
        Request::Admin {
            request: AdminRequest::Password { password },
        } => {
            app.set_password(password.0).await?;
            Answer::PasswordSet(PasswordSet { password_set: true })
        }
        Request::User { request } => super::user::run(app, request).await?,
        Request::Audit { space, user, since } => {
            super::user::show_audit(app, space, user, since.as_deref()).await?
        }
        Request::Stats {
            space,
            by,
            from,
            to,
            campaign,
        } => {
            stats(
                app,
                space,
                (&by, campaign.as_deref()),
                (from.as_deref(), to.as_deref()),
            )
            .await?
        }
        Request::Costs {
            request: CostsRequest::Import { space, csv, .. },
        } => costs_import(app, space, &csv.0).await?,
        Request::Costs {
            request: CostsRequest::Fetch { space },
        } => {
            let space = app.space_named(space).await?;
            let last = app.fetch_costs(&space).await?;
            Answer::CostsFetched(Box::new(CostsFetched {
                space: space.name.to_string(),
                fetch: (&last).into(),
            }))
        }
        Request::Backup { dest } => Answer::BackedUp(app.backup(&dest).await?),
        // Repairing rewrites indexes and the rollup under the writer's feet, and redb's page
        // check needs the file to itself: both wait for the server to stop.
        Request::Check { repair: true } => {
            return Err(Error::new(
                Code::Conflict,
                "a server has the data file open: stop it, then run tracker check --repair",
            ));
        }
        Request::Check { repair: false } => Answer::Checked(app.check().await?),
        Request::ImportEvents {
            space,
            events,
            send,
        } => {
            let space = app.space_named(space).await?;
            let texts: Vec<&str> = events.0.iter().map(String::as_str).collect();
            let results = app.record_events(&space, &texts, send).await?;
            Answer::EventsImported(results.into_iter().map(imported_event).collect())
        }
        Request::ExportPage {
            space,
            after,
            limit,
        } => {
            let space = app.space_named(space).await?;
            Answer::Page(app.feed(&space, PageRequest { after, limit }).await?)
        }
    })
}

/// An event's result as it crosses the control socket.
fn imported_event(result: Result<crate::app::events::EventResult, Error>) -> ImportedEvent {
    match result {
        Ok(r) => {
            let inbox_id = r.inbox_id.map(|id| id.to_string());
            if r.duplicate {
                ImportedEvent::Duplicate { inbox_id }
            } else {
                ImportedEvent::Queued { inbox_id }
            }
        }
        Err(e) => ImportedEvent::Refused {
            code: e.code.as_str().to_owned(),
            error: e.message,
            field: e.field.map(str::to_owned),
        },
    }
}

async fn stats(
    app: &App,
    space: String,
    (by, campaign): (&str, Option<&str>),
    (from, to): (Option<&str>, Option<&str>),
) -> Result<Answer, Error> {
    let grouping = Grouping::parse(Some(by), campaign)?;
    let by = grouping.by;
    let (first, last) = crate::domain::cost::day_range(from, to)?;
    let space = app.space_named(space).await?;
    let range = crate::domain::stats::Range::Days(first, last);
    let (_, groups) = app.stats(&space, grouping, range).await?;
    Ok(Answer::Stats(StatsShown {
        space: space.name.to_string(),
        by: by.as_str().to_owned(),
        groups,
    }))
}

async fn costs_import(app: &App, space: String, csv: &str) -> Result<Answer, Error> {
    let space = app.space_named(space).await?;
    let imported = app.import_costs(&space, csv).await?;
    Ok(Answer::CostsImported(CostsImported {
        space: space.name.to_string(),
        rows: imported.rows,
        set: imported.done.set,
        removed: imported.done.removed,
        days: imported.days,
        campaigns: imported.campaigns,
        summary: imported.summary(),
    }))
}

/// `KEY=VALUE` flags as a map (`None` when none were given); the error names `field`.
fn pairs(
    field: &'static str,
    items: &[String],
) -> Result<Option<std::collections::BTreeMap<String, String>>, Error> {
    if items.is_empty() {
        return Ok(None);
    }
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| {
                    Error::field(
                        crate::error::Code::InvalidField,
                        field,
                        format!("{field} is given as KEY=VALUE, got {item:?}"),
                    )
                })
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

async fn destination(app: &App, request: DestinationRequest) -> Result<Answer, Error> {
    Ok(match request {
        DestinationRequest::Create {
            space,
            name,
            kind,
            events,
            only_attributed,
            url,
            pixel_id,
            test_event_code,
            api_version,
            graph_url,
            settings,
            access_token,
        } => {
            let mut fields = DestinationFields {
                name: Some(name),
                kind: Some(kind),
                events,
                only_attributed,
                ..DestinationFields::default()
            };
            fields.set_text("pixel_id", pixel_id);
            fields.set_text("access_token", access_token.map(|t| t.0));
            fields.set_text("test_event_code", test_event_code);
            fields.set_text("api_version", api_version);
            fields.set_text("graph_url", graph_url);
            fields.set_text("url", url);
            let fields = settings.into_fields(fields)?;
            let space = app.space_named(space).await?;
            Answer::DestinationCreated(Box::new(app.create_destination(&space, fields).await?))
        }
        DestinationRequest::Change {
            space,
            name,
            fields,
            new_token: _,
            access_token,
        } => {
            let f = *fields;
            let mut set = DestinationFields {
                events: f.events,
                only_attributed: f.only_attributed,
                ..DestinationFields::default()
            };
            set.set_text("pixel_id", f.pixel_id);
            set.set_text("access_token", access_token.map(|t| t.0));
            set.set_text("test_event_code", f.test_event_code);
            set.set_text("api_version", f.api_version);
            set.set_text("graph_url", f.graph_url);
            set.set_text("url", f.url);
            let set = f.settings.into_fields(set)?;
            let patch = DestinationPatch {
                set,
                cleared: Vec::new(),
            };
            let space = app.space_named(space).await?;
            Answer::DestinationChanged(Box::new(app.change_destination(&space, name, patch).await?))
        }
        DestinationRequest::RotateSecret { space, name } => {
            let space = app.space_named(space).await?;
            Answer::DestinationChanged(Box::new(app.rotate_destination_secret(&space, name).await?))
        }
        DestinationRequest::List { space } => {
            Answer::Destinations(app.destinations(&app.space_named(space).await?).await?)
        }
        DestinationRequest::Delete { space, name } => {
            let space_ref = app.space_named(space.clone()).await?;
            app.remove_destination(&space_ref, name.clone()).await?;
            Answer::DestinationDeleted(DestinationDeleted {
                deleted: true,
                space,
                name,
            })
        }
        DestinationRequest::Deliveries {
            space,
            destination,
            state,
            limit,
        } => {
            let query = DeliveryQuery::parse(
                destination.as_deref(),
                state.as_deref(),
                Some(&limit.to_string()),
            )?;
            let space = app.space_named(space).await?;
            Answer::Deliveries(app.deliveries(&space, query).await?)
        }
        DestinationRequest::Retry { space, name } => {
            let space = app.space_named(space).await?;
            Answer::Retried(app.retry_deliveries(&space, name, State::Dead).await?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_json() {
        let r = Request::Keys {
            request: KeysRequest::Rotate {
                space: "a".into(),
                kind: Kind::Ingest,
            },
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"op":"keys","request":{"op":"rotate","space":"a","kind":"ingest"}}"#
        );
    }
}
