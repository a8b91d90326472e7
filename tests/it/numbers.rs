//! The marketer's numbers (`docs/api.md#first-deposits`, `#costs`, `#stats`): first deposits
//! decided when a deposit is written, costs, and the stats that put them together.

use serde_json::{Value, json};

use tracker::clock::Clock as _;

use crate::support::{
    Mix, Request, TestServer, assert_error, assert_succeeded, event_answer, first_start, run_cli,
    send, stop_cleanly,
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

/// `(group, clicks, deposits)` of each group of `GET /stats?by=<by>`.
async fn ad_groups(s: &TestServer, by: &str) -> Vec<(Value, Value, Value)> {
    let r = s.read_as(&s.a, &format!("/stats?by={by}")).await.json();
    assert_eq!(r["by"], by);
    r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["group"].clone(),
                g["clicks"].clone(),
                g["events"]["deposit"].clone(),
            )
        })
        .collect()
}

/// The ad (`utm_content`) and the ad set (`utm_term`) of a click's query are groups of their
/// own, with the click's events; a click without them is in the group `null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_group_by_ad_and_ad_set() {
    let s = TestServer::start().await;
    let ad = s
        .click(
            &s.a,
            r#"{"campaign_name":"c","raw_query":"utm_content=red%20shoes&utm_term=women-25"}"#,
        )
        .await;
    let other = s
        .click(&s.a, r#"{"raw_query":"utm_term=women-25&x=1"}"#)
        .await;
    s.click(&s.a, r#"{"raw_query":"utm_content="}"#).await;
    for uid in [&ad, &other] {
        let r = s
            .post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","value":"2"}}"#
            ))
            .await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        ad_groups(&s, "utm_content").await,
        [
            (Value::Null, json!(2), json!(1)),
            (json!("red shoes"), json!(1), json!(1))
        ]
    );
    assert_eq!(
        ad_groups(&s, "utm_term").await,
        [
            (Value::Null, json!(1), json!(0)),
            (json!("women-25"), json!(2), json!(2))
        ]
    );
    s.stop().await;
}

/// Each cost as `day campaign amount currency`.
fn cost_lines(costs: &Value) -> Vec<String> {
    let text = |c: &Value, f: &str| c[f].as_str().unwrap().to_owned();
    costs
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let [day, campaign, amount, currency] =
                ["day", "campaign_name", "amount", "currency"].map(|f| text(c, f));
            format!("{day} {campaign} {amount} {currency}")
        })
        .collect()
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
                "campaign_name": "autumn-fb", "adset_name": "", "ad_name": "",
                "amount": "120.00", "currency": "USD", "source": "hand"}})
        )
    );
    post(r#"{"day":"2026-11-25","campaign_name":"autumn-fb","amount":0.1,"currency":"USD"}"#).await;
    post(r#"{"day":"2026-11-24","campaign_name":"spring","amount":"5","currency":"EUR"}"#).await;
    // Again: replaces, in another currency too.
    post(r#"{"day":"2026-11-24","campaign_name":"autumn-fb","amount":"99.5","currency":"EUR"}"#)
        .await;
    let seen = cost_lines(&costs(&s, "").await);
    assert_eq!(
        seen,
        [
            "2026-11-24 autumn-fb 99.5 EUR",
            "2026-11-24 spring 5 EUR",
            "2026-11-25 autumn-fb 0.1 USD",
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
// Import, list, refuse, re-import, then show: one server, one long story.
#[allow(clippy::too_many_lines)]
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
        cost_lines(&r.json()["costs"])
    };
    let ok = |out: std::process::Output| {
        assert_succeeded(&out);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let ours = "day,campaign_name,amount,currency\n2026-11-24,autumn,120.00,USD\n2026-11-25,autumn,80,USD\n";
    assert_eq!(
        ok(import("ours.csv", ours)),
        "2 rows: 2 costs set, 0 removed, over 2 days (2026-11-24 to 2026-11-25) and 1 campaign."
    );
    let meta = "\u{feff}Campaign name,Day,Amount spent (EUR),Reporting starts\nwinter,2026-11-25,10.50,2026-11-01\nautumn,2026-11-25,7,2026-11-01\n";
    assert_eq!(
        ok(import("meta.csv", meta)),
        "2 rows: 2 costs set, 0 removed, over 1 day (2026-11-25) and 2 campaigns."
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
        "2 rows: 1 cost set, 1 removed, over 2 days (2026-11-24 to 2026-11-25) and 2 campaigns."
    );
    assert_eq!(
        listed(),
        ["2026-11-25 autumn 7 EUR", "2026-11-25 winter 11 EUR"]
    );

    // `tracker stats` shows them, by campaign and by day, over a range of days.
    let stats = |args: &[&str]| ok(run_cli(dir.path(), &data, args));
    let text = stats(&["stats", "default"]);
    assert!(
        text.lines().any(|l| l.starts_with("winter")
            && l.ends_with("— / 11 EUR / -100.00% / — / — | — / no rate / no rate / — / —")),
        "{text}"
    );
    let json_out = stats(&[
        "--json",
        "stats",
        "default",
        "--by",
        "day",
        "--from",
        "2026-11-25",
        "--to",
        "2026-11-25",
    ]);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(v["groups"][0]["group"], "2026-11-25", "{v}");
    assert_eq!(v["groups"][0]["cost"], json!({"EUR": "18"}), "{v}");
    // One campaign: its own days, with its own cost only; a name past the bound is refused.
    let one = |campaign: &str| {
        let out = stats(&[
            "--json",
            "stats",
            "default",
            "--by",
            "day",
            "--campaign",
            campaign,
        ]);
        serde_json::from_str::<Value>(&out).unwrap()["groups"].clone()
    };
    let autumn = one("autumn");
    assert_eq!(autumn[0]["group"], "2026-11-25", "{autumn}");
    assert_eq!(autumn[0]["cost"], json!({"EUR": "7"}), "{autumn}");
    assert_eq!(autumn.as_array().unwrap().len(), 1, "{autumn}");
    assert_eq!(one("nobody"), json!([]));
    let long = "c".repeat(257);
    let out = run_cli(
        dir.path(),
        &data,
        ["stats", "default", "--campaign", long.as_str()],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`campaign` must be at most 256"), "{err}");
    let none = stats(&[
        "--json",
        "stats",
        "default",
        "--by",
        "day",
        "--to",
        "2026-11-24",
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&none).unwrap()["groups"],
        json!([])
    );
    let out = run_cli(dir.path(), &data, ["stats", "default", "--by", "week"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("by must be"));
    stop_cleanly(process);
}

/// `n / d` rounded half away from zero to 4 decimals, as text: the test's own arithmetic.
fn ratio(n: i128, d: i128) -> String {
    let (q, r) = (n * 10_000 / d, n * 10_000 % d);
    let q = if r.abs() * 2 >= d.abs() {
        q + (n.signum() * d.signum())
    } else {
        q
    };
    let sign = if q < 0 { "-" } else { "" };
    format!("{sign}{}.{:04}", q.abs() / 10_000, q.abs() % 10_000)
}

/// Cents of an exact decimal string with at most two decimals.
fn cents(text: &str) -> i128 {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let negative = int.starts_with('-');
    let whole: i128 = int.trim_start_matches('-').parse().unwrap();
    let frac: i128 = format!("{frac:0<2}").parse().unwrap();
    let c = whole * 100 + frac;
    if negative { -c } else { c }
}

/// The calendar day of `ms` in `zone`, as the test reckons it (the tracker's own reckoning
/// goes by quarter rows; this goes straight from the instant).
fn day_in(zone: &str, ms: u64) -> String {
    let t = jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap()).unwrap();
    t.in_tz(zone).unwrap().date().to_string()
}

/// What one group must answer, counted by the test.
#[derive(Default, Debug)]
struct Expected {
    clicks: i128,
    bound: i128,
    registrations: i128,
    first_deposits: i128,
    revenue: std::collections::BTreeMap<String, i128>,
    cost: std::collections::BTreeMap<String, i128>,
}

impl Expected {
    /// The derived figures, as the answer writes them.
    fn figures(&self) -> Value {
        let money = |m: &std::collections::BTreeMap<String, i128>| -> Value {
            m.iter()
                .map(|(c, v)| (c.clone(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let mut roi = serde_json::Map::new();
        let mut cpa = serde_json::Map::new();
        for (c, spent) in &self.cost {
            if self.revenue.keys().all(|r| r == c) {
                let earned = self.revenue.get(c).copied().unwrap_or(0);
                roi.insert(c.clone(), json!(ratio(earned - spent, *spent)));
            }
            if self.first_deposits > 0 {
                cpa.insert(c.clone(), json!(ratio(*spent, self.first_deposits * 100)));
            }
        }
        let epc: serde_json::Map<_, _> = if self.clicks > 0 {
            self.revenue
                .iter()
                .map(|(c, v)| (c.clone(), json!(ratio(*v, self.clicks * 100))))
                .collect()
        } else {
            serde_json::Map::new()
        };
        let rate = |n: i128, d: i128| {
            if d == 0 {
                Value::Null
            } else {
                json!(ratio(n, d))
            }
        };
        json!({
            "clicks": self.clicks, "bound_clicks": self.bound, "first_deposits": self.first_deposits,
            "registrations": self.registrations,
            "deposits": money(&self.revenue), "cost": money(&self.cost),
            "roi": roi, "cpa": cpa, "epc": epc,
            "rates": {"bound": rate(self.bound, self.clicks),
                "registration": rate(self.registrations, self.bound),
                "first_deposit": rate(self.first_deposits, self.registrations)},
        })
    }
}

/// The same figures read from an answer's group (sums as cents).
fn answered(g: &Value) -> Value {
    let money = |m: &Value| -> Value {
        m.as_object()
            .unwrap()
            .iter()
            .map(|(c, v)| (c.clone(), json!(cents(v.as_str().unwrap()))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    json!({
        "clicks": g["clicks"], "bound_clicks": g["bound_clicks"],
        "first_deposits": g["first_deposits"], "registrations": g["events"]["registration"],
        "deposits": money(&g["deposits"]), "cost": money(&g["cost"]),
        "roi": g["roi"], "cpa": g["cpa"], "epc": g["epc"], "rates": funnel_rates(g),
    })
}

/// Stats by campaign, day, link, ad and ad set, of every campaign and of each one (its
/// drill-down), with costs, equal what the test counts from the feed and the costs it set, over
/// random mixes of clicks, bindings (before and after deposits), events, duplicates and costs
/// across a day boundary of the space's time zone: UTC, zones at :30 and :45, and Berlin's DST
/// changes in March (a 23-hour day) and October (25 hours).
// The mix, then the count: long by nature.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_with_costs_equal_a_count_made_from_the_feed() {
    const DAY: u64 = 86_400_000;
    const QUARTER: u64 = 900_000;
    for (seed, zone, start) in [
        (3u64, "UTC", "2027-01-14T18:00"),
        (11, "Asia/Kolkata", "2026-11-23T18:00"),
        (2024, "Asia/Kathmandu", "2026-11-23T17:45"),
        (77_777, "Europe/Berlin", "2026-03-28T19:00"),
        (5, "Europe/Berlin", "2026-10-24T19:00"),
    ] {
        let s = TestServer::start().await;
        let patch = format!(r#"{{"time_zone":"{zone}"}}"#);
        assert_eq!(s.patch_as(&s.a, "/space", &patch).await.status, 200);
        let start: jiff::civil::DateTime = start.parse().unwrap();
        let day0 = u64::try_from(start.in_tz(zone).unwrap().timestamp().as_millisecond()).unwrap();
        s.clock.set(day0);
        let seed = seed + 1;
        let mut rng = Mix(seed * 2_654_435_761 + 1);
        let campaigns = ["c1", "c2", ""];
        // Each click: its uid, campaign, time, whether a binding took it, and its link, ad and
        // ad set ("" for none).
        let mut clicks: Vec<(String, &str, u64, bool, [&str; 3])> = Vec::new();
        for step in 0..60 {
            s.clock.advance(QUARTER);
            match rng.next(6) {
                0 | 1 => {
                    let c = campaigns[rng.next(3) as usize];
                    let link = ["l1", "l2", ""][rng.next(3) as usize];
                    let ad = ["ad1", "ad2", ""][rng.next(3) as usize];
                    let ad_set = ["s1", ""][rng.next(2) as usize];
                    let mut fields = vec![format!(
                        r#""raw_query":"x=1&utm_content={ad}&utm_term={ad_set}""#
                    )];
                    for (name, value) in [("campaign_name", c), ("link_slug", link)] {
                        if !value.is_empty() {
                            fields.push(format!(r#""{name}":"{value}""#));
                        }
                    }
                    let uid = s.click(&s.a, &format!("{{{}}}", fields.join(","))).await;
                    clicks.push((uid, c, s.clock.now_ms(), false, [link, ad, ad_set]));
                }
                2 if !clicks.is_empty() => {
                    let i = rng.next(clicks.len() as u64) as usize;
                    let r = s.bind(&s.a, &clicks[i].0, 1 + rng.next(4)).await;
                    assert_eq!(r.status, 200, "{}", r.text());
                    clicks[i].3 = true;
                }
                _ => {
                    let kind =
                        ["contact", "registration", "deposit", "deposit"][rng.next(4) as usize];
                    let who = match rng.next(4) {
                        0 => format!(r#""tg_id":{}"#, 1 + rng.next(5)),
                        1 => r#""uid":"unknown""#.to_owned(),
                        _ if clicks.is_empty() => r#""uid":"none-yet""#.to_owned(),
                        _ => format!(
                            r#""uid":"{}""#,
                            clicks[rng.next(clicks.len() as u64) as usize].0
                        ),
                    };
                    let value = ["1.10", "2", "3.33", "0.05"][rng.next(4) as usize];
                    let currency = ["USD", "USD", "EUR"][rng.next(3) as usize];
                    // Repeated eids are duplicates: they must not count.
                    let body = format!(
                        r#"{{"event":"{kind}",{who},"value":"{value}","currency":"{currency}","eid":"e{}-{}"}}"#,
                        rng.next(3),
                        step % 4
                    );
                    let r = s.post_event(&body).await;
                    assert_eq!(r.status, 200, "{body}: {}", r.text());
                }
            }
        }
        // Costs: campaigns on both days, some twice (the second replaces the first).
        let cost_days = [day_in(zone, day0), day_in(zone, day0 + DAY)];
        let mut costs: std::collections::BTreeMap<(String, &str), (i128, &str)> =
            std::collections::BTreeMap::new();
        for _ in 0..5 {
            let day = &cost_days[rng.next(2) as usize];
            let c = ["c1", "c2", "c3"][rng.next(3) as usize];
            let amount = 1 + i128::from(rng.next(50_000) as u32);
            let currency = ["USD", "USD", "EUR"][rng.next(3) as usize];
            let body = format!(
                r#"{{"day":"{day}","campaign_name":"{c}","amount":"{}.{:02}","currency":"{currency}"}}"#,
                amount / 100,
                amount % 100
            );
            assert_eq!(s.post_as(&s.a, "/costs", &body).await.status, 200);
            costs.insert((day.clone(), c), (amount, currency));
        }
        let page = s.read_as(&s.a, "/events?limit=1000").await.json();
        let events = page["events"].as_array().unwrap().clone();
        let of_uid: std::collections::BTreeMap<&str, [&str; 3]> = clicks
            .iter()
            .map(|(uid, _, _, _, groups)| (uid.as_str(), *groups))
            .collect();
        let dimensions = [
            "campaign_name",
            "day",
            "link_slug",
            "utm_content",
            "utm_term",
        ];
        // Every campaign, then each one alone: with clicks, with costs only (c3), with nothing.
        for one in [None, Some("c1"), Some("c2"), Some("c3"), Some("nobody")] {
            for by in dimensions {
                let mut expected: std::collections::BTreeMap<Option<String>, Expected> =
                    std::collections::BTreeMap::new();
                let name = |c: &str| (!c.is_empty()).then(|| c.to_owned());
                let group = |campaign: &str, at: u64, groups: [&str; 3]| match by {
                    "day" => Some(day_in(zone, at)),
                    "campaign_name" => name(campaign),
                    "link_slug" => name(groups[0]),
                    "utm_content" => name(groups[1]),
                    _ => name(groups[2]),
                };
                let counted = |campaign: &str| one.is_none_or(|o| o == campaign);
                for (_, c, at, bound, groups) in &clicks {
                    if counted(c) {
                        let e = expected.entry(group(c, *at, *groups)).or_default();
                        e.clicks += 1;
                        e.bound += i128::from(*bound);
                    }
                }
                for ev in &events {
                    let c = ev["campaign_name"].as_str().unwrap_or("");
                    if !counted(c) {
                        continue;
                    }
                    let at = ev["occurred_at_ms"].as_u64().unwrap();
                    let groups = ev["uid"]
                        .as_str()
                        .and_then(|u| of_uid.get(u))
                        .copied()
                        .unwrap_or_default();
                    let e = expected.entry(group(c, at, groups)).or_default();
                    match ev["event"].as_str().unwrap() {
                        "registration" => e.registrations += 1,
                        "deposit" => {
                            let currency = ev["currency"].as_str().unwrap().to_owned();
                            *e.revenue.entry(currency).or_default() +=
                                cents(ev["value"].as_str().unwrap());
                            e.first_deposits += i128::from(ev["first_deposit"] == json!(true));
                        }
                        _ => {}
                    }
                }
                // A cost belongs to a campaign's day: by campaign and by day only.
                for ((day, c), (amount, currency)) in &costs {
                    let g = match by {
                        "day" => day.clone(),
                        "campaign_name" => (*c).to_owned(),
                        _ => continue,
                    };
                    if counted(c) {
                        *expected
                            .entry(Some(g))
                            .or_default()
                            .cost
                            .entry((*currency).to_owned())
                            .or_default() += amount;
                    }
                }
                let filter = one.map(|o| format!("&campaign={o}")).unwrap_or_default();
                let answer = s
                    .read_as(&s.a, &format!("/stats?by={by}{filter}"))
                    .await
                    .json();
                let got: std::collections::BTreeMap<Option<String>, Value> = answer["groups"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{answer}"))
                    .iter()
                    .map(|g| (g["group"].as_str().map(str::to_owned), answered(g)))
                    .collect();
                let want: std::collections::BTreeMap<Option<String>, Value> = expected
                    .iter()
                    .map(|(g, e)| (g.clone(), e.figures()))
                    .collect();
                assert_eq!(got, want, "seed {seed} {zone} by {by} of {one:?}");
            }
        }
        s.stop().await;
    }
}

/// A group's funnel rates, without the view-to-click rate: no landing page here (views are
/// tested in `landing::`), so it is `null` and left out.
fn funnel_rates(g: &Value) -> Value {
    let mut rates = g["rates"].clone();
    assert_eq!(rates["view_to_click"], Value::Null, "{g}");
    rates.as_object_mut().unwrap().remove("view_to_click");
    rates
}
