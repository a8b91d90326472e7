//! The admin page: the web page under `/admin/` (`docs/api.md#admin-page`).
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
//! | GET, POST | `/admin/spaces/<space>/settings`   | the space's settings          |
//! | GET, POST | `/admin/spaces/<space>/postback`   | the postback URL builder      |
//! | GET, POST | `/admin/spaces/<space>/links`      | links, create a link          |
//! | POST   | `/admin/spaces/<space>/links/<slug>/delete` | delete a link           |
//! | GET, POST | `/admin/spaces/<space>/destinations` | destinations, create one, the delivery log |
//! | POST   | `/admin/spaces/<space>/destinations/<name>/test`, `retry`, `delete` | test one, retry its dead deliveries, remove it |
//! | GET    | `/admin/spaces/<space>/events`        | the feed, newest first        |
//! | GET    | `/admin/spaces/<space>/dashboard`     | totals, funnel, chart, table; with `campaign=`, that campaign's drill-down |
//! | GET    | `/admin/spaces/<space>/stats`         | stats by campaign, link, day  |
//! | GET, POST | `/admin/spaces/<space>/costs`      | costs of a range, import a CSV file |
//! | GET    | `/admin/spaces/<space>/costs/template.csv` | the CSV's header row, to fill in |
//! | GET    | `/admin/spaces/<space>/rejections`    | the rejection log             |

mod pages;
pub mod session;

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::app::App;
use crate::domain::input::Query;
use crate::error::{Code, Error};
use crate::surface::Call;
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
/// How long a failed login waits before it is answered.
const FAILED_LOGIN_PAUSE: Duration = Duration::from_secs(1);

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

/// What a page handler is given: the app, the logged-in session, the request's form or query.
struct Ctx<'a> {
    app: &'a App,
    live: Live,
    form: Query,
    query: &'a Query,
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
async fn read_form(body: crate::surface::Body) -> Result<Query, Error> {
    let body = body.read(MAX_FORM_BYTES).await?;
    Ok(Query::parse(std::str::from_utf8(&body).unwrap_or("")))
}

/// An upload's fields: a `multipart/form-data` form read whole within [`MAX_UPLOAD_BYTES`],
/// each field's text under its name (a file's too, which must be UTF-8). Another form is read
/// as [`read_form`] reads it.
///
/// The parser is `multer`, the one warp's `multipart` feature wraps: warp's filter takes the
/// body itself, but here the body is read only after the head has shown a session.
async fn read_upload(
    body: crate::surface::Body,
    content_type: Option<&str>,
) -> Result<Query, Error> {
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

// The session and form checks, then one match arm per page: the admin page's routing table.
#[allow(clippy::too_many_lines)]
async fn route(
    app: &Arc<App>,
    pages: &AdminPages,
    request: &Request,
    body: crate::surface::Body,
) -> Result<Response, Error> {
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
        ["login"] if get => return Ok(login_page(app, pages, None, StatusCode::OK)),
        ["login"] if post => return login(app, pages, request, body).await,
        _ => {}
    }
    let now = app.now_ms();
    let tag = session::password_tag(app.admin_password().await?.as_deref());
    let live = request
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, COOKIE))
        .and_then(|id| pages.sessions.resume(id, now, tag));
    // A page of a space keeps the space's menu, also when it shows an error.
    let space = match segments.as_slice() {
        ["spaces", space, ..] => Some(*space),
        _ => None,
    };
    let Some(live) = live else {
        return Ok(unread(if get {
            redirect(LOGIN_PATH)
        } else {
            login_page(
                app,
                pages,
                Some("Your session has ended; log in again."),
                StatusCode::FORBIDDEN,
            )
        }));
    };
    let form = if post {
        let read = if matches!(segments.as_slice(), ["spaces", _, "costs"]) {
            read_upload(body, request.content_type.as_deref()).await
        } else {
            read_form(body).await
        };
        match read {
            Ok(form) => form,
            Err(e) => return Ok(pages::error_page(&e, space, Some(&live.csrf))),
        }
    } else {
        Query::parse("")
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
    if matches!(segments.as_slice(), ["logout"]) && post {
        pages.sessions.end(&live.id);
        let mut response = redirect(LOGIN_PATH);
        response.headers_mut().insert(
            header::SET_COOKIE,
            cookie_header(app, COOKIE, "", "/admin", Some(0)),
        );
        return Ok(response);
    }
    let ctx = Ctx {
        app,
        live,
        form,
        query: &request.query,
    };
    let result = match segments.as_slice() {
        [""] if get => pages::spaces(&ctx, None).await,
        ["spaces"] if post => pages::create_space(&ctx).await,
        ["spaces", space] if get => pages::keys(&ctx, space, None, None).await,
        ["spaces", space, action @ ("rotate" | "revoke")] if post => {
            pages::change_keys(&ctx, space, action).await
        }
        ["spaces", space, "settings"] if get || post => pages::settings(&ctx, space, post).await,
        ["spaces", space, "postback"] if get || post => pages::postback(&ctx, space, post).await,
        ["spaces", space, "links"] if get => pages::links(&ctx, space, None).await,
        ["spaces", space, "links"] if post => pages::create_link(&ctx, space).await,
        ["spaces", space, "links", slug, "delete"] if post => {
            pages::delete_link(&ctx, space, slug).await
        }
        ["spaces", space, "destinations", rest @ ..] => {
            pages::destinations_route(&ctx, space, rest, post).await
        }
        ["spaces", space, "events"] if get => pages::events(&ctx, space).await,
        ["spaces", space, "dashboard"] if get => pages::dashboard(&ctx, space).await,
        ["spaces", space, "stats"] if get => pages::stats(&ctx, space).await,
        ["spaces", space, "costs"] if get => pages::costs(&ctx, space).await,
        ["spaces", space, "costs", "template.csv"] if get => {
            pages::costs_template(&ctx, space).await
        }
        ["spaces", space, "costs"] if post => pages::import_costs(&ctx, space).await,
        ["spaces", space, "rejections"] if get => pages::rejections(&ctx, space).await,
        _ => Err(Error::new(Code::NotFound, "there is no such admin page")),
    };
    Ok(result.unwrap_or_else(|e| pages::error_page(&e, space, Some(&ctx.live.csrf))))
}

/// The login page, with a new login form pair: its token in the form, its cookie set.
fn login_page(app: &App, pages: &AdminPages, error: Option<&str>, status: StatusCode) -> Response {
    let form = pages.login_forms.issue(app.now_ms());
    let mut response = pages::login(&form.field, error, status);
    let max_age = u32::try_from(session::LOGIN_FORM_MS / 1000).unwrap_or(u32::MAX);
    response.headers_mut().append(
        header::SET_COOKIE,
        cookie_header(app, LOGIN_COOKIE, &form.cookie, LOGIN_PATH, Some(max_age)),
    );
    response
}

/// The client's address, or the unspecified one where no connection stands behind the request.
fn client_address(request: &Request) -> IpAddr {
    request.client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// `POST /admin/login`: the form's cookie (from the head, before the body is read), the form's
/// token, the throttle, then the password check (one at a time), then a session.
async fn login(
    app: &Arc<App>,
    pages: &AdminPages,
    request: &Request,
    body: crate::surface::Body,
) -> Result<Response, Error> {
    let address = client_address(request);
    let login_cookie = request
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, LOGIN_COOKIE));
    let expired = || {
        pages.warn(
            app,
            address,
            "admin login refused: the form's token is missing, wrong or old",
            &request.path,
        );
        login_page(
            app,
            pages,
            Some("This login form has expired or did not come from this page; log in again."),
            StatusCode::FORBIDDEN,
        )
    };
    if !pages.login_forms.accepts_cookie(login_cookie, app.now_ms()) {
        return Ok(unread(expired()));
    }
    let form = read_form(body).await?;
    if !pages
        .login_forms
        .accepts(login_cookie, form.get("csrf"), app.now_ms())
    {
        return Ok(expired());
    }
    let pause_ms = match pages.throttle.admit(address, app.now_ms()) {
        Ok(pause_ms) => pause_ms,
        Err(wait_s) => {
            pages.warn(
                app,
                address,
                "admin login refused: too many attempts",
                &request.path,
            );
            let mut response = login_page(
                app,
                pages,
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
    };
    if pause_ms > 0 {
        // Past the overall bound, from an address that has not failed: checked, but slowly.
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
    // The hash the session will be tied to, read before the check: a password changed during it
    // ends the session at its first request rather than leaving it tied to the new one.
    let tag = session::password_tag(app.admin_password().await?.as_deref());
    let matches = form.get("user") == Some("admin") && {
        // The permit goes with the check into its own task: a client that hangs up mid-check
        // drops this future, but the check still holds the permit until it is done, so no more
        // than one argon2id check ever runs, however many requests come and go.
        let permit = pages
            .checking
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::new(Code::Unavailable, "the server is stopping"))?;
        let (app, password) = (app.clone(), form.get("password").unwrap_or("").to_owned());
        tokio::spawn(async move {
            let _permit = permit;
            app.check_password(password).await
        })
        .await
        .map_err(|e| Error::new(Code::Internal, format!("checking the password failed: {e}")))??
    };
    if !matches {
        pages.warn(app, address, "admin login failed", &request.path);
        tokio::time::sleep(FAILED_LOGIN_PAUSE).await;
        return Ok(login_page(
            app,
            pages,
            Some("Wrong user or password."),
            StatusCode::UNAUTHORIZED,
        ));
    }
    pages.throttle.succeeded(address);
    let live = pages.sessions.start(app.now_ms(), tag);
    tracing::info!(%address, "admin logged in");
    let mut response = redirect("/admin/");
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(&first_page(app).await) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(
        header::SET_COOKIE,
        cookie_header(app, COOKIE, &live.id, "/admin", None),
    );
    // The login form's cookie has done its work.
    headers.append(
        header::SET_COOKIE,
        cookie_header(app, LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
    );
    Ok(response)
}

/// The value of cookie `name` in a `Cookie` header; an empty one counts as none.
fn cookie_value<'a>(cookie: &'a str, name: &str) -> Option<&'a str> {
    cookie
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// A cookie of the admin page: `HttpOnly; SameSite=Strict` on `path`, and `Secure` when the
/// public address is `https://`. `max_age` 0 deletes it; none makes it last as long as the
/// browser runs (the session's own expiry is the server's).
fn cookie_header(
    app: &App,
    name: &str,
    value: &str,
    path: &str,
    max_age: Option<u32>,
) -> HeaderValue {
    let mut text = format!("{name}={value}; HttpOnly; SameSite=Strict; Path={path}");
    if app.settings.public_url().starts_with("https://") {
        text.push_str("; Secure");
    }
    if let Some(age) = max_age {
        let _ = write!(text, "; Max-Age={age}");
    }
    HeaderValue::from_str(&text).expect("a cookie of digits, dots and hex is a valid header")
}
/// Where a login lands: the space's dashboard when there is one space, else the spaces to
/// choose from. (Space names are a-z, 0-9 and '-': a path segment as they are.)
async fn first_page(app: &App) -> String {
    match app.spaces().await {
        Ok(spaces) if spaces.len() == 1 => format!("/admin/spaces/{}/dashboard", spaces[0].space),
        _ => "/admin/".to_owned(),
    }
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
}
