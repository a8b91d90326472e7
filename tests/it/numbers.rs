//! The marketer's numbers (`docs/api.md#first-deposits`, `#costs`, `#stats`): first deposits
//! decided when a deposit is written, costs, and the stats that put them together.

use serde_json::{Value, json};

use crate::support::{
    Request, TestServer, assert_error, event_answer, first_start, run_cli, send, stop_cleanly,
};

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

/// `GET /costs` as space `a`: the costs.
async fn costs(s: &TestServer, query: &str) -> Value {
    let r = s.read_as(&s.a, &format!("/costs{query}")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["costs"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_is_set_replaced_listed_and_removed() {
    let s = TestServer::start().await;
    let post = |body: &'static str| s.post_as(&s.a, "/costs", body);
    let r = post(
        r#"{"day":"2026-11-24","campaign_name":"autumn-fb","amount":"120.00","currency":"usd"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"ok": true, "removed": false, "cost": {"day": "2026-11-24",
                "campaign_name": "autumn-fb", "amount": "120.00", "currency": "USD"}})
        )
    );
    post(r#"{"day":"2026-11-25","campaign_name":"autumn-fb","amount":0.1,"currency":"USD"}"#).await;
    post(r#"{"day":"2026-11-24","campaign_name":"spring","amount":"5","currency":"EUR"}"#).await;
    // Again: replaces, in another currency too.
    post(r#"{"day":"2026-11-24","campaign_name":"autumn-fb","amount":"99.5","currency":"EUR"}"#)
        .await;
    let all = costs(&s, "").await;
    let seen: Vec<_> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                c["day"], c["campaign_name"], c["amount"], c["currency"]
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            r#""2026-11-24" "autumn-fb" "99.5" "EUR""#,
            r#""2026-11-24" "spring" "5" "EUR""#,
            r#""2026-11-25" "autumn-fb" "0.1" "USD""#,
        ]
    );
    // Both bounds included.
    assert_eq!(
        costs(&s, "?from=2026-11-25&to=2026-11-25")
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        costs(&s, "?to=2026-11-24").await.as_array().unwrap().len(),
        2
    );
    assert_eq!(costs(&s, "?from=2026-11-26").await, json!([]));
    // 0 removes it.
    let r =
        post(r#"{"day":"2026-11-25","campaign_name":"autumn-fb","amount":"0","currency":"USD"}"#)
            .await;
    assert_eq!(r.json()["removed"], true);
    assert_eq!(costs(&s, "?from=2026-11-25").await, json!([]));
    // Space b has none of them.
    assert_eq!(s.read_as(&s.b, "/costs").await.json()["costs"], json!([]));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_cost_is_refused_naming_its_field_and_changes_nothing() {
    let s = TestServer::start().await;
    for (body, code, field) in [
        (
            r#"{"campaign_name":"a","amount":"1","currency":"USD"}"#,
            "missing_field",
            "day",
        ),
        (
            r#"{"day":"2026-02-30","campaign_name":"a","amount":"1","currency":"USD"}"#,
            "invalid_field",
            "day",
        ),
        (
            r#"{"day":"1969-12-31","campaign_name":"a","amount":"1","currency":"USD"}"#,
            "invalid_field",
            "day",
        ),
        (
            r#"{"day":"2026-11-24","campaign_name":"","amount":"1","currency":"USD"}"#,
            "invalid_field",
            "campaign_name",
        ),
        (
            r#"{"day":"2026-11-24","campaign_name":"a","amount":"-0.01","currency":"USD"}"#,
            "invalid_value",
            "amount",
        ),
        (
            r#"{"day":"2026-11-24","campaign_name":"a","amount":"1","currency":"US"}"#,
            "invalid_currency",
            "currency",
        ),
        (
            r#"{"day":"2026-11-24","campaign_name":"a","amount":"1"}"#,
            "missing_field",
            "currency",
        ),
    ] {
        let r = s.post_as(&s.a, "/costs", body).await;
        assert_error(&r, 422, code, Some(field));
    }
    let r = s
        .read_as(&s.a, "/costs?from=2026-11-25&to=2026-11-24")
        .await;
    assert_error(&r, 422, "invalid_field", Some("to"));
    let r = s.read_as(&s.a, "/costs?from=yesterday").await;
    assert_error(&r, 422, "invalid_field", Some("from"));
    assert_eq!(costs(&s, "").await, json!([]));
    // The ingest token does not set costs.
    let r = s.get_as(&s.a, "/costs", "").await;
    assert_error(&r, 401, "unauthorized", None);
    s.stop().await;
}

/// `tracker costs import`: our columns and Meta's export header, a bad row named by its line
/// (and nothing imported), and a second import replacing the first's days.
#[test]
fn the_command_line_imports_costs_from_both_headers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let (process, creds) = first_start(dir.path());
    let import = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).unwrap();
        run_cli(dir.path(), &data, ["costs", "import", "default", name])
    };
    let listed = || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let r = runtime.block_on(send(
            process.addr,
            &Request::get("/costs").header("Authorization", format!("Bearer {}", creds.secret)),
        ));
        r.json()["costs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} {}",
                    c["day"].as_str().unwrap(),
                    c["campaign_name"].as_str().unwrap(),
                    c["amount"].as_str().unwrap(),
                    c["currency"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let ours = "day,campaign_name,amount,currency\n2026-11-24,autumn,120.00,USD\n2026-11-25,autumn,80,USD\n";
    assert_eq!(
        ok(import("ours.csv", ours)),
        "space default: 2 cost(s) set, 0 removed"
    );
    let meta = "\u{feff}Campaign name,Day,Amount spent (EUR),Reporting starts\nwinter,2026-11-25,10.50,2026-11-01\nautumn,2026-11-25,7,2026-11-01\n";
    assert_eq!(
        ok(import("meta.csv", meta)),
        "space default: 2 cost(s) set, 0 removed"
    );
    assert_eq!(
        listed(),
        [
            "2026-11-24 autumn 120.00 USD",
            "2026-11-25 autumn 7 EUR",
            "2026-11-25 winter 10.50 EUR"
        ]
    );
    // A bad row: named by its line, and nothing of the file is imported.
    let bad =
        "day,campaign_name,amount,currency\n2026-11-26,autumn,1,USD\n2026-11-27,autumn,one,USD\n";
    let out = import("bad.csv", bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3: amount"), "{err}");
    assert_eq!(listed().len(), 3);
    // Re-import: the same days and campaigns are replaced; 0 removes.
    let again =
        "day,campaign_name,amount,currency\n2026-11-24,autumn,0,USD\n2026-11-25,winter,11,EUR\n";
    assert_eq!(
        ok(import("again.csv", again)),
        "space default: 1 cost(s) set, 1 removed"
    );
    assert_eq!(
        listed(),
        ["2026-11-25 autumn 7 EUR", "2026-11-25 winter 11 EUR"]
    );
    stop_cleanly(process);
}
