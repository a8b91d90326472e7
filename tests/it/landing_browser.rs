//! A landing page of the marketer's own in a real browser (headless Chromium, driven as the
//! admin page's browser test drives it): a page served from another origin, by a second HTTP
//! server on loopback, with the script (`/t.js`) and Meta's `_fbp` cookie. Its view is counted;
//! the same page from an origin the link does not allow counts none; its Telegram button leads
//! through `/l/` into `t.me/<bot>?start=<uid>`, another link of the page is left alone, and a
//! later deposit of that click carries the page's `fbclid` and the cookies' `fbp`, in the feed
//! and at Meta's stand-in (`support/receiver.rs`), with the `_fbc` cookie as `fbc`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracker::domain::rate::Rate;

use crate::admin_browser::{browser, browser_installed, start_driver};
use crate::support::receiver::Receiver;
use crate::support::{NOW_MS, TestServer, assert_queued};

const FBP: &str = "fb.1.1700000000000.424242";
/// Meta's pixel's click cookie, as it writes it from the ad's `fbclid`.
const FBC: &str = "fb.1.1700000000001.IwAR-browser-1";

/// The landing page, as a page builder would publish it: Meta's pixel's cookies, a Telegram
/// button, another link, and the one line.
fn page(tracker: SocketAddr) -> String {
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>Spring</title>
<script>document.cookie = "_fbp={FBP}; path=/"; document.cookie = "_fbc={FBC}; path=/";</script>
</head><body>
<a id="go" href="https://t.me/shop_bot">Open in Telegram</a>
<a id="other" href="https://example.org/terms">Terms</a>
<script src="http://{tracker}/t.js" data-link="spring" defer></script>
</body></html>"#
    )
}

/// A plain HTTP server on loopback that answers every request with `body` as HTML.
async fn landing_server(body: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

/// The link's views and clicks, once `ready` holds of them (or the deadline passes).
async fn counts_when(s: &TestServer, ready: impl Fn(u64, u64) -> bool) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let links = s.list_as(&s.a, "/links", "links").await;
        let counts = (
            links[0]["views"].as_u64().unwrap(),
            links[0]["clicks"].as_u64().unwrap(),
        );
        if ready(counts.0, counts.1) || Instant::now() > deadline {
            return counts;
        }
        // Waiting for the browser, another program; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_landing_page_counts_its_view_and_its_button_leads_into_the_bot() {
    if !browser_installed() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium could not be installed: the landing page was NOT tested in a browser"
        );
        return;
    }
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.address_rate_limit = Rate {
            per_second: 0,
            burst: 0,
        };
    })
    .await;
    // Meta's stand-in as the space's destination; with visitors' hints kept, the click's own
    // `fbc` (the page's cookie) is sent rather than one made from the `fbclid`.
    let meta = Receiver::meta(NOW_MS).await;
    let destination = json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1",
        "access_token": "t-1234", "graph_url": meta.url("")});
    let r = s
        .post_as(&s.a, "/destinations", &destination.to_string())
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s
        .patch_as(&s.a, "/space", r#"{"meta_client_hints":true}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let landing = landing_server(page(s.addr)).await;
    let allowed = format!("http://127.0.0.1:{}", landing.port());
    let link = json!({"slug": "spring", "bot": "shop_bot", "allowed_origins": [allowed]});
    let r = s.post_as(&s.a, "/links", &link.to_string()).await;
    assert_eq!(r.status, 201, "{}", r.text());

    let (_driver, port) = start_driver();
    let profile = tempfile::tempdir().unwrap();
    let browser = browser(port, profile.path()).await;
    // The same page from an origin the link does not allow: its view is refused.
    let elsewhere = format!("http://localhost:{}/spring", landing.port());
    browser.goto(&elsewhere).await.unwrap();
    let query = "fbclid=IwAR-browser-1&utm_campaign=spring-sale&utm_source=fb";
    browser
        .goto(&format!("{allowed}/spring?{query}"))
        .await
        .unwrap();
    assert_eq!(counts_when(&s, |views, _| views >= 1).await, (1, 0));

    let go = browser.find(Locator::Css("#go")).await.unwrap();
    let href = go.attr("href").await.unwrap().unwrap_or_default();
    let expected = format!("http://{}/l/spring?fbclid=IwAR-browser-1", s.addr);
    assert!(href.starts_with(&expected), "{href}");
    for part in [
        "utm_campaign=spring-sale",
        "fbp=fb.1.1700000000000.424242",
        "fbc=fb.1.1700000000001.IwAR-browser-1",
        "page=",
    ] {
        assert!(href.contains(part), "{part} in {href}");
    }
    let other = browser.find(Locator::Css("#other")).await.unwrap();
    assert_eq!(
        other.attr("href").await.unwrap().as_deref(),
        Some("https://example.org/terms")
    );
    go.click().await.unwrap();
    assert_eq!(counts_when(&s, |_, clicks| clicks >= 1).await, (1, 1));
    // Telegram cannot be reached from here: the browser stops at the address it was sent to.
    let deadline = Instant::now() + Duration::from_secs(20);
    let sent_to = loop {
        let url = browser.current_url().await.unwrap().to_string();
        if url.starts_with("https://t.me/") || Instant::now() > deadline {
            break url;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let uid = sent_to
        .strip_prefix("https://t.me/shop_bot?start=")
        .unwrap_or_else(|| panic!("the button led to {sent_to}"));
    let deposit = format!(r#"{{"event":"deposit","uid":"{uid}","value":"20"}}"#);
    assert_queued(&s.post_event(&deposit).await);
    let events = s.list_as(&s.a, "/events", "events").await;
    assert_eq!(events[0]["fbclid"], "IwAR-browser-1", "{}", events[0]);
    assert_eq!(events[0]["fbp"], FBP);
    assert_eq!(events[0]["campaign_name"], "spring-sale");
    let sent = meta.wait_for(1, Duration::from_secs(20)).await;
    let user_data = &sent[0].json()["data"][0]["user_data"];
    assert_eq!(user_data["fbp"], FBP, "{user_data}");
    assert_eq!(user_data["fbc"], FBC, "{user_data}");
    fantoccini::Client::clone(&browser).close().await.unwrap();
}
