//! Tracking links (CONTRACT section 11): managing them with the space's secret, and the public
//! `/l/<slug>` that records a click and sends the visitor on.

use std::net::IpAddr;
use std::sync::Arc;

use askama::Template;
use bytes::{Buf, Bytes};
use futures_util::Stream;
use serde::Serialize;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use crate::app::{App, Visit};
use crate::domain::link::{Destination, Link, LinkView, Mode, NewLink, location};
use crate::error::Error;
use crate::http::handlers::{Access, bearer_post, finish};
use crate::http::read::bearer_get;
use crate::http::respond::{self, Auth};

#[derive(Serialize)]
struct LinkAnswer {
    ok: bool,
    link: LinkView,
}

/// `POST /links`: creates a link of the space; `201`, or `409 conflict` for a taken slug.
pub async fn post_links<S, B>(
    app: Arc<App>,
    authorization: Option<String>,
    length: Option<u64>,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    bearer_post(
        app,
        "/links",
        authorization,
        length,
        body,
        |app, space, body: Bytes| async move {
            let link = app.create_link(&space, NewLink::from_json(&body)?).await?;
            Ok(respond::json(
                StatusCode::CREATED,
                &LinkAnswer { ok: true, link },
            ))
        },
    )
    .await
}

#[derive(Serialize)]
struct LinksAnswer {
    ok: bool,
    links: Vec<LinkView>,
}

/// `GET /links`: the space's links with their click counts.
pub async fn get_links(app: Arc<App>, authorization: Option<String>, query: String) -> Response {
    bearer_get(
        app,
        "/links",
        authorization,
        query,
        |app, space, _| async move {
            let links = app.links(&space).await?;
            Ok(respond::json(
                StatusCode::OK,
                &LinksAnswer { ok: true, links },
            ))
        },
    )
    .await
}

#[derive(Serialize)]
struct Ok {
    ok: bool,
}

/// `DELETE /links/<slug>`: the link's address answers `410` from now on.
pub async fn delete_link(app: Arc<App>, slug: String, authorization: Option<String>) -> Response {
    let mut access = Access::new("DELETE", "/links", Auth::Bearer);
    let result = async {
        let space = access.authenticate(
            &app,
            crate::app::Presented::Bearer(authorization.as_deref()),
        )?;
        app.delete_link(&space, slug).await?;
        Result::<_, Error>::Ok(respond::json(StatusCode::OK, &Ok { ok: true }))
    }
    .await;
    finish(&app, &access, result)
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
pub async fn visit(
    app: Arc<App>,
    slug: String,
    head: bool,
    client: Option<IpAddr>,
    query: String,
    user_agent: Option<String>,
) -> Response {
    let access = Access::new(if head { "HEAD" } else { "GET" }, "/l", Auth::None);
    let visited = match client.map_or(Ok(()), |c| app.admit_address(c)) {
        Ok(()) => app.visit(&slug, &query, user_agent.as_deref(), head).await,
        Err(limited) => Err(limited),
    };
    let result = visited.map(|visit| match visit {
        Visit::Unknown => plain(StatusCode::NOT_FOUND, "This link does not exist.\n"),
        Visit::Gone => plain(StatusCode::GONE, "This link has been removed.\n"),
        Visit::Preview(link) => preview(&link),
        Visit::Clicked { link, uid } => match link.mode {
            Mode::Redirect => redirect(&location(&link.destination, &uid)),
            Mode::Page => open_page(&link, &uid),
        },
    });
    finish(&app, &access, result)
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
fn open_page(link: &Link, uid: &str) -> Response {
    let (app, label) = match &link.destination {
        Destination::Bot(bot) => (
            format!("tg://resolve?domain={bot}&start={uid}"),
            "Open in Telegram",
        ),
        Destination::Target(_) => (location(&link.destination, uid), "Continue"),
    };
    html(&LinkPage {
        title: label,
        label,
        button: Some(location(&link.destination, uid)),
        app: Some(app),
    })
}

/// What a link preview or crawler sees: the bot without a click id, so a preview shows the bot.
fn preview(link: &Link) -> Response {
    let button = match &link.destination {
        Destination::Bot(bot) => Some(format!("https://t.me/{bot}")),
        Destination::Target(_) => None,
    };
    html(&LinkPage {
        title: "Open in Telegram",
        label: "Open in Telegram",
        button,
        app: None,
    })
}
