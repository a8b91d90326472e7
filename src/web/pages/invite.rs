//! The invitation page (`/admin/invite/{token}`): where a user invited by an owner (or reset)
//! sets their own password, before any session. The token in the address is the credential:
//! 128 random bits, usable once, for 24 hours; an unknown one is told apart from nothing and
//! costs no password hash.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, html};
use crate::app::users::INVITATION_PATH;
use crate::error::{Code, Error};
use crate::surface::Body;
use crate::web::context::{Anonymous, read_form};

#[derive(Template)]
#[template(path = "admin/invite.html")]
struct InvitePage<'a> {
    frame: Frame<'a>,
    /// The invited user's name, while the invitation is good.
    name: Option<String>,
    done: bool,
    action: &'a str,
}

fn page(
    anonymous: &Anonymous<'_>,
    status: StatusCode,
    name: Option<String>,
    done: bool,
    error: Option<String>,
) -> Response {
    html(
        status,
        &InvitePage {
            frame: Frame {
                csrf: None,
                user: None,
                space: None,
                page: None,
                error,
                refused: None,
            },
            name,
            done,
            action: &anonymous.request.path,
        },
    )
}

fn token_of<'a>(anonymous: &'a Anonymous<'_>) -> &'a str {
    anonymous
        .request
        .path
        .strip_prefix(INVITATION_PATH)
        .unwrap_or("")
}

const UNKNOWN: &str =
    "This invitation is unknown, used or more than 24 hours old; ask an owner for a new one.";

/// `GET /admin/invite/{token}`: the form, or why there is none.
pub(in crate::web) async fn show(anonymous: &Anonymous<'_>, _: Body) -> Result<Response, Error> {
    Ok(match anonymous.app.invitation(token_of(anonymous)).await? {
        Some(user) => page(anonymous, StatusCode::OK, Some(user.name), false, None),
        None => page(
            anonymous,
            StatusCode::NOT_FOUND,
            None,
            false,
            Some(UNKNOWN.to_owned()),
        ),
    })
}

/// `POST /admin/invite/{token}`: the password, set once it meets the rule and both fields agree.
pub(in crate::web) async fn set_password(
    anonymous: &Anonymous<'_>,
    body: Body,
) -> Result<Response, Error> {
    let (app, pages) = (anonymous.app, anonymous.pages);
    let token = token_of(anonymous);
    let Some(user) = app.invitation(token).await? else {
        return Ok(page(
            anonymous,
            StatusCode::NOT_FOUND,
            None,
            false,
            Some(UNKNOWN.to_owned()),
        ));
    };
    let form = read_form(body).await?;
    let password = form.get("password").unwrap_or("");
    if form.get("again") != Some(password) {
        let e = "The two passwords differ; type the same one twice.";
        return Ok(page(
            anonymous,
            StatusCode::BAD_REQUEST,
            Some(user.name),
            false,
            Some(e.to_owned()),
        ));
    }
    // One password hash at a time, as a login's check.
    let _permit = pages
        .checking
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Error::new(Code::Unavailable, "the server is stopping"))?;
    match app.accept_invitation(token, password.to_owned()).await {
        Ok(_) => Ok(page(anonymous, StatusCode::OK, None, true, None)),
        Err(e) if e.code == Code::InvalidField => Ok(page(
            anonymous,
            StatusCode::BAD_REQUEST,
            Some(user.name),
            false,
            Some(e.message),
        )),
        Err(e) => Err(e),
    }
}
