//! Every path of the admin page, one entry each: the single source of its router, of the space's
//! menu and of the list of pages in `docs/admin.md` (a test holds that list to this table).
//!
//! An entry names its method, its path (`{name}` is one segment, given to the handler as
//! [`Ctx::param`], as it came), what a `POST` reads as its body, its label (its name in the
//! menu, and a page of a space with a label is in the space's menu, in this order), and its
//! handler, which says whether it needs a session. Adding a page is one entry here, its file
//! in `pages/` and its template.

use std::future::Future;
use std::pin::Pin;

use warp::http::Method;
use warp::reply::Response;

use super::context::{Anonymous, Ctx, Params};
use super::pages::{
    account, assets, audit, costs, dashboard, destinations, events, invite, keys, links, login,
    postback, rejections, second_factor, settings, spaces, stats, users,
};
use crate::error::Error;
use crate::surface::Body;

/// What a handler's future gives.
pub(super) type Answer<'a> = Pin<Box<dyn Future<Output = Result<Response, Error>> + Send + 'a>>;
/// A page served within a session.
pub(super) type PageHandler = for<'a> fn(&'a Ctx<'a>) -> Answer<'a>;
/// A path served before any session is looked for: given the request's head and its unread
/// body.
pub(super) type OpenHandler = for<'a> fn(&'a Anonymous<'a>, Body) -> Answer<'a>;

/// Who may reach a path, with the handler that runs once that is settled.
#[derive(Clone, Copy)]
pub(super) enum Handler {
    /// Anyone: the login page and its form, the stylesheet and the script.
    Open(OpenHandler),
    /// A logged-in session only; a `POST`'s form must carry the session's CSRF token.
    Session(PageHandler),
}

/// What a request's body is read as before its handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Takes {
    /// Nothing: a `GET`, or a handler that reads its own body (the login form).
    Nothing,
    /// A form (`application/x-www-form-urlencoded`) within [`super::context::MAX_FORM_BYTES`].
    Form,
    /// A `multipart/form-data` upload within [`super::context::MAX_UPLOAD_BYTES`].
    Upload,
}

/// One path of the admin page.
pub(super) struct Page {
    pub method: Method,
    /// `/admin/spaces/{space}/links/{slug}/delete`.
    pub path: &'static str,
    pub takes: Takes,
    /// Its name in the menu and in `docs/admin.md`'s list of pages; `None` for what is not a
    /// page of its own (a form's target, a download, the assets).
    pub label: Option<&'static str>,
    pub handler: Handler,
}

/// A handler from an `async fn` of a page (`session`) or of the login (`open`).
macro_rules! boxed {
    (session $f:path) => {
        Handler::Session(|ctx| Box::pin($f(ctx)))
    };
    (open $f:path) => {
        Handler::Open(|anonymous, body| Box::pin($f(anonymous, body)))
    };
}

/// An entry of the table: `page!(METHOD "path", takes, handler)`, then its label if it has one.
macro_rules! page {
    ($method:ident $path:literal, $takes:ident, $kind:ident $handler:path $(, $label:literal)?) => {
        Page {
            method: Method::$method,
            path: $path,
            takes: Takes::$takes,
            label: page!(@label $($label)?),
            handler: boxed!($kind $handler),
        }
    };
    (@label) => { None };
    (@label $label:literal) => { Some($label) };
}

/// Every path of the admin page. The labelled pages of a space come in the order of its menu.
#[rustfmt::skip]
pub(super) static PAGES: [Page; 47] = [
    page!(GET "/admin/style.css", Nothing, open assets::style),
    page!(GET "/admin/copy.js", Nothing, open assets::script),
    page!(GET "/admin/login", Nothing, open login::show),
    page!(POST "/admin/login", Nothing, open login::log_in),
    page!(GET "/admin/login/code", Nothing, open second_factor::show),
    page!(POST "/admin/login/code", Nothing, open second_factor::check),
    page!(POST "/admin/logout", Form, session login::log_out),
    page!(GET "/admin/invite/{token}", Nothing, open invite::show),
    page!(POST "/admin/invite/{token}", Nothing, open invite::set_password),
    page!(GET "/admin/", Nothing, session spaces::show, "Spaces"),
    page!(POST "/admin/spaces", Form, session spaces::create),
    page!(GET "/admin/audit", Nothing, session audit::show, "Audit"),
    page!(GET "/admin/users", Nothing, session users::show, "Users"),
    page!(POST "/admin/users", Form, session users::add),
    page!(POST "/admin/users/second-factor", Form, session users::require_second_factor),
    page!(POST "/admin/users/{name}/role", Form, session users::change_role),
    page!(POST "/admin/users/{name}/reset", Form, session users::reset),
    page!(POST "/admin/users/{name}/remove", Form, session users::remove),
    page!(GET "/admin/account", Nothing, session account::show, "Account"),
    page!(POST "/admin/account/second-factor", Form, session account::turn_on),
    page!(POST "/admin/account/second-factor/off", Form, session account::turn_off),
    page!(GET "/admin/spaces/{space}/dashboard", Nothing, session dashboard::show, "Dashboard"),
    page!(GET "/admin/spaces/{space}", Nothing, session keys::show, "Keys"),
    page!(POST "/admin/spaces/{space}/rotate", Form, session keys::rotate),
    page!(POST "/admin/spaces/{space}/revoke", Form, session keys::revoke),
    page!(GET "/admin/spaces/{space}/settings", Nothing, session settings::show, "Settings"),
    page!(POST "/admin/spaces/{space}/settings", Form, session settings::save),
    page!(GET "/admin/spaces/{space}/postback", Nothing, session postback::show, "Postback URL"),
    page!(POST "/admin/spaces/{space}/postback", Form, session postback::build),
    page!(GET "/admin/spaces/{space}/links", Nothing, session links::show, "Links"),
    page!(POST "/admin/spaces/{space}/links", Form, session links::create),
    page!(POST "/admin/spaces/{space}/links/{slug}/delete", Form, session links::delete),
    page!(GET "/admin/spaces/{space}/destinations", Nothing, session destinations::show,
        "Destinations"),
    page!(POST "/admin/spaces/{space}/destinations", Form, session destinations::create),
    page!(POST "/admin/spaces/{space}/destinations/{name}/test", Form, session destinations::test),
    page!(POST "/admin/spaces/{space}/destinations/{name}/retry", Form,
        session destinations::retry),
    page!(POST "/admin/spaces/{space}/destinations/{name}/delete", Form,
        session destinations::remove),
    page!(POST "/admin/spaces/{space}/destinations/{name}/change", Form,
        session destinations::change),
    page!(POST "/admin/spaces/{space}/destinations/{name}/rotate-secret", Form,
        session destinations::rotate),
    page!(GET "/admin/spaces/{space}/events", Nothing, session events::show, "Events"),
    page!(GET "/admin/spaces/{space}/stats", Nothing, session stats::show, "Stats"),
    page!(GET "/admin/spaces/{space}/costs", Nothing, session costs::show, "Costs"),
    page!(POST "/admin/spaces/{space}/costs", Upload, session costs::import),
    page!(POST "/admin/spaces/{space}/costs/fetch", Form, session costs::fetch),
    page!(POST "/admin/spaces/{space}/costs/day", Form, session costs::set_day),
    page!(GET "/admin/spaces/{space}/costs/template.csv", Nothing, session costs::template),
    page!(GET "/admin/spaces/{space}/rejections", Nothing, session rejections::show, "Rejections"),
];

impl Page {
    /// The values of its `{name}` segments when `path` is this page's path.
    fn matches<'p>(&self, path: &'p str) -> Option<Params<'p>> {
        let (mut pattern, mut given) = (self.path.split('/'), path.split('/'));
        let mut params = Vec::new();
        loop {
            match (pattern.next(), given.next()) {
                (None, None) => return Some(params),
                (Some(p), Some(g)) => match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(name) if !g.is_empty() => params.push((name, g)),
                    None if p == g => {}
                    _ => return None,
                },
                _ => return None,
            }
        }
    }
}

/// The page that takes `method` on `path`, with its path's values.
pub(super) fn find<'p>(method: &Method, path: &'p str) -> Option<(&'static Page, Params<'p>)> {
    PAGES
        .iter()
        .filter(|p| p.method == *method)
        .find_map(|p| Some((p, p.matches(path)?)))
}

/// The page the form posted to `action` (a path of the table) is on, to show it again when
/// it is refused: the nearest labelled page it is, or is below (a link's delete is on Links);
/// a form outside any space's page is on the spaces page.
pub(super) fn form_page(action: &str) -> Option<&'static Page> {
    let below = |page: &str| {
        action
            .strip_prefix(page)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    let shown = |p: &&Page| p.method == Method::GET && p.label.is_some();
    PAGES
        .iter()
        .filter(shown)
        .filter(|p| below(p.path))
        .max_by_key(|p| p.path.len())
        .or_else(|| PAGES.iter().filter(shown).find(|p| p.path == "/admin/"))
}

/// The space's menu: `(label, path)` of each labelled page of a space, in order.
pub(super) fn space_menu() -> &'static [(&'static str, &'static str)] {
    static MENU: std::sync::LazyLock<Vec<(&'static str, &'static str)>> =
        std::sync::LazyLock::new(|| {
            PAGES
                .iter()
                .filter_map(|p| {
                    let label = p.label?;
                    let below = p.path.strip_prefix(SPACE)?;
                    (below.is_empty() || below.starts_with('/')).then_some((label, p.path))
                })
                .collect()
        });
    &MENU
}

/// The path of a space's own page, which every page of a space is below.
pub(super) const SPACE: &str = "/admin/spaces/{space}";

#[cfg(test)]
mod tests {
    use super::*;

    /// `path` with each `{name}` filled in.
    fn example(path: &str) -> String {
        path.split('/')
            .map(|s| {
                if s.starts_with('{') {
                    format!("x-{}", s.trim_matches(['{', '}']))
                } else {
                    s.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn every_path_of_the_table_routes_to_its_own_entry_with_its_values() {
        for page in &PAGES {
            let path = example(page.path);
            let (found, params) = find(&page.method, &path).unwrap_or_else(|| panic!("{path}"));
            assert!(
                std::ptr::eq(found, page),
                "{} {path} reached {} {}",
                page.method,
                found.method,
                found.path
            );
            for (name, value) in params {
                assert_eq!(value, format!("x-{name}"), "{path}");
            }
        }
    }

    #[test]
    fn a_path_takes_whole_segments_and_no_empty_value() {
        fn found<'p>(m: &Method, p: &'p str) -> Option<(&'static str, Params<'p>)> {
            find(m, p).map(|(page, params)| (page.path, params))
        }
        assert_eq!(
            found(&Method::POST, "/admin/spaces/a/links/spring/delete"),
            Some((
                "/admin/spaces/{space}/links/{slug}/delete",
                vec![("space", "a"), ("slug", "spring")]
            ))
        );
        assert_eq!(
            found(&Method::GET, "/admin/spaces/a").map(|f| f.0),
            Some("/admin/spaces/{space}")
        );
        for (method, path) in [
            (Method::GET, "/admin/spaces//links"),
            (Method::GET, "/admin/spaces/a/linksx"),
            (Method::GET, "/admin/spaces/a/links/"),
            (Method::GET, "/admin/spaces/a/rotate"),
            (Method::POST, "/admin/spaces/a/events"),
        ] {
            assert_eq!(found(&method, path), None, "{method} {path}");
        }
    }

    #[test]
    fn a_get_reads_no_body_and_only_a_login_reads_its_own() {
        for page in &PAGES {
            let own_body = matches!(page.handler, Handler::Open(_));
            let reads = page.method == Method::POST && !own_body;
            assert_eq!(
                page.takes != Takes::Nothing,
                reads,
                "{} {}",
                page.method,
                page.path
            );
        }
    }

    #[test]
    fn no_two_entries_take_the_same_method_and_path() {
        let mut seen = std::collections::HashSet::new();
        for p in &PAGES {
            assert!(
                seen.insert((p.method.as_str(), p.path)),
                "{} {}",
                p.method,
                p.path
            );
        }
    }

    #[test]
    fn a_refused_form_is_shown_again_on_the_page_it_is_on() {
        let on = |action| form_page(action).map(|p| p.path);
        assert_eq!(on("/admin/spaces"), Some("/admin/"));
        assert_eq!(
            on("/admin/spaces/{space}/links/{slug}/delete"),
            Some("/admin/spaces/{space}/links")
        );
        assert_eq!(
            on("/admin/spaces/{space}/destinations/{name}/change"),
            Some("/admin/spaces/{space}/destinations")
        );
        assert_eq!(on("/admin/spaces/{space}/rotate"), Some(SPACE));
        assert_eq!(
            on("/admin/spaces/{space}/costs/day"),
            Some("/admin/spaces/{space}/costs")
        );
        for page in PAGES.iter().filter(|p| p.method == Method::POST) {
            let shown = form_page(page.path).expect("every form is on a page");
            assert!(
                shown.method == Method::GET && shown.label.is_some(),
                "{}",
                page.path
            );
        }
    }

    /// `docs/admin.md` names the pages, in the menu's order, as the table labels them.
    #[test]
    fn the_docs_list_every_page_the_table_labels() {
        let doc = include_str!("../../docs/admin.md");
        let list = doc
            .split_once("**The pages**")
            .and_then(|(_, rest)| rest.split_once("**How it is protected"))
            .expect("docs/admin.md has its list of pages")
            .0;
        let documented: Vec<&str> = list
            .lines()
            .filter_map(|l| {
                l.strip_prefix("- **")?
                    .split_once("**")
                    .map(|(name, _)| name)
            })
            .collect();
        let labelled: Vec<&str> = PAGES.iter().filter_map(|p| p.label).collect();
        assert_eq!(documented, labelled);
    }
}
