//! The Audit page (`/admin/audit`, owners only): the audit log's newest entries, by space and
//! user as the query asks, the same entries `tracker audit` prints.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html};
use crate::domain::audit::AuditFilter;
use crate::domain::display;
use crate::error::Error;
use crate::web::context::Ctx;

struct EntryRow {
    at: String,
    who: String,
    address: String,
    action: String,
    space: String,
    subject: String,
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditPage<'a> {
    frame: Frame<'a>,
    space: String,
    user: String,
    entries: Vec<EntryRow>,
}

/// `GET /admin/audit`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let asked = |name| {
        ctx.query
            .get(name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let filter = AuditFilter {
        space: asked("space"),
        who: asked("user"),
        since_ms: None,
    };
    let (space, user) = (
        filter.space.clone().unwrap_or_default(),
        filter.who.clone().unwrap_or_default(),
    );
    let entries = ctx
        .app
        .audit(filter)
        .await?
        .into_iter()
        .map(|e| EntryRow {
            at: display::local_time(e.at_ms, &jiff::tz::TimeZone::UTC),
            who: e.who,
            address: e.address.unwrap_or_default(),
            action: e.action,
            space: e.space.unwrap_or_default(),
            subject: e.subject.unwrap_or_default(),
        })
        .collect();
    Ok(html(
        StatusCode::OK,
        &AuditPage {
            frame: frame_of(ctx),
            space,
            user,
            entries,
        },
    ))
}
