//! What the admin page's router and every page share, below both: the admin page's state, a
//! request as its head has it, what a page handler is given ([`Ctx`]) or a path served without
//! a session ([`Anonymous`]), reading a form or an upload, the cookies, and the space's menu
//! the router publishes from its table at start.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, OnceLock};

use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use super::session::{HalfLogins, Live, LoginForms, LoginThrottle, QuietWarnings, Sessions};
use crate::app::App;
use crate::domain::input::Query;
use crate::domain::user::{Access, User};
use crate::error::{Code, Error};

/// The values of a path's `{name}` segments, by name.
pub(super) type Params<'p> = Vec<(&'static str, &'p str)>;

/// The space's menu: each page's label and path, in the table's order.
pub(super) type Menu = &'static [(&'static str, &'static str)];

/// The least access a method on a path of the table asks for.
pub(super) type Rule = fn(&Method, &str) -> Access;

static MENU: OnceLock<Menu> = OnceLock::new();
static RULE: OnceLock<Rule> = OnceLock::new();

/// Publishes the space's menu and the rule of who reaches each page; the router does, from its
/// tables, before it serves a page (the tables name the pages, so the pages are handed them
/// rather than ask the tables), so a page shows a user only the links and forms they may use.
pub(super) fn publish_menu(menu: Menu, rule: Rule) {
    MENU.get_or_init(|| menu);
    RULE.get_or_init(|| rule);
}

/// What `method` on `path` (as the table writes it) asks for; an owner until it is published.
pub(super) fn access_of(method: &Method, path: &str) -> Access {
    RULE.get().map_or(Access::Own, |rule| rule(method, path))
}

/// The space's menu, once published.
pub(super) fn menu() -> Menu {
    MENU.get().copied().unwrap_or(&[])
}

/// What a path served without a session is given.
pub(super) struct Anonymous<'a> {
    pub app: &'a Arc<App>,
    pub pages: &'a AdminPages,
    pub request: &'a Request,
}

/// The session cookie's name.
pub(super) const COOKIE: &str = "tracker_admin";
/// The login form's cookie (`session::LoginForms`), sent only to `/admin/login`.
pub(super) const LOGIN_COOKIE: &str = "tracker_login";
pub(super) const LOGIN_PATH: &str = "/admin/login";
/// A half-login's cookie (`session::HalfLogins`), sent only below `/admin/login`.
pub(super) const HALF_LOGIN_COOKIE: &str = "tracker_second";
/// The login's second step: the code of the second factor, or setting one up.
pub(super) const CODE_PATH: &str = "/admin/login/code";
/// The largest form accepted.
pub const MAX_FORM_BYTES: u64 = 16 * 1024;
/// The largest upload (the costs page's CSV file, with the rest of its form): some 20,000 rows
/// of Meta's export, sent well within `body_timeout` from a phone; a larger file goes in with
/// `tracker costs import`, or split.
pub const MAX_UPLOAD_BYTES: u64 = 2 * 1024 * 1024;

/// The admin page's state: sessions, the login form's key, the login throttle, the one permit
/// to run a password check (so that concurrent logins queue instead of taking every core), and
/// the warnings any client can cause, written once a minute per address.
pub struct AdminPages {
    pub(super) sessions: Sessions,
    pub(super) half_logins: HalfLogins,
    pub(super) login_forms: LoginForms,
    pub(super) throttle: LoginThrottle,
    pub(super) checking: Arc<tokio::sync::Semaphore>,
    pub(super) warnings: QuietWarnings,
}

impl Default for AdminPages {
    fn default() -> AdminPages {
        AdminPages {
            sessions: Sessions::default(),
            half_logins: HalfLogins::default(),
            login_forms: LoginForms::default(),
            throttle: LoginThrottle::default(),
            checking: Arc::new(tokio::sync::Semaphore::new(1)),
            warnings: QuietWarnings::default(),
        }
    }
}

/// One request to the admin page, as its head has it: the body is read only once the head
/// shows a session (or, for a login, the login form's cookie).
pub(super) struct Request {
    pub(super) method: Method,
    /// The whole path, `/admin/...`.
    pub(super) path: String,
    pub(super) query: Query,
    pub(super) cookie: Option<String>,
    pub(super) content_type: Option<String>,
    pub(super) client: Option<IpAddr>,
}

/// What a page handler is given: the app, the admin page's state, the logged-in session and its
/// user, the request's form or query, the page with its path's values, and a form of the page
/// that was just refused.
pub(super) struct Ctx<'a> {
    pub(super) app: &'a App,
    pub(super) pages: &'a AdminPages,
    pub(super) live: Live,
    pub(super) user: User,
    pub(super) form: Query,
    pub(super) query: &'a Query,
    pub(super) page: &'static str,
    pub(super) params: Params<'a>,
    pub(super) refused: Option<Refused>,
}

/// A form that was refused, for its page to show again as it was filled in, the error beside
/// the field at fault: where it was posted (the whole path), what was typed, and why.
pub(super) struct Refused {
    pub(super) action: String,
    pub(super) form: Query,
    pub(super) error: Error,
}

impl Refused {
    /// Whether it was posted to `form`: a path below the space's (`links`,
    /// `destinations/crm/change`), or below `/admin/` (`spaces`) on a page of no space.
    pub(super) fn posted_to(&self, space: Option<&str>, form: &str) -> bool {
        let below = match space {
            Some(space) => self
                .action
                .strip_prefix("/admin/spaces/")
                .and_then(|rest| rest.strip_prefix(space))
                .and_then(|rest| rest.strip_prefix('/')),
            None => self.action.strip_prefix("/admin/"),
        };
        below == Some(form)
    }
}

impl Ctx<'_> {
    /// The value of the page path's `{name}` segment, as it came (not percent-decoded).
    pub(super) fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, value)| value)
    }
}

/// A form's fields, read from the body within [`MAX_FORM_BYTES`].
pub(super) async fn read_form(body: crate::surface::Body) -> Result<Query, Error> {
    let body = body.read(MAX_FORM_BYTES).await?;
    Ok(Query::parse(std::str::from_utf8(&body).unwrap_or("")))
}

/// An upload's fields: a `multipart/form-data` form read whole within [`MAX_UPLOAD_BYTES`],
/// each field's text under its name (a file's too, which must be UTF-8). Another form is read
/// as [`read_form`] reads it.
///
/// The parser is `multer`, the one warp's `multipart` feature wraps: warp's filter takes the
/// body itself, but here the body is read only after the head has shown a session.
pub(super) async fn read_upload(
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
pub(super) fn unread(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

impl AdminPages {
    /// Writes warning `what` about `address`, at most once a minute per address and kind.
    pub(super) fn warn(&self, app: &App, address: IpAddr, what: &'static str, path: &str) {
        if let Some(left_out) = self.warnings.admit(address, what, app.now_ms()) {
            tracing::warn!(%address, path, left_out_since_last = left_out, "{what}");
        }
    }
}

/// The client's address, or the unspecified one where no connection stands behind the request.
pub(super) fn client_address(request: &Request) -> IpAddr {
    request.client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// The value of cookie `name` in a `Cookie` header, the first if it is there twice; an empty
/// one counts as none, and a pair that does not parse is passed over.
pub(super) fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    cookie::Cookie::split_parse(header)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .and_then(|c| c.value_raw())
        .filter(|v| !v.is_empty())
}

/// A cookie of the admin page as [`set_cookie`] writes it, `Secure` when the public address is
/// `https://`.
pub(super) fn cookie_header(
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
pub(super) fn set_cookie(
    name: &str,
    value: &str,
    path: &str,
    max_age: Option<u32>,
    secure: bool,
) -> String {
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

pub(super) fn redirect(location: &'static str) -> Response {
    let mut response = Response::new(Vec::new().into());
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    response
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
