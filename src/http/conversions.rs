//! `GET /conversions/<space>/<name>/<conversion>.csv` and `GET /conversions/<space>/<name>.csv`:
//! the files a Google Ads destination serves to Google Ads (Data Manager's, one per conversion
//! event, and the legacy one), behind HTTP basic authentication (`docs/api.md#google-ads`).

use warp::http::{HeaderValue, header};
use warp::reply::Response;

use crate::error::{Code, Error};
use crate::platform::REALM;
use crate::surface::Call;
use crate::surface::respond::{self, Auth};

/// `GET /conversions/{space}/{file}`: the legacy file; `file` is the destination's name and
/// `.csv`. `200` with the file as `text/csv`; `401` with `WWW-Authenticate: Basic` and nothing
/// of the file otherwise.
pub async fn get_conversions(call: Call) -> Response {
    let param = call.param.clone().unwrap_or_default();
    let (space, file) = param.split_once('/').unwrap_or_default();
    serve(call, space, file, None).await
}

/// `GET /conversions/{space}/{destination}/{file}`: Data Manager's file of one conversion
/// event; `file` is the conversion and `.csv`. Answered as [`get_conversions`].
pub async fn get_conversion_event(call: Call) -> Response {
    let param = call.param.clone().unwrap_or_default();
    let mut parts = param.splitn(3, '/');
    let (space, name, file) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let Some(conversion) = file.strip_suffix(".csv") else {
        return respond::error(
            &Error::new(
                Code::NotFound,
                "a conversion's file is /conversions/<space>/<destination>/<conversion>.csv",
            ),
            Auth::None,
        );
    };
    serve(call, space, &format!("{name}.csv"), Some(conversion)).await
}

/// The answer for the file `file` (the destination's name and `.csv`) of `space`, `conversion`'s
/// in Data Manager's template or the legacy one.
async fn serve(call: Call, space: &str, file: &str, conversion: Option<&str>) -> Response {
    let Some(name) = file.strip_suffix(".csv") else {
        return respond::error(
            &Error::new(
                Code::NotFound,
                "a conversions file is /conversions/<space>/<destination>.csv",
            ),
            Auth::None,
        );
    };
    let authorization = call.header(header::AUTHORIZATION).map(str::to_owned);
    let answer = call
        .app
        .conversions_file(
            space,
            name,
            conversion,
            authorization.as_deref(),
            call.client,
        )
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
