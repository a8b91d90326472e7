//! The admin pages: one template struct and one handler each, every handler calling the same
//! operation the API or the command line calls.

use std::fmt::Write as _;

use askama::Template;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use super::Ctx;
use crate::app::CostsImport;
use crate::app::spaces::{CreatedSpace, Rotated};
use crate::clock::rfc3339_s;
use crate::domain::credential::Kind;
use crate::domain::event::EventKind;
use crate::domain::feed::FeedFilter;
use crate::domain::keyring::SpaceRef;
use crate::domain::link::{LinkView, NewLink};
use crate::domain::settings::{SETTINGS, SettingsPatch};
use crate::domain::stats::{self, Dimension};
use crate::error::{Code, Error};
use crate::http::respond;

/// Events on one page of the feed.
const EVENTS_PER_PAGE: usize = 50;
/// The most events one view of a filtered feed looks at.
const FILTER_SCAN: usize = 5000;
/// Rejections shown.
const REJECTIONS_SHOWN: usize = 100;

/// The menu of a space's pages, in order: (section, label, path below `/admin/spaces/<space>`).
/// A page of a space names its section in its [`Frame`], and the layout marks it current.
const SPACE_MENU: [(&str, &str, &str); 10] = [
    ("dashboard", "Dashboard", "/dashboard"),
    ("keys", "Keys", ""),
    ("settings", "Settings", "/settings"),
    ("postback", "Postback URL", "/postback"),
    ("links", "Links", "/links"),
    ("destinations", "Destinations", "/destinations"),
    ("events", "Events", "/events"),
    ("stats", "Stats", "/stats"),
    ("costs", "Costs", "/costs"),
    ("rejections", "Rejections", "/rejections"),
];

/// What the layout (`base.html`) shows on every page.
struct Frame<'a> {
    /// The logout form's token; `None` when not logged in.
    csrf: Option<&'a str>,
    /// The space whose menu is shown.
    space: Option<&'a str>,
    /// The menu entry of this page.
    section: &'static str,
    error: Option<String>,
}

impl Frame<'_> {
    /// The space's menu: (label, address, whether it is this page).
    fn menu(&self) -> Vec<(&'static str, String, bool)> {
        let Some(space) = self.space else {
            return Vec::new();
        };
        SPACE_MENU
            .iter()
            .map(|&(section, label, below)| {
                (
                    label,
                    format!("/admin/spaces/{space}{below}"),
                    section == self.section,
                )
            })
            .collect()
    }
}

fn html(status: StatusCode, page: &impl Template) -> Response {
    let body = page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "an admin page failed to render");
        "The page failed to render; the server log says why.".to_owned()
    });
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

#[derive(Template)]
#[template(path = "admin/login.html")]
struct Login<'a> {
    frame: Frame<'a>,
    /// The login form's token (`session::LoginForms`).
    token: &'a str,
}

pub(super) fn login(token: &str, error: Option<&str>, status: StatusCode) -> Response {
    html(
        status,
        &Login {
            token,
            frame: Frame {
                csrf: None,
                space: None,
                section: "",
                error: error.map(str::to_owned),
            },
        },
    )
}

#[derive(Template)]
#[template(
    source = "{% extends \"admin/base.html\" %}{% block title %}Error{% endblock %}\
              {% block content %}<p><a href=\"/admin/\">Back to the spaces</a></p>{% endblock %}",
    ext = "html"
)]
struct ErrorPage<'a> {
    frame: Frame<'a>,
}

/// An error as a page, with the status the API would answer it with.
pub(super) fn error_page(e: &Error, space: Option<&str>, csrf: Option<&str>) -> Response {
    message_page(respond::status_of(e.code), &e.message, space, csrf)
}

/// A refusal of the page's own (no API answers it) as a page: `message` and `status`.
pub(super) fn message_page(
    status: StatusCode,
    message: &str,
    space: Option<&str>,
    csrf: Option<&str>,
) -> Response {
    html(
        status,
        &ErrorPage {
            frame: Frame {
                csrf,
                space,
                section: "",
                error: Some(message.to_owned()),
            },
        },
    )
}

// --- Spaces ---

struct SpaceRow {
    name: String,
    created: String,
    active: usize,
}

#[derive(Template)]
#[template(path = "admin/spaces.html")]
struct SpacesPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    spaces: Vec<SpaceRow>,
    created: Option<CreatedSpace>,
}

pub(super) async fn spaces(
    ctx: &Ctx<'_>,
    created: Option<CreatedSpace>,
) -> Result<Response, Error> {
    let now = ctx.app.now_ms();
    let spaces = ctx
        .app
        .spaces()
        .await?
        .into_iter()
        .map(|s| SpaceRow {
            active: s.credentials.iter().filter(|c| c.works(now)).count(),
            created: rfc3339_s(s.created_at_ms),
            name: s.space,
        })
        .collect();
    let frame = frame_of(ctx, None, "");
    Ok(html(
        StatusCode::OK,
        &SpacesPage {
            frame,
            csrf_token: &ctx.live.csrf,
            spaces,
            created,
        },
    ))
}

pub(super) async fn create_space(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let name = ctx.form.get("name").unwrap_or("");
    let created = ctx.app.create_space(name).await?;
    spaces(ctx, Some(created)).await
}

/// `value` as a value of a page's query: every byte but letters and digits percent-encoded.
fn in_query(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn frame_of<'a>(ctx: &'a Ctx<'_>, space: Option<&'a str>, section: &'static str) -> Frame<'a> {
    Frame {
        csrf: Some(&ctx.live.csrf),
        space,
        section,
        error: None,
    }
}

async fn space(ctx: &Ctx<'_>, name: &str) -> Result<SpaceRef, Error> {
    ctx.app.space_named(name.to_owned()).await
}

// --- Keys ---

struct CredentialRow {
    kind: String,
    prefix: String,
    created: String,
    last_used: String,
    state: String,
}

/// A rotation's result, as the keys page shows it once.
struct NewCredential {
    kind_label: String,
    credential: String,
    previous: String,
}

#[derive(Template)]
#[template(path = "admin/keys.html")]
struct KeysPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    credentials: Vec<CredentialRow>,
    rotated: Option<NewCredential>,
    message: Option<String>,
    grace: String,
}

pub(super) async fn keys(
    ctx: &Ctx<'_>,
    name: &str,
    rotated: Option<Rotated>,
    message: Option<String>,
) -> Result<Response, Error> {
    space(ctx, name).await?;
    let now = ctx.app.now_ms();
    let credentials = ctx
        .app
        .spaces()
        .await?
        .into_iter()
        .find(|s| s.space == name)
        .map(|s| s.credentials)
        .unwrap_or_default()
        .into_iter()
        .map(|c| CredentialRow {
            state: c.state(now),
            kind: c.kind,
            prefix: c.prefix,
            created: rfc3339_s(c.created_at_ms),
            last_used: c.last_used_ms.map_or_else(|| "never".to_owned(), rfc3339_s),
        })
        .collect();
    let rotated = rotated.map(|r| NewCredential {
        kind_label: if r.kind == "secret" {
            "secret".to_owned()
        } else {
            "ingest token".to_owned()
        },
        previous: r.previous_valid_until_ms.map_or_else(
            || "No key of this kind was active, so none is in grace.".to_owned(),
            |ms| format!("The replaced one keeps working until {}.", rfc3339_s(ms)),
        ),
        credential: r.credential,
    });
    let frame = frame_of(ctx, Some(name), "keys");
    Ok(html(
        StatusCode::OK,
        &KeysPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            credentials,
            rotated,
            message,
            grace: crate::clock::duration_text(ctx.app.settings.rotation_grace),
        },
    ))
}

fn kind_of(text: Option<&str>) -> Result<Kind, Error> {
    match text {
        Some("secret") => Ok(Kind::Secret),
        Some("ingest") => Ok(Kind::Ingest),
        _ => Err(Error::field(
            Code::InvalidField,
            "kind",
            "the kind of key is secret or ingest",
        )),
    }
}

/// `POST .../rotate` and `.../revoke`: the same functions `tracker keys` calls.
pub(super) async fn change_keys(
    ctx: &Ctx<'_>,
    name: &str,
    action: &str,
) -> Result<Response, Error> {
    let kind = kind_of(ctx.form.get("kind"))?;
    if action == "rotate" {
        let rotated = ctx.app.rotate(name, kind).await?;
        keys(ctx, name, Some(rotated), None).await
    } else {
        let revoked = ctx.app.revoke(name, kind).await?;
        let message = format!(
            "Revoked {} {} key(s); none of that kind works until you rotate.",
            revoked.revoked, revoked.kind
        );
        keys(ctx, name, None, Some(message)).await
    }
}

// --- Settings ---

/// One setting as the form shows it.
struct SettingRow {
    name: &'static str,
    about: &'static str,
    choices: &'static [&'static str],
    value: String,
}

#[derive(Template)]
#[template(path = "admin/settings.html")]
struct SettingsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    settings: Vec<SettingRow>,
    message: Option<&'static str>,
}

/// `GET` shows the space's settings; `POST` changes them, through the same check and the same
/// operation as `PATCH /space` and `tracker space set`.
pub(super) async fn settings(ctx: &Ctx<'_>, name: &str, save: bool) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let current = if save {
        let changes = SETTINGS.iter().filter_map(|s| {
            let value = ctx.form.get(s.name)?;
            Some((s.name.to_owned(), value.trim().to_owned()))
        });
        let patch = SettingsPatch::new(changes)?;
        ctx.app.update_settings(&space, patch).await?
    } else {
        ctx.app.space_settings(&space).await?
    };
    let settings = current
        .pairs()
        .into_iter()
        .zip(&SETTINGS)
        .map(|((_, value), s)| SettingRow {
            name: s.name,
            about: s.about,
            choices: s.choices,
            value,
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "settings");
    Ok(html(
        StatusCode::OK,
        &SettingsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            settings,
            message: save.then_some("Saved: in force for every event from now on."),
        },
    ))
}

// --- Postback URL builder ---

/// An affiliate network's postback macros: its click id (our `uid`), payout, and transaction id
/// (our `eid`, so a resent postback counts once).
struct Network {
    id: &'static str,
    name: &'static str,
    uid: &'static str,
    value: &'static str,
    eid: &'static str,
}

const NETWORKS: [Network; 4] = [
    Network {
        id: "tune",
        name: "TUNE / HasOffers",
        uid: "{aff_sub}",
        value: "{payout}",
        eid: "{transaction_id}",
    },
    Network {
        id: "everflow",
        name: "Everflow",
        uid: "{sub1}",
        value: "{payout_amount}",
        eid: "{transaction_id}",
    },
    Network {
        id: "cake",
        name: "CAKE",
        uid: "#s1#",
        value: "#price#",
        eid: "#tid#",
    },
    Network {
        id: "generic",
        name: "Other ({clickid}, {payout}, {txid})",
        uid: "{clickid}",
        value: "{payout}",
        eid: "{txid}",
    },
];

#[derive(Template)]
#[template(path = "admin/postback.html")]
struct PostbackPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    /// `(id, name, selected)`.
    networks: Vec<(&'static str, &'static str, bool)>,
    /// `(event, selected)`.
    events: Vec<(&'static str, bool)>,
    token: &'a str,
    url: Option<String>,
}

/// `GET` shows the form; `POST` (the token stays out of URLs and logs) builds the address.
pub(super) async fn postback(ctx: &Ctx<'_>, name: &str, build: bool) -> Result<Response, Error> {
    space(ctx, name).await?;
    let network_id = ctx.form.get("network").unwrap_or("tune");
    let network = NETWORKS
        .iter()
        .find(|n| n.id == network_id)
        .ok_or_else(|| Error::field(Code::InvalidField, "network", "no such network"))?;
    let event = ctx.form.get("event").unwrap_or("deposit");
    let kind = EventKind::from_name(event)
        .ok_or_else(|| Error::field(Code::InvalidEvent, "event", "no such event"))?;
    let token = ctx.form.get("token").unwrap_or("").trim();
    let url = build.then(|| {
        let token = if token.is_empty() {
            "INGEST_TOKEN"
        } else {
            token
        };
        let mut url = format!(
            "{}/e?token={token}&event={}&uid={}",
            ctx.app.settings.public_url().trim_end_matches('/'),
            kind.as_str(),
            network.uid
        );
        if kind == EventKind::Deposit {
            let _ = write!(url, "&value={}", network.value);
        }
        let _ = write!(url, "&eid={}", network.eid);
        url
    });
    let frame = frame_of(ctx, Some(name), "postback");
    Ok(html(
        StatusCode::OK,
        &PostbackPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            networks: NETWORKS
                .iter()
                .map(|n| (n.id, n.name, n.id == network.id))
                .collect(),
            events: EventKind::ALL
                .iter()
                .map(|k| (k.as_str(), *k == kind))
                .collect(),
            token,
            url,
        },
    ))
}

// --- Links ---

struct LinkRow {
    slug: String,
    goes_to: String,
    campaign: String,
    clicks: u64,
    bound_clicks: u64,
    url: String,
}

#[derive(Template)]
#[template(path = "admin/links.html")]
struct LinksPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    links: Vec<LinkRow>,
    created: Option<LinkView>,
}

pub(super) async fn links(
    ctx: &Ctx<'_>,
    name: &str,
    created: Option<LinkView>,
) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let links = ctx
        .app
        .links(&space)
        .await?
        .into_iter()
        .map(|l| LinkRow {
            goes_to: l
                .bot
                .as_ref()
                .map_or_else(|| l.target.clone().unwrap_or_default(), |b| format!("@{b}")),
            campaign: l.campaign_name.unwrap_or_default(),
            slug: l.slug,
            clicks: l.clicks,
            bound_clicks: l.bound_clicks,
            url: l.url,
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "links");
    Ok(html(
        StatusCode::OK,
        &LinksPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            links,
            created,
        },
    ))
}

/// A form field's text, trimmed; an empty one counts as absent.
fn form_text(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    ctx.form
        .get(name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

pub(super) async fn create_link(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let field = |n| form_text(ctx, n);
    let link = NewLink::new(
        field("slug"),
        field("bot"),
        field("target"),
        field("campaign_name"),
        field("mode"),
    )?;
    let space = space(ctx, name).await?;
    let created = ctx.app.create_link(&space, link).await?;
    links(ctx, name, Some(created)).await
}

pub(super) async fn delete_link(ctx: &Ctx<'_>, name: &str, slug: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    ctx.app.delete_link(&space, slug.to_owned()).await?;
    links(ctx, name, None).await
}

// --- Costs ---

/// Costs listed on the page at most; a wider range is for `GET /costs`.
const COSTS_SHOWN: usize = 1000;

#[derive(Template)]
#[template(path = "admin/costs.html")]
struct CostsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    imported: Option<CostsImport>,
    max_mib: u64,
    /// The range's days as the form shows them (empty: no bound).
    from: String,
    to: String,
    costs: Vec<crate::domain::cost::CostView>,
    /// More costs are in the range than are listed.
    cut: bool,
}

/// `GET .../costs?from=&to=`: the upload form, the costs of a range of days (as `GET /costs`
/// reads them), and what an upload just imported.
pub(super) async fn costs(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    costs_page(ctx, &space, name, Err(None)).await
}

/// The upload: the file's text through the same import as `tracker costs import`. A refused
/// file is shown on the costs page itself, with the sentence and status the command line and
/// the API give it, so the form is there to try again.
pub(super) async fn import_costs(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let imported = match ctx.form.get("file").filter(|t| !t.is_empty()) {
        None => Err(Error::field(
            Code::MissingField,
            "file",
            "file is required: choose a CSV file to import",
        )),
        Some(csv) => ctx.app.import_costs(&space, csv).await,
    };
    costs_page(ctx, &space, name, imported.map_err(Some)).await
}

/// The costs page after `upload`: what it imported (its days are the range listed), or why it
/// was refused (`Err(None)`: no upload).
async fn costs_page(
    ctx: &Ctx<'_>,
    space: &SpaceRef,
    name: &str,
    upload: Result<CostsImport, Option<Error>>,
) -> Result<Response, Error> {
    use crate::domain::cost::{Day, day_range, day_text};
    let q = ctx.query;
    let (first, last) = match &upload {
        _ if q.get("from").is_some() || q.get("to").is_some() => {
            day_range(q.get("from"), q.get("to"))?
        }
        Ok(CostsImport {
            span: Some(span), ..
        }) => *span,
        _ => {
            let zone = ctx.app.space_settings(space).await?.time_zone.zone();
            let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
            (today.saturating_sub(30), today)
        }
    };
    let mut costs = ctx.app.costs(space, (first, last)).await?;
    let cut = costs.len() > COSTS_SHOWN;
    costs.truncate(COSTS_SHOWN);
    let (imported, refused) = match upload {
        Ok(done) => (Some(done), None),
        Err(refused) => (None, refused),
    };
    let mut frame = frame_of(ctx, Some(name), "costs");
    frame.error = refused.as_ref().map(|e| e.message.clone());
    let bound = |day: Day, none: Day| {
        if day == none {
            String::new()
        } else {
            day_text(day)
        }
    };
    Ok(html(
        refused.map_or(StatusCode::OK, |e| respond::status_of(e.code)),
        &CostsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            imported,
            max_mib: super::MAX_UPLOAD_BYTES / 1024 / 1024,
            from: bound(first, 0),
            to: bound(last, Day::MAX),
            costs: costs.iter().map(Into::into).collect(),
            cut,
        },
    ))
}

/// `GET .../costs/template.csv`: the header row of our columns, to fill in a spreadsheet.
pub(super) async fn costs_template(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    space(ctx, name).await?;
    let header_row = format!("{}\n", crate::domain::cost::CSV_COLUMNS.join(","));
    Ok(csv_response(header_row.into_bytes(), "costs-template"))
}

// --- Destinations ---

struct DestinationRow {
    name: String,
    kind: &'static str,
    /// The URL, or Meta's pixel with the token's last 4 characters.
    address: String,
    events: String,
    pending: u64,
    delivered: u64,
    retrying: u64,
    dead: u64,
    last_error: String,
}

struct DeliveryRow {
    inbox_id: String,
    destination: String,
    state: &'static str,
    attempts: u32,
    last_attempt: String,
    status: String,
    answer: String,
}

#[derive(Template)]
#[template(path = "admin/destinations.html")]
struct DestinationsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    destinations: Vec<DestinationRow>,
    log: Vec<DeliveryRow>,
    /// A new webhook's name and signing secret, shown once.
    secret: Option<(String, String)>,
    tested: Option<crate::app::destinations::Tested>,
    note: Option<String>,
}

/// What a Destinations page shows beside its tables.
#[derive(Default)]
struct DestinationsShown {
    secret: Option<(String, String)>,
    tested: Option<crate::app::destinations::Tested>,
    note: Option<String>,
}

/// Deliveries the page's log shows.
const DELIVERY_LOG_ROWS: usize = 50;

async fn destinations(
    ctx: &Ctx<'_>,
    name: &str,
    shown: DestinationsShown,
) -> Result<Response, Error> {
    use crate::domain::destination::{DeliveryQuery, State};
    let space = space(ctx, name).await?;
    let rows = ctx
        .app
        .destinations(&space)
        .await?
        .into_iter()
        .map(|d| DestinationRow {
            kind: d.kind.as_str(),
            address: d.url.clone().unwrap_or_else(|| {
                format!(
                    "pixel {} (token {})",
                    d.pixel_id.clone().unwrap_or_default(),
                    d.access_token.clone().unwrap_or_default()
                )
            }),
            events: d.events.join(", "),
            pending: d.deliveries.get(State::Pending),
            delivered: d.deliveries.get(State::Delivered),
            retrying: d.deliveries.get(State::Retrying),
            dead: d.deliveries.get(State::Dead),
            last_error: d.last_error.map_or_else(String::new, |e| {
                let status = e
                    .status
                    .map_or_else(|| "no answer".to_owned(), |s| s.to_string());
                format!("{} {status}: {}", rfc3339_s(e.at_ms), e.answer)
            }),
            name: d.name,
        })
        .collect();
    let query = DeliveryQuery {
        limit: DELIVERY_LOG_ROWS,
        ..DeliveryQuery::default()
    };
    let log = ctx
        .app
        .deliveries(&space, query)
        .await?
        .into_iter()
        .map(|l| DeliveryRow {
            state: l.state.as_str(),
            attempts: l.attempts,
            last_attempt: l.last_attempt_at_ms.map_or_else(String::new, rfc3339_s),
            status: l.last_status.map_or_else(String::new, |s| s.to_string()),
            answer: l.last_answer.unwrap_or_default(),
            inbox_id: l.inbox_id,
            destination: l.destination,
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "destinations");
    Ok(html(
        StatusCode::OK,
        &DestinationsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            destinations: rows,
            log,
            secret: shown.secret,
            tested: shown.tested,
            note: shown.note,
        },
    ))
}

/// `destinations` (GET: the page; POST: create one) and `destinations/<name>/<action>`.
pub(super) async fn destinations_route(
    ctx: &Ctx<'_>,
    name: &str,
    rest: &[&str],
    post: bool,
) -> Result<Response, Error> {
    match (rest, post) {
        ([], false) => destinations(ctx, name, DestinationsShown::default()).await,
        ([], true) => create_destination(ctx, name).await,
        ([d, action @ ("test" | "retry" | "delete")], true) => {
            destination_action(ctx, name, d, action).await
        }
        _ => Err(Error::new(Code::NotFound, "there is no such admin page")),
    }
}

async fn create_destination(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    use crate::domain::destination::DestinationFields;
    let field = |n| form_text(ctx, n);
    let only_attributed = match field("only_attributed").as_deref() {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let fields = DestinationFields {
        name: field("name"),
        kind: field("kind"),
        events: field("events").map(|e| e.split(',').map(|k| k.trim().to_owned()).collect()),
        only_attributed,
        pixel_id: field("pixel_id"),
        access_token: field("access_token"),
        test_event_code: field("test_event_code"),
        api_version: None,
        graph_url: None,
        url: field("url"),
    };
    let space = space(ctx, name).await?;
    let created = ctx.app.create_destination(&space, fields).await?;
    let shown = DestinationsShown {
        secret: created.signing_secret.map(|s| (created.name.clone(), s)),
        note: Some(format!("Destination {} created.", created.name)),
        ..DestinationsShown::default()
    };
    destinations(ctx, name, shown).await
}

/// The buttons of one destination: `test`, `retry` (its dead deliveries) and `delete`.
async fn destination_action(
    ctx: &Ctx<'_>,
    name: &str,
    destination: &str,
    action: &str,
) -> Result<Response, Error> {
    use crate::domain::destination::State;
    let space = space(ctx, name).await?;
    let mut shown = DestinationsShown::default();
    match action {
        "test" => {
            shown.tested = Some(
                ctx.app
                    .test_destination(&space, destination.to_owned())
                    .await?,
            );
        }
        "retry" => {
            let r = ctx
                .app
                .retry_deliveries(&space, destination.to_owned(), State::Dead)
                .await?;
            shown.note = Some(format!(
                "{} dead deliveries of {} are due again now.",
                r.retried, r.destination
            ));
        }
        _ => {
            ctx.app
                .remove_destination(&space, destination.to_owned())
                .await?;
            shown.note = Some(format!(
                "Destination {destination} removed; its open deliveries are cancelled."
            ));
        }
    }
    destinations(ctx, name, shown).await
}

// --- Events ---

struct EventRow {
    inbox_id: String,
    received: String,
    event: String,
    value: String,
    uid: String,
    matched: bool,
    /// Attributed by the Telegram id the event named, not by a uid it carried.
    by_tg_id: bool,
    campaign: String,
    link: String,
    tg_id: String,
}

#[derive(Template)]
#[template(path = "admin/events.html")]
struct EventsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    events: Vec<EventRow>,
    older: Option<u64>,
    kinds: Vec<&'static str>,
    /// The filter as given, for the form and the link to older events.
    kind: String,
    campaign: String,
    uid: String,
    tg: String,
    filter_query: String,
}

/// `GET .../events?before=&kind=&campaign=&uid=&tg=`: the feed newest first, from the same
/// read as `GET /events`, filtered by kind, campaign, `uid` and Telegram id.
pub(super) async fn events(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let before = match ctx.query.get("before") {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            Error::field(Code::InvalidField, "before", "before is an event number")
        })?),
    };
    let q = &ctx.query;
    let filter = FeedFilter::parse(q.get("kind"), q.get("campaign"), q.get("uid"), q.get("tg"))?;
    // Filtered: newest first until a page is full, looking at most at FILTER_SCAN events per
    // view (the link to older events goes on from the last one looked at).
    let mut events = Vec::new();
    let (mut cursor, mut scanned) = (before, 0);
    let older = loop {
        let (page, older) = ctx.app.feed_newest(&space, cursor, EVENTS_PER_PAGE).await?;
        scanned += page.len();
        let last = page.last().and_then(|e| e.inbox_id.parse::<u64>().ok());
        for e in page {
            if events.len() < EVENTS_PER_PAGE && filter.matches(&e) {
                events.push(e);
            }
        }
        if events.len() == EVENTS_PER_PAGE || older.is_none() || filter.is_empty() {
            break older;
        }
        if scanned >= FILTER_SCAN {
            break last;
        }
        cursor = older;
    };
    let filter_query = [
        ("kind", q.get("kind")),
        ("campaign", q.get("campaign")),
        ("uid", q.get("uid")),
        ("tg", q.get("tg")),
    ]
    .into_iter()
    .filter_map(|(name, v)| {
        let v = v?;
        Some(format!("&{name}={}", in_query(v)))
    })
    .collect::<String>();
    let events = events
        .into_iter()
        .map(|e| EventRow {
            received: rfc3339_s(e.received_at_ms),
            value: e
                .value
                .map(|v| format!("{v} {}", e.currency))
                .unwrap_or_default(),
            uid: e.uid.unwrap_or_default(),
            campaign: e.campaign_name.unwrap_or_default(),
            link: e.link_slug.unwrap_or_default(),
            tg_id: e.tg_id.map(|t| t.to_string()).unwrap_or_default(),
            matched: e.matched,
            by_tg_id: e.attributed_by.as_deref() == Some("tg_id"),
            event: e.event,
            inbox_id: e.inbox_id,
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "events");
    Ok(html(
        StatusCode::OK,
        &EventsPage {
            frame,
            name,
            events,
            older,
            kinds: EventKind::ALL.iter().map(|k| k.as_str()).collect(),
            kind: q.get("kind").unwrap_or("").to_owned(),
            campaign: q.get("campaign").unwrap_or("").to_owned(),
            uid: q.get("uid").unwrap_or("").to_owned(),
            tg: q.get("tg").unwrap_or("").to_owned(),
            filter_query,
        },
    ))
}

// --- Stats ---

struct StatsRow {
    group: String,
    clicks: u64,
    bound: u64,
    /// `(kind, count)` of each kind of event.
    events: Vec<(&'static str, u64)>,
    first_deposits: u64,
    deposits: String,
    cost: String,
    roi: String,
}

/// `12.50 USD, 3 EUR` for sums or quotients by currency.
fn by_currency(m: &std::collections::BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(currency, v)| format!("{v} {currency}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A group's return as the pages show it ([`stats::returns_text`]).
fn returns(g: &stats::GroupStats) -> String {
    stats::returns_text(
        g.roi.iter().map(|(c, v)| (c.as_str(), v.as_str())),
        g.cost.len(),
    )
}

#[derive(Template)]
#[template(path = "admin/stats.html")]
struct StatsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    /// `(value, label, selected)` of the two choices.
    dimensions: Vec<(&'static str, &'static str, bool)>,
    ranges: Vec<(&'static str, &'static str, bool)>,
    group_label: &'static str,
    kinds: Vec<&'static str>,
    groups: Vec<StatsRow>,
}

/// `GET .../stats?by=&days=`: the same read as `GET /stats`, over the last `days` days of the
/// space's time zone (today included) or everything.
pub(super) async fn stats(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let by = Dimension::parse(ctx.query.get("by"))?;
    let days = ctx.query.get("days").unwrap_or("30");
    let zone = ctx.app.space_settings(&space).await?.time_zone.zone();
    let range = match days {
        "all" => stats::Range::Hours(0, u32::MAX),
        "1" | "7" | "30" => {
            let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
            let back = days.parse::<u32>().unwrap_or(30) - 1;
            stats::Range::Days(today.saturating_sub(back), u32::MAX)
        }
        _ => {
            return Err(Error::field(
                Code::InvalidField,
                "days",
                "days is 1, 7, 30 or all",
            ));
        }
    };
    let kinds: Vec<&'static str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
    let groups = ctx
        .app
        .stats(&space, stats::Grouping::all(by), range)
        .await?
        .1
        .into_iter()
        .map(|g| StatsRow {
            roi: returns(&g),
            group: g.group.unwrap_or_else(|| "(none)".to_owned()),
            clicks: g.clicks,
            bound: g.bound_clicks,
            events: kinds
                .iter()
                .map(|k| (*k, g.events.get(k).copied().unwrap_or(0)))
                .collect(),
            first_deposits: g.first_deposits,
            deposits: by_currency(&g.deposits),
            cost: by_currency(&g.cost),
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "stats");
    Ok(html(
        StatusCode::OK,
        &StatsPage {
            frame,
            name,
            dimensions: [
                ("campaign_name", "campaign"),
                ("link_slug", "link"),
                ("day", "day"),
                ("utm_content", "ad"),
                ("utm_term", "ad set"),
            ]
            .into_iter()
            .map(|(value, label)| (value, label, value == by.as_str()))
            .collect(),
            ranges: [
                ("1", "today"),
                ("7", "7 days"),
                ("30", "30 days"),
                ("all", "all time"),
            ]
            .into_iter()
            .map(|(value, label)| (value, label, value == days))
            .collect(),
            group_label: match by {
                Dimension::Campaign => "Campaign",
                Dimension::Link => "Link",
                Dimension::Day => "Day",
                Dimension::Ad => "Ad (utm_content)",
                Dimension::AdSet => "Ad set (utm_term)",
            },
            kinds,
            groups,
        },
    ))
}

// --- Rejections ---

struct RejectionRow {
    at: String,
    request: String,
    answer: String,
    error: String,
    query: String,
}

#[derive(Template)]
#[template(path = "admin/rejections.html")]
struct RejectionsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    rejections: Vec<RejectionRow>,
}

pub(super) async fn rejections(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let rejections = ctx
        .app
        .rejections(&space, REJECTIONS_SHOWN)
        .await?
        .into_iter()
        .map(|r| RejectionRow {
            at: rfc3339_s(r.at_ms),
            request: format!("{} {}", r.method, r.endpoint),
            answer: format!("{} {}", r.http_status, r.status),
            error: r.error,
            query: r.query.unwrap_or_default(),
        })
        .collect();
    let frame = frame_of(ctx, Some(name), "rejections");
    Ok(html(
        StatusCode::OK,
        &RejectionsPage {
            frame,
            name,
            rejections,
        },
    ))
}

// --- Dashboard ---

struct Bar {
    day: String,
    clicks: u64,
    x: u64,
    y: u64,
    width: u64,
    height: u64,
}

/// One group of a dashboard table (a campaign, or a campaign's link, ad, ad set or day), as
/// shown and as downloaded.
struct GroupRow {
    /// What the group is, the CSV's first heading: `campaign`, `link`, `ad`, `ad_set` or `day`.
    label: &'static str,
    group: String,
    /// The query of the campaign's drill-down (campaign rows with a name only).
    drill: Option<String>,
    clicks: u64,
    registrations: u64,
    first_deposits: u64,
    revenue: String,
    cost: String,
    roi: String,
}

/// A row of the CSV download: the group under its own label, then the figures.
impl serde::Serialize for GroupRow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut row = serializer.serialize_struct("GroupRow", 7)?;
        row.serialize_field(self.label, &self.group)?;
        row.serialize_field("clicks", &self.clicks)?;
        row.serialize_field("registrations", &self.registrations)?;
        row.serialize_field("first_deposits", &self.first_deposits)?;
        row.serialize_field("revenue", &self.revenue)?;
        row.serialize_field("cost", &self.cost)?;
        row.serialize_field("roi", &self.roi)?;
        row.end()
    }
}

/// The top of the dashboard and of a campaign's drill-down (`admin/dashboard_period.html`): the
/// range and its controls, the totals against the period before, and the funnel.
#[derive(Default)]
struct Period {
    zone: String,
    presets: Vec<(String, &'static str, bool)>,
    from: String,
    to: String,
    days: u32,
    /// The range, as the dashboard's query.
    range_query: String,
    /// The drill-down's campaign, which the range's controls keep ("" on the dashboard).
    campaign: String,
    /// `(what, this period, the period before, change)`.
    totals: Vec<(&'static str, String, String, String)>,
    /// Each stage of the funnel: `(what, count, its rate from the stage before)`; the first
    /// stage's rate is not shown.
    funnel: Vec<(&'static str, u64, String)>,
}

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
struct DashboardPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    period: Period,
    chart_width: u64,
    bars: Vec<Bar>,
    /// No clicks on any day of the range: the chart says so in words.
    no_clicks: bool,
    columns: Vec<(&'static str, &'static str)>,
    sort: String,
    rows: Vec<GroupRow>,
}

/// One table of a campaign's drill-down.
struct DrillTable {
    /// Its key in `sort` (`links.clicks`) and `table` (of the CSV download).
    key: &'static str,
    heading: &'static str,
    /// `(sort key, heading)`, the first the group's.
    columns: Vec<(&'static str, &'static str)>,
    sort: &'static str,
    rows: Vec<GroupRow>,
    /// Whether its groups have costs (days); links, ads and ad sets have none, and no Cost and
    /// ROI columns on the page (the CSV keeps them, empty, so every table has one shape).
    costs: bool,
}

/// A campaign's drill-down: its totals against the period before, its funnel, and its tables.
#[derive(Template)]
#[template(path = "admin/dashboard_campaign.html")]
struct CampaignPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    period: Period,
    /// The range and the campaign: every link of the page keeps both.
    page_query: String,
    tables: Vec<DrillTable>,
}

/// The tables of a campaign's drill-down: key, heading, grouping, the group's CSV label and
/// heading, and the column it is sorted by unless asked otherwise.
const DRILL_TABLES: [(&str, &str, Dimension, &str, &str, &str); 4] = [
    ("links", "Links", Dimension::Link, "link", "Link", "clicks"),
    ("ads", "Ads", Dimension::Ad, "ad", "Ad", "clicks"),
    (
        "ad_sets",
        "Ad sets",
        Dimension::AdSet,
        "ad_set",
        "Ad set",
        "clicks",
    ),
    ("days", "Days", Dimension::Day, "day", "Day", "group"),
];

/// The columns of the campaign table: `sort` key and heading.
const CAMPAIGN_COLUMNS: [(&str, &str); 7] = [
    ("group", "Campaign"),
    ("clicks", "Clicks"),
    ("registrations", "Registrations"),
    ("first_deposits", "First deposits"),
    ("revenue", "Revenue"),
    ("cost", "Cost"),
    ("roi", "ROI"),
];

/// `+12%`, `-3%`, or `—` with nothing before.
fn change(now: u64, before: u64) -> String {
    stats::change_percent(now, before).map_or_else(|| "—".to_owned(), |pct| format!("{pct:+}%"))
}

fn money(m: &std::collections::BTreeMap<String, String>) -> String {
    or_dash(by_currency(m))
}

/// `text`, or a dash when it is empty (a total with nothing to show).
fn or_dash(text: String) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        text
    }
}

/// `GET .../dashboard?days=|from=&to=&sort=&format=csv`: a period's totals against the period
/// before, the funnel, clicks by day, and the campaigns (sortable, downloadable as CSV); days
/// of the space's time zone, all from the same reads as `GET /stats`.
pub(super) async fn dashboard(ctx: &Ctx<'_>, name: &str) -> Result<Response, Error> {
    let space = space(ctx, name).await?;
    let zone_name = ctx.app.space_settings(&space).await?.time_zone;
    let zone = zone_name.zone();
    let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
    let q = &ctx.query;
    let preset = q.get("days").unwrap_or("7");
    let (first, last) = dashboard_days(q, preset, today)?;
    let days = last - first + 1;
    let before = (first.saturating_sub(days), first.saturating_sub(1));
    let (from, to) = (
        crate::domain::cost::day_text(first),
        crate::domain::cost::day_text(last),
    );
    let range_query = format!("from={from}&to={to}");
    let campaign = stats::Grouping::parse(None, q.get("campaign"))?.campaign;
    let mut period = Period {
        zone: zone_name.as_str().to_owned(),
        presets: range_presets(q, preset, campaign.as_deref().unwrap_or("")),
        from,
        to,
        days,
        range_query,
        campaign: campaign.unwrap_or_default(),
        ..Period::default()
    };
    if !period.campaign.is_empty() {
        let page = CampaignPage {
            frame: frame_of(ctx, Some(name), "dashboard"),
            name,
            page_query: format!(
                "{}&campaign={}",
                period.range_query,
                in_query(&period.campaign)
            ),
            period,
            tables: Vec::new(),
        };
        return campaign_drill(ctx, &space, page, (first, last), before).await;
    }
    let (_, now_days) = ctx
        .app
        .stats(
            &space,
            stats::Grouping::all(Dimension::Day),
            stats::Range::Days(first, last),
        )
        .await?;
    let (_, before_days) = ctx
        .app
        .stats(
            &space,
            stats::Grouping::all(Dimension::Day),
            stats::Range::Days(before.0, before.1),
        )
        .await?;
    let (_, campaigns) = ctx
        .app
        .stats(
            &space,
            stats::Grouping::all(Dimension::Campaign),
            stats::Range::Days(first, last),
        )
        .await?;
    let (now, then) = (
        stats::period_totals(&now_days)?,
        stats::period_totals(&before_days)?,
    );
    (period.totals, period.funnel) = totals_and_funnel(&now, &then);
    let bars = chart_bars((first, last), &now_days);
    let sort = q
        .get("sort")
        .filter(|s| CAMPAIGN_COLUMNS.iter().any(|(k, _)| k == s))
        .unwrap_or("clicks");
    let rows = group_rows(campaigns, "campaign", sort);
    if q.get("format") == Some("csv") {
        let (from, to) = (&period.from, &period.to);
        return table_csv(&rows, &format!("{name}-campaigns-{from}-{to}"));
    }
    let frame = frame_of(ctx, Some(name), "dashboard");
    Ok(html(
        StatusCode::OK,
        &DashboardPage {
            frame,
            name,
            period,
            chart_width: u64::from(days) * BAR_WIDTH,
            no_clicks: bars.iter().all(|b| b.clicks == 0),
            bars,
            columns: CAMPAIGN_COLUMNS.to_vec(),
            sort: sort.to_owned(),
            rows,
        },
    ))
}

/// The range's presets as `(query, label, selected)`, each keeping the drill-down's `campaign`
/// (none: "").
fn range_presets(
    q: &crate::web::Query,
    preset: &str,
    campaign: &str,
) -> Vec<(String, &'static str, bool)> {
    let campaign = if campaign.is_empty() {
        String::new()
    } else {
        format!("&campaign={}", in_query(campaign))
    };
    [
        ("1", "Today"),
        ("y", "Yesterday"),
        ("7", "7 days"),
        ("30", "30 days"),
    ]
    .into_iter()
    .map(|(v, label)| {
        (
            format!("days={v}{campaign}"),
            label,
            q.get("from").is_none() && v == preset,
        )
    })
    .collect()
}

/// `GET .../dashboard?campaign=&days=|from=&to=&sort=<table>.<column>&format=csv&table=`: one
/// campaign's drill-down over the dashboard's range: its totals against the period before, its
/// funnel, and its tables by link, ad, ad set and day (`GET /stats?campaign=`), each sortable
/// and downloadable as CSV.
async fn campaign_drill(
    ctx: &Ctx<'_>,
    space: &SpaceRef,
    mut page: CampaignPage<'_>,
    (first, last): (u32, u32),
    before: (u32, u32),
) -> Result<Response, Error> {
    let q = &ctx.query;
    let one = |by| stats::Grouping {
        by,
        campaign: Some(page.period.campaign.clone()),
    };
    let (_, now) = ctx
        .app
        .stats(
            space,
            one(Dimension::Campaign),
            stats::Range::Days(first, last),
        )
        .await?;
    let (_, then) = ctx
        .app
        .stats(
            space,
            one(Dimension::Campaign),
            stats::Range::Days(before.0, before.1),
        )
        .await?;
    (page.period.totals, page.period.funnel) =
        totals_and_funnel(&stats::period_totals(&now)?, &stats::period_totals(&then)?);
    let asked = q.get("sort").and_then(|s| s.split_once('.'));
    let wanted = q.get("format") == Some("csv");
    let csv_table = q.get("table").filter(|_| wanted);
    if wanted && !DRILL_TABLES.iter().any(|t| Some(t.0) == csv_table) {
        return Err(Error::field(
            Code::InvalidField,
            "table",
            "table is links, ads, ad_sets or days",
        ));
    }
    for (key, heading, by, label, group_heading, default_sort) in DRILL_TABLES {
        if csv_table.is_some_and(|t| t != key) {
            continue;
        }
        let mut columns = CAMPAIGN_COLUMNS.to_vec();
        columns[0] = ("group", group_heading);
        if !by.has_costs() {
            columns.retain(|(k, _)| !matches!(*k, "cost" | "roi"));
        }
        let sort = asked
            .filter(|(table, _)| *table == key)
            .and_then(|(_, column)| columns.iter().find(|(k, _)| *k == column))
            .map_or(default_sort, |(k, _)| *k);
        let (_, groups) = ctx
            .app
            .stats(space, one(by), stats::Range::Days(first, last))
            .await?;
        let rows = group_rows(groups, label, sort);
        if csv_table.is_some() {
            let safe: String = page
                .period
                .campaign
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let (from, to) = (&page.period.from, &page.period.to);
            let file = format!("{}-{safe}-{key}-{from}-{to}", page.name);
            return table_csv(&rows, &file);
        }
        page.tables.push(DrillTable {
            key,
            heading,
            columns,
            sort,
            rows,
            costs: by.has_costs(),
        });
    }
    Ok(html(StatusCode::OK, &page))
}

/// The days the dashboard shows: `from`/`to` (up to today), or a preset (`1` today, `y`
/// yesterday, `7` or `30` days to today); at most 366.
fn dashboard_days(q: &crate::web::Query, preset: &str, today: u32) -> Result<(u32, u32), Error> {
    let (first, last) = if q.get("from").is_some() || q.get("to").is_some() {
        let (first, last) = crate::domain::cost::day_range(q.get("from"), q.get("to"))?;
        (first, last.min(today))
    } else {
        match preset {
            "1" => (today, today),
            "y" => (today.saturating_sub(1), today.saturating_sub(1)),
            "7" | "30" => (
                today.saturating_sub(preset.parse::<u32>().unwrap_or(7) - 1),
                today,
            ),
            _ => {
                return Err(Error::field(
                    Code::InvalidField,
                    "days",
                    "days is 1, y, 7 or 30",
                ));
            }
        }
    };
    let days = last.saturating_sub(first) + 1;
    if days > 366 {
        return Err(Error::field(
            Code::InvalidField,
            "from",
            "a range is at most 366 days",
        ));
    }
    Ok((first, last))
}

/// The funnel's stages as the totals' rows and the funnel name them.
const STAGES: [(stats::Stage, &str, &str); 4] = [
    (stats::Stage::Clicks, "Clicks", "Clicks"),
    (stats::Stage::BoundClicks, "Bound clicks", "bound"),
    (
        stats::Stage::Registrations,
        "Registrations",
        "registrations",
    ),
    (
        stats::Stage::FirstDeposits,
        "First deposits",
        "first deposits",
    ),
];

/// The totals' rows (what, this period, the one before, the change) and the funnel.
#[allow(clippy::type_complexity)]
fn totals_and_funnel(
    now: &stats::GroupStats,
    then: &stats::GroupStats,
) -> (
    Vec<(&'static str, String, String, String)>,
    Vec<(&'static str, u64, String)>,
) {
    let mut totals: Vec<_> = STAGES
        .iter()
        .map(|&(stage, what, _)| {
            let (a, b) = (stage.count(now), stage.count(then));
            (what, a.to_string(), b.to_string(), change(a, b))
        })
        .collect();
    totals.extend([
        (
            "Revenue",
            money(&now.deposits),
            money(&then.deposits),
            String::new(),
        ),
        ("Cost", money(&now.cost), money(&then.cost), String::new()),
        (
            "Return (ROI)",
            or_dash(returns(now)),
            or_dash(returns(then)),
            String::new(),
        ),
    ]);
    let funnel = STAGES
        .iter()
        .map(|&(stage, _, what)| {
            let rate = stage
                .rate(now)
                .map_or_else(|| "—".to_owned(), stats::percent);
            (what, stage.count(now), rate)
        })
        .collect();
    (totals, funnel)
}

/// The chart's width of a day.
const BAR_WIDTH: u64 = 20;

/// One bar a day, every day of `[first, last]`, an empty day at 0, scaled to the busiest.
fn chart_bars((first, last): (u32, u32), now_days: &[stats::GroupStats]) -> Vec<Bar> {
    let by_day: std::collections::BTreeMap<&str, u64> = now_days
        .iter()
        .filter_map(|g| Some((g.group.as_deref()?, g.clicks)))
        .collect();
    let max = by_day.values().copied().max().unwrap_or(0).max(1);
    (first..=last)
        .enumerate()
        .map(|(i, d)| {
            let day = crate::domain::cost::day_text(d);
            let clicks = by_day.get(day.as_str()).copied().unwrap_or(0);
            let height = clicks * 100 / max;
            Bar {
                x: i as u64 * BAR_WIDTH + 2,
                y: 110 - height,
                width: BAR_WIDTH - 4,
                height,
                clicks,
                day,
            }
        })
        .collect()
}

/// A table's rows, sorted by `sort` (numbers and amounts largest first, names A to Z and days
/// oldest first; amounts by their first currency), each group under `label`; the campaigns'
/// rows (`label` `campaign`) link to their drill-down.
fn group_rows(groups: Vec<stats::GroupStats>, label: &'static str, sort: &str) -> Vec<GroupRow> {
    let mut rows: Vec<(stats::GroupStats, GroupRow)> = groups
        .into_iter()
        .map(|g| {
            let drill = g
                .group
                .as_deref()
                .filter(|_| label == "campaign")
                .map(in_query);
            let row = GroupRow {
                label,
                group: g.group.clone().unwrap_or_else(|| "(none)".to_owned()),
                drill,
                clicks: g.clicks,
                registrations: g.registrations(),
                first_deposits: g.first_deposits,
                revenue: by_currency(&g.deposits),
                cost: by_currency(&g.cost),
                roi: returns(&g),
            };
            (g, row)
        })
        .collect();
    let first_amount = |m: &std::collections::BTreeMap<String, String>| {
        m.values()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::MIN)
    };
    rows.sort_by(|(a, ra), (b, rb)| match sort {
        "group" => ra.group.cmp(&rb.group),
        "registrations" => rb.registrations.cmp(&ra.registrations),
        "first_deposits" => rb.first_deposits.cmp(&ra.first_deposits),
        "revenue" => first_amount(&b.deposits).total_cmp(&first_amount(&a.deposits)),
        "cost" => first_amount(&b.cost).total_cmp(&first_amount(&a.cost)),
        "roi" => first_amount(&b.roi).total_cmp(&first_amount(&a.roi)),
        _ => rb.clicks.cmp(&ra.clicks),
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// A table as a CSV download named `file` (every cell formula-safe: `domain::spreadsheet`).
fn table_csv(rows: &[GroupRow], file: &str) -> Result<Response, Error> {
    let mut csv = crate::domain::spreadsheet::CsvRows::new(Vec::new());
    for r in rows {
        csv.row(r)
            .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    }
    let body = csv
        .take_written()
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
    Ok(csv_response(body, file))
}

/// A CSV download: `body` as `<file>.csv`.
fn csv_response(body: Vec<u8>, file: &str) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    let file = format!("attachment; filename=\"{file}.csv\"");
    if let Ok(v) = HeaderValue::from_str(&file) {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, v);
    }
    response
}
