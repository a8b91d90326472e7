//! The admin page: the web page under `/admin/` (`docs/api.md#admin-page`).
//!
//! Server-rendered HTML from `askama` templates (`templates/admin/`), which escape every value;
//! the stylesheet and the one script (copy buttons) are embedded in the binary. Every form works
//! without JavaScript. Each page calls the same operations as the HTTP API and the command line
//! (`admin`, `App`); nothing here decides a rule of its own, and an error is shown with the
//! sentence and the status the API would give it (`respond::status_of`).
//!
//! Every path under `/admin/` is one entry of [`routes::PAGES`]: its method, path, body, label
//! and handler, from which the router below, the space's menu and the list of pages in
//! `docs/admin.md` come. Each page is a file of its own in `pages/`, its template struct and
//! handlers together.

mod access;
mod context;
mod pages;
mod routes;
pub mod session;

use std::sync::Arc;
use std::time::Instant;

use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::app::App;
use crate::app::audit::Change;
use crate::domain::input::Query;
use crate::domain::user::User;
use crate::error::{Code, Error};
use crate::surface::{self, Call};
use context::{
    COOKIE, Ctx, LOGIN_PATH, Request, client_address, cookie_value, read_form, read_upload,
    redirect, unread,
};
use routes::Takes;
use session::same_token;

pub use context::{AdminPages, MAX_FORM_BYTES, MAX_UPLOAD_BYTES};

/// Every path of the admin page as `(method, path, open)`, `open` when it is served without a
/// session: for the tests that walk them all.
pub fn every_page() -> impl Iterator<Item = (&'static str, &'static str, bool)> {
    routes::PAGES.iter().map(|p| {
        let open = matches!(p.handler, routes::Handler::Open(_));
        (p.method.as_str(), p.path, open)
    })
}

/// Serves one request under `/admin`: every answer gets the security headers and an access-log
/// line (method, path, status; never a form, so never a password or a key).
pub async fn serve(call: Call, pages: Arc<AdminPages>) -> Response {
    let started = Instant::now();
    let cookie = call.header(header::COOKIE).map(str::to_owned);
    let content_type = call.header(header::CONTENT_TYPE).map(str::to_owned);
    let (app, body) = (call.app, call.body);
    let request = Request {
        method: call.method,
        path: call.path,
        query: call.query,
        cookie,
        content_type,
        client: call.client,
    };
    let response = route(&app, &pages, &request, body)
        .await
        .unwrap_or_else(|e| pages::error_page(&e, None, None));
    finish(response, &request.method, &request.path, started)
}

/// Adds the security headers every admin answer carries and writes its access-log line.
fn finish(mut response: Response, method: &Method, path: &str, started: Instant) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    tracing::info!(
        target: "tracker::access",
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        "admin page"
    );
    response
}

/// The page [`routes::PAGES`] names for the request; within a session unless it is an open one,
/// its body read as the page takes it, a form's CSRF token checked.
async fn route(
    app: &Arc<App>,
    pages: &AdminPages,
    request: &Request,
    body: crate::surface::Body,
) -> Result<Response, Error> {
    context::publish_menu(routes::space_menu(), access::access_of);
    if request.path == "/admin" {
        return Ok(redirect("/admin/"));
    }
    let found = routes::find(&request.method, &request.path);
    if let Some((page, _)) = &found
        && let routes::Handler::Open(handler) = page.handler
    {
        return handler(
            &context::Anonymous {
                app,
                pages,
                request,
            },
            body,
        )
        .await;
    }
    let (get, post) = (
        request.method == Method::GET,
        request.method == Method::POST,
    );
    let live = session_of(app, pages, request).await?;
    // A page of a space keeps the space's menu, also when it shows an error.
    let space = request
        .path
        .strip_prefix("/admin/spaces/")
        .and_then(|rest| rest.split('/').next());
    let Some((live, user)) = live else {
        return Ok(unread(if get {
            redirect(LOGIN_PATH)
        } else {
            pages::login::page(
                app,
                pages,
                Some("Your session has ended; log in again."),
                StatusCode::FORBIDDEN,
            )
        }));
    };
    // A POST no page takes is read as a form, so that its CSRF token is checked before it is
    // told there is no such page.
    let unknown = if post { Takes::Form } else { Takes::Nothing };
    let form = match found.as_ref().map_or(unknown, |(page, _)| page.takes) {
        Takes::Nothing => Ok(Query::parse("")),
        Takes::Form => read_form(body).await,
        Takes::Upload => read_upload(body, request.content_type.as_deref()).await,
    };
    let form = match form {
        Ok(form) => form,
        Err(e) => return Ok(pages::error_page(&e, space, Some((&live.csrf, &user)))),
    };
    if post && !form.get("csrf").is_some_and(|t| same_token(t, &live.csrf)) {
        pages.warn(
            app,
            client_address(request),
            "admin form refused: its CSRF token does not match",
            &request.path,
        );
        return Ok(pages::message_page(
            StatusCode::FORBIDDEN,
            "This form is out of date (its CSRF token does not match your session), so nothing \
             was changed; reload the page and try again.",
            space,
            Some((&live.csrf, &user)),
        ));
    }
    let Some((page, params)) = found else {
        let e = Error::new(Code::NotFound, "there is no such admin page");
        return Ok(pages::error_page(&e, space, Some((&live.csrf, &user))));
    };
    let routes::Handler::Session(handler) = page.handler else {
        unreachable!("an open page is served before the session is looked for")
    };
    if !access::permits(&user, page, &params) {
        return Ok(access::refused(&user, &live.csrf));
    }
    let ctx = Ctx {
        app,
        pages,
        live,
        user,
        form,
        query: &request.query,
        page: page.path,
        params,
        refused: None,
    };
    let response = match handler(&ctx).await {
        Ok(response) => response,
        Err(e) if post => return Ok(refuse(ctx, e, &request.path).await),
        Err(e) => pages::error_page(&e, space, Some((&ctx.live.csrf, &ctx.user))),
    };
    let done = response.status().is_success() || response.status().is_redirection();
    if post && done {
        record_change(&ctx, request.client, space).await;
    }
    Ok(response)
}

/// The live session the request's cookie names, with its user read now, so that a user removed
/// or changed has no session left.
async fn session_of(
    app: &App,
    pages: &AdminPages,
    request: &Request,
) -> Result<Option<(session::Live, User)>, Error> {
    let Some(id) = request
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, COOKIE))
    else {
        return Ok(None);
    };
    let user = match pages.sessions.user_of(id) {
        Some(name) => app.user(&name).await?,
        None => None,
    };
    let live = pages
        .sessions
        .resume(id, app.now_ms(), user.as_ref().map(User::session_tag));
    Ok(live.zip(user))
}

/// The audit log's entry of a form that changed something: its page, and what it named (the
/// path's link or destination, else the form's slug, name or key kind).
async fn record_change(ctx: &Ctx<'_>, client: Option<std::net::IpAddr>, space: Option<&str>) {
    let subject = ["slug", "name"]
        .iter()
        .map(|n| ctx.param(n))
        .find(|v| !v.is_empty())
        .or_else(|| {
            ["slug", "name", "kind"]
                .iter()
                .find_map(|n| ctx.form.get(n))
        });
    ctx.app
        .record_audit(Change {
            who: &ctx.user.name,
            address: client,
            action: audit_action(ctx.page),
            space,
            subject,
        })
        .await;
}

/// A form's action in the audit log: its path below the space, without the path's values
/// (`/admin/spaces/{space}/links/{slug}/delete`: `links delete`; `/admin/spaces`: `spaces`).
fn audit_action(path: &str) -> String {
    let below = path.strip_prefix(routes::SPACE).unwrap_or(path);
    let words: Vec<&str> = below
        .split('/')
        .filter(|w| !w.is_empty() && *w != "admin" && !w.starts_with('{'))
        .collect();
    if words.is_empty() {
        "keys".to_owned()
    } else {
        words.join(" ")
    }
}

/// A refused form's page shown again: the page the form is on, as it was filled in, with the
/// error beside the field at fault and the status the API would answer. Every form of the admin
/// page is refused this way. Where that page cannot be shown (its space is gone), the error is
/// a page of its own.
async fn refuse(ctx: Ctx<'_>, error: Error, action: &str) -> Response {
    let status = surface::respond::status_of(error.code);
    let shown = error.clone();
    let space = ctx
        .params
        .iter()
        .find(|(n, _)| *n == "space")
        .map(|(_, v)| *v);
    let Some(form_page) = routes::form_page(ctx.page) else {
        return pages::error_page(&error, space, Some((&ctx.live.csrf, &ctx.user)));
    };
    let routes::Handler::Session(show) = form_page.handler else {
        return pages::error_page(&error, space, Some((&ctx.live.csrf, &ctx.user)));
    };
    let params = ctx
        .params
        .iter()
        .filter(|(name, _)| form_page.path.contains(&format!("{{{name}}}")))
        .copied()
        .collect();
    let again = Ctx {
        app: ctx.app,
        pages: ctx.pages,
        live: ctx.live,
        user: ctx.user,
        form: Query::parse(""),
        query: ctx.query,
        page: form_page.path,
        params,
        refused: Some(context::Refused {
            action: action.to_owned(),
            form: ctx.form,
            error,
        }),
    };
    match show(&again).await {
        Ok(mut response) => {
            *response.status_mut() = status;
            response
        }
        Err(_) => pages::error_page(&shown, space, Some((&again.live.csrf, &again.user))),
    }
}
