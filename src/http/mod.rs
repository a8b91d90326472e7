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
//! | POST   | `/links`   | bearer secret       | [`links::post_links`]   |
//! | GET    | `/links`   | bearer secret       | [`links::get_links`]    |
//! | DELETE | `/links/<slug>` | bearer secret  | [`links::delete_link`]  |
//! | GET, HEAD | `/l/<slug>` | none (public)   | [`links::visit`]        |
//! | GET    | `/openapi.json` | none         | [`handlers::openapi`]   |
//! | GET, POST | `/admin/…` | admin session    | [`admin::serve`] (its own table) |

pub mod handlers;
pub mod links;
pub mod read;
pub mod respond;

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use warp::Filter;
use warp::http::Method;
use warp::reply::Response;

use crate::app::App;
use crate::metrics::Route;
use crate::server::connection::ClientAddr;
use crate::web;

/// Every route of the tracker, with unmatched requests turned into the JSON error body.
// Long on purpose: every route in one place, as the module's table lists them.
#[allow(clippy::too_many_lines)]
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
        .and(app.clone())
        .and(authorization)
        .and(query)
        .then(read::get_rejections);
    let post_links = warp::path!("links")
        .and(warp::post())
        .and(app.clone())
        .and(authorization)
        .and(body)
        .then(links::post_links);
    let get_links = warp::path!("links")
        .and(warp::get())
        .and(app.clone())
        .and(authorization)
        .and(query)
        .then(links::get_links);
    let delete_link = warp::path!("links" / String)
        .and(warp::delete())
        .and(app.clone())
        .and(authorization)
        .then(|slug, app, authorization| links::delete_link(app, slug, authorization));
    let openapi = warp::path!("openapi.json")
        .and(warp::get())
        .map(handlers::openapi);
    let pages = Arc::new(web::AdminPages::default());
    let admin_page = warp::path("admin")
        .and(warp::path::full())
        .and(warp::method())
        .and(query)
        .and(warp::header::optional::<String>("cookie"))
        .and(client_ip(app.clone()))
        .and(body)
        .and(app.clone())
        .then(
            move |path: warp::path::FullPath,
                  method,
                  query,
                  cookie,
                  client: Option<IpAddr>,
                  declared,
                  body,
                  app| {
                let pages = pages.clone();
                async move {
                    let started = std::time::Instant::now();
                    let body = match handlers::read_body(body, declared, web::MAX_FORM_BYTES).await
                    {
                        Ok(body) => body,
                        Err(e) => {
                            return web::refuse(&method, path.as_str(), &e, started);
                        }
                    };
                    let request = web::Request {
                        method,
                        path: path.as_str().to_owned(),
                        query,
                        cookie,
                        client,
                        body,
                    };
                    web::serve(app, pages, request).await
                }
            },
        );
    let head = warp::head()
        .map(|| true)
        .or(warp::get().map(|| false))
        .unify();
    let visit = warp::path!("l" / String)
        .and(head)
        .and(client_ip(app.clone()))
        .and(app)
        .and(query)
        .and(warp::header::optional::<String>("user-agent"))
        .then(|slug, head, client, app, query, user_agent| {
            links::visit(app, slug, head, client, query, user_agent)
        });

    // The reads, links, health, this document and the admin page behind one boxed filter: a request there pays one
    // allocation, and the router's type is a fraction as deep (the release build took minutes
    // on it and passed the compiler's recursion limit).
    let rest = get_events
        .or(get_events_wait)
        .unify()
        .or(get_stats)
        .unify()
        .or(get_rejections)
        .unify()
        .or(post_links)
        .unify()
        .or(get_links)
        .unify()
        .or(delete_link)
        .unify()
        .or(healthz)
        .unify()
        .or(openapi)
        .unify()
        .or(admin_page)
        .unify()
        .boxed();
    // The busiest path first: every ad click comes through `/l/<slug>`.
    visit
        .or(post_events)
        .unify()
        .or(get_e)
        .unify()
        .or(post_bind)
        .unify()
        .or(get_bind)
        .unify()
        .or(post_clicks)
        .unify()
        .or(rest)
        .unify()
        .recover(respond::recover)
        .unify()
}

/// The request's client address (`App::client_ip`: the peer, or what a trusted proxy says);
/// `None` where no connection stands behind the request (warp's test requests).
fn client_ip(
    app: impl Filter<Extract = (Arc<App>,), Error = Infallible> + Clone + Send + Sync,
) -> impl Filter<Extract = (Option<IpAddr>,), Error = warp::Rejection> + Clone {
    warp::ext::optional::<ClientAddr>()
        .and(warp::header::optional::<String>("x-forwarded-for"))
        .and(app)
        .map(
            |peer: Option<ClientAddr>, forwarded: Option<String>, app: Arc<App>| {
                peer.map(|p| app.client_ip(p.0.ip(), forwarded.as_deref()))
            },
        )
}

/// Where a route's paths are: one path, or every path below a prefix.
enum Paths {
    Is(&'static str),
    Under(&'static str),
    /// The path and every path below it (`/admin`, `/admin/...`).
    Tree(&'static str),
}

impl Paths {
    fn contain(&self, path: &str) -> bool {
        match *self {
            Paths::Is(p) => path == p,
            Paths::Under(prefix) => path.starts_with(prefix),
            Paths::Tree(root) => path
                .strip_prefix(root)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
        }
    }
}

/// Every method and path the routes in `routes` take, with what `/metrics` counts it under:
/// the one table `route_of` and `allowed_methods` both read, so the `Allow` of a `405` and the
/// metrics cannot disagree. A path's methods stand in the order its `Allow` lists them.
const TABLE: [(Method, Paths, Route); 18] = [
    (Method::GET, Paths::Is("/healthz"), Route::Healthz),
    (Method::GET, Paths::Is("/openapi.json"), Route::OpenApi),
    (Method::GET, Paths::Is("/events"), Route::GetEvents),
    (Method::POST, Paths::Is("/events"), Route::PostEvents),
    (Method::GET, Paths::Is("/e"), Route::GetE),
    (Method::POST, Paths::Is("/clicks"), Route::PostClicks),
    (Method::GET, Paths::Is("/bind"), Route::GetBind),
    (Method::POST, Paths::Is("/bind"), Route::PostBind),
    (Method::GET, Paths::Is("/events/wait"), Route::EventsWait),
    (Method::GET, Paths::Is("/stats"), Route::Stats),
    (Method::GET, Paths::Is("/rejections"), Route::Rejections),
    (Method::GET, Paths::Is("/links"), Route::GetLinks),
    (Method::POST, Paths::Is("/links"), Route::PostLinks),
    (Method::DELETE, Paths::Under("/links/"), Route::DeleteLink),
    (Method::GET, Paths::Under("/l/"), Route::Visit),
    (Method::HEAD, Paths::Under("/l/"), Route::Visit),
    (Method::GET, Paths::Tree("/admin"), Route::Admin),
    (Method::POST, Paths::Tree("/admin"), Route::Admin),
];

/// The route a request is counted under in `/metrics`: one of a fixed set, never the raw path,
/// so that no client can grow the number of series; `Other` for a method a path does not take.
#[must_use]
pub fn route_of(method: &Method, path: &str) -> Route {
    TABLE
        .iter()
        .find(|(m, paths, _)| m == method && paths.contain(path))
        .map_or(Route::Other, |&(_, _, route)| route)
}

/// The methods a path takes: the `Allow` header of a `405` (`connection.rs`). A test tries
/// every method on every path, so a route added to `routes` without its line in `TABLE` fails it.
#[must_use]
pub fn allowed_methods(path: &str) -> Option<String> {
    let methods: Vec<&str> = TABLE
        .iter()
        .filter(|(_, paths, _)| paths.contain(path))
        .map(|(m, _, _)| m.as_str())
        .collect();
    (!methods.is_empty()).then(|| methods.join(", "))
}
