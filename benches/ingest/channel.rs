//! Telegram channels in the benchmark (`docs/channels.md`), through a Bot API stand-in this
//! process runs on loopback (a thread per connection, keep-alive, answering at once):
//!
//! - the `channel_link` case (scenario.rs): `GET /l/<slug>` of a channel link whose pool of
//!   invite links ([`POOL`]) was filled before the row, each visit a click that takes an invite
//!   link in its own transaction (or, once the pool is empty and until it refills, goes to the
//!   fallback); beside the bot link's `link` row of the same run. [`report_link`] says how many
//!   visits took an invite link.
//! - the `joins` row: [`JOINS`] `chat_member` updates (users joining through the invite links
//!   the stand-in made) queued at once, read by the tracker's long polls (100 a page, as
//!   Telegram answers) and committed; the rate is joins a second from the queueing to the poll
//!   that acknowledges the last one.
//!
//! The stand-in starts once per process ([`settings`]), before the server, whose configuration
//! names it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client;

/// The channel link the `channel_link` case visits.
pub const BENCH_CHANNEL: &str = "bench-channel";
/// Its invite links made ahead: the most `invite_pool` allows.
pub const POOL: u64 = 1000;
/// Joins the `joins` row queues; `--smoke` queues [`SMOKE_JOINS`].
pub const JOINS: u64 = 100_000;
pub const SMOKE_JOINS: u64 = 2_000;
/// The bot's token, id and channel, as Telegram shapes them.
pub const TOKEN: &str = "7000000001:AAHbenchBenchBenchBenchBenchBench0";
const BOT_ID: u64 = 7_000_000_001;
const CHAT_ID: i64 = -1_001_000_000_001;
const FALLBACK: &str = "https://t.me/+benchFallback0";
/// Updates in one `getUpdates` answer: Telegram's default `limit`.
const PAGE: usize = 100;

/// The stand-in's state: the invite links it made, the updates not yet acknowledged, and the
/// highest offset a `getUpdates` asked for.
#[derive(Default)]
struct State {
    invites: Vec<String>,
    updates: BTreeMap<u64, String>,
    next_update_id: u64,
    acked_below: u64,
}

struct BotApi {
    addr: SocketAddr,
    state: Mutex<State>,
    changed: Condvar,
}

/// The stand-in, started on first use.
fn stand_in() -> Result<&'static Arc<BotApi>, String> {
    static API: OnceLock<Result<Arc<BotApi>, String>> = OnceLock::new();
    API.get_or_init(start).as_ref().map_err(Clone::clone)
}

fn start() -> Result<Arc<BotApi>, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding the Bot API: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the Bot API's address: {e}"))?;
    let api = Arc::new(BotApi {
        addr,
        state: Mutex::new(State {
            next_update_id: 1,
            ..State::default()
        }),
        changed: Condvar::new(),
    });
    let serving = api.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let api = serving.clone();
            std::thread::spawn(move || api.answer_each(stream));
        }
    });
    Ok(api)
}

/// The server's configuration lines for channel links through the stand-in (which this starts).
///
/// # Errors
/// If the stand-in cannot listen.
pub fn settings() -> Result<String, String> {
    let api = stand_in()?;
    Ok(format!(
        "telegram_api_url = \"http://{}\"\ninvite_pool = {POOL}\ntelegram_poll_timeout = \"1s\"\n",
        api.addr
    ))
}

impl BotApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads requests off one connection and answers each.
    fn answer_each(&self, stream: TcpStream) {
        let Ok(mut write) = stream.try_clone() else {
            return;
        };
        let mut read = BufReader::new(stream);
        while let Some(request) = crate::stand_in::read(&mut read) {
            let method = request
                .line
                .split(' ')
                .nth(1)
                .and_then(|path| path.rsplit('/').next())
                .unwrap_or_default()
                .to_owned();
            let body = request.body;
            let params: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let answer = self.answer(&method, &params);
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            );
            if write.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }

    /// The Bot API's answer to `method`, always `ok`.
    fn answer(&self, method: &str, params: &Value) -> String {
        let result = match method {
            "getMe" => json!({"id": BOT_ID, "is_bot": true, "first_name": "Bench",
                "username": "bench_channel_bot"}),
            "getChat" => {
                json!({"id": CHAT_ID, "type": "channel", "title": "Bench", "username": "bench_ch"})
            }
            "getChatMember" => json!({"status": "administrator",
                "user": {"id": BOT_ID, "is_bot": true, "first_name": "Bench"},
                "can_invite_users": true}),
            "createChatInviteLink" => {
                let mut s = self.lock();
                let url = format!("https://t.me/+bench{:010}", s.invites.len());
                s.invites.push(url.clone());
                json!({"invite_link": url, "creator": {"id": BOT_ID, "is_bot": true,
                    "first_name": "Bench"}, "creates_join_request": false,
                    "is_primary": false, "is_revoked": false})
            }
            "getUpdates" => return self.get_updates(params),
            _ => json!(true),
        };
        json!({"ok": true, "result": result}).to_string()
    }

    /// Drops the updates below `offset`, then answers up to [`PAGE`] of those left, waiting up
    /// to `timeout` seconds for one.
    fn get_updates(&self, params: &Value) -> String {
        let offset = params["offset"].as_u64().unwrap_or(0);
        let timeout = Duration::from_secs(params["timeout"].as_u64().unwrap_or(0).min(2));
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        s.acked_below = s.acked_below.max(offset);
        s.updates = s.updates.split_off(&offset);
        self.changed.notify_all();
        while s.updates.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        let mut out = String::from(r#"{"ok":true,"result":["#);
        for (i, update) in s.updates.values().take(PAGE).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(update);
        }
        out.push_str("]}");
        out
    }

    /// Queues `n` joins, user `i` through invite link `i % invites`; answers the id past the
    /// last.
    fn queue_joins(&self, n: u64) -> u64 {
        let mut s = self.lock();
        let invites = s.invites.clone();
        for i in 0..n {
            let id = s.next_update_id;
            s.next_update_id += 1;
            let user = 800_000_000 + id;
            let invite = &invites[usize::try_from(i).unwrap_or(0) % invites.len().max(1)];
            let member = |status: &str| {
                json!({"status": status,
                    "user": {"id": user, "is_bot": false, "first_name": "User"}})
            };
            let update = json!({"update_id": id, "chat_member": {
                "chat": {"id": CHAT_ID, "type": "channel", "title": "Bench"},
                "from": {"id": user, "is_bot": false, "first_name": "User"},
                "date": 1_795_300_000,
                "old_chat_member": member("left"),
                "new_chat_member": member("member"),
                "invite_link": {"invite_link": invite, "creator": {"id": BOT_ID,
                    "is_bot": true, "first_name": "Bench"}, "creates_join_request": false,
                    "is_primary": false, "is_revoked": false}}});
            s.updates.insert(id, update.to_string());
        }
        let past = s.next_update_id;
        drop(s);
        self.changed.notify_all();
        past
    }

    /// Waits until a `getUpdates` acknowledged every update below `past` (at most `limit`).
    fn wait_acked(&self, past: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut s = self.lock();
        while s.acked_below < past {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// A request of the space with `secret`, as bytes.
fn request(method: &str, target: &str, secret: &str, body: Option<&Value>) -> Vec<u8> {
    let mut head =
        format!("{method} {target} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {secret}\r\n");
    let body = body.map(Value::to_string).unwrap_or_default();
    if !body.is_empty() {
        let _ = write!(
            head,
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// One request; its status and JSON body.
fn call(addr: SocketAddr, request: Vec<u8>) -> (u16, Value) {
    let (status, body) = client::fetch_all(addr, 1, vec![request])
        .pop()
        .unwrap_or((0, Vec::new()));
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The channel link's state in `GET /links`.
fn state(addr: SocketAddr, secret: &str) -> Value {
    let (_, links) = call(addr, request("GET", "/links", secret, None));
    links["links"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["slug"] == BENCH_CHANNEL))
        .map_or(Value::Null, |l| l["channel_state"].clone())
}

/// Gives the space with `secret` the stand-in's bot and the channel link [`BENCH_CHANNEL`], and
/// waits until its pool is full.
///
/// # Errors
/// If the tracker refuses either, or the pool does not fill within a minute.
pub fn setup(addr: SocketAddr, secret: &str) -> Result<(), String> {
    let (status, answer) = call(
        addr,
        request(
            "PATCH",
            "/space",
            secret,
            Some(&json!({"telegram_bot_token": TOKEN})),
        ),
    );
    if status != 200 {
        return Err(format!("setting the bot token: {status} {answer}"));
    }
    let link = json!({"slug": BENCH_CHANNEL, "channel": "@bench_ch", "fallback": FALLBACK,
        "campaign_name": "bench channel"});
    let (status, answer) = call(addr, request("POST", "/links", secret, Some(&link)));
    if status != 201 {
        return Err(format!("making the channel link: {status} {answer}"));
    }
    wait_for_pool(addr, secret, Duration::from_secs(60))
}

/// Waits until the channel link's pool holds [`POOL`] invite links.
fn wait_for_pool(addr: SocketAddr, secret: &str, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let state = state(addr, secret);
        if state["pool"] == POOL {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the channel link's pool did not fill: {state}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After the `channel_link` rows: how many visits took an invite link and how many went to the
/// fallback (the pool empties faster than Telegram's calls refill it under full load).
pub fn report_link(addr: SocketAddr, secret: &str) {
    let state = state(addr, secret);
    println!(
        "  {BENCH_CHANNEL}: {} visits took an invite link, {} went to the fallback; pool {}",
        state["handed_out"], state["fallbacks"], state["pool"]
    );
}

/// What the `joins` row measured.
pub struct Joins {
    pub count: u64,
    pub elapsed: Duration,
    /// `subscribed` events the joins recorded (a join through an invite link a click took).
    pub subscribed: u64,
}

impl Joins {
    #[allow(clippy::cast_precision_loss)]
    pub fn rate(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The `joins` row: `n` joins queued at once at the stand-in, timed until the tracker's poll
/// acknowledged the last (each page committed before that). The pool is filled again first,
/// and `visits` visits take invite links, so that joins through them bind a click.
///
/// # Errors
/// If the tracker does not read them all within ten minutes, or the counts disagree.
pub fn joins(addr: SocketAddr, secret: &str, n: u64, visits: u64) -> Result<Joins, String> {
    let api = stand_in()?;
    wait_for_pool(addr, secret, Duration::from_secs(60))?;
    let visit = format!(
        "GET /l/{BENCH_CHANNEL} HTTP/1.1\r\nHost: bench\r\nUser-Agent: Mozilla/5.0 (iPhone)\r\n\r\n"
    );
    let visits = vec![visit.into_bytes(); usize::try_from(visits).unwrap_or(0)];
    for (status, _) in client::fetch_all(addr, 4, visits) {
        if status != 302 {
            return Err(format!("visiting {BENCH_CHANNEL}: {status}"));
        }
    }
    let before = state(addr, secret)["joins"].as_u64().unwrap_or(0);
    let started = Instant::now();
    let past = api.queue_joins(n);
    if !api.wait_acked(past, Duration::from_secs(600)) {
        return Err(format!(
            "joins: the tracker did not read {n} joins in 10 minutes"
        ));
    }
    let elapsed = started.elapsed();
    let after = state(addr, secret)["joins"].as_u64().unwrap_or(0);
    if after - before != n {
        return Err(format!(
            "joins: {} joins counted through the link, {n} queued",
            after - before
        ));
    }
    let (_, stats) = call(
        addr,
        request("GET", "/stats?by=campaign_name", secret, None),
    );
    let subscribed = stats["groups"].as_array().map_or(0, |g| {
        g.iter()
            .filter_map(|g| g["events"]["subscribed"].as_u64())
            .sum()
    });
    Ok(Joins {
        count: n,
        elapsed,
        subscribed,
    })
}

/// The `joins` row, and its verdict against the target (5,000 a second).
pub fn report_joins(j: &Joins) {
    println!(
        "joins (chat_member updates read by getUpdates and committed): {} in {:.2} s = {:.0}/s \
         (target >= 5,000/s: {}); {} subscribed events recorded",
        j.count,
        j.elapsed.as_secs_f64(),
        j.rate(),
        if j.rate() >= 5000.0 { "met" } else { "NOT met" },
        j.subscribed
    );
}
