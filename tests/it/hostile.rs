//! Hostile input, table-driven: every malformed request with the answer it must get (HTTP
//! status and error code, `docs/api.md#errors`) and the proof that nothing was stored (the row
//! count of every table is the same after it). Plus what the HTTP layer owes every answer:
//! `Allow` on a `405`, JSON bodies on the answers hyper makes itself, pipelining.

use std::fmt::Write as _;

use crate::support::{Connection, TestServer, assert_error, send_raw};

/// One hostile request: raw bytes on a fresh connection, and the answer it must get.
struct Row {
    name: &'static str,
    bytes: Vec<u8>,
    status: u16,
    /// The error code, or `None` for a success.
    code: Option<&'static str>,
}

fn post_events(secret: &str, body: &[u8]) -> Vec<u8> {
    post_with(secret, "Content-Type: application/json\r\n", body)
}

fn post_with(secret: &str, extra_headers: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "POST /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n{extra_headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").into_bytes()
}

/// Every row of every table.
/// Rows in the tables that hold what requests store. The rejection log is left out: a refused
/// request with a valid credential is meant to land there.
async fn stored_rows(server: &TestServer) -> u64 {
    let (_, tables) = server.store.usage().await.expect("usage");
    tables
        .iter()
        .filter(|t| t.table != "rejections")
        .map(|t| t.entries)
        .sum()
}

#[allow(clippy::too_many_lines)]
fn rows(secret: &str, token: &str) -> Vec<Row> {
    let row = |name, bytes, status, code| Row {
        name,
        bytes,
        status,
        code: Some(code),
    };
    let ev = |body: &str| post_events(secret, body.as_bytes());
    let e = |query: &str| get(&format!("/e?token={token}&event=deposit&{query}"));
    let mut rows = vec![
        // Broken and truncated JSON, the wrong shape.
        row("broken JSON", ev(r#"{"event":"#), 400, "invalid_json"),
        row(
            "truncated JSON",
            ev(r#"{"event":"deposit""#),
            400,
            "invalid_json",
        ),
        row("empty body", ev(""), 400, "invalid_json"),
        row("array", ev(r#"[{"event":"deposit"}]"#), 400, "invalid_json"),
        row("string", ev(r#""deposit""#), 400, "invalid_json"),
        row("number", ev("12"), 400, "invalid_json"),
        row("null", ev("null"), 400, "invalid_json"),
        row(
            "object in a field",
            ev(r#"{"event":{"a":1}}"#),
            400,
            "invalid_json",
        ),
        row(
            "array in a field",
            ev(r#"{"event":"deposit","uid":["a"]}"#),
            400,
            "invalid_json",
        ),
        row(
            "duplicate key",
            ev(r#"{"event":"contact","event":"deposit"}"#),
            400,
            "invalid_json",
        ),
        row(
            "unknown field",
            ev(r#"{"event":"deposit","occured_at_ms":1}"#),
            400,
            "invalid_json",
        ),
        row(
            "trailing garbage",
            ev(r#"{"event":"deposit"} x"#),
            400,
            "invalid_json",
        ),
        // Numbers out of every range.
        row(
            "value 1e400",
            ev(r#"{"event":"deposit","value":1e400}"#),
            422,
            "invalid_value",
        ),
        row(
            "value 1e-400",
            ev(r#"{"event":"deposit","value":1e-400}"#),
            422,
            "invalid_value",
        ),
        row(
            "value -1e400",
            ev(r#"{"event":"deposit","value":"-1e400"}"#),
            422,
            "invalid_value",
        ),
        row(
            "value of 400 digits",
            ev(&format!(
                r#"{{"event":"deposit","value":{}}}"#,
                "9".repeat(400)
            )),
            422,
            "invalid_value",
        ),
        row(
            "value NaN",
            ev(r#"{"event":"deposit","value":"NaN"}"#),
            422,
            "invalid_value",
        ),
        row(
            "value Infinity",
            ev(r#"{"event":"deposit","value":"Infinity"}"#),
            422,
            "invalid_value",
        ),
        row(
            "time -0",
            ev(r#"{"event":"deposit","occurred_at_ms":-0}"#),
            422,
            "invalid_time",
        ),
        row(
            "time of 400 digits",
            ev(&format!(
                r#"{{"event":"deposit","occurred_at_ms":{}}}"#,
                "9".repeat(400)
            )),
            422,
            "invalid_time",
        ),
        row(
            "time 1e400",
            ev(r#"{"event":"deposit","occurred_at_ms":1e400}"#),
            422,
            "invalid_time",
        ),
        row(
            "time 2^64",
            ev(r#"{"event":"deposit","occurred_at_ms":18446744073709551616}"#),
            422,
            "invalid_time",
        ),
        // Text that is not text.
        row(
            "invalid UTF-8",
            post_events(secret, b"{\"event\":\"dep\xffosit\"}"),
            400,
            "invalid_json",
        ),
        row(
            "raw control character",
            post_events(secret, b"{\"event\":\"deposit\",\"uid\":\"a\x01b\"}"),
            400,
            "invalid_json",
        ),
        row(
            "escaped NUL in uid",
            ev(r#"{"event":"deposit","uid":"a\u0000b"}"#),
            422,
            "invalid_uid",
        ),
        row(
            "escaped NUL in event",
            ev(r#"{"event":"deposit\u0000"}"#),
            422,
            "invalid_event",
        ),
        row(
            "lone surrogate",
            ev(r#"{"event":"deposit","uid":"\ud800"}"#),
            400,
            "invalid_json",
        ),
        row(
            "deep nesting",
            ev(&format!(r#"{{"event":{}"#, "[".repeat(10_000))),
            400,
            "invalid_json",
        ),
        // Bodies over the limit, declared and not; a Content-Length that lies short.
        row(
            "body over the limit",
            ev(&format!(
                r#"{{"event":"deposit","uid":"{}"}}"#,
                "a".repeat(20_000)
            )),
            413,
            "payload_too_large",
        ),
        row(
            "declared over the limit",
            format!(
                "POST /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n\
             Content-Length: 99999999\r\n\r\n{{"
            )
            .into_bytes(),
            413,
            "payload_too_large",
        ),
        row(
            "chunked over the limit",
            {
                let chunk = "a".repeat(8_000);
                let mut b = format!(
                    "POST /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n\
                 Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                );
                for _ in 0..3 {
                    let _ = write!(b, "{:x}\r\n{chunk}\r\n", chunk.len());
                }
                b.push_str("0\r\n\r\n");
                b.into_bytes()
            },
            413,
            "payload_too_large",
        ),
        row(
            "Content-Length short of the body",
            {
                let body = br#"{"event":"deposit","eid":"lying-length"}"#;
                let mut b = format!(
                    "POST /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n\
                 Content-Length: 8\r\n\r\n"
                )
                .into_bytes();
                b.extend_from_slice(body);
                b
            },
            400,
            "invalid_json",
        ),
        row(
            "two Content-Lengths",
            format!(
                "POST /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n\
             Content-Length: 3\r\nContent-Length: 20\r\n\r\n{{}}"
            )
            .into_bytes(),
            400,
            "malformed_request",
        ),
        row(
            "a form body",
            post_with(
                secret,
                "Content-Type: application/x-www-form-urlencoded\r\n",
                b"event=deposit",
            ),
            400,
            "invalid_json",
        ),
        // Credentials are checked first, whatever the body.
        row(
            "no credential, broken body",
            post_with("", "", b"{\"event\":"),
            401,
            "unauthorized",
        ),
        // Query parameters: broken percent-encoding, every macro shape.
        row("uid=%zz", e("uid=%zz"), 422, "invalid_uid"),
        row("uid=%4", e("uid=%4"), 422, "invalid_uid"),
        row("uid not UTF-8", e("uid=%ff%fe"), 422, "invalid_uid"),
        row("eid=%zz", e("eid=%zz"), 422, "invalid_eid"),
        row("value=%G1", e("value=%G1"), 422, "invalid_value"),
        row("t=%zz", e("t=%zz"), 422, "invalid_time"),
        row("currency=%", e("currency=%"), 422, "invalid_currency"),
        row(
            "event broken",
            get(&format!("/e?token={token}&event=dep%zzosit")),
            422,
            "invalid_event",
        ),
        row(
            "value repeated, first wrong",
            e("value=abc&value=5"),
            422,
            "invalid_value",
        ),
        row(
            "no event",
            get(&format!("/e?token={token}&event=&uid=x")),
            422,
            "missing_field",
        ),
        row(
            "bind uid=%zz",
            get(&format!("/bind?token={token}&uid=%zz&tg=5")),
            422,
            "invalid_uid",
        ),
        row(
            "bind tg macro",
            get(&format!("/bind?token={token}&uid=abc&tg={{tg_id}}")),
            422,
            "invalid_tg_id",
        ),
        // The HTTP layer: a head hyper cannot parse, too large, too long; no Host.
        row(
            "garbage request line",
            b"GARBAGE\r\n\r\n".to_vec(),
            400,
            "malformed_request",
        ),
        row(
            "bad header line",
            b"GET /healthz HTTP/1.1\r\nHost: t\r\nno colon here\r\n\r\n".to_vec(),
            400,
            "malformed_request",
        ),
        row(
            "HTTP/1.1 without Host",
            format!("GET /e?token={token}&event=deposit HTTP/1.1\r\n\r\n").into_bytes(),
            400,
            "malformed_request",
        ),
        row(
            "URL over 8 KiB",
            e(&format!("uid={}", "a".repeat(9_000))),
            414,
            "uri_too_long",
        ),
        row(
            "head over 64 KiB",
            format!(
                "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
                "a".repeat(70_000)
            )
            .into_bytes(),
            431,
            "headers_too_large",
        ),
        row(
            "too many headers",
            {
                let mut b = "GET /healthz HTTP/1.1\r\nHost: t\r\n".to_owned();
                for i in 0..100 {
                    let _ = write!(b, "X-H{i}: v\r\n");
                }
                b.push_str("\r\n");
                b.into_bytes()
            },
            431,
            "headers_too_large",
        ),
        row("unknown path", get("/events/../admin"), 404, "not_found"),
        row(
            "wrong method",
            format!("DELETE /events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {secret}\r\n\r\n")
                .into_bytes(),
            405,
            "method_not_allowed",
        ),
    ];
    for (name, value) in [
        ("macro {clickid}", "{clickid}"),
        ("macro [clickid]", "[clickid]"),
        ("macro %7Bsubid%7D", "%257Bsubid%257D"),
        ("macro {{x}}", "{{clickid}}"),
        ("macro {{ x }}", "{{+ad.id+}}"),
        ("macro #x#", "%23clickid%23"),
        ("macro $x$", "$clickid$"),
        ("macro %x% raw", "%clickid%"),
        ("macro %x% encoded", "%25clickid%25"),
        ("macro <x>", "%3Cclickid%3E"),
        ("macro ${x}", "${clickid}"),
        ("macro [[x]]", "[[clickid]]"),
        ("macro __X__", "__CLICKID__"),
    ] {
        rows.push(row(name, e(&format!("uid={value}")), 422, "invalid_uid"));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_request_gets_its_answer_and_stores_nothing() {
    let server = TestServer::start().await;
    let before = stored_rows(&server).await;
    let mut failures = Vec::new();
    for row in rows(&server.a.secret, &server.a.ingest_token) {
        let response = send_raw(server.addr, &row.bytes).await;
        let body = serde_json::from_slice::<serde_json::Value>(&response.body);
        let got = (
            response.status,
            body.as_ref()
                .ok()
                .and_then(|b| b["status"].as_str().map(str::to_owned)),
        );
        let want = (row.status, row.code.map(str::to_owned));
        if got != want || body.as_ref().map_or(true, |b| b["ok"] != false) {
            failures.push(format!(
                "{}: want {want:?}, got {got:?} {:?}",
                row.name,
                response.text()
            ));
        }
        let after = stored_rows(&server).await;
        if after != before {
            failures.push(format!("{}: stored {} rows", row.name, after - before));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    server.stop().await;
}

/// What is not hostile though it looks odd: HTTP/1.0, a wrong or missing content type on a JSON
/// body (curl's `-d` sends a form type), a repeated parameter (the first non-empty one counts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_but_valid_requests_are_served() {
    let server = TestServer::start().await;
    let token = &server.a.ingest_token;
    let secret = &server.a.secret;
    let http10 = format!("GET /e?token={token}&event=contact&uid=h10 HTTP/1.0\r\n\r\n");
    let r = send_raw(server.addr, http10.as_bytes()).await;
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (200, Some("queued"))
    );
    for (i, headers) in ["Content-Type: text/plain\r\n", ""].iter().enumerate() {
        let body = format!(r#"{{"event":"deposit","eid":"ct-{i}"}}"#);
        let r = send_raw(server.addr, &post_with(secret, headers, body.as_bytes())).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = send_raw(
        server.addr,
        &get(&format!(
            "/e?token={token}&event=&event=contact&uid=rep&uid=other"
        )),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A value that merely contains macro characters is data, not a macro.
    let r = send_raw(
        server.addr,
        &get(&format!("/e?token={token}&event=deposit&eid=%23123%23")),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    server.stop().await;
}

/// Two requests in one write: both answered, in order, on the one connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::start().await;
    let token = &server.a.ingest_token;
    let two = format!(
        "GET /e?token={token}&event=contact&uid=p1 HTTP/1.1\r\nHost: t\r\n\r\n\
         GET /e?token={token}&event=contact&uid=p1 HTTP/1.1\r\nHost: t\r\n\r\n"
    );
    let mut c = Connection::open(server.addr).await.unwrap();
    let first = c.send_raw(two.as_bytes()).await.unwrap();
    let second = c.send_raw(b"").await.unwrap();
    assert_eq!(first.json()["status"], "queued");
    assert_eq!(second.json()["status"], "duplicate");
    server.stop().await;
}

/// Every path answers every method it does not take with `405` and an `Allow` header that
/// lists exactly the methods it takes (and those methods never answer `405`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_405_carries_allow_with_the_methods_the_path_takes() {
    let server = TestServer::start().await;
    for path in [
        "/healthz",
        "/events",
        "/e",
        "/clicks",
        "/bind",
        "/events/wait",
        "/stats",
        "/rejections",
        "/links",
        "/links/some-slug",
        "/l/some-slug",
    ] {
        let allow = tracker::router::allowed_methods(path).expect("listed");
        // (HEAD is left out: its answer has a Content-Length but no body to read.)
        for method in ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            let bytes = format!(
                "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let r = send_raw(server.addr, bytes.as_bytes()).await;
            let allowed = allow.split(", ").any(|m| m == method);
            if allowed {
                assert_ne!(r.status, 405, "{method} {path}");
            } else {
                assert_error(&r, 405, "method_not_allowed", None);
                assert_eq!(r.header("allow"), Some(allow.as_str()), "{method} {path}");
            }
        }
    }
    server.stop().await;
}
