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
//! | GET    | `/events`  | bearer secret       | [`read::get_events`]    |
//! | GET    | `/events/wait` | bearer secret   | [`read::get_events_wait`] |
//! | GET    | `/stats`   | bearer secret       | [`read::get_stats`]     |
//! | GET    | `/rejections` | bearer secret    | [`read::get_rejections`] |

pub mod handlers;
pub mod read;
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
        .and(app.clone())
        .and(query)
        .then(handlers::get_bind);
    let get_events = warp::path!("events")
        .and(warp::get())
        .and(app.clone())
        .and(authorization)
        .and(query)
        .then(read::get_events);
    let get_events_wait = warp::path!("events" / "wait")
        .and(warp::get())
        .and(app.clone())
        .and(authorization)
        .and(query)
        .then(read::get_events_wait);
    let get_stats = warp::path!("stats")
        .and(warp::get())
        .and(app.clone())
        .and(authorization)
        .and(query)
        .then(read::get_stats);
    let get_rejections = warp::path!("rejections")
        .and(warp::get())
        .and(app)
        .and(authorization)
        .and(query)
        .then(read::get_rejections);

    post_events
        .or(get_e)
        .unify()
        .or(post_bind)
        .unify()
        .or(get_bind)
        .unify()
        .or(post_clicks)
        .unify()
        .or(get_events)
        .unify()
        .or(get_events_wait)
        .unify()
        .or(get_stats)
        .unify()
        .or(get_rejections)
        .unify()
        .or(healthz)
        .unify()
        .recover(respond::recover)
        .unify()
}
