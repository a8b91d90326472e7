//! What every HTTP way in shares, below both the API's handlers and the admin pages: a request
//! taken apart once ([`Call`], with its unread [`Body`]), the client's address the connection
//! layer puts on each request ([`ClientAddr`]), and the one mapping from errors to answers
//! ([`respond`]).

pub mod respond;

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use warp::http::{HeaderMap, Method, header};

use crate::app::App;
use crate::domain::input::Query;
use crate::error::{Code, Error};

/// The address of the client at the other end of the TCP connection (before any proxy header),
/// put into every request's extensions by the connection layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// The answer of a handler: a future that owns what it needs.
pub type Answer<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One request, taken apart once, as every handler is given it.
pub struct Call {
    pub app: Arc<App>,
    pub method: Method,
    /// The request's path, `/links/spring`.
    pub path: String,
    /// The path's `{name}` segment as it came, not percent-decoded (`spring` in
    /// `/links/{slug}`), or the rest of the path of a `{name...}` pattern.
    pub param: Option<String>,
    /// The raw query string, `""` when the URL has none (for the rejection log, redacted there).
    pub raw_query: String,
    /// The query, decoded.
    pub query: Query,
    pub headers: HeaderMap,
    /// The client's address (the peer, or what a trusted proxy says it is); `None` where no
    /// connection stands behind the request (warp's test requests).
    pub client: Option<IpAddr>,
    pub body: Body,
}

impl Call {
    /// A header's value as text; a value that is not visible ASCII counts as absent.
    #[must_use]
    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request body, not yet read: handlers read it after authenticating, within their limit.
pub struct Body {
    /// What `Content-Length` declared.
    declared: Option<u64>,
    stream: BodyStream,
}

impl Body {
    /// A body as warp streams it, with what its `Content-Length` declared.
    pub fn new(
        declared: Option<u64>,
        stream: impl Stream<Item = Result<impl Buf + Send, warp::Error>> + Send + 'static,
    ) -> Body {
        let stream = stream.map(|chunk| chunk.map(|mut b| b.copy_to_bytes(b.remaining())));
        Body {
            declared,
            stream: Box::pin(stream),
        }
    }

    /// Reads the whole body, refusing one over `limit` bytes, declared or streamed.
    pub async fn read(self, limit: u64) -> Result<Bytes, Error> {
        let too_large = || {
            Error::new(
                Code::PayloadTooLarge,
                format!("request body is larger than the limit of {limit} bytes"),
            )
        };
        if self.declared.is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut stream = self.stream;
        let mut out = BytesMut::with_capacity(self.declared.unwrap_or(512).min(limit) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                Error::new(
                    Code::InvalidJson,
                    format!("request body could not be read: {e}"),
                )
            })?;
            if (out.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out.freeze())
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, warp::Error>> + Send>>;
