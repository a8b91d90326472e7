//! The HTTP/1.1 plumbing every stand-in shares: an accept loop on 127.0.0.1 that stops when the
//! stand-in is dropped, reading one request after another off a kept-alive connection (its body
//! framed by `Content-Length`, as the tracker's client sends it), and writing a JSON answer. What
//! a stand-in answers, and what it checks, stays in its own file.

use std::fmt::Debug;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A stand-in's accept loop: each connection is served by a task of its own, and the loop ends
/// when this is dropped.
pub struct Listening {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Listens on an ephemeral port of 127.0.0.1 and hands each connection to `serve`.
pub async fn listen<F, Served>(serve: F) -> Listening
where
    F: Fn(TcpStream) -> Served + Send + 'static,
    Served: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(stream));
        }
    });
    Listening { addr, task }
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Incoming {
    pub method: String,
    /// The path with its query.
    pub target: String,
    /// Names in lowercase, values trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Incoming {
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; `null` where it is not.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Reads the next request off `stream`; `buf` holds what has arrived and not yet been read, so
/// it is kept from one request of the connection to the next. `None` once the connection ends.
pub async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Incoming> {
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        read_more(stream, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        read_more(stream, buf).await?;
    }
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Some(Incoming {
        method,
        target,
        headers,
        body,
    })
}

/// Appends what the connection brings next to `buf`; `None` once it has ended.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    buf.reserve(16384);
    match stream.read_buf(buf).await {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(()),
    }
}

/// Writes an answer of `status` with a JSON `body`, and `extra` headers beside its type and
/// length.
pub async fn write_json(
    stream: &mut TcpStream,
    status: u16,
    extra: &[(&str, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut answer = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in extra {
        let _ = write!(answer, "{name}: {value}\r\n");
    }
    answer.push_str("\r\n");
    answer.push_str(body);
    stream.write_all(answer.as_bytes()).await
}

/// Answers `200` with a JSON body of `bytes` that never closes: `opening`, then `item` again
/// and again, sent chunked (no `Content-Length`) as it is made, so the stand-in holds none of
/// it; stops when the client goes.
pub async fn send_endless(stream: &mut TcpStream, opening: &str, item: &str, bytes: usize) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: \
                chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let block = item.repeat((64 * 1024 / item.len()).max(1));
    let mut next = opening.to_owned();
    let mut sent = 0;
    while sent < bytes {
        let chunk = format!("{:x}\r\n{next}\r\n", next.len());
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            return;
        }
        sent += next.len();
        next.clone_from(&block);
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
}

/// Keeps the connection open without answering, until the client closes it.
pub async fn hold_until_closed(stream: &mut TcpStream) {
    let mut sink = [0; 1024];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Waits until `received` holds at least `n` requests, looking again each time `arrived` is
/// notified; fails the test if they have not come `within` that long.
pub async fn wait_for<T: Debug>(
    arrived: &Notify,
    n: usize,
    within: Duration,
    received: impl Fn() -> Vec<T>,
) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let notified = arrived.notified();
        let got = received();
        if got.len() >= n {
            return got;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let got = received();
            assert!(
                got.len() >= n,
                "expected {n} requests, got {}: {got:#?}",
                got.len()
            );
            return got;
        }
    }
}
