//! Every endpoint of the main listener, one entry each: the single source of the router, the
//! `route` label of `/metrics`, the `Allow` header of a `405` and the served `/openapi.json`.
//!
//! An entry names its method, its path (`{name}` is one segment, given to the handler as
//! `Call::param` as it came (not percent-decoded); `{name...}` is the rest of the path, possibly empty), who may call it
//! ([`Guard`], which also carries the handler, so a handler can never be reached past a check it
//! does not expect), and its `OpenAPI` operation ([`Operation`]): the types of its request and
//! answer bodies, and a file in `openapi/` with what no type holds (`openapi.rs` assembles them;
//! the operation's `security` comes from the guard). What each endpoint does is written in `docs/api.md`.

use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use warp::http::Method;
use warp::reply::Response;

use crate::domain::batch::BatchBody;
use crate::domain::click::{BindBody, ClickBody};
use crate::domain::cost::CostBody;
use crate::domain::event::EventBody;
use crate::domain::init_data::{MiniAppBindBody, MiniAppEventBody};
use crate::domain::keyring::SpaceRef;
use crate::domain::link::NewLinkJson;
use crate::domain::settings::SettingsBody;
use crate::error::Error;
use crate::http::{
    batch, conversions, costs, destinations, document, health, ingest, landing, links, miniapp,
    read, space, telegram,
};
use crate::platform::{DestinationChangeJson, NewDestinationJson, RetryBody, TestBody};
use crate::surface::respond::Done;
use crate::surface::{Answer, Call};
use crate::web;

/// A handler of a public endpoint, or of one that answers for itself (a tracking link).
pub type PublicHandler = fn(Call) -> Answer<Response>;
/// A handler of a space's endpoint: called with the space the request's credential acts for;
/// its error is answered as the JSON error body and logged in the space's rejection log.
pub type SpaceHandler = fn(Call, SpaceRef) -> Answer<Result<Response, Error>>;
/// The admin page's handler: its own sessions, forms and pages.
pub type PageHandler = fn(Call, Arc<web::AdminPages>) -> Answer<Response>;

/// Who may call an endpoint, with the handler that runs once the check has passed.
#[derive(Clone, Copy)]
pub enum Guard {
    /// Anyone.
    Public(PublicHandler),
    /// The space's secret, as `Authorization: Bearer <secret>`.
    Secret(SpaceHandler),
    /// The space's ingest token, as `?token=`.
    IngestToken(SpaceHandler),
    /// The admin page's session, checked by the page itself (its login form needs none).
    Page(PageHandler),
}

/// One endpoint.
pub struct Endpoint {
    pub method: Method,
    /// The path template, as `OpenAPI` writes it: `/links/{slug}`.
    pub path: &'static str,
    pub guard: Guard,
    /// The `OpenAPI` operation (see the module doc); `None` for what is not JSON (the admin page).
    pub openapi: Option<Operation>,
}

/// An endpoint's operation in `/openapi.json`. Its JSON bodies are named by their Rust types,
/// whose schemas `openapi.rs` derives (schemars, serde's attributes respected); the rest, which
/// no type holds, is the file's: summary, description, query parameters, the description of each
/// answer and the error answers.
pub struct Operation {
    /// The operation object of a file in `openapi/`, without its request body or the success
    /// answer's JSON schema.
    pub file: &'static str,
    /// The type of its JSON request body, if it takes one.
    pub body: Option<TypeSchema>,
    /// The status of its JSON success answer, and the answer's type.
    pub answer: Option<(u16, TypeSchema)>,
}

/// The schema of a type, added to a generator's definitions; a `$ref` to it.
pub type TypeSchema = fn(&mut SchemaGenerator) -> Schema;

/// The [`TypeSchema`] of `T`.
const fn schema<T: JsonSchema>() -> TypeSchema {
    SchemaGenerator::subschema_for::<T>
}

/// A handler `fn(Call) -> Answer<_>` (or with more arguments) from an `async fn`.
macro_rules! boxed {
    ($f:path) => {
        |call| Box::pin($f(call))
    };
    ($f:path, 2) => {
        |call, with| Box::pin($f(call, with))
    };
}

/// Every endpoint, the busiest first (`/l/<slug>`: every ad click comes through it): the router
/// tries them in order.
pub static ROUTES: [Endpoint; 41] = [
    Endpoint {
        method: Method::GET,
        path: "/l/{slug}",
        guard: Guard::Public(boxed!(links::visit)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_visit.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/events",
        guard: Guard::Secret(boxed!(ingest::post_events, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_events.json"),
            body: Some(schema::<EventBody<'static>>()),
            answer: Some((200, schema::<ingest::EventAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/events/batch",
        guard: Guard::Secret(boxed!(batch::post_events_batch, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_events_batch.json"),
            body: Some(schema::<BatchBody<'static>>()),
            answer: Some((200, schema::<batch::BatchAnswer<'static>>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/e",
        guard: Guard::IngestToken(boxed!(ingest::get_e, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_e.json"),
            body: None,
            answer: Some((200, schema::<ingest::EventAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/bind",
        guard: Guard::Secret(boxed!(ingest::post_bind, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_bind.json"),
            body: Some(schema::<BindBody<'static>>()),
            answer: Some((200, schema::<ingest::BindAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/bind",
        guard: Guard::IngestToken(boxed!(ingest::get_bind, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_bind.json"),
            body: None,
            answer: Some((200, schema::<ingest::BindAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/clicks",
        guard: Guard::Secret(boxed!(ingest::post_clicks, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_clicks.json"),
            body: Some(schema::<ClickBody<'static>>()),
            answer: Some((200, schema::<ingest::ClickAnswer>())),
        }),
    },
    Endpoint {
        method: Method::HEAD,
        path: "/l/{slug}",
        guard: Guard::Public(boxed!(links::visit)),
        openapi: Some(Operation {
            file: include_str!("openapi/head_visit.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/l/{slug}/view",
        guard: Guard::Public(boxed!(landing::view)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_link_view.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/t.js",
        guard: Guard::Public(boxed!(landing::script)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_script.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/miniapp/{space}/bind",
        guard: Guard::Public(boxed!(miniapp::post_bind)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_miniapp_bind.json"),
            body: Some(schema::<MiniAppBindBody<'static>>()),
            answer: Some((200, schema::<ingest::BindAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/miniapp/{space}/events",
        guard: Guard::Public(boxed!(miniapp::post_events)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_miniapp_events.json"),
            body: Some(schema::<MiniAppEventBody<'static>>()),
            answer: Some((200, schema::<ingest::EventAnswer>())),
        }),
    },
    Endpoint {
        method: Method::OPTIONS,
        path: "/miniapp/{space}/bind",
        guard: Guard::Public(boxed!(miniapp::preflight)),
        // A browser's CORS preflight, not an operation of the API.
        openapi: None,
    },
    Endpoint {
        method: Method::OPTIONS,
        path: "/miniapp/{space}/events",
        guard: Guard::Public(boxed!(miniapp::preflight)),
        // A browser's CORS preflight, not an operation of the API.
        openapi: None,
    },
    Endpoint {
        method: Method::GET,
        path: "/events",
        guard: Guard::Secret(boxed!(read::get_events, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_events.json"),
            body: None,
            answer: Some((200, schema::<read::FeedAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/events/wait",
        guard: Guard::Secret(boxed!(read::get_events_wait, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_events_wait.json"),
            body: None,
            answer: Some((200, schema::<read::FeedAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/stats",
        guard: Guard::Secret(boxed!(read::get_stats, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_stats.json"),
            body: None,
            answer: Some((200, schema::<read::StatsAnswers>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/rejections",
        guard: Guard::Secret(boxed!(read::get_rejections, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_rejections.json"),
            body: None,
            answer: Some((200, schema::<read::RejectionsAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/links",
        guard: Guard::Secret(boxed!(links::post_links, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_links.json"),
            body: Some(schema::<NewLinkJson>()),
            answer: Some((201, schema::<links::LinkAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/links",
        guard: Guard::Secret(boxed!(links::get_links, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_links.json"),
            body: None,
            answer: Some((200, schema::<links::LinksAnswer>())),
        }),
    },
    Endpoint {
        method: Method::DELETE,
        path: "/links/{slug}",
        guard: Guard::Secret(boxed!(links::delete_link, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/delete_link.json"),
            body: None,
            answer: Some((200, schema::<Done>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/destinations",
        guard: Guard::Secret(boxed!(destinations::post_destinations, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_destinations.json"),
            body: Some(schema::<NewDestinationJson>()),
            answer: Some((201, schema::<destinations::DestinationAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/destinations",
        guard: Guard::Secret(boxed!(destinations::get_destinations, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_destinations.json"),
            body: None,
            answer: Some((200, schema::<destinations::DestinationsAnswer>())),
        }),
    },
    Endpoint {
        method: Method::PATCH,
        path: "/destinations/{name}",
        guard: Guard::Secret(boxed!(destinations::patch_destination, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/patch_destination.json"),
            body: Some(schema::<DestinationChangeJson>()),
            answer: Some((200, schema::<destinations::DestinationAnswer>())),
        }),
    },
    Endpoint {
        method: Method::DELETE,
        path: "/destinations/{name}",
        guard: Guard::Secret(boxed!(destinations::delete_destination, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/delete_destination.json"),
            body: None,
            answer: Some((200, schema::<Done>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/destinations/{name}/test",
        guard: Guard::Secret(boxed!(destinations::post_destination_test, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_destination_test.json"),
            body: Some(schema::<TestBody>()),
            answer: Some((200, schema::<destinations::TestAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/destinations/{name}/rotate-secret",
        guard: Guard::Secret(boxed!(destinations::post_destination_rotate_secret, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_destination_rotate_secret.json"),
            body: None,
            answer: Some((200, schema::<destinations::DestinationAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/deliveries",
        guard: Guard::Secret(boxed!(destinations::get_deliveries, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_deliveries.json"),
            body: None,
            answer: Some((200, schema::<destinations::DeliveriesAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/deliveries/retry",
        guard: Guard::Secret(boxed!(destinations::post_deliveries_retry, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_deliveries_retry.json"),
            body: Some(schema::<RetryBody<'static>>()),
            answer: Some((200, schema::<destinations::RetryAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/space",
        guard: Guard::Secret(boxed!(space::get_space, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_space.json"),
            body: None,
            answer: Some((200, schema::<space::SpaceAnswer<'static>>())),
        }),
    },
    Endpoint {
        method: Method::PATCH,
        path: "/space",
        guard: Guard::Secret(boxed!(space::patch_space, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/patch_space.json"),
            body: Some(schema::<SettingsBody<'static>>()),
            answer: Some((200, schema::<space::SpaceAnswer<'static>>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/costs",
        guard: Guard::Secret(boxed!(costs::post_costs, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_costs.json"),
            body: Some(schema::<CostBody<'static>>()),
            answer: Some((200, schema::<costs::CostAnswer>())),
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/costs/fetch",
        guard: Guard::Secret(boxed!(costs::post_costs_fetch, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/post_costs_fetch.json"),
            body: None,
            answer: Some((200, schema::<costs::FetchAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/costs",
        guard: Guard::Secret(boxed!(costs::get_costs, 2)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_costs.json"),
            body: None,
            answer: Some((200, schema::<costs::CostsAnswer>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/healthz",
        guard: Guard::Public(boxed!(health::healthz)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_healthz.json"),
            body: None,
            answer: Some((200, schema::<Done>())),
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/openapi.json",
        guard: Guard::Public(boxed!(document::serve)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_openapi.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/conversions/{space}/{file}",
        guard: Guard::Public(boxed!(conversions::get_conversions)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_conversions.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::GET,
        path: "/conversions/{space}/{destination}/{file}",
        guard: Guard::Public(boxed!(conversions::get_conversion_event)),
        openapi: Some(Operation {
            file: include_str!("openapi/get_conversion_event.json"),
            body: None,
            answer: None,
        }),
    },
    Endpoint {
        method: Method::POST,
        path: "/telegram/{space}",
        guard: Guard::Public(boxed!(telegram::post_update)),
        // Telegram's, not a user's: `http/telegram.rs`.
        openapi: None,
    },
    Endpoint {
        method: Method::GET,
        path: "/admin/{page...}",
        guard: Guard::Page(boxed!(web::serve, 2)),
        openapi: None,
    },
    Endpoint {
        method: Method::POST,
        path: "/admin/{page...}",
        guard: Guard::Page(boxed!(web::serve, 2)),
        openapi: None,
    },
];

impl Endpoint {
    /// The `route` label of `/metrics`: `POST /events`.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Whether the endpoint takes `method` on `path`; if so, its path parameter.
    #[must_use]
    pub fn matches(&self, method: &Method, path: &str) -> Option<Option<String>> {
        if *method != self.method {
            return None;
        }
        self.path_matches(path)
    }

    /// Whether `path` is this endpoint's path, whatever the method; if so, its parameter.
    #[must_use]
    pub fn path_matches(&self, path: &str) -> Option<Option<String>> {
        if self.path.matches('{').count() > 1 {
            // `/conversions/{space}/{file}`: a segment each, given joined by `/`.
            let mut segments = path.split('/');
            let mut params = Vec::new();
            for part in self.path.split('/') {
                let segment = segments.next()?;
                if part.starts_with('{') {
                    if segment.is_empty() {
                        return None;
                    }
                    params.push(segment);
                } else if part != segment {
                    return None;
                }
            }
            return segments.next().is_none().then(|| Some(params.join("/")));
        }
        let (fixed, param) = match self.path.find('{') {
            Some(at) => (&self.path[..at], Some(&self.path[at..])),
            None => (self.path, None),
        };
        match param {
            None => (path == fixed).then_some(None),
            Some(p) if p.ends_with("...}") => {
                // `/admin/{page...}`: `/admin` itself, or anything below it.
                let root = fixed.trim_end_matches('/');
                let rest = path.strip_prefix(root)?;
                (rest.is_empty() || rest.starts_with('/'))
                    .then(|| Some(rest.trim_start_matches('/').to_owned()))
            }
            Some(p) => {
                // `/destinations/{name}/test`: one segment, then what follows the parameter.
                let after = &p[p.find('}').map_or(p.len(), |close| close + 1)..];
                let segment = path.strip_prefix(fixed)?.strip_suffix(after)?;
                if segment.is_empty() || segment.contains('/') {
                    return None;
                }
                Some(Some(segment.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(method: &Method, path: &str) -> Option<(String, Option<String>)> {
        ROUTES
            .iter()
            .find_map(|e| Some((e.label(), e.matches(method, path)?)))
    }

    #[test]
    fn paths_match_exactly_and_take_their_parameter() {
        assert_eq!(
            find(&Method::POST, "/events"),
            Some(("POST /events".into(), None))
        );
        assert_eq!(find(&Method::POST, "/events/"), None);
        assert_eq!(find(&Method::POST, "/eventsx"), None);
        assert_eq!(
            find(&Method::DELETE, "/links/spring"),
            Some(("DELETE /links/{slug}".into(), Some("spring".into())))
        );
        assert_eq!(find(&Method::DELETE, "/links/"), None);
        assert_eq!(
            find(&Method::POST, "/destinations/meta/test"),
            Some(("POST /destinations/{name}/test".into(), Some("meta".into())))
        );
        assert_eq!(find(&Method::POST, "/destinations//test"), None);
        assert_eq!(find(&Method::POST, "/destinations/a/b/test"), None);
        assert_eq!(find(&Method::POST, "/destinations/meta/tests"), None);
        assert_eq!(find(&Method::DELETE, "/links/a/b"), None);
        assert_eq!(
            find(&Method::GET, "/conversions/shop/google.csv"),
            Some((
                "GET /conversions/{space}/{file}".into(),
                Some("shop/google.csv".into())
            ))
        );
        assert_eq!(
            find(&Method::GET, "/conversions/shop/google/deposit.csv"),
            Some((
                "GET /conversions/{space}/{destination}/{file}".into(),
                Some("shop/google/deposit.csv".into())
            ))
        );
        assert_eq!(
            find(&Method::GET, "/conversions/shop/g/deposit.csv/x"),
            None
        );
        assert_eq!(find(&Method::GET, "/conversions/shop//deposit.csv"), None);
        assert_eq!(find(&Method::GET, "/conversions//google.csv"), None);
        assert_eq!(find(&Method::GET, "/conversions/shop"), None);
        // As it came: a slug is never percent-encoded, and one that is names no link.
        assert_eq!(
            find(&Method::GET, "/l/a%2Db"),
            Some(("GET /l/{slug}".into(), Some("a%2Db".into())))
        );
    }

    #[test]
    fn the_admin_page_takes_its_root_and_everything_below_it() {
        for (path, page) in [
            ("/admin", ""),
            ("/admin/", ""),
            ("/admin/spaces/a/links", "spaces/a/links"),
        ] {
            assert_eq!(
                find(&Method::GET, path),
                Some(("GET /admin/{page...}".into(), Some(page.into()))),
                "{path}"
            );
        }
        assert_eq!(find(&Method::GET, "/administrator"), None);
    }

    #[test]
    fn no_two_entries_take_the_same_method_and_path() {
        let mut seen = std::collections::HashSet::new();
        for e in &ROUTES {
            assert!(seen.insert(e.label()), "{} twice", e.label());
        }
    }
}
