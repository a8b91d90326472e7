//! The marketer's numbers (`docs/api.md#first-deposits`, `#costs`, `#stats`): first deposits
//! decided when a deposit is written, costs, and the stats that put them together.

use serde_json::{Value, json};

use crate::support::{TestServer, event_answer};

const USER: u64 = 123_456;
const OTHER_USER: u64 = 777;

/// Posts `body` as space `a`'s event; answers its `first_deposit` as the feed shows it.
async fn first_deposit(s: &TestServer, body: &str) -> Value {
    let r = s.post_event(body).await;
    assert_eq!(r.status, 200, "{body}: {}", r.text());
    assert_eq!(r.json()["status"], "queued", "{body}: {}", r.text());
    let inbox_id = event_answer(&r).inbox_id.to_string();
    let page = s.read_as(&s.a, "/events?limit=1000").await.json();
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["inbox_id"] == json!(inbox_id))
        .unwrap_or_else(|| panic!("no event {inbox_id} in {page}"))["first_deposit"]
        .clone()
}

/// `first_deposits` of each campaign in `GET /stats`.
async fn first_deposits_by_campaign(s: &TestServer) -> Vec<(Value, u64)> {
    let stats = s.read_as(&s.a, "/stats?by=campaign_name").await.json();
    stats["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group"].clone(), g["first_deposits"].as_u64().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deposits_of_one_user_from_two_clicks_make_one_first_deposit() {
    let s = TestServer::start().await;
    let one = s.click(&s.a, r#"{"campaign_name":"c-one"}"#).await;
    let two = s.click(&s.a, r#"{"campaign_name":"c-two"}"#).await;
    for uid in [&one, &two] {
        assert_eq!(s.bind(&s.a, uid, USER).await.status, 200);
    }
    let deposit = |uid: &str| format!(r#"{{"event":"deposit","uid":"{uid}","value":"10"}}"#);
    assert_eq!(first_deposit(&s, &deposit(&one)).await, json!(true));
    assert_eq!(first_deposit(&s, &deposit(&two)).await, json!(false));
    // By the Telegram id alone: the same user, not first either.
    let by_tg = format!(r#"{{"event":"deposit","tg_id":{USER},"value":"5"}}"#);
    assert_eq!(first_deposit(&s, &by_tg).await, json!(false));
    // Other kinds are neither.
    let contact = format!(r#"{{"event":"contact","uid":"{one}"}}"#);
    assert_eq!(first_deposit(&s, &contact).await, Value::Null);
    // A duplicate is not stored, so it decides nothing: another user's first is still first.
    let other = s.click(&s.a, r#"{"campaign_name":"c-two"}"#).await;
    s.bind(&s.a, &other, OTHER_USER).await;
    let other_deposit = format!(r#"{{"event":"deposit","uid":"{other}","value":"1","eid":"o-1"}}"#);
    assert_eq!(first_deposit(&s, &other_deposit).await, json!(true));
    assert_eq!(
        s.post_event(&other_deposit).await.json()["status"],
        "duplicate"
    );
    assert_eq!(
        first_deposits_by_campaign(&s).await,
        [(json!("c-one"), 1), (json!("c-two"), 1)]
    );
    // Space b's user of the same Telegram id is another customer.
    let b_click = s.click(&s.b, r#"{"campaign_name":"c-b"}"#).await;
    s.bind(&s.b, &b_click, USER).await;
    let r = s.post_as(&s.b, "/events", &deposit(&b_click)).await.json();
    assert_eq!(r["status"], "queued", "{r}");
    let b = s.read_as(&s.b, "/events").await.json();
    assert_eq!(b["events"][0]["first_deposit"], true, "{b}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_before_a_binding_makes_the_user_a_depositor() {
    let s = TestServer::start().await;
    let click = s.click(&s.a, r#"{"campaign_name":"c-before"}"#).await;
    let deposit = |uid: &str| format!(r#"{{"event":"deposit","uid":"{uid}","value":"3"}}"#);
    // Unbound: the click is the depositor.
    assert_eq!(first_deposit(&s, &deposit(&click)).await, json!(true));
    let again = format!(r#"{{"event":"deposit","uid":"{click}","value":"3.5"}}"#);
    assert_eq!(first_deposit(&s, &again).await, json!(false));
    // Bound afterwards: the user's deposits, through this click or another, are not first.
    s.bind(&s.a, &click, USER).await;
    let by_tg = format!(r#"{{"event":"deposit","tg_id":{USER},"value":"2"}}"#);
    assert_eq!(first_deposit(&s, &by_tg).await, json!(false));
    let later = s.click(&s.a, r#"{"campaign_name":"c-after"}"#).await;
    s.bind(&s.a, &later, USER).await;
    assert_eq!(first_deposit(&s, &deposit(&later)).await, json!(false));

    // A user who paid by Telegram id before any click was bound: first then, and a click bound
    // afterwards does not make the next deposit first.
    let by_other = format!(r#"{{"event":"deposit","tg_id":{OTHER_USER},"value":"4"}}"#);
    assert_eq!(first_deposit(&s, &by_other).await, json!(true));
    let after = s.click(&s.a, r#"{"campaign_name":"c-after"}"#).await;
    s.bind(&s.a, &after, OTHER_USER).await;
    assert_eq!(first_deposit(&s, &deposit(&after)).await, json!(false));

    // Neither a user nor a click: never first.
    let unknown = r#"{"event":"deposit","uid":"no-such-click","value":"1"}"#;
    assert_eq!(first_deposit(&s, unknown).await, json!(false));
    assert_eq!(
        first_deposit(&s, r#"{"event":"deposit","value":"1"}"#).await,
        json!(false)
    );
    assert_eq!(
        first_deposits_by_campaign(&s).await,
        [
            (Value::Null, 1),
            (json!("c-after"), 0),
            (json!("c-before"), 1)
        ]
    );
    s.stop().await;
}
