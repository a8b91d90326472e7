//! A receiver of the tracker's signed webhooks (`docs/api.md#webhooks`): it checks the
//! [Standard Webhooks](https://www.standardwebhooks.com/) signature with the destination's
//! `whsec_` signing secret, by the `standardwebhooks` library (any language's does the same),
//! refuses a stale or forged one, and prints each event once, deduplicated by `webhook-id` (the
//! event's `event_id`: the tracker delivers at least once, so the same delivery can come twice).
//!
//! ```text
//! TRACKER_SIGNING_SECRET=whsec_... cargo run --example webhook_receiver -- 127.0.0.1:9000
//! tracker destination create SPACE crm --kind webhook --url https://crm.example.com/hook
//! ```
//!
//! It speaks plain HTTP/1.1 on the given address: put it behind the TLS proxy that serves the
//! `https://` URL the destination names.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secret =
        std::env::var("TRACKER_SIGNING_SECRET").map_err(|_| "set TRACKER_SIGNING_SECRET")?;
    // Checks the signature and refuses one more than 5 minutes from now (a replay).
    let webhook = standardwebhooks::Webhook::new(&secret)?;
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let listener = TcpListener::bind(&addr)?;
    eprintln!("receiving webhooks on http://{addr}");
    // A real receiver keeps these in its database, with the effect of the event.
    let mut seen = HashSet::new();
    for stream in listener.incoming() {
        // One client's broken request ends its connection, not the receiver.
        if let Err(e) = stream.and_then(|stream| receive(stream, &webhook, &mut seen)) {
            eprintln!("a request was not read: {e}");
        }
    }
    Ok(())
}

/// The largest body taken: the tracker sends one event per request, a few KiB. A larger
/// `Content-Length` is answered `413` before anything is allocated for it, since anyone can
/// send one before the signature is checked.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The longest header line read, for the same reason.
const MAX_LINE_BYTES: u64 = 8 * 1024;

/// Reads one request from `stream`, checks its signature and answers it.
fn receive(
    mut stream: std::net::TcpStream,
    webhook: &standardwebhooks::Webhook,
    seen: &mut HashSet<String>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let (mut headers, mut length) = (HeaderMap::new(), 0);
    loop {
        let mut line = String::new();
        if reader.by_ref().take(MAX_LINE_BYTES).read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().unwrap_or(usize::MAX);
            }
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.trim().as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(n, v);
            }
        }
    }
    let status = if length > MAX_BODY_BYTES {
        "413 Content Too Large"
    } else {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if webhook.verify(&body, &headers).is_ok() {
            let id = headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if seen.insert(id.clone()) {
                println!("{id}: {}", String::from_utf8_lossy(&body));
            }
            // A second copy is answered 200 too: the tracker then stops sending it.
            "200 OK"
        } else {
            "401 Unauthorized"
        }
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}
