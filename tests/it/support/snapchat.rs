//! Snapchat's Conversions API (v3) on 127.0.0.1, as Snap's page "Using the API"
//! (developers.snap.com/api/marketing-api/Conversions-API/UsingTheAPI) describes it: "send a
//! POST event to: `https://tr.snapchat.com/v3/{PIXEL_ID}/events?access_token={TOKEN}`", a body
//! whose "main request body contains a data array" of events with `event_name`, `event_time`,
//! `action_source` and `user_data`, and, per its introduction, "events can have a date
//! (timestamp) of maximum 37 days back". It answers `200` with `{"status": "SUCCESS"}` when it
//! takes a request; `401` for a token it does not take; `429` while it is told to throttle;
//! `400` with `{"status": "FAILED", "reason": ...}` for a request it cannot take (another
//! pixel, an event without its required fields, a name that is not one of Snap's, a currency
//! that is not ISO 4217, an event older than 37 days, or one the test marked bad), naming no
//! event. It keeps every request it is sent, and the events of those it took.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::loopback::{Listening, listen, read_request, write_json};

/// Snap's standard events, as its "Parameters" page lists those the tracker sends.
const NAMES: [&str; 4] = ["CUSTOM_EVENT_1", "SUBSCRIBE", "SIGN_UP", "PURCHASE"];

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub body: Value,
    pub status: u16,
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
    pixel_id: String,
    /// Seconds since the epoch that the stand-in takes as now, for Snap's 37 days.
    now_s: u64,
    throttles: Mutex<u32>,
    bad_event_ids: Mutex<Vec<String>>,
    received: Mutex<Vec<Request>>,
}

pub struct SnapApi {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    _listening: Listening,
}

impl SnapApi {
    /// Starts the stand-in for pixel `pixel_id`, taking the token `token`, at `now_ms`.
    pub async fn start(pixel_id: &str, token: &str, now_ms: u64) -> SnapApi {
        let shared = Arc::new(Shared {
            token: Mutex::new(token.to_owned()),
            pixel_id: pixel_id.to_owned(),
            now_s: now_ms / 1000,
            ..Shared::default()
        });
        let s = shared.clone();
        let listening = listen(move |stream| serve(stream, s.clone())).await;
        SnapApi {
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

    /// Answers the next `n` requests `429`.
    pub fn throttle(&self, n: u32) {
        *self.shared.throttles.lock().unwrap() = n;
    }

    /// Refuses every request holding an event of `event_id`.
    pub fn refuse_event(&self, event_id: &str) {
        self.shared
            .bad_event_ids
            .lock()
            .unwrap()
            .push(event_id.to_owned());
    }

    #[must_use]
    pub fn received(&self) -> Vec<Request> {
        self.shared.received.lock().unwrap().clone()
    }

    /// The events of every request it took, in order.
    #[must_use]
    pub fn taken(&self) -> Vec<Value> {
        self.received()
            .iter()
            .filter(|r| r.status == 200)
            .flat_map(Request::events)
            .collect()
    }
}

/// What the Conversions API answers a request: its status and reason.
fn judge(shared: &Shared, method: &str, target: &str, body: &Value) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let token = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "access_token")
        .map(|(_, v)| v.into_owned());
    if method != "POST" || path != format!("/v3/{}/events", shared.pixel_id) {
        return (400, format!("no such endpoint: {method} {path}"));
    }
    if token.as_deref() != Some(shared.token.lock().unwrap().as_str()) {
        return (401, "Invalid access token".into());
    }
    {
        let mut throttles = shared.throttles.lock().unwrap();
        if *throttles > 0 {
            *throttles -= 1;
            return (429, "Too many requests".into());
        }
    }
    let Some(data) = body["data"].as_array().filter(|d| !d.is_empty()) else {
        return (400, "data: required".into());
    };
    let bad = shared.bad_event_ids.lock().unwrap().clone();
    for e in data {
        let required = e["event_name"].as_str().is_some_and(|n| NAMES.contains(&n))
            && e["event_time"].is_u64()
            && e["action_source"].is_string()
            && e["user_data"].is_object();
        if !required {
            return (
                400,
                "event_name, event_time, action_source and user_data are required".into(),
            );
        }
        let at_s = e["event_time"].as_u64().unwrap_or_default();
        if shared.now_s.saturating_sub(at_s) > 37 * 24 * 3600 {
            return (400, "event_time is more than 37 days back".into());
        }
        if let Some(c) = e.get("custom_data") {
            let iso = c["currency"].as_str().is_some_and(|c| {
                c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) && c != "XTR"
            });
            if !iso {
                return (400, "custom_data.currency must be ISO 4217".into());
            }
        }
        if bad.iter().any(|id| e["event_id"] == id.as_str()) {
            return (400, "Invalid custom_data.value".into());
        }
    }
    (200, "SUCCESS".into())
}

/// Answers the requests of one connection, one after another.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await {
        let body = request.json();
        let (method, target) = (request.method, request.target);
        let (status, reason) = judge(&shared, &method, &target, &body);
        shared.received.lock().unwrap().push(Request {
            method,
            target,
            body,
            status,
        });
        let state = if status == 200 { "SUCCESS" } else { "FAILED" };
        let answer = json!({"status": state, "reason": reason}).to_string();
        if write_json(&mut stream, status, &[], &answer).await.is_err() {
            return;
        }
    }
}
