//! The read side (`docs/api.md#reading-the-data-back`): the feed, the follower's wait, stats and
//! the rejection log. Each needs the space's secret and answers what `app` reads through the
//! reader path.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::domain::feed::{self, FeedEvent, PageRequest};
use crate::domain::keyring::SpaceRef;
use crate::domain::rejection::Rejection;
use crate::domain::stats::{self, Dimension, GroupStats, Grouping};
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The answer of `GET /events` and `GET /events/wait`: a page of the feed.
#[derive(Serialize, JsonSchema)]
pub struct FeedAnswer {
    pub ok: Success,
    pub events: Vec<FeedEvent>,
    /// Where the following page starts (its `after`); `null` when this page reached the end of
    /// what is committed now (resume then from the last event's `inbox_id`).
    #[schemars(pattern(r"^[0-9]+$"))]
    pub next: Option<String>,
}

fn feed_answer(page: feed::FeedPage) -> Response {
    respond::json(
        StatusCode::OK,
        &FeedAnswer {
            ok: Success,
            events: page.events,
            next: page.next,
        },
    )
}

/// `GET /events?after=&limit=`: the space's inbox in commit order, with attribution.
pub async fn get_events(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    let page = PageRequest::parse(q.get("after"), q.get("limit"))?;
    Ok(feed_answer(call.app.feed(&space, page).await?))
}

/// `GET /events/wait?after=&timeout_s=`: the next page as soon as it has an event.
pub async fn get_events_wait(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    let page = PageRequest::parse(q.get("after"), q.get("limit"))?;
    let timeout = Duration::from_secs(feed::parse_wait(q.get("timeout_s"))?);
    Ok(feed_answer(
        call.app.wait_for_events(&space, page, timeout).await?,
    ))
}

/// The answer of `GET /stats`.
#[derive(Serialize, JsonSchema)]
pub struct StatsAnswer {
    pub ok: Success,
    pub by: Dimension,
    /// The start of the range counted, widened to whole UTC hours.
    pub from_ms: u64,
    /// The end of the range counted, widened to whole UTC hours; `null`: no end.
    pub to_ms: Option<u64>,
    pub groups: Vec<GroupStats>,
}

/// `GET /stats`'s answer in `/openapi.json`: by a grouping of the space's stats, or by a split
/// link's variants (`variants.rs`).
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
#[schemars(untagged)]
pub enum StatsAnswers {
    Groups(StatsAnswer),
    Variants(crate::http::variants::VariantsAnswer),
}

/// `GET /stats?from_ms=&to_ms=|from=&to=&by=&campaign=`.
pub async fn get_stats(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    if q.get("by") == Some("variant") {
        return crate::http::variants::get(call, space).await;
    }
    // `link` is read only with `by=variant`, but a value that is no slug is refused with any
    // `by`, so a typo is never silently ignored.
    if let Some(link) = q.get("link").filter(|l| !l.is_empty()) {
        crate::domain::link::check_slug(link)
            .map_err(|e| Error::field(e.code, "link", e.message))?;
    }
    let grouping = Grouping::parse(q.get("by"), q.get("campaign"))?;
    let by = grouping.by;
    let range = stats::range(
        (q.get("from_ms"), q.get("to_ms")),
        (q.get("from"), q.get("to")),
    )?;
    let ((from, to), groups) = call.app.stats(&space, grouping, range).await?;
    Ok(respond::json(
        StatusCode::OK,
        &StatsAnswer {
            ok: Success,
            by,
            from_ms: u64::from(from) * stats::QUARTER_MS,
            to_ms: (to != u32::MAX).then(|| u64::from(to) * stats::QUARTER_MS),
            groups,
        },
    ))
}

/// The answer of `GET /rejections`: the newest first.
#[derive(Serialize, JsonSchema)]
pub struct RejectionsAnswer {
    pub ok: Success,
    pub rejections: Vec<Rejection>,
}

/// `GET /rejections?limit=`: the space's recent refused requests, newest first.
pub async fn get_rejections(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let limit = PageRequest::parse(None, call.query.get("limit"))?.limit;
    let rejections = call.app.rejections(&space, limit).await?;
    Ok(respond::json(
        StatusCode::OK,
        &RejectionsAnswer {
            ok: Success,
            rejections,
        },
    ))
}
