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

mod pages;
mod routes;
pub mod session;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::app::App;
use crate::domain::input::Query;
use crate::error::{Code, Error};
use crate::http::Call;
use routes::Takes;
use session::{Live, LoginForms, LoginThrottle, QuietWarnings, Sessions, same_token};

/// The session cookie's name.
const COOKIE: &str = "tracker_admin";
/// The login form's cookie (`session::LoginForms`), sent only to `/admin/login`.
const LOGIN_COOKIE: &str = "tracker_login";
const LOGIN_PATH: &str = "/admin/login";
/// The largest form accepted.
pub const MAX_FORM_BYTES: u64 = 16 * 1024;
/// The largest upload (the costs page's CSV file, with the rest of its form): some 20,000 rows
/// of Meta's export, sent well within `body_timeout` from a phone; a larger file goes in with
/// `tracker costs import`, or split.
pub const MAX_UPLOAD_BYTES: u64 = 2 * 1024 * 1024;

const STYLE: &str = include_str!("style.css");
const COPY_JS: &str = include_str!("copy.js");

/// The admin page's state: sessions, the login form's key, the login throttle, the one permit
/// to run a password check (so that concurrent logins queue instead of taking every core), and
/// the warnings any client can cause, written once a minute per address.
pub struct AdminPages {
    sessions: Sessions,
    login_forms: LoginForms,
    throttle: LoginThrottle,
    checking: Arc<tokio::sync::Semaphore>,
    warnings: QuietWarnings,
}

impl Default for AdminPages {
    fn default() -> AdminPages {
        AdminPages {
            sessions: Sessions::default(),
            login_forms: LoginForms::default(),
            throttle: LoginThrottle::default(),
            checking: Arc::new(tokio::sync::Semaphore::new(1)),
            warnings: QuietWarnings::default(),
        }
    }
}

/// One request to the admin page, as its head has it: the body is read only once the head
/// shows a session (or, for a login, the login form's cookie).
struct Request {
    method: Method,
    /// The whole path, `/admin/...`.
    path: String,
    query: Query,
    cookie: Option<String>,
    content_type: Option<String>,
    client: Option<IpAddr>,
}

/// What a page handler is given: the app, the admin page's state, the logged-in session, the
/// request's form or query, and the page with its path's values.
struct Ctx<'a> {
    app: &'a App,
    pages: &'a AdminPages,
    live: Live,
    form: Query,
    query: &'a Query,
    page: &'static routes::Page,
    params: routes::Params<'a>,
}

impl Ctx<'_> {
    /// The value of the page path's `{name}` segment, as it came (not percent-decoded).
    fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, value)| value)
    }
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

/// A form's fields, read from the body within [`MAX_FORM_BYTES`].
async fn read_form(body: crate::http::Body) -> Result<Query, Error> {
    let body = body.read(MAX_FORM_BYTES).await?;
    Ok(Query::parse(std::str::from_utf8(&body).unwrap_or("")))
}

/// An upload's fields: a `multipart/form-data` form read whole within [`MAX_UPLOAD_BYTES`],
/// each field's text under its name (a file's too, which must be UTF-8). Another form is read
/// as [`read_form`] reads it.
///
/// The parser is `multer`, the one warp's `multipart` feature wraps: warp's filter takes the
/// body itself, but here the body is read only after the head has shown a session.
async fn read_upload(body: crate::http::Body, content_type: Option<&str>) -> Result<Query, Error> {
    let Some(boundary) = content_type.and_then(|t| multer::parse_boundary(t).ok()) else {
        return read_form(body).await;
    };
    let body = body.read(MAX_UPLOAD_BYTES).await.map_err(|e| {
        if e.code == Code::PayloadTooLarge {
            Error::field(
                Code::PayloadTooLarge,
                "file",
                format!(
                    "the file is larger than the upload limit of {} MiB ({MAX_UPLOAD_BYTES} \
                     bytes): split it, or import it with tracker costs import",
                    MAX_UPLOAD_BYTES / 1024 / 1024
                ),
            )
        } else {
            e
        }
    })?;
    let unreadable = |e: multer::Error| {
        Error::field(
            Code::InvalidField,
            "file",
            format!("the upload could not be read as a form: {e}"),
        )
    };
    let whole = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut parts = multer::Multipart::new(whole, boundary);
    let mut fields = Vec::new();
    while let Some(field) = parts.next_field().await.map_err(unreadable)? {
        let name = field.name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(unreadable)?;
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            Error::field(
                Code::InvalidField,
                "file",
                format!("{name} is not UTF-8 text: save the file as CSV UTF-8 and upload it again"),
            )
        })?;
        fields.push((name, text));
    }
    Ok(Query::from_fields(fields))
}

/// An answer given without reading the request's body: the connection closes after it, so the
/// unread body is never waited for.
fn unread(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

impl AdminPages {
    /// Writes warning `what` about `address`, at most once a minute per address and kind.
    fn warn(&self, app: &App, address: IpAddr, what: &'static str, path: &str) {
        if let Some(left_out) = self.warnings.admit(address, what, app.now_ms()) {
            tracing::warn!(%address, path, left_out_since_last = left_out, "{what}");
        }
    }
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
    body: crate::http::Body,
) -> Result<Response, Error> {
    if request.path == "/admin" {
        return Ok(redirect("/admin/"));
    }
    let found = routes::find(&request.method, &request.path);
    if let Some((page, _)) = &found {
        if let routes::Handler::Open(handler) = page.handler {
            return handler(
                &routes::Anonymous {
                    app,
                    pages,
                    request,
                },
                body,
            )
            .await;
        }
    }
    let (get, post) = (
        request.method == Method::GET,
        request.method == Method::POST,
    );
    let now = app.now_ms();
    let tag = session::password_tag(app.admin_password().await?.as_deref());
    let live = request
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, COOKIE))
        .and_then(|id| pages.sessions.resume(id, now, tag));
    // A page of a space keeps the space's menu, also when it shows an error.
    let space = request
        .path
        .strip_prefix("/admin/spaces/")
        .and_then(|rest| rest.split('/').next());
    let Some(live) = live else {
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
        Err(e) => return Ok(pages::error_page(&e, space, Some(&live.csrf))),
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
            Some(&live.csrf),
        ));
    }
    let Some((page, params)) = found else {
        let e = Error::new(Code::NotFound, "there is no such admin page");
        return Ok(pages::error_page(&e, space, Some(&live.csrf)));
    };
    let routes::Handler::Session(handler) = page.handler else {
        unreachable!("an open page is served before the session is looked for")
    };
    let ctx = Ctx {
        app,
        pages,
        live,
        form,
        query: &request.query,
        page,
        params,
    };
    Ok(handler(&ctx)
        .await
        .unwrap_or_else(|e| pages::error_page(&e, space, Some(&ctx.live.csrf))))
}

/// The client's address, or the unspecified one where no connection stands behind the request.
fn client_address(request: &Request) -> IpAddr {
    request.client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// The value of cookie `name` in a `Cookie` header, the first if it is there twice; an empty
/// one counts as none, and a pair that does not parse is passed over.
fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    cookie::Cookie::split_parse(header)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .and_then(|c| c.value_raw())
        .filter(|v| !v.is_empty())
}

/// A cookie of the admin page as [`set_cookie`] writes it, `Secure` when the public address is
/// `https://`.
fn cookie_header(
    app: &App,
    name: &str,
    value: &str,
    path: &str,
    max_age: Option<u32>,
) -> HeaderValue {
    let secure = app.settings.public_url().starts_with("https://");
    HeaderValue::from_str(&set_cookie(name, value, path, max_age, secure))
        .expect("a cookie of digits, dots and hex is a valid header")
}

/// A `Set-Cookie` value of the admin page: `HttpOnly; SameSite=Strict` on `path`, `Secure` when
/// asked. `max_age` 0 deletes it; none makes it last as long as the browser runs (the session's
/// own expiry is the server's).
fn set_cookie(name: &str, value: &str, path: &str, max_age: Option<u32>, secure: bool) -> String {
    let mut built = cookie::Cookie::build((name, value))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .path(path)
        .secure(secure);
    if let Some(age) = max_age {
        built = built.max_age(cookie::time::Duration::seconds(i64::from(age)));
    }
    built.to_string()
}

fn redirect(location: &'static str) -> Response {
    let mut response = Response::new(Vec::new().into());
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = Response::new(body.into());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `GET /admin/style.css`, built into the binary.
async fn style(_: &routes::Anonymous<'_>, _: crate::http::Body) -> Result<Response, Error> {
    Ok(asset(STYLE, "text/css; charset=utf-8"))
}

/// `GET /admin/copy.js`, the copy buttons' script, built into the binary.
async fn script(_: &routes::Anonymous<'_>, _: crate::http::Body) -> Result<Response, Error> {
    Ok(asset(COPY_JS, "text/javascript; charset=utf-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        assert_eq!(
            cookie_value("tracker_admin=abc; tracker_admin=def", COOKIE),
            Some("abc"),
            "the first of two"
        );
        assert_eq!(cookie_value("junk; tracker_admin=abc", COOKIE), Some("abc"));
        assert_eq!(
            cookie_value("a=1; tracker_admin=abc; b=2", COOKIE),
            Some("abc")
        );
        assert_eq!(cookie_value("tracker_admin=", COOKIE), None);
        assert_eq!(cookie_value("xtracker_admin=abc", COOKIE), None);
        assert_eq!(cookie_value("a=1", COOKIE), None);
        assert_eq!(
            cookie_value("tracker_admin=abc; tracker_login=1.ff", LOGIN_COOKIE),
            Some("1.ff")
        );
    }

    #[test]
    fn a_cookie_is_http_only_strict_on_its_path_and_secure_over_https() {
        assert_eq!(
            set_cookie(COOKIE, "abc", "/admin", None, false),
            "tracker_admin=abc; HttpOnly; SameSite=Strict; Path=/admin"
        );
        assert_eq!(
            set_cookie(LOGIN_COOKIE, "", LOGIN_PATH, Some(0), true),
            "tracker_login=; HttpOnly; SameSite=Strict; Secure; Path=/admin/login; Max-Age=0"
        );
        assert!(
            set_cookie(LOGIN_COOKIE, "1.ff", LOGIN_PATH, Some(3600), false)
                .ends_with("; Max-Age=3600")
        );
    }
}
