//! The endpoints: each turns a request into an [`App`] call and the result into JSON.
//!
//! Every handler runs the same steps in the same order: authenticate, read the input, call the
//! app, answer; and every answer, success or failure, leaves through [`finish`], which writes the
//! access-log line. The log line has the method, path, status, latency and space; never the
//! query string or a header, so no credential can reach the log.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::{App, EventResult, Presented};
use crate::domain::click::BindInput;
use crate::domain::event::{EventInput, GET_NAMES, POST_NAMES};
use crate::domain::input::Query;
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::BindOutcome;
use crate::domain::rejection::Rejection;
use crate::error::{Code, Error};
use crate::http::respond::{self, Auth};
use crate::storage::Health;

/// What the access log and the rejection log need to know about a request.
pub(super) struct Access {
    method: &'static str,
    path: &'static str,
    started: Instant,
    /// The space of the credential the request carried: a valid one, or one of ours that was
    /// refused (expired, revoked, of the wrong kind).
    space: Option<SpaceRef>,
    /// The raw query of a GET, for the rejection log (redacted there).
    query: Option<String>,
    auth: Auth,
}

impl Access {
    pub(super) fn new(method: &'static str, path: &'static str, auth: Auth) -> Access {
        Access {
            method,
            path,
            started: Instant::now(),
            space: None,
            query: None,
            auth,
        }
    }

    /// Keeps the query for the rejection log.
    pub(super) fn query(&mut self, query: &str) {
        self.query = Some(query.to_owned());
    }

    /// Authenticates, before anything else about the request is looked at, and notes whose
    /// credential it was, also when it is refused.
    pub(super) fn authenticate(
        &mut self,
        app: &App,
        presented: Presented<'_>,
    ) -> Result<SpaceRef, Error> {
        let result = app.authenticate(presented);
        self.space = match &result {
            Ok(space) => Some(space.clone()),
            Err(_) => app.issuer_space(presented),
        };
        result
    }
}

/// Every answer, success or failure, leaves through here: the error body, the access-log line,
/// and a refusal that carried a credential of a space goes to that space's rejection log.
pub(super) fn finish(app: &App, access: &Access, result: Result<Response, Error>) -> Response {
    let response = match result {
        Ok(r) => r,
        Err(e) => {
            let response = respond::error(&e, access.auth);
            if let Some(space) = &access.space {
                app.record_rejection(
                    space,
                    Rejection::new(
                        app.now_ms(),
                        access.method,
                        access.path,
                        response.status().as_u16(),
                        &e,
                        access.query.as_deref(),
                    ),
                );
            }
            response
        }
    };
    tracing::info!(
        target: "tracker::access",
        method = access.method,
        path = access.path,
        status = response.status().as_u16(),
        latency_us = access.started.elapsed().as_micros() as u64,
        space = access.space.as_ref().map_or("-", |s| &*s.name),
    );
    response
}

/// Reads a request body, refusing one over `limit` bytes, declared or streamed.
pub(super) async fn read_body<S, B>(
    body: S,
    declared: Option<u64>,
    limit: u64,
) -> Result<Bytes, Error>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let too_large = || {
        Error::new(
            Code::PayloadTooLarge,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = std::pin::pin!(body);
    let mut out = BytesMut::with_capacity(declared.unwrap_or(512).min(limit) as usize);
    while let Some(chunk) = body.next().await {
        let mut chunk = chunk.map_err(|e| {
            Error::new(
                Code::InvalidJson,
                format!("request body could not be read: {e}"),
            )
        })?;
        if (out.len() + chunk.remaining()) as u64 > limit {
            return Err(too_large());
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            out.extend_from_slice(part);
            let n = part.len();
            chunk.advance(n);
        }
    }
    Ok(out.freeze())
}

/// Every bearer POST, in its required order: authenticate (before anything else is looked at),
/// note the space for the access log, read the body within its limit, then `handle` it; the
/// answer, success or failure, leaves through [`finish`].
pub(super) async fn bearer_post<S, B, F, Fut>(
    app: Arc<App>,
    path: &'static str,
    authorization: Option<String>,
    length: Option<u64>,
    body: S,
    handle: F,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
    F: FnOnce(Arc<App>, SpaceRef, Bytes) -> Fut,
    Fut: Future<Output = Result<Response, Error>>,
{
    let mut access = Access::new("POST", path, Auth::Bearer);
    let result = async {
        let space = access.authenticate(&app, Presented::Bearer(authorization.as_deref()))?;
        let body = read_body(body, length, app.settings.max_body_bytes).await?;
        handle(app.clone(), space, body).await
    }
    .await;
    finish(&app, &access, result)
}

#[derive(Serialize)]
struct EventAnswer {
    ok: bool,
    status: &'static str,
    inbox_id: Option<String>,
    dedup: &'static str,
    matched: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

impl From<EventResult> for EventAnswer {
    fn from(r: EventResult) -> Self {
        EventAnswer {
            ok: true,
            status: if r.duplicate { "duplicate" } else { "queued" },
            inbox_id: r.inbox_id.map(|id| id.to_string()),
            dedup: r.basis.as_str(),
            matched: r.matched,
            dry_run: r.dry_run,
        }
    }
}

#[derive(Serialize)]
struct Ok {
    ok: bool,
}

/// `GET /healthz`: `200` while the data file takes writes; `503` while writes fail (a full
/// disk; it turns back by itself), or once storage has failed for good and the process is
/// stopping (a supervisor restarts it).
pub async fn healthz(app: Arc<App>) -> Response {
    match app.store.health() {
        Health::Serving => respond::json(StatusCode::OK, &Ok { ok: true }),
        Health::Unwritable(_) => respond::error(
            &Error::new(
                Code::Unavailable,
                "storage unwritable: writing the data file fails (a full disk?); requests are \
                 answered 503 until it works again, and the reason is in the server log",
            ),
            Auth::None,
        ),
        Health::Failed(_) => respond::error(
            &Error::new(
                Code::Unavailable,
                "the data file failed and the tracker is stopping; the reason is in the server log",
            ),
            Auth::None,
        ),
    }
}

/// The `OpenAPI` 3.1 document of every endpoint of the main listener, written by hand in
/// `openapi.json` beside this file and compiled in. Kept true by test: `tests/it/openapi.rs`
/// checks real answers of every endpoint against it, and `.ci/schemathesis` fuzzes the real
/// server from it.
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /openapi.json`: [`OPENAPI`], as it is (no credential).
#[must_use]
pub fn openapi() -> Response {
    let mut response = Response::new(OPENAPI.into());
    response.headers_mut().insert(
        warp::http::header::CONTENT_TYPE,
        warp::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `POST /events`: bearer secret, JSON body.
pub async fn post_events<S, B>(
    app: Arc<App>,
    authorization: Option<String>,
    length: Option<u64>,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    bearer_post(
        app,
        "/events",
        authorization,
        length,
        body,
        |app, space, body| async move {
            let result = async {
                let input = EventInput::from_json(&body)?;
                app.record_event(&space, input, &POST_NAMES).await
            }
            .await;
            app.count_event(&result);
            Ok(respond::json(StatusCode::OK, &EventAnswer::from(result?)))
        },
    )
    .await
}

/// `GET /e`: ingest token in the query, fields in the query; `return=TEXT` answers plain text.
pub async fn get_e(app: Arc<App>, query: String) -> Response {
    let mut access = Access::new("GET", "/e", Auth::Token);
    access.query(&query);
    let result = async {
        let q = Query::parse(&query);
        let space = access.authenticate(&app, Presented::IngestToken(q.get("token")))?;
        let result = match EventInput::from_query(&q) {
            Ok(input) => app.record_event(&space, input, &GET_NAMES).await,
            Err(e) => Err(e),
        };
        app.count_event(&result);
        let result = result?;
        Result::<_, Error>::Ok(match q.get("return") {
            Some(text) => respond::text(text.to_owned()),
            None => respond::json(StatusCode::OK, &EventAnswer::from(result)),
        })
    }
    .await;
    finish(&app, &access, result)
}

#[derive(Serialize)]
struct ClickAnswer {
    ok: bool,
    uid: String,
    created: bool,
}

/// `POST /clicks`: bearer secret, JSON body; answers the click's `uid`.
pub async fn post_clicks<S, B>(
    app: Arc<App>,
    authorization: Option<String>,
    length: Option<u64>,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    bearer_post(
        app,
        "/clicks",
        authorization,
        length,
        body,
        |app, space, body| async move {
            let click = app.back_fill_click(&space, &body).await?;
            Ok(respond::json(
                StatusCode::OK,
                &ClickAnswer {
                    ok: true,
                    uid: click.uid,
                    created: click.created,
                },
            ))
        },
    )
    .await
}

#[derive(Serialize)]
struct BindAnswer {
    ok: bool,
    matched: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tg_id: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    conflict: bool,
}

fn bind_answer(outcome: BindOutcome) -> Response {
    let answer = match outcome {
        BindOutcome::Unmatched => BindAnswer {
            ok: true,
            matched: false,
            tg_id: None,
            conflict: false,
        },
        BindOutcome::Bound { tg_id, conflict } => BindAnswer {
            ok: true,
            matched: true,
            tg_id: Some(tg_id),
            conflict,
        },
    };
    respond::json(StatusCode::OK, &answer)
}

/// `POST /bind`: bearer secret, `{"uid", "tg_id"}`.
pub async fn post_bind<S, B>(
    app: Arc<App>,
    authorization: Option<String>,
    length: Option<u64>,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    bearer_post(
        app,
        "/bind",
        authorization,
        length,
        body,
        |app, space, body| async move {
            let input = BindInput::from_json(&body)?;
            Ok(bind_answer(app.bind(&space, input).await?))
        },
    )
    .await
}

/// `GET /bind`: ingest token, `uid` and `tg` in the query.
pub async fn get_bind(app: Arc<App>, query: String) -> Response {
    let mut access = Access::new("GET", "/bind", Auth::Token);
    access.query(&query);
    let result = async {
        let q = Query::parse(&query);
        let space = access.authenticate(&app, Presented::IngestToken(q.get("token")))?;
        let input = BindInput::from_query(&q)?;
        Result::<_, Error>::Ok(bind_answer(app.bind(&space, input).await?))
    }
    .await;
    finish(&app, &access, result)
}
