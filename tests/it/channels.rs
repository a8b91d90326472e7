//! Links that lead to a Telegram channel (`docs/channels.md`), through the Bot API's stand-in
//! (`support/telegram.rs`): a visit goes to an invite link the tracker made ahead; a join
//! through it binds the click and records one `subscribed` event that destinations send; join
//! requests are approved when the link asks, after Telegram's `retry_after` when it asks to
//! wait; leaves are counted; a throttled Bot API sends visitors to the fallback until the pool
//! refills; bad input is refused with a clear answer.

use std::time::Duration;

use serde_json::{Value, json};
use tracker::domain::rate::Rate;

use crate::support::receiver::Receiver;
use crate::support::telegram::{BotApi, Chat, FIRST_UPDATE_ID, TOKEN};
use crate::support::{
    DAY_MS, NOW_MS, Request, Response, TestServer, TrackerProcess, assert_error, run_cli_with_env,
    send,
};

pub(crate) const CHANNEL: i64 = -1_001_234_567_890;
pub(crate) const WAIT: Duration = Duration::from_secs(10);
pub(crate) const FALLBACK: &str = "https://t.me/+fallbackHash01";
pub(crate) const POOL: u32 = 3;
/// The users who join.
pub(crate) const USER: u64 = 555_000_111;
const ASKING_USER: u64 = 42_000;

/// The server with the stand-in as its Bot API, a small pool and short long polls.
async fn server(api: &BotApi) -> TestServer {
    server_with(api, |_| {}).await
}

/// A server whose Telegram calls go to `api`, with a pool of [`POOL`], then `configure`d.
pub(crate) async fn server_with(
    api: &BotApi,
    configure: impl FnOnce(&mut tracker::config::Settings),
) -> TestServer {
    let url = api.url();
    TestServer::start_with(move |c| {
        c.delivery.allow_private_destinations = true;
        c.telegram.api_url = url;
        c.telegram.invite_pool = POOL;
        c.telegram.poll_timeout = Duration::from_secs(1);
        // These tests visit faster than a person: the per-address limit has its own tests.
        c.address_rate_limit = Rate {
            per_second: 0,
            burst: 0,
        };
        configure(c);
    })
    .await
}

pub(crate) async fn patch_space(s: &TestServer, body: &Value) -> Response {
    s.patch_as(&s.a, "/space", &body.to_string()).await
}

/// A server whose space `a` has the stand-in's bot, and the channel `@news_ch`.
async fn with_bot(api: &BotApi) -> TestServer {
    api.add_channel(CHANNEL, "news_ch");
    let s = server(api).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["settings"]["telegram_bot_token"],
        "…saw0",
        "write-only: the last 4 characters"
    );
    s
}

async fn create_link(s: &TestServer, body: &Value) -> Response {
    s.post_as(&s.a, "/links", &body.to_string()).await
}

/// The channel link `news` of campaign `autumn`.
pub(crate) async fn news_link(s: &TestServer, join_requests: bool) -> Value {
    let r = create_link(
        s,
        &json!({"slug": "news", "channel": "@news_ch", "fallback": FALLBACK,
                "campaign_name": "autumn", "join_requests": join_requests}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["link"].clone()
}

/// `GET /links`' entry of `slug`.
pub(crate) async fn link_view(s: &TestServer, slug: &str) -> Value {
    let links = s.read_as(&s.a, "/links").await.json();
    links["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["slug"] == slug)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until `GET /links` shows `slug`'s state as `done` says.
pub(crate) async fn wait_for_state(
    s: &TestServer,
    slug: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let view = link_view(s, slug).await;
        if done(&view["channel_state"]) {
            return view;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "channel state never came to it: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `/metrics` gives `news`' invite links in its pool, handed out and used as
/// `counts` (as the pool's loop last read them).
async fn wait_for_invites(s: &TestServer, counts: [u32; 3]) {
    let states = ["pool", "handed_out", "used"];
    let want = states.iter().zip(counts).map(|(state, n)| {
        format!("tracker_channel_invites{{link=\"news\",state=\"{state}\"}} {n}\n")
    });
    wait_for_metrics(s, &want.collect::<Vec<_>>()).await;
}

/// Waits until `/metrics` holds every line of `want`: the pool's loop counts what it made only
/// after the commit that a view already shows.
async fn wait_for_metrics(s: &TestServer, want: &[String]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let metrics = s.metrics_text();
        if want.iter().all(|line| metrics.contains(line.as_str())) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{want:?} not in\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A visit of `/l/<slug>`: answers where it sent the visitor.
pub(crate) async fn visit(s: &TestServer, slug: &str, query: &str) -> String {
    let target = format!("/l/{slug}?{query}");
    let r = s
        .send(&Request::get(&target).header("User-Agent", "Mozilla/5.0 (iPhone)"))
        .await;
    assert_eq!(r.status, 302, "{}", r.text());
    r.header("location").unwrap().to_owned()
}

/// The space's feed, waiting until it holds `n` events.
pub(crate) async fn feed(s: &TestServer, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let page = s.read_as(&s.a, "/events?limit=1000").await.json();
        let events = page["events"].as_array().cloned().unwrap_or_default();
        if events.len() >= n {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {n} events: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_through_an_invite_link_binds_the_click_and_is_sent_to_meta() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    let meta = Receiver::meta(NOW_MS).await;
    let d = s
        .post_as(
            &s.a,
            "/destinations",
            &json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1234567890",
                    "access_token": "EAAB-token-wxyz", "graph_url": meta.url("")})
            .to_string(),
        )
        .await;
    assert_eq!(d.status, 201, "{}", d.text());
    let link = news_link(&s, false).await;
    assert_eq!(link["channel"], "@news_ch");
    assert_eq!(link["channel_state"]["chat_id"], CHANNEL);
    let view = wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    assert_eq!(view["channel_state"]["handed_out"], 0);
    let made: Vec<String> = api.invites().iter().map(|i| i.url.clone()).collect();
    assert_eq!(made.len(), POOL as usize);
    assert!(
        api.invites()
            .iter()
            .all(|i| i.name.as_deref() == Some("tracker news")
                && !i.creates_join_request
                && i.chat_id == CHANNEL)
    );
    assert_eq!(
        api.calls("getChatMember"),
        1,
        "the bot's rights checked once"
    );

    let to = visit(&s, "news", "fbclid=IwAR-chan-1").await;
    assert!(made.contains(&to), "{to} is one the tracker made: {made:?}");
    let again = visit(&s, "news", "fbclid=IwAR-chan-2").await;
    assert_ne!(again, to, "an invite link is handed out once");
    // The pool refills behind the visits.
    wait_for_state(&s, "news", |c| c["pool"] == POOL && c["handed_out"] == 2).await;

    api.push_join(CHANNEL, USER, Some(&to));
    let events = feed(&s, 1).await;
    let e = &events[0];
    assert_eq!(
        (
            e["event"].clone(),
            e["tg_id"].clone(),
            e["matched"].clone(),
            e["campaign_name"].clone(),
            e["fbclid"].clone(),
            e["source"].clone(),
        ),
        (
            json!("subscribed"),
            json!(USER),
            json!(true),
            json!("autumn"),
            json!("IwAR-chan-1"),
            json!("telegram"),
        ),
        "{e}"
    );
    let sent = meta.wait_for(1, WAIT).await;
    let data = &sent[0].json()["data"][0];
    assert_eq!(data["event_name"], "Subscribe", "{data}");
    assert!(
        data["user_data"]["fbc"]
            .as_str()
            .unwrap()
            .ends_with("IwAR-chan-1")
    );

    // The same join seen again (a second update saying it), and a join through no link of
    // the pool: one subscribed event still, one unattributed join.
    api.push_join(CHANNEL, USER, Some(&to));
    api.push_join(CHANNEL, 777, Some(FALLBACK));
    let view = wait_for_state(&s, "news", |c| c["used"] == 1 && c["joins"] == 1).await;
    assert_eq!(view["bound_clicks"], 1, "{view}");
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    assert_eq!(feed(&s, 1).await.len(), 1, "one subscribed event per user");
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["used"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );

    api.push_leave(CHANNEL, USER, "left");
    api.push_leave(CHANNEL, USER, "left");
    wait_for_state(&s, "news", |c| c["leaves"] == 1).await;
    wait_for_invites(&s, [POOL, 2, 1]).await;
    // Every poll asked for chat_member updates, without which Telegram sends none, and long
    // polled; the first sent no offset, and the offsets that acknowledged a page only grew.
    let polls = api.polls();
    let acknowledged: Vec<i64> = polls.iter().filter_map(|p| p.offset).collect();
    assert!(!acknowledged.is_empty(), "{polls:?}");
    assert!(acknowledged.windows(2).all(|w| w[0] <= w[1]), "{polls:?}");
    assert!(
        polls.first().is_some_and(|p| p.offset.is_none()),
        "{polls:?}"
    );
    assert!(polls.iter().all(|p| {
        p.timeout == 1
            && p.allowed_updates
                .as_ref()
                .is_some_and(|a| a.iter().any(|k| k == "chat_member"))
    }));
}

/// A join read late (Telegram keeps an update 24 hours) counts when Telegram dates it: its
/// `subscribed` event occurred then. A date older than Telegram keeps an update says the clocks
/// disagree, and counts now; a date before the click took its invite link counts then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_read_late_counts_when_it_happened() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let (first, second) = (visit(&s, "news", "").await, visit(&s, "news", "").await);
    // Read three hours after the visits (the tracker was down), of a join an hour after them.
    let (joined, read) = (NOW_MS + 3_600_000, NOW_MS + 3 * 3_600_000);
    s.clock.advance(read - NOW_MS);
    api.push_join_at(CHANNEL, USER, Some(&first), joined / 1000);
    let events = feed(&s, 1).await;
    assert_eq!(events[0]["occurred_at_ms"], joined, "{}", events[0]);
    assert_eq!(events[0]["received_at_ms"], read, "{}", events[0]);
    let other_clock = (read - 2 * DAY_MS) / 1000;
    api.push_join_at(CHANNEL, USER + 1, Some(&second), other_clock);
    let events = feed(&s, 2).await;
    let late = events.iter().find(|e| e["tg_id"] == USER + 1).unwrap();
    assert_eq!(late["occurred_at_ms"], read, "{late}");
    // Telegram's clock a minute behind ours: the join is never before its click took the link.
    let third = visit(&s, "news", "").await;
    api.push_join_at(CHANNEL, USER + 2, Some(&third), (read - 60_000) / 1000);
    let events = feed(&s, 3).await;
    let behind = events.iter().find(|e| e["tg_id"] == USER + 2).unwrap();
    assert_eq!(behind["occurred_at_ms"], read, "{behind}");
}

/// An invite link used while still in the pool (an admin posted it from the channel's list):
/// its join counts for the link, and it is never handed to a visitor after, whose click would
/// be credited with everyone who joins through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_link_used_before_it_is_handed_out_is_never_handed_out() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let posted = api.invites()[0].url.clone();
    api.push_join(CHANNEL, USER, Some(&posted));
    wait_for_state(&s, "news", |c| c["joins"] == 1).await;
    let mut handed = Vec::new();
    for _ in 0..POOL {
        handed.push(visit(&s, "news", "").await);
    }
    assert!(!handed.contains(&posted), "{posted} handed out: {handed:?}");
}

/// The channel [`CHANNEL`] as a private one: no `@username`, named by its chat id.
pub(crate) fn private_news() -> Chat {
    Chat {
        id: CHANNEL,
        username: None,
        kind: "channel",
        title: "Private news".into(),
        bot_admin: true,
        bot_can_invite: true,
    }
}

/// A server with the bot and the link `news` to the private channel [`CHANNEL`], whose invite
/// links ask to join (a public channel's may not), its pool full.
async fn with_asking_news(api: &BotApi) -> TestServer {
    api.add_chat(private_news());
    let s = server(api).await;
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    asking_news_link(&s).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    s
}

/// The channel link `news` of campaign `autumn` to the private channel [`CHANNEL`] (named by
/// its chat id), whose invite links ask to join.
pub(crate) async fn asking_news_link(s: &TestServer) {
    let r = create_link(
        s,
        &json!({"slug": "news", "channel": CHANNEL.to_string(), "fallback": FALLBACK,
                "campaign_name": "autumn", "join_requests": true}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["link"]["channel_state"]["warning"], Value::Null);
}

/// Telegram's apps often join a public channel directly, without the invite link (the
/// `chat_member` update then names none): a link to a public channel says so where it is made
/// and where it is listed, and `join_requests` on one is refused, since its requests would
/// come without the link and never be approved. A private channel takes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_channel_is_named_as_such_and_refuses_join_requests() {
    use crate::admin_page::{get_page, logged_in};
    let api = BotApi::start().await;
    let private = -1_009;
    api.add_chat(Chat {
        id: private,
        ..private_news()
    });
    let s = with_bot(&api).await;
    let r = create_link(
        &s,
        &json!({"slug": "asks", "channel": "@news_ch", "fallback": FALLBACK,
                "join_requests": true}),
    )
    .await;
    let e = assert_error(&r, 422, "invalid_field", Some("join_requests"));
    let why = e["error"].as_str().unwrap();
    assert!(why.contains("@news_ch is public"), "{why}");
    let r = create_link(
        &s,
        &json!({"slug": "asks", "channel": private.to_string(), "fallback": FALLBACK,
                "join_requests": true}),
    )
    .await;
    assert_eq!(r.status, 201, "a private channel takes it: {}", r.text());
    assert_eq!(r.json()["link"]["channel_state"]["warning"], Value::Null);

    let link = news_link(&s, false).await;
    let warning = link["channel_state"]["warning"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        warning.contains("@news_ch is a public channel") && warning.contains("unattributed"),
        "{warning}"
    );
    assert_eq!(
        link_view(&s, "news").await["channel_state"]["warning"],
        warning
    );
    assert_eq!(
        link_view(&s, "asks").await["channel_state"]["warning"],
        Value::Null
    );
    let cookie = logged_in(&s).await;
    let page = get_page(&s, Some(&cookie), "/admin/spaces/a/links").await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(
        page.text().matches("is a public channel").count(),
        1,
        "{}",
        page.text()
    );
}

/// The command line says the same where it makes a link: `tracker link create` on the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_names_a_public_channel() {
    let api = BotApi::start().await;
    api.add_channel(CHANNEL, "news_ch");
    let dir = tempfile::tempdir().unwrap();
    let (url, data) = (api.url(), dir.path().join("t.redb"));
    let env = [
        ("TRACKER_TELEGRAM_API_URL", url.as_str()),
        ("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true"),
    ];
    // The command blocks its worker; the stand-in answers on the other.
    let cli = |args: &[&str]| {
        let out = tokio::task::block_in_place(|| run_cli_with_env(dir.path(), &data, args, &env));
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    assert_eq!(cli(&["init"]).0, Some(0));
    let token = format!("telegram_bot_token={TOKEN}");
    assert_eq!(cli(&["space", "set", "default", &token]).0, Some(0));
    let create = ["link", "create", "default", "news", "--channel", "@news_ch"];
    let fallback = ["--fallback", FALLBACK];
    let (code, _, stderr) = cli(&[&create[..], &fallback, &["--join-requests"]].concat());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("join_requests needs a private channel"),
        "{stderr}"
    );
    let (code, stdout, stderr) = cli(&[&create[..], &fallback].concat());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("note: @news_ch is a public channel"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_request_is_approved_when_the_link_asks() {
    let api = BotApi::start().await;
    let s = with_asking_news(&api).await;
    assert!(api.invites().iter().all(|i| i.creates_join_request));
    let to = visit(&s, "news", "").await;
    api.push_join_request(CHANNEL, ASKING_USER, &to);
    api.wait_until(WAIT, |a| a.approved() == vec![(CHANNEL, ASKING_USER)])
        .await;
    let events = feed(&s, 1).await;
    assert_eq!(
        (events[0]["event"].clone(), events[0]["tg_id"].clone()),
        (json!("subscribed"), json!(ASKING_USER))
    );
    wait_for_state(&s, "news", |c| c["joins"] == 1 && c["used"] == 1).await;
}

/// Telegram answers the approval `429` once: the page is not acknowledged, and is applied
/// again once `retry_after` has passed (not before), so the join is approved and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_request_telegram_asks_to_wait_for_is_approved_after_retry_after() {
    let api = BotApi::start().await;
    let s = with_asking_news(&api).await;
    let to = visit(&s, "news", "fbclid=IwAR-wait-1").await;
    api.throttle_next_approval(2);
    api.push_join_request(CHANNEL, ASKING_USER, &to);
    api.wait_until(WAIT, |a| a.approved() == vec![(CHANNEL, ASKING_USER)])
        .await;
    let asked = api.approvals_asked();
    assert_eq!(asked.len(), 2, "a 429, then the approval: {asked:?}");
    assert!(
        asked[1] - asked[0] >= Duration::from_secs(2),
        "asked again before retry_after: {asked:?}"
    );
    let events = feed(&s, 1).await;
    assert_eq!(
        (
            events[0]["event"].clone(),
            events[0]["tg_id"].clone(),
            events[0]["fbclid"].clone()
        ),
        (
            json!("subscribed"),
            json!(ASKING_USER),
            json!("IwAR-wait-1")
        )
    );
    wait_for_state(&s, "news", |c| c["joins"] == 1 && c["used"] == 1).await;
}

/// Two join requests in one page, the second's approval answered `429`: the page applied
/// again asks Telegram only for the second, not for the first again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_applied_again_asks_only_for_the_approvals_it_did_not_get() {
    let api = BotApi::start().await;
    let s = with_asking_news(&api).await;
    let first = visit(&s, "news", "").await;
    let second = visit(&s, "news", "").await;
    api.hold_updates(true);
    api.push_join_request(CHANNEL, ASKING_USER, &first);
    api.push_join_request(CHANNEL, ASKING_USER + 1, &second);
    api.throttle_approval_after(1, 1);
    api.hold_updates(false);
    wait_for_state(&s, "news", |c| c["joins"] == 2).await;
    all_applied(&api).await;
    assert_eq!(
        api.approvals_asked().len(),
        3,
        "the first, the second answered 429, the second again"
    );
    assert_eq!(
        api.approved(),
        vec![(CHANNEL, ASKING_USER), (CHANNEL, ASKING_USER + 1)]
    );
}

/// Waits until every update the stand-in holds was applied and acknowledged.
async fn all_applied(api: &BotApi) {
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
}

/// A join without a link (through search, or a request an admin approved) is credited to the
/// link of the user's latest join request, and only until a join answers that request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_without_a_link_is_credited_to_the_latest_request_not_yet_joined_by() {
    let api = BotApi::start().await;
    let s = with_asking_news(&api).await;
    let unattributed = |n: u32| {
        let metrics = s.metrics_text();
        let line = format!("tracker_telegram_total{{what=\"unattributed_joins\"}} {n}\n");
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    };

    // Asked, approved and joined through the link; then left, and joined again by search.
    let to = visit(&s, "news", "").await;
    api.push_join_request(CHANNEL, ASKING_USER, &to);
    wait_for_state(&s, "news", |c| c["joins"] == 1).await;
    api.push_leave(CHANNEL, ASKING_USER, "left");
    api.push_join(CHANNEL, ASKING_USER, None);
    all_applied(&api).await;
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["leaves"].clone()),
        (json!(1), json!(1)),
        "the request was spent by the first join: {state}"
    );
    unattributed(1);

    // Asked through the link (the bot may no longer approve), then again through the
    // channel's own link, and approved by an admin: the later request counts.
    let to = visit(&s, "news", "").await;
    api.refuse_next_approval("Bad Request: CHAT_ADMIN_REQUIRED");
    api.push_join_request(CHANNEL, USER, &to);
    api.push_join_request(CHANNEL, USER, FALLBACK);
    api.push_join(CHANNEL, USER, None);
    all_applied(&api).await;
    assert_eq!(api.approved(), vec![(CHANNEL, ASKING_USER)]);
    let state = &link_view(&s, "news").await["channel_state"];
    assert_eq!(state["joins"], 1, "not the earlier request's link: {state}");
    unattributed(2);
    assert_eq!(feed(&s, 1).await.len(), 1, "one subscribed event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_bot_api_sends_visitors_to_the_fallback_until_the_pool_refills() {
    let api = BotApi::start().await;
    api.throttle(Some(1));
    let s = with_bot(&api).await;
    news_link(&s, false).await;
    api.wait_until(WAIT, |a| a.throttled() >= 1).await;
    for i in 0..20 {
        assert_eq!(visit(&s, "news", &format!("fbclid=f{i}")).await, FALLBACK);
    }
    let view = link_view(&s, "news").await;
    assert_eq!(view["clicks"], 20, "every visit is a click: {view}");
    assert_eq!(view["channel_state"]["fallbacks"], 20);
    assert!(
        view["channel_state"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("429")),
        "{view}"
    );
    let metrics = s.metrics_text();
    assert!(
        metrics.contains("tracker_telegram_total{what=\"fallback_visits\"} 20"),
        "{metrics}"
    );
    api.throttle(None);
    wait_for_state(&s, "news", |c| {
        c["pool"] == POOL && c["last_error"].is_null()
    })
    .await;
    wait_for_metrics(
        &s,
        &[format!(
            "tracker_telegram_total{{what=\"invites_made\"}} {POOL}\n"
        )],
    )
    .await;
    let to = visit(&s, "news", "").await;
    assert!(to.starts_with("https://t.me/+stand"), "{to}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bot_tokens_and_links_without_a_bot_are_refused_clearly() {
    let api = BotApi::start().await;
    let s = server(&api).await;
    // No bot yet.
    let no_bot = create_link(
        &s,
        &json!({"slug": "n", "channel": "@news_ch", "fallback": FALLBACK}),
    )
    .await;
    let e = assert_error(&no_bot, 422, "invalid_field", Some("channel"));
    assert!(
        e["error"].as_str().unwrap().contains("telegram_bot_token"),
        "{e}"
    );
    // A token Telegram refuses: nothing stored.
    let refused = patch_space(
        &s,
        &json!({"telegram_bot_token": "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"}),
    )
    .await;
    let e = assert_error(&refused, 422, "invalid_field", Some("telegram_bot_token"));
    assert!(e["error"].as_str().unwrap().contains("Unauthorized"), "{e}");
    assert!(
        !e.to_string().contains("AAHdq"),
        "the token is never repeated: {e}"
    );
    let space = s.read_as(&s.a, "/space").await.json();
    assert_eq!(space["settings"]["telegram_bot_token"], "");
    // Not a token at all.
    let shape = patch_space(&s, &json!({"telegram_bot_token": "123:short"})).await;
    assert_error(&shape, 422, "invalid_field", Some("telegram_bot_token"));
}

/// One bot serves one space: space `b` given space `a`'s bot is refused, naming the field and
/// space `a`, and nothing changes; a bot whose id is one apart is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_of_another_space_is_refused_and_another_bot_is_taken() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    let app = s.app.clone().expect("the server's application");
    let name = s.b.name.clone();
    let b = app.store.read(move |s| s.space_no(&name)).await.unwrap();
    let patch_b = |token: &str| {
        let body = json!({"telegram_bot_token": token}).to_string();
        let s = &s;
        async move { s.patch_as(&s.b, "/space", &body).await }
    };
    let refused = patch_b(TOKEN).await;
    let e = assert_error(&refused, 422, "invalid_field", Some("telegram_bot_token"));
    let says = e["error"].as_str().unwrap();
    assert!(
        says.contains(&format!("{:?}", s.a.name)) && says.contains("serves one space"),
        "{e}"
    );
    assert!(!says.contains("AAHdq"), "the token is never repeated: {e}");
    let settings = |space| {
        let s = &s;
        async move { s.read_as(space, "/space").await.json()["settings"]["telegram_bot_token"].clone() }
    };
    assert_eq!(settings(&s.b).await, "", "nothing stored");
    assert_eq!(settings(&s.a).await, "…saw0");
    assert_eq!(app.telegram.bot(b), None, "no bot shown for b");

    let next_bot = "7000000002:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw2";
    api.add_other_bot(next_bot);
    let taken = patch_b(next_bot).await;
    assert_eq!(taken.status, 200, "{}", taken.text());
    assert_eq!(settings(&s.b).await, "…saw2");
    assert_eq!(
        app.telegram.bot(b).map(|bot| bot.describe()).as_deref(),
        Some("@other_7000000002_bot")
    );
    // Space a may still change its own token for its own bot.
    let again = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(again.status, 200, "{}", again.text());
}

/// `tracker space set` on the file (no server running) meets the same rule as `PATCH /space`:
/// space `shop` given space `default`'s bot is refused and keeps no token; another bot is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_is_refused_another_spaces_bot_too() {
    let api = BotApi::start().await;
    let next_bot = "7000000002:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw2";
    api.add_other_bot(next_bot);
    let dir = tempfile::tempdir().unwrap();
    let (url, data) = (api.url(), dir.path().join("t.redb"));
    let env = [
        ("TRACKER_TELEGRAM_API_URL", url.as_str()),
        ("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true"),
    ];
    // The command blocks its worker; the stand-in answers on the other.
    let cli = |args: &[&str]| {
        let out = tokio::task::block_in_place(|| run_cli_with_env(dir.path(), &data, args, &env));
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    assert_eq!(cli(&["init"]).0, Some(0));
    assert_eq!(cli(&["space", "create", "shop"]).0, Some(0));
    let set = |space: &str, token: &str| {
        cli(&[
            "space",
            "set",
            space,
            &format!("telegram_bot_token={token}"),
        ])
    };
    let (code, _, stderr) = set("default", TOKEN);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, _, stderr) = set("shop", TOKEN);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("telegram_bot_token") && stderr.contains("\"default\""),
        "{stderr}"
    );
    let (_, list, _) = cli(&["--json", "space", "list"]);
    let tokens: Vec<(Value, Value)> = serde_json::from_str::<Value>(&list)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["space"].clone(),
                s["settings"]["telegram_bot_token"].clone(),
            )
        })
        .collect();
    assert!(tokens.contains(&(json!("shop"), json!(""))), "{tokens:?}");
    assert!(
        tokens.contains(&(json!("default"), json!("…saw0"))),
        "{tokens:?}"
    );
    let (code, _, stderr) = set("shop", next_bot);
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_channel_links_are_refused_clearly() {
    let api = BotApi::start().await;
    api.add_chat(Chat {
        id: -1_002,
        username: Some("a_group".into()),
        kind: "supergroup",
        title: "A group".into(),
        bot_admin: true,
        bot_can_invite: true,
    });
    api.add_chat(Chat {
        id: -1_003,
        username: Some("not_admin".into()),
        kind: "channel",
        title: "Not admin".into(),
        bot_admin: true,
        bot_can_invite: false,
    });
    let s = with_bot(&api).await;
    let cases = [
        (
            json!({"slug": "g", "channel": "@a_group", "fallback": FALLBACK}),
            "channel",
            "supergroup",
        ),
        (
            json!({"slug": "x", "channel": "@not_admin", "fallback": FALLBACK}),
            "channel",
            "invite users",
        ),
        (
            json!({"slug": "u", "channel": "@unknown_ch", "fallback": FALLBACK}),
            "channel",
            "chat not found",
        ),
        (
            json!({"slug": "f", "channel": "@news_ch", "fallback": "https://t.me/news_ch"}),
            "fallback",
            "t.me/+",
        ),
        (
            json!({"slug": "m", "channel": "@news_ch"}),
            "fallback",
            "fallback",
        ),
        (
            json!({"slug": "b", "channel": "@news_ch", "bot": "shop_bot", "fallback": FALLBACK}),
            "channel",
            "only one",
        ),
        (
            json!({"slug": "j", "bot": "shop_bot", "join_requests": true}),
            "join_requests",
            "channel",
        ),
        (
            json!({"slug": "c", "channel": "news ch", "fallback": FALLBACK}),
            "channel",
            "@username",
        ),
    ];
    for (body, field, says) in cases {
        let r = create_link(&s, &body).await;
        let status = if r.status == 422 && r.json()["status"] == "missing_field" {
            "missing_field"
        } else {
            "invalid_field"
        };
        let e = assert_error(&r, 422, status, Some(field));
        assert!(e["error"].as_str().unwrap().contains(says), "{body}: {e}");
    }
    let links = s.read_as(&s.a, "/links").await.json();
    assert_eq!(links["links"], json!([]), "nothing was created");
    // Just inside the rules: a chat id, a joinchat fallback.
    let ok = create_link(
        &s,
        &json!({"slug": "ok", "channel": CHANNEL.to_string(),
                "fallback": "https://t.me/joinchat/AbCd"}),
    )
    .await;
    assert_eq!(ok.status, 201, "{}", ok.text());
}

/// A server with the bot, the link `news` and its pool full, and user [`USER`]'s join through
/// the invite link a first visit took (told to the stand-in); answers the server and that link.
async fn joined_through_news(api: &BotApi) -> (TestServer, String) {
    let s = with_bot(api).await;
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let first = visit(&s, "news", "").await;
    api.push_join(CHANNEL, USER, Some(&first));
    (s, first)
}

/// A user who leaves and comes back through the same invite link joins twice, and the link
/// still counts as used once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_used_again_by_its_user_counts_as_used_once() {
    let api = BotApi::start().await;
    let (s, first) = joined_through_news(&api).await;
    wait_for_state(&s, "news", |c| c["joins"] == 1 && c["used"] == 1).await;
    api.push_leave(CHANNEL, USER, "left");
    wait_for_state(&s, "news", |c| c["leaves"] == 1).await;
    api.push_join(CHANNEL, USER, Some(&first));
    let state = wait_for_state(&s, "news", |c| c["joins"] == 2).await;
    assert_eq!(state["channel_state"]["used"], 1, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_taken_invite_link_is_not_handed_out_again_and_a_join_counts_once() {
    let api = BotApi::start().await;
    let (s, first) = joined_through_news(&api).await;
    assert_eq!(feed(&s, 1).await.len(), 1);
    let s = s.restart().await;
    // The join read again after the restart (as after a crash before its acknowledgement).
    api.push_join(CHANNEL, USER, Some(&first));
    let second = visit(&s, "news", "").await;
    assert_ne!(second, first, "handed out once, across the restart");
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    let state = &wait_for_state(&s, "news", |c| c["handed_out"] == 2).await["channel_state"];
    assert_eq!(
        (state["joins"].clone(), state["used"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );
    assert_eq!(feed(&s, 1).await.len(), 1, "one subscribed event");
}

/// Waits until the poll that acknowledged the last page has ended and the one waiting asks for
/// what is not yet acknowledged, as a week without updates finds it.
async fn quiet(api: &BotApi) {
    api.wait_until(WAIT, |a| {
        a.polls().last().is_some_and(|p| p.offset.is_none())
    })
    .await;
}

/// After a week without updates Telegram chooses the next update's id anew, and it may lie far
/// below the offset the tracker stored: such joins are read and counted, whether they come
/// while the tracker polls or while it is stopped, and the ids go on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_whose_ids_telegram_chose_anew_after_a_quiet_week_count() {
    let api = BotApi::start().await;
    let (s, _) = joined_through_news(&api).await;
    wait_for_state(&s, "news", |c| c["joins"] == 1).await;
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;

    // While it polls.
    quiet(&api).await;
    api.choose_update_ids_anew(FIRST_UPDATE_ID / 2);
    let mut last = 0;
    for (n, user) in [(2, USER + 1), (3, USER + 2)] {
        wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
        let to = visit(&s, "news", "").await;
        last = api.push_join(CHANNEL, user, Some(&to));
        wait_for_state(&s, "news", |c| c["joins"] == n).await;
    }
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    // The stored offset went down with the ids: past the last update applied.
    let app = s.app.clone().expect("the server's application");
    let name = s.a.name.clone();
    let no = app.store.read(move |s| s.space_no(&name)).await.unwrap();
    let offset = app
        .store
        .read(move |s| s.telegram_offset(no))
        .await
        .unwrap();
    assert_eq!(offset, last + 1);

    // While it is stopped: the join comes between the stop and the start.
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let to = visit(&s, "news", "").await;
    quiet(&api).await;
    let s = s
        .restart_with(|_| {
            api.choose_update_ids_anew(FIRST_UPDATE_ID / 4);
            api.push_join(CHANNEL, USER + 3, Some(&to));
        })
        .await;
    wait_for_state(&s, "news", |c| c["joins"] == 4).await;
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    assert_eq!(feed(&s, 4).await.len(), 4, "a subscribed event each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invite_links_handed_out_and_never_used_are_revoked_after_invite_ttl() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let unused = visit(&s, "news", "").await;
    let used = visit(&s, "news", "").await;
    api.push_join(CHANNEL, USER, Some(&used));
    wait_for_state(&s, "news", |c| c["used"] == 1).await;
    // Just inside `invite_ttl` (7 days): kept.
    s.clock.advance(7 * DAY_MS - 1_000);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(revoked_invites(&api), Vec::<String>::new());
    s.clock.advance(2_000);
    api.wait_until(WAIT, |a| !revoked_invites(a).is_empty())
        .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        revoked_invites(&api),
        vec![unused],
        "only the one never used"
    );
}

/// The invite links the stand-in has revoked.
fn revoked_invites(a: &BotApi) -> Vec<String> {
    a.invites()
        .into_iter()
        .filter(|i| i.revoked)
        .map(|i| i.url)
        .collect()
}

/// Telegram answers a revocation `429` with `retry_after`: the space's revocations wait that
/// long (not the pool loop's second) before the next call, and both unused links end revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_telegram_asks_to_wait_for_waits_retry_after() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let unused = [visit(&s, "news", "").await, visit(&s, "news", "").await];
    api.throttle_next_revoke(3);
    s.clock.advance(7 * DAY_MS + 1_000);
    api.wait_until(Duration::from_secs(20), |a| revoked_invites(a).len() == 2)
        .await;
    let mut got = revoked_invites(&api);
    got.sort();
    let mut want = unused.to_vec();
    want.sort();
    assert_eq!(got, want);
    let asked = api.revokes_asked();
    assert!(asked.len() >= 3, "{asked:?}");
    let waited = asked[1] - asked[0];
    assert!(
        waited >= Duration::from_secs(3),
        "the next revocation {waited:?} after a 429 with retry_after 3"
    );
}

/// The group of `GET /stats?<query>` named `group` (`null` for the one without a name).
async fn stats_group(s: &TestServer, query: &str, group: &Value) -> Value {
    let stats = s.read_as(&s.a, &format!("/stats?{query}")).await.json();
    stats["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| &g["group"] == group)
        .cloned()
        .unwrap_or(Value::Null)
}

/// `(joins, leaves, subscribers_kept)` of a stats group.
fn channel_figures(g: &Value) -> (Value, Value, Value) {
    (
        g["joins"].clone(),
        g["leaves"].clone(),
        g["subscribers_kept"].clone(),
    )
}

/// Joins and leaves count in the stats by campaign, link and day, and within a campaign by
/// link and day: a join through a link of the pool in the link's campaign, one through no such
/// link only in the day; a leave where its join counted, under its own day of the space's zone.
/// Kept subscribers are joins less leaves, and the campaign's cost is priced per subscriber kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_leaves_count_in_the_stats_by_campaign_link_and_day() {
    let api = BotApi::start().await;
    let s = with_bot(&api).await;
    // Joins at 13:30 of 2027-01-15 in Kolkata, the leave 12 hours later: 01:30 of the 16th
    // there, though the same UTC day.
    let r = patch_space(&s, &json!({"time_zone": "Asia/Kolkata"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    news_link(&s, false).await;
    wait_for_state(&s, "news", |c| c["pool"] == POOL).await;
    let first = visit(&s, "news", "utm_content=video").await;
    let second = visit(&s, "news", "").await;
    api.push_join(CHANNEL, USER, Some(&first));
    api.push_join(CHANNEL, USER + 1, Some(&second));
    api.push_join(CHANNEL, 777, Some(FALLBACK));
    wait_for_state(&s, "news", |c| c["joins"] == 2).await;
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    s.clock.advance(12 * 3_600_000);
    api.push_leave(CHANNEL, USER, "left");
    wait_for_state(&s, "news", |c| c["leaves"] == 1).await;

    let (joined, left) = (json!("2027-01-15"), json!("2027-01-16"));
    let cost = json!({"day": joined, "campaign_name": "autumn", "amount": "20", "currency": "USD"});
    assert_eq!(
        s.post_as(&s.a, "/costs", &cost.to_string()).await.status,
        200
    );

    let autumn = stats_group(&s, "by=campaign_name", &json!("autumn")).await;
    assert_eq!(
        channel_figures(&autumn),
        (json!(2), json!(1), json!(1)),
        "{autumn}"
    );
    assert_eq!(
        autumn["cost_per_subscriber"],
        json!({"USD": "20.0000"}),
        "{autumn}"
    );
    let news = stats_group(&s, "by=link_slug", &json!("news")).await;
    assert_eq!(
        channel_figures(&news),
        (json!(2), json!(1), json!(1)),
        "{news}"
    );
    // The day counts the join through no link of the pool too; the leave is the next day's.
    let day = stats_group(&s, "by=day", &joined).await;
    assert_eq!(
        channel_figures(&day),
        (json!(3), json!(0), json!(3)),
        "{day}"
    );
    assert_eq!(
        day["cost_per_subscriber"],
        json!({"USD": "6.6667"}),
        "{day}"
    );
    let next = stats_group(&s, "by=day", &left).await;
    assert_eq!(
        channel_figures(&next),
        (json!(0), json!(1), json!(-1)),
        "{next}"
    );
    let in_campaign = stats_group(&s, "by=link_slug&campaign=autumn", &json!("news")).await;
    assert_eq!(
        channel_figures(&in_campaign),
        (json!(2), json!(1), json!(1)),
        "{in_campaign}"
    );
    let campaign_day = stats_group(&s, "by=day&campaign=autumn", &left).await;
    assert_eq!(
        channel_figures(&campaign_day),
        (json!(0), json!(1), json!(-1)),
        "{campaign_day}"
    );
    // A join is counted by its link, not by the click's ad.
    let ad = stats_group(&s, "by=utm_content", &json!("video")).await;
    assert_eq!(channel_figures(&ad), (json!(0), json!(0), json!(0)), "{ad}");
    // A range of the first day only has the joins and not the leave.
    let first_day = "by=campaign_name&from=2027-01-15&to=2027-01-15";
    let autumn = stats_group(&s, first_day, &json!("autumn")).await;
    assert_eq!(
        channel_figures(&autumn),
        (json!(2), json!(0), json!(2)),
        "{autumn}"
    );
}

/// A tracker process (`support::TrackerProcess`, killed with SIGKILL here) of the stand-in's
/// bot, with its default space's secret.
struct Killable {
    env: Vec<(&'static str, String)>,
    dir: tempfile::TempDir,
    secret: String,
}

impl Killable {
    fn start(&self) -> TrackerProcess {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        TrackerProcess::start_with_env(self.dir.path(), &env)
    }

    async fn call(
        &self,
        p: &TrackerProcess,
        method: &'static str,
        target: &str,
        body: &Value,
    ) -> Value {
        let body = body.to_string();
        let mut request = Request::post(target, Some(&self.secret), &body);
        request.method = method;
        let r = send(p.addr, &request).await;
        assert!(r.status < 300, "{method} {target}: {}", r.text());
        r.json()
    }

    async fn get(&self, p: &TrackerProcess, target: &str) -> Value {
        let r = send(
            p.addr,
            &Request::get(target).header("Authorization", format!("Bearer {}", self.secret)),
        )
        .await;
        assert_eq!(r.status, 200, "GET {target}: {}", r.text());
        r.json()
    }

    /// `news`' channel state once `done` says so.
    async fn state(&self, p: &TrackerProcess, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let links = self.get(p, "/links").await;
            let state = links["links"][0]["channel_state"].clone();
            if done(&state) {
                return state;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never came to it: {state}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Where a visit of `/l/news` sent the visitor.
async fn visit_process(p: &TrackerProcess) -> String {
    let r = send(
        p.addr,
        &Request::get("/l/news").header("User-Agent", "Mozilla/5.0 (iPhone)"),
    )
    .await;
    assert_eq!(r.status, 302, "{}", r.text());
    r.header("location").unwrap().to_owned()
}

/// SIGKILL right after a visit took an invite link, and right after a join was committed (its
/// update perhaps not yet acknowledged to Telegram): the restarted tracker never hands the link
/// out again; its first poll acknowledges the join's update, whose offset was committed with
/// it; and the same join told again in a later update counts once, with one `subscribed` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_a_taken_invite_link_is_not_handed_out_again_and_a_join_counts_once() {
    let api = BotApi::start().await;
    api.add_channel(CHANNEL, "news_ch");
    let env = vec![
        ("TRACKER_TELEGRAM_API_URL", api.url()),
        ("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true".to_owned()),
        ("TRACKER_INVITE_POOL", POOL.to_string()),
        ("TRACKER_TELEGRAM_POLL_TIMEOUT", "1s".to_owned()),
        ("TRACKER_ADDRESS_RATE_LIMIT", "0".to_owned()),
    ];
    let mut t = Killable {
        env,
        dir: tempfile::tempdir().unwrap(),
        secret: String::new(),
    };
    let mut p = t.start();
    t.secret = p
        .created
        .take()
        .expect("the first start's credentials")
        .secret;
    t.call(&p, "PATCH", "/space", &json!({"telegram_bot_token": TOKEN}))
        .await;
    t.call(&p, "POST", "/links", &json!({"slug": "news", "channel": "@news_ch", "fallback": FALLBACK, "campaign_name": "autumn"})).await;
    t.state(&p, |c| c["pool"] == POOL).await;

    let taken = visit_process(&p).await;
    assert!(api.invites().iter().any(|i| i.url == taken), "{taken}");
    p.kill_hard();
    let p = t.start();
    let mut handed = Vec::new();
    for _ in 0..2 * POOL {
        t.state(&p, |c| c["pool"] == POOL).await;
        handed.push(visit_process(&p).await);
    }
    assert!(
        !handed.contains(&taken),
        "{taken} handed out again: {handed:?}"
    );

    let join = api.push_join(CHANNEL, USER, Some(&taken));
    let deadline = tokio::time::Instant::now() + WAIT;
    while t.get(&p, "/events").await["events"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the join was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.kill_hard();
    // Every request of the killed process read and answered (its long poll's wait ended).
    api.wait_until(WAIT, |a| a.open_connections() == 0).await;
    let polls_before = api.polls().len();
    // The same membership told again in a later update, as Telegram may (whether or not the
    // kill came before the next poll acknowledged the first).
    api.push_join(CHANNEL, USER, Some(&taken));
    let p = t.start();
    api.wait_until(WAIT, |a| a.kept_updates().is_empty()).await;
    // The offset was committed with the join: the first poll after the restart asks for what
    // is not yet acknowledged, which may be the join's own update again, left out as applied
    // already (the counts below), and the next poll acknowledges both.
    let after = api.polls();
    let later = &after[polls_before..];
    assert_eq!(later[0].offset, None, "the first poll after the restart");
    assert!(
        later
            .iter()
            .any(|p| p.offset == Some(i64::try_from(join + 2).unwrap())),
        "the re-told join acknowledged: {after:?}"
    );
    let state = t.state(&p, |c| c["joins"] == 1).await;
    assert_eq!(state["used"], 1, "{state}");
    let events = t.get(&p, "/events").await;
    let events = events["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "one subscribed event: {events:?}");
    assert_eq!(events[0]["event"], "subscribed");
    assert_eq!(events[0]["tg_id"], USER);
    crate::support::stop_cleanly(p);
}

/// An answer of the Bot API is read up to a bound, whatever `telegram_api_url` names: a
/// `getMe` that never ends is refused past it, and the token is kept with why its bot is not
/// known yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_api_answer_past_its_bound_is_refused() {
    let api = BotApi::start().await;
    let s = server(&api).await;
    let app = s.app.clone().expect("the server's application");
    let name = s.a.name.clone();
    let a = app.store.read(move |s| s.space_no(&name)).await.unwrap();
    api.send_huge_next("getMe", 64 << 20);
    let r = patch_space(&s, &json!({"telegram_bot_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let said = app.telegram.bot(a).map(|bot| bot.describe()).unwrap();
    assert!(
        said.contains(&format!(
            "answered more than {} bytes",
            tracker::workers::telegram::api::ANSWER_BYTES
        )),
        "{said}"
    );
}

/// Telegram's words reach the log escaped, as delivery errors do: a `description` with an
/// escape sequence and a line of its own writes neither into the server's log.
#[test]
fn the_bot_apis_words_reach_the_log_escaped() {
    use crate::support::{run_cli, stop_cleanly};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(BotApi::start());
    let forged = "Internal Server Error \u{1b}[31mred\nFORGED tracker: admin password reset";
    api.refuse_next_call("getMe", 500, forged);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let url = api.url();
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[
            ("TRACKER_TELEGRAM_API_URL", url.as_str()),
            ("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true"),
        ],
    );
    process.created.take().expect("first start");
    let token = format!("telegram_bot_token={TOKEN}");
    let out = run_cli(dir.path(), &data, ["space", "set", "default", &token]);
    crate::support::assert_succeeded(&out);
    let log = process.log_when(|log| log.contains("Telegram Bot API"));
    assert!(
        !log.contains('\u{1b}'),
        "no escape sequence reaches the log: {log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED")),
        "no line of Telegram's own: {log}"
    );
    assert!(log.contains(r"\u{1b}[31mred\nFORGED"), "{log}");
    stop_cleanly(process);
}
