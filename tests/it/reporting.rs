//! Money in one currency (`docs/api.md#reporting-currency`): a space's reporting currency and
//! rates, `GET /stats` and the dashboard showing revenue, cost and return in it with the amounts
//! as they came beside, and a currency without a rate named with where to add one.

use serde_json::{Value, json};

use tracker::clock::Clock as _;

use crate::admin_page::{get_page, logged_in};
use crate::support::{TestServer, assert_error};

/// A click of campaign `mixed` with deposits of 100 EUR, 50.50 USD and 1000 XTR, and a cost of
/// 100 USD today.
async fn mixed_campaign(s: &TestServer) -> String {
    let uid = s.click(&s.a, r#"{"campaign_name":"mixed"}"#).await;
    for (value, currency) in [("100", "EUR"), ("50.50", "USD"), ("1000", "XTR")] {
        let r = s
            .post_event(&format!(
                r#"{{"event":"deposit","uid":"{uid}","value":"{value}","currency":"{currency}"}}"#
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let today = jiff::Timestamp::from_millisecond(i64::try_from(s.clock.now_ms()).unwrap())
        .unwrap()
        .in_tz("UTC")
        .unwrap()
        .date();
    let r = s
        .post_as(
            &s.a,
            "/costs",
            &format!(
                r#"{{"day":"{today}","campaign_name":"mixed","amount":"100","currency":"USD"}}"#
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    uid
}

/// `reported` of campaign `mixed` in `GET /stats`.
async fn reported(s: &TestServer) -> Value {
    let stats = s.read_as(&s.a, "/stats?by=campaign_name").await.json();
    stats["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "mixed")
        .unwrap_or_else(|| panic!("no campaign mixed in {stats}"))["reported"]
        .clone()
}

/// Deposits in EUR, USD and XTR and costs in USD show one ROI in USD once the space has rates;
/// before, and for a currency no rate converts, the answer names it with its fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_currencies_make_one_return_in_the_reporting_currency() {
    let s = TestServer::start().await;
    let uid = mixed_campaign(&s).await;
    let before = reported(&s).await;
    assert_eq!(
        (
            &before["currency"],
            &before["roi"],
            &before["missing_rates"]
        ),
        (&json!("USD"), &Value::Null, &json!(["EUR", "XTR"])),
        "{before}"
    );
    let fix = before["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("no rate for EUR, XTR into USD: Settings -> currency rates"),
        "{fix}"
    );
    let r = s
        .patch_as(
            &s.a,
            "/space",
            r#"{"currency_rates": {"EUR": "1.08 USD", "XTR": "0.013 USD"}}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["settings"]["currency_rates"],
        json!({"EUR": "1.08 USD", "XTR": "0.013 USD"})
    );
    // 108 + 50.50 + 13 earned, 100 spent, one click, one first deposit.
    assert_eq!(
        reported(&s).await,
        json!({"currency": "USD", "revenue": "171.50", "cost": "100.00", "roi": "0.7150",
            "cpa": "100.0000", "epc": "171.5000", "missing_rates": [], "fix": null})
    );
    // In EUR: the USD amounts by the EUR rate inverted, XTR through USD.
    let r = s
        .patch_as(&s.a, "/space", r#"{"reporting_currency": "eur"}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let in_eur = reported(&s).await;
    assert_eq!(
        (
            &in_eur["currency"],
            &in_eur["revenue"],
            &in_eur["cost"],
            &in_eur["roi"]
        ),
        (
            &json!("EUR"),
            &json!("158.80"),
            &json!("92.59"),
            &json!("0.7150")
        ),
        "{in_eur}"
    );
    // A typo'd currency: named, with its fix, and no return that silently left it out.
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","value":"500","currency":"rubles"}}"#
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typo = reported(&s).await;
    assert_eq!(
        (&typo["missing_rates"], &typo["roi"], &typo["revenue"]),
        (&json!(["RUBLES"]), &Value::Null, &Value::Null),
        "{typo}"
    );
    assert!(
        typo["fix"]
            .as_str()
            .unwrap()
            .starts_with("no rate for RUBLES into EUR: Settings -> currency rates"),
        "{typo}"
    );
    s.stop().await;
}

/// A rate or reporting currency that breaks its rule is refused naming the setting, and the
/// settings stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rate_is_refused_and_changes_nothing() {
    let s = TestServer::start().await;
    let ok = s
        .patch_as(
            &s.a,
            "/space",
            r#"{"currency_rates": {"XTR": "0.013 USD"}}"#,
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    for (body, field) in [
        (r#"{"currency_rates": {"EUR": "1.08"}}"#, "currency_rates"),
        (r#"{"currency_rates": {"EUR": "-1 USD"}}"#, "currency_rates"),
        (r#"{"reporting_currency": "US"}"#, "reporting_currency"),
    ] {
        let r = s.patch_as(&s.a, "/space", body).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    let wrong_type = s
        .patch_as(&s.a, "/space", r#"{"currency_rates": "XTR=1 USD"}"#)
        .await;
    assert_error(&wrong_type, 400, "invalid_json", Some("currency_rates"));
    let space = s.read_as(&s.a, "/space").await.json();
    assert_eq!(
        (
            &space["settings"]["currency_rates"],
            &space["settings"]["reporting_currency"]
        ),
        (&json!({"XTR": "0.013 USD"}), &json!("")),
        "{space}"
    );
    s.stop().await;
}

/// The dashboard shows the period's revenue and return in the reporting currency with the
/// amounts as they came beside, and a missing rate in red with a link to where it is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_one_return_and_names_a_missing_rate() {
    let s = TestServer::start().await;
    let cookie = logged_in(&s).await;
    mixed_campaign(&s).await;
    let page = get_page(&s, Some(&cookie), "/admin/spaces/a/dashboard?days=7").await;
    let text = page.text();
    assert!(text.contains("id=\"missing-rates\""), "{text}");
    assert!(
        text.contains("no rate for EUR, XTR into USD")
            && text.contains("href=\"/admin/spaces/a/settings#currency_rates\""),
        "{text}"
    );
    let r = s
        .patch_as(
            &s.a,
            "/space",
            r#"{"currency_rates": {"EUR": "1.08 USD", "XTR": "0.013 USD"}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    let text = get_page(&s, Some(&cookie), "/admin/spaces/a/dashboard?days=7")
        .await
        .text();
    assert!(!text.contains("id=\"missing-rates\""), "{text}");
    assert!(
        text.contains("171.50 USD (100 EUR, 50.50 USD, 1000 XTR)"),
        "{text}"
    );
    assert!(text.contains(">71.50%<"), "{text}");
    s.stop().await;
}

/// `revenue` of each group of `GET /stats?by=...`, by its name.
async fn revenue_by(s: &TestServer, by: &str) -> Vec<(Value, Value)> {
    let stats = s.read_as(&s.a, &format!("/stats?by={by}")).await.json();
    stats["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("{stats}"))
        .iter()
        .map(|g| (g["group"].clone(), g["reported"]["revenue"].clone()))
        .collect()
}

/// A day's deposits convert at the rates in force that day: 100 EUR yesterday at 1.10 and
/// 100 EUR today at 1.20 are 110 and 120 USD, each day, the campaign and the dashboard's total
/// alike; today's rate does not rewrite yesterday.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_day_converts_at_the_rate_in_force_on_it() {
    let s = TestServer::start().await;
    let uid = s.click(&s.a, r#"{"campaign_name":"euro"}"#).await;
    let deposit_and_rate = |rate: &'static str| {
        let uid = uid.clone();
        let s = &s;
        async move {
            let deposit =
                format!(r#"{{"event":"deposit","uid":"{uid}","value":"100","currency":"EUR"}}"#);
            let r = s.post_event(&deposit).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let rates = format!(r#"{{"currency_rates": {{"EUR": "{rate} USD"}}}}"#);
            let r = s.patch_as(&s.a, "/space", &rates).await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
    };
    deposit_and_rate("1.10").await;
    let yesterday = jiff::Timestamp::from_millisecond(i64::try_from(s.clock.now_ms()).unwrap())
        .unwrap()
        .in_tz("UTC")
        .unwrap()
        .date();
    s.clock.advance(24 * 3_600_000);
    deposit_and_rate("1.20").await;
    let today = yesterday.tomorrow().unwrap();
    assert_eq!(
        revenue_by(&s, "day").await,
        [
            (json!(yesterday.to_string()), json!("110.00")),
            (json!(today.to_string()), json!("120.00"))
        ]
    );
    assert_eq!(
        revenue_by(&s, "campaign_name").await,
        [(json!("euro"), json!("230.00"))],
        "each day at its own rate, not 240 at today's"
    );
    let space = s.read_as(&s.a, "/space").await.json();
    assert_eq!(
        space["settings"]["currency_rates"],
        json!({"EUR": "1.20 USD"}),
        "the rates in force now"
    );
    // The same rates again (a Settings form saved as it was) are no new set.
    let again = s
        .patch_as(&s.a, "/space", r#"{"currency_rates": {"EUR": "1.20 USD"}}"#)
        .await;
    assert_eq!(again.status, 200, "{}", again.text());
    let app = s.app.clone().unwrap();
    let name = s.a.name.clone();
    let no = app.store.read(move |t| t.space_no(&name)).await.unwrap();
    let space = tracker::domain::keyring::SpaceRef {
        no,
        name: "a".into(),
    };
    let history = app.reporting(&space).await.unwrap().history;
    assert_eq!(history.changes_within(0, u32::MAX).len(), 2, "{history:?}");
    // Logged in now: a session of yesterday has ended.
    let cookie = logged_in(&s).await;
    let text = get_page(&s, Some(&cookie), "/admin/spaces/a/dashboard?days=7")
        .await
        .text();
    // The period's total and the campaign's row alike.
    assert_eq!(text.matches("230.00 USD (200 EUR)").count(), 2, "{text}");
    assert!(!text.contains("240.00"), "{text}");
    s.stop().await;
}
