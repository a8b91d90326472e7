//! Credentials: how a secret or ingest token is made, recognised, and reduced to a digest.
//!
//! A credential is `trk_sk_` or `trk_it_`, 22 base62 characters of 128 random bits, and 6 base62
//! characters of checksum. The prefix makes a leaked one easy to scan for; the checksum lets a
//! typo or a made-up value be refused without a look-up. Only the SHA-256 digest is ever stored:
//! SHA-256 of 128 random bits needs no slow hash, because there is nothing to brute-force.

use std::fmt;

use sha2::{Digest as _, Sha256};

use crate::domain::base62;

const BODY_LEN: usize = 22;
const CHECK_LEN: usize = 6;
/// How much of a credential may be shown (in `space list`, in logs): the prefix and 4 characters.
pub const PUBLIC_LEN: usize = 11;

/// The two kinds of credential. The discriminants are stored on disk; never renumber them. Named
/// `secret` and `ingest` everywhere else (the command line, the control socket, JSON answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Kind {
    Secret = 1,
    Ingest = 2,
}

impl Kind {
    #[must_use]
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Secret => "trk_sk_",
            Kind::Ingest => "trk_it_",
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::Ingest => "ingest",
        }
    }

    #[must_use]
    pub fn from_u8(n: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == n)
    }

    pub const ALL: [Kind; 2] = [Kind::Secret, Kind::Ingest];
}

impl std::str::FromStr for Kind {
    type Err = String;

    fn from_str(text: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| format!("a credential kind is secret or ingest, not {text:?}"))
    }
}

/// The SHA-256 digest under which a credential is stored and looked up.
pub type CredentialDigest = [u8; 32];

/// A newly made credential. Its text is shown once and then dropped; `Debug` never shows it.
pub struct Issued {
    pub kind: Kind,
    pub text: String,
    pub digest: CredentialDigest,
}

impl Issued {
    #[must_use]
    pub fn public_prefix(&self) -> &str {
        &self.text[..PUBLIC_LEN]
    }
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Issued({}, {}…)",
            self.kind.as_str(),
            self.public_prefix()
        )
    }
}

/// Makes a new random credential of `kind`.
///
/// # Panics
/// If the operating system has no randomness to give, which no tracker can work without.
#[must_use]
pub fn generate(kind: Kind) -> Issued {
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).expect("the OS random number generator failed");
    let mut text = String::with_capacity(kind.prefix().len() + BODY_LEN + CHECK_LEN);
    text.push_str(kind.prefix());
    text.push_str(&base62::encode(u128::from_be_bytes(random), BODY_LEN));
    let check = checksum(&text);
    text.push_str(&check);
    let digest = digest(&text);
    Issued { kind, text, digest }
}

/// A credential given as text (a test suite's known key), checked to be of `kind` with a valid
/// checksum, so that a typo fails loudly instead of making a key nobody can use.
pub fn from_text(
    text: &str,
    kind: Kind,
    name: &'static str,
) -> Result<Issued, crate::error::Error> {
    if recognise(text) == Some(kind) {
        Ok(Issued {
            kind,
            text: text.to_owned(),
            digest: digest(text),
        })
    } else {
        Err(crate::error::Error::field(
            crate::error::Code::InvalidField,
            name,
            format!(
                "{name} must be a {} made by the tracker ({}... with a valid checksum); \
                 make one with `tracker space create` on a scratch data file",
                kind.as_str(),
                kind.prefix()
            ),
        ))
    }
}

/// Recognises a credential's kind and verifies its checksum; `None` for anything malformed.
/// This costs one small hash and runs before any look-up.
#[must_use]
pub fn recognise(text: &str) -> Option<Kind> {
    let kind = Kind::ALL
        .into_iter()
        .find(|k| text.starts_with(k.prefix()))?;
    if text.len() != kind.prefix().len() + BODY_LEN + CHECK_LEN
        || !text
            .bytes()
            .skip(kind.prefix().len())
            .all(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    let (body, check) = text.split_at(text.len() - CHECK_LEN);
    (checksum(body) == check).then_some(kind)
}

#[must_use]
pub fn digest(text: &str) -> CredentialDigest {
    Sha256::digest(text.as_bytes()).into()
}

fn checksum(body: &str) -> String {
    let d = Sha256::digest(body.as_bytes());
    base62::encode(
        u128::from(u32::from_be_bytes([d[0], d[1], d[2], d[3]])),
        CHECK_LEN,
    )
}

/// A random identifier of 128 bits in 22 characters of `[A-Za-z0-9]`: the random part of a
/// click's `uid`, which must fit a Telegram `start` parameter.
///
/// The bits come from the operating system's generator, 4 KiB at a time per thread: the writer
/// makes every click's uid, and one `getrandom` call per click was a syscall per click on the
/// busiest thread. Each 16 bytes are used once and zeroed once taken.
///
/// # Panics
/// If the operating system has no randomness to give.
#[must_use]
pub fn random_id() -> String {
    base62::encode(random_bits(), BODY_LEN)
}

/// 128 bits from the operating system's generator, through the pool [`random_id`] describes:
/// also an event's `event_id` (`domain::event::EventId`), which the writer makes for each event.
///
/// # Panics
/// If the operating system has no randomness to give.
#[must_use]
pub fn random_bits() -> u128 {
    thread_local! {
        static POOL: std::cell::RefCell<(Box<[u8; 4096]>, usize)> =
            std::cell::RefCell::new((Box::new([0; 4096]), 4096));
    }
    let random = POOL.with_borrow_mut(|(pool, used)| {
        if *used == pool.len() {
            getrandom::fill(&mut pool[..]).expect("the OS random number generator failed");
            *used = 0;
        }
        let taken = &mut pool[*used..*used + 16];
        *used += 16;
        let mut random = [0u8; 16];
        random.copy_from_slice(taken);
        taken.fill(0);
        random
    });
    u128::from_be_bytes(random)
}

/// Compares two tokens in time that does not depend on where they differ (a different length
/// answers at once: token lengths are no secret). Every check of a token given in a request
/// against one the tracker holds goes through here (the admin page's form tokens, Telegram's
/// webhook secret).
#[must_use]
pub fn same_token(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Replaces credential-looking values in `text` (a query string, an error) with their public
/// prefix, so nothing that is logged can be used.
#[must_use]
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("trk_") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let shown = &tail[..end.min(PUBLIC_LEN)];
        out.push_str(shown);
        if end > PUBLIC_LEN {
            out.push('…');
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    // A `token=` (or `api_key=`, ...) that was not a credential of ours is still somebody's
    // secret, and so is a URL's password.
    redact_userinfo(&redact_token_param(&out, |value| value.starts_with("trk_")))
}

/// `text` with every copy of `secret`, a destination's own credential, as [`REDACTED`], and a
/// copy cut short at the end of `text` (an answer kept to its first bytes) cut off: Meta's
/// `190` may quote the token it refused ("Malformed access token EAAB…"). A secret shorter
/// than [`MIN_CUT`] is no real token and is left alone, so that it cannot rewrite ordinary
/// words.
#[must_use]
pub fn cut_secret(text: &str, secret: &str) -> String {
    if secret.len() < MIN_CUT {
        return text.to_owned();
    }
    let mut out = text.replace(secret, REDACTED);
    if let Some(n) = (MIN_CUT / 2..secret.len())
        .rev()
        .find(|&n| secret.is_char_boundary(n) && out.ends_with(&secret[..n]))
    {
        out.truncate(out.len() - n);
        out.push_str(REDACTED);
    }
    out
}

/// The shortest secret [`cut_secret`] cuts out.
pub const MIN_CUT: usize = 8;

/// What a destination's URL shows (`GET /destinations`, the Destinations page): the value of
/// each parameter named as a secret ([`SECRET_PARAMS`]) and the URL's user information as
/// [`REDACTED`], ours too, and nothing else changed; a value that is a macro of the template
/// (`token={q.token}`) is no secret and is kept.
#[must_use]
pub fn redact_url_token(url: &str) -> String {
    let params = redact_token_param(url, |value| {
        value.len() > 2 && value.starts_with('{') && value.ends_with('}')
    });
    redact_userinfo(&params)
}

/// The names of query parameters whose values are redacted wherever a URL or a query is shown
/// or logged, compared without regard to ASCII case after percent-decoding.
pub const SECRET_PARAMS: &[&str] = &[
    "token",
    "access_token",
    "api_key",
    "apikey",
    "key",
    "secret",
    "client_secret",
    "sig",
    "signature",
    "password",
];

/// Every URL's user information in `text` (`https://user:password@host/`, or a key alone in
/// the user's place) as `[redacted]@`: a credential like a `token=`.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(scheme_end) = rest.find("://") {
        let authority_at = scheme_end + 3;
        out.push_str(&rest[..authority_at]);
        let after = &rest[authority_at..];
        let authority_len = after
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | ')' | '>') || c.is_whitespace()
            })
            .unwrap_or(after.len());
        let authority = &after[..authority_len];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    out
}

/// What a redacted `token=` shows in place of the value. A URL given with it is refused
/// ([`crate::platform::check_url`]): it is a shown URL sent back, not a token.
pub const REDACTED: &str = "[redacted]";

/// Every value of a parameter named in [`SECRET_PARAMS`] in `text`, a query or a URL inside a
/// sentence (`...?token=x): error`), with its name at the start, after `?` or `&`. The name is
/// compared decoded, as `input::Query` reads it (`%74oken=` is a token too), and without
/// regard to case (`Token=`, `API_KEY=`). A value ends at `&`, `#`, a space, a
/// quote or a bracket, so the words after a URL are kept.
fn redact_token_param(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let ends_value =
        |c: char| matches!(c, '&' | '#' | '"' | '\'' | ')' | '>' | ']') || c.is_whitespace();
    let starts_name = |c: char| matches!(c, '?' | '&') || ends_value(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(eq) = rest.find('=') {
        let before = &rest[..eq];
        // After the character that starts the name, whatever its width (a wide space).
        let name_at = before
            .char_indices()
            .rev()
            .find(|&(_, c)| starts_name(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let name = &before[name_at..];
        let after = &rest[eq + 1..];
        let value_len = after.find(ends_value).unwrap_or(after.len());
        out.push_str(before);
        out.push('=');
        let value = &after[..value_len];
        let secret_name = crate::domain::percent::decode(name)
            .is_some_and(|name| SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s)));
        if !keep(value) && secret_name {
            out.push_str(REDACTED);
        } else {
            out.push_str(value);
        }
        rest = &after[value_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_cut_out_whole_or_cut_short() {
        let token = "EAAB-token-wxyz";
        assert_eq!(
            cut_secret(&format!("Malformed access token {token} (code 190)"), token),
            "Malformed access token [redacted] (code 190)"
        );
        assert_eq!(
            cut_secret(&format!("{token} and {token}"), token),
            "[redacted] and [redacted]"
        );
        // Kept to its first bytes, the answer ends inside the token.
        assert_eq!(cut_secret("token EAAB-tok", token), "token [redacted]");
        assert_eq!(
            cut_secret("ends in EAA", token),
            "ends in EAA",
            "too short to tell"
        );
        // A secret too short to be a token rewrites nothing.
        assert_eq!(cut_secret("an error code", "code"), "an error code");
        assert_eq!(cut_secret("12345678", "12345678"), "[redacted]");
        assert_eq!(cut_secret("1234567", "1234567"), "1234567");
    }

    #[test]
    fn a_destination_url_shows_its_token_redacted_and_nothing_else_changed() {
        let shown = |url: &str| redact_url_token(url);
        assert_eq!(
            shown("https://n.example/pb?token=s3cr3t&src=trk_spring_sale_2026&c={uid}"),
            "https://n.example/pb?token=[redacted]&src=trk_spring_sale_2026&c={uid}"
        );
        assert_eq!(
            shown("https://t.example/e?token=trk_it_36de0123456789abcdefghijkl&x=1"),
            "https://t.example/e?token=[redacted]&x=1"
        );
        assert_eq!(
            shown("https://n.example/pb?token={q.token}&c={uid}"),
            "https://n.example/pb?token={q.token}&c={uid}"
        );
        assert_eq!(
            shown("https://n.example/pb?%74oken=x"),
            "https://n.example/pb?%74oken=[redacted]"
        );
    }

    #[test]
    fn every_secret_parameter_and_the_userinfo_are_redacted_in_a_shown_url() {
        for name in SECRET_PARAMS {
            assert_eq!(
                redact_url_token(&format!("https://n.example/pb?{name}=s3cr3t&c=1")),
                format!("https://n.example/pb?{name}=[redacted]&c=1"),
            );
            let upper = name.to_ascii_uppercase();
            assert_eq!(
                redact(&format!("GET /x?{upper}=s3cr3t")),
                format!("GET /x?{upper}=[redacted]"),
            );
        }
        // Just beside a secret's name: kept.
        assert_eq!(
            redact_url_token("https://n.example/pb?keys=1&monkey=2&sigma=3"),
            "https://n.example/pb?keys=1&monkey=2&sigma=3"
        );
        assert_eq!(
            redact_url_token("https://user:hunter2@n.example/pb?x=1"),
            "https://[redacted]@n.example/pb?x=1"
        );
        assert_eq!(
            redact("error sending request for url (https://k3y@n.example/pb): refused"),
            "error sending request for url (https://[redacted]@n.example/pb): refused"
        );
        assert_eq!(
            redact_url_token("https://n.example/pb?to=a@b.example"),
            "https://n.example/pb?to=a@b.example",
            "an @ past the host is no user information"
        );
        assert_eq!(redact_url_token("https://n.example"), "https://n.example");
    }

    #[test]
    fn a_token_after_a_wide_space_is_redacted_and_nothing_panics() {
        assert_eq!(redact("a\u{2002}token=x b"), "a\u{2002}token=[redacted] b");
        assert_eq!(redact(".7$\u{2002}=1"), ".7$\u{2002}=1");
    }

    #[test]
    fn generated_credentials_are_recognised() {
        for kind in [Kind::Secret, Kind::Ingest] {
            let c = generate(kind);
            assert!(c.text.starts_with(kind.prefix()));
            assert_eq!(recognise(&c.text), Some(kind));
            assert_eq!(c.digest, digest(&c.text));
        }
    }

    #[test]
    fn a_changed_character_fails_the_checksum() {
        let c = generate(Kind::Secret);
        let mut bytes = c.text.clone().into_bytes();
        let i = 10;
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        assert_eq!(recognise(&String::from_utf8(bytes).unwrap()), None);
        assert_eq!(recognise(&c.text[..c.text.len() - 1]), None);
        assert_eq!(recognise("trk_sk_"), None);
        assert_eq!(recognise("Bearer"), None);
    }

    #[test]
    fn two_credentials_differ() {
        assert_ne!(generate(Kind::Ingest).text, generate(Kind::Ingest).text);
        let id = random_id();
        assert!(id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric()));
        // Past the end of one 4 KiB draw from the OS and into the next: no id comes twice.
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| random_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn debug_and_redact_hide_the_secret_part() {
        let c = generate(Kind::Secret);
        let secret_part = &c.text[PUBLIC_LEN..];
        assert!(!format!("{c:?}").contains(secret_part));
        let q = format!("event=deposit&token={}&uid=1", c.text);
        let red = redact(&q);
        assert!(!red.contains(secret_part), "{red}");
        assert!(red.contains("uid=1"));
        assert_eq!(redact("token=hunter2&x=1"), "token=[redacted]&x=1");
        assert_eq!(
            redact("error sending request for url (https://n.example/pb?token=hunter2): refused"),
            "error sending request for url (https://n.example/pb?token=[redacted]): refused"
        );
        assert_eq!(
            redact("https://n.example/pb?a=b=c&Token=x&token=y#token=z"),
            "https://n.example/pb?a=b=c&Token=[redacted]&token=[redacted]#token=[redacted]"
        );
        // A name or a credential percent-encoded is still found.
        assert_eq!(
            redact("%74oken=trk%5Fsk%5FAbCdEfGh&x=1"),
            "%74oken=[redacted]&x=1"
        );
    }
}
