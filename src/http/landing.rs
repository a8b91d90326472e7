//! A landing page of the marketer's own (`docs/landing-pages.md`): the script it pastes in,
//! `GET /t.js`, and the view the script reports, `POST /l/<slug>/view`. Both public.

use std::sync::LazyLock;

use sha2::{Digest as _, Sha256};
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use crate::app::links::Viewed;
use crate::error::{Code, Error};
use crate::http::access::{Access, finish};
use crate::surface::Call;
use crate::surface::respond::Auth;

/// The script, built into the binary: at most 4 KiB (a test holds it to that).
pub const SCRIPT: &str = include_str!("t.js");

/// The script's `ETag`: its SHA-256, so it changes with the script and nothing else.
static SCRIPT_ETAG: LazyLock<String> = LazyLock::new(|| {
    let digest = Sha256::digest(SCRIPT.as_bytes());
    format!("\"{}\"", hex::encode(&digest[..16]))
});

/// `GET /t.js`: the script, cached for five minutes and revalidated by its `ETag` (`304`
/// without a body when the browser has it), so a new release reaches the pages soon.
pub async fn script(call: Call) -> Response {
    let etag = SCRIPT_ETAG.as_str();
    let fresh = call
        .header(header::IF_NONE_MATCH)
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut r = if fresh {
        let mut r = Response::new(Vec::new().into());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(SCRIPT.into());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        );
        r
    };
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    if let Ok(tag) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, tag);
    }
    // The script is loaded by pages of any origin.
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

/// `POST /l/{slug}/view`: `204` once the view is counted (or, for a link preview or crawler,
/// without counting it); `403 forbidden` from an origin the link does not allow; `404`, `410`
/// for a link that is not there. The query (the page's click ids, as the script sends them)
/// is not stored: a view is a count.
pub async fn view(call: Call) -> Response {
    let access = Access::new("POST", "/l/{slug}/view", Auth::None);
    let app = call.app.clone();
    let origin = call.header(header::ORIGIN).map(str::to_owned);
    let user_agent = call.header(header::USER_AGENT).map(str::to_owned);
    let slug = call.param.unwrap_or_default();
    let result = async {
        if let Some(client) = call.client {
            app.admit_address(client)?;
        }
        match app
            .view(&slug, origin.as_deref(), user_agent.as_deref())
            .await?
        {
            Viewed::Unknown => Err(Error::new(Code::NotFound, "no link has this slug")),
            Viewed::Gone => Err(Error::new(Code::NotFound, "this link has been removed")),
            Viewed::Counted | Viewed::NotCounted => {
                let mut r = Response::new(Vec::new().into());
                *r.status_mut() = StatusCode::NO_CONTENT;
                r.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                Ok(r)
            }
        }
    }
    .await;
    finish(&app, &access, result)
}

#[cfg(test)]
mod tests {
    use super::SCRIPT;

    #[test]
    fn the_script_is_at_most_4_kib_and_asks_nothing_of_another_host() {
        assert!(SCRIPT.len() <= 4096, "{} bytes", SCRIPT.len());
        for outside in [
            "http://",
            "https://",
            "import",
            "localStorage",
            "document.cookie =",
        ] {
            assert!(!SCRIPT.contains(outside), "{outside}");
        }
    }
}
