//! Follows a space's event feed and prints, for each event, the Meta Conversions API payload a
//! forwarder would send for it. A small complete consumer of `GET /events/wait`: it resumes from
//! a stored cursor, so every event is handled exactly once across restarts.
//!
//! ```text
//! TRACKER_URL=http://127.0.0.1:8080 TRACKER_SECRET=trk_sk_... \
//!     cargo run --example meta_capi_forwarder -- --cursor-file capi.cursor [--once]
//! ```
//!
//! The mapping (docs/integration.md, "Consuming the feed"):
//! - `event_name`: contact -> `Contact`, subscribed -> `Subscribe`, registration ->
//!   `CompleteRegistration`, deposit -> `Purchase` (Meta's standard events).
//! - `event_id` (Meta's dedup key with the pixel): the event's `eid` if it has one, else
//!   `trk-<inbox_id>`.
//! - `event_time`: `occurred_at_ms` in whole seconds.
//! - `action_source`: `system_generated` (the conversion comes from a bot or a server, not a
//!   browser page).
//! - `user_data.fbc`: the feed's `fbc`, when the click had an fbclid; `user_data.external_id`:
//!   the Telegram id as a string, when the click is bound (Meta hashes it itself if unhashed is
//!   not accepted: hash it with SHA-256 before sending to production).
//! - `custom_data.value` and `currency` for deposits.
//!
//! It prints instead of sending, so it runs anywhere; a real forwarder replaces `print` with a
//! POST to `https://graph.facebook.com/<version>/<pixel id>/events`. The cursor is written only
//! after an event's payload is handled, and written atomically (a temporary file renamed).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("TRACKER_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let secret = std::env::var("TRACKER_SECRET").map_err(|_| "set TRACKER_SECRET")?;
    let mut args = std::env::args().skip(1);
    let mut cursor_file = PathBuf::from("capi.cursor");
    let mut once = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cursor-file" => cursor_file = args.next().ok_or("--cursor-file FILE")?.into(),
            "--once" => once = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let host = base
        .strip_prefix("http://")
        .ok_or("TRACKER_URL must be http://host:port (put TLS in front of the tracker, not here)")?
        .trim_end_matches('/')
        .to_owned();
    let mut after = read_cursor(&cursor_file)?;
    loop {
        // Long poll: answered as soon as an event after the cursor is committed.
        let timeout = if once { 0 } else { 30 };
        let page = get(
            &host,
            &format!("/events/wait?after={after}&limit=1000&timeout_s={timeout}"),
            &secret,
        )?;
        if page["ok"] != json!(true) {
            return Err(format!("the tracker answered {page}").into());
        }
        let events = page["events"].as_array().cloned().unwrap_or_default();
        for event in &events {
            println!("{}", capi_payload(event));
            after = event["inbox_id"]
                .as_str()
                .ok_or("event without inbox_id")?
                .parse()?;
            write_cursor(&cursor_file, after)?;
        }
        if once && page["next"].is_null() {
            return Ok(());
        }
    }
}

/// The Conversions API `data[]` entry for one feed event.
fn capi_payload(e: &Value) -> Value {
    let event_name = match e["event"].as_str() {
        Some("contact") => "Contact",
        Some("subscribed") => "Subscribe",
        Some("registration") => "CompleteRegistration",
        _ => "Purchase",
    };
    let event_id = match e["eid"].as_str() {
        Some(eid) => eid.to_owned(),
        None => format!("trk-{}", e["inbox_id"].as_str().unwrap_or_default()),
    };
    let mut user_data = serde_json::Map::new();
    if let Some(fbc) = e["fbc"].as_str() {
        user_data.insert("fbc".into(), json!(fbc));
    }
    if let Some(tg) = e["tg_id"].as_u64() {
        user_data.insert("external_id".into(), json!(tg.to_string()));
    }
    let mut payload = json!({
        "event_name": event_name,
        "event_time": e["occurred_at_ms"].as_u64().unwrap_or_default() / 1000,
        "event_id": event_id,
        "action_source": "system_generated",
        "user_data": user_data,
    });
    if event_name == "Purchase" {
        if let Some(value) = e["value"].as_str() {
            payload["custom_data"] = json!({"value": value, "currency": e["currency"]});
        }
    }
    payload
}

fn read_cursor(path: &Path) -> Result<u64, Box<dyn std::error::Error>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().parse()?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("{}: {e}", path.display()).into()),
    }
}

fn write_cursor(path: &Path, after: u64) -> std::io::Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, after.to_string())?;
    std::fs::rename(&partial, path)
}

/// A GET over plain HTTP/1.1 with the bearer secret; the JSON body.
fn get(host: &str, target: &str, secret: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let mut stream = TcpStream::connect(host)?;
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {secret}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8(response)?;
    let (_, body) = text.split_once("\r\n\r\n").ok_or("no HTTP body")?;
    Ok(serde_json::from_str(body)?)
}
