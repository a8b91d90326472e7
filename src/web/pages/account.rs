//! The account page (`/admin/account`, every user's own): their name and role, and their
//! second factor: set up (the QR code and key of a secret the session keeps until a code of it
//! turns it on, then the recovery codes, once), or turned off with a current code.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::second_factor::{Enrollment, RecoveryCodes};
use super::{Frame, frame_of, html};
use crate::domain::totp;
use crate::error::{Code, Error};
use crate::web::context::Ctx;

#[derive(Template)]
#[template(path = "admin/account.html")]
struct AccountPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    role: &'static str,
    /// Recovery codes left, when the second factor is on.
    recovery_left: Option<usize>,
    /// Set while the second factor is off: what setting it up shows.
    enrollment: Option<Enrollment>,
    required: bool,
}

/// `GET /admin/account`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let user = &ctx.user;
    let enrollment = match &user.second_factor {
        Some(_) => None,
        None => ctx
            .pages
            .sessions
            .enrolling(&ctx.live.id, totp::new_secret)
            .map(|secret| Enrollment::of(&secret, &user.name)),
    };
    Ok(html(
        StatusCode::OK,
        &AccountPage {
            frame: frame_of(ctx),
            name: &user.name,
            role: user.role.as_str(),
            recovery_left: user.second_factor.as_ref().map(|f| f.recovery.len()),
            enrollment,
            required: ctx.app.second_factor_required().await?,
        },
    ))
}

fn code_error(message: &str) -> Error {
    Error::field(Code::InvalidField, "code", message)
}

/// A wrong code's audit entry (the form's own entry is written only when it succeeds).
async fn record_failure(ctx: &Ctx<'_>) {
    ctx.app
        .record_audit(crate::app::audit::Change {
            who: &ctx.user.name,
            address: None,
            action: "second factor failed".to_owned(),
            space: None,
            subject: None,
        })
        .await;
}

/// `POST /admin/account/second-factor`: turned on by a code of the secret the page showed;
/// the recovery codes shown once.
pub(in crate::web) async fn turn_on(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let Some(secret) = ctx.pages.sessions.enrolling(&ctx.live.id, totp::new_secret) else {
        return Err(code_error("your session has ended; log in again"));
    };
    let typed = ctx.form.get("code").unwrap_or("").trim();
    let codes = match ctx
        .app
        .turn_on_second_factor(&ctx.user.name, secret, typed)
        .await
    {
        Ok(codes) => codes,
        Err(e) => {
            if e.field == Some("code") {
                record_failure(ctx).await;
            }
            return Err(e);
        }
    };
    ctx.pages.sessions.enrolled(&ctx.live.id);
    Ok(html(
        StatusCode::OK,
        &RecoveryCodes {
            frame: frame_of(ctx),
            codes,
            next: "/admin/account".to_owned(),
        },
    ))
}

/// `POST /admin/account/second-factor/off`: with a current code or a recovery code, unless an
/// owner requires it of everyone.
pub(in crate::web) async fn turn_off(ctx: &Ctx<'_>) -> Result<Response, Error> {
    if ctx.app.second_factor_required().await? {
        return Err(Error::field(
            Code::Conflict,
            "code",
            "an owner requires a second factor of every user, so it stays on",
        ));
    }
    let typed = ctx.form.get("code").unwrap_or("").trim();
    if ctx
        .app
        .check_second_factor(&ctx.user.name, typed)
        .await?
        .is_none()
    {
        record_failure(ctx).await;
        return Err(code_error(
            "this code is wrong or was used already; type the one your app shows now, or a \
             recovery code",
        ));
    }
    ctx.app.turn_off_second_factor(&ctx.user.name).await?;
    Ok(super::super::context::redirect("/admin/account"))
}
