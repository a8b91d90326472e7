//! The API keys page: the admin web page under `/admin/` (CONTRACT section 12).
//!
//! Server-rendered HTML from `askama` templates (`templates/admin/`), which escape every value;
//! the stylesheet and the one script (copy buttons) are embedded in the binary. Every form works
//! without JavaScript. Each page calls the same operations as the HTTP API and the command line
//! (`admin`, `App`); nothing here decides a rule of its own, and an error is shown with the
//! sentence and the status the API would give it (`respond::status_of`).
//!
//! | method | path                                  | page                          |
//! |--------|---------------------------------------|-------------------------------|
//! | GET, POST | `/admin/login`                     | log in                        |
//! | POST   | `/admin/logout`                       | log out                       |
//! | GET    | `/admin/`                             | spaces                        |
//! | POST   | `/admin/spaces`                       | create a space                |
//! | GET    | `/admin/spaces/<space>`               | keys                          |
//! | POST   | `/admin/spaces/<space>/rotate`, `revoke` | rotate, revoke a kind of key |
//! | GET, POST | `/admin/spaces/<space>/postback`   | the postback URL builder      |
//! | GET, POST | `/admin/spaces/<space>/links`      | links, create a link          |
//! | POST   | `/admin/spaces/<space>/links/<slug>/delete` | delete a link           |
//! | GET    | `/admin/spaces/<space>/events`        | the feed, newest first        |
//! | GET    | `/admin/spaces/<space>/stats`         | stats by campaign, link, day  |
//! | GET    | `/admin/spaces/<space>/rejections`    | the rejection log             |

mod pages;
pub mod session;

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::app::App;
use crate::domain::input::Query;
use crate::error::{Code, Error};
use session::{Live, LoginThrottle, Sessions, same_token};

/// The session cookie's name.
const COOKIE: &str = "tracker_admin";
/// The largest form accepted.
pub const MAX_FORM_BYTES: u64 = 16 * 1024;
/// How long a failed login waits before it is answered.
const FAILED_LOGIN_PAUSE: Duration = Duration::from_secs(1);

const STYLE: &str = include_str!("style.css");
const COPY_JS: &str = include_str!("copy.js");

/// The admin page's state: sessions, the login throttle, and the one permit to run a password
/// check (so that concurrent logins queue instead of taking every core).
pub struct AdminPages {
    sessions: Sessions,
    throttle: LoginThrottle,
    checking: tokio::sync::Semaphore,
}

impl Default for AdminPages {
    fn default() -> AdminPages {
        AdminPages {
            sessions: Sessions::default(),
            throttle: LoginThrottle::default(),
            checking: tokio::sync::Semaphore::new(1),
        }
    }
}

/// One request to the admin page, as the route gives it.
pub struct Request {
    pub method: Method,
    /// The whole path, `/admin/...`.
    pub path: String,
    pub query: String,
    pub cookie: Option<String>,
    pub client: Option<IpAddr>,
    pub body: Bytes,
}

/// What a page handler is given: the app, the logged-in session, the request's form or query.
struct Ctx<'a> {
    app: &'a App,
    live: Live,
    form: Query,
    query: Query,
}

/// Serves one request under `/admin`: every answer gets the security headers and an access-log
/// line (method, path, status; never a form, so never a password or a key).
pub async fn serve(app: Arc<App>, pages: Arc<AdminPages>, request: Request) -> Response {
    let started = Instant::now();
    let mut response = route(&app, &pages, &request)
        .await
        .unwrap_or_else(|e| pages::error_page(&e, None, None));
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    tracing::info!(
        target: "tracker::access",
        method = %request.method,
        path = %request.path,
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        "admin page"
    );
    response
}

async fn route(app: &App, pages: &AdminPages, request: &Request) -> Result<Response, Error> {
    if request.path == "/admin" {
        return Ok(redirect("/admin/"));
    }
    let rest = request.path.strip_prefix("/admin/").unwrap_or_default();
    let segments: Vec<&str> = rest.split('/').collect();
    let (get, post) = (
        request.method == Method::GET,
        request.method == Method::POST,
    );
    match segments.as_slice() {
        ["style.css"] if get => return Ok(asset(STYLE, "text/css; charset=utf-8")),
        ["copy.js"] if get => return Ok(asset(COPY_JS, "text/javascript; charset=utf-8")),
        ["login"] if get => return Ok(pages::login(None, StatusCode::OK)),
        ["login"] if post => return login(app, pages, request).await,
        _ => {}
    }
    let now = app.now_ms();
    let live = request
        .cookie
        .as_deref()
        .and_then(session_id)
        .and_then(|id| pages.sessions.resume(id, now));
    let Some(live) = live else {
        return Ok(if get {
            redirect("/admin/login")
        } else {
            pages::login(
                Some("Your session has ended; log in again."),
                StatusCode::FORBIDDEN,
            )
        });
    };
    let form = Query::parse(std::str::from_utf8(&request.body).unwrap_or(""));
    if post && !form.get("csrf").is_some_and(|t| same_token(t, &live.csrf)) {
        return Err(Error::new(
            Code::Unauthorized,
            "this form is out of date (its CSRF token does not match your session); \
             reload the page and try again",
        ));
    }
    if matches!(segments.as_slice(), ["logout"]) && post {
        pages.sessions.end(&live.id);
        let mut response = redirect("/admin/login");
        response
            .headers_mut()
            .insert(header::SET_COOKIE, cookie_header(app, "", Some(0)));
        return Ok(response);
    }
    let ctx = Ctx {
        app,
        live,
        form,
        query: Query::parse(&request.query),
    };
    let result = match segments.as_slice() {
        [""] if get => pages::spaces(&ctx, None).await,
        ["spaces"] if post => pages::create_space(&ctx).await,
        ["spaces", space] if get => pages::keys(&ctx, space, None, None).await,
        ["spaces", space, action @ ("rotate" | "revoke")] if post => {
            pages::change_keys(&ctx, space, action).await
        }
        ["spaces", space, "postback"] if get || post => pages::postback(&ctx, space, post).await,
        ["spaces", space, "links"] if get => pages::links(&ctx, space, None).await,
        ["spaces", space, "links"] if post => pages::create_link(&ctx, space).await,
        ["spaces", space, "links", slug, "delete"] if post => {
            pages::delete_link(&ctx, space, slug).await
        }
        ["spaces", space, "events"] if get => pages::events(&ctx, space).await,
        ["spaces", space, "stats"] if get => pages::stats(&ctx, space).await,
        ["spaces", space, "rejections"] if get => pages::rejections(&ctx, space).await,
        _ => Err(Error::new(Code::NotFound, "there is no such admin page")),
    };
    // An error on a page of a space keeps the space's menu and the logout button.
    let space = match segments.as_slice() {
        ["spaces", space, ..] => Some(*space),
        _ => None,
    };
    Ok(result.unwrap_or_else(|e| pages::error_page(&e, space, Some(&ctx.live.csrf))))
}

/// `POST /admin/login`: throttled, then the password check (one at a time), then a session.
async fn login(app: &App, pages: &AdminPages, request: &Request) -> Result<Response, Error> {
    let form = Query::parse(std::str::from_utf8(&request.body).unwrap_or(""));
    let address = request.client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    if let Err(wait_s) = pages.throttle.admit(address, app.now_ms()) {
        tracing::warn!(%address, "admin login refused: too many attempts");
        let mut response = pages::login(
            Some(&format!(
                "Too many login attempts; try again in {wait_s} seconds."
            )),
            StatusCode::TOO_MANY_REQUESTS,
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(wait_s));
        return Ok(response);
    }
    let user_ok = form.get("user") == Some("admin");
    let password = form.get("password").unwrap_or("").to_owned();
    let matches = user_ok && {
        let _permit = pages
            .checking
            .acquire()
            .await
            .map_err(|_| Error::new(Code::Unavailable, "the server is stopping"))?;
        crate::admin::check_password(&app.store, password).await?
    };
    if !matches {
        tracing::warn!(%address, "admin login failed");
        tokio::time::sleep(FAILED_LOGIN_PAUSE).await;
        return Ok(pages::login(
            Some("Wrong user or password."),
            StatusCode::UNAUTHORIZED,
        ));
    }
    pages.throttle.succeeded(address);
    let live = pages.sessions.start(app.now_ms());
    tracing::info!(%address, "admin logged in");
    let mut response = redirect("/admin/");
    response
        .headers_mut()
        .insert(header::SET_COOKIE, cookie_header(app, &live.id, None));
    Ok(response)
}

/// The session id in a `Cookie` header.
fn session_id(cookie: &str) -> Option<&str> {
    cookie
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// The session cookie: `HttpOnly; SameSite=Strict; Path=/admin`, and `Secure` when the public
/// address is `https://`. `max_age` 0 deletes it.
fn cookie_header(app: &App, id: &str, max_age: Option<u32>) -> HeaderValue {
    let mut text = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/admin");
    if app.settings.public_url().starts_with("https://") {
        text.push_str("; Secure");
    }
    if let Some(age) = max_age {
        let _ = write!(text, "; Max-Age={age}");
    }
    HeaderValue::from_str(&text).expect("a cookie of hex digits is a valid header")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        assert_eq!(session_id("a=1; tracker_admin=abc; b=2"), Some("abc"));
        assert_eq!(session_id("tracker_admin="), None);
        assert_eq!(session_id("xtracker_admin=abc"), None);
        assert_eq!(session_id("a=1"), None);
    }
}
