//! Tracking links (`docs/api.md#tracking-links`): managing them, the redirect and the page,
//! previews that record nothing, durability of a visit's click, and the slug rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Barrier;
use tracker::domain::client::Cidr;
use tracker::domain::rate::Rate;

use crate::support::{
    Connection, NOW_MS, Request, Response, Space, TestServer, TrackerProcess, assert_error,
    assert_queued, send, stop_cleanly,
};

async fn create(s: &TestServer, space: &Space, body: &str) -> Response {
    s.post_as(space, "/links", body).await
}

async fn visit(s: &TestServer, target: &str, user_agent: &str) -> Response {
    s.send(&Request::get(target).header("User-Agent", user_agent))
        .await
}

const BROWSER: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) [FBAN/FBIOS]";

fn uid_of(location: &str) -> String {
    match location.rsplit_once("start=") {
        Some((_, uid)) => uid.to_owned(),
        None => panic!("no start= in {location}"),
    }
}

fn start_parameter_ok(uid: &str) -> bool {
    (1..=64).contains(&uid.len())
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The feed event of a contact sent for `uid` (shows the click the visit recorded).
async fn attribution(s: &TestServer, uid: &str) -> Value {
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let feed = s.read_as(&s.a, "/events?limit=1000").await.json();
    feed["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["uid"] == uid)
        .cloned()
        .expect("the event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_link_redirects_into_the_bot_with_a_click_that_binds() {
    let s = TestServer::start().await;
    let r = create(
        &s,
        &s.a,
        r#"{"slug":"spring","bot":"shop_bot","campaign_name":"from-link"}"#,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let link = r.json()["link"].clone();
    assert_eq!(link["url"], format!("http://127.0.0.1:8080/l/spring"));
    assert_eq!(
        (&link["bot"], &link["mode"]),
        (&json!("shop_bot"), &json!("redirect"))
    );

    let r = visit(
        &s,
        "/l/spring?fbclid=IwAR-ad-1&utm_campaign=meta%20nov&x=1",
        BROWSER,
    )
    .await;
    assert_eq!(r.status, 302);
    let location = r.header("location").unwrap().to_owned();
    assert!(
        location.starts_with("https://t.me/shop_bot?start="),
        "{location}"
    );
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    let uid = uid_of(&location);
    assert!(
        start_parameter_ok(&uid),
        "{uid} fits Telegram's start parameter"
    );
    assert!(uid.len() >= 22, "at least 128 random bits");

    let bound = s
        .post_as(&s.a, "/bind", &format!(r#"{{"uid":"{uid}","tg_id":42}}"#))
        .await
        .json();
    assert_eq!(bound, json!({"ok": true, "matched": true, "tg_id": 42}));
    let e = attribution(&s, &uid).await;
    assert_eq!(e["link_slug"], "spring");
    assert_eq!(e["fbclid"], "IwAR-ad-1");
    assert_eq!(
        e["campaign_name"], "meta nov",
        "utm_campaign wins over the link's"
    );
    assert_eq!(e["clicked_at_ms"], NOW_MS);
    assert_eq!(e["fbc"], format!("fb.1.{NOW_MS}.IwAR-ad-1"));
    assert_eq!(e["tg_id"], 42);

    // Without utm_campaign the link's campaign counts; the raw query is kept as sent.
    let r = visit(&s, "/l/spring", BROWSER).await;
    let plain = uid_of(r.header("location").unwrap());
    let e = attribution(&s, &plain).await;
    assert_eq!(e["campaign_name"], "from-link");
    assert_eq!(e["fbclid"], Value::Null);
    let clicks = s.read_as(&s.a, "/links").await.json();
    assert_eq!(clicks["links"][0]["clicks"], 2);
    assert_eq!(clicks["links"][0]["bound_clicks"], 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_link_puts_the_uid_into_its_template() {
    let s = TestServer::start().await;
    let r = create(
        &s,
        &s.a,
        r#"{"slug":"mini","target":"https://app.example.com/go?c={uid}&again={uid}"}"#,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["link"]["target"],
        "https://app.example.com/go?c={uid}&again={uid}"
    );
    let r = visit(&s, "/l/mini?fbclid=F", BROWSER).await;
    assert_eq!(r.status, 302);
    let location = r.header("location").unwrap();
    let (_, query) = location.split_once('?').unwrap();
    let uid = query.strip_prefix("c=").unwrap().split('&').next().unwrap();
    assert_eq!(
        location,
        format!("https://app.example.com/go?c={uid}&again={uid}")
    );
    let e = attribution(&s, uid).await;
    assert_eq!(
        (&e["link_slug"], &e["fbclid"]),
        (&json!("mini"), &json!("F"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_link_opens_telegram_and_shows_the_web_link_escaped_with_nothing_from_outside() {
    let s = TestServer::start().await;
    assert_eq!(
        create(&s, &s.a, r#"{"slug":"pg","bot":"Shop_Bot","mode":"page"}"#)
            .await
            .status,
        201
    );
    let r = visit(&s, "/l/pg", BROWSER).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let page = r.text();
    let start = page
        .find("https://t.me/Shop_Bot?start=")
        .expect("the web link");
    let uid: String = page[start + "https://t.me/Shop_Bot?start=".len()..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    assert!(start_parameter_ok(&uid));
    assert!(
        page.contains(&format!("tg://resolve?domain=Shop_Bot&#38;start={uid}")),
        "the tg:// link, its & escaped: {page}"
    );
    // Nothing is loaded from outside: no src, no stylesheet link, no other address.
    assert!(!page.contains(" src="), "{page}");
    assert!(!page.contains("<link"), "{page}");
    let addresses = page.matches("https://").count() + page.matches("http://").count();
    assert_eq!(addresses, 1, "only the t.me button: {page}");
    // The click is recorded like a redirect's.
    let bound = s
        .post_as(&s.a, "/bind", &format!(r#"{{"uid":"{uid}","tg_id":7}}"#))
        .await
        .json();
    assert_eq!(bound["matched"], true);

    // A target with characters that mean something in HTML is escaped on the page.
    let body = r#"{"slug":"pg2","target":"https://x.example/?a=\"<b>&u={uid}","mode":"page"}"#;
    assert_eq!(create(&s, &s.a, body).await.status, 201);
    let page = visit(&s, "/l/pg2", BROWSER).await.text();
    assert!(!page.contains("\"<b>"), "{page}");
    assert!(
        page.contains("&#34;&#60;b&#62;") || page.contains("&quot;&lt;b&gt;"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_crawlers_and_head_record_no_click_and_a_browser_does() {
    let s = TestServer::start().await;
    assert_eq!(
        create(&s, &s.a, r#"{"slug":"p","bot":"shop_bot"}"#)
            .await
            .status,
        201
    );
    for agent in [
        "TelegramBot (like TwitterBot)",
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "Facebot",
        "WhatsApp/2.23.20.0",
        "Twitterbot/1.0",
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
        "LinkedInBot/1.0",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    ] {
        let r = visit(&s, "/l/p?fbclid=x", agent).await;
        assert_eq!(r.status, 200, "{agent}");
        assert!(
            r.text().contains("https://t.me/shop_bot\""),
            "{agent}: the bot, no uid"
        );
    }
    assert!(head_status(&s, "/l/p").await.starts_with("HTTP/1.1 200"));
    assert_eq!(link_clicks(&s).await, 0, "no preview recorded a click");
    assert_eq!(visit(&s, "/l/p", BROWSER).await.status, 302);
    assert_eq!(link_clicks(&s).await, 1, "a browser does");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_agents_come_from_the_configuration() {
    let s = TestServer::start_with(|settings| {
        settings.link_preview_agents = vec!["MyChecker".into()];
        settings.public_url = "https://t.example.com".into();
    })
    .await;
    let r = create(&s, &s.a, r#"{"slug":"p","bot":"shop_bot"}"#).await;
    assert_eq!(r.json()["link"]["url"], "https://t.example.com/l/p");
    assert_eq!(visit(&s, "/l/p", "mychecker/2").await.status, 200);
    assert_eq!(
        visit(&s, "/l/p", "TelegramBot").await.status,
        302,
        "no longer listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slugs_are_unique_in_the_file_and_links_belong_to_their_space() {
    let s = TestServer::start().await;
    // The slug rule, just inside and just outside.
    for (slug, ok) in [
        ("a".to_owned(), true),
        ("a".repeat(64), true),
        ("A_z-09".to_owned(), true),
        (String::new(), false),
        ("a".repeat(65), false),
        ("a.b".to_owned(), false),
        ("a b".to_owned(), false),
    ] {
        let body = json!({"slug": slug, "bot": "shop_bot"}).to_string();
        let r = create(&s, &s.a, &body).await;
        if ok {
            assert_eq!(r.status, 201, "{slug:?}: {}", r.text());
        } else if slug.is_empty() {
            assert_error(&r, 422, "missing_field", Some("slug"));
        } else {
            assert_error(&r, 422, "invalid_field", Some("slug"));
        }
    }
    for (body, field) in [
        (r#"{"slug":"x1","bot":"abot"}"#, "bot"),
        (r#"{"slug":"x2","target":"http://x.io/{uid}"}"#, "target"),
        (r#"{"slug":"x3","bot":"shop_bot","mode":"popup"}"#, "mode"),
    ] {
        assert_error(
            &create(&s, &s.a, body).await,
            422,
            "invalid_field",
            Some(field),
        );
    }
    let r = create(&s, &s.a, r#"{"slug":"x4","bot":"shop_bot","colour":"red"}"#).await;
    assert_error(&r, 400, "invalid_json", None);

    // Taken in another space: 409, and the answer does not name the space.
    let r = create(&s, &s.b, r#"{"slug":"A_z-09","bot":"other_bot"}"#).await;
    let body = assert_error(&r, 409, "conflict", Some("slug"));
    assert_eq!(
        body["error"],
        r#"the slug "A_z-09" is taken; choose another"#
    );
    // Each space sees and deletes only its own.
    assert_eq!(s.read_as(&s.b, "/links").await.json()["links"], json!([]));
    let del = |space: &Space, slug: &str| {
        let request = Request {
            method: "DELETE",
            target: Box::leak(format!("/links/{slug}").into_boxed_str()),
            headers: vec![("Authorization", format!("Bearer {}", space.secret))],
            body: None,
        };
        let s = &s;
        async move { s.send(&request).await }
    };
    assert_error(&del(&s.b, "a").await, 404, "not_found", None);
    assert_eq!(visit(&s, "/l/a", BROWSER).await.status, 302, "still there");
    assert_eq!(del(&s.a, "a").await.status, 200);
    assert_eq!(
        del(&s.a, "a").await.status,
        200,
        "deleting again is a harmless retry"
    );
    let gone = visit(&s, "/l/a", BROWSER).await;
    assert_eq!(gone.status, 410);
    assert_eq!(visit(&s, "/l/never", BROWSER).await.status, 404);
    // A deleted slug stays taken, so an old ad never leads somewhere new.
    assert_eq!(
        create(&s, &s.a, r#"{"slug":"a","bot":"shop_bot"}"#)
            .await
            .status,
        409
    );
    let listed = s.read_as(&s.a, "/links").await.json();
    assert!(
        listed["links"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["slug"] != "a")
    );
    // Managing links needs the secret: not the ingest token, not nothing.
    let r = s
        .send(&Request::post(
            "/links",
            None,
            r#"{"slug":"n","bot":"shop_bot"}"#,
        ))
        .await;
    assert_error(&r, 401, "unauthorized", None);
    let r = s
        .send(&Request::get(&format!("/links?token={}", s.a.ingest_token)))
        .await;
    assert_error(&r, 401, "unauthorized", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_creations_of_one_slug_create_one_link() {
    let s = Arc::new(TestServer::start().await);
    let barrier = Arc::new(Barrier::new(100));
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let (s, barrier) = (s.clone(), barrier.clone());
            tokio::spawn(async move {
                let space = if i % 2 == 0 { &s.a } else { &s.b };
                let mut conn = Connection::open(s.addr).await.unwrap();
                barrier.wait().await;
                let body = format!(r#"{{"slug":"race","bot":"bot_{i}_bot"}}"#);
                conn.send(&Request::post("/links", Some(&space.secret), &body))
                    .await
                    .unwrap()
                    .status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        99,
        "{statuses:?}"
    );
}

/// A visit's click is committed before the redirect: SIGKILL under load on `/l/<slug>`, then
/// every uid a visitor was sent on with binds `matched: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redirected_click_survives_a_sigkill_under_load() {
    let dir = tempfile::tempdir().unwrap();
    // Every visitor here is 127.0.0.1: no per-address limit of clicks.
    let mut process =
        TrackerProcess::start_with_env(dir.path(), &[("TRACKER_ADDRESS_RATE_LIMIT", "0")]);
    let creds = process.created.take().expect("a first start");
    let addr = process.addr;
    let r = send(
        addr,
        &Request::post(
            "/links",
            Some(&creds.secret),
            r#"{"slug":"ad","bot":"shop_bot"}"#,
        ),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let acked = Arc::new(AtomicUsize::new(0));
    let visitors: Vec<_> = (0..16)
        .map(|v| {
            let acked = acked.clone();
            tokio::spawn(async move {
                let mut uids = Vec::new();
                let Ok(mut conn) = Connection::open(addr).await else {
                    return uids;
                };
                let started = Instant::now();
                for n in 0..2000 {
                    if started.elapsed() > Duration::from_secs(4) {
                        break;
                    }
                    let target = format!("/l/ad?fbclid=v{v}-{n}");
                    let request = Request::get(&target).header("User-Agent", BROWSER);
                    let Ok(r) = conn.send(&request).await else {
                        break;
                    };
                    if r.status != 302 {
                        break;
                    }
                    uids.push(uid_of(r.header("location").unwrap()));
                    acked.fetch_add(1, Ordering::SeqCst);
                }
                uids
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    while acked.load(Ordering::SeqCst) < 1500 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    process.kill_hard();
    let mut uids = Vec::new();
    for v in visitors {
        uids.extend(v.await.unwrap());
    }
    assert!(
        uids.len() >= 50,
        "too few redirects to prove anything: {}",
        uids.len()
    );
    let process = TrackerProcess::start(dir.path());
    let mut conn = Connection::open(process.addr).await.unwrap();
    for (i, uid) in uids.iter().enumerate() {
        let body = format!(r#"{{"uid":"{uid}","tg_id":{}}}"#, i + 1);
        let r = conn
            .send(&Request::post("/bind", Some(&creds.secret), &body))
            .await
            .unwrap();
        assert_eq!(
            r.json()["matched"],
            true,
            "click {uid} was lost: {}",
            r.text()
        );
    }
    println!(
        "link crash test: {} redirected clicks all bound after SIGKILL",
        uids.len()
    );
    stop_cleanly(process);
}

/// The clicks `GET /links` counts for space a's first link.
async fn link_clicks(s: &TestServer) -> Value {
    s.read_as(&s.a, "/links").await.json()["links"][0]["clicks"].clone()
}

/// The status line of a `HEAD` (the test client reads bodies, and a HEAD answer has none).
async fn head_status(s: &TestServer, target: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let request = format!(
        "HEAD {target} HTTP/1.1\r\nHost: x\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

/// `/l/<slug>` has no credential, so it is limited per client address; behind a reverse proxy
/// the address is the one the proxy puts in `X-Forwarded-For`, and only a trusted proxy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_visits_are_limited_per_client_address_behind_trusted_proxies_only() {
    let s = TestServer::start_with(|settings| {
        settings.address_rate_limit = Rate {
            per_second: 1,
            burst: 2,
        };
        settings.trusted_proxies = vec![Cidr::parse("127.0.0.1").unwrap()];
    })
    .await;
    assert_eq!(
        create(&s, &s.a, r#"{"slug":"ad","bot":"shop_bot"}"#)
            .await
            .status,
        201
    );
    let from = |client: &str| {
        Request::get("/l/ad")
            .header("User-Agent", BROWSER)
            .header("X-Forwarded-For", format!("198.51.100.1, {client}"))
    };
    // The test connects from 127.0.0.1, a trusted proxy: each client address has its bucket.
    assert_eq!(s.send(&from("203.0.113.1")).await.status, 302);
    assert_eq!(s.send(&from("203.0.113.1")).await.status, 302);
    let limited = s.send(&from("203.0.113.1")).await;
    assert_error(&limited, 429, "rate_limited", None);
    assert_eq!(limited.header("retry-after"), Some("1"));
    assert_eq!(s.send(&from("203.0.113.2")).await.status, 302);
    // Only the visits let through recorded a click.
    assert_eq!(link_clicks(&s).await, 3);
    s.clock.advance(1000);
    assert_eq!(s.send(&from("203.0.113.1")).await.status, 302);
    s.stop().await;

    // Untrusted, the header is ignored: every visit is the peer's, whatever it claims.
    let s = TestServer::start_with(|settings| {
        settings.address_rate_limit = Rate {
            per_second: 1,
            burst: 2,
        };
    })
    .await;
    create(&s, &s.a, r#"{"slug":"ad","bot":"shop_bot"}"#).await;
    assert_eq!(s.send(&from("203.0.113.1")).await.status, 302);
    assert_eq!(s.send(&from("203.0.113.2")).await.status, 302);
    assert_eq!(s.send(&from("203.0.113.3")).await.status, 429);
    s.stop().await;
}
