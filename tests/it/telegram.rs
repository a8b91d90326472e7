//! Events by Telegram id (`docs/api.md#attribution`): an event that names the user (`tg_id`,
//! `tg`) and no click is attributed to the user's first or last bound click, as the space's
//! `attribution` setting says when it is written; the feed, stats and exports show that click;
//! deduplication keys such events by the Telegram id; and the space's settings are read and
//! changed through `GET`/`PATCH /space`, `tracker space set` and `space list`.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::support::{
    DAY_MS, NOW_MS, Request, Response, TestServer, TrackerProcess, assert_duplicate_of,
    assert_error, assert_queued, assert_succeeded, dedup_entries_derived, event_answer,
    first_start, post_json, run_cli, send, stop_cleanly,
};

const HOUR_MS: u64 = 3_600_000;
/// The user of these tests.
const USER: u64 = 123_456;

/// Three clicks of campaigns `c-early`, `c-middle` and `c-late`, bound to [`USER`] an hour apart
/// in that order, though made in another order; answers their uids in binding order.
async fn three_bound_clicks(s: &TestServer) -> [String; 3] {
    let late = s.click(&s.a, r#"{"campaign_name":"c-late"}"#).await;
    let early = s.click(&s.a, r#"{"campaign_name":"c-early"}"#).await;
    let middle = s.click(&s.a, r#"{"campaign_name":"c-middle"}"#).await;
    for uid in [&early, &middle, &late] {
        let r = s.bind(&s.a, uid, USER).await;
        assert_eq!(r.json()["tg_id"], json!(USER), "{}", r.text());
        s.clock.advance(HOUR_MS);
    }
    [early, middle, late]
}

/// `PATCH /space` as space `a`.
async fn patch(s: &TestServer, body: &str) -> Response {
    s.patch_as(&s.a, "/space", body).await
}

/// `PATCH /space` as space `a`, which must succeed; answers the JSON.
async fn patch_space(s: &TestServer, body: &str) -> Value {
    let r = patch(s, body).await;
    assert_eq!(r.status, 200, "PATCH /space {body}: {}", r.text());
    r.json()
}

/// The space's feed, oldest first.
async fn feed(s: &TestServer) -> Vec<Value> {
    let page = s.read_as(&s.a, "/events?limit=1000").await.json();
    page["events"].as_array().cloned().unwrap_or_default()
}

/// The feed event with `inbox_id`.
async fn feed_event(s: &TestServer, inbox_id: u64) -> Value {
    feed(s)
        .await
        .into_iter()
        .find(|e| e["inbox_id"] == json!(inbox_id.to_string()))
        .unwrap_or_else(|| panic!("no event {inbox_id} in the feed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_and_last_touch_are_the_first_and_last_bound_clicks() {
    let s = TestServer::start().await;
    let [early, middle, late] = three_bound_clicks(&s).await;
    assert_ne!(middle, early);
    // first_touch, the default: the click bound first.
    let r = s
        .post_event(&format!(r#"{{"event":"contact","tg_id":{USER}}}"#))
        .await;
    let body = r.json();
    assert_eq!(
        (&body["matched"], &body["attributed_by"], &body["dedup"]),
        (&json!(true), &json!("tg_id"), &json!("milestone")),
        "{body}"
    );
    let contact = event_answer(&r).inbox_id;
    let e = feed_event(&s, contact).await;
    assert_eq!(
        (
            &e["uid"],
            &e["tg_id"],
            &e["attributed_by"],
            &e["campaign_name"]
        ),
        (
            &json!(early),
            &json!(USER),
            &json!("tg_id"),
            &json!("c-early")
        ),
        "{e}"
    );
    // last_touch: the click bound last. By GET /e, with the id as `tg`.
    let set = patch_space(&s, r#"{"attribution":"last_touch"}"#).await;
    assert_eq!(
        set,
        json!({"ok": true, "space": "a", "settings": {"attribution": "last_touch", "meta_client_hints": false, "time_zone": "UTC", "telegram_bot_token": "", "meta_ads_account": "", "meta_ads_token": "", "meta_graph_url": "https://graph.facebook.com", "meta_graph_version": "", "reporting_currency": "", "currency_rates": {}, "watched_bot_tokens": [], "alert_telegram_chat": "", "alert_webhook_url": "", "alert_webhook_secret": "", "ecb_rates_url": ""}})
    );
    let r = s.get_e(&format!("event=registration&tg={USER}")).await;
    assert_eq!(r.json()["attributed_by"], "tg_id", "{}", r.text());
    let e = feed_event(&s, event_answer(&r).inbox_id).await;
    assert_eq!(
        (&e["uid"], &e["campaign_name"], &e["source"]),
        (&json!(late), &json!("c-late"), &json!("get")),
        "{e}"
    );
    // What was written stays as it was attributed.
    assert_eq!(feed_event(&s, contact).await["uid"], json!(early));
    // A binding later than all: the new last.
    let newest = s.click(&s.a, r#"{"campaign_name":"c-newest"}"#).await;
    s.bind(&s.a, &newest, USER).await;
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","tg_id":"{USER}","value":"9.50"}}"#
        ))
        .await;
    assert_eq!(
        feed_event(&s, event_answer(&r).inbox_id).await["uid"],
        json!(newest)
    );

    // Stats count each event under the campaign of the click it went to.
    let stats = s.read_as(&s.a, "/stats?by=campaign_name").await.json();
    let group = |name: &str| {
        stats["groups"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["group"] == json!(name)).cloned())
            .unwrap_or_else(|| panic!("no group {name}: {stats}"))
    };
    assert_eq!(group("c-early")["events"]["contact"], 1, "{stats}");
    assert_eq!(group("c-late")["events"]["registration"], 1, "{stats}");
    assert_eq!(
        group("c-newest")["deposits"],
        json!({"USD": "9.50"}),
        "{stats}"
    );
    assert_eq!(
        group("c-middle")["events"],
        json!({"contact": 0, "subscribed": 0, "registration": 0, "deposit": 0})
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_bound_click_is_stored_unmatched_with_the_tg_id() {
    let s = TestServer::start().await;
    // Bound in another space only: nothing crosses spaces.
    let other = s.click(&s.b, "{}").await;
    s.bind(&s.b, &other, 999).await;
    let r = s
        .post_event(r#"{"event":"deposit","tg_id":999,"value":3}"#)
        .await;
    let body = r.json();
    assert_eq!(
        (&body["status"], &body["matched"], &body["attributed_by"]),
        (&json!("queued"), &json!(false), &Value::Null),
        "{body}"
    );
    let e = feed_event(&s, event_answer(&r).inbox_id).await;
    assert_eq!(
        (&e["uid"], &e["tg_id"], &e["attributed_by"], &e["matched"]),
        (&Value::Null, &json!(999), &Value::Null, &json!(false)),
        "{e}"
    );
    // Counted under no campaign.
    let stats = s.read_as(&s.a, "/stats").await.json();
    assert_eq!(stats["groups"][0]["group"], Value::Null, "{stats}");
    assert_eq!(
        stats["groups"][0]["deposits"],
        json!({"USD": "3"}),
        "{stats}"
    );
    // A dry run says the same, and stores nothing.
    let dry = s
        .post_event(r#"{"event":"contact","tg_id":999,"dry_run":true}"#)
        .await
        .json();
    assert_eq!(
        (&dry["matched"], &dry["attributed_by"]),
        (&json!(false), &Value::Null)
    );
    assert_eq!(feed(&s).await.len(), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_both_the_uid_decides_and_the_tg_id_is_kept() {
    let s = TestServer::start().await;
    let [early, _, late] = three_bound_clicks(&s).await;
    let own = s.click(&s.a, r#"{"campaign_name":"c-own"}"#).await;
    let r = s
        .post_event(&format!(
            r#"{{"event":"contact","uid":"{own}","tg_id":{USER}}}"#
        ))
        .await;
    let body = r.json();
    assert_eq!(
        (&body["attributed_by"], &body["dedup"]),
        (&json!("uid"), &json!("milestone"))
    );
    let e = feed_event(&s, event_answer(&r).inbox_id).await;
    assert_eq!(
        (&e["uid"], &e["tg_id"], &e["campaign_name"]),
        (&json!(own), &json!(USER), &json!("c-own")),
        "{e}"
    );
    // The key is the uid's: the same milestone by the uid alone is its duplicate, and one by
    // the Telegram id alone is not.
    assert_duplicate_of(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{own}"}}"#))
            .await,
        event_answer(&r).inbox_id,
    );
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","tg_id":{USER}}}"#))
            .await,
    );
    // A uid that names no click still decides: unmatched, not the user's clicks.
    let r = s
        .post_event(&format!(
            r#"{{"event":"subscribed","uid":"nobody","tg_id":{USER}}}"#
        ))
        .await;
    assert_eq!(
        (
            r.json()["matched"].clone(),
            r.json()["attributed_by"].clone()
        ),
        (json!(false), Value::Null)
    );
    let e = feed_event(&s, event_answer(&r).inbox_id).await;
    assert_eq!(
        (&e["uid"], &e["tg_id"]),
        (&json!("nobody"), &json!(USER)),
        "{e}"
    );
    assert!(e["uid"] != json!(early) && e["uid"] != json!(late));
    s.stop().await;
}

/// Each event uses the setting in force when it is written: events sent while the setting
/// changes are, in commit order, all first-touch up to the change and all last-touch after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_uses_the_setting_in_force_when_it_is_written() {
    const EVENTS: usize = 60;
    let s = TestServer::start().await;
    let [early, _, late] = three_bound_clicks(&s).await;
    // One at a time, the setting switched between them.
    for (setting, want) in [
        ("last_touch", &late),
        ("first_touch", &early),
        ("last_touch", &late),
    ] {
        patch_space(&s, &format!(r#"{{"attribution":"{setting}"}}"#)).await;
        let r = s
            .post_event(&format!(
                r#"{{"event":"deposit","tg_id":{USER},"eid":"one-{setting}-{want}"}}"#
            ))
            .await;
        assert_eq!(
            &feed_event(&s, event_answer(&r).inbox_id).await["uid"],
            &json!(want)
        );
    }
    patch_space(&s, r#"{"attribution":"first_touch"}"#).await;
    let before = feed(&s).await.len();
    // Then many at once, with a change among them.
    let barrier = Arc::new(Barrier::new(EVENTS + 1));
    let mut tasks = Vec::new();
    for i in 0..EVENTS {
        let (addr, secret, barrier) = (s.addr, s.a.secret.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!(r#"{{"event":"deposit","tg_id":{USER},"eid":"many-{i}"}}"#);
            barrier.wait().await;
            send(addr, &Request::post("/events", Some(&secret), &body)).await
        }));
    }
    let change = {
        let (addr, secret, barrier) = (s.addr, s.a.secret.clone(), barrier.clone());
        tokio::spawn(async move {
            let request =
                Request::patch("/space", Some(&secret), r#"{"attribution":"last_touch"}"#);
            barrier.wait().await;
            tokio::task::yield_now().await;
            send(addr, &request).await
        })
    };
    for t in tasks {
        assert_queued(&t.await.unwrap());
    }
    assert_eq!(change.await.unwrap().status, 200);
    let uids: Vec<Value> = feed(&s).await[before..]
        .iter()
        .map(|e| e["uid"].clone())
        .collect();
    assert_eq!(uids.len(), EVENTS);
    let switch = uids
        .iter()
        .position(|u| *u == json!(late))
        .unwrap_or(EVENTS);
    assert!(
        uids[..switch].iter().all(|u| *u == json!(early))
            && uids[switch..].iter().all(|u| *u == json!(late)),
        "first touch, then last touch, in commit order: {uids:?}"
    );
    // After the change's answer, every event is last-touch.
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","tg_id":{USER},"eid":"after"}}"#
        ))
        .await;
    assert_eq!(
        feed_event(&s, event_answer(&r).inbox_id).await["uid"],
        json!(late)
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_ids_milestones_count_once_per_kind() {
    let s = TestServer::start().await;
    three_bound_clicks(&s).await;
    for tg in [USER, 555] {
        let first = event_answer(
            &s.post_event(&format!(r#"{{"event":"contact","tg_id":{tg}}}"#))
                .await,
        );
        assert_eq!(
            (first.duplicate, first.dedup.as_str()),
            (false, "milestone")
        );
        // By GET, later, with the other spelling: the same milestone.
        s.clock.advance(30 * DAY_MS);
        assert_duplicate_of(
            &s.get_e(&format!("event=contact&tg={tg}")).await,
            first.inbox_id,
        );
        assert_duplicate_of(
            &s.post_event(&format!(r#"{{"event":"contact","tg_id":"{tg}"}}"#))
                .await,
            first.inbox_id,
        );
        assert_queued(
            &s.post_event(&format!(r#"{{"event":"registration","tg_id":{tg}}}"#))
                .await,
        );
    }
    // Another user, and another space, are other keys.
    assert_queued(&s.post_event(r#"{"event":"contact","tg_id":556}"#).await);
    assert_queued(
        &s.post_as(&s.b, "/events", r#"{"event":"contact","tg_id":555}"#)
            .await,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_ids_deposits_are_fingerprinted_with_and_without_a_time() {
    let window = DAY_MS;
    let s = TestServer::start().await;
    // With a supplied time: permanent, and per time.
    let at = NOW_MS - HOUR_MS;
    let timed =
        format!(r#"{{"event":"deposit","tg_id":{USER},"value":"7.00","occurred_at_ms":{at}}}"#);
    let first = event_answer(&s.post_event(&timed).await);
    assert_eq!(
        (first.duplicate, first.dedup.as_str()),
        (false, "fingerprint")
    );
    assert_duplicate_of(
        &s.get_e(&format!("event=deposit&tg={USER}&value=7&t={at}"))
            .await,
        first.inbox_id,
    );
    assert_queued(
        &s.post_event(&timed.replace(&at.to_string(), &(at + 1).to_string()))
            .await,
    );
    // Without one: a duplicate within the window only, measured from the accepted one.
    let untimed = format!(r#"{{"event":"deposit","tg_id":{USER},"value":"7"}}"#);
    let accepted = assert_queued(&s.post_event(&untimed).await);
    s.clock.advance(window - 1);
    assert_duplicate_of(&s.post_event(&untimed).await, accepted);
    s.clock.advance(1);
    let next = assert_queued(&s.post_event(&untimed).await);
    // The timed one stays a duplicate after the window.
    assert_duplicate_of(&s.post_event(&timed).await, first.inbox_id);
    // Another amount or currency is another deposit.
    assert_queued(&s.post_event(&untimed.replace("\"7\"", "\"8\"")).await);
    assert_duplicate_of(&s.post_event(&untimed).await, next);
    s.stop().await;
}

/// Sends `body` to `POST /events` from 100 connections at once.
async fn hundred_at_once(s: &TestServer, body: &str) -> Vec<Response> {
    let barrier = Arc::new(Barrier::new(100));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (addr, secret, barrier, body) =
                (s.addr, s.a.secret.clone(), barrier.clone(), body.to_owned());
            tokio::spawn(async move {
                let mut conn = crate::support::Connection::open(addr)
                    .await
                    .expect("connect");
                barrier.wait().await;
                conn.send(&Request::post("/events", Some(&secret), &body))
                    .await
                    .expect("response")
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_identical_events_by_telegram_id_store_one() {
    let s = TestServer::start().await;
    three_bound_clicks(&s).await;
    for body in [
        format!(r#"{{"event":"subscribed","tg_id":{USER}}}"#),
        format!(r#"{{"event":"deposit","tg_id":{USER},"value":"4.50"}}"#),
    ] {
        let answers: Vec<_> = hundred_at_once(&s, &body)
            .await
            .iter()
            .map(event_answer)
            .collect();
        let queued = answers.iter().filter(|a| !a.duplicate).count();
        let ids: std::collections::BTreeSet<u64> = answers.iter().map(|a| a.inbox_id).collect();
        assert_eq!((queued, ids.len()), (1, 1), "{body}: {answers:?}");
        assert!(answers.iter().all(|a| a.matched), "{answers:?}");
    }
    assert_eq!(feed(&s).await.len(), 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_space_endpoint_reads_and_changes_settings() {
    let s = TestServer::start().await;
    let r = s.read_as(&s.a, "/space").await;
    assert_eq!(
        r.json(),
        json!({"ok": true, "space": "a", "settings": {"attribution": "first_touch", "meta_client_hints": false, "time_zone": "UTC", "telegram_bot_token": "", "meta_ads_account": "", "meta_ads_token": "", "meta_graph_url": "https://graph.facebook.com", "meta_graph_version": "", "reporting_currency": "", "currency_rates": {}, "watched_bot_tokens": [], "alert_telegram_chat": "", "alert_webhook_url": "", "alert_webhook_secret": "", "ecb_rates_url": ""}})
    );
    assert_eq!(s.read_as(&s.b, "/space").await.json()["space"], json!("b"));
    let patch = |body| patch(&s, body);
    let r = patch(r#"{"attribution":"sometimes"}"#).await;
    let body = assert_error(&r, 422, "invalid_field", Some("attribution"));
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("first_touch or last_touch"),
        "{body}"
    );
    assert_error(
        &patch(r#"{"atribution":"last_touch"}"#).await,
        400,
        "invalid_json",
        None,
    );
    assert_error(
        &patch(r#"{"attribution":7}"#).await,
        400,
        "invalid_json",
        Some("attribution"),
    );
    assert_error(
        &patch(r#"{"attribution":"last_touch","attribution":"first_touch"}"#).await,
        400,
        "invalid_json",
        None,
    );
    // Refusals changed nothing; an empty body changes nothing and answers the settings.
    assert_eq!(
        patch("{}").await.json()["settings"]["attribution"],
        "first_touch"
    );
    assert_eq!(patch(r#"{"attribution":"last_touch"}"#).await.status, 200);
    // Each space its own; it survives a restart.
    assert_eq!(
        s.read_as(&s.b, "/space").await.json()["settings"]["attribution"],
        "first_touch"
    );
    let s = s.restart().await;
    assert_eq!(
        s.read_as(&s.a, "/space").await.json()["settings"]["attribution"],
        "last_touch"
    );
    // The ingest token is not the secret.
    let r = s.get_as(&s.a, "/space", "").await;
    assert_error(&r, 401, "unauthorized", None);
    s.stop().await;
}

/// `tracker space set` and `space list`, through a running server's socket and on the file.
#[test]
fn the_command_line_sets_and_lists_a_spaces_settings() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let (process, creds) = first_start(dir.path());
    let cli = |args: &[&str]| run_cli(dir.path(), &data, args);
    let out = cli(&["space", "set", "default", "attribution=last_touch"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_succeeded(&out);
    assert_eq!(
        stdout.trim(),
        "space default: attribution=last_touch meta_client_hints=false time_zone=UTC telegram_bot_token= meta_ads_account= meta_ads_token= meta_graph_url=https://graph.facebook.com meta_graph_version= reporting_currency= currency_rates= watched_bot_tokens= alert_telegram_chat= alert_webhook_url= alert_webhook_secret= ecb_rates_url="
    );
    // In force at once for the server.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let space = runtime.block_on(send(
        process.addr,
        &Request::get("/space").header("Authorization", format!("Bearer {}", creds.secret)),
    ));
    assert_eq!(space.json()["settings"]["attribution"], "last_touch");
    for (args, says) in [
        (
            &["space", "set", "default", "attribution=sometimes"][..],
            "first_touch or last_touch",
        ),
        (&["space", "set", "default", "colour=red"][..], "no setting"),
        (
            &["space", "set", "default", "attribution"][..],
            "name=value",
        ),
        (
            &["space", "set", "nowhere", "attribution=last_touch"][..],
            "no space",
        ),
    ] {
        let out = cli(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = cli(&["space", "set", "default"]);
    assert_eq!(out.status.code(), Some(2), "a setting is required");
    let list = cli(&["--json", "space", "list"]);
    let spaces: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        spaces[0]["settings"],
        json!({"attribution": "last_touch", "meta_client_hints": false, "time_zone": "UTC", "telegram_bot_token": "", "meta_ads_account": "", "meta_ads_token": "", "meta_graph_url": "https://graph.facebook.com", "meta_graph_version": "", "reporting_currency": "", "currency_rates": {}, "watched_bot_tokens": [], "alert_telegram_chat": "", "alert_webhook_url": "", "alert_webhook_secret": "", "ecb_rates_url": ""}),
        "{spaces}"
    );
    stop_cleanly(process);
    // Without a server, on the file.
    let out = cli(&[
        "--json",
        "space",
        "set",
        "default",
        "attribution=first_touch",
    ]);
    let set: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        set,
        json!({"space": "default", "settings": {"attribution": "first_touch", "meta_client_hints": false, "time_zone": "UTC", "telegram_bot_token": "", "meta_ads_account": "", "meta_ads_token": "", "meta_graph_url": "https://graph.facebook.com", "meta_graph_version": "", "reporting_currency": "", "currency_rates": {}, "watched_bot_tokens": [], "alert_telegram_chat": "", "alert_webhook_url": "", "alert_webhook_secret": "", "ecb_rates_url": ""}})
    );
    // The time zone: an IANA name, or refused naming the setting.
    let out = cli(&["space", "set", "default", "time_zone=Asia/Kathmandu"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "space default: attribution=first_touch meta_client_hints=false time_zone=Asia/Kathmandu telegram_bot_token= meta_ads_account= meta_ads_token= meta_graph_url=https://graph.facebook.com meta_graph_version= reporting_currency= currency_rates= watched_bot_tokens= alert_telegram_chat= alert_webhook_url= alert_webhook_secret= ecb_rates_url="
    );
    let out = cli(&["space", "set", "default", "time_zone=Asia/Nowhere"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("IANA time zone"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = cli(&["space", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("settings  attribution=first_touch"), "{text}");
}

/// The dedup entries of events by Telegram id may be only in the writer's memory when they are
/// answered. After a SIGKILL the restart derives them again from the inbox, keyed by the
/// Telegram id (not by the click it resolved to): every retry is the duplicate it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_by_telegram_id_in_memory_at_a_sigkill_stay_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let (addr, secret) = (process.addr, creds.secret.clone());
    let click = post_json(addr, &secret, "/clicks", "{}").await["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    post_json(
        addr,
        &secret,
        "/bind",
        &format!(r#"{{"uid":"{click}","tg_id":{USER}}}"#),
    )
    .await;
    let bodies = [
        format!(r#"{{"event":"contact","tg_id":{USER}}}"#),
        format!(r#"{{"event":"deposit","tg_id":{USER},"value":"5"}}"#),
        r#"{"event":"registration","tg_id":777}"#.to_owned(),
    ];
    // At once, so that they share a commit and their entries are still waiting at the kill
    // (a commit writes out a slice of the entries of the commits before it).
    let sends: Vec<_> = bodies
        .iter()
        .map(|body| {
            let (secret, body) = (secret.clone(), body.clone());
            tokio::spawn(async move { post_json(addr, &secret, "/events", &body).await })
        })
        .collect();
    let mut acked = Vec::new();
    for s in sends {
        let r = s.await.unwrap();
        assert_eq!(r["status"], "queued", "{r}");
        acked.push(r["inbox_id"].as_str().unwrap().parse::<u64>().unwrap());
    }
    process.kill_hard();
    let process = TrackerProcess::start(dir.path());
    let log = process.log_when(|log| dedup_entries_derived(log).is_some());
    let derived = dedup_entries_derived(&log);
    assert!(derived.is_some_and(|n| n > 0), "{derived:?}\n{log}");
    for (body, id) in bodies.iter().zip(acked) {
        let r = send(process.addr, &Request::post("/events", Some(&secret), body)).await;
        assert_duplicate_of(&r, id);
    }
    stop_cleanly(process);
}

/// Events stored before the uid rule keep whatever uid they hold: reading, the feed and the
/// export never check a stored uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_uid_outside_todays_rule_reads_and_exports_as_it_is() {
    use tracker::domain::dedup::dedup_key;
    use tracker::domain::event::ValidEvent;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    let old = "legacy.click/{1}~";
    let secret = {
        let store = crate::support::store_at(&path);
        let created = crate::support::app_on(&store, NOW_MS)
            .create_space("default")
            .await
            .unwrap();
        // Written as a release with the wider rule wrote it: storage takes any text.
        let event = ValidEvent {
            uid: Some(old.to_owned()),
            ..crate::support::contact_at(NOW_MS)
        };
        let key = dedup_key(&event, DAY_MS);
        assert!(!store.record_event(1, event, key).await.unwrap().duplicate);
        store.close();
        created.secret
    };
    let process = TrackerProcess::start(dir.path());
    let page = send(
        process.addr,
        &Request::get("/events").header("Authorization", format!("Bearer {secret}")),
    )
    .await
    .json();
    assert_eq!(page["events"][0]["uid"], json!(old), "{page}");
    // The same uid sent today is refused; the stored event is untouched by that.
    let r = send(
        process.addr,
        &Request::post(
            "/events",
            Some(&secret),
            &format!(r#"{{"event":"contact","uid":"{old}"}}"#),
        ),
    )
    .await;
    assert_error(&r, 422, "invalid_uid", Some("uid"));
    stop_cleanly(process);
    for format in ["ndjson", "csv"] {
        let out = run_cli(dir.path(), &path, ["export", "default", "--format", format]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_succeeded(&out);
        assert!(text.contains(old), "{format}: {text}");
    }
}
