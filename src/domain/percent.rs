//! Strict percent-decoding of a query's names and values: the one decoder both the query
//! reader (`input.rs`) and the credential redactor (`credential.rs`) use, so a name is read the
//! same way by both (`%74oken=` is a token to each).

use std::borrow::Cow;

/// Decodes `+` and `%XX` of a query component; `None` if a `%` is not followed by two hex
/// digits or the bytes are not UTF-8.
///
/// The bytes are decoded by `percent-encoding`, the decoder `form_urlencoded` and `url` use.
/// The strictness is ours: a postback whose encoding is broken is refused, never guessed at, but
/// the crate keeps a stray `%` as it came, so the escapes are checked here first, and its strict
/// `decode_utf8` is used, not the lossy decoding of `form_urlencoded::parse`.
#[must_use]
pub fn decode(text: &str) -> Option<String> {
    let escapes_whole = text.split('%').skip(1).all(|after| {
        after
            .get(..2)
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if !escapes_whole {
        return None;
    }
    let spaced = text.replace('+', " ");
    match percent_encoding::percent_decode_str(&spaced).decode_utf8() {
        Ok(Cow::Owned(decoded)) => Some(decoded),
        Ok(Cow::Borrowed(_)) => Some(spaced),
        Err(_) => None,
    }
}
