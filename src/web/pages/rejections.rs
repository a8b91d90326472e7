//! A space's rejection log page: its last refused requests that carried one of its keys, with
//! the sentence each was refused with.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::domain::display;
use crate::error::Error;
use crate::web::context::Ctx;

/// Rejections shown.
const REJECTIONS_SHOWN: usize = 100;

struct RejectionRow {
    at: String,
    request: String,
    answer: String,
    error: String,
    query: String,
}

#[derive(Template)]
#[template(path = "admin/rejections.html")]
struct RejectionsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    /// The space's time zone, which the times are in.
    zone: String,
    rejections: Vec<RejectionRow>,
}

/// `GET .../rejections`: the last [`REJECTIONS_SHOWN`], from the same read as `GET /rejections`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let zone_name = ctx.app.space_settings(&space).await?.time_zone;
    let zone = zone_name.zone();
    let rejections = ctx
        .app
        .rejections(&space, REJECTIONS_SHOWN)
        .await?
        .into_iter()
        .map(|r| RejectionRow {
            at: display::local_time(r.at_ms, &zone),
            request: format!("{} {}", r.method, r.endpoint),
            answer: format!("{} {}", r.http_status, r.status),
            error: r.error,
            query: r.query.unwrap_or_default(),
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &RejectionsPage {
            frame,
            name: ctx.param("space"),
            zone: zone_name.as_str().to_owned(),
            rejections,
        },
    ))
}
