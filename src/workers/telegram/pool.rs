//! Each channel link's pool of invite links made ahead (`docs/channels.md#invite-links`): made
//! with `createChatInviteLink` until the pool holds `invite_pool`, a few per commit, never
//! faster than Telegram allows (a `429`'s `retry_after` stops the space's making until then);
//! and invite links handed out and never used revoked after `invite_ttl`.
//!
//! A visit never waits for any of this: it takes what the pool holds, or goes to the fallback.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::domain::channel;
use crate::domain::link::Destination;
use crate::workers::telegram::Shared;
use crate::workers::telegram::api::{ApiError, BotApi};

/// Invite links made per commit: a pool refills in a few commits, and a crash loses at most
/// these (made at Telegram, never handed out; revoked by no one, but unused).
const PER_COMMIT: usize = 10;

/// Invite links looked at per revocation pass.
const REVOKE_PER_PASS: usize = 100;

/// What the loop remembers between passes: until when each space's bot asked to wait.
#[derive(Default)]
pub(super) struct Pools {
    wait_until: HashMap<u32, Instant>,
}

impl Pools {
    /// One pass: fills every channel link's pool of the spaces in `bots` (not of a space whose
    /// bot was asked to wait), gives `/metrics` every one's invite links, then revokes.
    pub(super) async fn look(&mut self, shared: &Shared, bots: &HashMap<u32, super::Bot>) {
        let mut invites = BTreeMap::new();
        for (space, (_, api, _)) in bots {
            let waiting = self
                .wait_until
                .get(space)
                .is_some_and(|until| Instant::now() < *until);
            if let Err(ApiError::RetryAfter(s)) =
                fill_space(shared, (*space, api), waiting, &mut invites).await
            {
                self.wait_until
                    .insert(*space, Instant::now() + Duration::from_secs(s.max(1)));
            }
        }
        shared.status.channel_invites(invites);
        revoke(shared, bots, &mut self.wait_until).await;
    }
}

/// Fills the pools of `space`'s channel links unless `waiting`; stops at a `429`, which it
/// answers. Each link's invite links (pool, handed out, used) go into `invites`.
async fn fill_space(
    shared: &Shared,
    (space, api): (u32, &BotApi),
    waiting: bool,
    invites: &mut BTreeMap<String, [u64; 3]>,
) -> Result<(), ApiError> {
    let Ok(links) = shared.store.read(move |s| s.links(space)).await else {
        return Ok(());
    };
    let size = if waiting {
        0
    } else {
        u64::from(shared.settings.telegram.invite_pool)
    };
    for (link, _, _) in links {
        let Destination::Channel(c) = &link.destination else {
            continue;
        };
        if !shared.status.knows_chat(c.chat_id) {
            // Whether the channel is public, for its links' views; asked once a run.
            let params = json!({"chat_id": c.chat_id});
            if let Ok(chat) = api.call("getChat", &params, Duration::ZERO).await {
                shared
                    .status
                    .chat_seen(c.chat_id, chat["username"].as_str());
            }
        }
        let slug = link.slug.clone();
        let Ok(counts) = shared.store.read(move |s| s.channel_counts(&slug)).await else {
            continue;
        };
        let gauge = invites.entry(link.slug.clone()).or_insert([
            counts.pool,
            counts.state.handed_out,
            counts.state.used,
        ]);
        let mut missing = size.saturating_sub(counts.pool);
        while missing > 0 {
            let mut made = Vec::new();
            let mut stop = None;
            while made.len() < PER_COMMIT && (made.len() as u64) < missing {
                let params = json!({
                    "chat_id": c.chat_id,
                    "name": channel::invite_name(&link.slug),
                    "creates_join_request": c.join_requests,
                });
                match api
                    .call("createChatInviteLink", &params, Duration::ZERO)
                    .await
                {
                    Ok(invite) => match invite["invite_link"].as_str() {
                        Some(url) => made.push(url.to_owned()),
                        None => {
                            stop = Some(ApiError::Transport(
                                "createChatInviteLink answered no invite_link".into(),
                            ));
                        }
                    },
                    Err(e) => stop = Some(e),
                }
                if stop.is_some() {
                    break;
                }
            }
            shared.status.set_link_error(&link.slug, stop.as_ref());
            if !made.is_empty() {
                let n = made.len() as u64;
                let now_ms = shared.clock.now_ms();
                let slug = link.slug.clone();
                if let Err(e) = shared
                    .store
                    .write(move |t| t.add_invites(space, &slug, &made, now_ms))
                    .await
                {
                    tracing::warn!(slug = %link.slug, error = %e, "storing invite links");
                    break;
                }
                shared.status.count("invites_made", n);
                gauge[0] += n;
                missing -= n;
            }
            match stop {
                Some(ApiError::RetryAfter(s)) => return Err(ApiError::RetryAfter(s)),
                Some(_) => break,
                None => {}
            }
        }
    }
    Ok(())
}

/// Revokes invite links handed out before `invite_ttl` ago and never used. A space whose bot
/// was asked to wait (`wait_until`) is passed over; a failure makes its space wait (a `429` its
/// `retry_after`, another failure as a failed call of the bot waits) and stops only that space,
/// so one space's failures never hold back another's. The links of a space with no bot (its
/// token removed, or the space gone) cannot be revoked: they are left to Telegram and no
/// longer looked at, so that they neither hold back the others nor are read again each pass.
async fn revoke(
    shared: &Shared,
    bots: &HashMap<u32, super::Bot>,
    wait_until: &mut HashMap<u32, Instant>,
) {
    let ttl_ms = u64::try_from(shared.settings.telegram.invite_ttl.as_millis()).unwrap_or(u64::MAX);
    let now_ms = shared.clock.now_ms();
    let waiting: HashSet<u32> = wait_until
        .iter()
        .filter(|(_, until)| Instant::now() < **until)
        .map(|(space, _)| *space)
        .collect();
    let before_ms = now_ms.saturating_sub(ttl_ms);
    let Ok(due) = shared
        .store
        .read(move |s| {
            s.invites_to_revoke(before_ms, REVOKE_PER_PASS, |space| {
                !waiting.contains(&space)
            })
        })
        .await
    else {
        return;
    };
    let mut done = Vec::new();
    let mut stopped = HashSet::new();
    for (space, slug, url) in due {
        if stopped.contains(&space) {
            continue;
        }
        let Some(Destination::Channel(c)) = shared.store.link(&slug).map(|l| l.destination.clone())
        else {
            // Its link is gone: nothing to revoke it for.
            done.push(url);
            continue;
        };
        let chat_id = c.chat_id;
        let Some((_, api, _)) = bots.get(&space) else {
            // No bot to revoke it with: left to Telegram, and no longer looked at.
            done.push(url);
            continue;
        };
        let params = json!({"chat_id": chat_id, "invite_link": url});
        match api
            .call("revokeChatInviteLink", &params, Duration::ZERO)
            .await
        {
            // Refused: already revoked, or expired, at Telegram; not waited on either way.
            Ok(_) | Err(ApiError::Refused(..)) => done.push(url),
            Err(e) => {
                wait_until.insert(space, Instant::now() + super::updates::pause_after(&e));
                shared.status.set_link_error(&slug, Some(&e));
                stopped.insert(space);
            }
        }
    }
    if !done.is_empty()
        && let Err(e) = shared
            .store
            .write(move |t| t.invites_revoked(&done, now_ms))
            .await
    {
        tracing::warn!(error = %e, "marking invite links revoked");
    }
}
