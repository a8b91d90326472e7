//! A space's `currency_rates` convert a deposit for its destinations that have no rate of
//! their own for its currency: a Meta delivery and a Google Ads Data Manager file, each with
//! the destination's own rate winning over the space's.

use serde_json::{Value, json};

use crate::deliveries::{bound_click, delivery_in, destination, private_server};
use crate::support::receiver::Receiver;
use crate::support::{NOW_MS, Request, TestServer, assert_queued, google_password};

/// Sets space `a`'s `currency_rates` to `XTR=0.013 USD`.
async fn space_rates_xtr(s: &TestServer) {
    let r = s
        .patch_as(
            &s.a,
            "/space",
            r#"{"currency_rates": {"XTR": "0.013 USD"}}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// What Meta's stand-in took as a deposit of 100 XTR's `custom_data`, with the Meta
/// destination's own `rates` (`None`: the field left out). Meta's custom data: "currency ...
/// Required for purchase events. ... Currency must be a valid ISO 4217 three-digit currency
/// code" (developers.facebook.com/docs/marketing-api/conversions-api/parameters/custom-data).
async fn meta_custom_data_of_100_xtr(rates: Option<Value>) -> Value {
    let s = private_server().await;
    space_rates_xtr(&s).await;
    let meta = Receiver::meta(NOW_MS).await;
    let mut fields = json!({"name": "meta", "kind": "meta_capi", "pixel_id": "1234567890",
        "access_token": "EAAB-token-wxyz", "graph_url": meta.url("")});
    if let Some(rates) = rates {
        fields["currency_rates"] = rates;
    }
    destination(&s, &s.a, &fields).await;
    let uid = bound_click(&s, "fbclid", "IwAR-1", 777_000_111).await;
    let inbox_id = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","eid":"s-1","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    delivery_in(&s, inbox_id, "delivered").await;
    let sent = meta.received()[0].json()["data"][0]["custom_data"].clone();
    s.stop().await;
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_destination_without_rates_converts_by_the_spaces() {
    assert_eq!(
        meta_custom_data_of_100_xtr(None).await,
        json!({"value": 1.3, "currency": "USD"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_destinations_own_rate_wins_over_the_spaces() {
    assert_eq!(
        meta_custom_data_of_100_xtr(Some(json!({"XTR": "0.02 USD"}))).await,
        json!({"value": 2.0, "currency": "USD"})
    );
}

/// The deposit row of a Data Manager file for a deposit of 100 XTR, with the Google Ads
/// destination's own `rates`. Google's click conversion takes a currency that "is the ISO 4217
/// 3-character currency code" (developers.google.com/google-ads/api/reference/rpc/ClickConversion).
async fn google_row_of_100_xtr(rates: Option<Value>) -> String {
    let s = TestServer::start().await;
    space_rates_xtr(&s).await;
    let mut fields = json!({"name": "google", "kind": "google_ads"});
    if let Some(rates) = rates {
        fields["currency_rates"] = rates;
    }
    let r = s.post_as(&s.a, "/destinations", &fields.to_string()).await;
    let password = google_password(&r, 201);
    let uid = s.click(&s.a, r#"{"gclid":"gclid-xtr"}"#).await;
    assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    let auth = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("google:{password}"),
    );
    let file = s
        .send(
            &Request::get(&format!("/conversions/{}/google/deposit.csv", s.a.name))
                .header("Authorization", format!("Basic {auth}")),
        )
        .await;
    assert_eq!(file.status, 200, "{}", file.text());
    let row = file.text().lines().nth(1).unwrap_or_default().to_owned();
    s.stop().await;
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_google_file_without_rates_converts_by_the_spaces() {
    let row = google_row_of_100_xtr(None).await;
    assert!(
        row.starts_with("gclid-xtr,") && row.contains(",1.3,USD,"),
        "{row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_google_destinations_own_rate_wins_over_the_spaces() {
    let row = google_row_of_100_xtr(Some(json!({"XTR": "0.02 USD"}))).await;
    assert!(
        row.starts_with("gclid-xtr,") && row.contains(",2,USD,"),
        "{row}"
    );
}
