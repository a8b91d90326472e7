//! The ingest endpoints: events, clicks and bindings. Each handler reads its input (the body
//! within `max_body_bytes`), calls the [`App`], and answers JSON.

use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::EventResult;
use crate::domain::click::BindInput;
use crate::domain::event::{AttributedBy, EventInput, GET_NAMES, POST_NAMES};
use crate::domain::keyring::SpaceRef;
use crate::domain::outcome::BindOutcome;
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond;

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
