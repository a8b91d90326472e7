//! The health checks of links' targets (`docs/api.md#target-health`), against the Bot API
//! stand-in: a bot whose token Telegram refuses gets no visits within two checks, every
//! target down sends visits to the fallback, and a bot that answers again is back in the
//! split; `watched_bot_tokens` is held to its rules; each change is one alert in the chat and
//! at the webhook, none per check.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::channels::{patch_space, server_with};
use crate::split::{sent_to, visit};
use crate::support::receiver::Receiver;
use crate::support::telegram::{BotApi, TOKEN};
use crate::support::{TestServer, assert_error};

/// How often the checks run here: short, so that two checks take well under a second.
const CHECK_EVERY: Duration = Duration::from_millis(200);
const A_TOKEN: &str = "7000000002:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw2";
const B_TOKEN: &str = "7000000003:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw3";
/// The stand-in's other bots are named by their id.
const A_BOT: &str = "other_7000000002_bot";
const B_BOT: &str = "other_7000000003_bot";
const SPARE: &str = "https://spare.example.com/";

async fn watching_two_bots(api: &BotApi) -> TestServer {
    api.add_other_bot(A_TOKEN);
    api.add_other_bot(B_TOKEN);
    let s = server_with(api, |c| c.telegram.check_every = CHECK_EVERY).await;
    let r = patch_space(
        &s,
        &json!({"telegram_bot_token": TOKEN, "watched_bot_tokens": [A_TOKEN, B_TOKEN]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let link = json!({"slug": "ab", "targets": [{"bot": A_BOT, "weight": 1},
        {"bot": B_BOT, "weight": 1}], "fallback": {"target": format!("{SPARE}?u={{uid}}")}});
    let r = s.post_as(&s.a, "/links", &link.to_string()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Every bot answered once: each token's bot is known from then on.
    wait_for(&s, "the first checks", |_| {
        s.metrics_text()
            .contains("tracker_link_targets{state=\"up\"} 3")
    })
    .await;
    s
}

async fn targets(s: &TestServer) -> Vec<Value> {
    let links = s.read_as(&s.a, "/links").await.json();
    links["links"][0]["targets"].as_array().unwrap().clone()
}

async fn wait_for(s: &TestServer, what: &str, done: impl Fn(&[Value]) -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if done(&targets(s).await) {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what}: not within 10 s; targets {:?}", targets(s).await);
}

/// Where 40 visits, each of another ad click, went: the number to each place.
async fn where_visits_go(s: &TestServer, round: &str) -> std::collections::BTreeMap<String, u32> {
    let mut to = std::collections::BTreeMap::new();
    for i in 0..40 {
        let r = visit(s, &format!("/l/ab?fbclid=IwAR-{round}-{i}")).await;
        *to.entry(sent_to(&r)).or_default() += 1;
    }
    to
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_whose_token_telegram_refuses_gets_no_visits_within_two_checks() {
    let api = BotApi::start().await;
    let s = watching_two_bots(&api).await;
    assert_eq!(
        where_visits_go(&s, "before").await.len(),
        2,
        "both get visits"
    );

    api.revoke_other_bot(A_TOKEN);
    let took = wait_for(&s, "a_bot down", |t| t[0]["up"] == false).await;
    // Two checks, and one more for a check that was under way when the token was revoked.
    assert!(took < CHECK_EVERY * 3 + Duration::from_secs(1), "{took:?}");
    let t = targets(&s).await;
    assert!(t[0]["down_since_ms"].as_u64().is_some(), "{t:?}");
    assert_eq!(t[1]["up"], true, "{t:?}");
    let to = where_visits_go(&s, "a-down").await;
    assert_eq!(to.get(B_BOT), Some(&40), "{to:?}");
    assert!(
        s.metrics_text()
            .contains("tracker_link_targets{state=\"down\"} 1")
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visits_go_to_the_fallback_when_every_target_is_down_and_back_when_one_answers() {
    let api = BotApi::start().await;
    let s = watching_two_bots(&api).await;
    api.revoke_other_bot(A_TOKEN);
    api.revoke_other_bot(B_TOKEN);
    wait_for(&s, "both down", |t| {
        t[0]["up"] == false && t[1]["up"] == false
    })
    .await;
    let to = where_visits_go(&s, "all-down").await;
    assert_eq!(to.get(SPARE), Some(&40), "{to:?}");

    // Telegram knows the token again (the same bot): one check that passes brings it back.
    api.add_other_bot(B_TOKEN);
    wait_for(&s, "b_bot back", |t| t[1]["up"] == true).await;
    let to = where_visits_go(&s, "b-back").await;
    assert_eq!(to.get(B_BOT), Some(&40), "{to:?}");
    api.add_other_bot(A_TOKEN);
    wait_for(&s, "a_bot back", |t| t[0]["up"] == true).await;
    let to = where_visits_go(&s, "both-back").await;
    assert_eq!(to.len(), 2, "back in the split: {to:?}");
    assert!(to.values().all(|n| *n >= 5), "{to:?}");
    s.stop().await;
}

/// Waits until the checks have asked every bot at least `rounds` more times.
async fn checks_run(api: &BotApi, rounds: u64) {
    let start = api.other_bot_calls("getMe");
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.other_bot_calls("getMe") < start + 2 * rounds {
        assert!(Instant::now() < deadline, "the checks stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_refused_check_takes_no_target_down() {
    let api = BotApi::start().await;
    let s = watching_two_bots(&api).await;
    api.refuse_next_other_call(A_TOKEN, 401, "Unauthorized");
    checks_run(&api, 4).await;
    let t = targets(&s).await;
    assert!(t.iter().all(|t| t["up"] == true), "{t:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_failure_to_reach_telegram_takes_no_target_down() {
    let api = BotApi::start().await;
    let s = watching_two_bots(&api).await;
    api.go_silent(true);
    // Checks run meanwhile, each finding no Bot API at all.
    tokio::time::sleep(CHECK_EVERY * 6).await;
    let t = targets(&s).await;
    assert!(t.iter().all(|t| t["up"] == true), "{t:?}");
    api.go_silent(false);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_bot_tokens_are_write_only_and_held_to_their_rules() {
    let api = BotApi::start().await;
    let s = server_with(&api, |_| {}).await;
    let token = |i: usize| format!("70000{i:05}:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDs{i:03}");
    let tokens = |n: usize| (0..n).map(token).collect::<Vec<_>>();
    let r = patch_space(&s, &json!({"watched_bot_tokens": tokens(16)})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let shown = r.json()["settings"]["watched_bot_tokens"].clone();
    assert_eq!(shown.as_array().unwrap().len(), 16);
    assert_eq!(
        shown[1], "…s001",
        "write-only: each by its last 4 characters"
    );
    assert!(!r.text().contains(&token(1)));

    let r = patch_space(&s, &json!({"watched_bot_tokens": tokens(17)})).await;
    assert_error(&r, 422, "invalid_field", Some("watched_bot_tokens"));
    let r = patch_space(
        &s,
        &json!({"watched_bot_tokens": [token(1), "not-a-token"]}),
    )
    .await;
    let e = assert_error(&r, 422, "invalid_field", Some("watched_bot_tokens"));
    assert!(e["error"].as_str().unwrap().contains("[1]"), "{e}");
    let r = patch_space(&s, &json!({"watched_bot_tokens": [token(1), token(1)]})).await;
    assert_error(&r, 422, "invalid_field", Some("watched_bot_tokens"));
    let r = patch_space(&s, &json!({"watched_bot_tokens": token(1)})).await;
    assert_error(&r, 400, "invalid_json", Some("watched_bot_tokens"));
    // Nothing refused changed anything.
    let kept = s.read_as(&s.a, "/space").await.json();
    assert_eq!(kept["settings"]["watched_bot_tokens"], shown);

    let r = patch_space(&s, &json!({"watched_bot_tokens": []})).await;
    assert_eq!(r.json()["settings"]["watched_bot_tokens"], json!([]));
    s.stop().await;
}

const ALERT_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_is_one_alert_in_the_chat_and_at_the_webhook_never_one_per_check() {
    let api = BotApi::start().await;
    let hook = Receiver::start().await;
    let s = watching_two_bots(&api).await;
    let r = patch_space(
        &s,
        &json!({"alert_telegram_chat": "-1001000000001",
            "alert_webhook_url": hook.url("/alerts"), "alert_webhook_secret": ALERT_SECRET}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["settings"]["alert_webhook_secret"], "…LaSw");

    api.revoke_other_bot(A_TOKEN);
    wait_for(&s, "a_bot down", |t| t[0]["up"] == false).await;
    checks_run(&api, 5).await;
    api.add_other_bot(A_TOKEN);
    wait_for(&s, "a_bot back", |t| t[0]["up"] == true).await;
    checks_run(&api, 5).await;

    let sent = hook.wait_for(2, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = if hook.received().len() > sent.len() {
        hook.received()
    } else {
        sent
    };
    assert_eq!(sent.len(), 2, "one per change");
    let bodies: Vec<Value> = sent
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(bodies[0]["alert"]["type"], "target_down", "{}", bodies[0]);
    assert_eq!(bodies[0]["alert"]["target"], format!("@{A_BOT}"));
    assert_eq!(bodies[1]["alert"]["type"], "target_back", "{}", bodies[1]);
    for r in &sent {
        assert!(
            crate::deliveries::verify(ALERT_SECRET, r, &r.body),
            "signed: {r:?}"
        );
    }
    let messages = api.messages();
    assert_eq!(messages.len(), 2, "one per change: {messages:?}");
    assert_eq!(messages[0].0, "-1001000000001");
    assert!(messages[0].1.contains("is down"), "{messages:?}");
    assert!(messages[1].1.contains("is back up"), "{messages:?}");
    assert!(!messages.iter().any(|(_, t)| t.contains(A_TOKEN)));

    // A webhook address without its secret is refused, and changes nothing.
    let r = patch_space(&s, &json!({"alert_webhook_secret": ""})).await;
    assert_error(&r, 422, "invalid_field", Some("alert_webhook_secret"));
    let r = patch_space(&s, &json!({"alert_webhook_secret": "whsec_c2hvcnQ="})).await;
    assert_error(&r, 422, "invalid_field", Some("alert_webhook_secret"));
    let r = patch_space(&s, &json!({"alert_telegram_chat": "news"})).await;
    assert_error(&r, 422, "invalid_field", Some("alert_telegram_chat"));
    s.stop().await;
}
