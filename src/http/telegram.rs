//! `POST /telegram/<space>`: the webhook Telegram sends a space's bot's updates to, with
//! `telegram_webhook = true` (`docs/channels.md#updates-by-webhook`). Telegram's endpoint, not
//! a user's: it is not in `/openapi.json` (no client of the API calls it, and Telegram speaks
//! its own documented protocol to it).

use warp::http::header::HeaderName;
use warp::reply::Response;

use crate::surface::Call;
use crate::surface::respond::{self, Auth};
use crate::workers::telegram::hook;

/// `200 {"ok": true}` once the update's effects are committed (or it was applied already);
/// `401` for a missing or wrong `X-Telegram-Bot-Api-Secret-Token`, checked before the body is
/// read; `404` for a space with no bot taking updates here; a `5xx` when the commit fails, and
/// Telegram sends the update again.
pub async fn post_update(call: Call) -> Response {
    let shared = call.app.telegram_tasks();
    let secret = call.header(HeaderName::from_static(hook::SECRET_HEADER));
    if let Err(e) = hook::authenticate(&shared, secret) {
        return respond::error(&e, Auth::None);
    }
    let space = call.param.clone().unwrap_or_default();
    let body = match call.body.read(call.app.settings.max_body_bytes).await {
        Ok(body) => body,
        Err(e) => return respond::error(&e, Auth::None),
    };
    match hook::receive(&shared, &space, &body).await {
        Ok(()) => respond::ok(),
        Err(e) => respond::error(&e, Auth::None),
    }
}
