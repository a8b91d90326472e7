//! Reading a bot's updates by long polling `getUpdates` (`docs/channels.md#updates`).
//!
//! An update is acknowledged by the next `getUpdates` asking for an offset past it, and Telegram
//! then drops it. So a run of updates is applied, with the offset past it, in one commit
//! (`storage/channels.rs`) before that next call: a crash before the commit reads the run again,
//! and one after it finds the offset stored. Join requests to approve are approved before the
//! commit, so a crash between the two approves again (harmless) rather than never; an approval
//! Telegram cannot make now (`429`, no answer) holds the commit back, and the run is applied
//! again once Telegram's `retry_after` has passed. Updates that come by webhook (`hook.rs`) are
//! applied by the same [`apply`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::channel::{self, ChannelUpdate};
use crate::error::{Code, Error};
use crate::workers::telegram::Shared;
use crate::workers::telegram::api::{ApiError, BotApi, Me};

/// The updates a channel link needs: Telegram sends no `chat_member` update unless asked.
pub const ALLOWED_UPDATES: [&str; 2] = ["chat_member", "chat_join_request"];

/// What a page of `getUpdates` comes to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub updates: Vec<ChannelUpdate>,
    /// `(chat_id, user_id)` of join requests through invite links this bot made that ask to
    /// be approved: the tracker approves them, and [`apply`] takes each off once dealt with.
    pub approve: Vec<(i64, u64)>,
    /// The offset past the last update of the page; `None` for an empty page.
    pub next_offset: Option<u64>,
}

/// Reads a `getUpdates` result (an array of `Update`) for the bot `me`: an update whose id
/// `applied` says was applied already is acknowledged and left out.
#[must_use]
pub fn page(result: &Value, me: &Me, applied: impl Fn(u64) -> bool) -> Page {
    let mut page = Page::default();
    for update in result.as_array().map(Vec::as_slice).unwrap_or_default() {
        let Some(id) = update["update_id"].as_u64() else {
            continue;
        };
        page.next_offset = Some(page.next_offset.unwrap_or(0).max(id + 1));
        if !applied(id) {
            page.updates.push(one(update, me, &mut page.approve));
        }
    }
    page
}

fn one(update: &Value, me: &Me, approve: &mut Vec<(i64, u64)>) -> ChannelUpdate {
    let invite = |v: &Value| v["invite_link"]["invite_link"].as_str().map(str::to_owned);
    if let Some(m) = update.get("chat_member") {
        let (Some(chat_id), Some(tg_id)) = (
            m["chat"]["id"].as_i64(),
            m["new_chat_member"]["user"]["id"].as_u64(),
        ) else {
            return ChannelUpdate::Other;
        };
        if m["chat"]["type"] != "channel" {
            return ChannelUpdate::Other;
        }
        let member = |c: &Value| {
            channel::is_member(
                c["status"].as_str().unwrap_or_default(),
                c["is_member"].as_bool().unwrap_or(false),
            )
        };
        return ChannelUpdate::Member {
            chat_id,
            tg_id,
            was_member: member(&m["old_chat_member"]),
            is_member: member(&m["new_chat_member"]),
            invite_link: invite(m),
            at_ms: m["date"].as_u64().map(|s| s.saturating_mul(1000)),
        };
    }
    if let Some(r) = update.get("chat_join_request") {
        let (Some(chat_id), Some(tg_id)) = (r["chat"]["id"].as_i64(), r["from"]["id"].as_u64())
        else {
            return ChannelUpdate::Other;
        };
        let link = &r["invite_link"];
        if link["creator"]["id"].as_u64() == Some(me.id) && link["creates_join_request"] == true {
            approve.push((chat_id, tg_id));
        }
        return ChannelUpdate::JoinRequest {
            chat_id,
            tg_id,
            invite_link: invite(r),
        };
    }
    ChannelUpdate::Other
}

/// The bot of `space` as `getMe` answers it, asking until it does (the Settings page shows why
/// not meanwhile).
pub(super) async fn who(shared: &Shared, space: u32, api: &BotApi) -> Me {
    loop {
        match api.get_me().await {
            Ok(me) => {
                shared.status.bot_found(space, &me);
                return me;
            }
            Err(e) => {
                shared.status.bot_failed(space, &e);
                tokio::time::sleep(pause_after(&e)).await;
            }
        }
    }
}

/// Applies a page of `space`'s bot's updates, the one way both readers (polling and the
/// webhook) do: join requests to approve are approved, then the updates' effects and
/// `offset`, if given, are committed in one transaction. Answers once that commit is durable.
/// Only the poller gives an offset (the one past its page): the webhook's updates come in
/// order per user only, so no offset is past every update it applied.
///
/// # Errors
/// If a join request could not be approved now ([`approve_again`]: its `retry_after_s` says
/// how long to wait) or the commit fails: nothing of the page is recorded, and it is to be
/// applied again. The requests dealt with before the failure are taken off the page, so that
/// applying it again asks Telegram only for the rest (asking again for a hundred approved ones
/// would spend the very allowance Telegram asked the bot to wait for).
pub async fn apply(
    shared: &Shared,
    space: u32,
    api: &BotApi,
    page: &mut Page,
    offset: Option<u64>,
) -> Result<(), Error> {
    if page.updates.is_empty() && offset.is_none() {
        return Ok(());
    }
    while let Some(&(chat_id, user_id)) = page.approve.first() {
        let params = json!({"chat_id": chat_id, "user_id": user_id});
        let Err(e) = api
            .call("approveChatJoinRequest", &params, Duration::ZERO)
            .await
        else {
            page.approve.remove(0);
            continue;
        };
        if approve_again(&e) {
            // Counted and logged, not shown on the Settings page: nothing would clear it there
            // once the approval works.
            shared.status.count("bot_api_errors", 1);
            tracing::warn!(space, error = ?e.to_string(), "approving a join request; to be tried again");
            let pause = u32::try_from(pause_after(&e).as_secs()).unwrap_or(u32::MAX);
            return Err(
                Error::new(Code::Unavailable, format!("approving a join request: {e}"))
                    .retry_after(pause),
            );
        }
        tracing::warn!(space, error = ?e.to_string(), "approving a join request; left to the channel's admins");
        page.approve.remove(0);
    }
    let now_ms = shared.clock.now_ms();
    let currency = shared.settings.default_currency.clone();
    let updates = page.updates.clone();
    let applied = shared
        .store
        .write(move |t| t.apply_updates(space, &updates, offset, &currency, now_ms))
        .await?;
    shared.metrics.applied(&applied);
    Ok(())
}

/// Reads `space`'s bot's updates by long polling for as long as it runs: the task of one
/// space's token when `telegram_webhook` is off. A webhook left set (the setting was on before)
/// is deleted first, without dropping the updates Telegram holds: while one is set, Telegram
/// answers `getUpdates` with `409 Conflict`.
pub async fn poll(shared: Arc<Shared>, space: u32, api: BotApi) {
    let me = who(&shared, space, &api).await;
    let no_webhook = json!({"drop_pending_updates": false});
    while let Err(e) = api.call("deleteWebhook", &no_webhook, Duration::ZERO).await {
        shared.status.bot_failed(space, &e);
        tokio::time::sleep(pause_after(&e)).await;
    }
    let mut stored = loop {
        match shared.store.read(move |s| s.telegram_offset(space)).await {
            Ok(o) => break o,
            Err(e) => {
                tracing::warn!(space, error = %e, "reading the Telegram offset");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    // An offset is sent only to acknowledge the page just applied. Any other call asks for the
    // updates not yet acknowledged, whatever their ids: an offset sent then would drop an update
    // whose id Telegram chose anew below it after a quiet week. The first call may so bring the
    // last page applied before a restart again; [`page`] leaves it out.
    let mut acknowledge: Option<u64> = None;
    let wait = shared.settings.telegram.poll_timeout;
    loop {
        let mut params = json!({
            "timeout": wait.as_secs(),
            "allowed_updates": ALLOWED_UPDATES,
        });
        if let Some(offset) = acknowledge.take() {
            params["offset"] = offset.into();
        }
        let mut page = match api.call("getUpdates", &params, wait).await {
            Ok(result) => page(&result, &me, |id| channel::applied_already(id, stored)),
            Err(e) => {
                // A failed call may not have acknowledged: the next one does.
                acknowledge = params["offset"].as_u64();
                shared.status.bot_failed(space, &e);
                tokio::time::sleep(pause_after(&e)).await;
                continue;
            }
        };
        let Some(next) = page.next_offset else {
            continue;
        };
        // Not acknowledged until it commits: the same page is applied again until then, no
        // sooner than Telegram asks.
        while let Err(e) = apply(&shared, space, &api, &mut page, Some(next)).await {
            tracing::warn!(space, error = %e, "recording Telegram updates; trying again");
            let pause = e.retry_after_s.map_or(1, u64::from);
            tokio::time::sleep(Duration::from_secs(pause)).await;
        }
        (stored, acknowledge) = (next, Some(next));
    }
}

/// Whether a join request whose approval failed with `e` is to be approved again later (the
/// page is not committed): Telegram asked to wait (`429`), did not answer, failed (`5xx`), or
/// refused the token, all of which pass. Any other refusal is final, and trying again would hold
/// back every later update of the bot: the request was handled already (approved before a
/// crash, `USER_ALREADY_PARTICIPANT`), withdrawn (`HIDE_REQUESTER_MISSING`), or the bot may no
/// longer approve; it is left to the channel's admins.
fn approve_again(e: &ApiError) -> bool {
    match e {
        ApiError::RetryAfter(_) | ApiError::Transport(_) | ApiError::Unauthorized(_) => true,
        ApiError::Refused(code, _) => *code >= 500,
    }
}

/// How long to wait after a failed call before the next.
pub(super) fn pause_after(e: &ApiError) -> Duration {
    match e {
        ApiError::RetryAfter(s) => Duration::from_secs((*s).max(1)),
        ApiError::Unauthorized(_) => Duration::from_secs(60),
        ApiError::Refused(..) | ApiError::Transport(_) => Duration::from_secs(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Me {
        Me {
            id: 42,
            username: "t_bot".into(),
        }
    }

    #[test]
    fn a_join_through_an_invite_link() {
        let result = json!([{
            "update_id": 7,
            "chat_member": {
                "chat": {"id": -1001, "type": "channel", "title": "News"},
                "from": {"id": 5, "is_bot": false, "first_name": "A"},
                "date": 1,
                "old_chat_member": {"status": "left", "user": {"id": 5, "is_bot": false, "first_name": "A"}},
                "new_chat_member": {"status": "member", "user": {"id": 5, "is_bot": false, "first_name": "A"}},
                "invite_link": {"invite_link": "https://t.me/+abc", "creator": {"id": 42, "is_bot": true, "first_name": "T"},
                    "creates_join_request": false, "is_primary": false, "is_revoked": false}
            }
        }]);
        let p = page(&result, &me(), |_| false);
        assert_eq!(p.next_offset, Some(8));
        assert_eq!(
            p.updates,
            vec![ChannelUpdate::Member {
                chat_id: -1001,
                tg_id: 5,
                was_member: false,
                is_member: true,
                invite_link: Some("https://t.me/+abc".into()),
                at_ms: Some(1000),
            }]
        );
    }

    #[test]
    fn join_requests_through_the_bots_own_links_are_approved() {
        let request = |creator: u64, asks: bool| {
            json!({"update_id": 1, "chat_join_request": {
                "chat": {"id": -1001, "type": "channel"}, "from": {"id": 5}, "user_chat_id": 5,
                "date": 1, "invite_link": {"invite_link": "https://t.me/+abc",
                "creator": {"id": creator}, "creates_join_request": asks}}})
        };
        assert_eq!(
            page(&json!([request(42, true)]), &me(), |_| false).approve,
            vec![(-1001, 5)]
        );
        assert!(
            page(&json!([request(43, true)]), &me(), |_| false)
                .approve
                .is_empty()
        );
        assert!(
            page(&json!([request(42, false)]), &me(), |_| false)
                .approve
                .is_empty()
        );
    }

    #[test]
    fn an_update_applied_already_is_acknowledged_and_left_out() {
        let join = |id: u64, user: u64| {
            json!({"update_id": id, "chat_member": {
                "chat": {"id": -1001, "type": "channel"}, "from": {"id": user}, "date": 1,
                "old_chat_member": {"status": "left", "user": {"id": user}},
                "new_chat_member": {"status": "member", "user": {"id": user}}}})
        };
        // The last page before a restart, read again, and a new update after it.
        let p = page(&json!([join(499, 1), join(500, 2)]), &me(), |id| {
            channel::applied_already(id, 500)
        });
        assert_eq!(p.next_offset, Some(501));
        assert_eq!(p.updates.len(), 1);
        assert!(matches!(
            p.updates[0],
            ChannelUpdate::Member { tg_id: 2, .. }
        ));
        // An id Telegram chose anew, far below the offset.
        let p = page(&json!([join(7, 3)]), &me(), |id| {
            channel::applied_already(id, 500_000)
        });
        assert_eq!((p.next_offset, p.updates.len()), (Some(8), 1));
    }

    #[test]
    fn an_approval_is_tried_again_unless_telegram_says_it_is_handled() {
        let again = [
            ApiError::RetryAfter(3),
            ApiError::Transport("connection reset".into()),
            ApiError::Refused(502, "Bad Gateway".into()),
            ApiError::Unauthorized("Unauthorized".into()),
        ];
        assert!(again.iter().all(approve_again));
        let handled = [
            ApiError::Refused(400, "Bad Request: USER_ALREADY_PARTICIPANT".into()),
            ApiError::Refused(400, "Bad Request: HIDE_REQUESTER_MISSING".into()),
            ApiError::Refused(
                403,
                "Forbidden: bot is not a member of the channel chat".into(),
            ),
            ApiError::Refused(499, "just below a server's error".into()),
        ];
        assert!(!handled.iter().any(approve_again));
    }

    #[test]
    fn other_updates_are_acknowledged_and_ignored() {
        let p = page(&json!([{"update_id": 3, "message": {}}]), &me(), |_| false);
        assert_eq!(p.updates, vec![ChannelUpdate::Other]);
        assert_eq!(p.next_offset, Some(4));
        assert_eq!(page(&json!([]), &me(), |_| false).next_offset, None);
    }
}
