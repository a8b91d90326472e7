//! Where a link sends a visitor ([`Destination`]): a Telegram bot, an `https://` URL template
//! or a Telegram channel, and the rules of a bot's username and a target URL, which a
//! one-target link and each target of a split (`domain::split`) share.

use crate::domain::channel::Channel;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The longest target URL template.
pub const MAX_TARGET_LEN: usize = 2048;

/// Where a link sends the visitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// A Telegram bot: `https://t.me/<bot>?start=<uid>`.
    Bot(String),
    /// An `https://` URL template with `{uid}` in it.
    Target(String),
    /// A Telegram channel: an invite link of the link's pool, made ahead by the tracker's bot
    /// (`docs/channels.md`), or the channel's fallback when the pool is empty.
    Channel(Channel),
}

/// The rule of a Telegram bot username: 5 to 32 of `A-Za-z0-9_`, ending in `bot` in any case.
pub fn check_bot(bot: &str) -> Result<(), Error> {
    let ok = (5..=32).contains(&bot.len())
        && bot.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bot.to_ascii_lowercase().ends_with("bot");
    if ok {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "bot",
            format!(
                "bot must be a Telegram bot username: 5 to 32 of A-Z, a-z, 0-9 and '_', ending \
                 in \"bot\" (without the @), got {}",
                quoted(bot)
            ),
        ))
    }
}

/// The rule of a target: an `https://` URL template of visible ASCII, a host name (letters,
/// digits, `.` and `-`, with an optional `:port`), and `{uid}` after it, in the path or query.
pub fn check_target(target: &str) -> Result<(), Error> {
    let rest = target.strip_prefix("https://").unwrap_or_default();
    let (authority, after) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let (host, port) = authority.split_once(':').unwrap_or((authority, "80"));
    let ok = target.len() <= MAX_TARGET_LEN
        && target.starts_with("https://")
        && !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && (1..=5).contains(&port.len())
        && port.bytes().all(|b| b.is_ascii_digit())
        && after.contains("{uid}")
        && target.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "target",
            format!(
                "target must be an https:// URL of at most {MAX_TARGET_LEN} visible ASCII \
                 characters, with a host name and {{uid}} where the click id goes, got {}",
                quoted(target)
            ),
        ))
    }
}

/// Where a one-target link (or one target of a split) goes: its bot or its target URL, checked.
pub fn bot_or_target(bot: Option<String>, target: Option<String>) -> Result<Destination, Error> {
    Ok(match (bot, target) {
        (Some(bot), None) => {
            let bot = bot.strip_prefix('@').map_or(bot.clone(), str::to_owned);
            check_bot(&bot)?;
            Destination::Bot(bot)
        }
        (None, Some(target)) => {
            check_target(&target)?;
            Destination::Target(target)
        }
        (None, None) => {
            return Err(Error::field(
                Code::MissingField,
                "bot",
                "a link needs a bot (a Telegram bot username), a target (an https:// URL \
                 with {uid}) or a channel (its @username or chat id)",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(Error::field(
                Code::InvalidField,
                "target",
                "a link has a bot or a target, not both",
            ));
        }
    })
}
