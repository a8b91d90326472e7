//! The in-repo load client: fixed keep-alive HTTP/1.1 connections, one request in flight on
//! each, a latency histogram. The fallback when `wrk` is missing, and what smoke and soak runs
//! use, because it counts exactly: every request it sends is waited for, so "acknowledged" is
//! known to the request.
//!
//! Each connection is a task on a two-thread tokio runtime (the load generator gets the same
//! share of this 2-core machine as `wrk -t2`). A request is made by the scenario from a sequence
//! number that is unique across connections, so events can carry unique `eid`s.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use crate::http1;

/// Latencies, recorded in microseconds to three significant digits (within 0.1%), up to an
/// hour; longer ones count as an hour. Merging is adding counts.
#[derive(Clone)]
pub struct Histogram(hdrhistogram::Histogram<u64>);

/// The longest latency told apart from longer ones, in microseconds.
const LONGEST_US: u64 = 3_600 * 1_000_000;

impl Histogram {
    pub fn new() -> Histogram {
        // All its buckets up front: recording never allocates.
        let buckets = hdrhistogram::Histogram::new_with_bounds(1, LONGEST_US, 3);
        Histogram(buckets.expect("valid histogram bounds"))
    }

    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(us);
    }

    pub fn merge(&mut self, other: &Histogram) {
        self.0.add(&other.0).expect("histograms of the same bounds");
    }

    /// The latency at quantile `q` (0.5, 0.99), or zero for an empty histogram.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.0.value_at_quantile(q))
    }
}

/// How much load to send: `conns` connections until `duration` has passed or `max_requests`
/// have been sent, whichever comes first. At least one bound must be set.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub conns: usize,
    pub duration: Option<Duration>,
    pub max_requests: Option<u64>,
}

/// What a run saw.
#[derive(Clone)]
pub struct Outcome {
    /// Responses received (any status).
    pub responses: u64,
    /// Answered 2xx or 3xx (a tracking link redirects).
    pub ok: u64,
    /// Answered 4xx or 5xx (named as `wrk` names them).
    pub non_2xx: u64,
    /// Connection or protocol failures (each also ends that connection's current request).
    pub errors: u64,
    /// 2xx responses whose body contains the scenario's expected text.
    pub expected: u64,
    pub elapsed: Duration,
    pub latency: Histogram,
}

impl Outcome {
    #[allow(clippy::cast_precision_loss)]
    pub fn rate(&self) -> f64 {
        self.responses as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Makes request number `seq` (unique across the run's connections) as raw HTTP bytes.
pub type MakeRequest = Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync>;

/// Runs `load` against `addr`. `expect` is a text every 2xx body should contain (counted, not
/// enforced: the caller decides what a shortfall means).
pub fn run(
    addr: SocketAddr,
    load: Load,
    make: &MakeRequest,
    expect: Option<&'static str>,
) -> Outcome {
    assert!(
        load.duration.is_some() || load.max_requests.is_some(),
        "a load needs a bound"
    );
    let runtime = runtime();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = load.duration.map(|d| started + d);
    let outcomes = runtime.block_on(async {
        let mut tasks = Vec::with_capacity(load.conns);
        for _ in 0..load.conns {
            let (next, make) = (next.clone(), make.clone());
            tasks.push(tokio::spawn(async move {
                connection(addr, &next, deadline, load.max_requests, &make, expect).await
            }));
        }
        let mut all = Vec::with_capacity(tasks.len());
        for t in tasks {
            all.push(t.await.expect("load connection task panicked"));
        }
        all
    });
    let elapsed = started.elapsed();
    let mut total = Outcome {
        responses: 0,
        ok: 0,
        non_2xx: 0,
        errors: 0,
        expected: 0,
        elapsed,
        latency: Histogram::new(),
    };
    for o in outcomes {
        total.responses += o.responses;
        total.ok += o.ok;
        total.non_2xx += o.non_2xx;
        total.errors += o.errors;
        total.expected += o.expected;
        total.latency.merge(&o.latency);
    }
    total
}

/// Sends each request once over `conns` connections and returns every `(status, body)`, in the
/// order of `requests`; a failed request is status 0. For setting up fixtures.
pub fn fetch_all(addr: SocketAddr, conns: usize, requests: Vec<Vec<u8>>) -> Vec<(u16, Vec<u8>)> {
    let runtime = runtime();
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicU64::new(0));
    let results = runtime.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..conns.max(1) {
            let (requests, next) = (requests.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                let mut conn: Option<Conn> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(req) = requests.get(i) else { break };
                    let answer = match roundtrip(&mut conn, addr, req).await {
                        Ok(answer) => (answer.status, answer.body.to_vec()),
                        Err(_) => (0, Vec::new()),
                    };
                    got.push((i, answer));
                }
                got
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("fetch task panicked"));
        }
        all
    });
    let mut ordered = vec![(0, Vec::new()); requests.len()];
    for (i, answer) in results {
        ordered[i] = answer;
    }
    ordered
}

/// Makes a click with each of `requests` (`POST /clicks`) over 16 connections and answers their
/// uids, in order; or, if any was refused, what it was answered.
pub fn click_uids(addr: SocketAddr, requests: Vec<Vec<u8>>) -> Result<Vec<String>, String> {
    fetch_all(addr, 16, requests)
        .into_iter()
        .map(|(status, body)| {
            let uid = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("uid")?.as_str().map(str::to_owned));
            match (status, uid) {
                (200, Some(uid)) => Ok(uid),
                _ => Err(format!("{status} {}", String::from_utf8_lossy(&body))),
            }
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("load client runtime")
}

async fn connection(
    addr: SocketAddr,
    next: &AtomicU64,
    deadline: Option<Instant>,
    max_requests: Option<u64>,
    make: &MakeRequest,
    expect: Option<&'static str>,
) -> Outcome {
    let mut o = Outcome {
        responses: 0,
        ok: 0,
        non_2xx: 0,
        errors: 0,
        expected: 0,
        elapsed: Duration::ZERO,
        latency: Histogram::new(),
    };
    let mut conn: Option<Conn> = None;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let seq = next.fetch_add(1, Ordering::Relaxed);
        if max_requests.is_some_and(|m| seq >= m) {
            break;
        }
        let request = make(seq);
        let sent = Instant::now();
        if let Ok(answer) = roundtrip(&mut conn, addr, &request).await {
            o.latency.record(sent.elapsed());
            o.responses += 1;
            // As `wrk` counts: a redirect (a tracking link's answer) is a success.
            if (200..400).contains(&answer.status) {
                o.ok += 1;
                let found = |e: &str| {
                    contains(answer.head, e.as_bytes()) || contains(answer.body, e.as_bytes())
                };
                if expect.is_some_and(found) {
                    o.expected += 1;
                }
            } else {
                o.non_2xx += 1;
            }
        } else {
            o.errors += 1;
            // A server that refuses connections would spin this loop: back off a little.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    o
}

/// One keep-alive connection and the reader of its answers.
pub struct Conn {
    stream: TcpStream,
    answers: http1::Reader,
    /// The server said `connection: close`, or an exchange failed or was given up: the next
    /// request opens a new connection.
    close: bool,
}

/// Sends `request` over `conn` and reads its answer, connecting first when there is no
/// connection or the last one is done with.
pub async fn roundtrip<'c>(
    conn: &'c mut Option<Conn>,
    addr: SocketAddr,
    request: &[u8],
) -> io::Result<http1::Answer<'c>> {
    if conn.as_ref().is_none_or(|c| c.close) {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        *conn = Some(Conn {
            stream,
            answers: http1::Reader::new(4096),
            close: false,
        });
    }
    let c = conn.as_mut().expect("connected above");
    // Until its answer is read whole, the connection is good for nothing else: if this fails
    // or is cancelled (a timeout), the next request starts afresh.
    c.close = true;
    c.stream.write_all(request).await?;
    let answer = c.answers.read(&mut c.stream, false).await?;
    c.close =
        http1::header(answer.head, "connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
    Ok(answer)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
