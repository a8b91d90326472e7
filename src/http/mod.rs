//! The HTTP surface of the main listener: the route table, the handlers, and the one mapping
//! from errors to answers.
//!
//! Every endpoint is one entry of [`routes::ROUTES`]: its method, path, credential, handler and
//! `OpenAPI` operation. From that one table come the router below (one warp filter that takes a
//! request apart and dispatches it), the `route` label of `/metrics` ([`route_of`]), the `Allow`
//! header of a `405` ([`allowed_methods`]) and the served `/openapi.json` (`openapi.rs`). Adding
//! an endpoint is one entry there and one handler.
//!
//! The credential is checked here, before the handler runs and before the body is read, so a
//! handler of a space's endpoint is given the [`SpaceRef`] the credential acts for; its answer,
//! success or failure, leaves through [`handlers::finish`], which writes the access-log line and
//! the rejection log.

pub mod costs;
pub mod destinations;
pub mod handlers;
pub mod links;
mod openapi;
pub mod read;
pub mod respond;
pub mod routes;
pub mod space;

use std::borrow::Cow;
use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use warp::Filter;
use warp::http::{HeaderMap, HeaderValue, Method, header};
use warp::reply::Response;

use crate::app::{App, Presented};
use crate::domain::input::Query;
use crate::error::{Code, Error};
use crate::server::connection::ClientAddr;
use crate::web;
use handlers::{Access, finish};
use respond::Auth;
use routes::{Guard, ROUTES};

pub use openapi::document as openapi_document;

/// The answer of a handler: a future that owns what it needs.
pub type Answer<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One request, taken apart once, as every handler is given it.
pub struct Call {
    pub app: Arc<App>,
    pub method: Method,
    /// The request's path, `/links/spring`.
    pub path: String,
    /// The value of the path's `{name}` segment, percent-decoded (`spring` in `/links/{slug}`),
    /// or the rest of the path of a `{name...}` pattern.
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

/// The router of the main listener: every request is taken apart into a [`Call`] and handed
/// to the endpoint [`ROUTES`] names for its method and path.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    let pages = Arc::new(web::AdminPages::default());
    // The raw query, or "" when the URL has none (warp's `raw()` rejects that case).
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    let body = warp::body::stream().map(body_stream);
    warp::method()
        .and(warp::path::full())
        .and(query)
        .and(warp::header::headers_cloned())
        .and(warp::ext::optional::<ClientAddr>())
        .and(body)
        .then(
            move |method: Method,
                  path: warp::path::FullPath,
                  raw_query: String,
                  headers: HeaderMap,
                  peer: Option<ClientAddr>,
                  stream| {
                let (app, pages) = (app.clone(), pages.clone());
                let declared = headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok()?.parse().ok());
                let client =
                    peer.map(|p| app.client_ip(p.0.ip(), forwarded_for(&headers).as_deref()));
                let call = Call {
                    app,
                    method,
                    path: path.as_str().to_owned(),
                    param: None,
                    query: Query::parse(&raw_query),
                    raw_query,
                    headers,
                    client,
                    body: Body { declared, stream },
                };
                dispatch(call, pages)
            },
        )
        // Only warp's own failures come here (a body taken twice cannot happen): a JSON error.
        .recover(respond::recover)
        .unify()
}

/// Every `X-Forwarded-For` line, in order, as one list: a proxy (`HAProxy`) may add a line of its
/// own after the client's, and the right-most entries are the ones a proxy vouches for. A line
/// that is not text stands as one unreadable entry, which stops the walk there. Allocates only
/// for a request with more than one line.
fn forwarded_for(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    let mut lines = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.to_str().unwrap_or("?"));
    let first = lines.next()?;
    let Some(second) = lines.next() else {
        return Some(Cow::Borrowed(first));
    };
    let mut all = format!("{first}, {second}");
    for line in lines {
        all.push_str(", ");
        all.push_str(line);
    }
    Some(Cow::Owned(all))
}

/// Warp's body stream as the one type every [`Body`] holds.
fn body_stream(
    stream: impl Stream<Item = Result<impl Buf + Send, warp::Error>> + Send + 'static,
) -> BodyStream {
    Box::pin(stream.map(|chunk| chunk.map(|mut b| b.copy_to_bytes(b.remaining()))))
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, warp::Error>> + Send>>;

/// Hands `call` to its endpoint, past the endpoint's credential check.
async fn dispatch(mut call: Call, pages: Arc<web::AdminPages>) -> Response {
    let Some((endpoint, param)) = ROUTES
        .iter()
        .find_map(|e| Some((e, e.matches(&call.method, &call.path)?)))
    else {
        let err = if allowed_methods(&call.path).is_some() {
            Error::new(
                Code::MethodNotAllowed,
                "this endpoint does not take that method",
            )
        } else {
            Error::new(Code::NotFound, "no such endpoint")
        };
        return not_routed(&call.path, &err);
    };
    call.param = param;
    let (presented, auth) = match endpoint.guard {
        Guard::Public(handler) => return handler(call).await,
        Guard::Page(handler) => return handler(call, pages).await,
        Guard::Secret(_) => {
            let header = call.header(header::AUTHORIZATION).map(str::to_owned);
            (Credential::Bearer(header), Auth::Bearer)
        }
        Guard::IngestToken(_) => (
            Credential::Token(call.query.get("token").map(str::to_owned)),
            Auth::Token,
        ),
    };
    let (Guard::Secret(handler) | Guard::IngestToken(handler)) = endpoint.guard else {
        unreachable!("public and page endpoints returned above")
    };
    let mut access = Access::new(endpoint.method.as_str(), endpoint.path, auth);
    if !call.raw_query.is_empty() {
        access.query(&call.raw_query);
    }
    let app = call.app.clone();
    let result = match access.authenticate(&app, presented.as_presented()) {
        Ok(space) => handler(call, space).await,
        Err(e) => Err(e),
    };
    finish(&app, &access, result)
}

/// A credential as the request carried it, owned for the handler's future.
enum Credential {
    Bearer(Option<String>),
    Token(Option<String>),
}

impl Credential {
    fn as_presented(&self) -> Presented<'_> {
        match self {
            Credential::Bearer(h) => Presented::Bearer(h.as_deref()),
            Credential::Token(t) => Presented::IngestToken(t.as_deref()),
        }
    }
}

/// The answer to a request no endpoint takes: `404`, or `405` with the `Allow` header.
fn not_routed(path: &str, err: &Error) -> Response {
    let mut response = respond::error(err, Auth::None);
    if err.code == Code::MethodNotAllowed
        && let Some(allow) = allowed_methods(path)
        && let Ok(allow) = HeaderValue::try_from(allow)
    {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// The route a request is counted under in `/metrics`: the index of its endpoint in
/// [`ROUTES`], never the raw path, so no client can grow the number of series;
/// `ROUTES.len()` (`other`) for anything no endpoint takes.
#[must_use]
pub fn route_of(method: &Method, path: &str) -> usize {
    ROUTES
        .iter()
        .position(|e| e.matches(method, path).is_some())
        .unwrap_or(ROUTES.len())
}

/// The `route` label of every index [`route_of`] answers, in order, `other` last.
#[must_use]
pub fn route_labels() -> Vec<String> {
    ROUTES
        .iter()
        .map(routes::Endpoint::label)
        .chain(std::iter::once("other".to_owned()))
        .collect()
}

/// The methods a path takes, in table order: the `Allow` header of a `405`.
#[must_use]
pub fn allowed_methods(path: &str) -> Option<String> {
    let mut methods: Vec<&str> = Vec::new();
    for e in ROUTES.iter().filter(|e| e.path_matches(path).is_some()) {
        if !methods.contains(&e.method.as_str()) {
            methods.push(e.method.as_str());
        }
    }
    (!methods.is_empty()).then(|| methods.join(", "))
}
