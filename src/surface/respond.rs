//! The one mapping from errors to HTTP responses, and the JSON body every answer has.
//!
//! `status_of` is the only place that knows which HTTP status a [`Code`] gets. Warp's own
//! rejections (unknown path, wrong method) come through [`recover`] into the same body shape.

use std::borrow::Cow;
use std::convert::Infallible;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use crate::error::{Code, Error};

#[must_use]
pub fn status_of(code: Code) -> StatusCode {
    match code {
        Code::InvalidJson | Code::MalformedRequest => StatusCode::BAD_REQUEST,
        Code::MissingField
        | Code::InvalidEvent
        | Code::InvalidValue
        | Code::InvalidTime
        | Code::InvalidCurrency
        | Code::InvalidUid
        | Code::InvalidEid
        | Code::InvalidTgId
        | Code::InvalidField => StatusCode::UNPROCESSABLE_ENTITY,
        Code::Unauthorized => StatusCode::UNAUTHORIZED,
        Code::Forbidden => StatusCode::FORBIDDEN,
        Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        Code::Conflict => StatusCode::CONFLICT,
        Code::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        Code::UriTooLong => StatusCode::URI_TOO_LONG,
        Code::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    }
}

/// How the endpoint authenticates, for the `WWW-Authenticate` header of a 401.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    Bearer,
    Token,
    None,
}

/// `"ok": true`, the first field of every success answer: a client tells success from failure
/// by it alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct Success;

impl Serialize for Success {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(true)
    }
}

impl JsonSchema for Success {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Success".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"const": true})
    }
}

/// `"ok": false`, the first field of every failure.
#[derive(Clone, Copy, Debug, Default)]
pub struct Failure;

impl Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(false)
    }
}

impl JsonSchema for Failure {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Failure".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"const": false})
    }
}

/// Every failure: a stable `status` code, a sentence for a person, and the field at fault.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody<'a> {
    pub ok: Failure,
    /// A stable machine code.
    pub status: Code,
    /// One sentence for a person, naming the field and what was wrong.
    #[schemars(length(min = 1))]
    pub error: &'a str,
    /// The field at fault, under the name the caller used (`t` on GET /e, `occurred_at_ms` on
    /// POST /events).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub field: Option<&'static str>,
}

/// The answer of an operation that has nothing else to say.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Ok")]
pub struct Done {
    pub ok: Success,
}

/// `200 {"ok": true}`: the answer of an operation that has nothing else to say.
#[must_use]
pub fn ok() -> Response {
    json(StatusCode::OK, &Done { ok: Success })
}

/// The error body (`docs/api.md#errors`), with the headers its status calls for.
#[must_use]
pub fn error(err: &Error, auth: Auth) -> Response {
    let mut response = json_bytes(status_of(err.code), error_body(err));
    let headers = response.headers_mut();
    match err.code {
        Code::Unauthorized if auth == Auth::Bearer => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        Code::RateLimited | Code::Unavailable => {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(err.retry_after_s.unwrap_or(1)),
            );
        }
        _ => {}
    }
    response
}

/// The JSON error body of `err`, for answers written outside warp (`connection.rs`) too.
#[must_use]
pub fn error_body(err: &Error) -> Vec<u8> {
    to_json(&ErrorBody {
        ok: Failure,
        status: err.code,
        error: &err.message,
        field: err.field,
    })
}

fn to_json<T: Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_else(|e| {
        tracing::error!(error = %e, "serialising a response");
        br#"{"ok":false,"status":"internal","error":"internal error"}"#.to_vec()
    })
}

/// A JSON response.
pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    json_bytes(status, to_json(body))
}

fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut response = Response::new(bytes.into());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A plain-text `200` (for `return=OK` postbacks).
#[must_use]
pub fn text(body: String) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Turns warp's rejections (no route matched) into the error body.
pub async fn recover(rejection: warp::Rejection) -> Result<Response, Infallible> {
    let mut auth = Auth::None;
    let err = if let Some(header) = rejection.find::<warp::reject::InvalidHeader>() {
        // Only bearer endpoints read `Authorization`; a value that is not visible ASCII cannot
        // be a credential, and gets the same answer as any other bad credential.
        if header.name().eq_ignore_ascii_case("authorization") {
            auth = Auth::Bearer;
            Error::bad_credential()
        } else {
            Error::new(
                Code::InvalidField,
                format!("the {} header is malformed", header.name()),
            )
        }
    } else if rejection.is_not_found() {
        Error::new(Code::NotFound, "no such endpoint")
    } else if rejection.find::<warp::reject::MethodNotAllowed>().is_some() {
        Error::new(
            Code::MethodNotAllowed,
            "this endpoint does not take that method",
        )
    } else {
        tracing::error!(?rejection, "unhandled rejection");
        Error::internal()
    };
    Ok(error(&err, auth))
}
