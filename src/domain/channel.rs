//! Telegram channels (`docs/channels.md`): the rules of a link that leads to a channel rather
//! than a bot. Which channel a link names (`@username` or a chat id), its fallback invite link,
//! what an invite link the tracker makes is called, and what a `chat_member` update means: a
//! join, a leave, or neither. Nothing here talks to Telegram; `workers/telegram/` does, with
//! these rules.

use serde::{Deserialize, Serialize};

use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The most invite links a channel link keeps made ahead, whatever `invite_pool` says.
pub const MAX_INVITE_POOL: u32 = 1000;

/// A channel as a link names it: its public `@username`, or its chat id (`-100...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatRef {
    Username(String),
    Id(i64),
}

impl ChatRef {
    /// Reads `--channel` / `channel`: `@name` (5 to 32 of `A-Za-z0-9_`, beginning with a
    /// letter; the `@` may be left out) or a chat id, a negative integer such as
    /// `-1001234567890`.
    pub fn parse(text: &str) -> Result<ChatRef, Error> {
        let text = text.trim();
        if let Some(id) = text.strip_prefix('-') {
            if !id.is_empty()
                && id.len() <= 18
                && id.bytes().all(|b| b.is_ascii_digit())
                && let Ok(n) = id.parse::<i64>()
                && n > 0
            {
                return Ok(ChatRef::Id(-n));
            }
        } else {
            let name = text.strip_prefix('@').unwrap_or(text);
            let ok = (5..=32).contains(&name.len())
                && name.as_bytes()[0].is_ascii_alphabetic()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if ok {
                return Ok(ChatRef::Username(name.to_owned()));
            }
        }
        Err(Error::field(
            Code::InvalidField,
            "channel",
            format!(
                "channel must be the channel's @username (5 to 32 of A-Z, a-z, 0-9 and '_', \
                 beginning with a letter) or its chat id (a negative number such as \
                 -1001234567890), got {}",
                quoted(text)
            ),
        ))
    }

    /// As the Bot API's `chat_id` parameter takes it.
    #[must_use]
    pub fn as_param(&self) -> String {
        match self {
            ChatRef::Username(name) => format!("@{name}"),
            ChatRef::Id(id) => id.to_string(),
        }
    }
}

/// The rule of a fallback: an invite link of Telegram's own, `https://t.me/+<hash>` or
/// `https://t.me/joinchat/<hash>`, where a visitor goes when no invite link of the pool is left.
pub fn check_fallback(url: &str) -> Result<(), Error> {
    let hash = url
        .strip_prefix("https://t.me/+")
        .or_else(|| url.strip_prefix("https://t.me/joinchat/"));
    let ok = hash.is_some_and(|h| {
        (1..=64).contains(&h.len())
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    if ok {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "fallback",
            format!(
                "fallback must be an invite link of the channel, https://t.me/+... or \
                 https://t.me/joinchat/... (in Telegram: channel info, Invite links), got {}",
                quoted(url)
            ),
        ))
    }
}

/// The channel a link leads to, as stored with the link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channel {
    /// As the link names it: `@username` or the chat id.
    pub chat: String,
    /// The chat id Telegram answered for it: what updates name.
    pub chat_id: i64,
    /// The channel's title, as Telegram answered it when the link was made.
    pub title: String,
    /// Whether its invite links ask to join (approved by the tracker).
    pub join_requests: bool,
    /// Where a visitor goes when the pool is empty.
    pub fallback: String,
}

/// What a channel link to the public channel `@username` says where it is made and listed:
/// Telegram's apps often join a public channel directly, even when opened by an invite link,
/// and such a join names no invite link, so it counts as unattributed.
#[must_use]
pub fn public_channel_warning(username: &str) -> String {
    format!(
        "@{username} is a public channel: Telegram's apps often join it directly, without the \
         invite link, and those joins count as unattributed; make the channel private to \
         attribute every join"
    )
}

/// Why `join_requests` is refused on the public channel `@username`: the requests come without
/// the invite link, so the tracker would never approve them.
#[must_use]
pub fn public_join_requests_refusal(username: &str) -> String {
    format!(
        "join_requests needs a private channel: @{username} is public, and Telegram sends a \
         public channel's join requests without the invite link, so they would wait for an \
         admin forever; make the channel private, or leave join_requests off"
    )
}

/// The name of an invite link the tracker makes for link `slug` (Telegram's limit: 32
/// characters), so that the channel's admins see who made it and for which link.
#[must_use]
pub fn invite_name(slug: &str) -> String {
    format!("tracker {slug}").chars().take(32).collect()
}

/// What a `chat_member` update's change of status means for the channel's count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberChange {
    Joined,
    Left,
    /// Neither (a promotion, a restriction of a member).
    Other,
}

/// Whether a `ChatMember` with `status` (and `is_member`, for `restricted`) is in the chat.
#[must_use]
pub fn is_member(status: &str, restricted_is_member: bool) -> bool {
    match status {
        "creator" | "administrator" | "member" => true,
        "restricted" => restricted_is_member,
        _ => false,
    }
}

/// The change from `old` to `new` membership.
#[must_use]
pub fn member_change(old: bool, new: bool) -> MemberChange {
    match (old, new) {
        (false, true) => MemberChange::Joined,
        (true, false) => MemberChange::Left,
        _ => MemberChange::Other,
    }
}

/// The event id of the `subscribed` event of user `tg_id` joining channel `chat_id`: its dedup
/// key (`eid`), so the event is recorded once per user and channel whatever the updates say, and
/// the `event_id` ad platforms deduplicate it by.
#[must_use]
pub fn subscribed_eid(chat_id: i64, tg_id: u64) -> String {
    format!("tg-join:{chat_id}:{tg_id}")
}

/// How far below the stored offset an update `getUpdates` brings again can be: the offset is
/// past the last update applied, and Telegram brings an update again only while it is not yet
/// acknowledged, which is only the last page applied before a restart: at most 100 updates
/// (`getUpdates`' `limit`), whose ids follow each other (the Bot API queues no update of a kind
/// `allowed_updates` leaves out, and the tracker always asks for the same kinds).
pub const RESENT_WITHIN: u64 = 100;

/// Whether update `id`, read by `getUpdates`, was applied already, `offset` being the stored
/// offset past the last update applied. An id below the offset by more than [`RESENT_WITHIN`]
/// is a new update: after a week without updates, Telegram chooses the next update's id at
/// random, and it may be below the offset (the Bot API's `Update.update_id`).
#[must_use]
pub fn applied_already(id: u64, offset: u64) -> bool {
    id < offset && offset - id <= RESENT_WITHIN
}

/// How long Telegram keeps an update for its bot: 24 hours, with a margin for the clocks.
pub const UPDATE_KEPT_MS: u64 = 25 * 3_600_000;

/// When a membership change that Telegram dates `date_ms` happened, as the tracker counts it
/// at `now_ms`: its date, so that one read late (after an outage, up to the 24 hours Telegram
/// keeps it) counts in the hour it happened, not the hour it is read in. A date in the future
/// or older than Telegram keeps an update says the two clocks disagree: then `now_ms`.
#[must_use]
pub fn happened_at(date_ms: Option<u64>, now_ms: u64) -> u64 {
    date_ms
        .filter(|&at| at <= now_ms && now_ms - at <= UPDATE_KEPT_MS)
        .unwrap_or(now_ms)
}

/// What one of the bot's updates says about a channel, as the writer applies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelUpdate {
    /// A `chat_member` update: a user's membership changed from `was_member` to `is_member`,
    /// through `invite_link` if the user joined by one, at `at_ms` (the update's `date`; `None`
    /// when it has none, then the time it is applied).
    Member {
        chat_id: i64,
        tg_id: u64,
        was_member: bool,
        is_member: bool,
        invite_link: Option<String>,
        at_ms: Option<u64>,
    },
    /// A `chat_join_request`: a user asked to join through `invite_link`.
    JoinRequest {
        chat_id: i64,
        tg_id: u64,
        invite_link: Option<String>,
    },
    /// Anything else: read and acknowledged, nothing to record.
    Other,
}

/// What applying a run of updates did, for the log, `/metrics` and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdatesApplied {
    /// Joins through one of the tracker's invite links.
    pub joins: u64,
    /// Joins through anything else (the fallback, the channel's own links, search).
    pub unattributed_joins: u64,
    pub leaves: u64,
    pub join_requests: u64,
    /// `subscribed` events recorded (a user's first join of the channel through a link).
    pub subscribed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_counts_when_telegram_dates_it_unless_the_clocks_disagree() {
        let now = 10 * UPDATE_KEPT_MS;
        assert_eq!(happened_at(Some(now - 7_200_000), now), now - 7_200_000);
        assert_eq!(
            happened_at(Some(now - UPDATE_KEPT_MS), now),
            now - UPDATE_KEPT_MS
        );
        assert_eq!(happened_at(Some(now - UPDATE_KEPT_MS - 1), now), now);
        assert_eq!(happened_at(Some(now), now), now);
        assert_eq!(happened_at(Some(now + 1), now), now);
        assert_eq!(happened_at(None, now), now);
    }

    #[test]
    fn an_update_just_below_the_offset_was_applied_and_one_far_below_is_new() {
        let offset = 1_000_000;
        assert!(!applied_already(offset, offset), "the next update");
        assert!(!applied_already(offset + 5, offset));
        assert!(applied_already(offset - 1, offset), "the last one applied");
        assert!(applied_already(offset - RESENT_WITHIN, offset));
        assert!(
            !applied_already(offset - RESENT_WITHIN - 1, offset),
            "ids chosen anew after a quiet week"
        );
        assert!(!applied_already(3, offset));
        assert!(applied_already(0, RESENT_WITHIN));
    }

    #[test]
    fn a_channel_is_a_username_or_a_chat_id() {
        assert_eq!(
            ChatRef::parse("@news_ch").unwrap(),
            ChatRef::Username("news_ch".into())
        );
        assert_eq!(
            ChatRef::parse("abcde").unwrap(),
            ChatRef::Username("abcde".into()),
            "5 characters, no @"
        );
        let long = format!("a{}", "b".repeat(31));
        assert!(ChatRef::parse(&long).is_ok(), "32 characters");
        assert_eq!(
            ChatRef::parse("-1001234567890").unwrap(),
            ChatRef::Id(-1_001_234_567_890)
        );
        assert_eq!(ChatRef::parse("-1001").unwrap().as_param(), "-1001");
        for bad in [
            "@abcd",
            &format!("{long}c"),
            "@1abcde",
            "@ab-cde",
            "",
            "-",
            "-0",
            "1001234567890",
            "-10012345678901234567",
            "https://t.me/news",
        ] {
            assert_eq!(
                ChatRef::parse(bad).unwrap_err().field,
                Some("channel"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_fallback_is_an_invite_link() {
        assert!(check_fallback("https://t.me/+AbC_d-1").is_ok());
        assert!(check_fallback("https://t.me/joinchat/AbCd").is_ok());
        assert!(check_fallback(&format!("https://t.me/+{}", "a".repeat(64))).is_ok());
        for bad in [
            "https://t.me/news_ch",
            "https://t.me/+",
            &format!("https://t.me/+{}", "a".repeat(65)),
            "http://t.me/+abc",
            "https://t.me/+ab c",
            "https://example.com/+abc",
        ] {
            assert_eq!(
                check_fallback(bad).unwrap_err().field,
                Some("fallback"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn joins_and_leaves() {
        let m = |s| is_member(s, false);
        assert_eq!(member_change(m("left"), m("member")), MemberChange::Joined);
        assert_eq!(
            member_change(m("kicked"), m("member")),
            MemberChange::Joined
        );
        assert_eq!(member_change(m("member"), m("left")), MemberChange::Left);
        assert_eq!(member_change(m("member"), m("kicked")), MemberChange::Left);
        assert_eq!(
            member_change(m("member"), m("administrator")),
            MemberChange::Other
        );
        assert!(is_member("restricted", true));
        assert!(!is_member("restricted", false));
    }

    #[test]
    fn invite_names_fit_telegrams_limit() {
        assert_eq!(invite_name("spring"), "tracker spring");
        assert_eq!(invite_name(&"x".repeat(64)).chars().count(), 32);
    }
}
