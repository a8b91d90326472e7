//! Tracking links (`docs/api.md#tracking-links`): managing them with the space's secret, and the
//! public `/l/<slug>` that records a click and sends the visitor on.

use askama::Template;
use schemars::JsonSchema;
use serde::Serialize;
use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::app::links::Visit;
use crate::domain::keyring::SpaceRef;
use crate::domain::link::{Destination, Link, LinkView, Mode, NewLink, location};
use crate::error::Error;
use crate::http::access::{Access, finish};
use crate::surface::Call;
use crate::surface::respond::{self, Auth, Success};

/// The answer of `POST /links`: the link created.
#[derive(Serialize, JsonSchema)]
pub struct LinkAnswer {
    pub ok: Success,
    pub link: LinkView,
}

/// `POST /links`: creates a link of the space; `201`, or `409 conflict` for a taken slug.
pub async fn post_links(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let link = call
        .app
        .create_link(&space, NewLink::from_json(&body)?)
        .await?;
    Ok(respond::json(
        StatusCode::CREATED,
        &LinkAnswer { ok: Success, link },
    ))
}

/// The answer of `GET /links`: the space's links, deleted ones left out.
#[derive(Serialize, JsonSchema)]
pub struct LinksAnswer {
    pub ok: Success,
    pub links: Vec<LinkView>,
}

/// `GET /links`: the space's links with their click counts.
pub async fn get_links(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let links = call.app.links(&space).await?;
    Ok(respond::json(
        StatusCode::OK,
        &LinksAnswer { ok: Success, links },
    ))
}

/// `DELETE /links/<slug>`: the link's address answers `410` from now on.
pub async fn delete_link(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let slug = call.param.unwrap_or_default();
    call.app.delete_link(&space, slug).await?;
    Ok(respond::ok())
}

/// The page of a `page` link, and what link previews get: every value is escaped by the
/// template engine.
#[derive(Template)]
#[template(path = "link_page.html")]
struct LinkPage<'a> {
    title: &'a str,
    label: &'a str,
    /// The visible button's address.
    button: Option<String>,
    /// The app's own address, opened at once by the page's script.
    app: Option<String>,
}

/// `GET` or `HEAD /l/<slug>`: records the click (committed before the answer) and sends the
/// visitor to the bot or target; previews and `HEAD` get a page and record nothing.
pub async fn visit(call: Call) -> Response {
    let head = call.method == Method::HEAD;
    let (app, slug) = (&call.app, call.param.as_deref().unwrap_or_default());
    let access = Access::new(if head { "HEAD" } else { "GET" }, "/l/{slug}", Auth::None);
    let user_agent = call.header(header::USER_AGENT);
    let visited = match call.client.map_or(Ok(()), |c| app.admit_address(c)) {
        Ok(()) => {
            app.visit(slug, &call.raw_query, user_agent, call.client, head)
                .await
        }
        Err(limited) => Err(limited),
    };
    let result = visited.map(|visit| match visit {
        Visit::Unknown => plain(StatusCode::NOT_FOUND, "This link does not exist.\n"),
        Visit::Gone => plain(StatusCode::GONE, "This link has been removed.\n"),
        Visit::Preview(link) => preview(&link),
        Visit::Clicked {
            link,
            uid,
            invite,
            to,
        } => {
            // A channel link goes to the invite link the click took, or to its fallback.
            let address = invite.unwrap_or_else(|| location(&to, &uid));
            match (link.mode, &to) {
                (Mode::Redirect, _) => redirect(&address),
                (Mode::Page, Destination::Channel(_)) => channel_page(&address),
                (Mode::Page, _) => open_page(&to, &uid),
            }
        }
    });
    finish(app, &access, result)
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut r = Response::new(text.into());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    no_store(r)
}

fn no_store(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn redirect(to: &str) -> Response {
    let mut r = Response::new(Vec::new().into());
    *r.status_mut() = StatusCode::FOUND;
    match HeaderValue::from_str(to) {
        Result::Ok(v) => {
            r.headers_mut().insert(header::LOCATION, v);
        }
        // Cannot happen: bots, uids and targets are checked to be visible ASCII.
        Err(_) => *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR,
    }
    no_store(r)
}

fn html(page: &LinkPage<'_>) -> Response {
    let body = page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "rendering the link page");
        String::from("<!doctype html><title>Error</title>")
    });
    let mut r = Response::new(body.into());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    no_store(r)
}

/// A `page` link: opens the app (`tg://`) at once and shows a button with the web address.
fn open_page(destination: &Destination, uid: &str) -> Response {
    let (app, label) = match destination {
        Destination::Bot(bot) => (
            format!("tg://resolve?domain={bot}&start={uid}"),
            "Open in Telegram",
        ),
        Destination::Target(_) | Destination::Channel(_) => {
            (location(destination, uid), "Continue")
        }
    };
    html(&LinkPage {
        title: label,
        label,
        button: Some(location(destination, uid)),
        app: Some(app),
    })
}

/// A `page` channel link: opens the invite link in the app (`tg://join?invite=<hash>`) at once,
/// with a button of the web address.
fn channel_page(invite: &str) -> Response {
    let hash = invite
        .strip_prefix("https://t.me/+")
        .or_else(|| invite.strip_prefix("https://t.me/joinchat/"))
        .unwrap_or_default();
    html(&LinkPage {
        title: "Join the channel",
        label: "Join the channel",
        button: Some(invite.to_owned()),
        app: (!hash.is_empty()).then(|| format!("tg://join?invite={hash}")),
    })
}

/// What a link preview or crawler sees: the bot without a click id, so a preview shows the bot.
fn preview(link: &Link) -> Response {
    let button = match &link.destination {
        Destination::Bot(bot) => Some(format!("https://t.me/{bot}")),
        // Never an invite link of the pool: a preview takes none.
        Destination::Target(_) | Destination::Channel(_) => None,
    };
    html(&LinkPage {
        title: "Open in Telegram",
        label: "Open in Telegram",
        button,
        app: None,
    })
}
