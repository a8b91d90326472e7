//! `GET /openapi.json`: the `OpenAPI` 3.1 document of the main listener. The router builds it
//! from its table and publishes it here when it starts (the table, above this layer, names
//! this handler, so the document is handed down rather than asked for).

use std::sync::OnceLock;

use warp::http::{HeaderValue, header};
use warp::reply::Response;

use crate::surface::Call;

static DOCUMENT: OnceLock<&'static str> = OnceLock::new();

/// Publishes the document; the first call wins (it is the same text every time).
pub fn publish(document: &'static str) {
    DOCUMENT.get_or_init(|| document);
}

/// `GET /openapi.json`.
pub async fn serve(_: Call) -> Response {
    let mut response = Response::new(DOCUMENT.get().copied().unwrap_or("{}").into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
