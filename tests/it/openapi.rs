//! `GET /openapi.json` (`docs/api.md#get-openapijson`), kept true by test: real answers of every endpoint,
//! success and each error class, are checked against the document the server serves. For each
//! answer the operation must list its status; the content type must be one it lists; its
//! required headers must be there and match their schemas; a JSON body must validate against
//! the schema (JSON Schema 2020-12 with the document's `$ref`s). At the end every status the
//! document lists must have been seen, so a status the server can no longer answer is noticed
//! too.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tracker::domain::rate::Rate;
use tracker::storage::fault;

use crate::support::{Request, Response, TestServer, assert_queued, send};

/// Statuses that the same code answers for every endpoint (the connection before routing, the
/// rate limiter, a failed write): listed for every operation, produced here on one each.
const SHARED: [&str; 4] = ["414", "429", "431", "503"];
/// `500 internal` is a bug; nothing here can make the server answer it.
const NEVER_PRODUCED: &str = "500";

/// The document the server serves, and which operation answered which status so far.
struct Document {
    doc: Value,
    seen: BTreeSet<(String, String, String)>,
}

impl Document {
    async fn fetch(s: &TestServer) -> Document {
        let r = s.send(&Request::get("/openapi.json")).await;
        let doc = r.json();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut document = Document {
            doc,
            seen: BTreeSet::new(),
        };
        document.check("GET", "/openapi.json", &r);
        document
    }

    /// The responses object of `#/components/responses/<name>` or the one given inline.
    fn resolve<'a>(&'a self, response: &'a Value) -> &'a Value {
        match response["$ref"].as_str() {
            Some(pointer) => self
                .doc
                .pointer(pointer.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("dangling $ref {pointer}")),
            None => response,
        }
    }

    /// Validates `instance` against `schema`, whose `$ref`s point into the document.
    #[track_caller]
    fn validate(&self, schema: &Value, instance: &Value, what: &str) {
        // The schema as the root, with the document's components beside it: its
        // `#/components/...` refs resolve as they do in the document.
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("the document's schema for {what} does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what} does not match the document: {errors:#?}\n{instance}"
        );
    }

    /// Whether `body` is a request body the operation `method path` describes.
    fn takes(&self, method: &str, path: &str, body: &str) -> bool {
        let operation = &self.doc["paths"][path][method.to_ascii_lowercase()];
        let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{method} {path} describes no JSON body");
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("the body schema of {method} {path} does not compile: {e}"));
        let instance: Value = serde_json::from_str(body).expect("a JSON body");
        validator.is_valid(&instance)
    }

    /// Checks `r` as an answer of the operation `method path` (the document's path template).
    #[track_caller]
    fn check(&mut self, method: &str, path: &str, r: &Response) {
        let status = r.status.to_string();
        let what = format!("{method} {path} {status}");
        let operation = &self.doc["paths"][path][method.to_ascii_lowercase()];
        assert!(
            operation.is_object(),
            "{method} {path} is not in the document"
        );
        let response = operation["responses"]
            .get(&status)
            .unwrap_or_else(|| panic!("{what} is not in the document: {}", r.text()));
        // A HEAD answer has its GET's headers and no body (RFC 9110): no body to check.
        let head = method == "HEAD";
        self.check_response(self.resolve(response), r, &what, !head);
        self.seen
            .insert((method.to_owned(), path.to_owned(), status));
    }

    /// Checks `r` against one response object: headers, content type, body.
    #[track_caller]
    fn check_response(&self, response: &Value, r: &Response, what: &str, has_body: bool) {
        for (name, header) in response["headers"].as_object().into_iter().flatten() {
            let value = r.header(name);
            if header["required"] == true {
                assert!(
                    value.is_some(),
                    "{what} lacks the header {name}: {:?}",
                    r.headers
                );
            }
            if let Some(value) = value {
                // A header holds text; an integer schema means its digits.
                let instance = value
                    .parse::<u64>()
                    .map_or_else(|_| json!(value), |n| json!(n));
                self.validate(
                    &header["schema"],
                    &instance,
                    &format!("{what} header {name}"),
                );
            }
        }
        let Some(content) = response["content"].as_object() else {
            assert!(
                r.body.is_empty(),
                "{what} has a body the document does not describe"
            );
            return;
        };
        if !has_body {
            assert!(r.body.is_empty(), "{what} has a body");
            return;
        }
        let content_type = r.header("content-type").unwrap_or_default();
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let schema = &content
            .get(media)
            .unwrap_or_else(|| panic!("{what} answers {content_type:?}, not in the document"))["schema"];
        let body = if media == "application/json" {
            r.json()
        } else {
            json!(r.text())
        };
        self.validate(schema, &body, what);
    }

    /// Checks `r` against `#/components/responses/<name>`: answers no operation lists (an
    /// unknown path, a method a path does not take).
    #[track_caller]
    fn check_component(&self, name: &str, r: &Response) {
        let response = &self.doc["components"]["responses"][name];
        assert!(response.is_object(), "no component response {name}");
        self.check_response(response, r, name, true);
    }

    /// Every operation's documented statuses that no answer in this test had.
    fn unseen(&self) -> Vec<String> {
        let shared_seen: BTreeSet<&str> = self
            .seen
            .iter()
            .map(|(_, _, status)| status.as_str())
            .filter(|status| SHARED.contains(status))
            .collect();
        let mut unseen = Vec::new();
        for (path, operations) in self.doc["paths"].as_object().expect("paths") {
            for (method, operation) in operations.as_object().expect("operations") {
                for status in operation["responses"]
                    .as_object()
                    .expect("responses")
                    .keys()
                {
                    let key = (method.to_ascii_uppercase(), path.clone(), status.clone());
                    if !self.seen.contains(&key)
                        && status != NEVER_PRODUCED
                        && !shared_seen.contains(status.as_str())
                    {
                        unseen.push(format!("{} {} {}", key.0, key.1, key.2));
                    }
                }
            }
        }
        unseen
    }
}

fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}

/// `method target` with the secret of `s`'s space `a`, and a JSON body if given.
async fn as_a(s: &TestServer, method: &str, target: &str, body: Option<&str>) -> Response {
    let mut request = match body {
        Some(body) => Request::post(target, Some(&s.a.secret), body),
        None => Request::get(target).header("Authorization", bearer(&s.a.secret)),
    };
    request.method = method;
    s.send(&request).await
}

/// `method target` without a credential.
async fn anonymous(s: &TestServer, method: &str, target: &str, body: Option<&str>) -> Response {
    let mut request = match body {
        Some(body) => Request::post(target, None, body),
        None => Request::get(target),
    };
    request.method = method;
    s.send(&request).await
}

/// Sends each body to `POST path` as space `a`, checks its status and checks it against the
/// document; then one without a credential (`401`). Answers the responses, in order.
async fn post_all(
    s: &TestServer,
    d: &mut Document,
    path: &str,
    cases: &[(&str, u16)],
) -> Vec<Response> {
    let mut answers = Vec::new();
    for &(body, status) in cases {
        let r = as_a(s, "POST", path, Some(body)).await;
        assert_eq!(r.status, status, "POST {path} {body}: {}", r.text());
        d.check("POST", path, &r);
        answers.push(r);
    }
    let r = anonymous(s, "POST", path, Some("{}")).await;
    assert_eq!(r.status, 401, "POST {path} without a credential");
    d.check("POST", path, &r);
    answers
}

// One test walks every endpoint, in the order the document lists them; long by nature.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_every_endpoint_matches_the_document() {
    // Visitors of the public paths unlimited: this test sends more of them than a person; the
    // limit's own answer is made on a server of its own, below.
    let s = TestServer::start_with(|c| {
        c.address_rate_limit = Rate {
            per_second: 0,
            burst: 0,
        };
    })
    .await;
    let mut d = Document::fetch(&s).await;
    let big = format!(r#"{{"fbclid":"{}"}}"#, "x".repeat(17 * 1024));

    // POST /events: each outcome and each error class.
    let post_events = [
        (
            r#"{"event":"deposit","eid":"o-1","value":"12.10","currency":"usdt"}"#,
            200,
        ),
        (
            r#"{"event":"deposit","eid":"o-1","value":"12.10","currency":"usdt"}"#,
            200,
        ),
        (r#"{"event":"contact","uid":"u-1","dry_run":true}"#, 200),
        (
            r#"{"event":"contact","uid":null,"occurred_at_ms":null}"#,
            200,
        ),
        ("not json", 400),
        (r#"{"event":"contact","occured_at_ms":1}"#, 400),
        (r#"{"event":5}"#, 400),
        (r"{}", 422),
        (r#"{"event":"lead"}"#, 422),
        (r#"{"event":"deposit","value":"12,5"}"#, 422),
        (r#"{"event":"deposit","occurred_at_ms":1800000000}"#, 422),
        (r#"{"event":"deposit","currency":"US"}"#, 422),
        (r#"{"event":"deposit","uid":"a b"}"#, 422),
        (r#"{"event":"deposit","uid":"%%CLICK_ID%%"}"#, 422),
        (r#"{"event":"deposit","eid":""}"#, 422),
        (r#"{"event":"deposit","tg_id":0}"#, 422),
        // A Telegram user with no bound click (the one bound below answers `tg_id`).
        (r#"{"event":"contact","tg_id":"77"}"#, 200),
        (big.as_str(), 413),
    ];
    let answers = post_all(&s, &mut d, "/events", &post_events).await;
    let first = answers[0].json()["inbox_id"].as_str().map(str::to_owned);
    let r = s
        .send(&Request::post("/events", Some(&s.a.ingest_token), "{}"))
        .await;
    assert_eq!(r.status, 401);
    d.check("POST", "/events", &r);

    // POST /events/batch: results of each kind, and each refusal of the whole batch.
    let over = format!(r#"{{"events":[{}]}}"#, vec!["{}"; 1001].join(","));
    let post_batch = [
        (
            r#"{"events":[{"event":"contact","eid":"b-1"},{"event":"contact","eid":"b-1"},{"event":"lead"},7]}"#,
            200,
        ),
        ("[]", 400),
        ("{}", 422),
        (over.as_str(), 413),
    ];
    post_all(&s, &mut d, "/events/batch", &post_batch).await;

    // GET /e: JSON, plain text, each error class, an over-long URL.
    let long = format!("event=contact&eid={}", "e".repeat(9 * 1024));
    for (query, status) in [
        ("event=deposit&eid=g-1&value=-3.5&t=1799999999000", 200),
        ("event=registration&uid=u-2&return=OK", 200),
        ("event=contact&dry_run=1", 200),
        ("event=", 422),
        ("event=contact&uid={clickid}", 422),
        ("event=contact&uid=$subid", 422),
        ("event=contact&tg=x", 422),
        ("event=subscribed&tg=77", 200),
        ("event=deposit&t=1800000000", 422),
        (long.as_str(), 414),
    ] {
        let r = s.get_e(query).await;
        assert_eq!(r.status, status, "{query}: {}", r.text());
        d.check("GET", "/e", &r);
    }
    for target in ["/e?event=contact", "/e?event=contact&token=trk_it_nonsense"] {
        let r = s.send(&Request::get(target)).await;
        assert_eq!(r.status, 401);
        d.check("GET", "/e", &r);
    }
    let with_secret = format!("/e?event=contact&token={}", s.a.secret);
    d.check("GET", "/e", &s.send(&Request::get(&with_secret)).await);

    // POST /clicks.
    let click = s.click(
        &s.a,
        r#"{"link_slug":"ad","fbclid":"fb-1","campaign_name":"spring"}"#,
    );
    let uid = click.await;
    let too_long = format!(r#"{{"fbclid":"{}"}}"#, "f".repeat(513));
    let clicks = [
        (r#"{"fbclid":"fb-1"}"#, 200),
        (r#"{"raw_query":null}"#, 200),
        (r#"{"fbclid":1}"#, 400),
        (r#"{"link_slug":"x","extra":1}"#, 400),
        (too_long.as_str(), 422),
        (big.as_str(), 413),
    ];
    post_all(&s, &mut d, "/clicks", &clicks).await;

    // POST /bind: unmatched, bound, a retry, a conflict, each error class.
    let bound = format!(r#"{{"uid":"{uid}","tg_id":"42"}}"#);
    let retried = format!(r#"{{"uid":"{uid}","tg_id":42}}"#);
    let conflict = format!(r#"{{"uid":"{uid}","tg_id":43}}"#);
    let binds = [
        (r#"{"uid":"nobody","tg_id":5}"#, 200),
        (bound.as_str(), 200),
        (retried.as_str(), 200),
        (conflict.as_str(), 200),
        (r#"{"uid":"x","tg_id":true}"#, 400),
        (r#"{"tg_id":1}"#, 422),
        (r#"{"uid":"a b","tg_id":1}"#, 422),
        (r#"{"uid":"x","tg_id":0}"#, 422),
        (big.as_str(), 413),
    ];
    let answers = post_all(&s, &mut d, "/bind", &binds).await;
    assert_eq!(answers[3].json()["conflict"], true, "{}", answers[3].text());

    // GET /bind.
    for (query, status) in [
        (format!("uid={uid}&tg=42"), 200),
        ("uid=nobody&tg=7".to_owned(), 200),
        ("uid=x".to_owned(), 422),
        ("uid=x&tg=-1".to_owned(), 422),
    ] {
        let r = s.get_as(&s.a, "/bind", &query).await;
        assert_eq!(r.status, status, "{query}: {}", r.text());
        d.check("GET", "/bind", &r);
    }
    d.check(
        "GET",
        "/bind",
        &anonymous(&s, "GET", "/bind?uid=x&tg=1", None).await,
    );

    // The Mini App's bind and events: the space's bot token written straight to the store (no
    // Bot API is asked here), `initData` signed with it as Telegram signs it.
    let token = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
    let name = s.a.name.clone();
    let no = s.store.read(move |r| r.space_no(&name)).await.unwrap();
    s.store
        .write(move |t| {
            let patch = tracker::domain::settings::SettingsPatch::new([(
                "telegram_bot_token".to_owned(),
                token.to_owned(),
            )])
            .expect("a token's shape");
            t.update_settings(no, &patch)
        })
        .await
        .expect("the token stored");
    let signed = |start_param: &str| {
        let date = (crate::support::NOW_MS / 1000).to_string();
        tracker::domain::init_data::sign(
            &[
                ("user", r#"{"id":31}"#),
                ("auth_date", &date),
                ("start_param", start_param),
            ],
            token,
        )
    };
    let big_init = "x".repeat(17 * 1024);
    for (path, body, status) in [
        ("bind", json!({"init_data": signed(&uid)}), 200),
        ("bind", json!({"init_data": signed("a b")}), 422),
        ("bind", json!({"init_data": "hash=00"}), 401),
        ("bind", json!({"init_data": 5}), 400),
        ("bind", json!({"init_data": big_init}), 413),
        (
            "events",
            json!({"init_data": signed(&uid), "event": "contact"}),
            200,
        ),
        (
            "events",
            json!({"init_data": signed(&uid), "event": "deposit"}),
            422,
        ),
        (
            "events",
            json!({"init_data": "hash=00", "event": "contact"}),
            401,
        ),
        (
            "events",
            json!({"init_data": signed(&uid), "value": 5}),
            400,
        ),
        ("events", json!({"init_data": big_init}), 413),
    ] {
        let target = format!("/miniapp/{}/{path}", s.a.name);
        let r = s
            .send(&Request::post(&target, None, &body.to_string()))
            .await;
        assert_eq!(r.status, status, "{target} {body}: {}", r.text());
        d.check("POST", &format!("/miniapp/{{space}}/{path}"), &r);
    }

    // An event of the click, so the feed has attribution (link, fbclid, tg_id, fbc), and one by
    // the Telegram id it is bound to, a new one and its retry.
    let attributed = format!(r#"{{"event":"deposit","uid":"{uid}","value":5}}"#);
    assert_queued(&as_a(&s, "POST", "/events", Some(&attributed)).await);
    for _ in 0..2 {
        let r = as_a(
            &s,
            "POST",
            "/events",
            Some(r#"{"event":"registration","tg_id":42}"#),
        )
        .await;
        assert_eq!(r.json()["attributed_by"], "tg_id", "{}", r.text());
        d.check("POST", "/events", &r);
    }

    // The space's settings: read, changed (all, none, each error class).
    let r = as_a(&s, "GET", "/space", None).await;
    assert_eq!(
        r.json()["settings"]["attribution"],
        "first_touch",
        "{}",
        r.text()
    );
    d.check("GET", "/space", &r);
    d.check("GET", "/space", &anonymous(&s, "GET", "/space", None).await);
    for (body, status) in [
        (r#"{"attribution":"last_touch"}"#, 200),
        (r#"{"attribution":null}"#, 200),
        ("{}", 200),
        (r#"{"atribution":"last_touch"}"#, 400),
        (r#"{"attribution":true}"#, 400),
        ("[]", 400),
        (r#"{"attribution":"sometimes"}"#, 422),
        (big.as_str(), 413),
    ] {
        let r = as_a(&s, "PATCH", "/space", Some(body)).await;
        assert_eq!(r.status, status, "PATCH /space {body}: {}", r.text());
        d.check("PATCH", "/space", &r);
    }
    d.check(
        "PATCH",
        "/space",
        &anonymous(&s, "PATCH", "/space", Some("{}")).await,
    );

    // Costs: set, removed, each error class, then listed.
    let costs = [
        (
            r#"{"day":"2026-11-24","campaign_name":"spring","amount":"120.00","currency":"USD"}"#,
            200,
        ),
        (
            r#"{"day":"2026-11-25","campaign_name":"spring","amount":0,"currency":"USD"}"#,
            200,
        ),
        (r#"{"day":"2026-11-24","campaign_name":"spring"}"#, 422),
        (
            r#"{"day":"2026-11-24","campaign_name":"a","amount":"-1","currency":"USD"}"#,
            422,
        ),
        (r#"{"day":"2026-11-24","colour":"red"}"#, 400),
        (big.as_str(), 413),
    ];
    post_all(&s, &mut d, "/costs", &costs).await;

    // Spend fetched from Meta: refused without an ad account; with one at an address that
    // does not answer, the fetch runs and fails there (200, its result `failed`).
    post_all(
        &s,
        &mut d,
        "/costs/fetch",
        &[("", 409), (big.as_str(), 413)],
    )
    .await;
    let meta = r#"{"meta_ads_account":"act_1","meta_ads_token":"EAAGopenapi0123456789","meta_graph_url":"https://graph.invalid"}"#;
    let r = as_a(&s, "PATCH", "/space", Some(meta)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answers = post_all(&s, &mut d, "/costs/fetch", &[("", 200)]).await;
    assert_eq!(answers[0].json()["fetch"]["result"], "failed");

    // The read side.
    let long_campaign = format!("/stats?campaign={}", "c".repeat(257));
    let wait_after = format!(
        "/events/wait?after={}&timeout_s=0",
        first.expect("an event")
    );
    for (target, status) in [
        ("/events", 200),
        ("/events?after=&limit=2", 200),
        ("/events?limit=0", 422),
        ("/events?after=999999", 422),
        ("/events/wait?timeout_s=0", 200),
        (wait_after.as_str(), 200),
        ("/events/wait?timeout_s=61", 422),
        ("/stats", 200),
        ("/stats?by=link_slug&from_ms=0&to_ms=1900000000000", 200),
        ("/stats?by=day", 200),
        // Regression: answered 500 (an overflow) before; found by schemathesis.
        ("/stats?to_ms=18446744073709551615", 200),
        // Regression: a panic (a day past jiff's range), answered 503; found by schemathesis.
        ("/stats?from_ms=367484733496642", 200),
        ("/stats?by=day&from_ms=367484733496642", 200),
        ("/stats?campaign=spring&from_ms=18446744073709551615", 200),
        ("/stats?by=week", 422),
        ("/stats?campaign=spring&by=link_slug", 200),
        ("/stats?by=variant&link=no-such-link", 404),
        ("/stats?campaign=spring&by=day&from=2026-11-01", 200),
        ("/stats?campaign=spring", 200),
        ("/stats?campaign=nobody&by=utm_term", 200),
        (long_campaign.as_str(), 422),
        ("/stats?from_ms=2&to_ms=1", 422),
        ("/rejections", 200),
        ("/rejections?limit=1001", 422),
        ("/costs", 200),
        ("/costs?from=2026-11-01&to=2026-11-30", 200),
        ("/costs?from=2026-11-30&to=2026-11-01", 422),
    ] {
        let r = as_a(&s, "GET", target, None).await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        let path = target.split('?').next().unwrap_or(target);
        d.check("GET", path, &r);
        if target == "/rejections" {
            let n = r.json()["rejections"].as_array().map_or(0, Vec::len);
            assert!(n > 10, "the refusals above are logged: {}", r.text());
        }
    }
    for path in [
        "/events",
        "/events/wait",
        "/stats",
        "/rejections",
        "/links",
        "/costs",
    ] {
        d.check("GET", path, &anonymous(&s, "GET", path, None).await);
    }

    // Links: create (bot, target, page), conflict, each error class, list, visit, delete.
    let links = [
        (
            r#"{"slug":"spring","bot":"@shop_bot","campaign_name":"spring","allowed_origins":["https://land.example.com"]}"#,
            201,
        ),
        (
            r#"{"slug":"mini","target":"https://app.example.com/go?c={uid}","mode":null}"#,
            201,
        ),
        (
            r#"{"slug":"pg","bot":"shop_bot","mode":"page","target":""}"#,
            201,
        ),
        (r#"{"slug":"spring","bot":"shop_bot"}"#, 409),
        (r#"{"slug":"x","bot":"shop_bot","colour":"red"}"#, 400),
        (r#"{"slug":"x"}"#, 422),
        (r#"{"slug":"x","bot":"shop"}"#, 422),
        (r#"{"slug":"x","target":"https://[{uid}"}"#, 422),
        (big.as_str(), 413),
    ];
    post_all(&s, &mut d, "/links", &links).await;
    // The body's schema is the server's rule: a bot, a target or a channel, only one.
    let described = [true, true, true, true, false, false, false, false];
    for ((body, _), takes) in links.iter().zip(described) {
        assert_eq!(d.takes("POST", "/links", body), takes, "{body}");
    }
    for (body, takes) in [
        (
            r#"{"slug":"c","channel":"@newsroom","fallback":"https://t.me/+abc"}"#,
            true,
        ),
        (
            r#"{"slug":"c","channel":"@newsroom","fallback":"https://t.me/+a","join_requests":true}"#,
            true,
        ),
        (r#"{"slug":"c","channel":"@news"}"#, false),
        (
            r#"{"slug":"c","channel":" -1001234567890 ","fallback":"https://t.me/joinchat/a_b-C"}"#,
            true,
        ),
        (
            r#"{"slug":"c","channel":"news","fallback":"https://t.me/+abc"}"#,
            false,
        ),
        (
            r#"{"slug":"c","channel":"@newsroom","fallback":"https://t.me/news"}"#,
            false,
        ),
        (
            r#"{"slug":"c","channel":"@1news","fallback":"https://t.me/+abc"}"#,
            false,
        ),
        (
            r#"{"slug":"c","bot":"shop_bot","join_requests":false}"#,
            false,
        ),
        (
            r#"{"slug":"c","bot":"shop_bot","join_requests":null,"fallback":""}"#,
            true,
        ),
        (
            r#"{"slug":"c","bot":"shop_bot","target":"https://a.example/{uid}"}"#,
            false,
        ),
        (r#"{"slug":"c","bot":"","target":""}"#, false),
    ] {
        assert_eq!(d.takes("POST", "/links", body), takes, "{body}");
    }
    let r = as_a(&s, "GET", "/links", None).await;
    assert_eq!(r.json()["links"].as_array().map(Vec::len), Some(3));
    d.check("GET", "/links", &r);
    for (target, agent, status) in [
        ("/l/spring?fbclid=fb-2&utm_campaign=x", "Mozilla/5.0", 302),
        ("/l/pg", "Mozilla/5.0", 200),
        ("/l/spring", "TelegramBot (like TwitterBot)", 200),
        ("/l/nope", "Mozilla/5.0", 404),
    ] {
        let r = s
            .send(&Request::get(target).header("User-Agent", agent))
            .await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        d.check("GET", "/l/{slug}", &r);
    }
    let head = |target| Request {
        method: "HEAD",
        ..Request::get(target)
    };
    for (target, status) in [("/l/spring", 200), ("/l/nope", 404)] {
        let r = s.send(&head(target)).await;
        assert_eq!(r.status, status);
        d.check("HEAD", "/l/{slug}", &r);
    }
    for (slug, status) in [("mini", 200), ("mini", 200), ("never", 404)] {
        let r = as_a(&s, "DELETE", &format!("/links/{slug}"), None).await;
        assert_eq!(r.status, status, "{slug}: {}", r.text());
        d.check("DELETE", "/links/{slug}", &r);
    }
    d.check(
        "DELETE",
        "/links/{slug}",
        &anonymous(&s, "DELETE", "/links/x", None).await,
    );
    let r = s.send(&Request::get("/l/mini")).await;
    assert_eq!(r.status, 410);
    d.check("GET", "/l/{slug}", &r);
    let r = s.send(&head("/l/mini")).await;
    assert_eq!(r.status, 410);
    d.check("HEAD", "/l/{slug}", &r);

    // A landing page's view, from the allowed origin and another; the script, and its
    // revalidation.
    for (slug, origin, status) in [
        ("spring", "https://land.example.com", 204),
        ("spring", "https://other.example.com", 403),
        ("nope", "https://land.example.com", 404),
    ] {
        let target = format!("/l/{slug}/view?fbclid=fb-3");
        let r = s
            .send(&Request::post(&target, None, "").header("Origin", origin))
            .await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        d.check("POST", "/l/{slug}/view", &r);
    }
    let r = s.send(&Request::get("/t.js")).await;
    d.check("GET", "/t.js", &r);
    let etag = r.header("etag").expect("an ETag").to_owned();
    let r = s
        .send(&Request::get("/t.js").header("If-None-Match", etag))
        .await;
    assert_eq!(r.status, 304);
    d.check("GET", "/t.js", &r);

    // Destinations: each kind, conflict, each error class, list, the log, retry, delete.
    let destinations = [
        (
            r#"{"name":"meta","kind":"meta_capi","pixel_id":"123","access_token":"EAAB-abcd","test_event_code":""}"#,
            201,
        ),
        (
            r#"{"name":"hook","kind":"webhook","url":"https://hooks.example.com/t","events":["deposit"]}"#,
            201,
        ),
        (
            r#"{"name":"pb","kind":"postback","url":"https://n.example.com/?c={uid}","only_attributed":null}"#,
            201,
        ),
        (
            r#"{"name":"hook","kind":"webhook","url":"https://x.example.com"}"#,
            409,
        ),
        (r#"{"name":"x","kind":"webhook","colour":"red"}"#, 400),
        (r#"{"name":"x","kind":"webhook"}"#, 422),
        (
            r#"{"name":"x","kind":"webhook","url":"https://127.0.0.1/"}"#,
            422,
        ),
        (big.as_str(), 413),
    ];
    post_all(&s, &mut d, "/destinations", &destinations).await;
    // The body's schema is the server's rule: each kind with its own fields, those it requires.
    // (A name taken and a private address are the server's to know.)
    let described = [true, true, true, true, false, false, true];
    for ((body, _), takes) in destinations.iter().zip(described) {
        assert_eq!(d.takes("POST", "/destinations", body), takes, "{body}");
    }
    for (body, takes) in [
        (r#"{"name":"g","kind":"google_ads"}"#, true),
        (
            r#"{"name":"t","kind":"tiktok_events","pixel_code":"C4AB","access_token":"x"}"#,
            true,
        ),
        (
            r#"{"name":"t","kind":"tiktok_events","access_token":"x"}"#,
            false,
        ),
        (
            r#"{"name":"w","kind":"webhook","url":"https://x.example","statuses":{}}"#,
            false,
        ),
        (
            r#"{"name":"m","kind":"meta_capi","pixel_id":"","access_token":"x"}"#,
            false,
        ),
        (r#"{"kind":"google_ads"}"#, false),
        // Another kind's field as the server reads it as absent: null, or empty text.
        (
            r#"{"name":"w","kind":"webhook","url":"https://x.example","pixel_id":""}"#,
            true,
        ),
        (
            r#"{"name":"w","kind":"webhook","url":"https://x.example","statuses":null}"#,
            true,
        ),
        (
            r#"{"name":"w","kind":"webhook","url":"https://x.example","pixel_id":"1"}"#,
            false,
        ),
    ] {
        assert_eq!(d.takes("POST", "/destinations", body), takes, "{body}");
    }
    for (body, takes) in [
        (
            r#"{"access_token":"EAAB-new-1234","currency_rates":{"XTR":"0.013 USD"}}"#,
            true,
        ),
        (r#"{"kind":"postback","statuses":{"deposit":"sale"}}"#, true),
        ("{}", true),
        (r#"{"access_token":null}"#, false),
        (r#"{"url":""}"#, false),
        (r#"{"statuses":null,"graph_url":""}"#, true),
        (r#"{"url":"https://x.example","pixel_id":"1"}"#, false),
        (r#"{"name":"meta","kind":"meta_capi"}"#, true),
        (r#"{"name":"Meta"}"#, false),
    ] {
        assert_eq!(
            d.takes("PATCH", "/destinations/{name}", body),
            takes,
            "{body}"
        );
    }
    let r = as_a(&s, "GET", "/destinations", None).await;
    assert_eq!(r.json()["destinations"].as_array().map(Vec::len), Some(3));
    d.check("GET", "/destinations", &r);
    for (target, status) in [
        ("/deliveries", 200),
        ("/deliveries?destination=hook&state=dead&limit=5", 200),
        ("/deliveries?limit=0", 422),
        ("/deliveries?destination=never", 404),
    ] {
        let r = as_a(&s, "GET", target, None).await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        d.check("GET", "/deliveries", &r);
    }
    for path in ["/destinations", "/deliveries"] {
        d.check("GET", path, &anonymous(&s, "GET", path, None).await);
    }
    let retry_bodies = [
        (r#"{"destination":"hook","state":"dead"}"#, 200),
        (r#"{"destination":"never"}"#, 404),
        (r#"{"destination":"hook","state":"pending"}"#, 422),
        (r#"{"destination":"hook","colour":1}"#, 400),
        (big.as_str(), 413),
    ];
    post_all(&s, &mut d, "/deliveries/retry", &retry_bodies).await;
    // The test button: a destination that cannot be reached still answers 200, saying so.
    for (name, status) in [("hook", 200), ("never", 404)] {
        let r = as_a(&s, "POST", &format!("/destinations/{name}/test"), Some("")).await;
        assert_eq!(r.status, status, "{name}: {}", r.text());
        d.check("POST", "/destinations/{name}/test", &r);
    }
    d.check(
        "POST",
        "/destinations/{name}/test",
        &anonymous(&s, "POST", "/destinations/hook/test", Some("")).await,
    );
    // Meta without a test code: nothing sent; a code of the request, broken or unknown fields.
    for (body, status) in [
        ("", 409),
        (r#"{"test_event_code":"TEST 1"}"#, 422),
        (r#"{"colour":1}"#, 400),
        (big.as_str(), 413),
    ] {
        let r = as_a(&s, "POST", "/destinations/meta/test", Some(body)).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        d.check("POST", "/destinations/{name}/test", &r);
    }
    // A change: secrets and settings, each error class.
    for (name, body, status) in [
        (
            "meta",
            r#"{"access_token":"EAAB-new-1234","currency_rates":{"XTR":"0.013 USD"}}"#,
            200,
        ),
        ("meta", r#"{"name":"other"}"#, 422),
        ("meta", r#"{"colour":1}"#, 400),
        ("never", "{}", 404),
        ("meta", big.as_str(), 413),
    ] {
        let r = as_a(&s, "PATCH", &format!("/destinations/{name}"), Some(body)).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        d.check("PATCH", "/destinations/{name}", &r);
    }
    d.check(
        "PATCH",
        "/destinations/{name}",
        &anonymous(&s, "PATCH", "/destinations/meta", Some("{}")).await,
    );
    // A webhook's new secret; another kind has none.
    for (name, status) in [("hook", 200), ("meta", 409), ("never", 404)] {
        let r = as_a(
            &s,
            "POST",
            &format!("/destinations/{name}/rotate-secret"),
            Some(""),
        )
        .await;
        assert_eq!(r.status, status, "{name}: {}", r.text());
        d.check("POST", "/destinations/{name}/rotate-secret", &r);
    }
    d.check(
        "POST",
        "/destinations/{name}/rotate-secret",
        &anonymous(&s, "POST", "/destinations/hook/rotate-secret", Some("")).await,
    );
    // Google Ads' file: served with the destination's password, `401` without it, `404` for
    // a path that names no file.
    let r = as_a(
        &s,
        "POST",
        "/destinations",
        Some(r#"{"name":"gads","kind":"google_ads","template":"legacy"}"#),
    )
    .await;
    let basic = |r: &crate::support::Response| {
        use base64::Engine as _;
        let pair = format!("google:{}", crate::support::google_password(r, 201));
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    };
    let legacy = basic(&r);
    let file = format!("/conversions/{}/gads.csv", s.a.name);
    let not_a_file = format!("/conversions/{}/gads.txt", s.a.name);
    for (target, authorization, status) in [
        (&file, Some(legacy.clone()), 200),
        (&file, None, 401),
        (&not_a_file, Some(legacy.clone()), 404),
    ] {
        let mut request = Request::get(target);
        if let Some(a) = authorization {
            request = request.header("Authorization", a);
        }
        let r = s.send(&request).await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        d.check("GET", "/conversions/{space}/{file}", &r);
    }
    // Data Manager's file of one conversion event: `404` for a legacy destination.
    let r = as_a(
        &s,
        "POST",
        "/destinations",
        Some(r#"{"name":"gdm","kind":"google_ads"}"#),
    )
    .await;
    let data_manager = basic(&r);
    let file = format!("/conversions/{}/gdm/deposit.csv", s.a.name);
    let legacy_file = format!("/conversions/{}/gads/deposit.csv", s.a.name);
    for (target, authorization, status) in [
        (&file, Some(data_manager.clone()), 200),
        (&file, None, 401),
        (&legacy_file, Some(legacy), 404),
    ] {
        let mut request = Request::get(target);
        if let Some(a) = authorization {
            request = request.header("Authorization", a);
        }
        let r = s.send(&request).await;
        assert_eq!(r.status, status, "{target}: {}", r.text());
        d.check("GET", "/conversions/{space}/{destination}/{file}", &r);
    }
    for (name, status) in [("pb", 200), ("pb", 404)] {
        let r = as_a(&s, "DELETE", &format!("/destinations/{name}"), None).await;
        assert_eq!(r.status, status, "{name}: {}", r.text());
        d.check("DELETE", "/destinations/{name}", &r);
    }
    d.check(
        "DELETE",
        "/destinations/{name}",
        &anonymous(&s, "DELETE", "/destinations/x", None).await,
    );

    // What no operation lists: an unknown path, a method a path does not take.
    d.check_component("NotFound", &s.send(&Request::get("/nowhere")).await);
    let r = anonymous(&s, "PUT", "/events", Some("{}")).await;
    assert_eq!(r.status, 405);
    d.check_component("MethodNotAllowed", &r);

    // /healthz, while the disk works and while it does not; a failed write is 503. A head with
    // too many header lines is refused before routing.
    d.check("GET", "/healthz", &s.send(&Request::get("/healthz")).await);
    let mut crowded = Request::get("/healthz");
    for _ in 0..70 {
        crowded = crowded.header("X-Filler", "1");
    }
    let r = s.send(&crowded).await;
    assert_eq!(r.status, 431);
    d.check("GET", "/healthz", &r);
    s.fault.store(fault::FAIL_ALL, Ordering::SeqCst);
    let r = as_a(&s, "POST", "/events", Some(r#"{"event":"contact"}"#)).await;
    assert_eq!(r.status, 503);
    d.check("POST", "/events", &r);
    let r = s.send(&Request::get("/healthz")).await;
    assert_eq!(r.status, 503);
    d.check("GET", "/healthz", &r);
    // Storage recovers by itself within seconds (tests/it/dedup.rs); not waited for here.
    drop(s);

    // Over a rate limit: a space's, and a link visitor's address.
    let limited = TestServer::start_with(|settings| {
        let one = Rate {
            per_second: 1,
            burst: 1,
        };
        settings.rate_limit = one;
        settings.address_rate_limit = one;
    })
    .await;
    for _ in 0..2 {
        let r = as_a(&limited, "POST", "/events", Some(r#"{"event":"contact"}"#)).await;
        d.check("POST", "/events", &r);
    }
    for _ in 0..2 {
        let r = send(limited.addr, &Request::get("/l/any")).await;
        d.check("GET", "/l/{slug}", &r);
    }
    limited.stop().await;

    let unseen = d.unseen();
    assert!(
        unseen.is_empty(),
        "the document lists answers this test never saw (make them, or take them out): {unseen:#?}"
    );
}
