//! The Users page (`/admin/users`, owners only): every user with their role, spaces, password
//! and second factor; a user added (their invitation's address shown once), given another
//! role or spaces, reset (a new address) or removed; and whether everyone's second factor is
//! required. The same `App` methods as `tracker user`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html};
use crate::app::users::{Invited, UserSummary};
use crate::domain::user::{Role, parse_spaces};
use crate::error::Error;
use crate::web::context::Ctx;

#[derive(Template)]
#[template(path = "admin/users.html")]
struct UsersPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    users: Vec<UserSummary>,
    /// An invitation just made (a user added or reset), shown once.
    invited: Option<Invited>,
    required: bool,
}

/// The page, with an invitation just made.
async fn page(ctx: &Ctx<'_>, invited: Option<Invited>) -> Result<Response, Error> {
    Ok(html(
        StatusCode::OK,
        &UsersPage {
            frame: frame_of(ctx),
            csrf_token: &ctx.live.csrf,
            users: ctx.app.users().await?,
            invited,
            required: ctx.app.second_factor_required().await?,
        },
    ))
}

/// `GET /admin/users`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    page(ctx, None).await
}

fn role_and_spaces(ctx: &Ctx<'_>) -> Result<(Role, Vec<String>), Error> {
    let role = Role::parse(ctx.form.get("role").unwrap_or(""))?;
    Ok((role, parse_spaces(ctx.form.get("spaces").unwrap_or(""))))
}

/// `POST /admin/users`: a new user, and their invitation's address, shown once.
pub(in crate::web) async fn add(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let (role, spaces) = role_and_spaces(ctx)?;
    let name = ctx.form.get("name").unwrap_or("");
    let invited = ctx.app.add_user(name, role, spaces).await?;
    page(ctx, Some(invited)).await
}

/// `POST /admin/users/{name}/role`: another role and spaces; their sessions end.
pub(in crate::web) async fn change_role(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let (role, spaces) = role_and_spaces(ctx)?;
    ctx.app.set_role(ctx.param("name"), role, spaces).await?;
    page(ctx, None).await
}

/// `POST /admin/users/{name}/reset`: a new invitation; their password and second factor end.
pub(in crate::web) async fn reset(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let invited = ctx.app.reset_user(ctx.param("name")).await?;
    page(ctx, Some(invited)).await
}

/// `POST /admin/users/{name}/remove`: the user and their sessions end.
pub(in crate::web) async fn remove(ctx: &Ctx<'_>) -> Result<Response, Error> {
    ctx.app.remove_user(ctx.param("name")).await?;
    page(ctx, None).await
}

/// `POST /admin/users/second-factor`: everyone's second factor required (`required=on`) or
/// left to each user.
pub(in crate::web) async fn require_second_factor(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let required = ctx.form.get("required") == Some("on");
    ctx.app.require_second_factor(required).await?;
    page(ctx, None).await
}
