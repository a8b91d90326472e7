//! The admin pages, a file each (its template structs and handlers together), and what they
//! share: the layout's [`Frame`] with the space's menu, rendering, error pages, and the CSV
//! download. Every handler calls the operation the API or the command line calls; which path
//! reaches which handler is `web/routes.rs`.

pub(super) mod account;
pub(super) mod assets;
pub(super) mod audit;
pub(super) mod campaign;
pub(super) mod chart;
pub(super) mod costs;
pub(super) mod dashboard;
pub(super) mod destinations;
pub(super) mod events;
pub(super) mod invite;
pub(super) mod keys;
pub(super) mod links;
pub(super) mod login;
pub(super) mod postback;
pub(super) mod rejections;
pub(super) mod second_factor;
pub(super) mod settings;
pub(super) mod spaces;
pub(super) mod stats;
pub(super) mod tables;
pub(super) mod users;

use askama::Template;
use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use super::context::{self, Ctx};
use crate::domain::keyring::SpaceRef;
use crate::domain::user::User;
use crate::error::Error;
use crate::surface::respond;

/// What the layout (`base.html`) shows on every page.
struct Frame<'a> {
    /// The logout form's token; `None` when not logged in.
    csrf: Option<&'a str>,
    /// The logged-in user, whose role decides which entries of the menu are shown; with none,
    /// the menu shows none.
    user: Option<&'a User>,
    /// The space whose menu is shown.
    space: Option<&'a str>,
    /// The path (as `routes::PAGES` writes it) of the page shown; `None` for an error page.
    page: Option<&'static str>,
    error: Option<String>,
    /// A form of the page that was just refused, shown again as it was filled in.
    refused: Option<&'a context::Refused>,
}

impl Frame<'_> {
    /// What was typed in `field` of `form` (its path below the space's, as
    /// [`context::Refused::posted_to`] reads it) when that form was just refused; else empty.
    fn kept(&self, form: &str, field: &str) -> &str {
        self.refused
            .filter(|r| r.posted_to(self.space, form))
            .and_then(|r| r.form.get(field))
            .unwrap_or_default()
    }

    /// Why `form` was just refused, when `field` of it was at fault.
    fn fault(&self, form: &str, field: &str) -> Option<&str> {
        self.refused
            .filter(|r| r.posted_to(self.space, form) && r.error.field == Some(field))
            .map(|r| r.error.message.as_str())
    }

    /// Whether the user may post the form of `path` (as `routes::PAGES` writes it), so that a
    /// page shows only the forms the user's role reaches.
    fn may_post(&self, path: &str) -> bool {
        self.may(&Method::POST, path)
    }

    /// Whether the user may open the page of `path`, so that a page links only to those.
    fn may_open(&self, path: &str) -> bool {
        self.may(&Method::GET, path)
    }

    fn may(&self, method: &Method, path: &str) -> bool {
        self.user
            .is_some_and(|u| u.may(context::access_of(method, path), self.space))
    }

    /// Why `form` was just refused, whichever field was at fault: for a form too small to
    /// show it beside a field.
    fn refusal(&self, form: &str) -> Option<&str> {
        self.refused
            .filter(|r| r.posted_to(self.space, form))
            .map(|r| r.error.message.as_str())
    }

    /// The space's menu: (label, address, whether it is this page) of each entry the user's
    /// role reaches. This page is the entry it is, or is below the nearest of (a link's delete,
    /// under Links; a rotation, under Keys).
    fn menu(&self) -> Vec<(&'static str, String, bool)> {
        let (Some(space), Some(user)) = (self.space, self.user) else {
            return Vec::new();
        };
        let under = |menu: &str, page: &str| {
            page.strip_prefix(menu)
                .is_some_and(|below| below.is_empty() || below.starts_with('/'))
        };
        let current = self.page.and_then(|page| {
            context::menu()
                .iter()
                .map(|&(_, path)| path)
                .filter(|path| under(path, page))
                .max_by_key(|path| path.len())
        });
        context::menu()
            .iter()
            .filter(|&&(_, path)| user.may(context::access_of(&Method::GET, path), Some(space)))
            .map(|&(label, path)| (label, path.replace("{space}", space), Some(path) == current))
            .collect()
    }
}

fn html(status: StatusCode, page: &impl Template) -> Response {
    let body = page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "an admin page failed to render");
        "The page failed to render; the server log says why.".to_owned()
    });
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

#[derive(Template)]
#[template(
    source = "{% extends \"admin/base.html\" %}{% block title %}Error{% endblock %}\
              {% block content %}<p><a href=\"/admin/\">Back to the spaces</a></p>{% endblock %}",
    ext = "html"
)]
struct ErrorPage<'a> {
    frame: Frame<'a>,
}

/// A logged-in session as a page's layout shows it: its CSRF token and its user.
pub(super) type Session<'a> = Option<(&'a str, &'a User)>;

/// An error as a page, with the status the API would answer it with.
pub(super) fn error_page(e: &Error, space: Option<&str>, session: Session<'_>) -> Response {
    message_page(respond::status_of(e.code), &e.message, space, session)
}

/// A refusal of the page's own (no API answers it) as a page: `message` and `status`.
pub(super) fn message_page(
    status: StatusCode,
    message: &str,
    space: Option<&str>,
    session: Session<'_>,
) -> Response {
    html(
        status,
        &ErrorPage {
            frame: Frame {
                csrf: session.map(|(csrf, _)| csrf),
                user: session.map(|(_, user)| user),
                space,
                page: None,
                error: Some(message.to_owned()),
                refused: None,
            },
        },
    )
}

/// `value` as a value of a page's query: every byte but letters and digits percent-encoded.
fn in_query(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The frame of the page `ctx` serves: its space's menu, this page marked in it.
fn frame_of<'a>(ctx: &'a Ctx<'_>) -> Frame<'a> {
    Frame {
        csrf: Some(&ctx.live.csrf),
        user: Some(&ctx.user),
        space: ctx
            .params
            .iter()
            .find(|(n, _)| *n == "space")
            .map(|(_, v)| *v),
        page: Some(ctx.page),
        error: ctx
            .refused
            .as_ref()
            .map(|r| format!("Nothing was changed: {}", r.error.message)),
        refused: ctx.refused.as_ref(),
    }
}

/// The space the page's path names.
async fn space(ctx: &Ctx<'_>) -> Result<SpaceRef, Error> {
    ctx.app.space_named(ctx.param("space").to_owned()).await
}

/// A form field's text, trimmed; an empty one counts as absent.
fn form_text(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    ctx.form
        .get(name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// A CSV download: `body` as `<file>.csv`.
fn csv_response(body: Vec<u8>, file: &str) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    let file = format!("attachment; filename=\"{file}.csv\"");
    if let Ok(v) = HeaderValue::from_str(&file) {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_menu_marks_the_page_shown_or_the_one_it_is_below() {
        context::publish_menu(
            crate::web::routes::space_menu(),
            crate::web::access::access_of,
        );
        let owner = User {
            name: "ann".to_owned(),
            role: crate::domain::user::Role::Owner,
            spaces: Vec::new(),
            password_hash: None,
            invitation: None,
            second_factor: None,
        };
        let menu = |space, page| {
            Frame {
                csrf: None,
                user: Some(&owner),
                space,
                page,
                error: None,
                refused: None,
            }
            .menu()
        };
        let current = |page| -> Vec<&str> {
            menu(Some("shop"), page)
                .into_iter()
                .filter_map(|(label, _, current)| current.then_some(label))
                .collect()
        };
        assert_eq!(current(Some("/admin/spaces/{space}")), ["Keys"]);
        assert_eq!(current(Some("/admin/spaces/{space}/rotate")), ["Keys"]);
        assert_eq!(
            current(Some("/admin/spaces/{space}/links/{slug}/delete")),
            ["Links"]
        );
        assert_eq!(
            current(Some("/admin/spaces/{space}/dashboard")),
            ["Dashboard"]
        );
        assert!(
            current(None).is_empty(),
            "an error page is no page of the menu"
        );
        let items = menu(Some("shop"), None);
        assert_eq!(
            (items[0].0, items[0].1.as_str()),
            ("Dashboard", "/admin/spaces/shop/dashboard")
        );
        assert!(menu(None, Some("/admin/")).is_empty(), "no space, no menu");
    }
}
