//! A receiver of the tracker's signed webhooks (`docs/api.md#webhooks`): it checks
//! `Tracker-Signature` with the destination's signing secret, refuses a stale or forged one, and
//! prints each event once, deduplicated by `Tracker-Delivery` (the tracker delivers at least
//! once, so the same delivery can come twice).
//!
//! ```text
//! TRACKER_SIGNING_SECRET=trk_ws_... cargo run --example webhook_receiver -- 127.0.0.1:9000
//! tracker destination create SPACE crm --kind webhook --url https://crm.example.com/hook
//! ```
//!
//! It speaks plain HTTP/1.1 on the given address: put it behind the TLS proxy that serves the
//! `https://` URL the destination names. The check itself is [`verify`]: a few lines in any
//! language with an HMAC-SHA256.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{KeyInit as _, Mac as _};

/// How far a signature's time may be from now: older ones are refused as replays.
const TOLERANCE_S: u64 = 300;

/// Whether `header` (`t=<unix seconds>,v1=<hex>`) signs `body` under `secret`, within
/// [`TOLERANCE_S`] of `now_s`. The HMAC is compared in constant time.
fn verify(secret: &str, header: &str, body: &[u8], now_s: u64) -> bool {
    let Some((t, v1)) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
    else {
        return false;
    };
    let (Ok(t_s), Ok(tag)) = (t.parse::<u64>(), hex::decode(v1)) else {
        return false;
    };
    if t_s.abs_diff(now_s) > TOLERANCE_S {
        return false;
    }
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&tag).is_ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secret =
        std::env::var("TRACKER_SIGNING_SECRET").map_err(|_| "set TRACKER_SIGNING_SECRET")?;
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let listener = TcpListener::bind(&addr)?;
    eprintln!("receiving webhooks on http://{addr}");
    // A real receiver keeps these in its database, with the effect of the event.
    let mut seen = HashSet::new();
    for stream in listener.incoming() {
        let mut stream = stream?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let (mut signature, mut delivery, mut length) = (String::new(), String::new(), 0);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                let value = value.trim().to_owned();
                match name.to_ascii_lowercase().as_str() {
                    "tracker-signature" => signature = value,
                    "tracker-delivery" => delivery = value,
                    "content-length" => length = value.parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let now_s = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let status = if verify(&secret, &signature, &body, now_s) {
            if seen.insert(delivery.clone()) {
                println!("{delivery}: {}", String::from_utf8_lossy(&body));
            }
            // A second copy is answered 200 too: the tracker then stops sending it.
            "200 OK"
        } else {
            "401 Unauthorized"
        };
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
    }
    Ok(())
}
