//! `POST /events/batch`: up to 1000 events in one request and one transaction, answered with
//! one result per event, in order, each the answer `POST /events` would have given it.

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::domain::batch;
use crate::domain::keyring::SpaceRef;
use crate::domain::rejection::Rejection;
use crate::error::Error;
use crate::http::ingest::EventAnswer;
use crate::surface::Call;
use crate::surface::respond::{self, ErrorBody, Failure, Success};

/// The answer of `POST /events/batch`.
#[derive(Serialize, JsonSchema)]
pub struct BatchAnswer<'a> {
    pub ok: Success,
    /// One result per event of the request, in its order.
    pub results: Vec<BatchResult<'a>>,
}

/// What `POST /events` would have answered for one event of a batch: its success answer, or its
/// error body.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum BatchResult<'a> {
    Event(EventAnswer),
    Refused(ErrorBody<'a>),
}

/// `POST /events/batch`: bearer secret, `{"events": [...]}` within 1 MiB. Each refused event is
/// also written to the space's rejection log, named by its place in the batch.
pub async fn post_events_batch(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let app = &call.app;
    let body = call.body.read(batch::MAX_BATCH_BYTES).await?;
    let events = batch::events_of(&body)?;
    let texts: Vec<&str> = events.iter().map(|raw| raw.get()).collect();
    let results = app.record_events(&space, &texts, true).await?;
    let now_ms = app.now_ms();
    for (place, refusal) in results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e)))
    {
        let named = Error {
            message: format!("events[{place}]: {}", refusal.message),
            ..refusal.clone()
        };
        let status = respond::status_of(refusal.code).as_u16();
        let rejection = Rejection::new(now_ms, "POST", "/events/batch", status, &named, None);
        app.record_rejection(&space, rejection);
    }
    let answer = BatchAnswer {
        ok: Success,
        results: results
            .iter()
            .map(|result| match result {
                Ok(r) => BatchResult::Event(EventAnswer::from(*r)),
                Err(e) => BatchResult::Refused(ErrorBody {
                    ok: Failure,
                    status: e.code,
                    error: &e.message,
                    field: e.field,
                }),
            })
            .collect(),
    };
    Ok(respond::json(StatusCode::OK, &answer))
}
