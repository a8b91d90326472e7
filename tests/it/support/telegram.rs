//! A stand-in for Telegram's Bot API on 127.0.0.1: a small HTTP/1.1 server that answers
//! `POST /bot<token>/<method>` with a JSON body as the Bot API documents
//! (`{"ok": true, "result": ...}`, or `{"ok": false, "error_code", "description",
//! "parameters": {"retry_after"}}`), for one bot and the channels the test gives it.
//!
//! - `getMe`; a token other than the bot's is answered `401 Unauthorized`, unless
//!   [`BotApi::add_other_bot`] made it another bot's (one with no channel and no update) and
//!   [`BotApi::revoke_other_bot`] has not revoked it since.
//! - `getChat`, `getChatMember` (the bot is an admin that may invite users, unless the test
//!   says otherwise), `createChatInviteLink` (a `ChatInviteLink` made by the bot),
//!   `revokeChatInviteLink`, `approveChatJoinRequest` (which, as Telegram does, brings the
//!   join that follows as a `chat_member` update).
//! - `getUpdates` with Telegram's rules: updates are kept until a call asks for an offset above
//!   their id, which drops them for good; a call with nothing to answer waits up to its
//!   `timeout` seconds (long polling); without `chat_member` in `allowed_updates`, no
//!   `chat_member` update is sent. Ids go up by one from a bot-sized number, until
//!   [`BotApi::choose_update_ids_anew`] does what Telegram does after a week without updates.
//! - [`BotApi::throttle`] answers `createChatInviteLink` `429` with `parameters.retry_after`,
//!   and [`BotApi::throttle_next_approval`] the next `approveChatJoinRequest` (or
//!   [`BotApi::throttle_approval_after`] a later one), which [`BotApi::refuse_next_approval`]
//!   refuses instead;
//!   [`BotApi::hold_updates`] gathers the updates pushed meanwhile into one page;
//!   [`BotApi::lose_acknowledgements`] loses every `getUpdates` that acknowledges (`502`).
//! - [`BotApi::refuse_next_call`] answers a method's next call with an error of the test's
//!   choosing (any `description`), and [`BotApi::send_huge_next`] with `200` and a body of the
//!   given size sent as it is made (chunked), a result that never ends.
//! - `setWebhook` (refusing, as Telegram does, a URL that is not `https://` and a
//!   `secret_token` that is not 1 to 256 of `A-Za-z0-9_-`), `deleteWebhook` (keeping the updates
//!   unless `drop_pending_updates`) and `getWebhookInfo`; while a webhook is set, `getUpdates`
//!   is answered `409 Conflict`. [`BotApi::deliver`] then does what Telegram does with the
//!   updates: `POST`s each, in order and one at a time, to the webhook's path at the address
//!   the test gives (the tracker behind the `https://` `public_url`, which the stand-in never
//!   dials), with the `X-Telegram-Bot-Api-Secret-Token` header, dropping an update once
//!   answered `2xx` and keeping it (to send again) otherwise.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::loopback::{Listening, listen, read_request, send_endless, write_json};

/// The bot's id, its username and a token of Telegram's shape.
pub const BOT_ID: u64 = 7_000_000_001;
pub const BOT_USERNAME: &str = "tracker_test_bot";
pub const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";

/// A channel the stand-in knows.
#[derive(Clone, Debug)]
pub struct Chat {
    pub id: i64,
    pub username: Option<String>,
    /// `channel`, `supergroup`, `group`, `private`.
    pub kind: &'static str,
    pub title: String,
    /// The bot's status in it: `administrator` (with `can_invite_users`) or `member`.
    pub bot_admin: bool,
    pub bot_can_invite: bool,
}

/// An invite link the bot made.
#[derive(Clone, Debug)]
pub struct Invite {
    pub url: String,
    pub chat_id: i64,
    pub name: Option<String>,
    pub creates_join_request: bool,
    pub revoked: bool,
}

/// The id of the stand-in's first update.
pub const FIRST_UPDATE_ID: u64 = 700_000_000;

/// One `getUpdates` call as it arrived.
#[derive(Clone, Debug)]
pub struct Poll {
    /// `None`: the call asked for the updates not yet acknowledged, whatever their ids.
    pub offset: Option<i64>,
    pub timeout: u64,
    pub allowed_updates: Option<Vec<String>>,
}

/// The webhook `setWebhook` set.
#[derive(Clone, Debug)]
pub struct Webhook {
    pub url: String,
    pub secret_token: Option<String>,
    pub allowed_updates: Option<Vec<String>>,
    pub max_connections: Option<u64>,
}

#[derive(Default)]
struct State {
    webhook: Option<Webhook>,
    /// Every method called, in order.
    log: Vec<String>,
    chats: Vec<Chat>,
    invites: Vec<Invite>,
    /// Updates not yet dropped, by id.
    updates: BTreeMap<u64, Value>,
    next_update_id: u64,
    /// `createChatInviteLink` answered `429` with this `retry_after` while set.
    throttle: Option<u64>,
    throttled: u64,
    /// The answers to the next `approveChatJoinRequest`s, in order; `None` (and an empty
    /// queue) for the usual one.
    next_approvals: std::collections::VecDeque<Option<(u16, Value)>>,
    /// When each `approveChatJoinRequest` arrived.
    approvals_asked: Vec<tokio::time::Instant>,
    /// `retry_after` of a `429` to answer the next `revokeChatInviteLink` with.
    throttle_revoke: Option<u64>,
    /// When each `revokeChatInviteLink` arrived, answered or not.
    revokes_asked: Vec<tokio::time::Instant>,
    approved: Vec<(i64, u64)>,
    polls: Vec<Poll>,
    calls: HashMap<String, u64>,
    /// Connections whose requests are still being read or answered.
    open: usize,
    /// While set, `getUpdates` answers as if no update were kept ([`BotApi::hold_updates`]).
    held: bool,
    /// While set, a `getUpdates` with an offset is lost ([`BotApi::lose_acknowledgements`]).
    lose_acknowledgements: bool,
    /// Tokens of other bots ([`BotApi::add_other_bot`]).
    other_bots: Vec<String>,
    /// Calls made with other bots' tokens, by method.
    other_calls: HashMap<String, u64>,
    /// The answers to the next calls with another bot's token, by token.
    next_other_calls: HashMap<String, std::collections::VecDeque<(u16, String)>>,
    /// While set, no request is answered ([`BotApi::go_silent`]).
    silent: bool,
    /// `sendMessage` calls: chat and text.
    messages: Vec<(String, String)>,
    /// The answers to the next calls of a method, before its usual one.
    next_calls: HashMap<String, std::collections::VecDeque<NextCall>>,
}

/// An answer of the test's choosing to a method's next call.
enum NextCall {
    Refuse(u16, String),
    /// `200` with a body of this many bytes that never closes.
    Huge(usize),
}

/// Counts a connection as open while it lives.
struct Open(Arc<Mutex<State>>);

impl Open {
    fn new(state: &Arc<Mutex<State>>) -> Open {
        state.lock().unwrap().open += 1;
        Open(state.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .open -= 1;
    }
}

pub struct BotApi {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    arrived: Arc<Notify>,
    _listening: Listening,
}

impl BotApi {
    /// Starts the stand-in with no channels.
    pub async fn start() -> BotApi {
        let state = Arc::new(Mutex::new(State {
            // As large as a real bot's: ids chosen anew after a quiet week can lie far below.
            next_update_id: FIRST_UPDATE_ID,
            ..State::default()
        }));
        let arrived = Arc::new(Notify::new());
        let (s, a) = (state.clone(), arrived.clone());
        let listening = listen(move |stream| serve(stream, s.clone(), a.clone())).await;
        BotApi {
            addr: listening.addr,
            state,
            arrived,
            _listening: listening,
        }
    }

    /// The address to set as `telegram_api_url`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Makes `token` another bot's, the bot its id names (`@other_<id>_bot`): it has no channel
    /// and no update, and its long polls wait their `timeout` and find nothing.
    pub fn add_other_bot(&self, token: &str) {
        self.state.lock().unwrap().other_bots.push(token.to_owned());
    }

    /// Revokes `token` of another bot, as `@BotFather`'s `/revoke` does: from then on every call
    /// with it is answered as Telegram answers a token it does not know, `401` with
    /// `{"ok":false,"error_code":401,"description":"Unauthorized"}` and no word of the bot.
    pub fn revoke_other_bot(&self, token: &str) {
        self.state.lock().unwrap().other_bots.retain(|t| t != token);
    }

    /// Answers the next call with `token` of another bot `status` with `description`.
    pub fn refuse_next_other_call(&self, token: &str, status: u16, description: &str) {
        let mut s = self.state.lock().unwrap();
        let queue = s.next_other_calls.entry(token.to_owned()).or_default();
        queue.push_back((status, description.to_owned()));
    }

    /// While `silent`, every request is met with the connection closed and no answer, as when
    /// Telegram cannot be reached at all.
    pub fn go_silent(&self, silent: bool) {
        self.state.lock().unwrap().silent = silent;
    }

    /// Each `sendMessage` the bot was asked: its `chat_id` (as text) and `text`.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().messages.clone()
    }

    /// Calls made with the token of another bot, by method.
    pub fn other_bot_calls(&self, method: &str) -> u64 {
        let s = self.state.lock().unwrap();
        s.other_calls.get(method).copied().unwrap_or(0)
    }

    /// Answers the next call of `method` `status` with `description`.
    pub fn refuse_next_call(&self, method: &str, status: u16, description: &str) {
        let mut s = self.state.lock().unwrap();
        let queue = s.next_calls.entry(method.to_owned()).or_default();
        queue.push_back(NextCall::Refuse(status, description.to_owned()));
    }

    /// Answers the next call of `method` `200` with `bytes` of a result that never ends.
    pub fn send_huge_next(&self, method: &str, bytes: usize) {
        let mut s = self.state.lock().unwrap();
        let queue = s.next_calls.entry(method.to_owned()).or_default();
        queue.push_back(NextCall::Huge(bytes));
    }

    pub fn add_chat(&self, chat: Chat) {
        self.state.lock().unwrap().chats.push(chat);
    }

    /// A channel `@username` with id `id`, the bot an admin that may invite users.
    pub fn add_channel(&self, id: i64, username: &str) {
        self.add_chat(Chat {
            id,
            username: Some(username.to_owned()),
            kind: "channel",
            title: format!("Channel {username}"),
            bot_admin: true,
            bot_can_invite: true,
        });
    }

    /// Answers `createChatInviteLink` `429` with `retry_after` (`None`: answers it again).
    pub fn throttle(&self, retry_after: Option<u64>) {
        self.state.lock().unwrap().throttle = retry_after;
    }

    /// How many `createChatInviteLink` calls were answered `429`.
    #[must_use]
    pub fn throttled(&self) -> u64 {
        self.state.lock().unwrap().throttled
    }

    /// Answers the next `approveChatJoinRequest` `429` with `retry_after`, as Telegram does
    /// when a bot approves too fast; the one after is answered as usual.
    pub fn throttle_next_approval(&self, retry_after: u64) {
        self.throttle_approval_after(0, retry_after);
    }

    /// Answers `approveChatJoinRequest` as usual `after` times more, then `429` with
    /// `retry_after` once.
    pub fn throttle_approval_after(&self, after: usize, retry_after: u64) {
        let mut answers = vec![None; after];
        answers.push(Some(too_many(retry_after)));
        self.state.lock().unwrap().next_approvals = answers.into();
    }

    /// Answers the next `approveChatJoinRequest` `400` with `description` (such as `Bad
    /// Request: CHAT_ADMIN_REQUIRED`, when the bot may no longer approve): the request stays
    /// pending, for the channel's admins.
    pub fn refuse_next_approval(&self, description: &str) {
        self.state.lock().unwrap().next_approvals = [Some(refused(400, description))].into();
    }

    /// Answers the next `revokeChatInviteLink` `429` with `retry_after`; the one after is
    /// answered as usual.
    pub fn throttle_next_revoke(&self, retry_after: u64) {
        self.state.lock().unwrap().throttle_revoke = Some(retry_after);
    }

    /// When each `revokeChatInviteLink` arrived, answered or not.
    #[must_use]
    pub fn revokes_asked(&self) -> Vec<tokio::time::Instant> {
        self.state.lock().unwrap().revokes_asked.clone()
    }

    /// When each `approveChatJoinRequest` arrived, answered or not.
    #[must_use]
    pub fn approvals_asked(&self) -> Vec<tokio::time::Instant> {
        self.state.lock().unwrap().approvals_asked.clone()
    }

    #[must_use]
    pub fn invites(&self) -> Vec<Invite> {
        self.state.lock().unwrap().invites.clone()
    }

    #[must_use]
    pub fn approved(&self) -> Vec<(i64, u64)> {
        self.state.lock().unwrap().approved.clone()
    }

    #[must_use]
    pub fn polls(&self) -> Vec<Poll> {
        self.state.lock().unwrap().polls.clone()
    }

    /// Connections still being read or answered: none once a killed client's last request
    /// (a long poll included) has been read and answered.
    #[must_use]
    pub fn open_connections(&self) -> usize {
        self.state.lock().unwrap().open
    }

    /// How many times `method` was called.
    #[must_use]
    pub fn calls(&self, method: &str) -> u64 {
        self.state
            .lock()
            .unwrap()
            .calls
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// The webhook set, if one is.
    #[must_use]
    pub fn webhook(&self) -> Option<Webhook> {
        self.state.lock().unwrap().webhook.clone()
    }

    /// Every method called so far, in order.
    #[must_use]
    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    /// What Telegram does with a webhook set: `POST`s each update kept that the webhook's
    /// `allowed_updates` ask for (by default, all but `chat_member`), in order and one at a
    /// time, to the webhook's path at `tracker` (`http://`: the TLS of the `https://` URL ends
    /// before it), with its secret in `X-Telegram-Bot-Api-Secret-Token`. An update answered
    /// `2xx` is dropped; at the first that is not, delivery stops and it is kept (Telegram
    /// sends it again later). Answers each update's id and the status it was answered.
    ///
    /// # Panics
    /// If no webhook is set.
    pub async fn deliver(&self, tracker: SocketAddr) -> Vec<(u64, u16)> {
        let hook = self.webhook().expect("a webhook is set");
        let path = hook
            .url
            .strip_prefix("https://")
            .and_then(|rest| rest.find('/').map(|at| rest[at..].to_owned()))
            .unwrap_or_else(|| "/".to_owned());
        let wanted = |u: &Value| {
            let kind = u
                .as_object()
                .and_then(|o| o.keys().find(|k| *k != "update_id").cloned())
                .unwrap_or_default();
            match &hook.allowed_updates {
                Some(list) if !list.is_empty() => list.contains(&kind),
                _ => kind != "chat_member",
            }
        };
        let mut answered = Vec::new();
        loop {
            let next = {
                let s = self.state.lock().unwrap();
                s.updates
                    .iter()
                    .find(|(_, u)| wanted(u))
                    .map(|(id, u)| (*id, u.to_string()))
            };
            let Some((id, body)) = next else {
                return answered;
            };
            let mut request = crate::support::Request::post(&path, None, &body);
            if let Some(secret) = &hook.secret_token {
                request = request.header("X-Telegram-Bot-Api-Secret-Token", secret.clone());
            }
            let status = crate::support::send(tracker, &request).await.status;
            answered.push((id, status));
            if !(200..300).contains(&status) {
                return answered;
            }
            self.state.lock().unwrap().updates.remove(&id);
        }
    }

    /// The update `id` as Telegram would send it, while it is kept.
    #[must_use]
    pub fn update(&self, id: u64) -> Option<Value> {
        self.state.lock().unwrap().updates.get(&id).cloned()
    }

    /// Updates kept: not yet acknowledged by a `getUpdates` with an offset above them.
    #[must_use]
    pub fn kept_updates(&self) -> Vec<u64> {
        self.state.lock().unwrap().updates.keys().copied().collect()
    }

    /// What Telegram does after a week without updates: the next update's id is chosen anew,
    /// here `next` (the Bot API's `Update.update_id`: "chosen randomly instead of
    /// sequentially"), and the ids go on from it.
    pub fn choose_update_ids_anew(&self, next: u64) {
        self.state.lock().unwrap().next_update_id = next;
    }

    /// While `held`, `getUpdates` answers as if no update were kept (a long poll waits), so
    /// that the updates pushed meanwhile come in one page once released.
    pub fn hold_updates(&self, held: bool) {
        self.state.lock().unwrap().held = held;
        self.arrived.notify_waiters();
    }

    /// While set, every `getUpdates` that carries an offset is lost on its way, as when the
    /// network fails between a commit and the next call: recorded in [`BotApi::polls`], then
    /// answered `502 Bad Gateway` (as Telegram's front answers when it cannot reach the Bot
    /// API) without the offset acknowledging anything.
    pub fn lose_acknowledgements(&self, lose: bool) {
        self.state.lock().unwrap().lose_acknowledgements = lose;
    }

    /// What Telegram does with update `id` once the webhook answered it `2xx` (sent by the
    /// test itself rather than by [`BotApi::deliver`]): drops it.
    pub fn answered(&self, id: u64) {
        self.state.lock().unwrap().updates.remove(&id);
    }

    /// Adds an update (`kind`: `chat_member`, `chat_join_request`, ...); answers its id.
    pub fn push(&self, kind: &str, object: Value) -> u64 {
        let id = {
            let mut s = self.state.lock().unwrap();
            let id = s.next_update_id;
            s.next_update_id += 1;
            let mut update = json!({"update_id": id});
            update[kind] = object;
            s.updates.insert(id, update);
            id
        };
        self.arrived.notify_waiters();
        id
    }

    /// User `user` joins channel `chat_id`, through `invite` if given.
    pub fn push_join(&self, chat_id: i64, user: u64, invite: Option<&str>) -> u64 {
        let object = {
            let s = self.state.lock().unwrap();
            member_updated(&s, chat_id, user, "left", "member", invite)
        };
        self.push("chat_member", object)
    }

    /// [`BotApi::push_join`], dated `date_s` (unix seconds) instead of now: an update read
    /// late, or one from a clock that disagrees.
    pub fn push_join_at(&self, chat_id: i64, user: u64, invite: Option<&str>, date_s: u64) -> u64 {
        let object = {
            let s = self.state.lock().unwrap();
            let mut v = member_updated(&s, chat_id, user, "left", "member", invite);
            v["date"] = date_s.into();
            v
        };
        self.push("chat_member", object)
    }

    /// User `user` leaves channel `chat_id` (`left`), or is removed (`kicked`).
    pub fn push_leave(&self, chat_id: i64, user: u64, status: &str) -> u64 {
        let object = {
            let s = self.state.lock().unwrap();
            member_updated(&s, chat_id, user, "member", status, None)
        };
        self.push("chat_member", object)
    }

    /// User `user` asks to join channel `chat_id` through `invite`.
    pub fn push_join_request(&self, chat_id: i64, user: u64, invite: &str) -> u64 {
        let object = {
            let s = self.state.lock().unwrap();
            json!({
                "chat": chat_json(&s, chat_id),
                "from": user_json(user),
                "user_chat_id": user,
                "date": unix_now(),
                "invite_link": invite_json(&s, invite),
            })
        };
        self.push("chat_join_request", object)
    }

    /// Waits until `done` holds of the stand-in (at most `within`).
    pub async fn wait_until(&self, within: Duration, done: impl Fn(&BotApi) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        while !done(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the stand-in did not see it within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn user_json(id: u64) -> Value {
    json!({"id": id, "is_bot": false, "first_name": format!("User {id}")})
}

fn bot_json() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Tracker test", "username": BOT_USERNAME})
}

fn chat_json(s: &State, chat_id: i64) -> Value {
    let chat = s.chats.iter().find(|c| c.id == chat_id);
    let mut v = json!({
        "id": chat_id,
        "type": chat.map_or("channel", |c| c.kind),
        "title": chat.map_or("?", |c| c.title.as_str()),
    });
    if let Some(name) = chat.and_then(|c| c.username.clone()) {
        v["username"] = name.into();
    }
    v
}

/// A `ChatInviteLink` as Telegram shows it to the bot that made it.
fn invite_json(s: &State, url: &str) -> Value {
    let invite = s.invites.iter().find(|i| i.url == url);
    let mut v = json!({
        "invite_link": url,
        "creator": bot_json(),
        "creates_join_request": invite.is_some_and(|i| i.creates_join_request),
        "is_primary": false,
        "is_revoked": invite.is_some_and(|i| i.revoked),
    });
    if let Some(name) = invite.and_then(|i| i.name.clone()) {
        v["name"] = name.into();
    }
    v
}

fn member_json(user: u64, status: &str) -> Value {
    let mut v = json!({"status": status, "user": user_json(user)});
    if status == "kicked" {
        v["until_date"] = 0.into();
    }
    v
}

fn member_updated(
    s: &State,
    chat_id: i64,
    user: u64,
    old: &str,
    new: &str,
    invite: Option<&str>,
) -> Value {
    let mut v = json!({
        "chat": chat_json(s, chat_id),
        "from": user_json(user),
        "date": unix_now(),
        "old_chat_member": member_json(user, old),
        "new_chat_member": member_json(user, new),
    });
    if let Some(url) = invite {
        v["invite_link"] = invite_json(s, url);
    }
    v
}

fn ok(result: Value) -> (u16, Value) {
    let mut answer = json!({"ok": true});
    answer["result"] = result;
    (200, answer)
}

fn refused(code: u16, description: &str) -> (u16, Value) {
    (
        code,
        json!({"ok": false, "error_code": code, "description": description}),
    )
}

/// The chat a `chat_id` parameter names: its id, or `@username`.
fn find_chat<'a>(s: &'a State, param: &Value) -> Option<&'a Chat> {
    s.chats.iter().find(|c| match param {
        Value::String(t) => t
            .strip_prefix('@')
            .map_or(t.parse::<i64>().ok() == Some(c.id), |name| {
                c.username.as_deref() == Some(name)
            }),
        Value::Number(n) => n.as_i64() == Some(c.id),
        _ => false,
    })
}

async fn answer(
    method: &str,
    params: &Value,
    state: &Arc<Mutex<State>>,
    arrived: &Arc<Notify>,
) -> (u16, Value) {
    {
        let mut s = state.lock().unwrap();
        *s.calls.entry(method.to_owned()).or_default() += 1;
        s.log.push(method.to_owned());
    }
    if method == "getUpdates" {
        if state.lock().unwrap().webhook.is_some() {
            return refused(
                409,
                "Conflict: can't use getUpdates method while webhook is active; \
                 use deleteWebhook to delete the webhook first",
            );
        }
        return get_updates(params, state, arrived).await;
    }
    let mut s = state.lock().unwrap();
    match method {
        "setWebhook" => set_webhook(&mut s, params),
        "deleteWebhook" => {
            let was = s.webhook.take().is_some();
            if params["drop_pending_updates"] == true {
                s.updates.clear();
            }
            let mut answer = ok(json!(true));
            answer.1["description"] = if was {
                "Webhook was deleted"
            } else {
                "Webhook is already deleted"
            }
            .into();
            answer
        }
        "getWebhookInfo" => {
            let hook = s.webhook.clone();
            let mut info = json!({"url": hook.as_ref().map_or("", |h| h.url.as_str()),
                "has_custom_certificate": false, "pending_update_count": s.updates.len()});
            if let Some(h) = hook {
                info["max_connections"] = h.max_connections.unwrap_or(40).into();
                if let Some(a) = h.allowed_updates {
                    info["allowed_updates"] = a.into();
                }
            }
            ok(info)
        }
        "getMe" => ok(
            json!({"id": BOT_ID, "is_bot": true, "first_name": "Tracker test",
            "username": BOT_USERNAME, "can_join_groups": true,
            "can_read_all_group_messages": false, "supports_inline_queries": false}),
        ),
        "getChat" => match find_chat(&s, &params["chat_id"]) {
            Some(c) => {
                let id = c.id;
                let mut v = chat_json(&s, id);
                v["accent_color_id"] = 0.into();
                v["max_reaction_count"] = 11.into();
                ok(v)
            }
            None => refused(400, "Bad Request: chat not found"),
        },
        "getChatMember" => get_chat_member(&s, params),
        // https://core.telegram.org/bots/api#sendmessage: "Use this method to send text
        // messages. On success, the sent Message is returned": its `message_id`, `date`, `chat`
        // and `text`.
        "sendMessage" => {
            let chat = match &params["chat_id"] {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            let text = params["text"].as_str().unwrap_or_default().to_owned();
            s.messages.push((chat.clone(), text.clone()));
            let id = s.messages.len();
            ok(json!({"message_id": id, "date": unix_now(), "text": text,
                "chat": {"id": chat.parse::<i64>().unwrap_or(0), "type": "channel"}}))
        }
        "createChatInviteLink" => create_invite(&mut s, params),
        "revokeChatInviteLink" => {
            s.revokes_asked.push(tokio::time::Instant::now());
            if let Some(retry_after) = s.throttle_revoke.take() {
                return too_many(retry_after);
            }
            let url = params["invite_link"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match s.invites.iter_mut().find(|i| i.url == url) {
                Some(i) => {
                    i.revoked = true;
                    ok(invite_json(&s, &url))
                }
                None => refused(400, "Bad Request: INVITE_HASH_EXPIRED"),
            }
        }
        "approveChatJoinRequest" => {
            let answer = approve(&mut s, params);
            drop(s);
            arrived.notify_waiters();
            answer
        }
        _ => refused(404, "Not Found"),
    }
}

/// `setWebhook`, with Telegram's checks of `url` and `secret_token`.
fn set_webhook(s: &mut State, params: &Value) -> (u16, Value) {
    let url = params["url"].as_str().unwrap_or_default();
    if url.is_empty() {
        s.webhook = None;
        let mut answer = ok(json!(true));
        answer.1["description"] = "Webhook was deleted".into();
        return answer;
    }
    if !url.starts_with("https://") {
        return refused(
            400,
            "Bad Request: bad webhook: An HTTPS URL must be provided for webhook",
        );
    }
    let secret = params["secret_token"].as_str().map(str::to_owned);
    if secret.as_deref().is_some_and(|t| {
        t.is_empty()
            || t.len() > 256
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }) {
        return refused(
            400,
            "Bad Request: secret token contains unallowed characters",
        );
    }
    s.webhook = Some(Webhook {
        url: url.to_owned(),
        secret_token: secret,
        allowed_updates: params["allowed_updates"].as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        }),
        max_connections: params["max_connections"].as_u64(),
    });
    let mut answer = ok(json!(true));
    answer.1["description"] = "Webhook was set".into();
    answer
}

fn get_chat_member(s: &State, params: &Value) -> (u16, Value) {
    let Some(c) = find_chat(s, &params["chat_id"]) else {
        return refused(400, "Bad Request: chat not found");
    };
    let user = params["user_id"].as_u64().unwrap_or(0);
    if user != BOT_ID {
        return ok(member_json(user, "left"));
    }
    if c.bot_admin {
        ok(json!({"status": "administrator", "user": bot_json(),
                    "can_be_edited": false, "is_anonymous": false, "can_manage_chat": true,
                    "can_delete_messages": true, "can_manage_video_chats": false,
                    "can_restrict_members": true, "can_promote_members": false,
                    "can_change_info": false, "can_invite_users": c.bot_can_invite,
                    "can_post_stories": false, "can_edit_stories": false,
                    "can_delete_stories": false, "can_post_messages": true,
                    "can_edit_messages": false}))
    } else {
        ok(member_json(BOT_ID, "member"))
    }
}

/// `429 Too Many Requests` as Telegram answers it.
fn too_many(retry_after: u64) -> (u16, Value) {
    (
        429,
        json!({"ok": false, "error_code": 429,
                "description": format!("Too Many Requests: retry after {retry_after}"),
                "parameters": {"retry_after": retry_after}}),
    )
}

fn create_invite(s: &mut State, params: &Value) -> (u16, Value) {
    if let Some(retry_after) = s.throttle {
        s.throttled += 1;
        return too_many(retry_after);
    }
    let Some(c) = find_chat(s, &params["chat_id"]).cloned() else {
        return refused(400, "Bad Request: chat not found");
    };
    if !(c.bot_admin && c.bot_can_invite) {
        return refused(
            400,
            "Bad Request: not enough rights to manage chat invite link",
        );
    }
    if params["name"]
        .as_str()
        .is_some_and(|n| n.chars().count() > 32)
    {
        return refused(400, "Bad Request: invite link name is too long");
    }
    let url = format!("https://t.me/+stand{:011}", s.invites.len() + 1);
    s.invites.push(Invite {
        url: url.clone(),
        chat_id: c.id,
        name: params["name"].as_str().map(str::to_owned),
        creates_join_request: params["creates_join_request"] == true,
        revoked: false,
    });
    ok(invite_json(s, &url))
}

/// `approveChatJoinRequest`: the request's join follows as a `chat_member` update, through the
/// invite link the request came by.
fn approve(s: &mut State, params: &Value) -> (u16, Value) {
    s.approvals_asked.push(tokio::time::Instant::now());
    if let Some(Some(answer)) = s.next_approvals.pop_front() {
        return answer;
    }
    let (chat_id, user) = (
        params["chat_id"].as_i64().unwrap_or(0),
        params["user_id"].as_u64().unwrap_or(0),
    );
    let request = s.updates.values().find(|u| {
        u["chat_join_request"]["chat"]["id"].as_i64() == Some(chat_id)
            && u["chat_join_request"]["from"]["id"].as_u64() == Some(user)
    });
    let Some(request) = request.cloned() else {
        if s.approved.contains(&(chat_id, user)) {
            return refused(400, "Bad Request: USER_ALREADY_PARTICIPANT");
        }
        return refused(400, "Bad Request: HIDE_REQUESTER_MISSING");
    };
    s.approved.push((chat_id, user));
    let url = request["chat_join_request"]["invite_link"]["invite_link"]
        .as_str()
        .map(str::to_owned);
    let join = member_updated(s, chat_id, user, "left", "member", url.as_deref());
    let id = s.next_update_id;
    s.next_update_id += 1;
    s.updates
        .insert(id, json!({"update_id": id, "chat_member": join}));
    ok(json!(true))
}

/// `getUpdates`: drops every update below `offset`, then answers those left that the call
/// asks for, waiting up to `timeout` seconds for one.
async fn get_updates(
    params: &Value,
    state: &Arc<Mutex<State>>,
    arrived: &Arc<Notify>,
) -> (u16, Value) {
    let offset = params["offset"].as_i64();
    let timeout = params["timeout"].as_u64().unwrap_or(0);
    let allowed: Option<Vec<String>> = params["allowed_updates"].as_array().map(|a| {
        a.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    });
    {
        let mut s = state.lock().unwrap();
        s.polls.push(Poll {
            offset,
            timeout,
            allowed_updates: allowed.clone(),
        });
        if offset.is_some() && s.lose_acknowledgements {
            return refused(502, "Bad Gateway");
        }
    }
    // By default Telegram sends every kind but `chat_member` (and a few others).
    let wanted = |u: &Value| {
        let kind = u
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "update_id").cloned())
            .unwrap_or_default();
        match &allowed {
            Some(list) if !list.is_empty() => list.contains(&kind),
            _ => kind != "chat_member",
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let notified = arrived.notified();
        {
            let mut s = state.lock().unwrap();
            if let Some(offset) = offset.filter(|o| *o > 0) {
                let below: Vec<u64> = s
                    .updates
                    .range(..u64::try_from(offset).unwrap_or(0))
                    .map(|(k, _)| *k)
                    .collect();
                for k in below {
                    s.updates.remove(&k);
                }
            }
            let found: Vec<Value> = s
                .updates
                .values()
                .filter(|u| !s.held && wanted(u))
                .take(100)
                .cloned()
                .collect();
            if !found.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(found));
            }
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

/// A call to another bot than the stand-in's ([`BotApi::add_other_bot`]). Its `getMe` answers
/// as <https://core.telegram.org/bots/api#getme> documents: "Returns basic information about
/// the bot in form of a User object", with the bot's `id`, `is_bot: true`, `first_name` and
/// `username`.
async fn other_bot(token: &str, method: &str, params: &Value) -> (u16, Value) {
    let id: u64 = token
        .split(':')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or(0);
    match method {
        "getMe" => ok(json!({"id": id, "is_bot": true, "first_name": "Other",
            "username": format!("other_{id}_bot")})),
        "getUpdates" => {
            let wait = params["timeout"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            ok(json!([]))
        }
        "deleteWebhook" => ok(json!(true)),
        _ => refused(400, "Bad Request: chat not found"),
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>, arrived: Arc<Notify>) {
    let _open = Open::new(&state);
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await {
        if state.lock().unwrap().silent {
            return;
        }
        let params: Value = serde_json::from_slice(&request.body).unwrap_or(json!({}));
        let path = request.target.split('?').next().unwrap_or_default();
        let (status, answer_body) = match path
            .strip_prefix("/bot")
            .and_then(|rest| rest.split_once('/'))
        {
            Some((token, method)) if token == TOKEN => {
                let next = state
                    .lock()
                    .unwrap()
                    .next_calls
                    .get_mut(method)
                    .and_then(std::collections::VecDeque::pop_front);
                match next {
                    Some(NextCall::Refuse(code, description)) => refused(code, &description),
                    Some(NextCall::Huge(bytes)) => {
                        let (opening, item) = (r#"{"ok":true,"result":["#, r#"{"update_id":1},"#);
                        send_endless(&mut stream, opening, item, bytes).await;
                        return;
                    }
                    None => answer(method, &params, &state, &arrived).await,
                }
            }
            Some((token, method))
                if state.lock().unwrap().other_bots.iter().any(|t| t == token) =>
            {
                let next = {
                    let mut s = state.lock().unwrap();
                    *s.other_calls.entry(method.to_owned()).or_default() += 1;
                    s.next_other_calls
                        .get_mut(token)
                        .and_then(std::collections::VecDeque::pop_front)
                };
                match next {
                    Some((code, description)) => refused(code, &description),
                    None => other_bot(token, method, &params).await,
                }
            }
            // A token Telegram does not know (never issued, or revoked by @BotFather) is
            // answered, whatever the method, `401` with
            // `{"ok":false,"error_code":401,"description":"Unauthorized"}` (the Bot API's error
            // shape, https://core.telegram.org/bots/api#making-requests: "ok" false, an
            // "error_code" and a human-readable "description"); nothing names the bot.
            Some(_) => refused(401, "Unauthorized"),
            None => refused(404, "Not Found"),
        };
        let text = answer_body.to_string();
        if write_json(&mut stream, status, &[], &text).await.is_err() {
            return;
        }
    }
}
