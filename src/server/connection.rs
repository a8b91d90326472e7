//! One client connection: HTTP/1.1 served by hyper, watched so that no client can hold it
//! longer than its limits allow (`docs/api.md#limits`), and every answer kept to the JSON error
//! body (`docs/api.md#errors`).
//!
//! Why our own watch rather than hyper's `header_read_timeout`: hyper starts that timer whenever
//! it waits for a request head, between keep-alive requests too, so it cannot tell a slow head
//! (`header_timeout`, 10 s) from an idle keep-alive connection (`idle_timeout`, 60 s), and it
//! has nothing for a body that stops arriving. Here the connection is in one of three phases,
//! each with its own deadline:
//!
//! - **head**: from the connection's start, or from the first byte after an answer, until the
//!   request reaches the handler: `header_timeout`;
//! - **serving**: a handler runs; while it still waits for body bytes, `body_timeout` since the
//!   head was complete: a deadline for the whole body, not a gap between bytes, so a byte sent
//!   now and then cannot hold the connection; while it waits for the disk, no deadline (the
//!   store bounds that);
//! - **idle**: the answer is out and no byte of the next request came: `idle_timeout`.
//!
//! The reads (`Watched`), the handler calls (`Handler`) and the body (`WatchedBody`) move the
//! phase; [`serve`] sleeps until the deadline and drops the connection when it has passed.
//!
//! What else every request gets here, before and after the routes: the client's address as a
//! [`ClientAddr`] extension; `X-Content-Type-Options: nosniff` on every answer (`GET /e?return=`
//! echoes text a browser must not take for HTML); `400` for an HTTP/1.1 request without `Host`,
//! and for a target without a path (`GET _bot`, `OPTIONS *`), before any handler runs; `414` for an
//! over-long URL; `500 internal` (and the detail in the log) for a handler that panics, while
//! the server keeps serving; and, for the answers hyper makes by
//! itself for a head it cannot parse (`400`, `414`, `431`), the JSON error body in place of
//! hyper's empty one.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};
use warp::Filter;
use warp::http::{HeaderValue, Request, Version, header};
use warp::reply::Response;

use crate::config::ConnectionLimits;
use crate::error::{Code, Error};
use crate::metrics::Metrics;
use crate::surface::ClientAddr;
use crate::surface::respond::{self, Auth};

/// The longest request target served; a longer one is answered `414`. Postback URLs with a
/// dozen macros are well under 2 KiB; browsers stop near 8 KiB.
pub const MAX_URL_BYTES: usize = 8 * 1024;
/// The largest request head (request line and headers); a larger one is answered `431`.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// More header lines than this are answered `431`.
const MAX_HEADERS: usize = 64;

/// How connections ended other than normally, counted for the log at shutdown. A client's
/// misbehaviour is a debug line and a count here, never a warning: anyone can cause it.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    pub accepted: AtomicU64,
    pub head_timeouts: AtomicU64,
    pub body_timeouts: AtomicU64,
    pub idle_closed: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Connections refused because their address held its share.
    pub address_refused: AtomicU64,
    pub panics: AtomicU64,
    /// When the next handler's panic may be logged ([`ConnectionStats::panic_to_log`]), in
    /// `now_ms`'s milliseconds.
    next_panic_log_ms: AtomicU64,
    /// Panics since the last one logged, not logged.
    panics_not_logged: AtomicU64,
}

/// A handler's panic is logged at most once in this long, the line counting those not logged
/// since: a request that makes a handler panic, sent again and again, must not fill the disk
/// with the log nor bury every other line.
const PANIC_LOG_EVERY_MS: u64 = 60_000;

impl ConnectionStats {
    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a handler's panic at `now_ms` is logged: the first, then one at least
    /// [`PANIC_LOG_EVERY_MS`] after the last logged; `Some` with how many were not logged
    /// since that one.
    fn panic_to_log(&self, now_ms: u64) -> Option<u64> {
        let due = self.next_panic_log_ms.load(Ordering::Relaxed);
        let next = now_ms.saturating_add(PANIC_LOG_EVERY_MS);
        if now_ms >= due
            && self
                .next_panic_log_ms
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.panics_not_logged.swap(0, Ordering::Relaxed));
        }
        self.panics_not_logged.fetch_add(1, Ordering::Relaxed);
        None
    }
}

const HEAD: u8 = 0;
const SERVING: u8 = 1;
const IDLE: u8 = 2;

/// Milliseconds since the first connection: cheap to store in an atomic.
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Where a connection is, shared by its reads, its handler calls and its watch.
struct Phase {
    current: AtomicU8,
    /// When the phase began (head, serving, idle).
    since_ms: AtomicU64,
    /// A handler may still wait for body bytes.
    body_open: AtomicBool,
    /// Woken when a deadline may have moved earlier.
    moved: Notify,
}

impl Phase {
    fn new() -> Phase {
        let now = now_ms();
        Phase {
            current: AtomicU8::new(HEAD),
            since_ms: AtomicU64::new(now),
            body_open: AtomicBool::new(false),
            moved: Notify::new(),
        }
    }

    fn read_some(&self) {
        if self.current.load(Ordering::Relaxed) == IDLE {
            self.since_ms.store(now_ms(), Ordering::Relaxed);
            self.current.store(HEAD, Ordering::Relaxed);
            self.moved.notify_one();
        }
    }

    fn serving(&self, body_open: bool) {
        self.body_open.store(body_open, Ordering::Relaxed);
        if body_open {
            self.since_ms.store(now_ms(), Ordering::Relaxed);
        }
        self.current.store(SERVING, Ordering::Relaxed);
        self.moved.notify_one();
    }

    fn body_done(&self) {
        self.body_open.store(false, Ordering::Relaxed);
    }

    fn answered(&self) {
        self.body_open.store(false, Ordering::Relaxed);
        self.since_ms.store(now_ms(), Ordering::Relaxed);
        self.current.store(IDLE, Ordering::Relaxed);
        self.moved.notify_one();
    }

    /// When the current phase runs out (ms), and what it is called; `None`: no deadline now.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<(u64, &'static str)> {
        let ms = |d: Duration| d.as_millis() as u64;
        match self.current.load(Ordering::Relaxed) {
            HEAD => Some((
                self.since_ms.load(Ordering::Relaxed) + ms(limits.header_timeout),
                "head",
            )),
            IDLE => Some((
                self.since_ms.load(Ordering::Relaxed) + ms(limits.idle_timeout),
                "idle",
            )),
            _ if self.body_open.load(Ordering::Relaxed) => Some((
                self.since_ms.load(Ordering::Relaxed) + ms(limits.body_timeout),
                "body",
            )),
            _ => None,
        }
    }
}

/// Serves one connection until the client closes it, a deadline of [`Phase`] passes, or
/// `closing` turns true (then a request in flight finishes and the connection closes).
pub async fn serve<F>(
    stream: TcpStream,
    addr: SocketAddr,
    filter: F,
    limits: ConnectionLimits,
    mut closing: watch::Receiver<bool>,
    stats: Arc<ConnectionStats>,
    metrics: Option<Arc<Metrics>>,
) where
    F: Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static,
{
    let _ = stream.set_nodelay(true);
    let phase = Arc::new(Phase::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        phase: phase.clone(),
        replacement: Vec::new(),
        swallow: false,
    });
    let handler = Handler {
        routes: TowerToHyperService::new(warp::service(filter)),
        phase: phase.clone(),
        addr,
        stats: stats.clone(),
        metrics,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let conn = builder.serve_connection(io, handler);
    let mut conn = std::pin::pin!(conn);
    let mut shutting_down = false;
    loop {
        let deadline = phase.deadline(&limits);
        let wake = deadline.map_or(Duration::from_secs(3600), |(at, _)| {
            Duration::from_millis(at.saturating_sub(now_ms()))
        });
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    ConnectionStats::count(&stats.protocol_errors);
                    tracing::debug!(%addr, error = %e, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep(wake) => {
                if let Some((at, what)) = phase.deadline(&limits)
                    && at <= now_ms()
                {
                    let counter = match what {
                        "head" => &stats.head_timeouts,
                        "body" => &stats.body_timeouts,
                        _ => &stats.idle_closed,
                    };
                    ConnectionStats::count(counter);
                    tracing::debug!(%addr, phase = what, "closing a connection past its deadline");
                    return;
                }
            }
            () = phase.moved.notified() => {}
            changed = closing.changed(), if !shutting_down => {
                shutting_down = true;
                // Stop keep-alive; a request in flight is answered first.
                conn.as_mut().graceful_shutdown();
                if changed.is_err() || phase.current.load(Ordering::Relaxed) != SERVING {
                    return;
                }
            }
        }
    }
}

/// The routes, with what every request gets before and after them (module docs).
struct Handler<S> {
    /// warp's routes as a hyper service (its type cannot be named: `warp::service`).
    routes: S,
    phase: Arc<Phase>,
    addr: SocketAddr,
    stats: Arc<ConnectionStats>,
    /// Where each answer is counted, by route and status (`None`: not counted).
    metrics: Option<Arc<Metrics>>,
}

impl<S> hyper::service::Service<Request<Incoming>> for Handler<S>
where
    S: hyper::service::Service<Request<WatchedBody>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        self.phase.serving(!req.body().is_end_stream());
        let phase = self.phase.clone();
        let started = Instant::now();
        let counted = self
            .metrics
            .clone()
            .map(|m| (m, crate::router::route_of(req.method(), req.uri().path())));
        let count = move |response: &Response| {
            if let Some((metrics, route)) = &counted {
                metrics.request(*route, response.status().as_u16(), started.elapsed());
            }
        };
        if let Some(mut refused) = refuse_before_routing(&req) {
            nosniff(&mut refused);
            phase.answered();
            count(&refused);
            return Box::pin(std::future::ready(Ok(refused)));
        }
        // (A `Uri` clone shares its bytes: no copy of the path on every request.)
        let uri = req.uri().clone();
        req.extensions_mut().insert(ClientAddr(self.addr));
        let req = req.map(|body| WatchedBody {
            inner: body,
            phase: phase.clone(),
        });
        let answer = hyper::service::Service::call(&self.routes, req);
        let (addr, stats) = (self.addr, self.stats.clone());
        Box::pin(async move {
            let mut response = match AssertUnwindSafe(answer).catch_unwind().await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(panic) => {
                    ConnectionStats::count(&stats.panics);
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic without a message".to_owned());
                    if let Some(not_logged) = stats.panic_to_log(now_ms()) {
                        tracing::error!(
                            %addr,
                            path = %uri.path(),
                            panic = %what,
                            not_logged,
                            "a handler panicked; answered 500 internal (one such line a minute \
                             at most: not_logged counts the panics since the last)"
                        );
                    }
                    respond::error(&Error::internal(), Auth::None)
                }
            };
            nosniff(&mut response);
            phase.answered();
            count(&response);
            Ok(response)
        })
    }
}

/// Every answer of the listener: no browser may guess another type than the one it says.
fn nosniff(response: &mut Response) {
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// What is refused before the routes see it: the request line and head hyper parsed but HTTP
/// does not allow.
fn refuse_before_routing(req: &Request<Incoming>) -> Option<Response> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let err = if target > MAX_URL_BYTES {
        Error::new(
            Code::UriTooLong,
            format!("the URL is longer than {MAX_URL_BYTES} bytes"),
        )
    } else if !req.uri().path().starts_with('/') {
        // Authority-form (`CONNECT t:80`, and `GET _bot`, which parses as one) and asterisk-form
        // (`OPTIONS *`) name no path: no endpoint takes them, and warp's path filters panic on
        // a path without its leading slash.
        Error::new(
            Code::MalformedRequest,
            "the request target must be a path starting with `/` (or an absolute URL)",
        )
    } else if req.version() == Version::HTTP_11 && !req.headers().contains_key(header::HOST) {
        Error::new(
            Code::MalformedRequest,
            "an HTTP/1.1 request must carry a Host header",
        )
    } else {
        return None;
    };
    let mut response = respond::error(&err, Auth::None);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Some(response)
}

/// A request body that tells the connection's [`Phase`] when it has been read to its end.
pub struct WatchedBody {
    inner: Incoming,
    phase: Arc<Phase>,
}

impl Body for WatchedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended {
            self.phase.body_done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The TCP stream, noting each read in the [`Phase`], and putting the JSON error body in place
/// of the empty one of hyper's own answers to a head it cannot parse.
struct Watched {
    inner: TcpStream,
    phase: Arc<Phase>,
    /// The replacement answer, still to be written.
    replacement: Vec<u8>,
    /// After a replaced answer, hyper's own bytes are dropped (it closes the connection next).
    swallow: bool,
}

impl Watched {
    /// Writes what is left of the replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.replacement.is_empty() {
            let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &self.replacement))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.replacement.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.phase.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_replacement(cx))?;
        if self.swallow {
            return Poll::Ready(Ok(buf.len()));
        }
        if let Some(code) = hyper_error_answer(buf) {
            self.replacement = replacement_answer(code);
            self.swallow = true;
            // Accepted whole; the replacement goes out on this call or the next flush.
            let _ = self.poll_replacement(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The code of an answer hyper wrote by itself for a head it could not parse: a `400`, `414`
/// or `431` with an empty body and no `Content-Type`. Every answer of the tracker's own has a
/// `Content-Type`, so none is mistaken for one.
fn hyper_error_answer(buf: &[u8]) -> Option<Code> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let code = match rest.get(..4)? {
        b"400 " => Code::MalformedRequest,
        b"414 " => Code::UriTooLong,
        b"431 " => Code::HeadersTooLarge,
        _ => return None,
    };
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = buf[..end].to_ascii_lowercase();
    let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    (has(b"\r\ncontent-length: 0") && !has(b"\r\ncontent-type:")).then_some(code)
}

fn replacement_answer(code: Code) -> Vec<u8> {
    let message = match code {
        Code::UriTooLong => "the URL is too long".to_owned(),
        Code::HeadersTooLarge => format!(
            "the request head is too large (at most {MAX_HEADERS} headers and {MAX_HEAD_BYTES} \
             bytes)"
        ),
        _ => "the request is not valid HTTP/1.1".to_owned(),
    };
    let body = respond::error_body(&Error::new(code, message));
    let status = respond::status_of(code);
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first panic is logged; then none until a minute after it (just inside: not; just
    /// outside: logged, with the count of those that were not).
    #[test]
    fn a_handlers_panics_are_logged_once_a_minute_with_a_count() {
        let stats = ConnectionStats::default();
        let start = 5_000;
        assert_eq!(stats.panic_to_log(start), Some(0));
        assert_eq!(stats.panic_to_log(start + 1), None);
        assert_eq!(stats.panic_to_log(start + PANIC_LOG_EVERY_MS - 1), None);
        assert_eq!(stats.panic_to_log(start + PANIC_LOG_EVERY_MS), Some(2));
        assert_eq!(stats.panic_to_log(start + PANIC_LOG_EVERY_MS + 1), None);
        assert_eq!(stats.panic_to_log(start + 3 * PANIC_LOG_EVERY_MS), Some(1));
    }

    #[test]
    fn each_phase_has_its_own_deadline() {
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(7),
            idle_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(10),
            max_connections: 1,
            max_connections_per_address: 1,
        };
        let p = Phase::new();
        let at = |p: &Phase, what: &str| {
            let (at, name) = p.deadline(&limits).expect("a deadline");
            assert_eq!(name, what);
            at
        };
        let opened = p.since_ms.load(Ordering::Relaxed);
        assert_eq!(
            at(&p, "head"),
            opened + 10_000,
            "a new connection owes a head"
        );
        p.serving(true);
        p.since_ms.store(1_000, Ordering::Relaxed);
        assert_eq!(at(&p, "body"), 8_000);
        p.read_some();
        assert_eq!(
            at(&p, "body"),
            8_000,
            "a byte of the body moves no deadline"
        );
        p.body_done();
        assert_eq!(
            p.deadline(&limits),
            None,
            "waiting for the disk has no deadline"
        );
        p.answered();
        p.since_ms.store(2_000, Ordering::Relaxed);
        assert_eq!(at(&p, "idle"), 62_000);
        p.read_some();
        let first_byte = p.since_ms.load(Ordering::Relaxed);
        assert_eq!(
            at(&p, "head"),
            first_byte + 10_000,
            "the next head's clock starts"
        );
        p.read_some();
        assert_eq!(
            p.since_ms.load(Ordering::Relaxed),
            first_byte,
            "and does not restart"
        );
    }

    #[test]
    fn only_hyper_own_empty_error_answers_are_replaced() {
        let hyper400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(hyper_error_answer(hyper400), Some(Code::MalformedRequest));
        let hyper431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error_answer(hyper431), Some(Code::HeadersTooLarge));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error_answer(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error_answer(ok), None);
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 10\r\n\r\n";
        assert_eq!(hyper_error_answer(with_body), None);
    }
}
