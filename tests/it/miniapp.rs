//! A Telegram Mini App's bind and events (`docs/bots.md#mini-apps`), with `initData` signed as
//! Telegram signs it, by the space's bot token set through the Bot API's stand-in
//! (`support/telegram.rs`): a valid one binds; a forged, an expired and a future one, and one for
//! a space without that bot, are `401` and change nothing; a contact is recorded for the user and
//! a deposit is refused; every answer and the preflight allow any origin.

use serde_json::{Value, json};
use tracker::domain::init_data::sign;

use crate::channels::{patch_space, server_with};
use crate::support::telegram::{BotApi, TOKEN};
use crate::support::{NOW_MS, Request, Response, TestServer, assert_error};

const USER: u64 = 4242;
const DAY_S: u64 = 86_400;
const NOW_S: u64 = NOW_MS / 1000;

/// A server whose space `a` has the stand-in's bot, and a click of it.
async fn with_bot(api: &BotApi) -> (TestServer, String) {
    let s = server_with(api, |_| {}).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let uid = s.click(&s.a, r#"{"fbclid":"mini-1"}"#).await;
    (s, uid)
}

/// `initData` of `user` opening the Mini App with `start_param` at `auth_date`, signed with `token`.
fn init_data(token: &str, user: u64, start_param: &str, auth_date: u64) -> String {
    let user = json!({"id": user, "first_name": "Ann", "language_code": "en"}).to_string();
    let date = auth_date.to_string();
    sign(
        &[
            ("query_id", "AAHdF6IQAAAAAN0XohDhrOrc"),
            ("user", &user),
            ("auth_date", &date),
            ("start_param", start_param),
        ],
        token,
    )
}

async fn post(s: &TestServer, path: &str, body: &Value) -> Response {
    let target = format!("/miniapp/{}/{path}", s.a.name);
    let r = s
        .send(&Request::post(&target, None, &body.to_string()))
        .await;
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("*"),
        "{target} answered {}",
        r.status
    );
    r
}

async fn bind(s: &TestServer, data: &str) -> Response {
    post(s, "bind", &json!({ "init_data": data })).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_init_data_binds_its_user_to_the_click_and_the_first_binding_wins() {
    let api = BotApi::start().await;
    let (s, uid) = with_bot(&api).await;
    let r = bind(&s, &init_data(TOKEN, USER, &uid, NOW_S)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"ok": true, "matched": true, "tg_id": USER})
    );
    // Again, the same answer; another user finds it taken, and is not told by whom.
    let r = bind(&s, &init_data(TOKEN, USER, &uid, NOW_S)).await;
    assert_eq!(
        r.json(),
        json!({"ok": true, "matched": true, "tg_id": USER})
    );
    let r = bind(&s, &init_data(TOKEN, USER + 1, &uid, NOW_S)).await;
    assert_eq!(
        r.json(),
        json!({"ok": true, "matched": true, "conflict": true})
    );
    // The server's later deposit of that user is attributed through the binding.
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","tg_id":{USER},"value":"10"}}"#
        ))
        .await;
    assert_eq!(r.json()["attributed_by"], "tg_id", "{}", r.text());
    // A start_param that names no click: nothing to bind.
    let r = bind(&s, &init_data(TOKEN, USER, "nosuchclick", NOW_S)).await;
    assert_eq!(r.json(), json!({"ok": true, "matched": false}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_an_expired_and_a_future_init_data_are_refused_and_change_nothing() {
    let api = BotApi::start().await;
    let (s, uid) = with_bot(&api).await;
    let good = init_data(TOKEN, USER, &uid, NOW_S);
    let forged = good.replace(&USER.to_string(), "4243");
    let other_bot = init_data(
        "7000000002:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
        4243,
        &uid,
        NOW_S,
    );
    let expired = init_data(TOKEN, 4243, &uid, NOW_S - DAY_S - 1);
    // `max_clock_skew`, 10 minutes, is all the time ahead that is allowed.
    let future = init_data(TOKEN, 4243, &uid, NOW_S + 601);
    for data in [forged, other_bot, expired, future] {
        let r = bind(&s, &data).await;
        assert_error(&r, 401, "unauthorized", None);
        let r = post(
            &s,
            "events",
            &json!({"init_data": data, "event": "contact"}),
        )
        .await;
        assert_error(&r, 401, "unauthorized", None);
    }
    // The space `b` has no bot: the same answer as a bad signature.
    let target = format!("/miniapp/{}/bind", s.b.name);
    let body = json!({ "init_data": good }).to_string();
    let r = s.send(&Request::post(&target, None, &body)).await;
    assert_error(&r, 401, "unauthorized", None);
    let r = s
        .send(&Request::post("/miniapp/nosuch/bind", None, &body))
        .await;
    assert_error(&r, 401, "unauthorized", None);
    // Nothing was bound or recorded: the click is still free, the feed is empty.
    assert!(s.list_as(&s.a, "/events", "events").await.is_empty());
    // Just inside both bounds, the bind is taken.
    let oldest = init_data(TOKEN, USER, &uid, NOW_S - DAY_S);
    assert_eq!(bind(&s, &oldest).await.json()["tg_id"], USER);
    let ahead = init_data(TOKEN, USER, &uid, NOW_S + 600);
    assert_eq!(bind(&s, &ahead).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mini_app_records_a_contact_and_may_not_send_a_deposit() {
    let api = BotApi::start().await;
    let (s, uid) = with_bot(&api).await;
    let data = init_data(TOKEN, USER, &uid, NOW_S);
    let r = post(
        &s,
        "events",
        &json!({"init_data": data, "event": "contact", "eid": "c-1"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["status"].clone(), r.json()["matched"].clone()),
        (json!("queued"), json!(true))
    );
    let r = post(
        &s,
        "events",
        &json!({"init_data": data, "event": "contact", "eid": "c-1"}),
    )
    .await;
    assert_eq!(r.json()["status"], "duplicate");
    for kind in ["deposit", "subscribed"] {
        let r = post(
            &s,
            "events",
            &json!({"init_data": data, "event": kind, "eid": "d-1"}),
        )
        .await;
        assert_error(&r, 422, "invalid_event", Some("event"));
    }
    // Money has no field here at all.
    let r = post(
        &s,
        "events",
        &json!({"init_data": data, "event": "registration", "value": "10"}),
    )
    .await;
    assert_error(&r, 400, "invalid_json", None);
    let r = post(&s, "events", &json!({"event": "contact"})).await;
    assert_error(&r, 422, "missing_field", Some("init_data"));
    let events = s.list_as(&s.a, "/events", "events").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "contact");
    assert_eq!(events[0]["tg_id"], USER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_allows_any_origin_to_post_json() {
    let s = TestServer::start().await;
    for path in ["bind", "events"] {
        let target = format!("/miniapp/{}/{path}", s.a.name);
        let request = Request {
            method: "OPTIONS",
            ..Request::get(&target)
        }
        .header("Origin", "https://app.example.com")
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type");
        let r = s.send(&request).await;
        assert_eq!(r.status, 204);
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
        assert_eq!(r.header("access-control-allow-methods"), Some("POST"));
        assert_eq!(
            r.header("access-control-allow-headers"),
            Some("content-type")
        );
    }
}
