//! A channel's updates by webhook (`telegram_webhook = true`, `docs/channels.md#updates`),
//! through the Bot API's stand-in (`support/telegram.rs`), which sets the webhook as Telegram
//! does and delivers the updates it holds to `POST /telegram/<space>` with the secret header:
//! a join binds the click and records one `subscribed`; an update posted twice counts once; one
//! whose id Telegram chose anew after a quiet week, far below the last, counts, and so does one
//! answered `503` and sent again after another user's later one; a join request whose
//! approval Telegram asks to wait for is answered `503` and approved when sent again; a
//! missing or wrong secret, an unknown space and a body over the bound are refused and change
//! nothing; a commit that fails is answered so that Telegram sends the update again; the switch
//! back to polling deletes the webhook first; a page the poller committed and never
//! acknowledged counts once when the webhook sends it again; the secret is never logged.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tracker::storage::fault;

use crate::channels::{
    CHANNEL, FALLBACK, POOL, USER, WAIT, feed, link_view, news_link, patch_space, visit,
    wait_for_state,
};
use crate::support::telegram::{BotApi, FIRST_UPDATE_ID, TOKEN};
use crate::support::{Request, Response, TestServer, TrackerProcess, assert_error, send};

const PUBLIC_URL: &str = "https://t.example.com";

/// The server with the stand-in as its Bot API and updates by webhook; `max_body_bytes` at
/// `max_body`.
async fn server(api: &BotApi, max_body: u64) -> TestServer {
    crate::channels::server_with(api, move |c| {
        c.telegram.webhook = true;
        PUBLIC_URL.clone_into(&mut c.public_url);
        c.max_body_bytes = max_body;
    })
    .await
}

/// A server whose space `a` has the stand-in's bot and the channel link `news`, its pool full,
/// once the stand-in holds its webhook.
async fn hooked(api: &BotApi, max_body: u64) -> TestServer {
    api.add_channel(CHANNEL, "news_ch");
    let s = server(api, max_body).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    api.wait_until(WAIT, |a| a.webhook().is_some()).await;
    s
}

/// `POST /telegram/<space>` of `body`, with `secret` as the header if given.
async fn post_update(s: &TestServer, space: &str, secret: Option<&str>, body: &str) -> Response {
    let target = format!("/telegram/{space}");
    let mut request = Request::post(&target, None, body);
    if let Some(secret) = secret {
        request = request.header("X-Telegram-Bot-Api-Secret-Token", secret.to_owned());
    }
    s.send(&request).await
}

/// What the Settings page says of space `a`'s bot.
async fn bot_sentence(s: &TestServer) -> String {
    let app = s.app.clone().expect("the server's application");
    let name = s.a.name.clone();
    let no = app.store.read(move |s| s.space_no(&name)).await.unwrap();
    app.telegram
        .bot(no)
        .map(|b| b.describe())
        .unwrap_or_default()
}

/// The webhook's secret, as the stand-in was given it.
fn secret(api: &BotApi) -> String {
    api.webhook().unwrap().secret_token.expect("a secret_token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_by_webhook_binds_the_click_and_the_same_update_counts_once() {
    let api = BotApi::start().await;
    let s = hooked(&api, 1 << 20).await;
    let hook = api.webhook().unwrap();
    assert_eq!(hook.url, format!("{PUBLIC_URL}/telegram/{}", s.a.name));
    let secret = secret(&api);
    assert!(
        secret.len() >= 32
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "{secret}"
    );
    let allowed = hook.allowed_updates.unwrap_or_default();
    assert!(
        ["chat_member", "chat_join_request"]
            .iter()
            .all(|k| allowed.iter().any(|a| a == k)),
        "{allowed:?}"
    );
    assert_eq!(api.calls("getUpdates"), 0, "no polling beside the webhook");
    // The Settings page's sentence about the bot.
    let deadline = tokio::time::Instant::now() + WAIT;
    while bot_sentence(&s).await != "@tracker_test_bot, updates by webhook" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            bot_sentence(&s).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let to = visit(&s, "news", "fbclid=IwAR-hook-1").await;
    let join = api.push_join(CHANNEL, USER, Some(&to));
    let join_body = api.update(join).unwrap().to_string();
    assert_eq!(api.deliver(s.addr).await, vec![(join, 200)]);
    // Committed before the 200: seen at once.
    let events = feed(&s, 1).await;
    assert_eq!(events[0]["event"], "subscribed", "{events:?}");
    assert_eq!(events[0]["tg_id"], USER);
    assert_eq!(events[0]["campaign_name"], "autumn");
    assert_eq!(events[0]["fbclid"], "IwAR-hook-1");
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["used"].clone()),
        (json!(1), json!(1))
    );

    // The user leaves; the join's update, sent again (Telegram's retry after an answer that
    // never reached it), is the same update_id and changes nothing.
    let leave = api.push_leave(CHANNEL, USER, "left");
    assert_eq!(api.deliver(s.addr).await, vec![(leave, 200)]);
    let again = post_update(&s, &s.a.name, Some(&secret), &join_body).await;
    assert_eq!(again.status, 200, "{}", again.text());
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["leaves"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );
    assert_eq!(feed(&s, 1).await.len(), 1, "one subscribed event");

    // After a week without updates Telegram chooses the next update's id anew, here far below
    // the stored offset: a new update all the same, and the ids go on from it.
    api.choose_update_ids_anew(FIRST_UPDATE_ID / 2);
    for (n, user) in [(2, USER + 1), (3, USER + 2)] {
        let to = visit(&s, "news", "").await;
        let id = api.push_join(CHANNEL, user, Some(&to));
        assert!(id < join, "{id} {join}");
        assert_eq!(api.deliver(s.addr).await, vec![(id, 200)]);
        let state = &link_view(&s, "news").await["channel_state"];
        assert_eq!(state["joins"], n, "{state}");
    }
    assert_eq!(feed(&s, 3).await.len(), 3, "a subscribed event each");
    assert_eq!(api.calls("getUpdates"), 0);
}

/// Telegram keeps each user's updates in order but not all users': an update answered `503`
/// comes again after a later one of another user, and is applied then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_sent_again_after_another_users_later_one_counts() {
    let api = BotApi::start().await;
    let s = hooked(&api, 1 << 20).await;
    let secret = secret(&api);
    let space = s.a.name.clone();
    let to_a = visit(&s, "news", "").await;
    let to_b = visit(&s, "news", "").await;
    let a = api.push_join(CHANNEL, USER, Some(&to_a));
    let b = api.push_join(CHANNEL, USER + 1, Some(&to_b));
    assert!(a < b);
    let body = |id| api.update(id).unwrap().to_string();
    let (body_a, body_b) = (body(a), body(b));

    // A's own commit fails.
    s.fault.store(fault::FAIL_ALL, Ordering::SeqCst);
    let r = post_update(&s, &space, Some(&secret), &body_a).await;
    assert!(r.status >= 500, "{}", r.text());
    s.fault.store(fault::WORKS, Ordering::SeqCst);
    // B's, once the file is open again; then A's again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = post_update(&s, &space, Some(&secret), &body_b).await;
        if r.status == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", r.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = post_update(&s, &space, Some(&secret), &body_a).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["used"].clone()),
        (json!(2), json!(2)),
        "{state}"
    );
    let events = feed(&s, 2).await;
    assert_eq!(events.len(), 2, "a subscribed event each: {events:?}");
    // Sent yet again (its answer lost): nothing more.
    let r = post_update(&s, &space, Some(&secret), &body_a).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(feed(&s, 2).await.len(), 2);
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(state["joins"], 2, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_secret_an_unknown_space_or_a_body_too_large_changes_nothing() {
    let api = BotApi::start().await;
    let max_body = 4096;
    let s = hooked(&api, max_body).await;
    let secret = secret(&api);
    let to = visit(&s, "news", "fbclid=IwAR-hook-2").await;
    let join = api.push_join(CHANNEL, USER, Some(&to));
    let body = api.update(join).unwrap().to_string();
    let space = s.a.name.clone();

    let r = post_update(&s, &space, None, &body).await;
    assert_error(&r, 401, "unauthorized", None);
    let mut wrong = secret.clone();
    wrong.replace_range(
        secret.len() - 1..,
        if secret.ends_with('A') { "B" } else { "A" },
    );
    let r = post_update(&s, &space, Some(&wrong), &body).await;
    assert_error(&r, 401, "unauthorized", None);
    let r = post_update(&s, &space, Some(&secret[1..]), &body).await;
    assert_error(&r, 401, "unauthorized", None);
    // Each space's webhook has a secret of its own: space a's does not open another's.
    let r = post_update(&s, "no-such-space", Some(&secret), &body).await;
    assert_error(&r, 401, "unauthorized", None);
    let r = post_update(&s, &s.b.name, Some(&secret), &body).await;
    assert_error(&r, 401, "unauthorized", None);

    // The bound on bodies: one byte over it is refused, one at it is taken.
    let mut update: Value = serde_json::from_str(&body).unwrap();
    update["pad"] = "".into();
    let len = update.to_string().len();
    let pad = usize::try_from(max_body).unwrap() + 1 - len;
    update["pad"] = "x".repeat(pad).into();
    let over = update.to_string();
    assert_eq!(over.len() as u64, max_body + 1);
    let r = post_update(&s, &space, Some(&secret), &over).await;
    assert_error(&r, 413, "payload_too_large", None);
    assert!(feed_now(&s).await.is_empty(), "nothing recorded");
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(state["joins"], 0, "{state}");

    // A commit that fails is not answered 2xx: Telegram keeps the update and sends it again.
    // An event whose commit fails first makes the writer let go of the file, so the update's
    // reads fail too: that is a 5xx as well, never a `not_found`.
    s.fault.store(fault::FAIL_ALL, Ordering::SeqCst);
    let r = s.post_event(r#"{"event":"contact"}"#).await;
    assert_error(&r, 503, "unavailable", None);
    let answered = api.deliver(s.addr).await;
    assert_eq!(answered.len(), 1);
    assert!(answered[0].1 >= 500, "{answered:?}");
    assert_eq!(api.kept_updates(), vec![join]);
    s.fault.store(fault::WORKS, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answered = api.deliver(s.addr).await;
        if answered.last().is_some_and(|(_, status)| *status == 200) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answered:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    update["pad"] = "x".repeat(pad - 1).into();
    let at = update.to_string();
    assert_eq!(at.len() as u64, max_body);
    let r = post_update(&s, &space, Some(&secret), &at).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(feed(&s, 1).await.len(), 1, "the join, once");
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(state["joins"], 1, "{state}");
}

/// A join request by webhook whose approval Telegram answers `429`: the update is answered
/// `503` with Telegram's `retry_after` and nothing is recorded, so Telegram sends it again;
/// sent again, it is approved and the join that follows counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_request_telegram_asks_to_wait_for_is_sent_again_and_approved() {
    let api = BotApi::start().await;
    api.add_chat(crate::channels::private_news());
    let s = server(&api, 1 << 20).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    crate::channels::asking_news_link(&s).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    api.wait_until(WAIT, |a| a.webhook().is_some()).await;
    let to = visit(&s, "news", "fbclid=IwAR-hook-wait").await;
    api.throttle_next_approval(3);
    let request = api.push_join_request(CHANNEL, USER, &to);
    let body = api.update(request).unwrap().to_string();
    let r = post_update(&s, &s.a.name, Some(&secret(&api)), &body).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("3"));
    assert!(api.approved().is_empty());
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(state["joins"], 0, "{state}");
    let delivered: Vec<u16> = api.deliver(s.addr).await.iter().map(|d| d.1).collect();
    assert_eq!(delivered, vec![200, 200], "the request, then the join");
    assert_eq!(api.approved(), vec![(CHANNEL, USER)]);
    let events = feed(&s, 1).await;
    assert_eq!(
        (events[0]["event"].clone(), events[0]["fbclid"].clone()),
        (json!("subscribed"), json!("IwAR-hook-wait"))
    );
}

/// The space's feed as it is now.
async fn feed_now(s: &TestServer) -> Vec<Value> {
    let page = s.read_as(&s.a, "/events?limit=1000").await.json();
    page["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_polling_the_webhook_is_deleted_first() {
    let api = BotApi::start().await;
    let s = hooked(&api, 1 << 20).await;
    let to = visit(&s, "news", "fbclid=IwAR-hook-3").await;
    // While the webhook is set, Telegram refuses getUpdates.
    let s = s
        .restart_with(|c| {
            c.telegram.webhook = false;
        })
        .await;
    api.wait_until(WAIT, |a| a.calls("getUpdates") > 0).await;
    let log = api.log();
    let deleted = log.iter().rposition(|m| m == "deleteWebhook");
    let polled = log.iter().position(|m| m == "getUpdates");
    assert!(
        deleted.is_some_and(|d| polled.is_some_and(|p| d < p)),
        "{log:?}"
    );
    assert!(api.webhook().is_none());
    assert_eq!(bot_sentence(&s).await, "@tracker_test_bot");
    let r = post_update(&s, &s.a.name, Some("anything"), "{}").await;
    assert_error(&r, 404, "not_found", None);
    api.push_join(CHANNEL, USER, Some(&to));
    let events = feed(&s, 1).await;
    assert_eq!(events[0]["event"], "subscribed");
    // Polling: no 409 was ever answered, so no Bot API error is shown.
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
}

/// Back to polling while an update the webhook was answered `503` for waits behind a later one
/// of another user that it applied: the poller reads and applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_the_webhook_left_waiting_is_read_by_polling_after_the_switch() {
    let api = BotApi::start().await;
    let s = hooked(&api, 1 << 20).await;
    let secret = secret(&api);
    let to_a = visit(&s, "news", "").await;
    let to_b = visit(&s, "news", "").await;
    let a = api.push_join(CHANNEL, USER, Some(&to_a));
    let b = api.push_join(CHANNEL, USER + 1, Some(&to_b));
    assert!(a < b);
    let body_b = api.update(b).unwrap().to_string();
    let r = post_update(&s, &s.a.name, Some(&secret), &body_b).await;
    assert_eq!(r.status, 200, "{}", r.text());
    api.answered(b);
    let s = s
        .restart_with(|c| {
            c.telegram.webhook = false;
        })
        .await;
    wait_for_state(&s, "news", |c| c["joins"] == 2).await;
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    assert_eq!(feed(&s, 2).await.len(), 2, "a subscribed event each");
}

/// From polling to the webhook after the poller committed a page and its acknowledgement never
/// reached Telegram (the process stopped, or the network failed, in between): Telegram sends
/// the page again by webhook, and a join and a leave of one user in it count once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_polled_and_never_acknowledged_counts_once_when_the_webhook_sends_it_again() {
    let api = BotApi::start().await;
    api.add_channel(CHANNEL, "news_ch");
    let s = crate::channels::server_with(&api, |_| {}).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let to = visit(&s, "news", "").await;
    api.lose_acknowledgements(true);
    api.hold_updates(true);
    let join = api.push_join(CHANNEL, USER, Some(&to));
    let leave = api.push_leave(CHANNEL, USER, "left");
    api.hold_updates(false);
    wait_for_state(&s, "news", |c| c["joins"] == 1 && c["leaves"] == 1).await;
    let acknowledging = i64::try_from(leave + 1).unwrap();
    api.wait_until(WAIT, |a| {
        a.polls().iter().any(|p| p.offset == Some(acknowledging))
    })
    .await;
    assert_eq!(
        api.kept_updates(),
        [join, leave],
        "the page was never acknowledged"
    );
    let s = s
        .restart_with(|c| {
            c.telegram.webhook = true;
            PUBLIC_URL.clone_into(&mut c.public_url);
        })
        .await;
    api.wait_until(WAIT, |a| a.webhook().is_some()).await;
    assert_eq!(api.deliver(s.addr).await, [(join, 200), (leave, 200)]);
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["leaves"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );
    assert_eq!(feed_now(&s).await.len(), 1, "one subscribed event");
}

/// A bot token removed from its space: its webhook is deleted (the updates Telegram holds
/// kept), so the bot stops sending to an address that now answers `404`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_bot_token_has_its_webhook_deleted() {
    let api = BotApi::start().await;
    let s = hooked(&api, 1 << 20).await;
    let before = api.log().iter().filter(|m| *m == "deleteWebhook").count();
    let r = patch_space(&s, &json!({"telegram_bot_token": ""})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    api.wait_until(WAIT, |a| a.webhook().is_none()).await;
    assert_eq!(
        api.log().iter().filter(|m| *m == "deleteWebhook").count(),
        before + 1
    );
    let r = post_update(&s, &s.a.name, None, "{}").await;
    assert_eq!(r.status, 401, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_secret_is_never_logged_and_an_http_public_url_is_refused_at_start() {
    let api = BotApi::start().await;
    api.add_channel(CHANNEL, "news_ch");
    let dir = tempfile::tempdir().unwrap();
    let url = api.url();
    let mut env = vec![
        ("TRACKER_TELEGRAM_API_URL", url.as_str()),
        ("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true"),
        ("TRACKER_INVITE_POOL", "3"),
        ("TRACKER_ADDRESS_RATE_LIMIT", "0"),
        ("TRACKER_TELEGRAM_WEBHOOK", "true"),
        ("TRACKER_LOG_LEVEL", "debug"),
    ];
    for public_url in ["http://t.example.com", ""] {
        let mut with = env.clone();
        with.push(("TRACKER_PUBLIC_URL", public_url));
        let refused = TrackerProcess::try_start_with_env(dir.path(), &with)
            .err()
            .unwrap_or_else(|| panic!("started with public_url {public_url:?}"));
        assert!(
            refused.contains("telegram_webhook") && refused.contains("https://"),
            "{refused}"
        );
    }
    env.push(("TRACKER_PUBLIC_URL", PUBLIC_URL));
    let mut p = TrackerProcess::start_with_env(dir.path(), &env);
    let secret = p.created.take().expect("first start").secret;
    let mut request = Request::post("/space", Some(&secret), "");
    let body = json!({"telegram_bot_token": TOKEN}).to_string();
    request.body = Some(body.as_bytes());
    request.method = "PATCH";
    assert_eq!(send(p.addr, &request).await.status, 200);
    api.wait_until(WAIT, |a| a.webhook().is_some()).await;
    let hook_secret = api.webhook().unwrap().secret_token.unwrap();
    api.push_join(CHANNEL, USER, Some(FALLBACK));
    assert_eq!(api.deliver(p.addr).await.len(), 1);
    let wrong = Request::post("/telegram/default", None, "{}")
        .header("X-Telegram-Bot-Api-Secret-Token", format!("{hook_secret}x"));
    assert_eq!(send(p.addr, &wrong).await.status, 401);
    let log = p.log_when(|l| l.contains("Telegram webhook set") && l.contains("/telegram/"));
    assert!(log.contains("Telegram webhook set"), "{log}");
    assert!(
        !log.contains(&hook_secret),
        "the secret is in the log:\n{log}"
    );
    crate::support::stop_cleanly(p);
}
