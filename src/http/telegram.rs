//! `POST /telegram/<space>`: the webhook Telegram sends a space's bot's updates to, with
//! `telegram_webhook = true` (`docs/channels.md#updates-by-webhook`). Telegram's endpoint, not
//! a user's: it is not in `/openapi.json` (no client of the API calls it, and Telegram speaks
//! its own documented protocol to it).

use std::net::IpAddr;

use warp::http::header::HeaderName;
use warp::reply::Response;

use crate::app::App;
use crate::domain::warnings::clipped;
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond::{self, Auth};
use crate::workers::telegram::hook;

/// `200 {"ok": true}` once the update's effects are committed (or it was applied already);
/// `401` for a missing or wrong `X-Telegram-Bot-Api-Secret-Token`, checked before the body is
/// read; `404` for a space with no bot taking updates here; a `5xx` when the commit fails, and
/// Telegram sends the update again. A refusal is logged at WARN, once a minute per client
/// address.
pub async fn post_update(call: Call) -> Response {
    let shared = call.app.telegram_tasks();
    let space = call.param.clone().unwrap_or_default();
    let secret = call.header(HeaderName::from_static(hook::SECRET_HEADER));
    if let Err(e) = hook::authenticate(&shared, &space, secret) {
        return refused(&call.app, call.client, &space, &e);
    }
    let body = match call.body.read(call.app.settings.max_body_bytes).await {
        Ok(body) => body,
        Err(e) => return refused(&call.app, call.client, &space, &e),
    };
    match hook::receive(&shared, &space, &body).await {
        Ok(()) => respond::ok(),
        Err(e) => refused(&call.app, call.client, &space, &e),
    }
}

/// The answer to an update not taken, and a warning, once a minute per client address: anyone
/// can post here, so the log must not grow with what they send.
fn refused(app: &App, client: Option<IpAddr>, space: &str, e: &Error) -> Response {
    if respond::status_of(e.code).is_client_error()
        && let Some(left_out) = app.admit_warning(client, "telegram update refused")
    {
        tracing::warn!(
            space = %clipped(space),
            client = ?client,
            code = e.code.as_str(),
            left_out_since_last = left_out,
            "telegram update refused"
        );
    }
    respond::error(e, Auth::None)
}
