//! The ECB's reference rates fetched for a space's stats (`docs/api.md#reporting-currency`),
//! against a stand-in on loopback that serves the daily file as the ECB documents it: "The
//! reference rates are usually updated at around 16:00 CET every working day" and are given
//! "against the euro" as "1 EUR = x units of the currency"
//! (<https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/html/index.en.html>;
//! the file: <https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml>, a
//! `<Cube time='YYYY-MM-DD'>` of `<Cube currency='USD' rate='1.0812'/>`). A refused answer
//! or a body that is not the file changes nothing.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use tracker::clock::Clock as _;

use crate::deliveries::private_server;
use crate::support::loopback::{Listening, listen, read_request};
use crate::support::{TestServer, assert_error};

/// The daily file as the ECB serves it, for `day`.
fn daily_file(day: &str, usd: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<gesmes:Envelope \
         xmlns:gesmes=\"http://www.gesmes.org/xml/2002-08-01\" \
         xmlns=\"http://www.ecb.int/vocabulary/2002-08-01/eurofxref\">\n\
         \t<gesmes:subject>Reference rates</gesmes:subject>\n\t<gesmes:Sender>\n\
         \t\t<gesmes:name>European Central Bank</gesmes:name>\n\t</gesmes:Sender>\n\t<Cube>\n\
         \t\t<Cube time='{day}'>\n\t\t\t<Cube currency='USD' rate='{usd}'/>\n\
         \t\t\t<Cube currency='JPY' rate='162.5'/>\n\t\t</Cube>\n\t</Cube>\n\
         </gesmes:Envelope>"
    )
}

/// The ECB's stand-in: answers each request with the status and body set last.
async fn stand_in(answer: Arc<Mutex<(u16, String)>>) -> Listening {
    listen(move |mut stream| {
        let answer = answer.clone();
        async move {
            let mut buf = Vec::new();
            while read_request(&mut stream, &mut buf).await.is_some() {
                let (status, body) = answer.lock().unwrap().clone();
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                if stream.write_all(head.as_bytes()).await.is_err()
                    || stream.write_all(body.as_bytes()).await.is_err()
                {
                    return;
                }
            }
        }
    })
    .await
}

/// `reported` revenue of campaign `euro` in `GET /stats`.
async fn revenue(s: &TestServer) -> Value {
    let stats = s.read_as(&s.a, "/stats?by=campaign_name").await.json();
    stats["groups"][0]["reported"]["revenue"].clone()
}

/// A space with the ECB's address converts by the day's file, a typed rate winning; an error
/// answer and a body that is not the file keep the last rates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ecbs_daily_rates_convert_and_a_failed_fetch_keeps_the_last() {
    let s = private_server().await;
    let today = jiff::Timestamp::from_millisecond(i64::try_from(s.clock.now_ms()).unwrap())
        .unwrap()
        .in_tz("UTC")
        .unwrap()
        .date()
        .to_string();
    let answer = Arc::new(Mutex::new((200, daily_file(&today, "1.0812"))));
    let ecb = stand_in(answer.clone()).await;
    let url = format!("http://{}/stats/eurofxref/eurofxref-daily.xml", ecb.addr);
    let uid = s.click(&s.a, r#"{"campaign_name":"euro"}"#).await;
    let deposit = format!(r#"{{"event":"deposit","uid":"{uid}","value":"100","currency":"EUR"}}"#);
    assert_eq!(s.post_event(&deposit).await.status, 200);
    assert_eq!(revenue(&s).await, Value::Null, "no rate yet");

    let r = s
        .patch_as(&s.a, "/space", &format!(r#"{{"ecb_rates_url": "{url}"}}"#))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["settings"]["ecb_rates_url"], json!(url));
    let app = s.app.clone().unwrap();
    let name = s.a.name.clone();
    let space = app.store.read(move |t| t.space_no(&name)).await.unwrap();
    let fetch = || {
        let (app, url) = (app.clone(), url.clone());
        async move { tracker::workers::ecb::fetch(&app.ecb_tasks(), space, &url).await }
    };
    assert!(fetch().await.is_ok());
    assert_eq!(revenue(&s).await, json!("108.12"), "100 EUR at 1.0812");

    *answer.lock().unwrap() = (503, "<html>Service Unavailable</html>".into());
    let err = fetch().await.unwrap_err();
    assert!(err.contains("503"), "{err}");
    *answer.lock().unwrap() = (200, "<html>maintenance</html>".into());
    let err = fetch().await.unwrap_err();
    assert!(err.contains("not its daily file"), "{err}");
    *answer.lock().unwrap() = (200, daily_file(&today, "not-a-rate"));
    assert!(fetch().await.is_err());
    assert_eq!(revenue(&s).await, json!("108.12"), "the last rates stay");

    *answer.lock().unwrap() = (200, daily_file(&today, "1.2"));
    assert!(fetch().await.is_ok());
    assert_eq!(revenue(&s).await, json!("120.00"), "the day's new file");
    let r = s
        .patch_as(&s.a, "/space", r#"{"currency_rates": {"EUR": "1.10 USD"}}"#)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(revenue(&s).await, json!("110.00"), "a typed rate wins");
    s.stop().await;
}

/// An address that is not http or https is refused naming the setting, and the setting stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_address_is_refused_and_changes_nothing() {
    let s = TestServer::start().await;
    for bad in ["ftp://www.ecb.europa.eu/x.xml", "www.ecb.europa.eu"] {
        let r = s
            .patch_as(&s.a, "/space", &format!(r#"{{"ecb_rates_url": "{bad}"}}"#))
            .await;
        assert_error(&r, 422, "invalid_field", Some("ecb_rates_url"));
    }
    // Not a private address where private destinations are not allowed.
    let r = s
        .patch_as(
            &s.a,
            "/space",
            r#"{"ecb_rates_url": "http://127.0.0.1:9/x.xml"}"#,
        )
        .await;
    assert_error(&r, 422, "invalid_field", Some("ecb_rates_url"));
    let space = s.read_as(&s.a, "/space").await.json();
    assert_eq!(space["settings"]["ecb_rates_url"], json!(""), "{space}");
    s.stop().await;
}
