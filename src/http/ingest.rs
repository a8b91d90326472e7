//! The ingest endpoints: events, clicks and bindings. Each handler reads its input (the body
//! within `max_body_bytes`), calls the [`App`], and answers JSON.

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::events::EventResult;
use crate::domain::click::BindInput;
use crate::domain::dedup::Basis;
use crate::domain::event::{AttributedBy, EventInput, GET_NAMES, POST_NAMES};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::BindOutcome;
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The answer of `POST /events` and `GET /e`.
#[derive(Serialize, JsonSchema)]
pub struct EventAnswer {
    pub ok: Success,
    pub status: EventStatus,
    /// The event's place in the inbox (for a duplicate, the earlier event's); `null` only for a
    /// dry run of a new event.
    #[schemars(pattern(r"^[0-9]+$"))]
    pub inbox_id: Option<String>,
    /// The event's identity, a UUID never given to another event, in this data file or any
    /// other (for a duplicate, the earlier event's); `null` only for a dry run of a new event.
    /// What a receiver of conversions deduplicates by.
    #[schemars(
        length(equal = 36),
        pattern(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    )]
    pub event_id: Option<String>,
    /// The dedup rule that applied.
    pub dedup: Basis,
    /// Whether the event is attributed to a click of the space: its `uid`'s, or one bound to its
    /// `tg_id`.
    pub matched: bool,
    /// How the event was (for a duplicate, is now) attributed: by its `uid`, by its `tg_id`, or
    /// `null` when no click was found (`matched: false`).
    pub attributed_by: Option<AttributedBy>,
    /// Present, `true`, on a dry run only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// Whether an event was stored now or earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Stored now (or, on a dry run, would be).
    Queued,
    /// Stored earlier; `inbox_id` is the earlier event's.
    Duplicate,
}

impl From<EventResult> for EventAnswer {
    fn from(r: EventResult) -> Self {
        EventAnswer {
            ok: Success,
            status: if r.duplicate {
                EventStatus::Duplicate
            } else {
                EventStatus::Queued
            },
            inbox_id: r.inbox_id.map(|id| id.to_string()),
            event_id: r.event_id.map(|id| id.to_string()),
            dedup: r.basis,
            matched: r.matched,
            attributed_by: r.attributed_by,
            dry_run: r.dry_run,
        }
    }
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

/// The answer of `POST /clicks`.
#[derive(Serialize, JsonSchema)]
pub struct ClickAnswer {
    pub ok: Success,
    /// The click's id: the one found for the body's `fbclid`, or a new one.
    pub uid: String,
    /// Whether the click is new (false: one with the same `fbclid` was found).
    pub created: bool,
}

/// `POST /clicks`: bearer secret, JSON body; answers the click's `uid`.
pub async fn post_clicks(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let click = call.app.back_fill_click(&space, &body).await?;
    Ok(respond::json(
        StatusCode::OK,
        &ClickAnswer {
            ok: Success,
            uid: click.uid,
            created: click.created,
        },
    ))
}

/// The answer of `POST /bind` and `GET /bind`.
#[derive(Serialize, JsonSchema)]
pub struct BindAnswer {
    pub ok: Success,
    /// Whether the `uid` names a click of the space.
    pub matched: bool,
    /// The Telegram user the click is bound to. On a conflict, `POST /bind` names the user that
    /// holds the click; `GET /bind` leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tg_id: Option<u64>,
    /// Present, `true`, when the click was bound to another user already (it stays so).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub conflict: bool,
}

/// The answer of a binding. `with_other_id`: whether a conflict names the Telegram id that
/// holds the click; only for the secret (`POST /bind`): the ingest token of `GET /bind` is held
/// by affiliate networks, which are sent uids, and must not learn who is behind one.
#[must_use]
pub fn bind_answer(outcome: BindOutcome, with_other_id: bool) -> Response {
    let answer = match outcome {
        BindOutcome::Unmatched => BindAnswer {
            ok: Success,
            matched: false,
            tg_id: None,
            conflict: false,
        },
        BindOutcome::Bound { tg_id, conflict } => BindAnswer {
            ok: Success,
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
