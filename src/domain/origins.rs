//! Landing pages' origins (`docs/landing-pages.md`): which pages may report views of a link,
//! the rule of a link's `allowed_origins` and the check of a view's `Origin`.

use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The most origins a link allows views from.
pub const MAX_ALLOWED_ORIGINS: usize = 32;

/// The rule of `allowed_origins`: at most [`MAX_ALLOWED_ORIGINS`] origins as a browser sends
/// them in `Origin`, each `https://` and a host name (letters, digits, `.`, `-`) with an
/// optional `:port`, nothing after; `http://127.0.0.1:PORT` and `http://localhost:PORT` too
/// where `allow_private` (`allow_private_destinations`, for tests). Answers them in lower case,
/// without a trailing `/`, each once.
pub fn check_origins(origins: Vec<String>, allow_private: bool) -> Result<Vec<String>, Error> {
    let bad = |message: String| Error::field(Code::InvalidField, "allowed_origins", message);
    if origins.len() > MAX_ALLOWED_ORIGINS {
        return Err(bad(format!(
            "allowed_origins holds at most {MAX_ALLOWED_ORIGINS} origins, got {}",
            origins.len()
        )));
    }
    let mut checked: Vec<String> = Vec::new();
    for origin in origins {
        let lower = origin.trim_end_matches('/').to_ascii_lowercase();
        let (host, port) = match (
            lower.strip_prefix("https://"),
            lower.strip_prefix("http://"),
        ) {
            (Some(authority), _) => authority.split_once(':').unwrap_or((authority, "443")),
            (None, Some(authority)) if allow_private => match authority.split_once(':') {
                Some((host @ ("127.0.0.1" | "localhost"), port)) => (host, port),
                _ => ("", ""),
            },
            _ => ("", ""),
        };
        let ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            && (1..=5).contains(&port.len())
            && port.bytes().all(|b| b.is_ascii_digit());
        if !ok {
            let private = if allow_private {
                " (or http://127.0.0.1:PORT, http://localhost:PORT)"
            } else {
                ""
            };
            return Err(bad(format!(
                "each of allowed_origins is a page's origin, https://host or https://host:port{private} with no path, got {}",
                quoted(&origin)
            )));
        }
        if !checked.contains(&lower) {
            checked.push(lower);
        }
    }
    Ok(checked)
}

/// Whether a view sent with the `Origin` header `origin` counts for a link whose
/// `allowed_origins` are `allowed`: only from one of them, compared as browsers write origins (lower-case scheme and host).
#[must_use]
pub fn allows_view_from(allowed: &[String], origin: Option<&str>) -> bool {
    origin.is_some_and(|origin| {
        allowed
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(origin))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_origin_is_told_what_an_origin_looks_like_in_one_sentence() {
        let e = check_origins(vec!["https://land.example.com/page".into()], false).unwrap_err();
        assert_eq!(
            e.message,
            "each of allowed_origins is a page's origin, https://host or https://host:port with \
             no path, got \"https://land.example.com/page\""
        );
        let e = check_origins(vec!["ftp://x".into()], true).unwrap_err();
        assert!(
            e.message
                .contains("(or http://127.0.0.1:PORT, http://localhost:PORT) with no path"),
            "{}",
            e.message
        );
    }
}
