//! Credentials and the edges of the HTTP surface (`docs/api.md#authentication`, `#errors`): who may call what,
//! that authentication comes first, and the JSON answers for 404, 405, 413 and 429.

use tracker::domain::credential::{self, Kind};
use tracker::domain::rate::Rate;

use crate::support::{Connection, Request, TestServer, assert_error, assert_queued, send_raw};

const EVENT: &str = r#"{"event":"contact"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_endpoints_refuse_a_missing_or_malformed_secret_with_a_challenge() {
    let s = TestServer::start().await;
    let secret = s.a.secret.clone();
    let cases: Vec<(&str, Option<String>)> = vec![
        ("no header", None),
        ("empty", Some(String::new())),
        ("no scheme", Some(secret.clone())),
        ("basic", Some(format!("Basic {secret}"))),
        ("bearer only", Some("Bearer".to_owned())),
        ("bearer empty", Some("Bearer ".to_owned())),
        ("junk", Some("Bearer not-a-credential".to_owned())),
    ];
    for path in ["/events", "/clicks", "/bind"] {
        for (what, header) in &cases {
            let mut request = Request::post(path, None, EVENT);
            if let Some(value) = header {
                request = request.header("Authorization", value.clone());
            }
            let r = s.send(&request).await;
            assert_error(&r, 401, "unauthorized", None);
            assert_eq!(
                r.header("www-authenticate"),
                Some("Bearer"),
                "{path} {what}: {:?}",
                r.headers
            );
        }
    }
    // The secret itself works, and `bearer` in lower case too.
    assert_queued(&s.post_event(EVENT).await);
    let lower =
        Request::post("/events", None, EVENT).header("Authorization", format!("bearer {secret}"));
    assert_queued(&s.send(&lower).await);
    s.stop().await;
}

/// A well-formed secret nobody issued, one with a broken checksum, and the revoked secret of a
/// space that exists all get the same answer: a caller learns nothing about which spaces exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_revoked_and_corrupted_credentials_get_one_identical_answer() {
    let s = TestServer::start().await;
    let never_issued = credential::generate(Kind::Secret).text;
    let mut corrupted = s.b.secret.clone();
    let last = corrupted.pop().unwrap();
    corrupted.push(if last == 'A' { 'B' } else { 'A' });
    let revoked = s.b.secret.clone();
    let (store, space, now) = (s.store.clone(), s.b.name.clone(), s.clock.clone());
    {
        use tracker::clock::Clock as _;
        crate::support::app_on(&store, now.now_ms())
            .revoke(&space, Kind::Secret)
            .await
            .expect("revoke");
    }

    let mut bodies = Vec::new();
    for secret in [&never_issued, &corrupted, &revoked] {
        let r = s.send(&Request::post("/events", Some(secret), EVENT)).await;
        assert_error(&r, 401, "unauthorized", None);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        bodies.push(r.body);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "answers differ: {:?}",
        bodies
            .iter()
            .map(|b| String::from_utf8_lossy(b))
            .collect::<Vec<_>>()
    );

    // The same over the ingest token.
    let never_issued = credential::generate(Kind::Ingest).text;
    let mut token_bodies = Vec::new();
    for token in [never_issued.as_str(), "trk_it_short", "plainly-wrong"] {
        let r = s
            .send(&Request::get(&format!("/e?token={token}&event=contact")))
            .await;
        assert_error(&r, 401, "unauthorized", None);
        token_bodies.push(r.body);
    }
    assert!(token_bodies.windows(2).all(|w| w[0] == w[1]));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_endpoints_refuse_a_missing_token() {
    let s = TestServer::start().await;
    for target in [
        "/e?event=contact",
        "/e?token=&event=contact",
        "/bind?uid=x&tg=5",
        "/e",
    ] {
        let r = s.send(&Request::get(target)).await;
        assert_error(&r, 401, "unauthorized", None);
    }
    // A bearer header does not stand in for the token on GET.
    let r = s
        .send(
            &Request::get("/e?event=contact")
                .header("Authorization", format!("Bearer {}", s.a.secret)),
        )
        .await;
    assert_error(&r, 401, "unauthorized", None);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_sent_as_token_is_refused() {
    let s = TestServer::start().await;
    for path in ["/e", "/bind"] {
        let r = s
            .send(&Request::get(&format!(
                "{path}?token={}&event=contact&uid=x&tg=5",
                s.a.secret
            )))
            .await;
        let body = assert_error(&r, 401, "unauthorized", None);
        assert!(
            body["error"].as_str().unwrap().contains("URL"),
            "the sentence says why: {body}"
        );
    }
    // Nothing was stored by the refused request.
    assert_queued(&s.get_e("event=contact&uid=x").await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_token_is_refused_as_bearer() {
    let s = TestServer::start().await;
    for path in ["/events", "/clicks", "/bind"] {
        let r = s
            .send(&Request::post(path, Some(&s.a.ingest_token), EVENT))
            .await;
        assert_error(&r, 401, "unauthorized", None);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    s.stop().await;
}

/// An unauthenticated caller learns nothing about validation: a bad body, an oversized body or a
/// bad query without a valid credential is 401, not 400/413/422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_is_checked_before_anything_else() {
    let s = TestServer::start().await;
    let big = format!(r#"{{"event":"contact","uid":"{}"}}"#, "x".repeat(20_000));
    for body in [
        "not json",
        r#"{"event":"purchase"}"#,
        r#"{"typo":1}"#,
        big.as_str(),
    ] {
        for path in ["/events", "/clicks", "/bind"] {
            let r = s.send(&Request::post(path, None, body)).await;
            assert_error(&r, 401, "unauthorized", None);
        }
    }
    for query in [
        "event=purchase",
        "event=deposit&value=12%2C5",
        "uid=%7Bclickid%7D",
    ] {
        let r = s.send(&Request::get(&format!("/e?{query}"))).await;
        assert_error(&r, 401, "unauthorized", None);
        let r = s.send(&Request::get(&format!("/bind?{query}"))).await;
        assert_error(&r, 401, "unauthorized", None);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_and_wrong_methods_answer_the_json_error_body() {
    let s = TestServer::start().await;
    for target in ["/", "/nope", "/events/1", "/e/x", "/clicks/abc"] {
        let r = s.send(&Request::get(target)).await;
        assert_error(&r, 404, "not_found", None);
        let r = s
            .send(&Request::post(target, Some(&s.a.secret), EVENT))
            .await;
        assert_error(&r, 404, "not_found", None);
    }
    for (method, target) in [
        ("PUT", "/events"),
        ("DELETE", "/events"),
        ("POST", "/e"),
        ("GET", "/clicks"),
        ("PATCH", "/bind"),
        ("POST", "/healthz"),
    ] {
        let mut request = Request::post(target, Some(&s.a.secret), EVENT);
        request.method = method;
        let r = s.send(&request).await;
        assert_error(&r, 405, "method_not_allowed", None);
    }
    let health = s.send(&Request::get("/healthz")).await;
    assert_eq!(
        (health.status, health.json()["ok"].as_bool()),
        (200, Some(true))
    );
    s.stop().await;
}

/// A JSON body of exactly `len` bytes: an event padded with trailing spaces.
fn padded_event(len: usize) -> String {
    let mut body = EVENT.to_owned();
    body.push_str(&" ".repeat(len - body.len()));
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_16_kib_is_413() {
    let s = TestServer::start().await;
    assert_queued(&s.post_event(&padded_event(16 * 1024)).await);
    for path in ["/events", "/clicks", "/bind"] {
        let r = s.post_as(&s.a, path, &padded_event(16 * 1024 + 1)).await;
        assert_error(&r, 413, "payload_too_large", None);
    }
    s.stop().await;
}

/// A chunked body declares no length: the limit must hold while it streams in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_over_16_kib_is_413() {
    let s = TestServer::start().await;
    let chunked = |body: &str| {
        let mut raw = format!(
            "POST /events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n",
            s.addr, s.a.secret
        )
        .into_bytes();
        for piece in body.as_bytes().chunks(4096) {
            raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            raw.extend_from_slice(piece);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        raw
    };
    let ok = send_raw(s.addr, &chunked(&padded_event(16 * 1024))).await;
    assert_queued(&ok);
    let over = send_raw(s.addr, &chunked(&padded_event(16 * 1024 + 1))).await;
    assert_error(&over, 413, "payload_too_large", None);
    let far_over = send_raw(s.addr, &chunked(&padded_event(200 * 1024))).await;
    assert_error(&far_over, 413, "payload_too_large", None);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_rate_limit_is_429_with_retry_after_per_space() {
    // 2 a second, bursts of 3: three at once, then one every 500 ms.
    let s = TestServer::start_with(|settings| {
        settings.rate_limit = Rate {
            per_second: 2,
            burst: 3,
        };
    })
    .await;
    assert_queued(&s.post_event(EVENT).await);
    assert_queued(&s.get_e("event=contact").await);
    assert_queued(&s.post_event(EVENT).await);
    let r = s.post_event(EVENT).await;
    assert_error(&r, 429, "rate_limited", None);
    assert_eq!(r.header("retry-after"), Some("1"), "{:?}", r.headers);
    // Another space has its own bucket.
    assert_queued(&s.post_as(&s.b, "/events", EVENT).await);
    // Just before a token is back: still refused; at 500 ms: one, and only one.
    s.clock.advance(499);
    assert_error(&s.post_event(EVENT).await, 429, "rate_limited", None);
    s.clock.advance(1);
    assert_queued(&s.post_event(EVENT).await);
    assert_error(&s.post_event(EVENT).await, 429, "rate_limited", None);
    // A long pause refills the burst, never more.
    s.clock.advance(60_000);
    for _ in 0..3 {
        assert_queued(&s.post_event(EVENT).await);
    }
    assert_error(&s.post_event(EVENT).await, 429, "rate_limited", None);
    s.stop().await;
}

/// A header value with bytes that are not visible ASCII is a malformed credential: 401 with the
/// JSON body, like any other malformed credential, never a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_ascii_authorization_header_is_401() {
    let s = TestServer::start().await;
    let mut raw = format!(
        "POST /events HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Authorization: Bearer trk_sk_",
        s.addr,
        EVENT.len()
    )
    .into_bytes();
    raw.extend_from_slice(b"\xc3\xa9\xff\r\n\r\n");
    raw.extend_from_slice(EVENT.as_bytes());
    let r = send_raw(s.addr, &raw).await;
    assert_error(&r, 401, "unauthorized", None);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    s.stop().await;
}

/// On a keep-alive connection, a body the server refused before reading it (401, 413) must not
/// be parsed as the next request: here that body is itself a valid postback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_is_never_taken_for_the_next_request() {
    let s = TestServer::start().await;
    let smuggled = format!(
        "GET /e?token={}&event=contact&eid=smuggled HTTP/1.1\r\nHost: {}\r\n\r\n",
        s.a.ingest_token, s.addr
    );
    let oversized = format!("{smuggled}{}", " ".repeat(17 * 1024));
    for (secret, body, status) in [
        (None, smuggled.as_str(), 401),
        (Some(s.a.secret.as_str()), oversized.as_str(), 413),
    ] {
        let mut conn = Connection::open(s.addr).await.expect("connect");
        let r = conn
            .send(&Request::post("/events", secret, body))
            .await
            .expect("response");
        assert_eq!(r.status, status, "{}", r.text());
        // The connection is either closed or still speaks HTTP from the next request on.
        if let Ok(next) = conn.send(&Request::get("/healthz")).await {
            assert_eq!((next.status, next.text().as_str()), (200, r#"{"ok":true}"#));
        }
    }
    assert_queued(&s.get_e("event=contact&eid=smuggled").await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_limit_follows_max_body_bytes() {
    let s = TestServer::start_with(|settings| settings.max_body_bytes = 1024).await;
    assert_queued(&s.post_event(&padded_event(1024)).await);
    let r = s.post_event(&padded_event(1025)).await;
    let body = assert_error(&r, 413, "payload_too_large", None);
    assert!(body["error"].as_str().unwrap().contains("1024"), "{body}");
    s.stop().await;
}
