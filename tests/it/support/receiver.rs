//! A receiver of conversions out on 127.0.0.1: a small HTTP/1.1 server that keeps every request
//! it is sent and answers as the test tells it (a status with a body and headers, or never).
//! Stands in for Meta's Conversions API (with [`meta_shape`], which checks a request against
//! Meta's documented one), an affiliate network's postback URL and a webhook.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::loopback::{self, Listening, hold_until_closed, listen, read_request, write_json};

/// One request as it arrived.
pub use super::loopback::Incoming as Received;

/// How to answer a request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// This status, with these extra headers and this body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// Never answer (the connection stays open until the client gives up).
    Hang,
    /// Answer `200` once the test calls [`Receiver::release`].
    Held,
    /// Answer this once the test calls [`Receiver::release`].
    HeldThen(Box<Reply>),
}

impl Reply {
    #[must_use]
    pub fn ok() -> Reply {
        Reply::Status(200, Vec::new(), r#"{"events_received":1}"#.into())
    }

    /// Meta's answer to a throttled request: code 17, transient, as `400`.
    #[must_use]
    pub fn meta_throttled() -> Reply {
        Reply::Status(
            400,
            Vec::new(),
            serde_json::json!({"error": {"message": "(#17) User request limit reached",
                "type": "OAuthException", "is_transient": true, "code": 17,
                "error_subcode": 2_446_079, "fbtrace_id": "stand-in"}})
            .to_string(),
        )
    }

    /// Meta's answer to a request with a token that was revoked: code 190.
    #[must_use]
    pub fn meta_token_revoked() -> Reply {
        Reply::Status(
            400,
            Vec::new(),
            serde_json::json!({"error": {"message": "Error validating access token: The user \
                has not authorized application 1.", "type": "OAuthException", "code": 190,
                "error_subcode": 458, "fbtrace_id": "stand-in"}})
            .to_string(),
        )
    }
}

/// A check of each request, with the time it counts from.
type Check = fn(&Received, u64) -> Result<(), String>;

struct Shared {
    received: Mutex<Vec<Received>>,
    /// Replies for the next requests, in order; then `default`.
    next: Mutex<VecDeque<Reply>>,
    default: Mutex<Option<Reply>>,
    /// Checks each request; a failure is answered 400 with Meta's error body.
    check: Mutex<Option<(u64, Check)>>,
    /// Access tokens Meta no longer takes: a request with one is answered code 190.
    revoked: Mutex<Vec<String>>,
    arrived: Notify,
    released: tokio::sync::Semaphore,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _listening: Listening,
}

impl Receiver {
    /// Starts a receiver that answers `200` to everything.
    pub async fn start() -> Receiver {
        let shared = Arc::new(Shared {
            received: Mutex::default(),
            next: Mutex::default(),
            default: Mutex::default(),
            check: Mutex::default(),
            revoked: Mutex::default(),
            arrived: Notify::new(),
            released: tokio::sync::Semaphore::new(0),
        });
        let s = shared.clone();
        let listening = listen(move |stream| serve(stream, s.clone())).await;
        Receiver {
            addr: listening.addr,
            shared,
            _listening: listening,
        }
    }

    /// Starts Meta's stand-in: every request is checked by [`meta_shape`], with `now_ms` the
    /// time its 7-day rule counts from.
    pub async fn meta(now_ms: u64) -> Receiver {
        let r = Receiver::start().await;
        *r.shared.check.lock().unwrap() = Some((now_ms / 1000, meta_shape));
        r
    }

    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Answers the next requests with `replies`, in order.
    pub fn then(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.next.lock().unwrap().extend(replies);
    }

    /// Answers every later request that carries `token` as its `access_token` as Meta answers a
    /// revoked token (code 190), before any other reply.
    pub fn revoke(&self, token: &str) {
        self.shared.revoked.lock().unwrap().push(token.to_owned());
    }

    /// Lets one [`Reply::Held`] answer go.
    pub fn release(&self) {
        self.shared.released.add_permits(1);
    }

    /// Answers every request with `reply` once the queued ones are used.
    pub fn always(&self, reply: Reply) {
        *self.shared.default.lock().unwrap() = Some(reply);
    }

    #[must_use]
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests have arrived (at most `within`), and answers them all.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        loopback::wait_for(&self.shared.arrived, n, within, || self.received()).await
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some(received) = read_request(&mut stream, &mut buf).await {
        let mut reply = reply_for(&shared, &received);
        shared.received.lock().unwrap().push(received);
        shared.arrived.notify_waiters();
        if matches!(reply, Reply::Held | Reply::HeldThen(_)) {
            if let Ok(permit) = shared.released.acquire().await {
                permit.forget();
            }
            reply = match reply {
                Reply::HeldThen(then) => *then,
                _ => Reply::ok(),
            };
        }
        match reply {
            Reply::Held | Reply::HeldThen(_) => return,
            Reply::Hang => {
                hold_until_closed(&mut stream).await;
                return;
            }
            Reply::Status(status, extra, body) => {
                if write_json(&mut stream, status, &extra, &body)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// How to answer `received`: as a stand-in whose check refused it, or that no longer takes its
/// token, would; else the next queued reply, the default one, or `200`.
fn reply_for(shared: &Shared, received: &Received) -> Reply {
    let checked = shared
        .check
        .lock()
        .unwrap()
        .map_or(Ok(()), |(now_s, check)| check(received, now_s));
    let revoked = received.json()["access_token"]
        .as_str()
        .is_some_and(|t| shared.revoked.lock().unwrap().iter().any(|r| r == t));
    match checked {
        Ok(()) if revoked => Reply::meta_token_revoked(),
        Err(why) => Reply::Status(
            400,
            Vec::new(),
            serde_json::json!({"error": {"message": "Invalid parameter",
                "type": "OAuthException", "code": 100, "is_transient": false,
                "error_user_title": "Invalid parameter", "error_user_msg": why,
                "fbtrace_id": "stand-in"}})
            .to_string(),
        ),
        Ok(()) => shared
            .next
            .lock()
            .unwrap()
            .pop_front()
            .or_else(|| shared.default.lock().unwrap().clone())
            .unwrap_or_else(Reply::ok),
    }
}

/// Checks a request against Meta's documented Conversions API request for server events:
/// `POST /<version>/<pixel id>/events` with a JSON body of `data` (1 to 1000 events) and
/// `access_token`, each event with its `event_name`, `event_time` (unix seconds, not more than
/// 7 days old), `event_id`, `action_source`, `user_data` with at least one customer parameter
/// (`external_id` hashed as SHA-256 hex), and for `Purchase` `custom_data.value` (a number)
/// and `currency` (an ISO 4217 code). A refused event is named as Meta names it, `data[i]`.
pub fn meta_shape(r: &Received, now: u64) -> Result<(), String> {
    let path: Vec<&str> = r
        .target
        .split('?')
        .next()
        .unwrap_or_default()
        .split('/')
        .collect();
    let ok_path = r.method == "POST"
        && path.len() == 4
        && path[1].starts_with('v')
        && !path[2].is_empty()
        && path[2].bytes().all(|b| b.is_ascii_digit())
        && path[3] == "events";
    if !ok_path {
        return Err(format!(
            "not POST /<version>/<pixel>/events: {} {}",
            r.method, r.target
        ));
    }
    if r.target.contains("access_token") {
        return Err("the access token belongs in the body".into());
    }
    let body = r.json();
    let fields: Vec<&String> = body
        .as_object()
        .ok_or("body is no JSON object")?
        .keys()
        .collect();
    for f in &fields {
        if !["data", "access_token", "test_event_code"].contains(&f.as_str()) {
            return Err(format!("unknown top-level field {f}"));
        }
    }
    if body["access_token"].as_str().is_none_or(str::is_empty) {
        return Err("no access_token".into());
    }
    let data = body["data"].as_array().ok_or("no data array")?;
    if data.is_empty() || data.len() > 1000 {
        return Err(format!("{} events in data; 1 to 1000", data.len()));
    }
    for (i, e) in data.iter().enumerate() {
        event_shape(e, now).map_err(|why| format!("data[{i}]: {why}"))?;
    }
    Ok(())
}

/// ISO 4217 codes the tests send; any other is refused, as Meta refuses Stars or USDT.
const ISO_CODES: [&str; 6] = ["USD", "EUR", "GBP", "RUB", "JPY", "BRL"];

fn event_shape(e: &Value, now: u64) -> Result<(), String> {
    {
        let name = e["event_name"].as_str().ok_or("no event_name")?;
        if name.is_empty()
            || name.len() > 40
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
        {
            return Err(format!("event_name {name} is no event name"));
        }
        let t = e["event_time"].as_u64().ok_or("event_time is no integer")?;
        if t > now + 60 || now.saturating_sub(t) > 7 * 86_400 {
            return Err(format!(
                "event_time {t} is more than 7 days old or in the future"
            ));
        }
        if e["event_id"].as_str().is_none_or(str::is_empty) {
            return Err("no event_id".into());
        }
        if e["action_source"] != "chat" {
            return Err(format!("action_source {}", e["action_source"]));
        }
        let user = e["user_data"].as_object().ok_or("no user_data")?;
        if user.is_empty() {
            return Err("user_data has no customer information".into());
        }
        if let Some(ids) = user.get("external_id") {
            let ids = ids.as_array().ok_or("external_id is no array")?;
            if !ids.iter().all(|id| {
                id.as_str()
                    .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            }) {
                return Err(format!("external_id is not SHA-256 hex: {ids:?}"));
            }
        }
        // "data_processing_options: ... an array of options, [] or ["LDU"]"; the country and
        // state integers, with LDU only (developers.facebook.com/docs/marketing-apis/
        // data-processing-options).
        if let Some(options) = e.get("data_processing_options") {
            let options = options
                .as_array()
                .ok_or("data_processing_options is no array")?;
            if !options.iter().all(|o| o == "LDU") {
                return Err(format!("data_processing_options {options:?}"));
            }
        }
        for place in [
            "data_processing_options_country",
            "data_processing_options_state",
        ] {
            if let Some(code) = e.get(place)
                && (!code.is_u64() || e["data_processing_options"] != serde_json::json!(["LDU"]))
            {
                return Err(format!("{place} {code} without LDU or not an integer"));
            }
        }
        if name == "Purchase" {
            let c = &e["custom_data"];
            if !c["value"].is_number() {
                return Err("Purchase without a numeric custom_data.value".into());
            }
            let currency = c["currency"].as_str().unwrap_or_default();
            if !ISO_CODES.contains(&currency) {
                return Err(format!(
                    "custom_data.currency {currency} is not a valid ISO 4217 currency"
                ));
            }
        }
    }
    Ok(())
}
