//! Slow, stalled, idle and numerous clients (`docs/api.md#limits`): each is cut off within its
//! timeout, never before it, while other clients are served; the bound on connections holds;
//! SIGTERM ends the process within `shutdown_timeout` whatever the clients do; and a handler
//! that panics answers `500 internal` while the server keeps serving.
//!
//! Timing: every deadline is checked from below exactly (a connection is never closed before its
//! timeout: the server's clock is monotonic) and from above with a generous margin, so a loaded
//! machine cannot make these tests fail.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::support::{Connection, Request, TestServer, assert_error, send};

/// Added to a timeout for the upper bound of "closed within it".
const MARGIN: Duration = Duration::from_secs(10);

fn limits(
    header: Duration,
    body: Duration,
    idle: Duration,
) -> impl FnOnce(&mut tracker::config::Settings) {
    move |s| {
        s.connections.header_timeout = header;
        s.connections.body_timeout = body;
        s.connections.idle_timeout = idle;
    }
}

/// Waits until the server closes `stream` (or resets it); answers how long that took, reading
/// and discarding anything the server sends first.
async fn closed_after(stream: &mut TcpStream, started: Instant, bound: Duration) -> Duration {
    let mut buf = [0u8; 1024];
    let wait = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, wait)
        .await
        .unwrap_or_else(|_| panic!("the server did not close the connection within {bound:?}"))
}

/// `n` connections, each served once and then left open and idle.
/// A server with long timeouts and a connection bound of `n` (set by `bound`), and `n`
/// connections to it, each served once and then idle.
async fn idle_at_the_bound(
    n: u32,
    bound: fn(&mut tracker::config::ConnectionLimits, u32),
) -> (TestServer, Vec<Connection>) {
    let long = Duration::from_secs(60);
    let server = TestServer::start_with(|s| {
        limits(long, long, long)(s);
        bound(&mut s.connections, n);
    })
    .await;
    let held = served_and_idle(server.addr, n as usize).await;
    (server, held)
}

/// Asserts that a connection in service is still answered.
async fn assert_served(connection: &mut Connection) {
    let answer = connection.send(&Request::get("/healthz")).await.unwrap();
    assert_eq!(answer.status, 200);
}

async fn served_and_idle(addr: SocketAddr, n: usize) -> Vec<Connection> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut c = Connection::open(addr).await.unwrap();
        assert_eq!(c.send(&Request::get("/healthz")).await.unwrap().status, 200);
        held.push(c);
    }
    held
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_stalled_clients_are_cut_off_while_others_are_served() {
    let (head, body, idle) = (
        Duration::from_millis(1500),
        Duration::from_millis(1500),
        Duration::from_millis(2500),
    );
    let server = TestServer::start_with(limits(head, body, idle)).await;
    let addr = server.addr;
    let started = Instant::now();
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    let mut idles = Vec::new();
    for _ in 0..100 {
        // A client that stalls mid-header: half a header line, then nothing.
        let mut s = connect(addr).await;
        s.write_all(b"POST /events HTTP/1.1\r\nHost: x\r\nContent-Le")
            .await
            .unwrap();
        heads.push(s);
        let mut s = connect(addr).await;
        let post = format!(
            "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Length: 100\r\n\r\n{{\"event\":",
            server.a.secret
        );
        s.write_all(post.as_bytes()).await.unwrap();
        bodies.push(s);
        let mut c = Connection::open(addr).await.unwrap();
        assert_eq!(c.send(&Request::get("/healthz")).await.unwrap().status, 200);
        idles.push(c);
    }
    // While 300 clients stall, others are answered at once (generous bound: a loaded machine).
    for i in 0..20 {
        let t = Instant::now();
        let r = server
            .post_event(&format!(r#"{{"event":"deposit","eid":"busy-{i}"}}"#))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
    for s in &mut heads {
        let after = closed_after(s, started, head + MARGIN).await;
        assert!(
            after >= head,
            "a slow head was cut off early, after {after:?}"
        );
    }
    for s in &mut bodies {
        let after = closed_after(s, started, body + MARGIN).await;
        assert!(
            after >= body,
            "a stalled body was cut off early, after {after:?}"
        );
    }
    for c in idles {
        let mut s = c.into_stream();
        let after = closed_after(&mut s, started, idle + MARGIN).await;
        assert!(
            after >= idle,
            "an idle connection was closed early, after {after:?}"
        );
    }
    // Nothing of the stalled bodies was stored; the server still serves.
    let r = server
        .post_event(r#"{"event":"contact","uid":"after"}"#)
        .await;
    assert_eq!(r.status, 200);
    server.stop().await;
}

/// Just inside each timeout the client is served: a head that arrives in pieces within
/// `header_timeout`, a body with pauses shorter than `body_timeout`, and a keep-alive connection
/// that sends its next request before `idle_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_within_their_timeouts_are_served() {
    let t = Duration::from_secs(4);
    let server = TestServer::start_with(limits(t, t, t)).await;
    let pause = Duration::from_millis(400);
    let mut s = connect(server.addr).await;
    let body = r#"{"event":"contact","uid":"slow-but-fine"}"#;
    let head = format!(
        "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Length: {}\r\n\r\n",
        server.a.secret,
        body.len()
    );
    let (first, second) = head.split_at(20);
    s.write_all(first.as_bytes()).await.unwrap();
    tokio::time::sleep(pause).await;
    s.write_all(second.as_bytes()).await.unwrap();
    tokio::time::sleep(pause).await;
    let (b1, b2) = body.split_at(10);
    s.write_all(b1.as_bytes()).await.unwrap();
    tokio::time::sleep(pause).await;
    s.write_all(b2.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    assert_answers_200(&mut s, &mut answer).await;
    tokio::time::sleep(pause).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_answers_200(&mut s, &mut answer).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_bound_holds_and_frees_up() {
    // Eight connections, each served once and then idle: the bound is reached.
    let (server, mut held) = idle_at_the_bound(8, |c, n| c.max_connections = n).await;
    // The ninth connects (the kernel queues it) but is not served while eight are open.
    let mut ninth = connect(server.addr).await;
    ninth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let early = tokio::time::timeout(Duration::from_millis(500), ninth.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "a ninth connection was served past the bound of 8"
    );
    // Those in service are not affected.
    assert_served(&mut held[0]).await;
    drop(held.pop());
    let n = tokio::time::timeout(Duration::from_secs(20), ninth.read(&mut buf))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    server.stop().await;
}

/// The binary, with clients that stalled in every way, one of them after
/// complete header lines but before the blank line: SIGTERM still ends it within its bound.
#[test]
fn sigterm_with_stalled_clients_exits_within_shutdown_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let process = crate::support::TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_HEADER_TIMEOUT", "60s"),
            ("TRACKER_BODY_TIMEOUT", "60s"),
            ("TRACKER_IDLE_TIMEOUT", "60s"),
            ("TRACKER_SHUTDOWN_TIMEOUT", "1s"),
        ],
    );
    let secret = process
        .created
        .as_ref()
        .expect("first start")
        .secret
        .clone();
    let addr = process.addr;
    let mut streams = Vec::new();
    for i in 0..50 {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let bytes = match i % 3 {
            0 => "GET /healthz HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n".to_owned(),
            1 => format!(
                "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}\r\n\
                 Content-Length: 50\r\n\r\n{{"
            ),
            _ => "POST /events HTTP/1.1\r\nHost: x\r\nContent-Le".to_owned(),
        };
        s.write_all(bytes.as_bytes()).unwrap();
        streams.push(s);
    }
    // Let the server take them all in before the signal.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let status = process.terminate();
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(1) + MARGIN,
        "SIGTERM took {took:?} with stalled clients"
    );
}

/// A handler panic: `500 internal` with the JSON body (no detail), and the server, and the very
/// connection, keep serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_500_and_the_server_keeps_serving() {
    use warp::Filter as _;
    let boom = warp::path!("boom").map(|| -> warp::reply::Response {
        panic!("secret detail that must not reach the client")
    });
    let fine = warp::path!("fine").map(|| tracker::surface::respond::text("fine".into()));
    let routes = boom
        .or(fine)
        .unify()
        .recover(tracker::surface::respond::recover)
        .unify();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = tracker::config::Settings::with_data("x".into()).connections;
    let serving = tokio::spawn(tracker::server::serve_connections(
        routes,
        listener,
        limits,
        async move {
            let _ = stopped.await;
        },
    ));
    let mut c = Connection::open(addr).await.unwrap();
    for _ in 0..3 {
        let r = c.send(&Request::get("/boom")).await.unwrap();
        let body = assert_error(&r, 500, "internal", None);
        assert!(!body.to_string().contains("secret detail"), "{body}");
        assert_eq!(c.send(&Request::get("/fine")).await.unwrap().text(), "fine");
    }
    assert_eq!(send(addr, &Request::get("/fine")).await.text(), "fine");
    let _ = stop.send(());
    serving.await.unwrap();
}

/// Reads one answer from `s` into `buffer` and asserts it is a `200`.
async fn assert_answers_200(s: &mut tokio::net::TcpStream, buffer: &mut [u8]) {
    let n = tokio::time::timeout(Duration::from_secs(20), s.read(buffer))
        .await
        .expect("an answer")
        .unwrap();
    let text = String::from_utf8_lossy(&buffer[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

/// Opens a connection that sends a request head declaring a body of 16000 bytes, then one byte
/// of it every half second (the attack: each byte came before `body_timeout` of the last).
async fn trickling(addr: SocketAddr, head: String) -> tokio::task::JoinHandle<()> {
    let mut s = connect(addr).await;
    tokio::spawn(async move {
        if s.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..120 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if s.write_all(b"a").await.is_err() {
                return;
            }
        }
    })
}

/// `GET /healthz` on a new connection, answered within `bound` (it waits for a free
/// connection first).
async fn healthz_within(addr: SocketAddr, bound: Duration) -> u16 {
    tokio::time::timeout(bound, send(addr, &Request::get("/healthz")))
        .await
        .unwrap_or_else(|_| panic!("/healthz got no answer within {bound:?}"))
        .status
}

/// The attack as it was reproduced: every connection taken by `POST /admin/login` bodies sent a
/// byte at a time, each byte within `body_timeout` of the last. `body_timeout` is a deadline for
/// the whole body, so each is cut off at it; and a form without the login form's cookie is
/// answered from its head, without waiting for its body at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_cannot_take_every_connection() {
    let server = TestServer::start_with(|s| {
        s.connections.max_connections = 3;
        s.connections.body_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = server.addr;
    let head = |cookie: &str| {
        format!(
            "POST /admin/login HTTP/1.1\r\nHost: x\r\n{cookie}Content-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: 16000\r\n\r\n"
        )
    };
    // With the login form's cookie (as an attacker gets it from the login page): the head
    // passes, and only the body's deadline ends them.
    let page = send(addr, &Request::get("/admin/login")).await;
    let cookie = page
        .headers
        .iter()
        .find(|(k, v)| k.eq_ignore_ascii_case("set-cookie") && v.starts_with("tracker_login="))
        .map(|(_, v)| v.split(';').next().unwrap().to_owned())
        .expect("the login form's cookie");
    for with in [format!("Cookie: {cookie}\r\n"), String::new()] {
        let mut attackers = Vec::new();
        for _ in 0..3 {
            attackers.push(trickling(addr, head(&with)).await);
        }
        // Let the server take all three in before the health check queues behind them.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(healthz_within(addr, Duration::from_secs(15)).await, 200);
        for a in attackers {
            a.abort();
        }
    }
    server.stop().await;
}

/// A form to the admin page without a session (or, to the login, without the login form's
/// cookie) is answered from its head: the server does not wait for a body it will not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_form_without_its_cookie_is_answered_before_its_body() {
    let long = Duration::from_secs(60);
    let server = TestServer::start_with(limits(long, long, long)).await;
    for (path, cookie) in [
        ("/admin/login", ""),
        (
            "/admin/login",
            "Cookie: tracker_login=1800000000000.00ff\r\n",
        ),
        ("/admin/spaces", ""),
        (
            "/admin/spaces",
            "Cookie: tracker_admin=0123456789abcdef0123456789abcdef\r\n",
        ),
    ] {
        let mut c = Connection::open(server.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{cookie}Content-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: 16000\r\n\r\n"
        );
        let r = c
            .send_raw(head.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{path} {cookie:?}: no answer before the body: {e}"));
        assert_eq!(r.status, 403, "{path} {cookie:?}: {}", r.text());
    }
    server.stop().await;
}

/// `max_connections_per_address`: one address holds at most that many connections; the next is
/// answered `429` and closed, others are not affected, and a closed one frees its place. A
/// trusted proxy, which carries every visitor's connections, is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_share_of_connections() {
    let (server, mut held) = idle_at_the_bound(3, |c, n| c.max_connections_per_address = n).await;
    // The fourth is answered at once, before it sends anything, and closed.
    let mut fourth = connect(server.addr).await;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), fourth.read_to_end(&mut answer))
        .await
        .expect("the fourth connection is answered and closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(answer.contains(r#""status":"rate_limited""#), "{answer}");
    // Those held still work; closing one makes room.
    assert_served(&mut held[0]).await;
    drop(held.pop());
    let again = async {
        loop {
            let r = send(server.addr, &Request::get("/healthz")).await;
            if r.status == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), again)
        .await
        .expect("a place freed by a closed connection");
    server.stop().await;

    let long = Duration::from_secs(60);
    let server = TestServer::start_with(|s| {
        limits(long, long, long)(s);
        s.connections.max_connections_per_address = 3;
        s.trusted_proxies = vec![tracker::domain::client::Cidr::parse("127.0.0.1").unwrap()];
    })
    .await;
    let _held = served_and_idle(server.addr, 5).await;
    server.stop().await;
}
