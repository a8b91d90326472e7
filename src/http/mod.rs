//! The HTTP surface: every route in one place, the handlers, and the one error mapping.
//!
//! | method | path       | credential          | handler                 |
//! |--------|------------|---------------------|-------------------------|
//! | GET    | `/healthz` | none                | [`handlers::healthz`]   |
//! | POST   | `/events`  | bearer secret       | [`handlers::post_events`] |
//! | GET    | `/e`       | `token=` ingest     | [`handlers::get_e`]     |
//! | POST   | `/clicks`  | bearer secret       | [`handlers::post_clicks`] |
//! | POST   | `/bind`    | bearer secret       | [`handlers::post_bind`] |
//! | GET    | `/bind`    | `token=` ingest     | [`handlers::get_bind`]  |

pub mod connection;
pub mod handlers;
pub mod respond;

use std::convert::Infallible;
use std::sync::Arc;

use warp::Filter;
use warp::reply::Response;

use crate::app::App;

/// Every route of the tracker, with unmatched requests turned into the JSON error body.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    let app = warp::any().map(move || app.clone());
    // The raw query, or "" when the URL has none (warp's `raw()` rejects that case).
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    let authorization = warp::header::optional::<String>("authorization");
    let body = warp::header::optional::<u64>("content-length").and(warp::body::stream());

    let healthz = warp::path!("healthz")
        .and(warp::get())
        .and(app.clone())
        .then(handlers::healthz);
    let post_events = warp::path!("events")
        .and(warp::post())
        .and(app.clone())
        .and(authorization)
        .and(body)
        .then(handlers::post_events);
    let get_e = warp::path!("e")
        .and(warp::get())
        .and(app.clone())
        .and(query)
        .then(handlers::get_e);
    let post_clicks = warp::path!("clicks")
        .and(warp::post())
        .and(app.clone())
        .and(authorization)
        .and(body)
        .then(handlers::post_clicks);
    let post_bind = warp::path!("bind")
        .and(warp::post())
        .and(app.clone())
        .and(authorization)
        .and(body)
        .then(handlers::post_bind);
    let get_bind = warp::path!("bind")
        .and(warp::get())
        .and(app)
        .and(query)
        .then(handlers::get_bind);

    post_events
        .or(get_e)
        .unify()
        .or(post_bind)
        .unify()
        .or(get_bind)
        .unify()
        .or(post_clicks)
        .unify()
        .or(healthz)
        .unify()
        .recover(respond::recover)
        .unify()
}

/// The methods each path takes: the `Allow` header of a `405` (`connection.rs`). A test tries
/// every method on every path listed here, so a route added without its line here fails it.
#[must_use]
pub fn allowed_methods(path: &str) -> Option<&'static str> {
    Some(match path {
        "/healthz" | "/e" => "GET",
        "/events" | "/clicks" => "POST",
        "/bind" => "GET, POST",
        _ => return None,
    })
}
