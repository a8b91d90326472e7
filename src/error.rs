//! The one error type every request path returns, with its stable machine code.
//!
//! Domain rules, authentication and storage all fail with an [`Error`]: a [`Code`] (the stable
//! `status` string, `docs/api.md#errors`), a sentence for a person, and the field at fault. The
//! mapping from [`Code`] to an HTTP status lives in `surface::respond`, and nowhere else.

use std::fmt;

/// Declares [`Code`], its snake-case names ([`Code::as_str`]) and [`Code::ALL`] from one list, so
/// that a code and its name cannot drift apart.
macro_rules! codes {
    ($($(#[$doc:meta])* $code:ident => $name:literal,)*) => {
        /// A stable machine code, sent to clients as `status`: its name in snake case
        /// ([`Code::as_str`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Code {
            $($(#[$doc])* $code,)*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$code,)*];

            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$code => $name,)*
                }
            }
        }
    };
}

codes! {
    InvalidJson => "invalid_json",
    MissingField => "missing_field",
    InvalidEvent => "invalid_event",
    InvalidValue => "invalid_value",
    InvalidTime => "invalid_time",
    InvalidCurrency => "invalid_currency",
    InvalidUid => "invalid_uid",
    InvalidEid => "invalid_eid",
    InvalidTgId => "invalid_tg_id",
    InvalidField => "invalid_field",
    Unauthorized => "unauthorized",
    /// The request is understood and its sender known, but not allowed from where it came (a
    /// view from an origin its link does not allow).
    Forbidden => "forbidden",
    PayloadTooLarge => "payload_too_large",
    NotFound => "not_found",
    MethodNotAllowed => "method_not_allowed",
    Conflict => "conflict",
    RateLimited => "rate_limited",
    Unavailable => "unavailable",
    Internal => "internal",
    /// Not HTTP the server can serve: a head that does not parse, HTTP/1.1 without `Host`.
    MalformedRequest => "malformed_request",
    UriTooLong => "uri_too_long",
    HeadersTooLarge => "headers_too_large",
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
        for &code in Code::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }
}
