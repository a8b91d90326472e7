//! Spend fetched from Meta's insights into costs (`docs/costs.md`), through the stand-in of
//! `support/insights.rs`: costs per campaign, ad set and ad for the last days without an
//! upload, paged by `paging.next`; the drill-down's cost and return per ad set and ad; a second
//! fetch that replaces, never adds; costs set by hand that stay; a refused token that pauses
//! fetching until a new one, and an error answer shown as the fetch's result. Also the fields
//! `adset_name` and `ad_name` of `POST /costs`, and the settings of the fetch.

use std::time::Duration;

use serde_json::json;

use crate::channels::patch_space;
use crate::support::insights::{ACCOUNT, Insights, Row, TOKEN, error};
use crate::support::{
    DAY_MS, IO_TIMEOUT, NOW_MS, Response, TestServer, assert_error, assert_succeeded,
};

/// Today of the test's clock, in UTC (the spaces' zone), as a day number.
const TODAY: u64 = NOW_MS / DAY_MS;

/// The day `back` days before today: `2027-01-15` and so on.
fn day(back: u64) -> String {
    tracker::domain::cost::day_text(u32::try_from(TODAY - back).unwrap())
}

fn row(back: u64, campaign: &str, adset: &str, ad: &str, spend: &str) -> Row {
    Row {
        day: day(back),
        campaign: campaign.into(),
        adset: adset.into(),
        ad: ad.into(),
        spend: spend.into(),
    }
}

/// Waits until `/metrics` has counted `n` fetches that came to `result`.
async fn fetches(s: &TestServer, result: &str, n: u64) {
    let line = format!("tracker_costs_fetch_total{{result=\"{result}\"}} {n}\n");
    let waited = tokio::time::timeout(IO_TIMEOUT, async {
        while !s.metrics_text().contains(&line) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "no {line:?} in:\n{}", s.metrics_text());
}

/// A server whose space `a` fetches from the stand-in with `token`, once its first fetch (the
/// loop's, woken by the settings) came to `result`.
async fn with_meta(api: &Insights, token: &str, result: &str) -> TestServer {
    let s = TestServer::start_with(|c| c.delivery.allow_private_destinations = true).await;
    let r = patch_space(
        &s,
        &json!({"meta_ads_account": ACCOUNT, "meta_ads_token": token, "meta_graph_url": api.url()}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let settings = &r.json()["settings"];
    assert_eq!(settings["meta_ads_account"], ACCOUNT);
    let last4: String = token.chars().skip(token.chars().count() - 4).collect();
    assert_eq!(
        settings["meta_ads_token"],
        format!("…{last4}"),
        "write-only"
    );
    assert_eq!(settings["meta_graph_url"], api.url());
    fetches(&s, result, 1).await;
    s
}

/// `GET /costs` as space `a`: `day campaign/adset/ad amount currency source` each.
async fn costs(s: &TestServer) -> Vec<String> {
    s.list_as(&s.a, "/costs", "costs")
        .await
        .iter()
        .map(|c| {
            let t = |f: &str| c[f].as_str().unwrap().to_owned();
            format!(
                "{} {}/{}/{} {} {} {}",
                t("day"),
                t("campaign_name"),
                t("adset_name"),
                t("ad_name"),
                t("amount"),
                t("currency"),
                t("source")
            )
        })
        .collect()
}

async fn fetch_now(s: &TestServer) -> Response {
    s.post_as(&s.a, "/costs/fetch", "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ad_account_brings_costs_by_ad_and_a_second_fetch_replaces_them() {
    let api = Insights::start().await;
    api.set_currency("EUR");
    api.set_rows(vec![
        row(0, "autumn", "broad", "video-1", "10.50"),
        row(0, "autumn", "broad", "video-2", "2"),
        row(1, "autumn", "lookalike", "video-1", "7.25"),
        row(27, "winter", "", "", "1"),
        // Outside the 28 days: never asked for.
        row(28, "winter", "", "", "100"),
    ]);
    let s = with_meta(&api, TOKEN, "ok").await;
    assert_eq!(
        costs(&s).await,
        [
            format!("{} winter// 1 EUR meta", day(27)),
            format!("{} autumn/lookalike/video-1 7.25 EUR meta", day(1)),
            format!("{} autumn/broad/video-1 10.50 EUR meta", day(0)),
            format!("{} autumn/broad/video-2 2 EUR meta", day(0)),
        ]
    );
    // Two rows a page: two pages, the second by `paging.next`; each asked as Meta documents.
    let asked = api.asked();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    let first = &asked[0].query;
    assert_eq!(asked[0].path, format!("/v25.0/{ACCOUNT}/insights"));
    assert_eq!(
        (first["level"].as_str(), first["time_increment"].as_str()),
        ("ad", "1")
    );
    assert_eq!(
        first["fields"],
        "campaign_name,adset_name,ad_name,spend,account_currency"
    );
    assert_eq!(
        first["time_range"],
        format!(r#"{{"since":"{}","until":"{}"}}"#, day(27), day(0))
    );
    assert_eq!(asked[1].query["after"], "2");

    // By hand: one of Meta's rows set again, and a campaign of its own; both stay.
    for body in [
        json!({"day": day(0), "campaign_name": "autumn", "adset_name": "broad",
            "ad_name": "video-1", "amount": "99", "currency": "EUR"}),
        json!({"day": day(2), "campaign_name": "manual", "amount": "5", "currency": "EUR"}),
    ] {
        let r = s.post_as(&s.a, "/costs", &body.to_string()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["cost"]["source"], "hand");
    }
    // Meta now says otherwise: video-2 spent more; the lookalike row left out stays.
    api.set_rows(vec![
        row(0, "autumn", "broad", "video-1", "11"),
        row(0, "autumn", "broad", "video-2", "3"),
        row(27, "winter", "", "", "1"),
    ]);
    let r = fetch_now(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let fetch = &r.json()["fetch"];
    assert_eq!(
        (
            fetch["result"].as_str(),
            fetch["from"].as_str(),
            fetch["to"].as_str()
        ),
        (Some("ok"), Some(day(27).as_str()), Some(day(0).as_str()))
    );
    assert_eq!((&fetch["rows"], &fetch["set"]), (&json!(3), &json!(2)));
    assert_eq!(fetch["spend"], json!({"EUR": "15"}));
    assert_eq!(
        costs(&s).await,
        [
            format!("{} winter// 1 EUR meta", day(27)),
            format!("{} manual// 5 EUR hand", day(2)),
            format!("{} autumn/lookalike/video-1 7.25 EUR meta", day(1)),
            format!("{} autumn/broad/video-1 99 EUR hand", day(0)),
            format!("{} autumn/broad/video-2 3 EUR meta", day(0)),
        ],
        "replaced, never added; the costs set by hand stay"
    );
    // Stats add up the costs as they are now: Meta's old 10.50 and 2 count no more.
    assert_eq!(
        spent_by(&s, "campaign_name").await,
        [
            r#""autumn" {"EUR":"109.25"}"#,
            r#""manual" {"EUR":"5"}"#,
            r#""winter" {"EUR":"1"}"#
        ]
    );
    let by_day = [(27, "1"), (2, "5"), (1, "7.25"), (0, "102")];
    let by_day = by_day.map(|(back, eur)| format!(r#""{}" {{"EUR":"{eur}"}}"#, day(back)));
    assert_eq!(spent_by(&s, "day").await, by_day);
    // 0 by hand removes a cost, and its campaign's and day's sums with it.
    let zero = json!({"day": day(2), "campaign_name": "manual", "amount": "0", "currency": "EUR"});
    let r = s.post_as(&s.a, "/costs", &zero.to_string()).await;
    assert_eq!(r.json()["removed"], true, "{}", r.text());
    assert_eq!(
        spent_by(&s, "campaign_name").await,
        [r#""autumn" {"EUR":"109.25"}"#, r#""winter" {"EUR":"1"}"#]
    );
    assert_eq!(spent_by(&s, "day").await.len(), 3);
    fetches(&s, "ok", 2).await;
    s.stop().await;
}

/// Each group of space `a`'s stats `by` with a cost: `group cost`.
async fn spent_by(s: &TestServer, by: &str) -> Vec<String> {
    let r = s.read_as(&s.a, &format!("/stats?by={by}")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["cost"] != json!({}))
        .map(|g| format!("{} {}", g["group"], g["cost"]))
        .collect()
}

/// The stats of space `a` grouped `by` within campaign `autumn`: `group cost` each, and the
/// return in dollars, to 3 places.
async fn drill(s: &TestServer, by: &str) -> Vec<String> {
    let r = s
        .read_as(&s.a, &format!("/stats?by={by}&campaign=autumn"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let roi: Option<f64> = g["roi"]["USD"].as_str().map(|r| r.parse().unwrap());
            let roi = roi.map_or("-".into(), |r| format!("{r:.3}"));
            format!("{} {} {roi}", g["group"], g["cost"])
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drill_down_shows_cost_and_return_per_ad_set_and_ad() {
    let api = Insights::start().await;
    api.set_rows(vec![
        row(0, "autumn", "broad", "video-1", "10"),
        row(0, "autumn", "broad", "video-2", "5"),
        row(0, "autumn", "narrow", "video-3", "20"),
    ]);
    let s = with_meta(&api, TOKEN, "ok").await;
    let uid = s
        .click(
            &s.a,
            r#"{"campaign_name":"autumn","raw_query":"utm_term=broad&utm_content=video-1"}"#,
        )
        .await;
    let r = s
        .post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","value":"30","currency":"USD"}}"#
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        drill(&s, "utm_content").await,
        [
            r#""video-1" {"USD":"10"} 2.000"#,
            r#""video-2" {"USD":"5"} -1.000"#,
            r#""video-3" {"USD":"20"} -1.000"#,
        ]
    );
    assert_eq!(
        drill(&s, "utm_term").await,
        [
            r#""broad" {"USD":"15"} 1.000"#,
            r#""narrow" {"USD":"20"} -1.000"#,
        ]
    );
    // The campaign's cost is the sum of its rows.
    assert_eq!(
        drill(&s, "campaign_name").await,
        [r#""autumn" {"USD":"35"} -0.143"#]
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_pauses_fetching_until_a_new_one_and_failures_are_shown() {
    let api = Insights::start().await;
    api.set_rows(vec![row(0, "autumn", "broad", "video-1", "10")]);
    let wrong = "EAAGwrongTOKEN0123456789";
    let s = with_meta(&api, wrong, "token_refused").await;
    assert_eq!(api.asked().len(), 1);
    let r = fetch_now(&s).await;
    let e = assert_error(&r, 409, "conflict", None);
    let message = e["error"].as_str().unwrap();
    assert!(
        message.contains("paused") && message.contains("code 190"),
        "{message}"
    );
    assert!(!message.contains(wrong), "the token is never shown");
    assert_eq!(api.asked().len(), 1, "paused: Meta is not asked again");
    assert_eq!(costs(&s).await, Vec::<String>::new());

    // A new token, but Meta answers an error first: the fetch's result says so.
    api.fail_next(500, error(1, "OAuthException", "An unknown error occurred"));
    let r = patch_space(&s, &json!({"meta_ads_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    fetches(&s, "failed", 1).await;
    let r = fetch_now(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["fetch"]["result"], "ok");
    assert_eq!(
        costs(&s).await,
        [format!("{} autumn/broad/video-1 10 USD meta", day(0))]
    );
    let metrics = s.metrics_text();
    for line in [
        "tracker_costs_fetch_total{result=\"ok\"} 1",
        "tracker_costs_fetch_total{result=\"failed\"} 1",
        "tracker_costs_fetch_total{result=\"token_refused\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    s.stop().await;
}

/// The failure of a fetch is its answer's result, with Meta's words and never the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_is_the_fetchs_result() {
    let api = Insights::start().await;
    let s = with_meta(&api, TOKEN, "ok").await;
    api.fail_next(
        400,
        error(100, "OAuthException", "(#100) Invalid parameter"),
    );
    let r = fetch_now(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let fetch = &r.json()["fetch"];
    assert_eq!(fetch["result"], "failed");
    let why = fetch["error"].as_str().unwrap();
    assert!(why.contains("Invalid parameter"), "{why}");
    assert!(!r.text().contains(TOKEN), "the token is never shown");
    // No answer at all: the transport's words, which quote the URL, without the token.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let r = patch_space(
        &s,
        &json!({"meta_graph_url": gone, "meta_ads_token": TOKEN}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = fetch_now(&s).await;
    let fetch = &r.json()["fetch"];
    assert_eq!(fetch["result"], "failed", "{}", r.text());
    let why = fetch["error"].as_str().unwrap();
    assert!(why.contains("did not answer"), "{why}");
    assert!(!r.text().contains(TOKEN), "the token is never shown: {why}");
    s.stop().await;
}

/// An ad account Meta does not know (or the token's user does not have) fails the fetch naming
/// the setting, and pauses nothing: a refused token is not what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ad_account_is_named_and_pauses_nothing() {
    let api = Insights::start().await;
    api.set_rows(vec![row(0, "autumn", "broad", "video-1", "10")]);
    let s = with_meta(&api, TOKEN, "ok").await;
    let r = patch_space(&s, &json!({"meta_ads_account": "act_999"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    fetches(&s, "failed", 1).await;
    let r = fetch_now(&s).await;
    assert_eq!(r.status, 200, "not paused: {}", r.text());
    let fetch = &r.json()["fetch"];
    assert_eq!(fetch["result"], "failed");
    let why = fetch["error"].as_str().unwrap();
    assert!(
        why.contains("act_999") && why.contains("check meta_ads_account"),
        "{why}"
    );
    assert!(!why.contains("meta_ads_token"), "{why}");
    s.stop().await;
}

/// Meta counts an account's days in its own time zone: a space in another is told so by the
/// fetch's result, and a zone with the same days (an alias) is not another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ad_account_in_another_time_zone_is_named() {
    let api = Insights::start().await;
    api.set_rows(vec![row(0, "autumn", "broad", "video-1", "10")]);
    let s = with_meta(&api, TOKEN, "ok").await;
    let summary = |r: &crate::support::Response| {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["fetch"]["result"], "ok", "{}", r.text());
        r.json()["fetch"]["summary"].as_str().unwrap().to_owned()
    };
    let said = summary(&fetch_now(&s).await);
    assert!(
        said.contains("ad account's time zone, America/Los_Angeles")
            && said.contains("set the space's time_zone to America/Los_Angeles"),
        "{said}"
    );
    assert!(api.zone_asked() >= 2, "each fetch asks");
    for (space, account) in [
        ("America/Los_Angeles", "America/Los_Angeles"),
        ("America/Los_Angeles", "US/Pacific"),
        ("UTC", "Etc/UTC"),
    ] {
        let r = patch_space(&s, &json!({"time_zone": space})).await;
        assert_eq!(r.status, 200, "{}", r.text());
        api.set_zone(account);
        let said = summary(&fetch_now(&s).await);
        assert!(!said.contains("time zone"), "{space} / {account}: {said}");
    }
    api.set_zone("Europe/Berlin");
    let said = summary(&fetch_now(&s).await);
    assert!(
        said.contains("ad account's time zone, Europe/Berlin"),
        "{said}"
    );
    s.stop().await;
}

/// A month's fetch that failed is tried again, whole, at the next hour: Meta's revisions of
/// the month's days are not left for a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_month_is_fetched_again_at_the_next_hour() {
    let api = Insights::start().await;
    api.fail_next(
        500,
        error(2, "OAuthException", "Service temporarily unavailable"),
    );
    let s = with_meta(&api, TOKEN, "failed").await;
    let range = |since: &str, until: &str| format!(r#"{{"since":"{since}","until":"{until}"}}"#);
    assert_eq!(range_asked(&api, 0), range(&day(27), &day(0)));
    let wake = || s.app.as_ref().unwrap().spend.wake.notify_one();
    s.clock.advance(60 * 60 * 1000);
    wake();
    fetches(&s, "ok", 1).await;
    assert_eq!(range_asked(&api, 1), range(&day(27), &day(0)));
    // Then, done, the hours fetch their last days again.
    s.clock.advance(60 * 60 * 1000);
    wake();
    fetches(&s, "ok", 2).await;
    assert_eq!(range_asked(&api, 2), range(&day(2), &day(0)));
    s.stop().await;
}

/// A `200` that is not a page of insights (a proxy's `{}` at `meta_graph_url`) fails the fetch
/// and keeps the costs: read as a page of no spend, it would remove the whole range's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_data_keeps_the_costs() {
    let api = Insights::start().await;
    api.set_rows(vec![row(1, "autumn", "broad", "video-1", "10")]);
    let s = with_meta(&api, TOKEN, "ok").await;
    let stored = [format!("{} autumn/broad/video-1 10 USD meta", day(1))];
    assert_eq!(costs(&s).await, stored);
    for body in [json!({}), json!({"ok": true}), json!({"data": null})] {
        api.fail_next(200, body.clone());
        let r = fetch_now(&s).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let fetch = &r.json()["fetch"];
        assert_eq!(fetch["result"], "failed", "{body}: {}", r.text());
        assert!(
            fetch["error"].as_str().unwrap().contains("not insights"),
            "{body}: {fetch}"
        );
        assert_eq!(costs(&s).await, stored, "{body}");
    }
    // A page with no rows says nothing of the ad: its cost stays.
    api.set_rows(vec![]);
    let r = fetch_now(&s).await;
    assert_eq!(r.json()["fetch"]["result"], "ok", "{}", r.text());
    assert_eq!(costs(&s).await, stored);
    // A row of no spend is what removes it.
    api.set_rows(vec![row(1, "autumn", "broad", "video-1", "0")]);
    let r = fetch_now(&s).await;
    assert_eq!(r.json()["fetch"]["removed"], 1, "{}", r.text());
    assert_eq!(costs(&s).await, Vec::<String>::new());
    s.stop().await;
}

/// `POST /costs`'s `adset_name` and `ad_name`: optional, at most 512 characters each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ad_set_and_ad_names_are_optional_and_bounded() {
    let s = TestServer::start().await;
    let inside = "a".repeat(512);
    let outside = "a".repeat(513);
    for field in ["adset_name", "ad_name"] {
        let body = |name: &str| {
            json!({"day": "2026-11-24", "campaign_name": "c", field: name, "amount": "1",
                "currency": "USD"})
            .to_string()
        };
        let r = s.post_as(&s.a, "/costs", &body(&inside)).await;
        assert_eq!(r.status, 200, "{field}: {}", r.text());
        assert_eq!(r.json()["cost"][field], inside.as_str());
        let r = s.post_as(&s.a, "/costs", &body(&outside)).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    assert_eq!(costs(&s).await.len(), 2, "the refused ones changed nothing");
    // Without a Meta ad account there is nothing to fetch.
    let r = fetch_now(&s).await;
    assert_error(&r, 409, "conflict", None);
    s.stop().await;
}

/// The settings of the fetch: an ad account id `act_<digits>`, a token of Meta's shape, an
/// `http(s)` address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metas_settings_are_checked() {
    let s = TestServer::start().await;
    let max = format!("act_{}", "9".repeat(20));
    let over = format!("act_{}", "9".repeat(21));
    for (body, ok) in [
        (json!({"meta_ads_account": "act_1"}), true),
        (json!({"meta_ads_account": max}), true),
        (json!({"meta_ads_account": over}), false),
        (json!({"meta_ads_account": "1234"}), false),
        (json!({"meta_ads_token": "E".repeat(16)}), true),
        (json!({"meta_ads_token": "E".repeat(15)}), false),
        (json!({"meta_graph_url": "ftp://graph.example"}), false),
        // A private address only with allow_private_destinations, as a destination's; nor
        // http:// without it.
        (
            json!({"meta_graph_url": "https://127.0.0.1", "meta_ads_token": "E".repeat(16)}),
            false,
        ),
        (
            json!({"meta_graph_url": "https://10.255.255.255", "meta_ads_token": "E".repeat(16)}),
            false,
        ),
        (
            json!({"meta_graph_url": "http://graph.example", "meta_ads_token": "E".repeat(16)}),
            false,
        ),
        (
            json!({"meta_graph_url": "https://11.0.0.0", "meta_ads_token": "E".repeat(16)}),
            true,
        ),
        (json!({"meta_graph_version": "v23.0"}), true),
        (json!({"meta_graph_version": "23.0"}), false),
        (json!({"meta_graph_version": "v1000.0"}), false),
        (json!({"meta_graph_version": ""}), true),
        (
            json!({"meta_graph_url": "https://graph.example", "meta_ads_token": "E".repeat(16)}),
            true,
        ),
    ] {
        let r = patch_space(&s, &body).await;
        // The token given with an address is there only to be given again with it.
        let keys = body.as_object().unwrap().keys();
        let field = keys.clone().find(|k| *k != "meta_ads_token");
        let field = field.or(keys.clone().next()).unwrap().clone();
        if ok {
            assert_eq!(r.status, 200, "{body}: {}", r.text());
        } else {
            assert_error(&r, 422, "invalid_field", Some(&field));
        }
    }
    // The stored token goes only where it was given: a new address alone is refused.
    let r = patch_space(&s, &json!({"meta_graph_url": "https://other.example"})).await;
    assert_error(&r, 422, "invalid_field", Some("meta_ads_token"));
    let r = patch_space(&s, &json!({"meta_graph_url": "https://graph.example"})).await;
    assert_eq!(r.status, 200, "the same address: {}", r.text());
    s.stop().await;
}

/// The Costs page: the ad account, the last fetch (a refused token shown as a pause), and the
/// **Fetch now** button, which runs the same fetch as `POST /costs/fetch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_costs_page_shows_the_last_fetch_and_fetches_now() {
    use crate::admin_page::{csrf_of, form, get_page, logged_in, post_form};
    let api = Insights::start().await;
    api.set_rows(vec![row(0, "autumn", "broad", "video-1", "10")]);
    let wrong = "EAAGwrongTOKEN0123456789";
    let s = with_meta(&api, wrong, "token_refused").await;
    let cookie = logged_in(&s).await;
    let page = get_page(&s, Some(&cookie), "/admin/spaces/a/costs").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let text = page.text();
    for says in [
        ACCOUNT,
        "paused until a new meta_ads_token",
        "code 190",
        "Fetch now",
    ] {
        assert!(text.contains(says), "{says}: {text}");
    }
    assert!(!text.contains(wrong), "the token is never shown");
    let csrf = csrf_of(&page);
    let button = || form("/admin/spaces/a/costs/fetch", &format!("csrf={csrf}"));
    let r = post_form(&s, Some(&cookie), button()).await;
    assert_eq!(r.status, 409, "paused: {}", r.text());
    assert!(
        r.text().contains("set a new meta_ads_token"),
        "{}",
        r.text()
    );

    let r = patch_space(&s, &json!({"meta_ads_token": TOKEN})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    fetches(&s, "ok", 1).await;
    let r = post_form(&s, Some(&cookie), button()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    for says in ["28 days (", "1 costs set", "spend 10 USD", "video-1"] {
        assert!(text.contains(says), "{says}: {text}");
    }
    fetches(&s, "ok", 2).await;
    s.stop().await;
}

/// `tracker costs fetch SPACE` through a running server: refused without an ad account, then,
/// with the settings set by `tracker space set`, the fetch's sentence; the server's log says
/// what it fetched, never with the token.
#[test]
fn the_command_line_fetches_spend_from_meta() {
    use crate::support::{TrackerProcess, run_cli, stop_cleanly};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(Insights::start());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let today = u32::try_from(now_ms / u128::from(DAY_MS)).unwrap();
    api.set_rows(vec![Row {
        day: tracker::domain::cost::day_text(today),
        campaign: "autumn".into(),
        adset: "broad".into(),
        ad: "video-1".into(),
        spend: "12.5".into(),
    }]);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")],
    );
    process.created.take().expect("first start");
    let out = run_cli(dir.path(), &data, ["costs", "fetch", "default"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("meta_ads_account"), "{stderr}");

    let graph = format!("meta_graph_url={}", api.url());
    let account = format!("meta_ads_account={ACCOUNT}");
    let token = format!("meta_ads_token={TOKEN}");
    let out = run_cli(
        dir.path(),
        &data,
        ["space", "set", "default", &account, &token, &graph],
    );
    assert_succeeded(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN));
    let out = run_cli(dir.path(), &data, ["costs", "fetch", "default"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_succeeded(&out);
    assert!(
        stdout.starts_with("space default: spend from Meta: 28 days (")
            && stdout.contains("1 rows, 1 costs set")
            && stdout.contains("spend 12.5 USD"),
        "{stdout}"
    );
    let log = process.log_when(|log| log.contains("spend fetched from Meta"));
    assert!(!log.contains(TOKEN), "the token is never logged: {log}");
    stop_cleanly(process);
}

/// Not a check but a measurement (run by hand with `--ignored --nocapture`): a month of an ad
/// account of 300 ads (8,400 rows, 17 pages of 500) fetched through the stand-in, then the
/// drill-down by ad and the campaigns read with those costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn measure_a_month_of_300_ads() {
    let api = Insights::start().await;
    api.set_page_rows(500);
    let mut rows = Vec::new();
    for back in 0..28 {
        for ad in 0..300 {
            rows.push(row(
                back,
                &format!("campaign-{}", ad % 10),
                &format!("adset-{}", ad % 50),
                &format!("ad-{ad}"),
                "12.34",
            ));
        }
    }
    api.set_rows(rows);
    let s = with_meta(&api, TOKEN, "ok").await;
    let started = std::time::Instant::now();
    let r = fetch_now(&s).await;
    let took = started.elapsed();
    assert_eq!(r.json()["fetch"]["set"], 8400, "{}", r.text());
    println!("POST /costs/fetch, 8400 rows in 17 pages: {took:?}");
    for target in [
        "/stats?by=utm_content&campaign=campaign-3",
        "/stats?by=utm_term",
        "/stats?by=campaign_name",
        "/costs",
    ] {
        let mut times = Vec::new();
        for _ in 0..20 {
            let started = std::time::Instant::now();
            let r = s.read_as(&s.a, target).await;
            times.push(started.elapsed());
            assert_eq!(r.status, 200);
        }
        times.sort();
        println!("GET {target}: median {:?}, max {:?}", times[10], times[19]);
    }
    s.stop().await;
}

/// The `time_range` of the `n`th request to the stand-in.
fn range_asked(api: &Insights, n: usize) -> String {
    api.asked()[n].query["time_range"].clone()
}

/// On its own, the server fetches the last 3 days every hour and the last 28 once a day, in
/// the space's time zone: a test's clock moved on, and the loop woken to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hour_three_days_and_every_day_twenty_eight() {
    let api = Insights::start().await;
    let s = with_meta(&api, TOKEN, "ok").await;
    let range = |since: &str, until: &str| format!(r#"{{"since":"{since}","until":"{until}"}}"#);
    assert_eq!(range_asked(&api, 0), range(&day(27), &day(0)));
    let wake = || s.app.as_ref().unwrap().spend.wake.notify_one();
    // Not yet an hour: nothing.
    s.clock.advance(59 * 60 * 1000);
    wake();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.asked().len(), 1);
    s.clock.advance(60 * 1000);
    wake();
    fetches(&s, "ok", 2).await;
    assert_eq!(range_asked(&api, 1), range(&day(2), &day(0)));
    // A day after the first: the month again, of the new today.
    s.clock.advance(DAY_MS - 60 * 60 * 1000);
    wake();
    fetches(&s, "ok", 3).await;
    let today = TODAY + 1;
    let day_of = |n: u64| tracker::domain::cost::day_text(u32::try_from(n).unwrap());
    assert_eq!(
        range_asked(&api, 2),
        range(&day_of(today - 27), &day_of(today))
    );
    // In the space's zone: at 08:00 UTC it is still the day before in Honolulu (UTC-10); the
    // settings' change fetches the month at once.
    let r = patch_space(&s, &json!({"time_zone": "Pacific/Honolulu"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = patch_space(&s, &json!({"meta_ads_account": ACCOUNT})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    fetches(&s, "ok", 4).await;
    assert_eq!(
        range_asked(&api, 3),
        range(&day_of(today - 1 - 27), &day_of(today - 1))
    );
    s.stop().await;
}

/// Meta leaves deleted and archived ads out of an account's insights unless asked for them: the
/// fetch asks, so their spend comes in; and an ad Meta's answer leaves out (for whatever reason)
/// keeps the spend stored for it, so a fetch never lowers the cost by forgetting an ad.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_archived_ads_count_and_an_ad_left_out_keeps_its_spend() {
    let api = Insights::start().await;
    api.set_rows(vec![
        row(1, "autumn", "broad", "video-1", "10.00"),
        row(1, "autumn", "broad", "video-2", "40.00"),
        row(2, "autumn", "broad", "video-3", "5"),
    ]);
    api.set_status("video-2", "DELETED");
    api.set_status("video-3", "ARCHIVED");
    let s = with_meta(&api, TOKEN, "ok").await;
    let stored = [
        format!("{} autumn/broad/video-3 5 USD meta", day(2)),
        format!("{} autumn/broad/video-1 10.00 USD meta", day(1)),
        format!("{} autumn/broad/video-2 40.00 USD meta", day(1)),
    ];
    assert_eq!(costs(&s).await, stored);
    // Meta's answer no longer has the deleted ad (asked without the filter, or gone from it).
    api.set_rows(vec![row(1, "autumn", "broad", "video-1", "10.00")]);
    let r = fetch_now(&s).await;
    let fetch = &r.json()["fetch"];
    assert_eq!(fetch["result"], "ok", "{}", r.text());
    assert_eq!((&fetch["set"], &fetch["removed"]), (&json!(1), &json!(0)));
    assert!(
        fetch["summary"]
            .as_str()
            .unwrap()
            .contains("1 costs set, 0 removed"),
        "{fetch}"
    );
    assert_eq!(costs(&s).await, stored);
    assert_eq!(
        spent_by(&s, "campaign_name").await,
        [r#""autumn" {"USD":"55.00"}"#]
    );
    s.stop().await;
}

/// A range Meta finds too large to answer at once ("reduce the amount of data": `100`/
/// `1504018`, `2`/`1504038`) is asked again in halves, down to single days, and the fetch
/// brings every day's spend once; when even one day is too much, the fetch fails saying so and
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_too_large_for_meta_is_asked_in_halves_down_to_a_day() {
    let api = Insights::start().await;
    api.set_rows(vec![
        row(0, "autumn", "broad", "video-1", "1"),
        row(10, "autumn", "broad", "video-1", "2"),
        row(27, "autumn", "broad", "video-1", "4"),
    ]);
    api.set_max_days(7, 100, 1_504_018);
    let s = with_meta(&api, TOKEN, "ok").await;
    assert_eq!(costs(&s).await.len(), 3);
    assert_eq!(
        spent_by(&s, "campaign_name").await,
        [r#""autumn" {"USD":"7"}"#]
    );
    let ranges: Vec<(String, String)> = api
        .asked()
        .iter()
        .map(|a| {
            let range: serde_json::Value = serde_json::from_str(&a.query["time_range"]).unwrap();
            let day = |k: &str| range[k].as_str().unwrap().to_owned();
            (day("since"), day("until"))
        })
        .collect();
    // 28 days, then 14 and 14, then four weeks: the weeks, earliest first, cover the month once.
    assert_eq!(ranges.len(), 7, "{ranges:?}");
    assert_eq!(ranges[0], (day(27), day(0)));
    let weeks: Vec<&(String, String)> = ranges
        .iter()
        .filter(|(a, b)| {
            let date = |t: &str| t.parse::<jiff::civil::Date>().unwrap();
            (date(b) - date(a)).get_days() == 6
        })
        .collect();
    assert_eq!(
        weeks,
        [
            &(day(27), day(21)),
            &(day(20), day(14)),
            &(day(13), day(7)),
            &(day(6), day(0)),
        ]
    );
    // Meta's other code for it, and now not even a day: failed, the costs as they were.
    api.set_max_days(0, 2, 1_504_038);
    let r = fetch_now(&s).await;
    let fetch = &r.json()["fetch"];
    assert_eq!(fetch["result"], "failed", "{}", r.text());
    let why = fetch["error"].as_str().unwrap();
    assert!(
        why.contains("reduce the amount of data") && why.contains("even one day"),
        "{why}"
    );
    assert_eq!(costs(&s).await.len(), 3);
    s.stop().await;
}

/// `meta_graph_version` is the version in the fetch's path; `""` asks this release's again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_version_is_a_setting() {
    let api = Insights::start().await;
    let s = with_meta(&api, TOKEN, "ok").await;
    assert!(api.asked()[0].path.starts_with("/v25.0/"));
    for (version, path) in [("v23.0", "/v23.0/"), ("", "/v25.0/")] {
        let r = patch_space(&s, &json!({"meta_graph_version": version})).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["settings"]["meta_graph_version"], version);
        let r = fetch_now(&s).await;
        assert_eq!(r.json()["fetch"]["result"], "ok", "{}", r.text());
        let last = api.asked().last().unwrap().path.clone();
        assert!(last.starts_with(path), "{version}: {last}");
    }
    s.stop().await;
}

/// A `meta_graph_url` that answers with hostility, through the real binary: three fetches of a
/// 300 MB page at once leave the server's peak memory (`VmHWM` of the child process, read from
/// `/proc`) under 100 MiB, each refused past the bound and one at a time; an error whose words
/// carry an escape sequence and a line of their own reaches the log escaped.
#[test]
fn a_hostile_graph_address_neither_floods_memory_nor_writes_the_log() {
    use crate::support::{TrackerProcess, run_cli, stop_cleanly};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(Insights::start());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let mut process = TrackerProcess::start_with_env(
        dir.path(),
        &[("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")],
    );
    process.created.take().expect("first start");
    let forged = "\u{1b}[31mred\nFORGED tracker: admin password reset";
    // Meta's message as it decodes it: a refused token's words are shown as Meta gave them.
    api.fail_next(400, error(190, "OAuthException", forged));
    let graph = format!("meta_graph_url={}", api.url());
    let account = format!("meta_ads_account={ACCOUNT}");
    let token = format!("meta_ads_token={TOKEN}");
    let out = run_cli(
        dir.path(),
        &data,
        ["space", "set", "default", &account, &token, &graph],
    );
    assert_succeeded(&out);
    let log = process.log_when(|log| log.contains("spend not fetched from Meta"));
    assert!(log.contains("paused until a new meta_ads_token"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "no escape sequence reaches the log: {log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED")),
        "no line of Meta's own: {log}"
    );
    assert!(log.contains(r"\u{1b}[31mred\nFORGED"), "{log}");

    // The loop's fetch, woken by the new token, takes one; the command line's three the others.
    api.send_huge(300 << 20, 4);
    let out = run_cli(dir.path(), &data, ["space", "set", "default", &token]);
    assert_succeeded(&out);
    let fetches: Vec<_> = (0..3)
        .map(|_| {
            let (dir, data) = (dir.path().to_owned(), data.clone());
            std::thread::spawn(move || run_cli(&dir, &data, ["costs", "fetch", "default"]))
        })
        .collect();
    for fetch in fetches {
        let out = fetch.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("failed") && stdout.contains("more than"),
            "{stdout}"
        );
    }
    assert_eq!(api.most_in_flight(), 1, "one fetch of a space at a time");
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.child.id())).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    eprintln!("the server's peak: {peak_kib} kB");
    assert!(peak_kib < 100 * 1024, "peak {peak_kib} kB:\n{status}");
    stop_cleanly(process);
}
