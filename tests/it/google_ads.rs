//! The `google_ads` destination (`docs/api.md#google-ads`): Google Ads fetches its
//! conversions file, `GET /conversions/<space>/<name>.csv`, behind HTTP basic authentication.
//! The file is held to Google's click-conversion template (the `Parameters:TimeZone=` line, the
//! column names, the time with its offset), the 90-day window at its edge, the password shown
//! once and refused when wrong (and logged), and each fetch shown with the destination.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::{
    NOW_MS, Request, Response, TestServer, assert_error, assert_queued, google_password,
};

const WINDOW_MS: u64 = 90 * 86_400_000;

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

async fn fetch(s: &TestServer, target: &str, authorization: Option<String>) -> Response {
    let mut request = Request::get(target);
    if let Some(a) = authorization {
        request = request.header("Authorization", a);
    }
    s.send(&request).await
}

async fn google_of(s: &TestServer) -> Value {
    let r = s.read_as(&s.a, "/destinations").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let list = r.json()["destinations"].as_array().unwrap().clone();
    list.into_iter()
        .find(|d| d["kind"] == "google_ads")
        .unwrap()
}

/// A click with a `gclid` and one with a `gbraid` that convert are in the file, in the space's
/// zone (Asia/Kolkata, +05:30) with Google's column names; a click with only an fbclid is not,
/// nor an event 1 ms older than 90 days, while one exactly 90 days old is. Nothing is queued
/// for Google, and each fetch is shown with the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_holds_the_google_clicks_conversions_in_googles_template() {
    let s = TestServer::start().await;
    let zone = s
        .patch_as(&s.a, "/space", r#"{"time_zone":"Asia/Kolkata"}"#)
        .await;
    assert_eq!(zone.status, 200);
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            &json!({"name": "google", "kind": "google_ads", "template": "legacy",
                    "conversion_names": {"deposit": "Telegram deposit"}})
            .to_string(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json()["destination"].clone();
    assert_eq!(created["user"], "google");
    let password = created["password"].as_str().unwrap().to_owned();
    assert_eq!(password.len(), 22, "{created}");

    // 2027-01-15 08:00:00 UTC: the event at NOW_MS falls just outside the window, the one a
    // second later just inside.
    let old = s.click(&s.a, r#"{"gclid":"gclid-old"}"#).await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"registration","uid":"{old}"}}"#))
            .await,
    );
    s.clock.set(NOW_MS + 1000);
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{old}"}}"#))
            .await,
    );
    // 2027-04-15 08:00:01 UTC, 13:30:01 in Kolkata.
    s.clock.set(NOW_MS + 1000 + WINDOW_MS);
    let gclid = s.click(&s.a, r#"{"gclid":"gclid-new"}"#).await;
    let gbraid = s.click(&s.a, r#"{"gbraid":"0AA-gbraid"}"#).await;
    let fbclid = s.click(&s.a, r#"{"fbclid":"only-meta"}"#).await;
    for body in [
        format!(r#"{{"event":"deposit","uid":"{gclid}","value":"25.00","currency":"USD"}}"#),
        format!(r#"{{"event":"registration","uid":"{gbraid}"}}"#),
        format!(r#"{{"event":"deposit","uid":"{fbclid}","value":"9.00","currency":"USD"}}"#),
    ] {
        assert_queued(&s.post_event(&body).await);
    }

    let target = format!("/conversions/{}/google.csv", s.a.name);
    let r = fetch(&s, &target, Some(basic("google", &password))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/csv; charset=utf-8"));
    let file = r.text();
    let lines: Vec<&str> = file.lines().collect();
    assert_eq!(lines[0], "Parameters:TimeZone=Asia/Kolkata", "{file}");
    assert_eq!(
        lines[1].split(',').collect::<Vec<_>>(),
        [
            "Google Click ID",
            "Conversion Name",
            "Conversion Time",
            "Conversion Value",
            "Conversion Currency",
            "GBRAID",
            "WBRAID"
        ],
        "{file}"
    );
    assert_eq!(
        &lines[2..],
        [
            "gclid-old,contact,2027-01-15 13:30:01+0530,,,,",
            "gclid-new,Telegram deposit,2027-04-15 13:30:01+0530,25.00,USD,,",
            ",registration,2027-04-15 13:30:01+0530,,,0AA-gbraid,",
        ],
        "{file}"
    );
    assert!(!file.contains("only-meta"), "{file}");

    // Nothing was queued for Google; the fetch is shown, and the password never again.
    let d = google_of(&s).await;
    assert_eq!(d["deliveries"]["pending"], 0, "{d}");
    assert_eq!(d["fetches"], 1, "{d}");
    assert_eq!(d["rows_served"], 3, "{d}");
    assert_eq!(d["last_fetched_at_ms"], NOW_MS + 1000 + WINDOW_MS, "{d}");
    assert!(d.get("password").is_none(), "{d}");
    let deliveries = s.read_as(&s.a, "/deliveries?destination=google").await;
    assert_eq!(deliveries.json()["deliveries"], json!([]));

    // Only the space's own destination, by its own name.
    let r = fetch(
        &s,
        &format!("/conversions/{}/google.csv", s.b.name),
        Some(basic("google", &password)),
    )
    .await;
    assert_eq!(r.status, 401);
    s.stop().await;
}

/// No password, a wrong one, a wrong user name: `401` with a basic challenge and nothing of the
/// file, and the fetch is not counted. A new password (`rotate-secret`) replaces the old one
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_gets_nothing_and_a_new_one_replaces_it() {
    let s = TestServer::start().await;
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"ads","kind":"google_ads","user":"gads","template":"legacy"}"#,
        )
        .await;
    let password = google_password(&r, 201);
    let uid = s.click(&s.a, r#"{"gclid":"secret-gclid"}"#).await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let target = format!("/conversions/{}/ads.csv", s.a.name);
    for authorization in [
        None,
        Some(basic("gads", &format!("{password}x"))),
        Some(basic("gads", &password[..21])),
        Some(basic("google", &password)),
        Some(format!("Bearer {}", s.a.secret)),
    ] {
        let r = fetch(&s, &target, authorization.clone()).await;
        assert_error(&r, 401, "unauthorized", None);
        assert!(
            r.header("www-authenticate")
                .is_some_and(|h| h.starts_with("Basic realm=")),
            "{:?}",
            r.headers
        );
        assert!(!r.text().contains("secret-gclid"), "{authorization:?}");
    }
    assert_eq!(google_of(&s).await["fetches"], 0);
    assert_eq!(
        fetch(&s, &target, Some(basic("gads", &password)))
            .await
            .status,
        200
    );

    let r = s.post_as(&s.a, "/destinations/ads/rotate-secret", "").await;
    let new = google_password(&r, 200);
    assert_ne!(new, password);
    assert_eq!(
        fetch(&s, &target, Some(basic("gads", &password)))
            .await
            .status,
        401
    );
    let r = fetch(&s, &target, Some(basic("gads", &new))).await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("secret-gclid"));
    assert_eq!(google_of(&s).await["fetches"], 2);
    // A change keeps the password.
    let change = s
        .patch_as(
            &s.a,
            "/destinations/ads",
            r#"{"conversion_names":{"contact":"Lead"}}"#,
        )
        .await;
    assert_eq!(change.status, 200);
    let r = fetch(&s, &target, Some(basic("gads", &new))).await;
    assert!(r.text().contains("secret-gclid,Lead,"), "{}", r.text());
    s.stop().await;
}

/// The user name is 1 to 64 visible characters without `:`, and a field of another kind is
/// refused naming it; nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_google_destinations_fields_have_rules() {
    let s = TestServer::start().await;
    for (body, field) in [
        (json!({"user": "u".repeat(65)}), "user"),
        (json!({"user": "a:b"}), "user"),
        (
            json!({"conversion_names": {"deposit": "n".repeat(101)}}),
            "conversion_names",
        ),
        (
            json!({"conversion_names": {"purchase": "P"}}),
            "conversion_names",
        ),
        (json!({"url": "https://x.example"}), "url"),
        (json!({"pixel_id": "1"}), "pixel_id"),
    ] {
        let mut body = body;
        body["name"] = json!("g");
        body["kind"] = json!("google_ads");
        let r = s.post_as(&s.a, "/destinations", &body.to_string()).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"w","kind":"webhook","url":"https://x.example","user":"u"}"#,
        )
        .await;
    assert_error(&r, 422, "invalid_field", Some("user"));
    let r = s.read_as(&s.a, "/destinations").await;
    assert_eq!(r.json()["destinations"], json!([]));
    let body = json!({"name": "g", "kind": "google_ads", "user": "u".repeat(64),
                      "conversion_names": {"deposit": "n".repeat(100)}});
    let r = s.post_as(&s.a, "/destinations", &body.to_string()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    s.stop().await;
}

/// The real binary logs a refused fetch at WARN (never the password given) and a served one at
/// INFO with its rows.
#[test]
fn fetches_are_logged_and_a_wrong_password_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let (process, space) = crate::support::first_start(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let r = runtime.block_on(crate::support::send(
        process.addr,
        &Request::post(
            "/destinations",
            Some(&space.secret),
            r#"{"name":"google","kind":"google_ads","template":"legacy"}"#,
        ),
    ));
    let password = google_password(&r, 201);
    let wrong = "WrongPassword0123456789";
    let get = |auth: String| {
        runtime.block_on(crate::support::send(
            process.addr,
            &Request::get("/conversions/default/google.csv").header("Authorization", auth),
        ))
    };
    assert_eq!(get(basic("google", wrong)).status, 401);
    assert_eq!(get(basic("google", &password)).status, 200);
    let log = process.log_when(|log| log.contains("fetched its conversions file"));
    let refused = log
        .lines()
        .find(|l| l.contains("conversions file refused"))
        .unwrap_or_else(|| panic!("no refusal logged:\n{log}"));
    assert!(refused.contains("WARN"), "{refused}");
    assert!(refused.contains("wrong user name or password"), "{refused}");
    assert!(!log.contains(wrong) && !log.contains(&password), "{log}");
    let served = log
        .lines()
        .find(|l| l.contains("fetched its conversions file"))
        .unwrap();
    assert!(
        served.contains("INFO") && served.contains("rows=0"),
        "{served}"
    );
    crate::support::stop_cleanly(process);
}

/// `GET /conversions/<space a>/<file>` with `authorization`.
async fn file_of(s: &TestServer, file: &str, authorization: Option<String>) -> Response {
    fetch(
        s,
        &format!("/conversions/{}/{file}", s.a.name),
        authorization,
    )
    .await
}

/// The event id `POST /events` answered for a queued event.
fn event_id_of(r: &Response) -> String {
    assert_queued(r);
    r.json()["event_id"].as_str().unwrap().to_owned()
}

/// Data Manager's file, byte for byte, as Google documents a file of its HTTPS source: "The
/// first row must contain the column headers", "One file is required per conversion event or
/// audience list" (support.google.com/google-ads-data-manager/answer/14605515), a time in "ISO
/// 8601 Standard with Offset" such as `2012-08-14T17:01:54-07:00`
/// (support.google.com/google-ads-data-manager/answer/14184381), and of Google's click
/// conversion fields: "The order ID associated with the conversion. An order id can only be
/// used for one conversion per conversion action", a currency that "is the ISO 4217
/// 3-character currency code" (developers.google.com/google-ads/api/reference/rpc/ClickConversion).
/// A deposit in `XTR` is converted by the destination's rate; one in `USDT` without a rate,
/// and one whose click has only a `gbraid`, are left out, counted and shown with why. A new
/// destination takes this template; `first_deposit.csv` holds only first deposits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_manager_file_is_one_conversion_event_in_googles_columns() {
    let s = TestServer::start().await;
    let zone = s
        .patch_as(&s.a, "/space", r#"{"time_zone":"Asia/Kolkata"}"#)
        .await;
    assert_eq!(zone.status, 200);
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"google","kind":"google_ads","currency_rates":{"XTR":"0.013 USD"}}"#,
        )
        .await;
    let password = google_password(&r, 201);
    assert_eq!(r.json()["destination"]["template"], "data_manager");
    let auth = Some(basic("google", &password));

    // 2027-01-15 08:00:00 UTC, 13:30:00 in Kolkata.
    let usd = s.click(&s.a, r#"{"gclid":"gclid-usd"}"#).await;
    let stars = s.click(&s.a, r#"{"gclid":"gclid-xtr"}"#).await;
    let tether = s.click(&s.a, r#"{"gclid":"gclid-usdt"}"#).await;
    let ios = s.click(&s.a, r#"{"gbraid":"0AA-gbraid"}"#).await;
    let first = event_id_of(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{usd}","value":"25.00","currency":"USD"}}"#
        ))
        .await,
    );
    s.clock.set(NOW_MS + 1000);
    let again = event_id_of(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{usd}","value":"5","currency":"usd"}}"#
        ))
        .await,
    );
    let converted = event_id_of(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{stars}","value":"100","currency":"XTR"}}"#
        ))
        .await,
    );
    for body in [
        format!(r#"{{"event":"deposit","uid":"{tether}","value":"3","currency":"USDT"}}"#),
        format!(r#"{{"event":"deposit","uid":"{ios}","value":"1","currency":"USD"}}"#),
        format!(r#"{{"event":"registration","uid":"{usd}"}}"#),
    ] {
        assert_queued(&s.post_event(&body).await);
    }

    let deposits = file_of(&s, "google/deposit.csv", auth.clone()).await;
    assert_eq!(deposits.status, 200, "{}", deposits.text());
    assert_eq!(
        deposits.header("content-type"),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(
        deposits.text(),
        format!(
            "Google Click ID,Conversion Time,Conversion Value,Conversion Currency,Order ID\n\
             gclid-usd,2027-01-15T13:30:00+05:30,25.00,USD,{first}\n\
             gclid-usd,2027-01-15T13:30:01+05:30,5,USD,{again}\n\
             gclid-xtr,2027-01-15T13:30:01+05:30,1.3,USD,{converted}\n"
        )
    );
    let d = google_of(&s).await;
    assert_eq!(d["rows_served"], 3, "{d}");
    assert_eq!(d["not_sent"], json!({"click_ids": 1, "currency": 1}), "{d}");
    let why = d["not_sent_why"].as_str().unwrap();
    assert!(
        why.contains("gbraid") && why.contains("currency_rates"),
        "{why}"
    );

    // A first deposit is in both files; the second of the same click only in deposit's.
    let firsts = file_of(&s, "google/first_deposit.csv", auth.clone()).await;
    assert_eq!(firsts.status, 200, "{}", firsts.text());
    assert!(firsts.text().contains(&first), "{}", firsts.text());
    assert!(!firsts.text().contains(&again), "{}", firsts.text());
    let registrations = file_of(&s, "google/registration.csv", auth.clone()).await;
    assert_eq!(
        registrations.text().lines().count(),
        2,
        "{}",
        registrations.text()
    );
    let d = google_of(&s).await;
    assert_eq!(
        (&d["fetches"], &d["rows_served"]),
        (&json!(3), &json!(1)),
        "{d}"
    );
    assert!(d.get("not_sent_why").is_none(), "{d}");

    s.stop().await;
}

/// A Data Manager destination serves no other file: not the legacy address, not a conversion
/// that is none of the five, not a kind it does not take, each answer naming why; and nothing
/// without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_manager_destination_serves_no_other_file() {
    let s = TestServer::start().await;
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"google","kind":"google_ads","events":["deposit"]}"#,
        )
        .await;
    let auth = Some(basic("google", &google_password(&r, 201)));
    for (target, says) in [
        ("google.csv", "/google/<conversion>.csv"),
        ("google/purchase.csv", "first_deposit"),
        ("google/contact.csv", "takes no contact events"),
        ("google/deposit.txt", "<conversion>.csv"),
    ] {
        let r = file_of(&s, target, auth.clone()).await;
        assert_error(&r, 404, "not_found", None);
        assert!(r.text().contains(says), "{target}: {}", r.text());
    }
    for target in ["google/first_deposit.csv", "google/deposit.csv"] {
        let r = file_of(&s, target, auth.clone()).await;
        assert_eq!(r.status, 200, "{target}: {}", r.text());
    }
    let r = file_of(&s, "google/deposit.csv", None).await;
    assert_error(&r, 401, "unauthorized", None);
    s.stop().await;
}

/// A destination that chose the legacy template serves the legacy file only, and one may move
/// to Data Manager's by a change that keeps its password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_template_stays_until_a_destination_changes_it() {
    let s = TestServer::start().await;
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"google","kind":"google_ads","template":"legacy"}"#,
        )
        .await;
    let password = google_password(&r, 201);
    let auth = Some(basic("google", &password));
    let uid = s.click(&s.a, r#"{"gclid":"gclid-1"}"#).await;
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let legacy = format!("/conversions/{}/google.csv", s.a.name);
    let contacts = format!("/conversions/{}/google/contact.csv", s.a.name);
    let r = fetch(&s, &legacy, auth.clone()).await;
    assert!(
        r.text().starts_with("Parameters:TimeZone=UTC\n"),
        "{}",
        r.text()
    );
    let r = fetch(&s, &contacts, auth.clone()).await;
    assert_error(&r, 404, "not_found", None);
    assert!(r.text().contains("legacy template"), "{}", r.text());

    let change = s
        .patch_as(
            &s.a,
            "/destinations/google",
            r#"{"template":"data_manager"}"#,
        )
        .await;
    assert_eq!(change.status, 200, "{}", change.text());
    let r = fetch(&s, &contacts, auth.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("gclid-1,2027-01-15T08:00:00+00:00,,,"),
        "{}",
        r.text()
    );
    assert_eq!(fetch(&s, &legacy, auth).await.status, 404);
    for (i, (template, ok)) in [
        ("data_manager", true),
        ("legacy", true),
        ("Legacy", false),
        ("data-manager", false),
    ]
    .into_iter()
    .enumerate()
    {
        let body = json!({"name": format!("t{i}"), "kind": "google_ads", "template": template});
        let r = s.post_as(&s.a, "/destinations", &body.to_string()).await;
        if ok {
            assert_eq!(r.status, 201, "{template}: {}", r.text());
        } else {
            assert_error(&r, 422, "invalid_field", Some("template"));
        }
    }
    s.stop().await;
}

/// The admin page names the address Google Ads is given by each destination's template (a
/// file per conversion for Data Manager's, one file for the legacy one), and offers the kind
/// by the name Google gives it now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_gives_each_template_its_own_address() {
    use crate::admin_page::{get_page, logged_in};
    let s = TestServer::start().await;
    for body in [
        r#"{"name":"dm","kind":"google_ads"}"#,
        r#"{"name":"old","kind":"google_ads","user":"gads","template":"legacy"}"#,
    ] {
        let _ = google_password(&s.post_as(&s.a, "/destinations", body).await, 201);
    }
    let cookie = logged_in(&s).await;
    let space = &s.a.name;
    let page = get_page(
        &s,
        Some(&cookie),
        &format!("/admin/spaces/{space}/destinations"),
    )
    .await;
    assert_eq!(page.status, 200, "{}", page.text());
    // The page's template escapes `<` and `>`.
    let text = page.text().replace("&#60;", "<").replace("&#62;", ">");
    let text = text.replace("&lt;", "<").replace("&gt;", ">");
    for shown in [
        format!(
            "fetched by Google Ads from /conversions/{space}/dm/<conversion>.csv as user google"
        ),
        format!("fetched by Google Ads from /conversions/{space}/old.csv as user gads"),
        "Google Ads (Data Manager)".to_owned(),
    ] {
        assert!(text.contains(&shown), "{shown}: {text}");
    }
    for never in [
        format!("/conversions/{space}/dm.csv"),
        format!("/conversions/{space}/old/"),
        "scheduled upload".to_owned(),
    ] {
        assert!(!text.contains(&never), "{never}: {text}");
    }
    s.stop().await;
}
