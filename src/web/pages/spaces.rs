//! The spaces page (`/admin/`): every space with its number of working keys, and the form
//! that creates one, whose new keys are shown once; with `[backup_s3]`, how the last uploads of
//! scheduled backups went.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html};
use crate::app::spaces::CreatedSpace;
use crate::domain::display;
use crate::error::Error;
use crate::web::context::Ctx;

struct SpaceRow {
    name: String,
    created: String,
    active: usize,
}

#[derive(Template)]
#[template(path = "admin/spaces.html")]
struct SpacesPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    spaces: Vec<SpaceRow>,
    created: Option<CreatedSpace>,
    uploads: Option<Uploads>,
}

/// A time on this page, which spans the spaces and their zones: in UTC, named.
fn utc(ms: u64) -> String {
    format!("{} UTC", display::local_time(ms, &jiff::tz::TimeZone::UTC))
}

/// The last uploads of scheduled backups to `[backup_s3]`, in words.
struct Uploads {
    to: String,
    last_success: String,
    /// The time and the reason of the last failure, if it is newer than the last success.
    failing: Option<(String, String)>,
}

fn uploads(ctx: &Ctx<'_>) -> Option<Uploads> {
    let s3 = ctx.app.settings.backups.as_ref()?.s3.as_ref()?;
    let last = ctx.app.metrics.backup_uploads();
    let failing = last
        .failure
        .filter(|(at, _)| last.success_ms.is_none_or(|ok| *at > ok))
        .map(|(at, why)| (utc(at), why));
    Some(Uploads {
        to: format!("s3://{}/{}", s3.bucket, s3.prefix),
        last_success: last
            .success_ms
            .map_or_else(|| "none found in the bucket yet".to_owned(), utc),
        failing,
    })
}

/// `GET /admin/`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    spaces(ctx, None).await
}

/// `POST /admin/spaces`: the same operation as `tracker space create`.
pub(in crate::web) async fn create(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let name = ctx.form.get("name").unwrap_or("");
    let created = ctx.app.create_space(name).await?;
    spaces(ctx, Some(created)).await
}

/// The spaces page, with the keys of a space just created.
async fn spaces(ctx: &Ctx<'_>, created: Option<CreatedSpace>) -> Result<Response, Error> {
    let now = ctx.app.now_ms();
    let spaces = ctx
        .app
        .spaces()
        .await?
        .into_iter()
        .filter(|s| ctx.user.sees_space(&s.space))
        .map(|s| SpaceRow {
            active: s.credentials.iter().filter(|c| c.works(now)).count(),
            created: utc(s.created_at_ms),
            name: s.space,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &SpacesPage {
            frame,
            csrf_token: &ctx.live.csrf,
            spaces,
            created,
            uploads: uploads(ctx),
        },
    ))
}
