//! The rules of single space settings' values: a Meta ad account, its token and Graph
//! address and version, a Telegram bot's token (and that no two spaces share one), the bots a
//! space watches, a time zone. `settings.rs` lists the settings and applies them; each value's
//! rule lives here.

use crate::domain::input::quoted;
use crate::domain::secret::Secret;
use crate::error::{Code, Error};

/// The rule of a Graph API version: `v`, then a major and a minor number of 1 to 3 digits each
/// (`v25.0`).
#[must_use]
pub fn is_graph_version(text: &str) -> bool {
    text.strip_prefix('v')
        .and_then(|v| v.split_once('.'))
        .is_some_and(|(major, minor)| {
            [major, minor]
                .iter()
                .all(|n| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// The rule of a Meta ad account id: `act_` and 1 to 20 digits.
pub(crate) fn check_ad_account(text: &str) -> Result<(), String> {
    let digits = text.strip_prefix("act_").unwrap_or("");
    if (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(format!(
            "is an ad account id act_ and 1 to 20 digits (act_1234567890), or \"\" to remove \
             it, got {}",
            quoted(text)
        ))
    }
}

/// The longest Meta access token taken.
pub const META_TOKEN_MAX_CHARS: usize = 1024;

/// The rule of a Meta access token: 16 to [`META_TOKEN_MAX_CHARS`] letters, digits, `_`, `-`,
/// `.` or `|` (system user and app tokens both).
pub(crate) fn check_meta_token(text: &str) -> Result<(), String> {
    let ok = (16..=META_TOKEN_MAX_CHARS).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'|'));
    if ok {
        Ok(())
    } else {
        // The value itself is never repeated: it may be a real token with a typo.
        Err(format!(
            "is an access token with ads_read (16 to {META_TOKEN_MAX_CHARS} letters, digits, \
             '_', '-', '.' or '|'), or \"\" to remove it"
        ))
    }
}

/// The address of Meta's Graph API: an `http` or `https` origin with an optional path, no
/// query, at most 256 characters; `https://graph.facebook.com` by default. Kept without a
/// trailing `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphUrl(String);

/// Meta's own Graph API.
pub const META_GRAPH_URL: &str = "https://graph.facebook.com";

impl Default for GraphUrl {
    fn default() -> Self {
        GraphUrl(META_GRAPH_URL.to_owned())
    }
}

impl GraphUrl {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn parse(text: &str) -> Result<GraphUrl, String> {
        if text.is_empty() {
            return Ok(GraphUrl::default());
        }
        let bad = || {
            format!(
                "is an http or https address without a query, at most 256 characters, such as \
                 {META_GRAPH_URL}, or \"\" for that one, got {}",
                quoted(text)
            )
        };
        if text.chars().count() > 256 {
            return Err(bad());
        }
        let url = url::Url::parse(text).map_err(|_| bad())?;
        let plain = matches!(url.scheme(), "http" | "https")
            && url.host_str().is_some()
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        if !plain {
            return Err(bad());
        }
        Ok(GraphUrl(text.trim_end_matches('/').to_owned()))
    }
}

/// The most bots a space watches beside its own: as many as a split link has targets.
pub const MAX_WATCHED_BOTS: usize = 16;

/// `watched_bot_tokens` from its text, tokens separated by commas: each a bot token's shape,
/// none twice, at most [`MAX_WATCHED_BOTS`]; `""` none.
pub(crate) fn watched_tokens(text: &str) -> Result<Vec<Secret>, String> {
    let tokens: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.len() > MAX_WATCHED_BOTS {
        return Err(format!(
            "holds at most {MAX_WATCHED_BOTS} tokens, got {}",
            tokens.len()
        ));
    }
    for (i, token) in tokens.iter().enumerate() {
        check_bot_token(token).map_err(|why| format!("[{i}] {why}"))?;
        if tokens[..i].contains(token) {
            return Err(format!("[{i}] is given twice"));
        }
    }
    Ok(tokens
        .into_iter()
        .map(|t| Secret::new(t.to_owned()))
        .collect())
}

/// The rule of a Telegram bot token as `@BotFather` gives it: the bot's id, `:`, and 30 to 64 of
/// `A-Za-z0-9_-`.
pub(crate) fn check_bot_token(text: &str) -> Result<(), String> {
    let ok = text.split_once(':').is_some_and(|(id, key)| {
        (1..=20).contains(&id.len())
            && id.bytes().all(|b| b.is_ascii_digit())
            && (30..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    if ok {
        Ok(())
    } else {
        // The value itself is never repeated: it may be a real token with a typo.
        Err(
            "is a bot token as @BotFather gives it (123456789:AA... : the bot's id, a colon, \
             and 30 to 64 letters, digits, '_' or '-'), or \"\" to remove it"
                .to_owned(),
        )
    }
}

/// The bot a token is of: the number before its `:`, which a new token `@BotFather` issues for
/// the same bot keeps.
pub(crate) fn bot_id(token: &str) -> &str {
    token.split_once(':').map_or(token, |(id, _)| id)
}

/// The rule that one bot serves one space: the reader of each space's bot acknowledges the
/// updates it reads, and Telegram then drops them, so two spaces of one bot would each lose
/// joins of the other's. `token` is refused when its bot is that of a token of `others`
/// (`(space, token)` of every other space with one).
///
/// # Errors
/// `invalid_field` naming `telegram_bot_token` and the space whose bot it is.
pub fn check_bot_unshared<'a>(
    token: &str,
    others: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), Error> {
    let bot = bot_id(token);
    match others.into_iter().find(|(_, t)| bot_id(t) == bot) {
        None => Ok(()),
        Some((space, _)) => Err(Error::field(
            Code::InvalidField,
            "telegram_bot_token",
            format!(
                "`telegram_bot_token`: this bot (id {bot}) is the bot of space {} already, and \
                 a bot serves one space only (each space would read and acknowledge the other's \
                 updates, and joins would be lost): make this space a bot of its own with \
                 @BotFather (/newbot), or first remove the token from space {}",
                quoted(space),
                quoted(space)
            ),
        )),
    }
}

/// An IANA time zone name known to the bundled time-zone database (`Europe/Berlin`); `UTC` by
/// default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeZoneName(String);

impl Default for TimeZoneName {
    fn default() -> Self {
        TimeZoneName("UTC".to_owned())
    }
}

impl TimeZoneName {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The zone, with its rules.
    #[must_use]
    pub fn zone(&self) -> jiff::tz::TimeZone {
        jiff::tz::db()
            .get(&self.0)
            .unwrap_or(jiff::tz::TimeZone::UTC)
    }

    pub(crate) fn parse(text: &str) -> Result<TimeZoneName, String> {
        match jiff::tz::db().get(text) {
            Ok(_) => Ok(TimeZoneName(text.to_owned())),
            Err(_) => Err(format!(
                "is an IANA time zone name such as Europe/Berlin or UTC, got {}",
                quoted(text)
            )),
        }
    }
}

/// The time zones a form offers, `(name, words)`, by name: `UTC` and every `Area/Place` zone of
/// the time zone database, with `current` among them also when it is a name only a few know.
#[must_use]
pub fn zones_offered(current: &str) -> Vec<(String, String)> {
    let mut zones: Vec<String> = jiff::tz::db()
        .available()
        .map(|z| z.as_str().to_owned())
        .filter(|z| z == "UTC" || (z.contains('/') && !z.starts_with("Etc/")))
        .collect();
    if !zones.iter().any(|z| z == current) {
        zones.push(current.to_owned());
    }
    zones.sort();
    zones
        .into_iter()
        .map(|z| (z.clone(), z.replace('_', " ")))
        .collect()
}
