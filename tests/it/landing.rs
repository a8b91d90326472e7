//! A landing page of the marketer's own (`docs/landing-pages.md`): `GET /t.js`, small, cached and
//! revalidated by its `ETag`; a view (`POST /l/<slug>/view`) counted only from one of the link's
//! `allowed_origins`, whose rule is checked when the link is made; a visit of `/l/` that keeps
//! the page's `fbp`, `fbc` and address.

use serde_json::{Value, json};
use tracker::domain::rate::Rate;

use crate::support::{Request, Response, TestServer, assert_error, assert_queued};

const PAGE: &str = "https://land.example.com";

/// A server whose visitors are not limited (these tests send faster than a person), with
/// `allow_private_destinations` as given.
async fn server(allow_private: bool) -> TestServer {
    TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = allow_private;
        c.address_rate_limit = Rate {
            per_second: 0,
            burst: 0,
        };
    })
    .await
}

async fn create(s: &TestServer, slug: &str, origins: &Value) -> Response {
    let body = json!({"slug": slug, "bot": "shop_bot", "allowed_origins": origins});
    s.post_as(&s.a, "/links", &body.to_string()).await
}

async fn view(s: &TestServer, slug: &str, origin: Option<&str>) -> Response {
    let target = format!("/l/{slug}/view?fbclid=IwAR1&page=https%3A%2F%2Fland.example.com%2F");
    let mut request = Request::post(&target, None, "");
    if let Some(origin) = origin {
        request = request.header("Origin", origin.to_owned());
    }
    s.send(&request).await
}

async fn views_of(s: &TestServer, slug: &str) -> Value {
    let links = s.list_as(&s.a, "/links", "links").await;
    let link = links.iter().find(|l| l["slug"] == slug).expect("the link");
    link["views"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_counts_only_from_an_allowed_origin() {
    let s = server(false).await;
    let r = create(
        &s,
        "spring",
        &json!([PAGE, "https://Other.example.com:8443/"]),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["link"]["allowed_origins"],
        json!([PAGE, "https://other.example.com:8443"])
    );
    for origin in [
        PAGE,
        "https://other.example.com:8443",
        "HTTPS://LAND.example.com",
    ] {
        let r = view(&s, "spring", Some(origin)).await;
        assert_eq!(r.status, 204, "{origin}: {}", r.text());
    }
    assert_eq!(views_of(&s, "spring").await, 3);
    for origin in [
        Some("https://evil.example.com"),
        Some("http://land.example.com"),
        Some("https://land.example.com:444"),
        Some("null"),
        None,
    ] {
        let r = view(&s, "spring", origin).await;
        assert_error(&r, 403, "forbidden", None);
    }
    // A crawler is answered, not counted; a view is never a click.
    let r = s
        .send(
            &Request::post("/l/spring/view", None, "")
                .header("Origin", PAGE)
                .header("User-Agent", "facebookexternalhit/1.1"),
        )
        .await;
    assert_eq!(r.status, 204);
    let links = s.list_as(&s.a, "/links", "links").await;
    assert_eq!(
        (links[0]["views"].clone(), links[0]["clicks"].clone()),
        (json!(3), json!(0))
    );
    // A link without allowed origins counts none; an unknown slug is not found.
    assert_eq!(create(&s, "plain", &json!([])).await.status, 201);
    assert_error(&view(&s, "plain", Some(PAGE)).await, 403, "forbidden", None);
    assert_eq!(views_of(&s, "plain").await, 0);
    assert_error(
        &view(&s, "nosuch", Some(PAGE)).await,
        404,
        "not_found",
        None,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_are_https_origins_and_local_ones_only_for_tests() {
    let s = server(false).await;
    let many: Vec<String> = (0..32)
        .map(|i| format!("https://p{i}.example.com"))
        .collect();
    assert_eq!(
        create(&s, "many", &json!(many)).await.status,
        201,
        "32 is the most"
    );
    let mut over = many.clone();
    over.push("https://p32.example.com".into());
    let r = create(&s, "over", &json!(over)).await;
    assert_error(&r, 422, "invalid_field", Some("allowed_origins"));
    for (i, (origin, ok)) in [
        ("https://a.io", true),
        ("https://a.io:65535", true),
        ("https://a.io:", false),
        ("https://a.io:123456", false),
        ("http://a.io", false),
        ("https://a.io/landing", false),
        ("https://a.io?x=1", false),
        ("https://", false),
        ("a.io", false),
        ("http://127.0.0.1:8080", false),
        ("http://localhost:8080", false),
    ]
    .into_iter()
    .enumerate()
    {
        let slug = format!("o{i}");
        let r = create(&s, &slug, &json!([origin])).await;
        if ok {
            assert_eq!(r.status, 201, "{origin}: {}", r.text());
        } else {
            assert_error(&r, 422, "invalid_field", Some("allowed_origins"));
        }
    }
    let r = create(&s, "typed", &json!("https://a.io")).await;
    assert_error(&r, 400, "invalid_json", Some("allowed_origins"));
    let local = server(true).await;
    for (i, (origin, ok)) in [
        ("http://127.0.0.1:8080", true),
        ("http://localhost:8080", true),
        ("http://127.0.0.1", false),
        ("http://10.0.0.1:80", false),
    ]
    .into_iter()
    .enumerate()
    {
        let r = create(&local, &format!("l{i}"), &json!([origin])).await;
        assert_eq!(r.status == 201, ok, "{origin}: {}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_is_small_cached_and_revalidated() {
    let s = server(false).await;
    let r = s.send(&Request::get("/t.js")).await;
    assert_eq!(r.status, 200);
    assert!(r.body.len() <= 4096, "{} bytes as served", r.body.len());
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(r.header("cache-control"), Some("public, max-age=300"));
    assert!(r.text().contains("sendBeacon"));
    let etag = r.header("etag").expect("an ETag").to_owned();
    let again = s
        .send(&Request::get("/t.js").header("If-None-Match", etag.clone()))
        .await;
    assert_eq!((again.status, again.body.len()), (304, 0));
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let other = s
        .send(&Request::get("/t.js").header("If-None-Match", "\"old\""))
        .await;
    assert_eq!(other.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visit_keeps_the_pages_fbp_and_leaves_a_bad_one_in_the_query() {
    let s = server(false).await;
    assert_eq!(create(&s, "spring", &json!([PAGE])).await.status, 201);
    let fbp = "fb.1.1700000000000.1234567890";
    for (query, kept) in [
        (
            format!("fbclid=IwAR1&fbp={fbp}&fbc=fb.1.1700000000000.IwAR1&page=x"),
            Some(fbp),
        ),
        ("fbp=nope".to_owned(), None),
    ] {
        let r = s.send(&Request::get(&format!("/l/spring?{query}"))).await;
        assert_eq!(r.status, 302);
        let location = r.header("location").unwrap();
        let uid = location.rsplit_once("start=").unwrap().1;
        let deposit = format!(r#"{{"event":"deposit","uid":"{uid}","value":"5"}}"#);
        assert_queued(&s.post_event(&deposit).await);
        let events = s.list_as(&s.a, "/events", "events").await;
        let event = events.iter().find(|e| e["uid"] == uid).expect("the event");
        assert_eq!(event["fbp"].as_str(), kept, "{event}");
    }
}

/// The group named `group` of `GET /stats?<query>`.
async fn stats_group(s: &TestServer, query: &str, group: &Value) -> Value {
    let stats = s.read_as(&s.a, &format!("/stats?{query}")).await.json();
    let groups = stats["groups"].as_array().expect("groups").clone();
    groups
        .into_iter()
        .find(|g| &g["group"] == group)
        .unwrap_or_else(|| panic!("no group {group} in {stats}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_and_the_view_to_click_rate_are_in_the_stats_by_link_campaign_and_day() {
    let s = server(false).await;
    for (slug, campaign) in [("spring", json!("winter")), ("autumn", Value::Null)] {
        let body = json!({"slug": slug, "bot": "shop_bot", "campaign_name": campaign,
            "allowed_origins": [PAGE]});
        let r = s.post_as(&s.a, "/links", &body.to_string()).await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // 2027-01-15 (the test clock's day, UTC): 4 views and 1 click of spring, 1 view of autumn.
    for _ in 0..4 {
        assert_eq!(view(&s, "spring", Some(PAGE)).await.status, 204);
    }
    assert_eq!(view(&s, "autumn", Some(PAGE)).await.status, 204);
    assert_eq!(s.send(&Request::get("/l/spring")).await.status, 302);
    // The next day: 2 more views of spring.
    s.clock.advance(tracker::domain::stats::DAY_MS);
    for _ in 0..2 {
        assert_eq!(view(&s, "spring", Some(PAGE)).await.status, 204);
    }
    let both = "from=2027-01-15&to=2027-01-16";
    let spring = stats_group(&s, &format!("by=link_slug&{both}"), &json!("spring")).await;
    assert_eq!(spring["views"], 6, "{spring}");
    assert_eq!(spring["rates"]["view_to_click"], "0.1667", "{spring}");
    // A link with views and no click is a group, its rate a share of its views.
    let autumn = stats_group(&s, &format!("by=link_slug&{both}"), &json!("autumn")).await;
    assert_eq!(
        (&autumn["views"], &autumn["clicks"]),
        (&json!(1), &json!(0))
    );
    assert_eq!(autumn["rates"]["view_to_click"], "0.0000");
    // By campaign: the links made with it; a link without one is under no campaign.
    let winter = stats_group(&s, &format!("by=campaign_name&{both}"), &json!("winter")).await;
    assert_eq!(winter["views"], 6);
    let none = stats_group(&s, &format!("by=campaign_name&{both}"), &Value::Null).await;
    assert_eq!(none["views"], 1);
    // By day, each day its own; only the first day in a range of one day.
    let first = stats_group(&s, &format!("by=day&{both}"), &json!("2027-01-15")).await;
    assert_eq!((&first["views"], &first["clicks"]), (&json!(5), &json!(1)));
    assert_eq!(first["rates"]["view_to_click"], "0.2000");
    let second = stats_group(&s, &format!("by=day&{both}"), &json!("2027-01-16")).await;
    assert_eq!(
        (&second["views"], &second["rates"]["view_to_click"]),
        (&json!(2), &json!("0.0000"))
    );
    let day = "from=2027-01-15&to=2027-01-15";
    let spring = stats_group(&s, &format!("by=link_slug&{day}"), &json!("spring")).await;
    assert_eq!(spring["views"], 4);
    // Within the campaign: its links and days only.
    let drill = format!("campaign=winter&{both}");
    let days = s
        .read_as(&s.a, &format!("/stats?by=day&{drill}"))
        .await
        .json();
    let views: Vec<&Value> = days["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["views"])
        .collect();
    assert_eq!(views, [&json!(4), &json!(2)], "{days}");
    let links = s
        .read_as(&s.a, &format!("/stats?by=link_slug&{drill}"))
        .await
        .json();
    assert!(
        links["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["group"] != "autumn"),
        "{links}"
    );
    // An ad knows no views: null, and no rate.
    let ad = stats_group(&s, &format!("by=utm_content&{both}"), &Value::Null).await;
    assert_eq!(
        (&ad["views"], &ad["rates"]["view_to_click"]),
        (&Value::Null, &Value::Null)
    );
}

/// The dashboard shows views and the view-to-click rate in its totals and its campaign table,
/// and a campaign's drill-down in its links and days (not its ads: a view does not know the
/// ad); a space without views shows none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_a_drill_down_show_views_where_there_were_some() {
    use crate::admin_page::{get_page, logged_in};
    let s = server(false).await;
    let cookie = logged_in(&s).await;
    let body = json!({"slug": "spring", "bot": "shop_bot", "campaign_name": "winter",
        "allowed_origins": [PAGE]});
    assert_eq!(
        s.post_as(&s.a, "/links", &body.to_string()).await.status,
        201
    );
    assert_eq!(s.send(&Request::get("/l/spring")).await.status, 302);
    let page = |target: &'static str| get_page(&s, Some(&cookie), target);
    let dashboard = page("/admin/spaces/a/dashboard?days=7").await.text();
    assert!(!dashboard.contains("View-to-click"), "{dashboard}");
    for _ in 0..4 {
        assert_eq!(view(&s, "spring", Some(PAGE)).await.status, 204);
    }
    let dashboard = page("/admin/spaces/a/dashboard?days=7").await.text();
    assert!(
        dashboard
            .contains(r#"Landing page views</th><td class="n" data-label="This period">4</td>"#),
        "{dashboard}"
    );
    assert!(
        dashboard.contains(r#"<td class="n" data-label="Views">4</td><td class="n" data-label="View-to-click">25.00%</td>"#),
        "{dashboard}"
    );
    let drill = page("/admin/spaces/a/dashboard?days=7&campaign=winter")
        .await
        .text();
    let table = |key: &str| {
        let start = drill.find(&format!("<table id=\"{key}\">")).expect(key);
        let end = start + drill[start..].find("</table>").unwrap();
        drill[start..end].to_owned()
    };
    assert!(
        table("links").contains(r#"data-label="Views">4</td>"#),
        "{drill}"
    );
    assert!(
        table("days").contains(r#"data-label="View-to-click">25.00%</td>"#),
        "{drill}"
    );
    assert!(!table("ads").contains("Views"), "{drill}");
    let csv = page("/admin/spaces/a/dashboard?days=7&format=csv")
        .await
        .text();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",views,view_to_click"),
        "{csv}"
    );
    assert!(csv.contains(",4,25.00%"), "{csv}");
}

/// `tracker link create --allowed-origin` (repeatable) takes the origins the API takes, by the
/// same rule: one just inside is kept as the API keeps it, one just outside is refused with the
/// API's sentence and makes no link; `tracker link list` shows them.
#[test]
fn the_command_line_sets_allowed_origins_by_the_apis_rule() {
    use crate::support::run_cli;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tracker.redb");
    let cli = |args: &[&str]| {
        let out = run_cli(dir.path(), &data, args);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    assert_eq!(cli(&["init"]).0, Some(0));
    let create = ["link", "create", "default", "spring", "--bot", "shop_bot"];
    // Just outside: plain http (no `allow_private_destinations` here), and a path.
    for origin in ["http://land.example.com", "https://land.example.com/page"] {
        let (code, _, stderr) = cli(&[&create[..], &["--allowed-origin", origin]].concat());
        assert_eq!(code, Some(1), "{origin}: {stderr}");
        assert!(stderr.contains("allowed_origins"), "{origin}: {stderr}");
    }
    assert!(cli(&["link", "list", "default"]).1.contains("no links yet"));
    let origins = [
        "--allowed-origin",
        "https://LAND.example.com/",
        "--allowed-origin",
        "https://other.example.com:8443",
    ];
    let (code, _, stderr) = cli(&[&create[..], &origins].concat());
    assert_eq!(code, Some(0), "{stderr}");
    let (_, list, _) = cli(&["link", "list", "default"]);
    assert!(
        list.contains("views from https://land.example.com, https://other.example.com:8443"),
        "{list}"
    );
}
