//! `GET /conversions/<space>/<name>.csv`: the file a Google Ads destination serves to Google
//! Ads' scheduled upload, behind HTTP basic authentication (`docs/destinations.md#google-ads`).

use warp::http::{HeaderValue, header};
use warp::reply::Response;

use crate::error::{Code, Error};
use crate::platform::REALM;
use crate::surface::Call;
use crate::surface::respond::{self, Auth};

/// `GET /conversions/{space}/{file}`: `file` is the destination's name and `.csv`. `200` with
/// the file as `text/csv`; `401` with `WWW-Authenticate: Basic` and nothing of the file
/// otherwise.
pub async fn get_conversions(call: Call) -> Response {
    let param = call.param.clone().unwrap_or_default();
    let (space, file) = param.split_once('/').unwrap_or_default();
    let Some(name) = file.strip_suffix(".csv") else {
        return respond::error(
            &Error::new(
                Code::NotFound,
                "a conversions file is /conversions/<space>/<destination>.csv",
            ),
            Auth::None,
        );
    };
    let answer = call
        .app
        .conversions_file(space, name, call.header(header::AUTHORIZATION), call.client)
        .await;
    match answer {
        Ok(file) => {
            let mut response = Response::new(file.csv.into());
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => {
            let mut response = respond::error(&e, Auth::None);
            if e.code == Code::Unauthorized {
                let challenge = format!("Basic realm=\"{REALM}\", charset=\"UTF-8\"");
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
            }
            response
        }
    }
}
