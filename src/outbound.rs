//! The guarded HTTP client of everything that sends out: the senders of conversions, the
//! Telegram bots and the fetch of Meta's spend. `reqwest` on rustls, one client per destination,
//! bot or fetch (its own pool of connections), with a connect timeout and a total one, no
//! redirects and no proxy, and a resolver that drops every loopback, private and link-local
//! address a name resolves to, so that no DNS answer can point a destination at the server's own
//! services. An answer is read only up to a bound: its first bytes kept ([`exchange_reading`]),
//! or read whole where it must be understood and refused past its bound ([`read_bounded`]).
//!
//! An IP address written in a URL never reaches a resolver: [`check_before_send`] refuses a
//! private one before it is requested (a postback's filled URL each request, a webhook's or
//! Meta's fixed one each batch), as the destination's creation did.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::config::Delivery;
use crate::platform::{self, ANSWER_BYTES, answer_head};

/// The longest wait for a connection, within the total `delivery_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept per host: enough for the sender's requests in flight.
const IDLE_PER_HOST: usize = 32;

/// Resolves with the system's resolver and keeps only the public addresses (all of them when
/// private ones are allowed).
struct PublicOnly {
    allow_private: bool,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow_private || !platform::is_private(a.ip()))
                .collect();
            if public.is_empty() {
                let shown: Vec<String> = found.iter().map(|a| a.ip().to_string()).collect();
                return Err(Box::new(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{host} resolves to {}, not a public address (set \
                         allow_private_destinations = true for private networks)",
                        if shown.is_empty() {
                            "nothing".to_owned()
                        } else {
                            shown.join(", ")
                        }
                    ),
                ))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// A client for one destination.
///
/// # Errors
/// If the TLS backend cannot be set up.
pub fn client(settings: &Delivery) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(PublicOnly {
            allow_private: settings.allow_private_destinations,
        }))
        // A redirect could lead to any address, a private one too.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would dial the destination itself, past the resolver's check.
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT.min(settings.timeout))
        .timeout(settings.timeout)
        .pool_max_idle_per_host(IDLE_PER_HOST)
        .user_agent(concat!("tracker/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Refuses a URL whose host is a private IP address (unless allowed), before it is requested;
/// answers it parsed, for the request (so it is parsed once). A postback's URL is filled in by
/// then, so it may be longer than its template ([`platform::MAX_FILLED_URL_LEN`]).
pub fn check_before_send(url: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    platform::check_url_of("url", url, allow_private, platform::MAX_FILLED_URL_LEN)
        .map_err(|e| e.message)
}

/// What a request came to: the answer's status and first bytes, or what went wrong.
#[derive(Clone, Debug)]
pub struct Answered {
    pub status: Option<u16>,
    /// The first [`ANSWER_BYTES`] of the body, or the error.
    pub answer: String,
    /// As much of the body as was asked to be read ([`exchange_reading`]), for an answer
    /// that must be understood, not only kept; else the same as `answer`.
    pub body: String,
    pub retry_after_ms: Option<u64>,
    pub took: Duration,
    /// Not sent: refused here (a private address written in the URL).
    pub refused_here: bool,
}

/// Sends `request` and reads the first bytes of its answer.
pub async fn exchange(request: reqwest::RequestBuilder, now_ms: u64) -> Answered {
    exchange_reading(request, now_ms, ANSWER_BYTES).await
}

/// Sends `request` and reads the first `read` bytes of its answer (at least [`ANSWER_BYTES`]).
pub async fn exchange_reading(
    request: reqwest::RequestBuilder,
    now_ms: u64,
    read: usize,
) -> Answered {
    let read = read.max(ANSWER_BYTES);
    let started = Instant::now();
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            let text = error_text(&e);
            return Answered {
                status: None,
                answer: answer_head(&text),
                body: text,
                retry_after_ms: None,
                took: started.elapsed(),
                refused_here: false,
            };
        }
    };
    let status = response.status().as_u16();
    let retry_after_ms = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, now_ms));
    let mut body = Vec::new();
    let mut response = response;
    // Only the first bytes are kept: an answer of any size costs no more than that.
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk);
                if body.len() >= read {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                if body.is_empty() {
                    body.extend_from_slice(error_text(&e).as_bytes());
                }
                break;
            }
        }
    }
    // An answer may echo the URL it was asked at, and a postback's may carry a token.
    let body = crate::domain::credential::redact(&String::from_utf8_lossy(&body));
    Answered {
        status: Some(status),
        answer: answer_head(&body),
        body,
        retry_after_ms,
        took: started.elapsed(),
        refused_here: false,
    }
}

/// Reads `response`'s body whole, up to `limit` bytes: an answer that says it is longer
/// (`Content-Length`) is refused unread, and one that goes on past the bound is refused once
/// it has, so an answer of any size costs at most `limit` bytes of memory.
///
/// # Errors
/// The answer is over the bound, or the transport failed while reading it (its words as
/// [`error_words`] gives them, the URL left in: a caller whose URL holds a token cuts it out).
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let over = || format!("answered more than {limit} bytes, this tracker's bound");
    let declared = response.content_length().unwrap_or(0);
    if declared > u64::try_from(limit).unwrap_or(u64::MAX) {
        return Err(over());
    }
    // Room for the whole bound at once when the length is not declared: a large allocation is
    // only address space until written, and growing by doubling would hold the old and the
    // new buffer together (1.5x the bound) at each step.
    let room = if declared == 0 {
        limit
    } else {
        usize::try_from(declared).unwrap_or(limit)
    };
    let mut body = Vec::with_capacity(room);
    while let Some(chunk) = response.chunk().await.map_err(|e| error_words(&e))? {
        if body.len() + chunk.len() > limit {
            return Err(over());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error in a sentence, with its causes, its URL's secrets redacted.
fn error_text(e: &reqwest::Error) -> String {
    // A URL in reqwest's message may carry a postback's query: keep the words, not the URL.
    crate::domain::credential::redact(&error_words(e))
}

/// A transport error in words, with its causes (reqwest's own says only "error sending
/// request"). Its URL is left as it is: a caller whose URL holds a token cuts it out.
#[must_use]
pub fn error_words(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let line = s.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = s.source();
    }
    text
}

/// `Retry-After` in milliseconds from `now_ms`: delta seconds, or an HTTP date.
fn retry_after(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds.saturating_mul(1000));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at_ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some(u64::try_from(at_ms).ok()?.saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of exactly the bound is read whole; a byte more is refused (here by its
    /// declared length; the integration tests send endless chunked answers).
    #[tokio::test]
    async fn an_answer_is_read_up_to_its_bound_and_refused_past_it() {
        let answer = |n: usize| reqwest::Response::from(hyper::Response::new("x".repeat(n)));
        assert_eq!(read_bounded(answer(1024), 1024).await.unwrap().len(), 1024);
        assert_eq!(read_bounded(answer(0), 1024).await.unwrap().len(), 0);
        let past = read_bounded(answer(1025), 1024).await.unwrap_err();
        assert_eq!(past, "answered more than 1024 bytes, this tracker's bound");
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(retry_after("120", 0), Some(120_000));
        assert_eq!(retry_after(" 0 ", 0), Some(0));
        assert_eq!(
            retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 30_000),
            Some(30_000)
        );
        assert_eq!(
            retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 90_000),
            Some(0)
        );
        assert_eq!(retry_after("soon", 0), None);
        assert_eq!(retry_after("-1", 0), None);
    }
}
