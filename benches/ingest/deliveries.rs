//! Conversions out in the benchmark: the `unique_dest` case's space, with one `meta_capi` and
//! one `webhook` destination pointing at a receiver this process runs on loopback, which
//! answers every request `200` at once. Its row beside the plain `unique` row (same server,
//! same run) is the cost of writing each event's deliveries in its transaction.
//!
//! The receivers the rows of `outbound.rs` use too: one that counts the events it gets (and
//! answers Snap's requests as Snap does), and one that never answers; the destination requests
//! they make; and the rows' names ([`OutRow`]), which the flags read.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::client;

/// The space the `unique_dest` case sends to.
pub const SPACE: &str = "bench-dest";

/// The rows of conversions out, which `outbound.rs` runs, as `--only` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutRow {
    SendMeta,
    SendWebhook,
    DestBlackhole,
    DestAnswering,
    DestSnap,
    Pending,
    ClientHints,
}

impl OutRow {
    pub const ALL: [OutRow; 7] = [
        OutRow::SendMeta,
        OutRow::SendWebhook,
        OutRow::DestBlackhole,
        OutRow::DestAnswering,
        OutRow::DestSnap,
        OutRow::Pending,
        OutRow::ClientHints,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutRow::SendMeta => "send_meta",
            OutRow::SendWebhook => "send_webhook",
            OutRow::DestBlackhole => "dest_blackhole",
            OutRow::DestAnswering => "dest_answering",
            OutRow::DestSnap => "dest_snap",
            OutRow::Pending => "pending_1m",
            OutRow::ClientHints => "client_hints",
        }
    }
}

/// How a receiver answers.
pub enum Answering {
    /// `200 {}` at once to every request; counted in the tally when one is given.
    Ok(Option<Arc<Tally>>),
    /// As `Ok`, counted, with its threads at the lowest CPU priority (nice 19): the stand-in for
    /// a receiver on another machine, whose work is not the tracker's to share two cores with.
    Aside(Arc<Tally>),
    /// Never: it reads what comes and sends nothing back, until the sender gives up.
    Never,
}

/// What a counting receiver got: events (a Meta or Snap request's `data` entries, one per
/// webhook request), and the distinct ones (their `event_id`, a webhook's `webhook-id`).
#[derive(Default)]
pub struct Tally {
    events: AtomicU64,
    ids: Mutex<HashSet<String>>,
}

impl Tally {
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    pub fn distinct(&self) -> u64 {
        self.ids.lock().map_or(0, |ids| ids.len() as u64)
    }

    /// Counts a request's events: the `data` array's `event_id`s of a Meta or Snap request, or
    /// the request itself by its `webhook-id`.
    fn count(&self, delivery: Option<String>, body: &[u8]) {
        let ids: Vec<String> = match delivery {
            Some(id) => vec![id],
            None => serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| {
                    let data = v.get("data")?.as_array()?;
                    Some(
                        data.iter()
                            .map(|e| e["event_id"].as_str().unwrap_or("?").to_owned())
                            .collect(),
                    )
                })
                .unwrap_or_default(),
        };
        self.events.fetch_add(ids.len() as u64, Ordering::Relaxed);
        if let Ok(mut seen) = self.ids.lock() {
            seen.extend(ids);
        }
    }
}

/// The `unique_dest` case's receiver: `200 {}` at once, nothing counted.
pub fn receiver() -> Result<SocketAddr, String> {
    receiver_answering(Answering::Ok(None))
}

/// Starts a receiver on loopback: a thread per connection, keep-alive.
pub fn receiver_answering(answering: Answering) -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding the receiver: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the receiver's address: {e}"))?;
    let (tally, aside) = match answering {
        Answering::Ok(tally) => (Some(tally), false),
        Answering::Aside(tally) => (Some(Some(tally)), true),
        Answering::Never => (None, false),
    };
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Some(tally) = tally.clone() else {
                // Reads until the sender hangs up, answering nothing.
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut &stream, &mut std::io::sink());
                });
                continue;
            };
            std::thread::spawn(move || {
                if aside {
                    let _ =
                        rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
                }
                answer_each(stream, tally.as_deref());
            });
        }
    });
    Ok(addr)
}

/// What Snap's Conversions API answers a request it took. Snap's "Using the API"
/// (developers.snap.com/api/marketing-api/Conversions-API/UsingTheAPI): a request to
/// `/v3/{PIXEL_ID}/events` that Snap takes is answered `200` with `"status": "SUCCESS"`, the
/// word the sender counts a delivery by.
const SNAP_TOOK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 39\r\n\r\n{\"status\":\"SUCCESS\",\"reason\":\"SUCCESS\"}";

/// Reads requests off one connection and answers each `200 {}` (a request to Snap's path as
/// Snap does), counting them in `tally`.
fn answer_each(stream: TcpStream, tally: Option<&Tally>) {
    let Ok(mut write) = stream.try_clone() else {
        return;
    };
    let mut read = BufReader::new(stream);
    while let Some(request) = crate::stand_in::read(&mut read) {
        let (delivery, body) = (
            request.header("webhook-id").map(str::to_owned),
            request.body,
        );
        if let Some(tally) = tally {
            tally.count(delivery, &body);
        }
        let answer: &[u8] = if request.line.contains("/v3/") {
            SNAP_TOOK
        } else {
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        };
        if write.write_all(answer).is_err() {
            return;
        }
    }
}

/// Makes the case's space and its two destinations; answers its secret.
pub fn setup(cli: Command, addr: SocketAddr, receiver: SocketAddr) -> Result<String, String> {
    let created = crate::reads::space_create(cli, SPACE)?;
    let secret = created["secret"]
        .as_str()
        .ok_or_else(|| format!("tracker space create printed no secret: {created}"))?
        .to_owned();
    add_destinations(addr, &secret, &both_kinds(receiver))?;
    Ok(secret)
}

/// The case's two destinations at `receiver`: a `meta_capi` one taking every event, and a
/// webhook.
pub fn both_kinds(receiver: SocketAddr) -> [String; 2] {
    [meta(receiver, false), hook(receiver)]
}

/// The `POST /destinations` body of a `meta_capi` destination named `meta` at `receiver`;
/// `only_attributed` as given (its default is true).
pub fn meta(receiver: SocketAddr, only_attributed: bool) -> String {
    format!(
        r#"{{"name":"meta","kind":"meta_capi","pixel_id":"1","access_token":"bench-token","only_attributed":{only_attributed},"graph_url":"http://{receiver}"}}"#
    )
}

/// The `POST /destinations` body of a `snap_capi` destination named `snap` at `receiver`,
/// taking the events of clicks with a `ScCid` (its default `only_attributed`).
pub fn snap(receiver: SocketAddr) -> String {
    format!(
        r#"{{"name":"snap","kind":"snap_capi","pixel_id":"bench-pixel","access_token":"bench-token","api_url":"http://{receiver}"}}"#
    )
}

/// The `POST /destinations` body of a webhook named `hook` at `receiver`.
pub fn hook(receiver: SocketAddr) -> String {
    format!(r#"{{"name":"hook","kind":"webhook","url":"http://{receiver}/hook"}}"#)
}

/// A request to the space of `secret`, with a JSON body when given.
fn request(method: &str, target: &str, secret: &str, body: Option<&str>) -> Vec<u8> {
    let mut out = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n"
    );
    match body {
        Some(body) => {
            let _ = write!(
                out,
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
        None => out.push_str("\r\n"),
    }
    out.into_bytes()
}

/// Creates the destinations `bodies` (`POST /destinations`) in the space of `secret`.
pub fn add_destinations(addr: SocketAddr, secret: &str, bodies: &[String]) -> Result<(), String> {
    let requests = bodies
        .iter()
        .map(|body| request("POST", "/destinations", secret, Some(body)))
        .collect();
    for (status, body) in client::fetch_all(addr, 1, requests) {
        if status != 201 {
            return Err(format!(
                "creating a destination: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    Ok(())
}

/// Removes the destination `name` of the space of `secret`: it sends nothing more.
pub fn remove_destination(addr: SocketAddr, secret: &str, name: &str) -> Result<(), String> {
    let target = format!("/destinations/{name}");
    let (status, body) = client::fetch_all(addr, 1, vec![request("DELETE", &target, secret, None)])
        .pop()
        .ok_or("no answer to DELETE /destinations")?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!(
            "removing destination {name}: {status} {}",
            String::from_utf8_lossy(&body)
        ))
    }
}

/// `GET /destinations` of the space of `secret`: each destination's `deliveries` by state.
fn destination_counts(
    addr: SocketAddr,
    secret: &str,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, String> {
    let (status, body) =
        client::fetch_all(addr, 1, vec![request("GET", "/destinations", secret, None)])
            .pop()
            .ok_or("no answer to GET /destinations")?;
    let json: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("GET /destinations {status}: {e}"))?;
    Ok(json["destinations"]
        .as_array()
        .ok_or_else(|| format!("GET /destinations {status}: {json}"))?
        .iter()
        .map(|d| d["deliveries"].as_object().cloned().unwrap_or_default())
        .collect())
}

/// The deliveries of every destination of the space of `secret`, by state (`pending`,
/// `retrying`, `delivered`, `dead`, `cancelled`).
pub fn states(addr: SocketAddr, secret: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut sums = BTreeMap::new();
    for counts in destination_counts(addr, secret)? {
        for (state, n) in counts {
            *sums.entry(state).or_insert(0) += n.as_u64().unwrap_or(0);
        }
    }
    Ok(sums)
}

/// How many deliveries each destination of the case's space has, in any state.
pub fn deliveries(addr: SocketAddr, secret: &str) -> Result<Vec<u64>, String> {
    Ok(destination_counts(addr, secret)?
        .iter()
        .map(|c| c.values().filter_map(serde_json::Value::as_u64).sum())
        .collect())
}
