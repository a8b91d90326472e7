//! Conversions out in the benchmark: the `unique_dest` case's space, with one `meta_capi` and
//! one `webhook` destination pointing at a receiver this process runs on loopback, which
//! answers every request `200` at once. Its row beside the plain `unique` row (same server,
//! same run) is the cost of writing each event's deliveries in its transaction.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;

use crate::client;
use crate::scenario::{Fixture, Piece, Template};

/// The space the `unique_dest` case sends to.
pub const SPACE: &str = "bench-dest";

/// Starts the receiver: a thread per connection, keep-alive, `200 {}` to every request.
pub fn receiver() -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding the receiver: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the receiver's address: {e}"))?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let Ok(mut write) = stream.try_clone() else {
                    return;
                };
                let mut read = BufReader::new(stream);
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        match read.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {
                                if let Some((name, value)) = line.split_once(':') {
                                    if name.eq_ignore_ascii_case("content-length") {
                                        length = value.trim().parse().unwrap_or(0);
                                    }
                                }
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if read.read_exact(&mut body).is_err()
                        || write
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Makes the case's space and its two destinations; answers its secret.
pub fn setup(
    cli: Command,
    addr: SocketAddr,
    receiver: SocketAddr,
    fx: &Fixture,
) -> Result<String, String> {
    let created = crate::reads::space_create(cli, SPACE)?;
    let secret = created["secret"]
        .as_str()
        .ok_or_else(|| format!("tracker space create printed no secret: {created}"))?
        .to_owned();
    let bodies = [
        format!(
            r#"{{"name":"meta","kind":"meta_capi","pixel_id":"1","access_token":"bench-token","only_attributed":false,"graph_url":"http://{receiver}"}}"#
        ),
        format!(r#"{{"name":"hook","kind":"webhook","url":"http://{receiver}/hook"}}"#),
    ];
    let requests = bodies
        .into_iter()
        .map(|body| {
            Template {
                method: "POST",
                target: vec![Piece::Lit("/destinations".into())],
                headers: vec![
                    ("Authorization", format!("Bearer {secret}")),
                    ("Content-Type", "application/json".to_owned()),
                ],
                body: Some(vec![Piece::Lit(body)]),
            }
            .render(fx, 0)
        })
        .collect();
    for (status, body) in client::fetch_all(addr, 1, requests) {
        if status != 201 {
            return Err(format!(
                "creating a destination: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    Ok(secret)
}

/// How many deliveries each destination of the case's space has, in any state.
pub fn deliveries(addr: SocketAddr, secret: &str, fx: &Fixture) -> Result<Vec<u64>, String> {
    let request = Template {
        method: "GET",
        target: vec![Piece::Lit("/destinations".into())],
        headers: vec![("Authorization", format!("Bearer {secret}"))],
        body: None,
    }
    .render(fx, 0);
    let (status, body) = client::fetch_all(addr, 1, vec![request])
        .pop()
        .ok_or("no answer to GET /destinations")?;
    let json: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("GET /destinations {status}: {e}"))?;
    Ok(json["destinations"]
        .as_array()
        .ok_or_else(|| format!("GET /destinations {status}: {json}"))?
        .iter()
        .map(|d| {
            d["deliveries"].as_object().map_or(0, |c| {
                c.values().filter_map(serde_json::Value::as_u64).sum()
            })
        })
        .collect())
}
