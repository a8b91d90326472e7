//! What anyone on the internet can send, and what it must not get them: a flood of clicks that
//! fills the disk, a spreadsheet formula planted in an export, a Telegram id learnt through an
//! ingest token, a data file others can read, a client address chosen by the client, content a
//! browser sniffs, and spaces without bounds. (Slow bodies and connections per address are in
//! `connections.rs`; the login throttle and sessions in `admin_page.rs`.)

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use serde_json::Value;
use tracker::domain::client::Cidr;
use tracker::domain::rate::Rate;

use crate::support::{
    Request, Response, TestServer, assert_error, assert_queued, assert_succeeded, send,
};

const BROWSER: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) [FBAN/FBIOS]";

async fn visit(s: &TestServer, target: &str) -> Response {
    s.send(&Request::get(target).header("User-Agent", BROWSER))
        .await
}

async fn link(s: &TestServer, slug: &str) {
    let body = format!(r#"{{"slug":"{slug}","bot":"shop_bot"}}"#);
    let r = s.post_as(&s.a, "/links", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
}

/// With the defaults, one address clicking a link in a loop is limited (the flood that grew
/// the data file by 2.5 MB in under a second), while a person's few clicks never are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_flood_from_one_address_is_limited_by_default() {
    let s = TestServer::start().await;
    link(&s, "ad").await;
    let query = format!("/l/ad?q={}", "x".repeat(4000));
    let mut clicked = 0;
    for _ in 0..600 {
        let r = visit(&s, &query).await;
        match r.status {
            302 => clicked += 1,
            429 => assert_eq!(r.header("retry-after"), Some("1")),
            other => panic!("{other}: {}", r.text()),
        }
    }
    // The clock stands still: the burst and nothing more.
    assert_eq!(clicked, 20);
    // A second later, a person clicking again is let through.
    s.clock.advance(1000);
    assert_eq!(visit(&s, "/l/ad").await.status, 302);
    s.stop().await;
}

/// Every `X-Forwarded-For` line counts: a proxy that adds a line of its own (`HAProxy`) after
/// the client's must not let the client's line choose its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forwarded_for_line_is_read() {
    let s = TestServer::start_with(|settings| {
        settings.address_rate_limit = Rate {
            per_second: 1,
            burst: 1,
        };
        settings.trusted_proxies = vec![Cidr::parse("127.0.0.1").unwrap()];
    })
    .await;
    link(&s, "ad").await;
    let from = |chosen: &str| {
        Request::get("/l/ad")
            .header("User-Agent", BROWSER)
            .header("X-Forwarded-For", chosen.to_owned())
            .header("X-Forwarded-For", "198.51.100.7".to_owned())
    };
    assert_eq!(s.send(&from("203.0.113.1")).await.status, 302);
    // The same client, claiming another address in its own line: still the same bucket.
    assert_eq!(s.send(&from("203.0.113.2")).await.status, 429);
    s.stop().await;
}

/// An `X-Forwarded-For` from a peer that is not a trusted proxy is ignored, and the log says
/// so once: behind an unconfigured proxy, every visitor would share the proxy's address.
#[test]
fn a_forwarded_for_from_an_untrusted_peer_is_warned_about_once() {
    let dir = tempfile::tempdir().unwrap();
    let process = crate::support::TrackerProcess::start(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..3 {
            let r = send(
                process.addr,
                &Request::get("/healthz").header("X-Forwarded-For", "203.0.113.1"),
            )
            .await;
            assert_eq!(r.status, 200);
        }
    });
    let log = process.log_when(|log| log.contains("trusted_proxies"));
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("X-Forwarded-For"))
            .count(),
        1,
        "{log}"
    );
}

/// `X-Content-Type-Options: nosniff` on every answer of the main listener: `GET /e?return=`
/// echoes text, and a browser must not take it for HTML; errors, tracking links, and the
/// answers written by the connection layer get it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_nosniff() {
    let s = TestServer::start().await;
    link(&s, "ad").await;
    let echoed = s
        .get_e("event=contact&return=%3Cscript%3Ealert(1)%3C/script%3E")
        .await;
    assert_eq!(echoed.status, 200);
    let too_long = format!("/healthz?{}", "x".repeat(9000));
    let answers = [
        ("return=", echoed),
        ("/healthz", s.send(&Request::get("/healthz")).await),
        ("404", s.send(&Request::get("/nowhere")).await),
        ("401", s.send(&Request::get("/e?event=contact")).await),
        ("/l/", visit(&s, "/l/ad").await),
        ("unknown /l/", visit(&s, "/l/nope").await),
        ("414", s.send(&Request::get(&too_long)).await),
        ("admin", s.send(&Request::get("/admin/login")).await),
        (
            "hyper's 400",
            crate::support::send_raw(s.addr, b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
                .await,
        ),
    ];
    for (what, r) in answers {
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{what}: {} {:?}",
            r.status,
            r.headers
        );
    }
    s.stop().await;
}

/// `GET /bind` takes the ingest token, which affiliate networks hold, and they are sent the
/// uids of clicks: a conflict answered with the winning Telegram id would tell them who is
/// behind any click. With the ingest token the conflict comes without it; with the secret,
/// as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_token_never_learns_another_telegram_id() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, "{}").await;
    let first = s
        .post_as(&s.a, "/bind", &format!(r#"{{"uid":"{uid}","tg_id":111}}"#))
        .await
        .json();
    assert_eq!(first["tg_id"], 111);
    // The same id through the token: its own id back, as before.
    let same = s.get_as(&s.a, "/bind", &format!("uid={uid}&tg=111")).await;
    assert_eq!(
        same.json(),
        serde_json::json!({"ok": true, "matched": true, "tg_id": 111})
    );
    let other = s.get_as(&s.a, "/bind", &format!("uid={uid}&tg=222")).await;
    assert_eq!(other.status, 200);
    assert_eq!(
        other.json(),
        serde_json::json!({"ok": true, "matched": true, "conflict": true}),
        "the winning id must not reach an ingest token"
    );
    let with_secret = s
        .post_as(&s.a, "/bind", &format!(r#"{{"uid":"{uid}","tg_id":222}}"#))
        .await
        .json();
    assert_eq!(
        with_secret,
        serde_json::json!({"ok": true, "matched": true, "tg_id": 111, "conflict": true})
    );
    s.stop().await;
}

/// The data file and every backup hold the admin password's hash, the links and the Telegram
/// ids: only their owner may read them. A backup's temporary file is created new, never
/// through a link planted where it will be written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_file_and_backups_are_the_owners_alone() {
    let s = TestServer::start().await;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(s.store.path()), 0o600, "the data file");
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("b.redb");
    s.store.backup(dest.clone()).await.unwrap();
    assert_eq!(mode(&dest), 0o600, "a backup");
    // A link planted at the temporary name: the backup neither follows it nor writes through it.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    let partial = dir
        .path()
        .join(format!(".c.redb.partial-{}", std::process::id()));
    std::os::unix::fs::symlink(&victim, &partial).unwrap();
    let dest = dir.path().join("c.redb");
    let _ = s.store.backup(dest.clone()).await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    if dest.exists() {
        assert_eq!(mode(&dest), 0o600);
        assert!(!std::fs::symlink_metadata(&dest).unwrap().is_symlink());
    }
    s.stop().await;
}

/// A space holds at most `MAX_LINKS_PER_SPACE` links; the next is refused `409 conflict` with a
/// sentence that says why, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_holds_a_bounded_number_of_links() {
    use tracker::domain::link::{MAX_LINKS_PER_SPACE, NewLink};
    let s = TestServer::start().await;
    let app = s.app.clone().unwrap();
    let space = app.space_named("a".into()).await.unwrap();
    let new = |n: usize| {
        NewLink::new(
            Some(format!("l{n}")),
            Some("shop_bot".into()),
            None,
            None,
            None,
        )
        .unwrap()
    };
    let mut n = 0;
    while n < MAX_LINKS_PER_SPACE - 1 {
        let batch: Vec<_> = (n..(n + 500).min(MAX_LINKS_PER_SPACE - 1))
            .map(|i| app.create_link(&space, new(i)))
            .collect();
        n += batch.len();
        for r in futures_util::future::join_all(batch).await {
            r.unwrap();
        }
    }
    // Just inside: the last one fits.
    link(&s, "last").await;
    let refused = s
        .post_as(&s.a, "/links", r#"{"slug":"one-more","bot":"shop_bot"}"#)
        .await;
    let body = assert_error(&refused, 409, "conflict", None);
    assert!(body["error"].as_str().unwrap().contains("10000"), "{body}");
    assert_eq!(visit(&s, "/l/one-more").await.status, 404);
    // Another space is not affected.
    let r = s
        .post_as(&s.b, "/links", r#"{"slug":"b-one","bot":"shop_bot"}"#)
        .await;
    assert_eq!(r.status, 201);
    s.stop().await;
}

/// A space has at most `MAX_WAITERS_PER_SPACE` requests waiting on `GET /events/wait` at once;
/// the next is answered `429` with `Retry-After`, and a place frees when a wait ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_has_a_bounded_number_of_followers_waiting() {
    use std::future::Future as _;
    use tracker::domain::feed::{MAX_WAITERS_PER_SPACE, PageRequest};
    let s = TestServer::start().await;
    let app = s.app.clone().unwrap();
    let space = app.space_named("a".into()).await.unwrap();
    let page = PageRequest {
        after: 0,
        limit: 100,
    };
    // The waits the server runs for `GET /events/wait`, each polled once: each has its place.
    let mut waiting: Vec<_> = (0..MAX_WAITERS_PER_SPACE)
        .map(|_| Box::pin(app.wait_for_events(&space, page, Duration::from_secs(60))))
        .collect();
    for w in &mut waiting {
        std::future::poll_fn(|cx| {
            assert!(w.as_mut().poll(cx).is_pending(), "a wait with no event");
            std::task::Poll::Ready(())
        })
        .await;
    }
    let refused = s.read_as(&s.a, "/events/wait?timeout_s=1").await;
    let body = assert_error(&refused, 429, "rate_limited", None);
    assert_eq!(refused.header("retry-after"), Some("1"), "{body}");
    // Another space is not affected.
    let other = s.read_as(&s.b, "/events/wait?timeout_s=0").await;
    assert_eq!(other.status, 200, "{}", other.text());
    // An event answers every waiter, and the places are free again.
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"u1"}"#).await);
    for page in futures_util::future::join_all(waiting).await {
        assert_eq!(page.unwrap().events.len(), 1);
    }
    let again = s.read_as(&s.a, "/events/wait?timeout_s=0&after=1").await;
    assert_eq!(again.status, 200, "{}", again.text());
    s.stop().await;
}

/// `tracker export --format csv` neutralises a cell a spreadsheet would run as a formula: a
/// visitor's `utm_campaign=%3DHYPERLINK(...)` through a real link becomes text, while numbers,
/// negative ones included, stay numbers.
#[test]
fn a_csv_export_never_holds_a_live_formula() {
    let dir = tempfile::tempdir().unwrap();
    let (process, space) = crate::support::first_start(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let addr = process.addr;
        let r = send(
            addr,
            &Request::post(
                "/links",
                Some(&space.secret),
                r#"{"slug":"ad","bot":"shop_bot"}"#,
            ),
        )
        .await;
        assert_eq!(r.status, 201);
        let visit = send(
            addr,
            &Request::get(
                "/l/ad?utm_campaign=%3DHYPERLINK(%22https://evil.example/%22,%22open%22)",
            )
            .header("User-Agent", BROWSER),
        )
        .await;
        assert_eq!(visit.status, 302);
        let uid = visit
            .header("location")
            .unwrap()
            .rsplit_once("start=")
            .unwrap()
            .1
            .to_owned();
        let event =
            format!(r#"{{"event":"deposit","uid":"{uid}","value":"-3.50","eid":"@SUM(1+1)"}}"#);
        let r = send(addr, &Request::post("/events", Some(&space.secret), &event)).await;
        assert_queued(&r);
        let event = r#"{"event":"contact","eid":"+cmd","value":"12"}"#;
        assert_queued(&send(addr, &Request::post("/events", Some(&space.secret), event)).await);
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(dir.path().join("empty.toml"))
        .arg("--data")
        .arg(dir.path().join("t.redb"))
        .args(["export", "default", "--format", "csv"])
        .output()
        .unwrap();
    assert_succeeded(&out);
    let mut reader = csv::Reader::from_reader(out.stdout.as_slice());
    let header = reader.headers().unwrap().clone();
    let rows: Vec<Value> = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            header
                .iter()
                .zip(r.iter())
                .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0]["campaign_name"],
        "'=HYPERLINK(\"https://evil.example/\",\"open\")"
    );
    assert_eq!(rows[0]["eid"], "'@SUM(1+1)");
    assert_eq!(rows[0]["value"], "-3.50", "a negative number is a number");
    assert_eq!(rows[0]["event"], "deposit");
    assert_eq!(rows[1]["eid"], "'+cmd");
    assert_eq!(rows[1]["value"], "12");
    crate::support::stop_cleanly(process);
}

/// Refused fetches of a conversions file and refused Telegram updates are each logged once a
/// minute per address, with the space's name from the path clipped and escaped: one
/// connection once wrote 70 MB of log in 3 s this way, each line holding a raw 8 KB name.
#[test]
fn refusals_on_public_paths_are_logged_once_a_minute_clipped_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let process = crate::support::TrackerProcess::start(dir.path());
    let long_name = format!("a%0aforged%1b[2J{}", "b".repeat(7000));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..20 {
            let r = send(
                process.addr,
                &Request::get(&format!("/conversions/{long_name}/google.csv")),
            )
            .await;
            assert_eq!(r.status, 401);
            let r = send(
                process.addr,
                &Request::post(&format!("/telegram/{long_name}"), None, "{}"),
            )
            .await;
            assert_eq!(r.status, 404);
        }
    });
    let log = process.log_when(|log| {
        log.contains("conversions file refused") && log.contains("telegram update refused")
    });
    for kind in ["conversions file refused", "telegram update refused"] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(kind)).collect();
        assert_eq!(lines.len(), 1, "{kind}: {log}");
        assert!(lines[0].len() < 1024, "{kind}: {} bytes", lines[0].len());
        assert!(!lines[0].contains('\u{1b}'), "{kind}: {}", lines[0]);
    }
}
