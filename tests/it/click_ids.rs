//! The ids a click carries besides `fbclid` (`docs/api.md#post-clicks`): `TikTok`'s `ttclid`,
//! Google's `gclid`, `gbraid` and `wbraid` from a link visit's query or `POST /clicks`, Meta's
//! browser id `fbp` and a prelander's hints (`fbc`, `client_ip`, `user_agent`) from `POST
//! /clicks`; each bound just inside and just outside, each shown with the click's events, and
//! what Meta is sent of them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::receiver::Receiver;
use crate::support::{NOW_MS, Request, TestServer, assert_error, assert_queued};

/// The feed's newest event of space `a`.
async fn newest_event(s: &TestServer) -> Value {
    let feed = s.read_as(&s.a, "/events").await.json();
    feed["events"].as_array().unwrap().last().unwrap().clone()
}

/// Each click id is bounded as `fbclid` is (512 characters), `fbp` and `fbc` are Meta's
/// cookies (`fb.` and visible ASCII, at most 256 and 600), `client_ip` an address and
/// `user_agent` at most 512 characters; a value out of bounds is refused naming its field and
/// stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_click_fields_are_bounded() {
    let s = TestServer::start().await;
    let cookie = |len: usize| format!("fb.1.{}", "7".repeat(len - 5));
    let cases: [(&str, String, String); 9] = [
        ("ttclid", "t".repeat(512), "t".repeat(513)),
        ("sccid", "s".repeat(512), "s".repeat(513)),
        ("gclid", "g".repeat(512), "g".repeat(513)),
        ("gbraid", "b".repeat(512), "b".repeat(513)),
        ("wbraid", "w".repeat(512), "w".repeat(513)),
        ("fbp", cookie(256), cookie(257)),
        ("fbc", cookie(600), cookie(601)),
        ("client_ip", "2001:db8::1".into(), "2001:db8::g".into()),
        ("user_agent", "é".repeat(512), "é".repeat(513)),
    ];
    for (field, inside, outside) in cases {
        let r = s
            .post_as(&s.a, "/clicks", &json!({ field: inside }).to_string())
            .await;
        assert_eq!(r.status, 200, "{field} just inside: {}", r.text());
        let r = s
            .post_as(&s.a, "/clicks", &json!({ field: outside }).to_string())
            .await;
        let body = assert_error(&r, 422, "invalid_field", Some(field));
        assert!(body["error"].as_str().unwrap().contains(field), "{body}");
        let r = s
            .post_as(&s.a, "/clicks", &json!({ field: 7 }).to_string())
            .await;
        assert_error(&r, 400, "invalid_json", Some(field));
    }
    for bad in ["fb1.2.3", "FB.1.2", "fb.1.2 3"] {
        let r = s
            .post_as(&s.a, "/clicks", &json!({ "fbp": bad }).to_string())
            .await;
        assert_error(&r, 422, "invalid_field", Some("fbp"));
    }
    let (_, tables) = s.store.usage().await.unwrap();
    let clicks = tables.iter().find(|t| t.table == "clicks").unwrap().entries;
    assert_eq!(clicks, 9, "only the ones inside");
    s.stop().await;
}

/// A back-filled click's ids are shown with its events, in the feed and so in exports; a click
/// without them shows `null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_back_filled_clicks_ids_are_shown_with_its_events() {
    let s = TestServer::start().await;
    let uid = s
        .click(
            &s.a,
            r#"{"ttclid":"E.C.P.tt-1","gclid":"Cj0-g","gbraid":"0AA-b","wbraid":"Cl-w",
                "fbp":"fb.1.1700000000000.123456789"}"#,
        )
        .await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let e = newest_event(&s).await;
    assert_eq!(
        [
            &e["ttclid"],
            &e["gclid"],
            &e["gbraid"],
            &e["wbraid"],
            &e["fbp"]
        ],
        [
            "E.C.P.tt-1",
            "Cj0-g",
            "0AA-b",
            "Cl-w",
            "fb.1.1700000000000.123456789"
        ]
    );
    let plain = s.click(&s.a, r#"{"link_slug":"x"}"#).await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{plain}"}}"#))
            .await,
    );
    let e = newest_event(&s).await;
    for field in ["ttclid", "gclid", "gbraid", "wbraid", "fbp"] {
        assert_eq!(e[field], Value::Null, "{field}: {e}");
    }
    s.stop().await;
}

/// A link visit takes the click ids from its query into the click's fields (not its stored
/// query), up to the bound; a longer one stays in the query only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_visit_takes_the_click_ids_from_its_query() {
    let s = TestServer::start().await;
    let link = s
        .post_as(&s.a, "/links", r#"{"slug":"ad","bot":"shop_bot"}"#)
        .await;
    assert_eq!(link.status, 201, "{}", link.text());
    let visit = |query: String| {
        let s = &s;
        async move {
            let target = format!("/l/ad?{query}");
            let r = s.send(&Request::get(&target)).await;
            assert_eq!(r.status, 302, "{}", r.text());
            let uid = r
                .header("location")
                .unwrap()
                .rsplit_once("start=")
                .unwrap()
                .1
                .to_owned();
            assert_queued(
                &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
                    .await,
            );
            newest_event(s).await
        }
    };
    let e = visit("gclid=Cj0KCQ&utm_source=google&ttclid=E.C.P&gbraid=0AA&wbraid=Cl".into()).await;
    assert_eq!(
        [&e["gclid"], &e["ttclid"], &e["gbraid"], &e["wbraid"]],
        ["Cj0KCQ", "E.C.P", "0AA", "Cl"]
    );
    assert_eq!(e["link_slug"], "ad");
    let inside = "g".repeat(512);
    let e = visit(format!("gclid={inside}")).await;
    assert_eq!(e["gclid"], json!(inside));
    let e = visit(format!("gclid={inside}g")).await;
    assert_eq!(e["gclid"], Value::Null, "over the bound: dropped, not cut");
    s.stop().await;
}

/// Meta is sent the click's `fbp`, and, where the space keeps hints, the prelander's `fbc`
/// (instead of the one made from the fbclid), address and user agent; where it does not, none
/// of the hints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_gets_the_prelanders_cookies_and_hints() {
    let s = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = Duration::from_millis(500);
    })
    .await;
    let meta = Receiver::meta(NOW_MS).await;
    let made = s
        .post_as(
            &s.a,
            "/destinations",
            &json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1",
                    "access_token": "t-1234", "graph_url": meta.url("")})
            .to_string(),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text());
    // A click per visitor: each its own fbclid (one already known answers its first click).
    let prelander = |n: usize| {
        format!(
            r#"{{"fbclid":"IwAR-p{n}","fbp":"fb.1.1700000000000.42",
                "fbc":"fb.1.1699999999999.IwAR-p{n}","client_ip":"81.2.69.160",
                "user_agent":"UA/1"}}"#
        )
    };
    let send = |n: usize| {
        let (s, meta) = (&s, &meta);
        async move {
            let uid = s.click(&s.a, &prelander(n)).await;
            assert_queued(
                &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
                    .await,
            );
            meta.wait_for(n, Duration::from_secs(20)).await;
            s.app.as_ref().unwrap().delivery_wake.notify_waiters();
            meta.received()[n - 1].json()["data"][0]["user_data"].clone()
        }
    };
    let off = send(1).await;
    assert_eq!(off["fbp"], "fb.1.1700000000000.42", "{off}");
    assert_eq!(off["fbc"], format!("fb.1.{NOW_MS}.IwAR-p1"), "{off}");
    assert!(off.get("client_ip_address").is_none(), "{off}");
    assert!(off.get("client_user_agent").is_none(), "{off}");

    let patch = s
        .patch_as(&s.a, "/space", r#"{"meta_client_hints":true}"#)
        .await;
    assert_eq!(patch.status, 200);
    let on = send(2).await;
    assert_eq!(on["fbp"], "fb.1.1700000000000.42", "{on}");
    assert_eq!(on["fbc"], "fb.1.1699999999999.IwAR-p2", "{on}");
    assert_eq!(on["client_ip_address"], "81.2.69.160", "{on}");
    assert_eq!(on["client_user_agent"], "UA/1", "{on}");
    s.stop().await;
}
