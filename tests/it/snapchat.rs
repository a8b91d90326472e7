//! Snapchat's Conversions API as a destination (`docs/api.md#snapchats-conversions-api`), sent
//! for real to a stand-in on loopback that speaks its documented protocol: a click with a
//! `ScCid` that converts arrives with its ids and a converted currency; an event older than
//! Snap's 37 days is never sent; a throttle is retried; a token it no longer takes pauses the
//! destination until a new one is given; one bad event never sinks the others of its batch.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::deliveries::{
    assert_paused, bound_click, deliveries, delivery_in, destination, listed, new_token_delivers,
    private_server, retried_no_sooner_than_60_s, three_deposits,
};
use crate::support::snapchat::SnapApi;
use crate::support::{NOW_MS, Request, TestServer, assert_queued};

const PIXEL: &str = "a3f4b5c6-d7e8-9012-3456-7890abcdef12";
const TOKEN: &str = "snap-access-token-wxyz";

/// A `snap_capi` destination of space `a` sending to `api` with `token`.
async fn snap_destination(s: &TestServer, api: &SnapApi, token: &str) -> Value {
    destination(
        s,
        &s.a,
        &json!({"name": "snap", "kind": "snap_capi", "pixel_id": PIXEL,
                "access_token": token, "api_url": api.url(),
                "currency_rates": {"XTR": "0.013 USD"}}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sccid_click_that_converts_reaches_snap_with_its_ids_and_a_converted_value() {
    let s = private_server().await;
    let api = SnapApi::start(PIXEL, TOKEN, NOW_MS).await;
    let created = snap_destination(&s, &api, TOKEN).await;
    assert_eq!(created["kind"], "snap_capi", "{created}");
    assert_eq!(created["pixel_id"], PIXEL, "{created}");
    assert_eq!(created["access_token"], "…wxyz", "{created}");
    assert!(
        !created.to_string().contains(TOKEN),
        "write-only: {created}"
    );

    let uid = bound_click(&s, "sccid", "sc-click-1", 777_000_111).await;
    let deposit = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"order-1","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    let registration = assert_queued(
        &s.post_event(&format!(r#"{{"event":"registration","uid":"{uid}"}}"#))
            .await,
    );
    // Without a ScCid, Snap cannot match it to an ad: no delivery.
    let plain = s
        .click(&s.a, r#"{"link_slug":"ad","fbclid":"IwAR-1"}"#)
        .await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{plain}"}}"#))
            .await,
    );
    delivery_in(&s, deposit, "delivered").await;
    delivery_in(&s, registration, "delivered").await;
    assert_eq!(deliveries(&s, &s.a, "?limit=1000").await.len(), 2);

    let request = &api.received()[0];
    assert_eq!(request.method, "POST");
    assert!(
        request
            .target
            .starts_with(&format!("/v3/{PIXEL}/events?access_token=")),
        "{request:?}"
    );
    let taken = api.taken();
    let paid = taken
        .iter()
        .find(|e| e["event_name"] == "PURCHASE")
        .unwrap_or_else(|| panic!("{taken:#?}"));
    assert_eq!(paid["user_data"]["sc_click_id"], "sc-click-1");
    assert_eq!(
        paid["user_data"]["external_id"],
        json!([hex::encode(Sha256::digest(b"777000111"))])
    );
    assert_eq!(paid["event_id"], "order-1");
    assert_eq!(paid["event_time"], NOW_MS / 1000);
    assert_eq!(paid["action_source"], "OFFLINE");
    assert_eq!(
        paid["custom_data"],
        json!({"value": 1.3, "currency": "USD"})
    );
    let registered = taken
        .iter()
        .find(|e| e["event_name"] == "SIGN_UP")
        .unwrap_or_else(|| panic!("{taken:#?}"));
    assert!(registered.get("custom_data").is_none(), "{registered}");
    s.stop().await;
}

/// A link visit takes `ScCid` as Snap's ads write it, and the feed shows it as `sccid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_visit_keeps_snaps_click_id() {
    let s = TestServer::start().await;
    let link = s
        .post_as(&s.a, "/links", r#"{"slug":"ad","bot":"shop_bot"}"#)
        .await;
    assert_eq!(link.status, 201, "{}", link.text());
    let r = s
        .send(&Request::get("/l/ad?ScCid=sc-visit-1&utm_source=snap"))
        .await;
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
    let events = s.list_as(&s.a, "/events?limit=1", "events").await;
    assert_eq!(events[0]["sccid"], "sc-visit-1", "{events:?}");
    s.stop().await;
}

/// 37 days less one hour is sent; an older event goes dead saying why, never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_older_than_snaps_37_days_is_never_sent() {
    let s = private_server().await;
    let api = SnapApi::start(PIXEL, TOKEN, NOW_MS).await;
    snap_destination(&s, &api, TOKEN).await;
    let uid = bound_click(&s, "sccid", "sc-click-1", 777_000_111).await;
    let day_ms = 24 * 3_600_000;
    let post = |at_ms: u64| {
        let s = &s;
        let uid = &uid;
        async move {
            assert_queued(
                &s.post_event(&format!(
                    r#"{{"event":"deposit","uid":"{uid}","eid":"d-{at_ms}","value":"1",
                        "currency":"USD","occurred_at_ms":{at_ms}}}"#
                ))
                .await,
            )
        }
    };
    let inside = post(NOW_MS - 37 * day_ms + 3_600_000).await;
    let outside = post(NOW_MS - 38 * day_ms).await;
    delivery_in(&s, inside, "delivered").await;
    let dead = delivery_in(&s, outside, "dead").await;
    assert!(
        dead["last_answer"].as_str().unwrap().contains("37 days"),
        "{dead}"
    );
    assert_eq!(api.taken().len(), 1);
    let old_id = format!("d-{}", NOW_MS - 38 * day_ms);
    assert!(
        api.received()
            .iter()
            .flat_map(crate::support::snapchat::Request::events)
            .all(|e| e["event_id"] != old_id.as_str()),
        "never put in a request"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_is_retried_no_sooner_than_60_s_later_and_then_delivered() {
    let s = private_server().await;
    let api = SnapApi::start(PIXEL, TOKEN, NOW_MS).await;
    snap_destination(&s, &api, TOKEN).await;
    let uid = bound_click(&s, "sccid", "sc-click-1", 777_000_111).await;
    api.throttle(3);
    retried_no_sooner_than_60_s(&s, &uid, "Too many requests", || api.received().len()).await;
    assert_eq!(api.taken().len(), 1);
    s.stop().await;
}

/// Snap answers `401` to a token it does not take: the destination is paused (nothing dead,
/// nothing more sent) and says why; a `PATCH` with a new token delivers what waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_pauses_and_a_new_token_delivers_everything() {
    let s = private_server().await;
    let api = SnapApi::start(PIXEL, "snap-new-token-9876", NOW_MS).await;
    snap_destination(&s, &api, TOKEN).await;
    let uid = bound_click(&s, "sccid", "sc-click-1", 777_000_111).await;
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let d = delivery_in(&s, first, "paused").await;
    assert!(
        d["last_answer"]
            .as_str()
            .unwrap()
            .contains("Invalid access token"),
        "{d}"
    );
    assert!(!d.to_string().contains(TOKEN), "never the token: {d}");
    let mut waiting = vec![first];
    waiting.extend(three_deposits(&s, &uid).await);
    s.app.as_ref().unwrap().delivery_wake.notify_waiters();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        api.received().len(),
        1,
        "a paused destination sends nothing"
    );
    assert_paused(&s, "Invalid access token", 4).await;
    new_token_delivers(&s, "snap", "snap-new-token-9876", &waiting).await;
    assert_eq!(listed(&s).await[0]["deliveries"]["delivered"], 4);
    assert_eq!(api.taken().len(), 4);
    s.stop().await;
}

/// A request Snap refuses (naming no event) is searched by halves: the bad event goes dead
/// with Snap's reason, the others of its batch are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_event_never_sinks_its_batch() {
    let s = private_server().await;
    let api = SnapApi::start(PIXEL, "snap-right-token-1234", NOW_MS).await;
    snap_destination(&s, &api, TOKEN).await;
    api.refuse_event("p-1");
    let uid = bound_click(&s, "sccid", "sc-click-1", 777_000_111).await;
    let first = assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    delivery_in(&s, first, "paused").await;
    let deposits = three_deposits(&s, &uid).await;
    new_token_delivers(
        &s,
        "snap",
        "snap-right-token-1234",
        &[first, deposits[0], deposits[2]],
    )
    .await;
    let dead = delivery_in(&s, deposits[1], "dead").await;
    assert!(
        dead["last_answer"]
            .as_str()
            .unwrap()
            .contains("Invalid custom_data.value"),
        "{dead}"
    );
    assert_eq!(api.taken().len(), 3);
    s.stop().await;
}
