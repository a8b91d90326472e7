//! The login page: its form (with the login form's own token and cookie), the login with its
//! throttle and its one password check at a time, and the logout. A user with a second factor,
//! or whom an owner requires to set one up, is handed from here to its own form
//! (`second_factor.rs`), without a session; a login is complete, with its session, its audit
//! entry and its address's attempts cleared, in [`complete`] only.

use std::time::Duration;

use askama::Template;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use super::{Frame, html};
use crate::app::App;
use crate::app::audit::Change;
use crate::domain::totp;
use crate::domain::user::User;
use crate::error::{Code, Error};
use crate::surface::Body;
use crate::web::context::Anonymous;
use crate::web::context::{
    AdminPages, CODE_PATH, COOKIE, Ctx, HALF_LOGIN_COOKIE, LOGIN_COOKIE, LOGIN_PATH,
    client_address, cookie_header, cookie_value, read_form, redirect, unread,
};
use crate::web::session;

/// How long a failed login waits before it is answered.
const FAILED_LOGIN_PAUSE: Duration = Duration::from_secs(1);

#[derive(Template)]
#[template(path = "admin/login.html")]
struct Login<'a> {
    frame: Frame<'a>,
    /// The login form's token (`session::LoginForms`).
    token: &'a str,
}

/// The login page, with a new login form pair: its token in the form, its cookie set.
pub(in crate::web) fn page(
    app: &App,
    pages: &AdminPages,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let form = pages.login_forms.issue(app.now_ms());
    let mut response = html(
        status,
        &Login {
            token: &form.field,
            frame: Frame {
                csrf: None,
                user: None,
                space: None,
                page: None,
                error: error.map(str::to_owned),
                refused: None,
            },
        },
    );
    let max_age = u32::try_from(session::LOGIN_FORM_MS / 1000).unwrap_or(u32::MAX);
    response.headers_mut().append(
        header::SET_COOKIE,
        cookie_header(app, LOGIN_COOKIE, &form.cookie, LOGIN_PATH, Some(max_age)),
    );
    response
}

/// `GET /admin/login`.
pub(in crate::web) async fn show(anonymous: &Anonymous<'_>, _: Body) -> Result<Response, Error> {
    Ok(page(anonymous.app, anonymous.pages, None, StatusCode::OK))
}

/// `POST /admin/login`: the form's cookie (from the head, before the body is read), the form's
/// token, the throttle, then the password check (one at a time), then a session.
pub(in crate::web) async fn log_in(
    anonymous: &Anonymous<'_>,
    body: Body,
) -> Result<Response, Error> {
    let (app, pages, request) = (anonymous.app, anonymous.pages, anonymous.request);
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
        page(
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
    let name = form.get("user").unwrap_or("").to_owned();
    let pause_ms = match pages.throttle.admit(address, &name, app.now_ms()) {
        Ok(pause_ms) => pause_ms,
        Err(wait_s) => {
            pages.warn(
                app,
                address,
                "admin login refused: too many attempts",
                &request.path,
            );
            let mut response = page(
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
    // The permit goes with the check into its own task: a client that hangs up mid-check
    // drops this future, but the check still holds the permit until it is done, so no more
    // than one argon2id check ever runs, however many requests come and go.
    let permit = pages
        .checking
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Error::new(Code::Unavailable, "the server is stopping"))?;
    let (checker, password) = (app.clone(), form.get("password").unwrap_or("").to_owned());
    let checked_name = name.clone();
    let user = tokio::spawn(async move {
        let _permit = permit;
        checker.check_login(&checked_name, password).await
    })
    .await
    .map_err(|e| Error::new(Code::Internal, format!("checking the password failed: {e}")))??;
    let Some(user) = user else {
        return Ok(failed(anonymous, address, &name).await);
    };
    if user.second_factor.is_some() || app.second_factor_required().await? {
        let enrolling = user.second_factor.is_none().then(totp::new_secret);
        let waiting =
            pages
                .half_logins
                .start(app.now_ms(), &user.name, user.session_tag(), enrolling);
        let mut response = redirect(CODE_PATH);
        let headers = response.headers_mut();
        headers.insert(
            header::SET_COOKIE,
            cookie_header(app, HALF_LOGIN_COOKIE, &waiting.id, LOGIN_PATH, None),
        );
        headers.append(
            header::SET_COOKIE,
            cookie_header(app, LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
        );
        return Ok(response);
    }
    let live = complete(anonymous, &user.name, user.session_tag()).await;
    Ok(landing(app, &user, &live.id).await)
}

/// A login complete (its password, and its second factor where it has one): its address's
/// attempts cleared, its session started (tied to `user_tag`, the user as checked, so that a
/// change of password during the login ends it at its first request), its audit entry.
pub(in crate::web) async fn complete(
    anonymous: &Anonymous<'_>,
    user: &str,
    user_tag: u128,
) -> session::Live {
    let (app, pages) = (anonymous.app, anonymous.pages);
    let address = client_address(anonymous.request);
    pages.throttle.succeeded(address, user);
    let live = pages.sessions.start(app.now_ms(), user, user_tag);
    tracing::info!(%address, user, "admin logged in");
    app.record_audit(Change {
        who: user,
        address: Some(address),
        action: "login".to_owned(),
        space: None,
        subject: None,
    })
    .await;
    live
}

/// A failed login's answer, after its warning, its audit entry and a pause.
async fn failed(anonymous: &Anonymous<'_>, address: std::net::IpAddr, name: &str) -> Response {
    let (app, pages) = (anonymous.app, anonymous.pages);
    pages.warn(app, address, "admin login failed", &anonymous.request.path);
    // A name no user has is not kept: it may be a password typed in the wrong field.
    let known = app.user(name).await.ok().flatten().is_some();
    app.record_audit(Change {
        who: if known { name } else { "(no such user)" },
        address: Some(address),
        action: "login failed".to_owned(),
        space: None,
        subject: None,
    })
    .await;
    tokio::time::sleep(FAILED_LOGIN_PAUSE).await;
    page(
        app,
        pages,
        Some("Wrong user or password."),
        StatusCode::UNAUTHORIZED,
    )
}

/// A login's answer: to its first page, with the session's cookie, the login form's deleted.
pub(in crate::web) async fn landing(app: &App, user: &User, session_id: &str) -> Response {
    let mut response = redirect("/admin/");
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(&first_page(app, user).await) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(
        header::SET_COOKIE,
        cookie_header(app, COOKIE, session_id, "/admin", None),
    );
    // The login form's cookie, and a half-login's, have done their work.
    headers.append(
        header::SET_COOKIE,
        cookie_header(app, LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
    );
    headers.append(
        header::SET_COOKIE,
        cookie_header(app, HALF_LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
    );
    response
}

/// `POST /admin/logout`: the session ends, and its cookie with it.
pub(in crate::web) async fn log_out(ctx: &Ctx<'_>) -> Result<Response, Error> {
    ctx.pages.sessions.end(&ctx.live.id);
    let mut response = redirect(LOGIN_PATH);
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie_header(ctx.app, COOKIE, "", "/admin", Some(0)),
    );
    Ok(response)
}

/// Where a login lands: the space's dashboard when the user has one space, else the spaces to
/// choose from. (Space names are a-z, 0-9 and '-': a path segment as they are.)
pub(in crate::web) async fn first_page(app: &App, user: &User) -> String {
    match app.spaces().await {
        Ok(spaces) => {
            let mut theirs = spaces.iter().filter(|s| user.sees_space(&s.space));
            match (theirs.next(), theirs.next()) {
                (Some(only), None) => format!("/admin/spaces/{}/dashboard", only.space),
                _ => "/admin/".to_owned(),
            }
        }
        Err(_) => "/admin/".to_owned(),
    }
}
