//! The read side (CONTRACT section 10): the feed, the follower's wait, stats and the rejection
//! log. Each needs the space's secret and answers what `app` reads through the reader path.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::{App, Presented};
use crate::domain::feed::{self, FeedEvent, PageRequest};
use crate::domain::input::Query;
use crate::domain::keyring::SpaceRef;
use crate::domain::rejection::Rejection;
use crate::domain::stats::{self, Dimension, GroupStats};
use crate::error::Error;
use crate::http::handlers::{Access, finish};
use crate::http::respond::{self, Auth};

/// Every bearer GET: authenticate first, then `handle` the decoded query.
pub(super) async fn bearer_get<F, Fut>(
    app: Arc<App>,
    path: &'static str,
    authorization: Option<String>,
    query: String,
    handle: F,
) -> Response
where
    F: FnOnce(Arc<App>, SpaceRef, Query) -> Fut,
    Fut: Future<Output = Result<Response, Error>>,
{
    let mut access = Access::new("GET", path, Auth::Bearer);
    access.query(&query);
    let result = async {
        let space = access.authenticate(&app, Presented::Bearer(authorization.as_deref()))?;
        handle(app.clone(), space, Query::parse(&query)).await
    }
    .await;
    finish(&app, &access, result)
}

#[derive(Serialize)]
struct FeedAnswer {
    ok: bool,
    events: Vec<FeedEvent>,
    next: Option<String>,
}

fn feed_answer(page: feed::FeedPage) -> Response {
    respond::json(
        StatusCode::OK,
        &FeedAnswer {
            ok: true,
            events: page.events,
            next: page.next,
        },
    )
}

/// `GET /events?after=&limit=`: the space's inbox in commit order, with attribution.
pub async fn get_events(app: Arc<App>, authorization: Option<String>, query: String) -> Response {
    bearer_get(
        app,
        "/events",
        authorization,
        query,
        |app, space, q| async move {
            let page = PageRequest::parse(q.get("after"), q.get("limit"))?;
            Ok(feed_answer(app.feed(&space, page).await?))
        },
    )
    .await
}

/// `GET /events/wait?after=&timeout_s=`: the next page as soon as it has an event.
pub async fn get_events_wait(
    app: Arc<App>,
    authorization: Option<String>,
    query: String,
) -> Response {
    bearer_get(
        app,
        "/events/wait",
        authorization,
        query,
        |app, space, q| async move {
            let page = PageRequest::parse(q.get("after"), q.get("limit"))?;
            let timeout = Duration::from_secs(feed::parse_wait(q.get("timeout_s"))?);
            Ok(feed_answer(
                app.wait_for_events(&space, page, timeout).await?,
            ))
        },
    )
    .await
}

#[derive(Serialize)]
struct StatsAnswer {
    ok: bool,
    by: &'static str,
    /// The range counted, widened to whole UTC hours.
    from_ms: u64,
    to_ms: Option<u64>,
    groups: Vec<GroupStats>,
}

/// `GET /stats?from_ms=&to_ms=&by=campaign_name|link_slug|day`.
pub async fn get_stats(app: Arc<App>, authorization: Option<String>, query: String) -> Response {
    bearer_get(
        app,
        "/stats",
        authorization,
        query,
        |app, space, q| async move {
            let by = Dimension::parse(q.get("by"))?;
            let (from, to) = stats::hours(q.get("from_ms"), q.get("to_ms"))?;
            let groups = app.stats(&space, by, (from, to)).await?;
            Ok(respond::json(
                StatusCode::OK,
                &StatsAnswer {
                    ok: true,
                    by: by.as_str(),
                    from_ms: u64::from(from) * stats::HOUR_MS,
                    to_ms: (to != u32::MAX).then(|| u64::from(to) * stats::HOUR_MS),
                    groups,
                },
            ))
        },
    )
    .await
}

#[derive(Serialize)]
struct RejectionsAnswer {
    ok: bool,
    rejections: Vec<Rejection>,
}

/// `GET /rejections?limit=`: the space's recent refused requests, newest first.
pub async fn get_rejections(
    app: Arc<App>,
    authorization: Option<String>,
    query: String,
) -> Response {
    bearer_get(
        app,
        "/rejections",
        authorization,
        query,
        |app, space, q| async move {
            let limit = PageRequest::parse(None, q.get("limit"))?.limit;
            let rejections = app.rejections(&space, limit).await?;
            Ok(respond::json(
                StatusCode::OK,
                &RejectionsAnswer {
                    ok: true,
                    rejections,
                },
            ))
        },
    )
    .await
}
