//! The access log and the rejection log of the API's endpoints: who a request's credential
//! was, and every answer, success or failure, leaving through [`finish`]. The line holds the
//! method, path, status, latency and space; never the query string or a header, so no
//! credential can reach the log.

use std::time::Instant;

use warp::reply::Response;

use crate::app::App;
use crate::app::auth::Presented;
use crate::domain::keyring::SpaceRef;
use crate::domain::rejection::Rejection;
use crate::error::Error;
use crate::surface::respond::{self, Auth};

/// What the access log and the rejection log need to know about a request.
pub struct Access {
    method: &'static str,
    path: &'static str,
    started: Instant,
    /// The space of the credential the request carried: a valid one, or one of ours that was
    /// refused (expired, revoked, of the wrong kind).
    space: Option<SpaceRef>,
    /// The raw query of a GET, for the rejection log (redacted there).
    query: Option<String>,
    auth: Auth,
}

impl Access {
    #[must_use]
    pub fn new(method: &'static str, path: &'static str, auth: Auth) -> Access {
        Access {
            method,
            path,
            started: Instant::now(),
            space: None,
            query: None,
            auth,
        }
    }

    /// Keeps the query for the rejection log.
    pub fn query(&mut self, query: &str) {
        self.query = Some(query.to_owned());
    }

    /// Authenticates, before anything else about the request is looked at, and notes whose
    /// credential it was, also when it is refused.
    pub fn authenticate(&mut self, app: &App, presented: Presented<'_>) -> Result<SpaceRef, Error> {
        let result = app.authenticate(presented);
        self.space = match &result {
            Ok(space) => Some(space.clone()),
            Err(_) => app.issuer_space(presented),
        };
        result
    }
}

/// Every answer, success or failure, leaves through here: the error body, the access-log line,
/// and a refusal that carried a credential of a space goes to that space's rejection log.
pub fn finish(app: &App, access: &Access, result: Result<Response, Error>) -> Response {
    let response = match result {
        Ok(r) => r,
        Err(e) => {
            let response = respond::error(&e, access.auth);
            if let Some(space) = &access.space {
                app.record_rejection(
                    space,
                    Rejection::new(
                        app.now_ms(),
                        access.method,
                        access.path,
                        response.status().as_u16(),
                        &e,
                        access.query.as_deref(),
                    ),
                );
            }
            response
        }
    };
    tracing::info!(
        target: "tracker::access",
        method = access.method,
        path = access.path,
        status = response.status().as_u16(),
        latency_us = access.started.elapsed().as_micros() as u64,
        space = access.space.as_ref().map_or("-", |s| &*s.name),
    );
    response
}
