//! Every field rule of `POST /events` and `GET /e` (`docs/api.md#field-rules`, `#errors`) through the real
//! server: each bound just inside and just outside, with the HTTP status, `status` and `field`.

use serde_json::Value;

use crate::support::{
    DAY_MS, NOW_MS, TestServer, assert_duplicate_of, assert_error, assert_queued, event_answer,
};

const TEN_MINUTES_MS: u64 = 600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_is_required_and_must_be_one_of_the_four_names() {
    let s = TestServer::start().await;
    for kind in ["contact", "subscribed", "registration", "deposit"] {
        assert_queued(&s.post_event(&format!(r#"{{"event":"{kind}"}}"#)).await);
        assert_queued(&s.get_e(&format!("event={kind}")).await);
    }
    let missing = s.post_event(r#"{"uid":"u1"}"#).await;
    assert_error(&missing, 422, "missing_field", Some("event"));
    let empty = s.post_event(r#"{"event":""}"#).await;
    assert_error(&empty, 422, "missing_field", Some("event"));
    for unknown in ["purchase", "Deposit", "deposit "] {
        let r = s.post_event(&format!(r#"{{"event":"{unknown}"}}"#)).await;
        assert_error(&r, 422, "invalid_event", Some("event"));
    }
    assert_error(
        &s.get_e("uid=u1").await,
        422,
        "missing_field",
        Some("event"),
    );
    assert_error(
        &s.get_e("event=&uid=u1").await,
        422,
        "missing_field",
        Some("event"),
    );
    assert_error(
        &s.get_e("event=lead").await,
        422,
        "invalid_event",
        Some("event"),
    );
    s.stop().await;
}

/// The shapes an unreplaced macro takes, as a JSON string and as a query value (`#` must be
/// percent-encoded in a URL, where it would start the fragment).
const MACROS: [(&str, &str); 10] = [
    ("%%CLICK_ID%%", "%%CLICK_ID%%"),
    ("##clickid##", "%23%23clickid%23%23"),
    ("$subid", "$subid"),
    ("{clickid", "{clickid"),
    ("{}", "{}"),
    ("[]", "[]"),
    ("{clickid}", "{clickid}"),
    ("[uid]", "[uid]"),
    ("{{ad.id}}", "%7B%7Bad.id%7D%7D"),
    ("%7Bclickid%7D", "%257Bclickid%257D"),
];

/// A uid is 1 to 64 of `A-Za-z0-9_-` (a Telegram start parameter) wherever one is taken:
/// `POST /events`, `GET /e`, `POST /bind`, `GET /bind`. Everything else is `invalid_uid`, and
/// an unreplaced macro is named as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_is_a_telegram_start_parameter_wherever_one_is_taken() {
    let s = TestServer::start().await;
    let at_bound = "u".repeat(64);
    let over = "u".repeat(65);
    // (the uid as JSON text, as a query value) -> the four answers
    let answers = async |json: &str, query: &str| {
        [
            s.post_event(&format!(r#"{{"event":"contact","uid":"{json}"}}"#))
                .await,
            s.get_e(&format!("event=subscribed&uid={query}")).await,
            s.post_as(&s.a, "/bind", &format!(r#"{{"uid":"{json}","tg_id":7}}"#))
                .await,
            s.get_as(&s.a, "/bind", &format!("uid={query}&tg=7")).await,
        ]
    };
    let [post, get, post_bind, get_bind] = answers(&at_bound, &at_bound).await;
    assert_eq!(event_answer(&post).dedup, "milestone");
    assert_eq!(event_answer(&get).dedup, "milestone");
    for bind in [post_bind, get_bind] {
        assert_eq!(
            bind.json(),
            serde_json::json!({"ok": true, "matched": false})
        );
    }
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"A-z_0-9"}"#).await);
    for (json, query) in [
        (over.as_str(), over.as_str()),
        ("a b", "a%20b"),
        ("a.b", "a.b"),
        ("tab\\there", "tab%09there"),
        ("caf\u{e9}", "caf%C3%A9"),
        ("https://t.me/x", "https%3A%2F%2Ft.me%2Fx"),
    ] {
        for r in answers(json, query).await {
            let body = assert_error(&r, 422, "invalid_uid", Some("uid"));
            let error = body["error"].as_str().unwrap_or_default().to_owned();
            assert!(!error.contains("never replaced"), "{json}: {error}");
        }
    }
    for (json, query) in MACROS {
        for r in answers(json, query).await {
            let body = assert_error(&r, 422, "invalid_uid", Some("uid"));
            let error = body["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("never replaced"),
                "{json}: the sentence says it is an unreplaced macro: {error}"
            );
        }
    }
    // The network is named where the syntax is that network's.
    let r = s
        .post_event(r#"{"event":"contact","uid":"{clickid}"}"#)
        .await;
    let body = assert_error(&r, 422, "invalid_uid", Some("uid"));
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("Keitaro")),
        "{body}"
    );
    // Nothing refused was stored.
    let feed = s.read_as(&s.a, "/events").await.json();
    assert_eq!(feed["events"].as_array().map(Vec::len), Some(3), "{feed}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eid_is_1_to_256_visible_ascii_characters() {
    let s = TestServer::start().await;
    let at_bound = "e".repeat(256);
    let over = "e".repeat(257);
    let ok = s
        .post_event(&format!(r#"{{"event":"deposit","eid":"{at_bound}"}}"#))
        .await;
    assert_eq!(event_answer(&ok).dedup, "eid");
    let r = s
        .post_event(&format!(r#"{{"event":"deposit","eid":"{over}"}}"#))
        .await;
    assert_error(&r, 422, "invalid_eid", Some("eid"));
    let r = s.post_event(r#"{"event":"deposit","eid":"x y"}"#).await;
    assert_error(&r, 422, "invalid_eid", Some("eid"));
    // The same 256-character eid over GET is the event stored above.
    let again = s.get_e(&format!("event=deposit&eid={at_bound}")).await;
    assert_duplicate_of(&again, event_answer(&ok).inbox_id);
    let r = s.get_e(&format!("event=deposit&eid={over}")).await;
    assert_error(&r, 422, "invalid_eid", Some("eid"));
    // Wider than a uid, but an unreplaced macro is refused: all those postbacks would be one.
    assert_queued(
        &s.post_event(r#"{"event":"deposit","eid":"a.b/c?d=1&e#2"}"#)
            .await,
    );
    for (json, query) in [
        ("%%TXID%%", "%%TXID%%"),
        ("##txid##", "%23%23txid%23%23"),
        ("{transaction_id}", "{transaction_id}"),
    ] {
        let r = s
            .post_event(&format!(r#"{{"event":"deposit","eid":"{json}"}}"#))
            .await;
        let body = assert_error(&r, 422, "invalid_eid", Some("eid"));
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("never replaced")
        );
        let r = s.get_e(&format!("event=deposit&eid={query}")).await;
        assert_error(&r, 422, "invalid_eid", Some("eid"));
    }
    s.stop().await;
}

/// Posts a deposit with `field` set to each of `values` (JSON, as written), and asserts that
/// each is refused `status` with `code`, naming `field`; answers the error bodies.
async fn deposit_refused<V: std::fmt::Display>(
    s: &TestServer,
    field: &str,
    values: impl IntoIterator<Item = V>,
    status: u16,
    code: &str,
) -> Vec<Value> {
    let mut bodies = Vec::new();
    for value in values {
        let r = s
            .post_event(&format!(r#"{{"event":"deposit","{field}":{value}}}"#))
            .await;
        bodies.push(assert_error(&r, status, code, Some(field)));
    }
    bodies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_is_a_finite_decimal_of_at_most_28_significant_digits() {
    let s = TestServer::start().await;
    let digits28 = "1234567890123456789012345678";
    let digits29 = "12345678901234567890123456789";
    for ok in [
        digits28.to_owned(),
        format!("\"{digits28}\""),
        format!("\"-{digits28}\""),
        "\"0.10\"".to_owned(),
        "-3.5".to_owned(),
        "12".to_owned(),
    ] {
        let r = s
            .post_event(&format!(r#"{{"event":"deposit","value":{ok}}}"#))
            .await;
        assert_queued(&r);
    }
    let bad = [
        digits29.to_owned(),
        format!("\"{digits29}\""),
        "\"12,5\"".to_owned(),
        "\"0x1F\"".to_owned(),
        "\"NaN\"".to_owned(),
        "\"Infinity\"".to_owned(),
        "\"\"".to_owned(),
        "\"1 000\"".to_owned(),
        "1e400".to_owned(),
    ];
    for body in deposit_refused(&s, "value", bad, 422, "invalid_value").await {
        assert!(
            body["error"].as_str().unwrap().contains("value"),
            "the sentence names the field: {body}"
        );
    }
    // Not a number and not a string: the wrong JSON type.
    deposit_refused(
        &s,
        "value",
        ["true", "[1]", "{\"amount\":1}"],
        400,
        "invalid_json",
    )
    .await;
    // A bare NaN is not JSON at all.
    let r = s.post_event(r#"{"event":"deposit","value":NaN}"#).await;
    assert_error(&r, 400, "invalid_json", None);

    assert_queued(&s.get_e(&format!("event=deposit&value={digits28}")).await);
    assert_queued(&s.get_e("event=deposit&value=-0.50").await);
    for bad in [digits29, "12%2C5", "0x1F", "NaN", "inf", "1e", "5."] {
        let r = s.get_e(&format!("event=deposit&value={bad}")).await;
        assert_error(&r, 422, "invalid_value", Some("value"));
    }
    s.stop().await;
}

/// "12.10" is stored as written and compared by amount: the same deposit sent as the JSON number
/// 12.10, or as "12.1", answers the first one's `inbox_id`; two 28-digit amounts that a binary
/// float could not tell apart stay two deposits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_kept_exactly_and_compared_by_amount() {
    let s = TestServer::start().await;
    let first = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"payer","value":"12.10"}"#)
            .await,
    );
    for same in ["12.10", "\"12.1\"", "\"0012.1000\""] {
        let r = s
            .post_event(&format!(
                r#"{{"event":"deposit","uid":"payer","value":{same}}}"#
            ))
            .await;
        assert_duplicate_of(&r, first);
    }
    let dry = s
        .get_e("event=deposit&uid=payer&value=12.10&dry_run=1")
        .await
        .json();
    assert_eq!(
        (dry["status"].as_str(), dry["inbox_id"].as_str()),
        (Some("duplicate"), Some(first.to_string().as_str())),
        "{dry}"
    );
    let different =
        s.post_event(r#"{"event":"deposit","uid":"payer","value":"12.100000000000000000000001"}"#);
    assert_queued(&different.await);

    // 2^53 + 1 and 2^53 are the same f64; as decimals they are two amounts.
    let a = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"big","value":9007199254740993}"#)
            .await,
    );
    let b = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"big","value":9007199254740992}"#)
            .await,
    );
    assert_ne!(a, b);
    let long_a = "1234567890123456789012345678";
    let long_b = "1234567890123456789012345679";
    let la = assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"long","value":"{long_a}"}}"#
        ))
        .await,
    );
    assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"long","value":{long_b}}}"#
        ))
        .await,
    );
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","uid":"long","value":{long_a}}}"#
        ))
        .await;
    assert_duplicate_of(&r, la);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn currency_is_3_to_10_letters_or_digits_stored_upper_case() {
    let s = TestServer::start().await;
    for ok in ["usd", "USDT", "abcdefghij", "X1Y"] {
        let r = s
            .post_event(&format!(r#"{{"event":"deposit","currency":"{ok}"}}"#))
            .await;
        assert_queued(&r);
    }
    for bad in ["US", "abcdefghijk", "US$", "U D", ""] {
        let r = s
            .post_event(&format!(r#"{{"event":"deposit","currency":"{bad}"}}"#))
            .await;
        assert_error(&r, 422, "invalid_currency", Some("currency"));
    }
    assert_error(
        &s.get_e("event=deposit&currency=US").await,
        422,
        "invalid_currency",
        Some("currency"),
    );
    // Stored upper case: "usdt" and "USDT" are one currency, so one deposit.
    let first = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"c1","value":5,"currency":"usdt"}"#)
            .await,
    );
    assert_duplicate_of(
        &s.get_e("event=deposit&uid=c1&value=5&currency=USDT").await,
        first,
    );
    // Absent means the default, USD.
    let default = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"c2","value":5}"#)
            .await,
    );
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","uid":"c2","value":5,"currency":"usd"}"#)
            .await,
        default,
    );
    assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"c2","value":5,"currency":"eur"}"#)
            .await,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurred_at_ms_is_within_90_days_back_and_10_minutes_ahead() {
    let s = TestServer::start().await;
    let post_at = |t: u64| {
        let s = &s;
        async move {
            s.post_event(&format!(r#"{{"event":"deposit","occurred_at_ms":{t}}}"#))
                .await
        }
    };
    let oldest = NOW_MS - 90 * DAY_MS;
    let latest = NOW_MS + TEN_MINUTES_MS;
    assert_queued(&post_at(oldest).await);
    assert_queued(&post_at(latest).await);
    assert_error(
        &post_at(oldest - 1).await,
        422,
        "invalid_time",
        Some("occurred_at_ms"),
    );
    assert_error(
        &post_at(latest + 1).await,
        422,
        "invalid_time",
        Some("occurred_at_ms"),
    );
    let seconds = post_at(NOW_MS / 1000).await;
    let body = assert_error(&seconds, 422, "invalid_time", Some("occurred_at_ms"));
    assert!(
        body["error"].as_str().unwrap().contains("seconds"),
        "a seconds value is called that: {body}"
    );
    let bad = ["-1", "1.8e12", "1800000000000.5"];
    deposit_refused(&s, "occurred_at_ms", bad, 422, "invalid_time").await;
    // A string is the wrong JSON type for an integer field.
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","occurred_at_ms":"{NOW_MS}"}}"#
        ))
        .await;
    assert_error(&r, 400, "invalid_json", Some("occurred_at_ms"));

    // The same bounds over GET, named `t`.
    assert_queued(&s.get_e(&format!("event=deposit&t={oldest}")).await);
    assert_queued(&s.get_e(&format!("event=deposit&t={latest}")).await);
    for bad in [oldest - 1, latest + 1] {
        let r = s.get_e(&format!("event=deposit&t={bad}")).await;
        assert_error(&r, 422, "invalid_time", Some("t"));
    }
    let r = s.get_e(&format!("event=deposit&t={}", NOW_MS / 1000)).await;
    let body = assert_error(&r, 422, "invalid_time", Some("t"));
    assert!(
        body["error"].as_str().unwrap().contains("seconds"),
        "{body}"
    );
    assert_error(
        &s.get_e("event=deposit&t=yesterday").await,
        422,
        "invalid_time",
        Some("t"),
    );

    // The bounds move with the clock: what was the oldest plausible time is now too old.
    s.clock.advance(1);
    assert_error(
        &post_at(oldest).await,
        422,
        "invalid_time",
        Some("occurred_at_ms"),
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_post_fields_and_bodies_that_are_not_an_object_are_invalid_json() {
    let s = TestServer::start().await;
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","occured_at_ms":{NOW_MS}}}"#
        ))
        .await;
    let body = assert_error(&r, 400, "invalid_json", None);
    assert!(
        body["error"].as_str().unwrap().contains("occured_at_ms"),
        "the typo is named: {body}"
    );
    for not_an_event in ["", "not json", "[]", "{\"event\":\"deposit\"", "null", "7"] {
        let r = s.post_event(not_an_event).await;
        assert_error(&r, 400, "invalid_json", None);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_of_the_wrong_json_type_is_invalid_json_naming_it() {
    let s = TestServer::start().await;
    for (field, body) in [
        ("event", r#"{"event":5}"#),
        ("uid", r#"{"event":"contact","uid":5}"#),
        ("uid", r#"{"event":"contact","uid":["a"]}"#),
        ("eid", r#"{"event":"contact","eid":{"id":1}}"#),
        ("currency", r#"{"event":"deposit","currency":840}"#),
        ("dry_run", r#"{"event":"deposit","dry_run":"yes"}"#),
    ] {
        let r = s.post_event(body).await;
        let json = assert_error(&r, 400, "invalid_json", Some(field));
        assert!(
            json["error"].as_str().unwrap().contains(field),
            "the sentence names `{field}`: {json}"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_ignores_unknown_parameters_and_treats_empty_ones_as_absent() {
    let s = TestServer::start().await;
    // Empty uid and eid are absent, so nothing makes this a duplicate (rule 4).
    let query = "event=contact&uid=&eid=&value=&currency=&t=&sub1=x&clickid=%7Bclickid%7D&a=";
    let first = event_answer(&s.get_e(query).await);
    assert_eq!((first.duplicate, first.dedup.as_str()), (false, "none"));
    let second = event_answer(&s.get_e(query).await);
    assert!(!second.duplicate && second.inbox_id > first.inbox_id);
    // The first non-empty value counts.
    let a = assert_queued(&s.get_e("event=contact&uid=&uid=first&uid=second").await);
    assert_duplicate_of(
        &s.post_event(r#"{"event":"contact","uid":"first"}"#).await,
        a,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_refuses_unreplaced_macros_with_the_fields_own_code() {
    let s = TestServer::start().await;
    for (query, code, field) in [
        ("event=contact&uid=%7Bclickid%7D", "invalid_uid", "uid"),
        ("event=contact&uid=%5Buid%5D", "invalid_uid", "uid"),
        // Voluum's placeholder where it has no click id.
        ("event=contact&uid=REPLACE", "invalid_uid", "uid"),
        // Double-encoded by the sender: decodes to the text `%7Bsubid%7D`.
        ("event=contact&uid=%257Bsubid%257D", "invalid_uid", "uid"),
        (
            "event=deposit&eid=%7Btransaction_id%7D",
            "invalid_eid",
            "eid",
        ),
        ("event=deposit&value=%7Bamount%7D", "invalid_value", "value"),
        (
            "event=deposit&value=%257Bpayout%257D",
            "invalid_value",
            "value",
        ),
        (
            "event=deposit&currency=%5Bcurrency%5D",
            "invalid_currency",
            "currency",
        ),
        ("event=deposit&t=%7Btimestamp%7D", "invalid_time", "t"),
        ("event=%7Bevent%7D", "invalid_event", "event"),
    ] {
        let r = s.get_e(query).await;
        let body = assert_error(&r, 422, code, Some(field));
        assert!(
            body["error"].as_str().unwrap().contains("replaced"),
            "{query}: the sentence says the macro was never replaced: {body}"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn return_text_answers_that_text_on_success() {
    let s = TestServer::start().await;
    let r = s.get_e("event=deposit&eid=pb-1&return=OK").await;
    assert_eq!((r.status, r.text().as_str()), (200, "OK"));
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "{:?}",
        r.headers
    );
    // It was stored: the same postback without `return` is a duplicate.
    let stored = event_answer(&s.get_e("event=deposit&eid=pb-1").await);
    assert!(stored.duplicate, "{stored:?}");
    // A duplicate is still a success, answered with the text.
    let again = s.get_e("event=deposit&eid=pb-1&return=OK").await;
    assert_eq!((again.status, again.text().as_str()), (200, "OK"));
    // A failure is not dressed as success.
    let bad = s.get_e("event=deposit&value=12%2C5&return=OK").await;
    assert_error(&bad, 422, "invalid_value", Some("value"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_validates_and_stores_nothing() {
    let s = TestServer::start().await;
    let dry = s
        .post_event(r#"{"event":"deposit","eid":"dry-1","dry_run":true}"#)
        .await;
    let body = dry.json();
    assert_eq!(dry.status, 200, "{body}");
    assert_eq!(
        (
            body["status"].as_str(),
            body["dry_run"].as_bool(),
            &body["inbox_id"]
        ),
        (Some("queued"), Some(true), &Value::Null),
        "{body}"
    );
    let id = assert_queued(&s.post_event(r#"{"event":"deposit","eid":"dry-1"}"#).await);
    let dry_again = s
        .post_event(r#"{"event":"deposit","eid":"dry-1","dry_run":true}"#)
        .await
        .json();
    assert_eq!(
        (dry_again["status"].as_str(), dry_again["inbox_id"].as_str()),
        (Some("duplicate"), Some(id.to_string().as_str())),
        "{dry_again}"
    );

    let get_dry = s.get_e("event=contact&uid=dry-u&dry_run=1").await.json();
    assert_eq!(get_dry["status"].as_str(), Some("queued"), "{get_dry}");
    assert_queued(&s.get_e("event=contact&uid=dry-u").await);
    // A dry run is validated like a real event.
    let r = s
        .post_event(r#"{"event":"deposit","value":"12,5","dry_run":true}"#)
        .await;
    assert_error(&r, 422, "invalid_value", Some("value"));
    // And nothing a dry run did took an inbox id: the next real one follows `id` directly
    // (the `dry-u` contact above was the only event stored since).
    let next = assert_queued(&s.post_event(r#"{"event":"contact"}"#).await);
    assert_eq!(next, id + 2);
    s.stop().await;
}

/// `value` may be a JSON number (`docs/api.md#field-rules`). `1e-7` is one (it is how JavaScript's
/// `JSON.stringify` and Python's `json.dumps` write 0.0000001), finite and exact as a decimal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_number_in_exponent_form_is_a_decimal_value() {
    let s = TestServer::start().await;
    let tiny = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"exp","value":1e-7}"#)
            .await,
    );
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","uid":"exp","value":"0.0000001"}"#)
            .await,
        tiny,
    );
    let big = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"exp2","value":1.5E3}"#)
            .await,
    );
    assert_duplicate_of(
        &s.post_event(r#"{"event":"deposit","uid":"exp2","value":1500}"#)
            .await,
        big,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_currency_is_the_configured_default() {
    let s = TestServer::start_with(|settings| settings.default_currency = "EUR".into()).await;
    let first = assert_queued(
        &s.post_event(r#"{"event":"deposit","uid":"cur","value":3}"#)
            .await,
    );
    assert_duplicate_of(
        &s.get_e("event=deposit&uid=cur&value=3&currency=eur").await,
        first,
    );
    assert_queued(&s.get_e("event=deposit&uid=cur&value=3&currency=USD").await);
    s.stop().await;
}
