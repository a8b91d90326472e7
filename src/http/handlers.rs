//! The ingest endpoints (events, clicks, bindings), health and the document: each turns a
//! request into an [`App`] call and the result into JSON.
//!
//! The router (`mod.rs`) has checked the credential before a handler runs; a handler reads its
//! input (the body within `max_body_bytes`), calls the app, and answers. Every answer of a
//! space's endpoint, success or failure, leaves through [`finish`], which writes the access-log
//! line: the method, path, status, latency and space; never the query string or a header, so
//! no credential can reach the log.

use std::time::Instant;

use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::{App, EventResult, Presented};
use crate::domain::click::BindInput;
use crate::domain::event::{AttributedBy, EventInput, GET_NAMES, POST_NAMES};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::BindOutcome;
use crate::domain::rejection::Rejection;
use crate::error::{Code, Error};
use crate::http::Call;
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

#[derive(Serialize)]
struct EventAnswer {
    ok: bool,
    status: &'static str,
    inbox_id: Option<String>,
    dedup: &'static str,
    matched: bool,
    attributed_by: Option<&'static str>,
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
            attributed_by: r.attributed_by.map(AttributedBy::as_str),
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
pub async fn healthz(call: Call) -> Response {
    match call.app.store.health() {
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

/// `GET /openapi.json`: the `OpenAPI` 3.1 document of the main listener (`openapi.rs`).
pub async fn openapi(_: Call) -> Response {
    let mut response = Response::new(crate::http::openapi_document().into());
    response.headers_mut().insert(
        warp::http::header::CONTENT_TYPE,
        warp::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `POST /events`: bearer secret, JSON body.
pub async fn post_events(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let app = &call.app;
    let body = call.body.read(app.settings.max_body_bytes).await?;
    let result = async {
        let input = EventInput::from_json(&body)?;
        app.record_event(&space, input, &POST_NAMES).await
    }
    .await;
    app.count_event(&result);
    Ok(respond::json(StatusCode::OK, &EventAnswer::from(result?)))
}

/// `GET /e`: ingest token in the query, fields in the query; `return=TEXT` answers plain text.
pub async fn get_e(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let (app, q) = (&call.app, &call.query);
    let result = match EventInput::from_query(q) {
        Ok(input) => app.record_event(&space, input, &GET_NAMES).await,
        Err(e) => Err(e),
    };
    app.count_event(&result);
    let result = result?;
    Ok(match q.get("return") {
        Some(text) => respond::text(text.to_owned()),
        None => respond::json(StatusCode::OK, &EventAnswer::from(result)),
    })
}

#[derive(Serialize)]
struct ClickAnswer {
    ok: bool,
    uid: String,
    created: bool,
}

/// `POST /clicks`: bearer secret, JSON body; answers the click's `uid`.
pub async fn post_clicks(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let click = call.app.back_fill_click(&space, &body).await?;
    Ok(respond::json(
        StatusCode::OK,
        &ClickAnswer {
            ok: true,
            uid: click.uid,
            created: click.created,
        },
    ))
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

/// The answer of a binding. `with_other_id`: whether a conflict names the Telegram id that
/// holds the click; only for the secret (`POST /bind`): the ingest token of `GET /bind` is held
/// by affiliate networks, which are sent uids, and must not learn who is behind one.
fn bind_answer(outcome: BindOutcome, with_other_id: bool) -> Response {
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
            tg_id: (with_other_id || !conflict).then_some(tg_id),
            conflict,
        },
    };
    respond::json(StatusCode::OK, &answer)
}

/// `POST /bind`: bearer secret, `{"uid", "tg_id"}`.
pub async fn post_bind(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let input = BindInput::from_json(&body)?;
    Ok(bind_answer(call.app.bind(&space, input).await?, true))
}

/// `GET /bind`: ingest token, `uid` and `tg` in the query; a conflict without the other id.
pub async fn get_bind(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let input = BindInput::from_query(&call.query)?;
    Ok(bind_answer(call.app.bind(&space, input).await?, false))
}
