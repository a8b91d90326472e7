//! The one error type every request path returns, with its stable machine code.
//!
//! Domain rules, authentication and storage all fail with an [`Error`]: a [`Code`] (the stable
//! `status` string, `docs/api.md#errors`), a sentence for a person, and the field at fault. The
//! mapping from [`Code`] to an HTTP status lives in `surface::respond`, and nowhere else.

use std::fmt;

/// A stable machine code, sent to clients as `status`: its name in snake case
/// ([`Code::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    InvalidJson,
    MissingField,
    InvalidEvent,
    InvalidValue,
    InvalidTime,
    InvalidCurrency,
    InvalidUid,
    InvalidEid,
    InvalidTgId,
    InvalidField,
    Unauthorized,
    PayloadTooLarge,
    NotFound,
    MethodNotAllowed,
    Conflict,
    RateLimited,
    Unavailable,
    Internal,
    /// Not HTTP the server can serve: a head that does not parse, HTTP/1.1 without `Host`.
    MalformedRequest,
    UriTooLong,
    HeadersTooLarge,
}

impl Code {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidJson => "invalid_json",
            Code::MissingField => "missing_field",
            Code::InvalidEvent => "invalid_event",
            Code::InvalidValue => "invalid_value",
            Code::InvalidTime => "invalid_time",
            Code::InvalidCurrency => "invalid_currency",
            Code::InvalidUid => "invalid_uid",
            Code::InvalidEid => "invalid_eid",
            Code::InvalidTgId => "invalid_tg_id",
            Code::InvalidField => "invalid_field",
            Code::Unauthorized => "unauthorized",
            Code::PayloadTooLarge => "payload_too_large",
            Code::NotFound => "not_found",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::Conflict => "conflict",
            Code::RateLimited => "rate_limited",
            Code::Unavailable => "unavailable",
            Code::Internal => "internal",
            Code::MalformedRequest => "malformed_request",
            Code::UriTooLong => "uri_too_long",
            Code::HeadersTooLarge => "headers_too_large",
        }
    }
}

/// A failed request: what went wrong, in words for a person and a code for a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: Code,
    pub message: String,
    /// The field at fault, under the name the caller used (`t` on GET, `occurred_at_ms` on POST).
    pub field: Option<&'static str>,
    /// Seconds for the `Retry-After` header of a `rate_limited` or `unavailable` answer; 1 when
    /// not set.
    pub retry_after_s: Option<u32>,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            field: None,
            retry_after_s: None,
        }
    }

    pub fn field(code: Code, field: &'static str, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            field: Some(field),
            retry_after_s: None,
        }
    }

    /// The same error, telling the client to retry after `seconds`.
    #[must_use]
    pub fn retry_after(self, seconds: u32) -> Self {
        Error {
            retry_after_s: Some(seconds),
            ..self
        }
    }

    /// One answer for every credential failure, so a caller learns nothing about which spaces or
    /// credentials exist.
    #[must_use]
    pub fn unauthorized(message: &str) -> Self {
        Error::new(Code::Unauthorized, message)
    }

    /// A credential that is malformed, unknown, expired or revoked: one sentence for all, so the
    /// answer tells nothing about which.
    #[must_use]
    pub fn bad_credential() -> Self {
        Error::unauthorized("the credential is not valid (unknown, expired, or revoked)")
    }

    /// The write could not be made durable. The detail is for the log, not for the client.
    #[must_use]
    pub fn unavailable() -> Self {
        Error::new(
            Code::Unavailable,
            "the tracker could not store this durably right now; retry later",
        )
    }

    /// A bug. The caller logs the detail; the client gets this sentence only.
    #[must_use]
    pub fn internal() -> Self {
        Error::new(
            Code::Internal,
            "internal error; the details are in the server log",
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::Code;

    /// The body's `status` is serde's name of the code; the logs and the rejection log use
    /// `as_str`: they must be the same text.
    #[test]
    fn a_code_serializes_as_its_name() {
        use Code::*;
        for code in [
            InvalidJson,
            MissingField,
            InvalidEvent,
            InvalidValue,
            InvalidTime,
            InvalidCurrency,
            InvalidUid,
            InvalidEid,
            InvalidTgId,
            InvalidField,
            Unauthorized,
            PayloadTooLarge,
            NotFound,
            MethodNotAllowed,
            Conflict,
            RateLimited,
            Unavailable,
            Internal,
            MalformedRequest,
            UriTooLong,
            HeadersTooLarge,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
