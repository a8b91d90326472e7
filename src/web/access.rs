//! Who may reach each path of the admin page: the least role every page of
//! [`super::routes::PAGES`] asks for, and [`permits`], the one check every page within a session
//! goes through before its handler runs (and [`refused`], the page shown otherwise). A page of a space (`{space}` in its path) is also held to the user's spaces.
//!
//! The rules are a table of their own beside the routes, so that a page added to the routes
//! without a rule here is served to owners only, and fails this file's test.

use warp::http::{Method, StatusCode};
use warp::reply::Response;

use super::context::Params;
use super::routes::Page;
use crate::domain::user::{Access, User};

/// `(method, path, access)` of every page served within a session.
#[rustfmt::skip]
static RULES: &[(Method, &str, Access)] = &[
    (Method::POST, "/admin/logout", Access::Anyone),
    (Method::GET, "/admin/", Access::Anyone),
    (Method::POST, "/admin/spaces", Access::Own),
    (Method::GET, "/admin/audit", Access::Own),
    (Method::GET, "/admin/users", Access::Own),
    (Method::POST, "/admin/users", Access::Own),
    (Method::POST, "/admin/users/second-factor", Access::Own),
    (Method::POST, "/admin/users/{name}/role", Access::Own),
    (Method::POST, "/admin/users/{name}/reset", Access::Own),
    (Method::POST, "/admin/users/{name}/remove", Access::Own),
    (Method::GET, "/admin/account", Access::Anyone),
    (Method::POST, "/admin/account/second-factor", Access::Anyone),
    (Method::POST, "/admin/account/second-factor/off", Access::Anyone),
    (Method::GET, "/admin/spaces/{space}/dashboard", Access::View),
    (Method::GET, "/admin/spaces/{space}", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/rotate", Access::Own),
    (Method::POST, "/admin/spaces/{space}/revoke", Access::Own),
    (Method::GET, "/admin/spaces/{space}/settings", Access::Own),
    (Method::POST, "/admin/spaces/{space}/settings", Access::Own),
    (Method::GET, "/admin/spaces/{space}/postback", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/postback", Access::Manage),
    (Method::GET, "/admin/spaces/{space}/links", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/links", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/links/{slug}/delete", Access::Manage),
    (Method::GET, "/admin/spaces/{space}/destinations", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations/{name}/test", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations/{name}/retry", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations/{name}/delete", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations/{name}/change", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/destinations/{name}/rotate-secret", Access::Manage),
    (Method::GET, "/admin/spaces/{space}/events", Access::View),
    (Method::GET, "/admin/spaces/{space}/stats", Access::View),
    (Method::GET, "/admin/spaces/{space}/costs", Access::View),
    (Method::POST, "/admin/spaces/{space}/costs", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/costs/fetch", Access::Manage),
    (Method::POST, "/admin/spaces/{space}/costs/day", Access::Manage),
    (Method::GET, "/admin/spaces/{space}/costs/template.csv", Access::View),
    (Method::GET, "/admin/spaces/{space}/rejections", Access::Manage),
];

/// What `method` on `path` asks for: its rule, or an owner where it has none.
pub(super) fn access_of(method: &Method, path: &str) -> Access {
    RULES
        .iter()
        .find(|(m, p, _)| m == method && *p == path)
        .map_or(Access::Own, |(_, _, access)| *access)
}

/// Whether `user` may reach `page` with its path's values `params`.
pub(super) fn permits(user: &User, page: &Page, params: &Params<'_>) -> bool {
    let space = params.iter().find(|(n, _)| *n == "space").map(|(_, v)| *v);
    user.may(access_of(&page.method, page.path), space)
}

/// The page a user is shown where their role does not reach: `403`, naming the role.
pub(super) fn refused(user: &User, csrf: &str) -> Response {
    super::pages::message_page(
        StatusCode::FORBIDDEN,
        &format!(
            "Your role ({}) does not reach this page; an owner can change what you may do.",
            user.role.as_str()
        ),
        None,
        Some((csrf, user)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::routes::{Handler, PAGES};

    /// Every page within a session has a rule of its own, and every rule a page.
    #[test]
    fn every_page_within_a_session_has_its_rule() {
        for page in &PAGES {
            let ruled = RULES
                .iter()
                .any(|(m, p, _)| *m == page.method && *p == page.path);
            let open = matches!(page.handler, Handler::Open(_));
            assert_eq!(ruled, !open, "{} {}", page.method, page.path);
        }
        for (method, path, _) in RULES {
            assert!(
                PAGES.iter().any(|p| p.method == method && p.path == *path),
                "{method} {path} is no page"
            );
        }
    }
}
