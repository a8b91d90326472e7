//! `TikTok`'s Events API on 127.0.0.1, as its documentation describes it: `POST
//! /open_api/v1.3/event/track/` with the token in an `Access-Token` header and a JSON body
//! (`event_source`, `event_source_id`, optional `test_event_code`, `data` of at most 1000
//! events). It answers HTTP `200` with `{"code": 0, "message": "OK", "request_id": ...}` when it
//! takes a request and another `code` when not: `40105` for a token it does not take, `40100`
//! while it is told to throttle, `40002` for a request it cannot read, of more than 1000 events,
//! of an event without its required fields or with a currency that is not ISO 4217, or holding
//! an event the test marked bad (naming no event, as `TikTok` names none). It keeps every
//! request it is sent, and the events of those it took.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::loopback::{self, Listening, hold_until_closed, listen, read_request, write_json};

/// The path of the Events API's endpoint.
pub const TRACK_PATH: &str = "/open_api/v1.3/event/track/";
/// The most events `TikTok` takes in one request.
pub const MAX_EVENTS: usize = 1000;

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub access_token: Option<String>,
    pub body: Value,
    /// The `code` it was answered, or would have been when held.
    pub code: i64,
    /// Whether the answer was sent ([`TiktokApi::hold_from`] keeps it back).
    pub answered: bool,
}

impl Request {
    #[must_use]
    pub fn events(&self) -> Vec<Value> {
        self.body["data"].as_array().cloned().unwrap_or_default()
    }
}

#[derive(Default)]
struct Shared {
    token: Mutex<String>,
    pixel_code: String,
    throttles: Mutex<u32>,
    bad_event_ids: Mutex<Vec<String>>,
    received: Mutex<Vec<Request>>,
    /// Requests after this many are kept and never answered.
    hold_from: Mutex<Option<usize>>,
    arrived: Notify,
}

pub struct TiktokApi {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    _listening: Listening,
}

impl TiktokApi {
    /// Starts the stand-in for pixel `pixel_code`, taking the access token `token`.
    pub async fn start(pixel_code: &str, token: &str) -> TiktokApi {
        let shared = Arc::new(Shared {
            token: Mutex::new(token.to_owned()),
            pixel_code: pixel_code.to_owned(),
            ..Shared::default()
        });
        let s = shared.clone();
        let listening = listen(move |stream| serve(stream, s.clone())).await;
        TiktokApi {
            addr: listening.addr,
            shared,
            _listening: listening,
        }
    }

    /// Its base address, a destination's `api_url`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers the next `n` requests with its rate limit's code, `40100`.
    pub fn throttle(&self, n: u32) {
        *self.shared.throttles.lock().unwrap() = n;
    }

    /// Refuses every request holding an event of `event_id`, as a parameter error.
    pub fn refuse_event(&self, event_id: &str) {
        self.shared
            .bad_event_ids
            .lock()
            .unwrap()
            .push(event_id.to_owned());
    }

    /// Keeps every request after the first `n` it has received unanswered, as a request still
    /// on its way when the sender dies; `None` answers all again.
    pub fn hold_from(&self, n: Option<usize>) {
        *self.shared.hold_from.lock().unwrap() = n;
    }

    #[must_use]
    pub fn received(&self) -> Vec<Request> {
        self.shared.received.lock().unwrap().clone()
    }

    /// The events of every request it took (`code` 0) and answered so, in order.
    #[must_use]
    pub fn taken(&self) -> Vec<Value> {
        self.received()
            .iter()
            .filter(|r| r.code == 0 && r.answered)
            .flat_map(Request::events)
            .collect()
    }

    /// Waits until at least `n` requests have arrived (at most `within`), and answers them.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Request> {
        loopback::wait_for(&self.shared.arrived, n, within, || self.received()).await
    }
}

/// What the Events API answers a request: its `code` and `message`.
fn judge(
    shared: &Shared,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> (i64, String) {
    if method != "POST" || path != TRACK_PATH {
        return (40_002, format!("no such endpoint: {method} {path}"));
    }
    if token != Some(shared.token.lock().unwrap().as_str()) {
        return (
            40_105,
            "The access token is invalid or has been revoked.".into(),
        );
    }
    {
        let mut throttles = shared.throttles.lock().unwrap();
        if *throttles > 0 {
            *throttles -= 1;
            return (
                40_100,
                "Too many requests. Please retry in some time.".into(),
            );
        }
    }
    if body["event_source"] != "web" || body["event_source_id"] != shared.pixel_code.as_str() {
        return (40_002, "event_source or event_source_id is invalid".into());
    }
    let Some(data) = body["data"].as_array().filter(|d| !d.is_empty()) else {
        return (40_002, "data: the field is required".into());
    };
    if data.len() > MAX_EVENTS {
        return (
            40_002,
            format!("data: at most {MAX_EVENTS} events, got {}", data.len()),
        );
    }
    let bad = shared.bad_event_ids.lock().unwrap().clone();
    for e in data {
        let required = e["event"].is_string()
            && e["event_time"].is_u64()
            && e["event_id"].is_string()
            && e["user"].is_object();
        if !required {
            return (
                40_002,
                "event, event_time, event_id and user are required".into(),
            );
        }
        if let Some(p) = e.get("properties") {
            let iso = p["currency"].as_str().is_some_and(|c| {
                c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) && c != "XTR"
            });
            if !iso || !p["value"].is_number() {
                return (
                    40_002,
                    "properties.currency must be an ISO 4217 code".into(),
                );
            }
        }
        if bad.iter().any(|id| e["event_id"] == id.as_str()) {
            return (40_002, "Invalid value for param: properties.value".into());
        }
    }
    (0, "OK".into())
}

/// Answers the requests of one connection, one after another.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await {
        let token = request.header("access-token").map(str::to_owned);
        let body = request.json();
        let (method, path) = (request.method, request.target);
        let (code, message) = judge(&shared, &method, &path, token.as_deref(), &body);
        let unanswered = {
            let mut received = shared.received.lock().unwrap();
            let keep = shared
                .hold_from
                .lock()
                .unwrap()
                .is_some_and(|n| received.len() >= n);
            received.push(Request {
                method,
                path,
                access_token: token,
                body,
                code,
                answered: !keep,
            });
            keep
        };
        shared.arrived.notify_waiters();
        if unanswered {
            // Until the sender hangs up.
            hold_until_closed(&mut stream).await;
            return;
        }
        let answer =
            json!({"code": code, "message": message, "request_id": "stand-in", "data": {}})
                .to_string();
        if write_json(&mut stream, 200, &[], &answer).await.is_err() {
            return;
        }
    }
}
