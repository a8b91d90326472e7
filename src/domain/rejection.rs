//! The rejection log (`docs/api.md#rejection-log`): a space's recent refused requests, so a user can
//! answer "why wasn't my conversion counted" without the server's logs.
//!
//! A request is logged under a space when it carried a credential of that space: a valid one, or
//! one that expired after a rotation or was revoked (the most common reason a postback silently
//! stops counting). Nothing here holds a credential: the query is kept with `token=` redacted.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How many rejections a space keeps: the newest replace the oldest.
pub const KEPT_PER_SPACE: u32 = 1000;

/// One refused request, as stored and as `GET /rejections` shows it.
///
/// The stored record (`storage::records::RejectionRecord`) holds this struct as it is, and
/// `postcard` writes its fields in order, by type: reordering, retyping, adding or removing a
/// field changes the data file's layout (a new record version), as would a serde attribute that
/// leaves a field out of one encoding. A golden test there pins the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rejection {
    pub at_ms: u64,
    pub method: String,
    pub endpoint: String,
    pub http_status: u16,
    /// The stable machine code (`invalid_value`).
    pub status: String,
    pub field: Option<String>,
    /// The sentence the caller was answered.
    pub error: String,
    /// The query string with `token=` and anything credential-shaped redacted; `None` for a
    /// request without one.
    pub query: Option<String>,
}

impl Rejection {
    #[must_use]
    pub fn new(
        at_ms: u64,
        method: &str,
        endpoint: &str,
        http_status: u16,
        error: &Error,
        query: Option<&str>,
    ) -> Rejection {
        Rejection {
            at_ms,
            method: method.to_owned(),
            endpoint: endpoint.to_owned(),
            http_status,
            status: error.code.as_str().to_owned(),
            field: error.field.map(str::to_owned),
            error: error.message.clone(),
            query: query
                .filter(|q| !q.is_empty())
                .map(crate::domain::credential::redact),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    #[test]
    fn the_query_is_kept_without_its_token() {
        let e = Error::field(
            Code::InvalidValue,
            "value",
            "value must be a decimal number",
        );
        let r = Rejection::new(
            1,
            "GET",
            "/e",
            422,
            &e,
            Some("token=trk_it_0123456789abcdefghijklmnopqrstuv&event=deposit&value=12,5"),
        );
        let q = r.query.unwrap();
        assert!(!q.contains("0123456789abcdefghij"), "{q}");
        assert!(q.contains("value=12,5"), "{q}");
        assert_eq!(r.field.as_deref(), Some("value"));
        assert_eq!(r.status, "invalid_value");
    }
}
