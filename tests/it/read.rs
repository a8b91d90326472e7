//! The read side (`docs/api.md#get-events` and after): the feed with attribution and its cursor, the
//! follower's wait, stats checked against a count of the feed, the rejection log, and export.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::support::{
    DAY_MS, Mix, NOW_MS, Request, Space, TestServer, assert_error, assert_queued, assert_succeeded,
    event_answer,
};

/// Every event of `space`'s feed, page by page from the start, and the number of pages.
async fn whole_feed(s: &TestServer, space: &Space, limit: usize) -> (Vec<Value>, usize) {
    let mut events = Vec::new();
    let mut after = String::from("0");
    let mut pages = 0;
    loop {
        let r = s
            .read_as(space, &format!("/events?after={after}&limit={limit}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let page = r.json();
        pages += 1;
        let got = page["events"].as_array().expect("events").clone();
        assert!(got.len() <= limit);
        events.extend(got);
        match page["next"].as_str() {
            Some(next) => next.clone_into(&mut after),
            None => return (events, pages),
        }
    }
}

fn ids(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["inbox_id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// A follower that pages from `next` to `next` while other clients write sees every event
/// once, in commit order, and only its own space's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_while_others_write_misses_and_repeats_nothing() {
    let s = Arc::new(TestServer::start().await);
    let writing = Arc::new(AtomicBool::new(true));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (s, writing) = (s.clone(), writing.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while writing.load(Ordering::SeqCst) || i < 500 {
                let space = if i % 5 == 0 { &s.b } else { &s.a };
                let body = format!(r#"{{"event":"deposit","eid":"w{w}-{i}","value":"1"}}"#);
                let r = s.post_as(space, "/events", &body).await;
                if space.name == "a" {
                    acked.push(assert_queued(&r));
                }
                i += 1;
            }
            acked
        }));
    }
    // Follow the feed while they write: small pages, resuming from `next`, or from the last
    // event seen when a page reached the end.
    let mut seen: Vec<u64> = Vec::new();
    let mut after = 0u64;
    let mut idle_pages = 0;
    loop {
        let r = s
            .read_as(&s.a, &format!("/events?after={after}&limit=37"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let page = r.json();
        let got = ids(page["events"].as_array().unwrap());
        if let Some(last) = got.last() {
            after = *last;
        }
        if got.is_empty() {
            idle_pages += 1;
        }
        seen.extend(&got);
        if let Some(next) = page["next"].as_str() {
            assert_eq!(
                next.parse::<u64>().unwrap(),
                after,
                "next is the last id shown"
            );
        }
        if seen.len() >= 1600 {
            writing.store(false, Ordering::SeqCst);
        }
        if !writing.load(Ordering::SeqCst) && page["next"].is_null() && idle_pages > 0 {
            break;
        }
        if page["next"].is_null() && got.is_empty() {
            tokio::task::yield_now().await;
        }
    }
    let mut acked: Vec<u64> = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    // The writers stopped before the last empty page: everything acknowledged is committed.
    let (rest, _) = whole_feed(&s, &s.a, 1000).await;
    let all = ids(&rest);
    assert!(seen.len() >= 1600, "followed {} events", seen.len());
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "order preserved, no repeats"
    );
    assert_eq!(
        seen.len(),
        seen.iter().collect::<HashSet<_>>().len(),
        "no event repeated"
    );
    acked.sort_unstable();
    assert_eq!(
        all, acked,
        "the feed holds exactly the acknowledged events of space a"
    );
    assert_eq!(
        seen,
        all[..seen.len()],
        "the follower saw a prefix of the feed, in order"
    );
    // Space b sees only its own.
    let (b_events, _) = whole_feed(&s, &s.b, 1000).await;
    assert!(!b_events.is_empty());
    let b_ids: HashSet<u64> = ids(&b_events).into_iter().collect();
    assert!(
        all.iter().all(|id| !b_ids.contains(id)),
        "spaces are isolated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_of_another_space_or_a_malformed_one_is_a_clear_error() {
    let s = TestServer::start().await;
    let b_id = assert_queued(&s.post_as(&s.b, "/events", r#"{"event":"contact"}"#).await);
    let a_id = assert_queued(&s.post_event(r#"{"event":"contact"}"#).await);
    let r = s.read_as(&s.a, &format!("/events?after={b_id}")).await;
    let body = assert_error(&r, 422, "invalid_field", Some("after"));
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an event of this space"),
        "{body}"
    );
    for bad in ["abc", "-1", "1.5", "99999999999999999999"] {
        let r = s.read_as(&s.a, &format!("/events?after={bad}")).await;
        assert_error(&r, 422, "invalid_field", Some("after"));
    }
    for (limit, ok) in [("0", false), ("1", true), ("1000", true), ("1001", false)] {
        let r = s.read_as(&s.a, &format!("/events?limit={limit}")).await;
        if ok {
            assert_eq!(r.status, 200, "limit={limit}");
        } else {
            assert_error(&r, 422, "invalid_field", Some("limit"));
        }
    }
    // The last event of the space as cursor: an empty page that says it reached the end.
    let r = s
        .read_as(&s.a, &format!("/events?after={a_id}"))
        .await
        .json();
    assert_eq!(r, json!({"ok": true, "events": [], "next": null}));
    // The read side needs the secret: not the ingest token, not nothing.
    let r = s
        .send(&Request::get(&format!(
            "/events?token={}",
            s.a.ingest_token
        )))
        .await;
    assert_error(&r, 401, "unauthorized", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribution_is_joined_for_bound_unbound_unmatched_and_fbclid_less_events() {
    let s = TestServer::start().await;
    let bound = s
        .click(
            &s.a,
            r#"{"fbclid":"IwAR-xyz","campaign_name":"spring","link_slug":"ad-1"}"#,
        )
        .await;
    let unbound = s.click(&s.a, r#"{"fbclid":"IwAR-other"}"#).await;
    let plain = s.click(&s.a, r#"{"campaign_name":"organic"}"#).await;
    let r = s
        .post_as(
            &s.a,
            "/bind",
            &format!(r#"{{"uid":"{bound}","tg_id":777}}"#),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{bound}","value":"12.10"}}"#
        ))
        .await,
    );
    assert_queued(&s.get_e(&format!("event=contact&uid={unbound}")).await);
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"nobody"}"#).await);
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{plain}"}}"#))
            .await,
    );
    let (events, _) = whole_feed(&s, &s.a, 100).await;
    assert_eq!(events.len(), 4);
    let clicked_at = NOW_MS; // the test clock stands still
    let e = &events[0];
    assert_eq!(e["event"], "deposit");
    assert_eq!(e["value"], "12.10", "the exact decimal text");
    assert_eq!(e["source"], "post");
    assert_eq!(e["matched"], true);
    assert_eq!(e["tg_id"], 777);
    assert_eq!(e["campaign_name"], "spring");
    assert_eq!(e["link_slug"], "ad-1");
    assert_eq!(e["fbclid"], "IwAR-xyz");
    assert_eq!(e["clicked_at_ms"], clicked_at);
    assert_eq!(e["fbc"], format!("fb.1.{clicked_at}.IwAR-xyz"));
    let e = &events[1];
    assert_eq!((&e["source"], &e["matched"]), (&json!("get"), &json!(true)));
    assert_eq!(e["tg_id"], Value::Null, "matched but not bound");
    assert_eq!(e["fbc"], format!("fb.1.{clicked_at}.IwAR-other"));
    let e = &events[2];
    assert_eq!(e["matched"], false);
    for field in ["tg_id", "fbc", "fbclid", "campaign_name", "clicked_at_ms"] {
        assert_eq!(e[field], Value::Null, "unmatched: {field}");
    }
    let e = &events[3];
    assert_eq!(e["matched"], true);
    assert_eq!(e["campaign_name"], "organic");
    assert_eq!(e["fbc"], Value::Null, "no fbclid, no fbc");
}

/// A follower waiting on `/events/wait` is answered when an event is committed, not at its
/// timeout; with nothing new it gets an empty page at the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_follower_is_woken_by_the_commit() {
    let s = Arc::new(TestServer::start().await);
    let first = assert_queued(&s.post_event(r#"{"event":"contact"}"#).await);
    let started = std::time::Instant::now();
    let r = s
        .read_as(&s.a, &format!("/events/wait?after={first}&timeout_s=1"))
        .await
        .json();
    assert_eq!(r, json!({"ok": true, "events": [], "next": null}));
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = s
                .read_as(&s.a, &format!("/events/wait?after={first}&timeout_s=60"))
                .await;
            (started.elapsed(), r.json())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Another space's commit does not answer it.
    assert_queued(&s.post_as(&s.b, "/events", r#"{"event":"contact"}"#).await);
    let second = assert_queued(&s.post_event(r#"{"event":"subscribed"}"#).await);
    let (woken_after, page) = waiter.await.unwrap();
    assert!(
        woken_after.as_secs() < 30,
        "answered at the commit, not the timeout: {woken_after:?}"
    );
    assert_eq!(ids(page["events"].as_array().unwrap()), vec![second]);
    let r = s.read_as(&s.a, "/events/wait?timeout_s=61").await;
    assert_error(&r, 422, "invalid_field", Some("timeout_s"));
}

/// What the stats derive from costs and rates, tested with costs in
/// `numbers::stats_with_costs_equal_a_count_made_from_the_feed` and in the reporting currency in
/// `reporting::`.
const DERIVED_FIGURES: [&str; 7] = [
    "cost",
    "roi",
    "cpa",
    "epc",
    "rates",
    "cost_per_subscriber",
    "reported",
];

/// The counts `GET /stats` answers equal a count made independently from the feed and the
/// clicks the test made, over random mixes of clicks, bindings, events and duplicates, for
/// every grouping (a property test: several seeds, each a different mix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_equal_a_count_made_from_the_feed() {
    for seed in [1u64, 7, 42, 1234, 99_991] {
        let s = TestServer::start().await;
        let mut rng = Mix(seed * 2_654_435_761 + 1);
        let campaigns = ["spring", "summer", ""];
        let links = ["ad-1", "ad-2", ""];
        let mut clicks: Vec<(String, &str, &str, bool)> = Vec::new();
        for i in 0..12 {
            let (c, l) = (campaigns[rng.next(3) as usize], links[rng.next(3) as usize]);
            let mut body = serde_json::Map::new();
            if !c.is_empty() {
                body.insert("campaign_name".into(), json!(c));
            }
            if !l.is_empty() {
                body.insert("link_slug".into(), json!(l));
            }
            body.insert("fbclid".into(), json!(format!("f{seed}-{i}")));
            let uid = s.click(&s.a, &Value::Object(body).to_string()).await;
            let bound = rng.next(2) == 0;
            if bound {
                let r = s
                    .post_as(
                        &s.a,
                        "/bind",
                        &format!(r#"{{"uid":"{uid}","tg_id":{}}}"#, i + 1),
                    )
                    .await;
                assert_eq!(r.status, 200);
            }
            clicks.push((uid, c, l, bound));
        }
        // The clock moves across a day boundary so `by=day` has two groups.
        for i in 0..60 {
            if i == 30 {
                s.clock.advance(DAY_MS);
            }
            let kind = ["contact", "subscribed", "registration", "deposit"][rng.next(4) as usize];
            let uid = match rng.next(4) {
                0 => "unknown-click".to_owned(),
                _ => clicks[rng.next(clicks.len() as u64) as usize].0.clone(),
            };
            let value = ["1.10", "2", "-0.5", "3.333"][rng.next(4) as usize];
            let currency = ["USD", "EUR"][rng.next(2) as usize];
            let body = format!(
                r#"{{"event":"{kind}","uid":"{uid}","value":"{value}","currency":"{currency}","eid":"e{}"}}"#,
                rng.next(40)
            );
            // Repeated eids are duplicates: they must not count.
            let r = s.post_event(&body).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let _ = event_answer(&r);
        }
        let (events, _) = whole_feed(&s, &s.a, 1000).await;
        // First deposits, counted from the feed: a deposit is first when no deposit before it
        // had its user (every click here was bound, if at all, before the events) or, without
        // one, its click; one with neither is never first.
        let mut depositors = std::collections::BTreeSet::new();
        for e in &events {
            let first = (e["event"] == "deposit").then(|| {
                let depositor = match (&e["tg_id"], e["matched"].as_bool().unwrap()) {
                    (Value::Number(tg), _) => Some(format!("tg {tg}")),
                    (_, true) => Some(format!("uid {}", e["uid"])),
                    _ => None,
                };
                depositor.is_some_and(|d| depositors.insert(d))
            });
            assert_eq!(e["first_deposit"], json!(first), "seed {seed}: {e}");
        }
        for by in ["campaign_name", "link_slug", "day"] {
            let (expected, mut sums) = count_from_feed(by, &clicks, &events);
            let r = s.read_as(&s.a, &format!("/stats?by={by}")).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let answer = r.json();
            let mut got: BTreeMap<Option<String>, Value> = BTreeMap::new();
            for g in answer["groups"].as_array().unwrap() {
                let key = g["group"].as_str().map(str::to_owned);
                for (currency, sum) in g["deposits"].as_object().unwrap() {
                    let counted = sums.remove(&(key.clone(), currency.clone())).unwrap_or(0.0);
                    let answered: f64 = sum.as_str().unwrap().parse().unwrap();
                    assert!(
                        (counted - answered).abs() < 1e-9,
                        "seed {seed} by {by}: {sum} vs {counted}"
                    );
                }
                let mut g = g.clone();
                without_group_and_views(&mut g);
                for derived in DERIVED_FIGURES {
                    g.as_object_mut().unwrap().remove(derived);
                }
                // No channel here: its joins are tested in `channels::`.
                for channel in ["joins", "leaves", "subscribers_kept"] {
                    assert_eq!(g[channel], 0, "seed {seed} by {by}: {g}");
                    g.as_object_mut().unwrap().remove(channel);
                }
                g["deposits"] = json!({});
                got.insert(key, g);
            }
            assert!(
                sums.is_empty(),
                "seed {seed} by {by}: sums not answered {sums:?}"
            );
            assert_eq!(got, expected, "seed {seed} by {by}");
        }
        // Space b saw none of it.
        let b = s.read_as(&s.b, "/stats?by=day").await.json();
        assert_eq!(b["groups"], json!([]), "seed {seed}");
        s.stop().await;
    }
}

/// The counts `GET /stats?by=<by>` must answer, made from the clicks the test made and the
/// events the feed shows: per group, the answer's shape without deposits, and the deposit sums
/// per group and currency (as floats: the test's values sum exactly enough).
#[allow(clippy::type_complexity)]
fn count_from_feed(
    by: &str,
    clicks: &[(String, &str, &str, bool)],
    events: &[Value],
) -> (
    BTreeMap<Option<String>, Value>,
    BTreeMap<(Option<String>, String), f64>,
) {
    let mut expected: BTreeMap<Option<String>, Value> = BTreeMap::new();
    let group_of = |c: &str| (!c.is_empty()).then(|| c.to_owned());
    let entry = |m: &mut BTreeMap<Option<String>, Value>, g: Option<String>| {
        m.entry(g)
            .or_insert_with(|| {
                json!({"clicks": 0, "bound_clicks": 0, "events": {"contact": 0,
                "subscribed": 0, "registration": 0, "deposit": 0}, "first_deposits": 0,
                "deposits": {}})
            })
            .clone()
    };
    let day = |ms: u64| {
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
        .to_string()[..10]
            .to_owned()
    };
    for (_, c, l, bound) in clicks {
        let g = match by {
            "campaign_name" => group_of(c),
            "link_slug" => group_of(l),
            _ => Some(day(NOW_MS)),
        };
        let mut v = entry(&mut expected, g.clone());
        v["clicks"] = json!(v["clicks"].as_u64().unwrap() + 1);
        if *bound {
            v["bound_clicks"] = json!(v["bound_clicks"].as_u64().unwrap() + 1);
        }
        expected.insert(g, v);
    }
    let mut sums: BTreeMap<(Option<String>, String), f64> = BTreeMap::new();
    for e in events {
        let g = match by {
            "campaign_name" => e["campaign_name"].as_str().map(str::to_owned),
            "link_slug" => e["link_slug"].as_str().map(str::to_owned),
            _ => Some(day(e["occurred_at_ms"].as_u64().unwrap())),
        };
        let mut v = entry(&mut expected, g.clone());
        let kind = e["event"].as_str().unwrap();
        v["events"][kind] = json!(v["events"][kind].as_u64().unwrap() + 1);
        if e["first_deposit"] == json!(true) {
            v["first_deposits"] = json!(v["first_deposits"].as_u64().unwrap() + 1);
        }
        if kind == "deposit" {
            let value: f64 = e["value"].as_str().unwrap().parse().unwrap();
            *sums
                .entry((g.clone(), e["currency"].as_str().unwrap().to_owned()))
                .or_default() += value;
        }
        expected.insert(g, v);
    }
    (expected, sums)
}

/// Stats over a range read whole blocks of 32 UTC days from the block rows, whole days from the
/// day rows and the partial first and last days from the quarter rows: for random ranges (and
/// ones on day and hour boundaries, and over months), every grouping counts exactly the events
/// whose hour lies in the widened range, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_over_any_range_count_each_event_in_it_once() {
    const HOUR: u64 = 3_600_000;
    let s = TestServer::start().await;
    let mut rng = Mix(20_261_122);
    let mut hours = Vec::new();
    for i in 0..120 {
        // Up to four days back, anywhere in the hour; every third up to 85 days back (90 is
        // as far as an event may be).
        let back = if i % 3 == 0 { 85 } else { 4 };
        let at = NOW_MS - rng.next(back * DAY_MS);
        let body = format!(r#"{{"event":"contact","eid":"r{i}","occurred_at_ms":{at}}}"#);
        assert_queued(&s.post_event(&body).await);
        hours.push(at / HOUR);
    }
    let midnight = NOW_MS / DAY_MS * DAY_MS;
    let mut ranges = vec![
        (midnight - 2 * DAY_MS, midnight),
        (midnight - 2 * DAY_MS + HOUR, midnight - HOUR),
        (midnight - 3 * DAY_MS - 1, midnight + 1),
        (midnight - HOUR, midnight + HOUR),
        (0, NOW_MS + HOUR),
    ];
    for i in 0..60 {
        let back = if i % 3 == 0 { 95 } else { 5 };
        let a = NOW_MS - rng.next(back * DAY_MS);
        let b = NOW_MS - rng.next(back * DAY_MS);
        ranges.push((a.min(b), a.max(b)));
    }
    // Whole blocks of 32 UTC days, and one more day on each side.
    let block = 32 * DAY_MS;
    let last_block = NOW_MS / block * block;
    ranges.push((last_block - 2 * block, last_block));
    ranges.push((last_block - 2 * block - DAY_MS, last_block + DAY_MS));
    for (from, to) in ranges {
        let (first, end) = (from / HOUR, to.div_ceil(HOUR));
        let expected = hours.iter().filter(|h| (first..end).contains(h)).count() as u64;
        for by in ["day", "campaign_name"] {
            let target = format!("/stats?by={by}&from_ms={from}&to_ms={to}");
            let r = s.read_as(&s.a, &target).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let answered: u64 = r.json()["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["events"]["contact"].as_u64().unwrap())
                .sum();
            assert_eq!(answered, expected, "{target}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_ranges_are_whole_utc_hours_and_bad_parameters_are_refused() {
    let s = TestServer::start().await;
    assert_queued(&s.post_event(r#"{"event":"contact","uid":"x"}"#).await);
    let hour = NOW_MS / 3_600_000 * 3_600_000;
    let r = s
        .read_as(
            &s.a,
            &format!("/stats?by=day&from_ms={}&to_ms={}", NOW_MS, NOW_MS + 1),
        )
        .await
        .json();
    assert_eq!(r["from_ms"], hour);
    assert_eq!(r["to_ms"], hour + 3_600_000);
    assert_eq!(r["groups"][0]["events"]["contact"], 1);
    // A range before the event counts nothing.
    let r = s
        .read_as(&s.a, &format!("/stats?to_ms={}", hour - 1))
        .await
        .json();
    assert_eq!(r["groups"], json!([]));
    let r = s.read_as(&s.a, "/stats?by=week").await;
    assert_error(&r, 422, "invalid_field", Some("by"));
    let r = s.read_as(&s.a, "/stats?from_ms=yesterday").await;
    assert_error(&r, 422, "invalid_field", Some("from_ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rejection_log_keeps_the_last_thousand_redacted_and_names_expired_credentials() {
    let s = TestServer::start().await;
    let r = s.get_e("event=deposit&value=12,5&uid=u1").await;
    assert_error(&r, 422, "invalid_value", Some("value"));
    // Unauthenticated requests belong to no space.
    let r = s.send(&Request::get("/e?event=deposit&token=nope")).await;
    assert_eq!(r.status, 401);
    let got = rejection_log(&s).await;
    let rejections = got["rejections"].as_array().unwrap();
    assert_eq!(rejections.len(), 1, "{got}");
    let r = &rejections[0];
    assert_eq!(r["endpoint"], "/e");
    assert_eq!(r["method"], "GET");
    assert_eq!(r["http_status"], 422);
    assert_eq!(r["status"], "invalid_value");
    assert_eq!(r["field"], "value");
    let query = r["query"].as_str().unwrap();
    assert!(query.contains("value=12,5"), "{query}");
    assert!(
        !query.contains(&s.a.ingest_token[12..]),
        "the token is redacted: {query}"
    );
    assert!(r["error"].as_str().unwrap().contains("12,5"));
    // Space b's log is its own.
    assert_eq!(
        s.read_as(&s.b, "/rejections").await.json()["rejections"],
        json!([])
    );

    // A revoked ingest token's postbacks are logged under its space.
    let (store, now) = (s.store.clone(), s.clock.clone());
    crate::support::app_on(&store, {
        use tracker::clock::Clock as _;
        now.now_ms()
    })
    .revoke("a", tracker::domain::credential::Kind::Ingest)
    .await
    .unwrap();
    assert_eq!(s.get_e("event=contact&uid=after-revoke").await.status, 401);
    let got = rejection_log(&s).await;
    let newest = &got["rejections"][0];
    assert_eq!(
        (&newest["status"], &newest["http_status"]),
        (&json!("unauthorized"), &json!(401))
    );
    assert!(newest["query"].as_str().unwrap().contains("after-revoke"));

    // The log never grows past its bound, and keeps the newest.
    for i in 0..1005 {
        let r = s.read_as(&s.a, &format!("/events?limit=0&n={i}")).await;
        assert_eq!(r.status, 422);
    }
    let got = rejection_log(&s).await;
    let rejections = got["rejections"].as_array().unwrap();
    assert_eq!(rejections.len(), 1000);
    assert!(rejections[0]["query"].as_str().unwrap().ends_with("n=1004"));
    assert!(rejections[999]["query"].as_str().unwrap().ends_with("n=5"));
    let r = s.read_as(&s.a, "/rejections?limit=1001").await;
    assert_error(&r, 422, "invalid_field", Some("limit"));
    // What the file holds, not only what is shown: space b has none, so every row is a's.
    let (_, usage) = s.store.usage().await.unwrap();
    let stored = usage
        .iter()
        .find(|u| u.table == "rejections")
        .unwrap()
        .entries;
    assert_eq!(stored, 1000, "the log's rows in the data file");
    s.stop().await;
}

fn export(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let config = dir.join("empty.toml");
    std::process::Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(dir.join("t.redb"))
        .arg("export")
        .args(args)
        .output()
        .unwrap()
}

/// `tracker export` writes the same records as the feed, in NDJSON and in CSV (parsed back
/// here), through a running server and on the file directly, across several pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_equals_the_feed_in_both_formats_with_and_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let (process, created) = crate::support::first_start(dir.path());
    let space = created.clone();
    let addr = process.addr;
    let post = |body: String| {
        let secret = space.secret.clone();
        async move { crate::support::send(addr, &Request::post("/events", Some(&secret), &body)).await }
    };
    let click = crate::support::send(
        addr,
        &Request::post(
            "/clicks",
            Some(&space.secret),
            r#"{"fbclid":"IwAR,with \"quotes\"","campaign_name":"a,b"}"#,
        ),
    )
    .await
    .json()["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..2100 {
        let body = if i % 3 == 0 {
            format!(r#"{{"event":"deposit","uid":"{click}","value":"{i}.5","eid":"x{i}"}}"#)
        } else {
            format!(r#"{{"event":"contact","uid":"u{i}"}}"#)
        };
        assert_queued(&post(body).await);
    }
    let feed = {
        let mut events = Vec::new();
        let mut after = "0".to_owned();
        loop {
            let target = format!("/events?after={after}&limit=1000");
            let r = crate::support::send(
                addr,
                &Request::get(&target).header("Authorization", format!("Bearer {}", space.secret)),
            )
            .await
            .json();
            events.extend(r["events"].as_array().unwrap().clone());
            match r["next"].as_str() {
                Some(n) => after = n.to_owned(),
                None => break,
            }
        }
        events
    };
    assert_eq!(feed.len(), 2100);
    let check = |out: std::process::Output, format: &str| {
        let exported = exported_records(out, format);
        assert_eq!(exported.len(), feed.len(), "{format}");
        for (e, f) in exported.iter().zip(&feed) {
            if format == "ndjson" {
                // The feed's fields, then its times in the space's zone (tested below).
                let mut e = e.clone();
                for time in ["occurred_at", "received_at", "clicked_at"] {
                    assert!(e.as_object_mut().unwrap().remove(time).is_some(), "{time}");
                }
                assert_eq!(&e, f);
            } else {
                // CSV is text: compare each field's text, an absent one as empty.
                for (k, v) in f.as_object().unwrap() {
                    let text = match v {
                        Value::Null => String::new(),
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    assert_eq!(e[k], json!(text), "{format} field {k}");
                }
            }
        }
    };
    // While the server runs: through its control socket.
    check(export(dir.path(), &["default"]), "ndjson");
    check(export(dir.path(), &["default", "--format", "csv"]), "csv");
    // From a cursor.
    let out = export(dir.path(), &["default", "--after", "2000"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), feed.len() - 2000 + 1 - 1);
    crate::support::stop_cleanly(process);
    // On the file, no server.
    check(export(dir.path(), &["default", "--format", "csv"]), "csv");
    export_to_a_file(dir.path(), 2100);
    let out = export(dir.path(), &["nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no space named"));
}

/// `tracker export --out FILE` of a space of `events` events: the file holds them, and standard
/// output says how many, and the cursor to go on from; from that cursor, none.
fn export_to_a_file(dir: &std::path::Path, events: usize) {
    let out_file = dir.join("out.ndjson");
    let out = export(dir, &["default", "--out", out_file.to_str().unwrap()]);
    assert!(out.status.success());
    let written = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(written.lines().count(), events);
    // Standard output says what was written and the cursor to go on from.
    let last: Value = serde_json::from_str(written.lines().last().unwrap()).unwrap();
    let id = last["inbox_id"].as_str().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!(
            "wrote {events} events of space default to {}; the last is inbox_id {id}, and \
             --after {id} exports what comes after it",
            out_file.display()
        )
    );
    // A new file: `--out` never writes over one that is there.
    let next_file = dir.join("next.ndjson");
    let out = export(
        dir,
        &[
            "default",
            "--after",
            id,
            "--out",
            next_file.to_str().unwrap(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!(
            "wrote 0 events of space default to {}: none after inbox_id {id}",
            next_file.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&next_file).unwrap(), "");
}

/// Space a's rejection log. Rejections are written with the writer's next commit; a write
/// before the read makes sure that has happened.
async fn rejection_log(s: &TestServer) -> Value {
    assert_queued(&s.post_as(&s.b, "/events", r#"{"event":"contact"}"#).await);
    s.read_as(&s.a, "/rejections?limit=1000").await.json()
}

/// The records an export printed: NDJSON lines, or CSV rows read back with their header.
fn exported_records(out: std::process::Output, format: &str) -> Vec<Value> {
    assert_succeeded(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    if format == "ndjson" {
        return text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    }
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            Value::Object(
                headers
                    .iter()
                    .zip(r.iter())
                    .map(|(h, v)| (h.to_owned(), json!(v)))
                    .collect(),
            )
        })
        .collect()
}

/// `tracker export` adds, after the feed's columns, each time in the space's zone as ISO 8601
/// with its offset (`occurred_at`, `received_at`, `clicked_at`), the epoch milliseconds kept;
/// and `tracker import` takes the export back, those columns included.
#[test]
fn an_export_has_its_times_in_the_spaces_zone_beside_the_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let process = crate::support::TrackerProcess::start(dir.path());
    crate::support::stop_cleanly(process);
    let set = ["space", "set", "default", "time_zone=Asia/Kathmandu"];
    assert_succeeded(&crate::support::run_cli(dir.path(), &data, set));
    // 2026-11-24T23:30:07.042Z, 05:15:07.042 the next day in Kathmandu (+05:45).
    let line = r#"{"event":"deposit","value":"5","eid":"at-1","occurred_at_ms":1795563007042}"#;
    let file = dir.path().join("one.ndjson");
    std::fs::write(&file, line).unwrap();
    let import = ["import", "default", file.to_str().unwrap()];
    assert_succeeded(&crate::support::run_cli(dir.path(), &data, import));
    let ndjson = exported_records(export(dir.path(), &["default"]), "ndjson");
    let e = &ndjson[0];
    assert_eq!(e["occurred_at_ms"], 1_795_563_007_042_u64);
    assert_eq!(e["occurred_at"], "2026-11-25T05:15:07.042+05:45", "{e}");
    assert!(
        e["received_at"].as_str().unwrap().ends_with("+05:45"),
        "{e}"
    );
    assert_eq!(e["clicked_at"], Value::Null, "no click");
    let csv = export(dir.path(), &["default", "--format", "csv"]);
    let text = String::from_utf8(csv.stdout.clone()).unwrap();
    let header = text.lines().next().unwrap();
    assert!(
        header.ends_with(",occurred_at,received_at,clicked_at")
            && header.contains("occurred_at_ms,received_at_ms"),
        "{header}"
    );
    // The export goes back in: the event is there already, and no column is refused.
    let back = dir.path().join("back.csv");
    std::fs::write(&back, &text).unwrap();
    let out = crate::support::run_cli(
        dir.path(),
        &data,
        ["--json", "import", "default", back.to_str().unwrap()],
    );
    assert_succeeded(&out);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&summary["duplicates"], &summary["refused"]),
        (&json!(1), &json!(0)),
        "{summary}"
    );
}

/// `g` without its name and its `views`, which are none: no landing page here (views are
/// tested in `landing::`).
fn without_group_and_views(g: &mut Value) {
    g.as_object_mut().unwrap().remove("group");
    let views = g.as_object_mut().unwrap().remove("views");
    assert!(views.is_some_and(|v| v == 0 || v.is_null()), "{g}");
}
