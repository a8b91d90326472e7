//! A Telegram Mini App's endpoints (`docs/bots.md#mini-apps`): `POST /miniapp/<space>/bind` and
//! `POST /miniapp/<space>/events`, public, the `initData` Telegram signed as the credential; and
//! the browser's CORS preflight of both. Every answer allows any origin: a Mini App is served
//! from the marketer's own host, and the signature, not the origin, says who is asking.

use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use crate::domain::init_data::MiniAppRequest;
use crate::error::Error;
use crate::http::access::{Access, finish};
use crate::http::ingest::{EventAnswer, bind_answer};
use crate::surface::Call;
use crate::surface::respond::{self, Auth};

/// `POST /miniapp/{space}/bind`: `{"init_data"}`; answers as `GET /bind` does (a conflict
/// without the other user's id: a browser's request is not the space's server's).
pub async fn post_bind(call: Call) -> Response {
    let access = Access::new("POST", "/miniapp/{space}/bind", Auth::None);
    let app = call.app.clone();
    let result = async {
        admit(&call)?;
        let space = call.param.unwrap_or_default();
        let body = call.body.read(app.settings.max_body_bytes).await?;
        let sent = MiniAppRequest::bind_from_json(&body)?;
        let outcome = app.miniapp_bind(&space, &sent.init_data).await?;
        Ok(bind_answer(outcome, false))
    }
    .await;
    any_origin(finish(&app, &access, result))
}

/// `POST /miniapp/{space}/events`: `{"init_data", "event", "eid"}`, `contact` or
/// `registration`; answers as `POST /events` does.
pub async fn post_events(call: Call) -> Response {
    let access = Access::new("POST", "/miniapp/{space}/events", Auth::None);
    let app = call.app.clone();
    let result = async {
        admit(&call)?;
        let space = call.param.unwrap_or_default();
        let body = call.body.read(app.settings.max_body_bytes).await?;
        let sent = MiniAppRequest::event_from_json(&body)?;
        let recorded = app.miniapp_event(&space, sent).await;
        app.count_event(&recorded);
        Ok(respond::json(StatusCode::OK, &EventAnswer::from(recorded?)))
    }
    .await;
    any_origin(finish(&app, &access, result))
}

/// `OPTIONS` of either: the browser asks before it sends JSON from another origin.
pub async fn preflight(_call: Call) -> Response {
    let mut r = Response::new(Vec::new().into());
    *r.status_mut() = StatusCode::NO_CONTENT;
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    any_origin(r)
}

/// The per-address limit of the public paths, as `/l/<slug>` has it.
fn admit(call: &Call) -> Result<(), Error> {
    call.client.map_or(Ok(()), |c| call.app.admit_address(c))
}

fn any_origin(mut r: Response) -> Response {
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}
