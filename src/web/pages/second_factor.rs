//! The login's second step (`/admin/login/code`), after the password and before any session:
//! the code of the user's authenticator app or a recovery code, or, for a user an owner
//! requires to have one and who has none, setting it up first. Also what setting one up shows
//! wherever it is done (here, and on the account page): the QR code, drawn here as SVG, and
//! the secret as text; and the recovery codes, shown once.

use askama::Template;
use warp::http::{StatusCode, header};
use warp::reply::Response;

use super::{Frame, html};
use crate::app::audit::Change;
use crate::app::second_factor::Passed;
use crate::domain::totp;
use crate::error::{Code, Error};
use crate::surface::Body;
use crate::web::context::{
    Anonymous, HALF_LOGIN_COOKIE, LOGIN_PATH, client_address, cookie_header, cookie_value,
    read_form, redirect, unread,
};
use crate::web::session::{Waiting, same_token};

/// What setting up a second factor shows: the QR code of its `otpauth://` address and the
/// secret as text, for an app that cannot scan.
pub(in crate::web) struct Enrollment {
    /// An `<svg>` element drawn from the address, with nothing of the user's in it as text.
    pub qr_svg: String,
    /// The secret in base32, in groups of four.
    pub secret: String,
}

impl Enrollment {
    pub(in crate::web) fn of(secret: &[u8], name: &str) -> Enrollment {
        let uri = totp::otpauth_uri(secret, name);
        let qr_svg = qrcode::QrCode::new(uri.as_bytes())
            .map(|code| {
                let drawn = code
                    .render::<qrcode::render::svg::Color>()
                    .min_dimensions(200, 200)
                    .build();
                // The XML declaration has no place inside an HTML page.
                drawn
                    .find("<svg")
                    .map_or(drawn.clone(), |at| drawn[at..].to_owned())
            })
            .unwrap_or_default();
        let text = totp::secret_text(secret);
        let groups: Vec<&str> = text
            .as_bytes()
            .chunks(4)
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
            .collect();
        Enrollment {
            qr_svg,
            secret: groups.join(" "),
        }
    }
}

#[derive(Template)]
#[template(path = "admin/second_factor.html")]
struct CodePage<'a> {
    frame: Frame<'a>,
    /// The half-login's form token.
    token: &'a str,
    /// Set when the user sets their second factor up here.
    enrollment: Option<Enrollment>,
}

/// The page of recovery codes, shown once, after a second factor is turned on.
#[derive(Template)]
#[template(path = "admin/recovery_codes.html")]
pub(super) struct RecoveryCodes<'a> {
    pub(super) frame: Frame<'a>,
    pub(super) codes: Vec<String>,
    /// Where "Continue" leads.
    pub(super) next: String,
}

fn blank_frame<'a>(error: Option<String>) -> Frame<'a> {
    Frame {
        csrf: None,
        user: None,
        space: None,
        page: None,
        error,
        refused: None,
    }
}

fn code_page(waiting: &Waiting, status: StatusCode, error: Option<String>) -> Response {
    html(
        status,
        &CodePage {
            frame: blank_frame(error),
            token: &waiting.csrf,
            enrollment: waiting
                .enrolling
                .as_deref()
                .map(|secret| Enrollment::of(secret, &waiting.user)),
        },
    )
}

/// The half-login the request's cookie names, while it lasts.
fn waiting_of(anonymous: &Anonymous<'_>) -> Option<Waiting> {
    let id = anonymous
        .request
        .cookie
        .as_deref()
        .and_then(|c| cookie_value(c, HALF_LOGIN_COOKIE))?;
    anonymous
        .pages
        .half_logins
        .resume(id, anonymous.app.now_ms())
}

/// Back to the password, saying why.
fn start_again(anonymous: &Anonymous<'_>, why: &str) -> Response {
    let mut response = super::login::page(
        anonymous.app,
        anonymous.pages,
        Some(why),
        StatusCode::UNAUTHORIZED,
    );
    response.headers_mut().append(
        header::SET_COOKIE,
        cookie_header(anonymous.app, HALF_LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
    );
    response
}

/// `GET /admin/login/code`: the code's form, or setting the second factor up.
pub(in crate::web) async fn show(anonymous: &Anonymous<'_>, _: Body) -> Result<Response, Error> {
    Ok(match waiting_of(anonymous) {
        Some(waiting) => code_page(&waiting, StatusCode::OK, None),
        None => redirect(LOGIN_PATH),
    })
}

/// `POST /admin/login/code`: the code (or, setting up, the new secret's first code), then the
/// session.
pub(in crate::web) async fn check(
    anonymous: &Anonymous<'_>,
    body: Body,
) -> Result<Response, Error> {
    let app = anonymous.app;
    let Some(waiting) = waiting_of(anonymous) else {
        return Ok(unread(start_again(
            anonymous,
            "The login took too long, or its code was wrong too often; log in again.",
        )));
    };
    let form = read_form(body).await?;
    if !same_token(form.get("csrf").unwrap_or(""), &waiting.csrf) {
        return Ok(start_again(
            anonymous,
            "This form did not come from this login; log in again.",
        ));
    }
    let typed = form.get("code").unwrap_or("").trim();
    let address = Some(client_address(anonymous.request));
    let audit = |action: &str| Change {
        who: &waiting.user,
        address,
        action: action.to_owned(),
        space: None,
        subject: None,
    };
    if let Some(secret) = waiting.enrolling.clone() {
        return match app
            .turn_on_second_factor(&waiting.user, secret, typed)
            .await
        {
            Ok(codes) => {
                anonymous.pages.half_logins.end(&waiting.id);
                app.record_audit(audit("second factor on")).await;
                let live = super::login::complete(anonymous, &waiting.user, waiting.user_tag).await;
                let next = match app.user(&waiting.user).await? {
                    Some(user) => super::login::first_page(app, &user).await,
                    None => "/admin/".to_owned(),
                };
                let mut response = html(
                    StatusCode::OK,
                    &RecoveryCodes {
                        frame: blank_frame(None),
                        codes,
                        next,
                    },
                );
                for cookie in landing_cookies(app, &live.id) {
                    response.headers_mut().append(header::SET_COOKIE, cookie);
                }
                Ok(response)
            }
            Err(e) if e.code == Code::InvalidField => {
                Ok(wrong(anonymous, &waiting, e.message).await)
            }
            Err(e) => Err(e),
        };
    }
    match app.check_second_factor(&waiting.user, typed).await? {
        Some(passed) => {
            anonymous.pages.half_logins.end(&waiting.id);
            if let Passed::Recovery { left } = passed {
                app.record_audit(audit(&format!("recovery code used ({left} left)")))
                    .await;
            }
            let live = super::login::complete(anonymous, &waiting.user, waiting.user_tag).await;
            let Some(user) = app.user(&waiting.user).await? else {
                return Ok(redirect(LOGIN_PATH));
            };
            Ok(super::login::landing(app, &user, &live.id).await)
        }
        None => Ok(wrong(
            anonymous,
            &waiting,
            "This code is wrong or was used already; type the one your app shows now, or a \
             recovery code."
                .to_owned(),
        )
        .await),
    }
}

/// A wrong code's answer, after its audit entry: the form again while tries are left.
async fn wrong(anonymous: &Anonymous<'_>, waiting: &Waiting, why: String) -> Response {
    let address = client_address(anonymous.request);
    anonymous.pages.warn(
        anonymous.app,
        address,
        "admin login: a wrong second factor code",
        &anonymous.request.path,
    );
    anonymous
        .app
        .record_audit(Change {
            who: &waiting.user,
            address: Some(address),
            action: "second factor failed".to_owned(),
            space: None,
            subject: None,
        })
        .await;
    if anonymous.pages.half_logins.wrong_code(&waiting.id) {
        code_page(waiting, StatusCode::UNAUTHORIZED, Some(why))
    } else {
        start_again(anonymous, "Too many wrong codes; log in again.")
    }
}

/// The cookies of a login that has just completed: the session's, the half-login's deleted.
fn landing_cookies(app: &crate::app::App, session_id: &str) -> [warp::http::HeaderValue; 2] {
    [
        cookie_header(app, crate::web::context::COOKIE, session_id, "/admin", None),
        cookie_header(app, HALF_LOGIN_COOKIE, "", LOGIN_PATH, Some(0)),
    ]
}
