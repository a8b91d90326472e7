//! The stylesheet and the copy buttons' script, built into the binary.

use warp::http::{HeaderValue, header};
use warp::reply::Response;

use crate::error::Error;
use crate::surface::Body;
use crate::web::context::Anonymous;

const STYLE: &str = include_str!("../style.css");
const COPY_JS: &str = include_str!("../copy.js");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = Response::new(body.into());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `GET /admin/style.css`, built into the binary.
pub(in crate::web) async fn style(_: &Anonymous<'_>, _: Body) -> Result<Response, Error> {
    Ok(asset(STYLE, "text/css; charset=utf-8"))
}

/// `GET /admin/copy.js`, the copy buttons' script, built into the binary.
pub(in crate::web) async fn script(_: &Anonymous<'_>, _: Body) -> Result<Response, Error> {
    Ok(asset(COPY_JS, "text/javascript; charset=utf-8"))
}
