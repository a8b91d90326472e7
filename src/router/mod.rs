//! The router of the main listener: every request is taken apart into a [`Call`] and handed to
//! the endpoint [`ROUTES`] names for its method and path, past that endpoint's credential check.
//!
//! Every endpoint is one entry of [`table::ROUTES`]: its method, path, credential, handler and
//! `OpenAPI` operation. From that one table come the router below, the `route` label of
//! `/metrics` ([`route_of`], [`route_labels`], handed to the metrics at start), the `Allow`
//! header of a `405` ([`allowed_methods`]) and the served `/openapi.json` (`openapi.rs`). It
//! sits above both the API's handlers (`http`) and the admin pages (`web`), which it names.
//!
//! The credential is checked here, before the handler runs and before the body is read, so a
//! handler of a space's endpoint is given the [`SpaceRef`](crate::domain::keyring::SpaceRef)
//! the credential acts for; its answer, success or failure, leaves through
//! [`access::finish`], which writes the access-log line and the rejection log.

mod openapi;
pub mod table;

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use warp::Filter;
use warp::http::{HeaderMap, HeaderValue, Method, header};
use warp::reply::Response;

use crate::app::App;
use crate::app::audit::Change;
use crate::app::auth::Presented;
use crate::domain::audit::BY_API;
use crate::domain::input::Query;
use crate::error::{Code, Error};
use crate::http::access::{self, Access};
use crate::surface::respond::{self, Auth};
use crate::surface::{Body, Call, ClientAddr};
use crate::web;
use table::{Guard, ROUTES};

pub use openapi::document as openapi_document;

/// The router of the main listener: every request is taken apart into a [`Call`] and handed
/// to the endpoint [`ROUTES`] names for its method and path.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    app.metrics.name_routes(route_labels());
    crate::http::document::publish(openapi_document());
    let pages = Arc::new(web::AdminPages::default());
    // The raw query, or "" when the URL has none (warp's `raw()` rejects that case).
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    let body = warp::body::stream();
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
                    body: Body::new(declared, stream),
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
        Ok(space) if audited(endpoint) => {
            let (name, client, subject) = (space.name.clone(), call.client, call.param.clone());
            let result = handler(call, space).await;
            if result.is_ok() {
                app.record_audit(Change {
                    who: BY_API,
                    address: client,
                    action: format!("{} {}", endpoint.method, endpoint.path),
                    space: Some(&name),
                    subject: subject.as_deref(),
                })
                .await;
            }
            result
        }
        Ok(space) => handler(call, space).await,
        Err(e) => Err(e),
    };
    access::finish(&app, &access, result)
}

/// Whether a request to `endpoint` changes what the audit log keeps: a change made with a
/// space's secret (links, destinations, costs, settings), not the events and clicks it sends.
fn audited(endpoint: &table::Endpoint) -> bool {
    matches!(endpoint.guard, Guard::Secret(_))
        && endpoint.method != Method::GET
        && !["/events", "/events/batch", "/bind", "/clicks"].contains(&endpoint.path)
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
        .map(table::Endpoint::label)
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
