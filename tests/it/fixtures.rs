//! Data files written by earlier releases (`tests/fixtures/v<N>.redb`, one per schema version,
//! made by `tests/fixtures/make-fixture.sh`) open with this build, migrate to its schema version,
//! still deduplicate against what they hold, and attribute an event by Telegram id to the click
//! the fixture bound.

use std::path::PathBuf;

use tracker::domain::dedup::dedup_key;
use tracker::domain::event::{AttributedBy, EventKind, ValidEvent};
use tracker::storage::schema::SCHEMA_VERSION;
use tracker::storage::{Store, StoreOptions};

use crate::support::DAY_MS;

pub fn fixtures() -> Vec<(u64, PathBuf)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let version = name
                .strip_prefix('v')?
                .strip_suffix(".redb")?
                .parse()
                .ok()?;
            Some((version, path))
        })
        .collect();
    found.sort();
    found
}

/// Every schema version up to this build's has its fixture: a build that writes a new version
/// commits that version's file (`make-fixture.sh`), so the builds after it are tested on it.
#[test]
fn every_schema_version_has_a_fixture() {
    let versions: Vec<u64> = fixtures().into_iter().map(|(v, _)| v).collect();
    // Versions 0 (no file) and 1 (never released with data) have none; 2 is the first.
    let expected: Vec<u64> = (2..=SCHEMA_VERSION).collect();
    assert_eq!(versions, expected, "fixtures found in tests/fixtures");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_opens_migrates_and_still_deduplicates() {
    for (version, fixture) in fixtures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(&fixture, &path).unwrap();
        let (store, created) = Store::open(&path, &StoreOptions::default())
            .unwrap_or_else(|e| panic!("v{version} fixture does not open: {e}"));
        assert!(!created);
        let (events, _) = store.usage().await.unwrap();
        assert_eq!(
            events,
            events_in(version),
            "v{version}: events in the fixture"
        );
        stats_count_what_the_file_holds(&store, version).await;
        drill_downs_add_up_to_their_campaigns(&store, version).await;
        costs_are_what_the_file_holds(&store, version).await;
        let store = std::sync::Arc::new(store);
        let spaces = crate::support::app_on(&store, 0).spaces().await.unwrap();
        let names: Vec<_> = spaces.iter().map(|s| s.space.as_str()).collect();
        assert!(
            names.contains(&"default") && names.contains(&"second"),
            "{names:?}"
        );
        // The fixture's third event: a deposit with eid `order-1` in space 1 (`default`).
        let now = tracker::clock::Clock::now_ms(&tracker::clock::SystemClock);
        let again = ValidEvent {
            kind: EventKind::Deposit,
            uid: None,
            tg_id: None,
            value: None,
            currency: "USD".into(),
            eid: Some("order-1".into()),
            occurred_at_ms: now,
            time_supplied: false,
            received_at_ms: now,
            source: tracker::domain::event::Source::Post,
        };
        let key = dedup_key(&again, DAY_MS);
        let outcome = store.record_event(1, again.clone(), key).await.unwrap();
        assert!(outcome.duplicate, "v{version}: {outcome:?}");
        assert_eq!(outcome.inbox_id, 3, "v{version}");
        // The Telegram user the fixture bound: an event naming only the user is attributed to
        // the bound click, whose first and last touch the migration derived from the bindings.
        let by_tg = ValidEvent {
            eid: Some(format!("by-tg-{version}")),
            tg_id: Some(123_456_789),
            ..again
        };
        let key = dedup_key(&by_tg, DAY_MS);
        let outcome = store.record_event(1, by_tg, key).await.unwrap();
        assert_eq!(
            (outcome.duplicate, outcome.attributed_by),
            (false, Some(AttributedBy::TgId)),
            "v{version}"
        );
        drop(store);
        let db = tracker::storage::open_database(&path, None, tracker::storage::SERVER_CACHE_BYTES)
            .unwrap()
            .db;
        let stored = redb::ReadableDatabase::begin_read(&db)
            .unwrap()
            .open_table(tracker::storage::schema::META)
            .unwrap()
            .get(tracker::storage::schema::META_SCHEMA_VERSION)
            .unwrap()
            .map(|v| v.value());
        assert_eq!(stored, Some(SCHEMA_VERSION), "v{version} migrated");
        drop(db);
        // Migrated, it keeps every rule `tracker check` knows (indexes, counters, the stats
        // built by the migrations).
        let expiry = tracker::config::Settings::with_data(path.clone()).dedup_expiry(now);
        let report = tracker::storage::check::check_file(&path, false, expiry).unwrap();
        assert!(report.clean(), "v{version} after migration: {report:#?}");
        assert_eq!(report.redb_integrity, Some(true), "v{version}");
    }
}

/// The events each fixture holds: two more from version 8, which names Telegram users.
fn events_in(version: u64) -> u64 {
    match version {
        13.. => 11,
        8.. => 10,
        _ => 8,
    }
}

/// First deposits, decided by the schema 10 migration for the older files: the bound user's
/// first (12.50), the unbound click's (7); not the user's second, nor its deposit by Telegram
/// id, nor one through no click.
fn first_deposits_are_decided(events: &[tracker::domain::feed::FeedEvent], version: u64) {
    let firsts: Vec<_> = events.iter().map(|e| e.first_deposit).collect();
    let mut want = vec![
        None,
        None,
        Some(true),
        Some(false),
        None,
        Some(false),
        None,
        Some(true),
    ];
    if version >= 8 {
        want.extend([Some(false), None]);
    }
    // From version 13 a registration, not a deposit.
    if version >= 13 {
        want.push(None);
    }
    assert_eq!(firsts, want, "v{version}");
}

/// Clicks, bound clicks, events by kind, first deposits and deposit sums.
type Counted = (
    u64,
    u64,
    std::collections::BTreeMap<std::borrow::Cow<'static, str>, u64>,
    u64,
    std::collections::BTreeMap<String, String>,
);

/// The counts of `groups` added up.
fn added_up(groups: &[tracker::domain::stats::GroupStats]) -> Counted {
    use tracker::domain::decimal::Decimal;
    let (mut clicks, mut bound, mut events, mut firsts) =
        (0, 0, std::collections::BTreeMap::new(), 0);
    let mut deposits = std::collections::BTreeMap::new();
    for g in groups {
        clicks += g.clicks;
        bound += g.bound_clicks;
        for (kind, n) in &g.events {
            *events.entry(kind.clone()).or_insert(0) += n;
        }
        firsts += g.first_deposits;
        for (currency, value) in &g.deposits {
            let total = deposits
                .entry(currency.clone())
                .or_insert_with(Decimal::zero);
            *total = total.checked_add(Decimal::parse(value).unwrap()).unwrap();
        }
    }
    let deposits = deposits
        .iter()
        .map(|(c, d)| (c.clone(), d.to_string()))
        .collect();
    (clicks, bound, events, firsts, deposits)
}

/// Each campaign's drill-down (by link, ad, ad set and day; built by the schema 11 migration
/// for the older files) adds up to the campaign's own row, and one campaign alone is its row.
async fn drill_downs_add_up_to_their_campaigns(store: &Store, version: u64) {
    use tracker::domain::stats::{Dimension, GroupStats, Grouping};
    let read = |grouping: Grouping| {
        store.read(move |s| s.stats(1, &grouping, (0, u32::MAX), &jiff::tz::TimeZone::UTC))
    };
    let campaigns = read(Grouping::all(Dimension::Campaign)).await.unwrap();
    // The counts of a group, without what follows from them.
    let counts = |g: &GroupStats| {
        (
            g.clicks,
            g.bound_clicks,
            g.events.clone(),
            g.first_deposits,
            g.deposits.clone(),
        )
    };
    let mut named = 0;
    for campaign in campaigns.iter().filter(|g| g.group.is_some()) {
        named += 1;
        let name = campaign.group.clone();
        let alone = read(Grouping {
            by: Dimension::Campaign,
            campaign: name.clone(),
        })
        .await
        .unwrap();
        assert_eq!(alone, vec![campaign.clone()], "v{version}");
        for by in [
            Dimension::Link,
            Dimension::Ad,
            Dimension::AdSet,
            Dimension::Day,
        ] {
            let groups = read(Grouping {
                by,
                campaign: name.clone(),
            })
            .await
            .unwrap();
            assert_eq!(
                added_up(&groups),
                counts(campaign),
                "v{version}: {name:?} by {by:?}: {groups:#?}"
            );
        }
    }
    let campaigns = match version {
        20.. => 5,
        13.. => 4,
        4.. => 3,
        _ => 2,
    };
    assert_eq!(named, campaigns, "v{version}");
    // The fixture's campaign with a link: every click through it; from version 11 one from an
    // ad too.
    let of_spring = |by| {
        read(Grouping {
            by,
            campaign: Some("spring-sale".to_owned()),
        })
    };
    let groups = |g: Vec<GroupStats>| {
        g.into_iter()
            .map(|g| (g.group, g.clicks))
            .collect::<Vec<_>>()
    };
    let spring = Some("spring".to_owned());
    let clicks = if version >= 11 { 2 } else { 1 };
    assert_eq!(
        groups(of_spring(Dimension::Link).await.unwrap()),
        [(spring, clicks)]
    );
    let ads = groups(of_spring(Dimension::Ad).await.unwrap());
    if version >= 11 {
        assert_eq!(ads, [(None, 1), (Some("ad-1".to_owned()), 1)], "v{version}");
    } else {
        assert_eq!(ads, [(None, 1)], "v{version}");
    }
    assert!(
        read(Grouping {
            by: Dimension::Link,
            campaign: Some("nobody".into())
        })
        .await
        .unwrap()
        .is_empty()
    );
}

/// From version 10 the fixture also holds costs, one set by the API and two imported: from
/// version 14 on, each the campaign's as a whole (no ad set or ad), set by hand.
async fn costs_are_what_the_file_holds(store: &Store, version: u64) {
    use tracker::domain::stats::Dimension;
    let costs: Vec<String> = store
        .read(|s| s.costs(1, (0, u32::MAX)))
        .await
        .unwrap()
        .iter()
        .map(|c| {
            let c = tracker::domain::cost::CostView::from(c);
            format!(
                "{} {} [{}] [{}] {} {} {}",
                c.day, c.campaign_name, c.adset_name, c.ad_name, c.amount, c.currency, c.source
            )
        })
        .collect();
    let mut want: Vec<&str> = if version >= 10 {
        vec![
            "2026-11-24 organic [] [] 0.99 EUR hand",
            "2026-11-24 spring-sale [] [] 120.50 USD hand",
            "2026-11-25 spring-sale [] [] 3 USD hand",
        ]
    } else {
        Vec::new()
    };
    // From version 14 also a cost of one ad set's ad.
    if version >= 14 {
        want.push("2026-11-25 spring-sale [set-1] [ad-1] 4.25 USD hand");
    }
    assert_eq!(costs, want, "v{version}");
    // Stats read a campaign's and a day's cost from the sums the migration to version 15
    // made: each the sum of its rows.
    // The fixtures' costs are on 2026-11-24 and 25 (days 20781 and 20782), read in a range
    // of a week around them (by day, every day of the range is read).
    let quarters = (20_778 * 96, 20_785 * 96);
    let cost_by = |by| async move {
        let grouping = tracker::domain::stats::Grouping::all(by);
        let groups = store
            .read(move |s| s.stats(1, &grouping, quarters, &jiff::tz::TimeZone::UTC))
            .await
            .unwrap();
        let costs: Vec<String> = groups
            .iter()
            .filter(|g| !g.cost.is_empty())
            .map(|g| format!("{} {:?}", g.group.as_deref().unwrap_or("-"), g.cost))
            .collect();
        costs
    };
    let (campaigns, days) = match version {
        ..10 => (vec![], vec![]),
        10..14 => (
            vec![
                r#"organic {"EUR": "0.99"}"#,
                r#"spring-sale {"USD": "123.50"}"#,
            ],
            vec![
                r#"2026-11-24 {"EUR": "0.99", "USD": "120.50"}"#,
                r#"2026-11-25 {"USD": "3"}"#,
            ],
        ),
        _ => (
            vec![
                r#"organic {"EUR": "0.99"}"#,
                r#"spring-sale {"USD": "127.75"}"#,
            ],
            vec![
                r#"2026-11-24 {"EUR": "0.99", "USD": "120.50"}"#,
                r#"2026-11-25 {"USD": "7.25"}"#,
            ],
        ),
    };
    assert_eq!(cost_by(Dimension::Campaign).await, campaigns, "v{version}");
    assert_eq!(cost_by(Dimension::Day).await, days, "v{version}");
}

/// The campaign groups of space 1 the fixture of `version` holds, as `GET /stats` shows them
/// without what follows from them.
fn campaigns_in(version: u64) -> Vec<serde_json::Value> {
    use serde_json::json;
    let zero = |kinds: &[(&str, u64)]| {
        let mut events = json!({"contact": 0, "subscribed": 0, "registration": 0, "deposit": 0});
        for (k, n) in kinds {
            events[*k] = json!(n);
        }
        events
    };
    // From version 4 the fixture also holds a tracking link and one click made through it.
    let link_click = (version >= 4).then(|| {
        json!({"group": "links", "clicks": 1, "bound_clicks": 0, "events": zero(&[]),
               "first_deposits": 0, "deposits": {}})
    });
    // From version 8 a deposit by the bound user's Telegram id counts under its click's
    // campaign, and a contact by an unknown user under none.
    let v8 = version >= 8;
    let mut expected = vec![json!({"group": null, "clicks": 0, "bound_clicks": 0,
        "events": zero(&[("contact", if v8 { 2 } else { 1 }), ("deposit", 1)]),
        "first_deposits": 0, "deposits": {"USDT": "0.000000001"}})];
    expected.extend(link_click);
    expected.push(json!({"group": "organic", "clicks": 1, "bound_clicks": 0,
        "events": zero(&[("subscribed", 1), ("deposit", 1)]), "first_deposits": 1,
        "deposits": {"USD": "7"}}));
    // From version 20 two clicks of a split link.
    if version >= 20 {
        expected.push(
            json!({"group": "split-test", "clicks": 2, "bound_clicks": 0,
            "events": zero(&[]), "first_deposits": 0, "deposits": {}}),
        );
    }
    // From version 11 a second click of the campaign, from an ad and an ad set.
    let spring_clicks = if version >= 11 { 2 } else { 1 };
    expected.push(
        json!({"group": "spring-sale", "clicks": spring_clicks, "bound_clicks": 1,
        "events": zero(&[("contact", 1), ("registration", 1), ("deposit", if v8 { 3 } else { 2 })]),
        "first_deposits": 1, "deposits": {"USD": if v8 { "10.00" } else { "9.00" }}}),
    );
    // From version 13 a click with TikTok's and Google's click ids, and its registration.
    if version >= 13 {
        expected.push(json!({"group": "tiktok", "clicks": 1, "bound_clicks": 0,
            "events": zero(&[("registration", 1)]), "first_deposits": 0, "deposits": {}}));
    }
    expected
}

/// The stats count what each fixture holds (tests/fixtures/make-fixture.sh says what that is):
/// counted by the schema 3 migration for a v2 file, by the writer as it stored them for a v3
/// file; both must agree. Events read back through the feed, without a source before v3.
async fn stats_count_what_the_file_holds(store: &Store, version: u64) {
    use tracker::domain::feed::PageRequest;
    use tracker::domain::stats::Dimension;
    let grouping = tracker::domain::stats::Grouping::all(Dimension::Campaign);
    let groups = store
        .read(move |s| s.stats(1, &grouping, (0, u32::MAX), &jiff::tz::TimeZone::UTC))
        .await
        .unwrap();
    let mut got = serde_json::to_value(&groups).unwrap();
    // What follows from the counts and the costs is tested with the costs
    // (`numbers::stats_with_costs_equal_a_count_made_from_the_feed`); the reporting currency's
    // figures are the application's, not the store's (`reporting::`).
    for g in got.as_array_mut().unwrap() {
        for derived in [
            "cost",
            "roi",
            "cpa",
            "epc",
            "rates",
            "cost_per_subscriber",
            "reported",
        ] {
            g.as_object_mut().unwrap().remove(derived);
        }
        // No fixture has a channel join or leave (channels came with version 13).
        for channel in ["joins", "leaves", "subscribers_kept"] {
            assert_eq!(g[channel], 0, "v{version}: {g}");
            g.as_object_mut().unwrap().remove(channel);
        }
        // From version 18 the file holds one view of a link made without a campaign.
        let views = u64::from(version >= 18 && g["group"].is_null());
        assert_eq!(g["views"], views, "v{version}: {g}");
        g.as_object_mut().unwrap().remove("views");
    }
    let expected = campaigns_in(version);
    let v8 = version >= 8;
    assert_eq!(got, serde_json::Value::Array(expected), "v{version}");
    let page = store
        .read(|s| {
            s.feed(
                1,
                PageRequest {
                    after: 0,
                    limit: 100,
                },
            )
        })
        .await
        .unwrap();
    assert_eq!(page.events.len() as u64, events_in(version));
    if version < 3 {
        assert!(page.events.iter().all(|e| e.source.is_none()));
    } else {
        let sources: Vec<_> = page.events.iter().map(|e| e.source.as_deref()).collect();
        assert_eq!(sources[7], Some("get"), "{sources:?}");
        assert!(
            sources[..7]
                .iter()
                .chain(&sources[8..])
                .all(|s| *s == Some("post")),
            "{sources:?}"
        );
    }
    // Events stored before version 8 were attributed by their uid exactly when matched.
    for e in &page.events[..8] {
        let by = e.matched.then_some("uid");
        assert_eq!(e.attributed_by.as_deref(), by, "v{version}: {e:?}");
    }
    if v8 {
        let (bound, unknown) = (&page.events[8], &page.events[9]);
        assert_eq!(bound.attributed_by.as_deref(), Some("tg_id"), "{bound:?}");
        assert_eq!(bound.uid, page.events[2].uid, "the bound click: {bound:?}");
        assert_eq!(bound.tg_id, Some(123_456_789));
        assert_eq!(
            (unknown.uid.as_deref(), unknown.tg_id, unknown.matched),
            (None, Some(5), false)
        );
    }
    first_deposits_are_decided(&page.events, version);
    let settings = store.read(|s| s.space_settings(1)).await.unwrap();
    let zone = if version >= 10 { "Asia/Kolkata" } else { "UTC" };
    assert_eq!(settings.time_zone.as_str(), zone, "v{version}");
    let attribution = settings.attribution;
    let want = if v8 { "last_touch" } else { "first_touch" };
    assert_eq!(attribution.as_str(), want, "v{version}");
    deliveries_are_what_the_file_holds(store, version, page.events.len() as u64).await;
    let deposit = &page.events[2];
    assert_eq!(deposit.value.as_deref(), Some("12.50"));
    assert_eq!(deposit.tg_id, Some(123_456_789));
    assert_eq!(
        deposit.fbc.as_deref(),
        Some(format!("fb.1.{}.IwAR-fixture-1", deposit.clicked_at_ms.unwrap()).as_str())
    );
}

/// Schema 9: the fixture's webhook took every event of its space, each a delivery still open or
/// tried (nothing listens where it points), and the space keeps visitors' hints.
async fn deliveries_are_what_the_file_holds(store: &Store, version: u64, events: u64) {
    let destinations = store.read(|s| s.destinations(1)).await.unwrap();
    if version >= 9 {
        // From version 13 also a postback with its own statuses, made after the events.
        let statuses = destinations.iter().find(|d| d.name == "network");
        assert_eq!(
            statuses.and_then(|d| d.pairs("statuses")),
            (version >= 13).then(|| [("registration".to_owned(), "lead".to_owned())].into()),
            "{destinations:?}"
        );
        // From version 14 also a TikTok destination and a Google Ads one fetched once; from
        // 19 a Meta one and a Google Ads one of Data Manager's template.
        assert_eq!(
            destinations.len(),
            1 + usize::from(version >= 13)
                + 2 * usize::from(version >= 14)
                + 2 * usize::from(version >= 19),
            "{destinations:?}"
        );
        if version >= 14 {
            let named = |name: &str| destinations.iter().find(|d| d.name == name).unwrap();
            assert_eq!(named("tt").text("pixel_code"), Some("C4FIXTURE"));
            assert_eq!(named("gads").number("fetches"), Some(1), "{destinations:?}");
            assert_eq!(
                named("gads").pairs("conversion_names"),
                Some([("deposit".to_owned(), "Telegram deposit".to_owned())].into())
            );
        }
        let counts = destinations[0].deliveries;
        assert_eq!(counts.0.iter().sum::<u64>(), events, "{destinations:?}");
        assert_eq!(counts.get(tracker::platform::State::Delivered), 0);
        let settings = store.read(|s| s.space_settings(1)).await.unwrap();
        assert!(settings.meta_client_hints);
        if version >= 14 {
            assert_eq!(
                settings.meta_ads_account.as_deref(),
                Some("act_1234567"),
                "{settings:?}"
            );
        }
    } else {
        assert!(destinations.is_empty(), "v{version}: {destinations:?}");
    }
}

/// The `event_id`s of every event of space 1 of the data file at `path`, as the feed shows them,
/// with the click ids the feed shows beside them.
async fn event_ids_in(path: &std::path::Path) -> Vec<(String, Option<String>, Option<String>)> {
    let (store, _) = Store::open(path, &StoreOptions::default()).unwrap();
    let page = tracker::domain::feed::PageRequest {
        after: 0,
        limit: 1000,
    };
    let events = store.read(move |s| s.feed(1, page)).await.unwrap().events;
    store.close();
    events
        .into_iter()
        .map(|e| (e.event_id, e.gclid, e.fbp))
        .collect()
}

/// The events a file held before events had ids get distinct ones as it is migrated: UUIDs,
/// the same at every later open (a backup carries them), and others in another copy migrated
/// on its own (each migration draws its own salt), so an old file restored twice never gives
/// two events one id. Their clicks have no other ad ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migrated_files_old_events_have_distinct_event_ids() {
    let (_, fixture) = fixtures()
        .into_iter()
        .find(|(v, _)| *v == 12)
        .expect("the v12 fixture");
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.redb"), dir.path().join("two.redb"));
    std::fs::copy(&fixture, &one).unwrap();
    std::fs::copy(&fixture, &two).unwrap();
    let first = event_ids_in(&one).await;
    assert!(first.len() >= 8, "{first:?}");
    let ids: std::collections::HashSet<&str> = first.iter().map(|(id, ..)| id.as_str()).collect();
    assert_eq!(ids.len(), first.len(), "distinct: {first:?}");
    for (id, gclid, fbp) in &first {
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(&id[14..15], "4", "a UUID of version 4: {id}");
        assert_eq!((gclid, fbp), (&None, &None));
    }
    assert_eq!(event_ids_in(&one).await, first, "the same at the next open");
    let other = event_ids_in(&two).await;
    assert!(
        other.iter().all(|(id, ..)| !ids.contains(id.as_str())),
        "another copy, migrated on its own: {other:?}"
    );
}

/// The destinations of the file at `path` as its rows hold them: each row's version and the
/// record it reads as.
fn destination_rows(
    path: &std::path::Path,
) -> Vec<(u8, tracker::storage::records::DestinationRecord)> {
    let db = redb::Database::open(path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let table = txn
        .open_table(tracker::storage::schema::DESTINATIONS)
        .unwrap();
    redb::ReadableTable::iter(&table)
        .unwrap()
        .map(|entry| {
            let bytes = entry.unwrap().1.value().to_vec();
            let record = tracker::storage::records::decode(&bytes).unwrap();
            (bytes[0], record)
        })
        .collect()
}

/// The migration to version 17 rewrites each destination of the version 16 fixture (a
/// webhook, a postback, a `TikTok` destination and a Google Ads one; none of Meta) as one
/// tagged value of settings, and each keeps every setting and secret its columns held.
#[tokio::test]
async fn destinations_keep_their_settings_through_the_migration_to_one_tagged_value() {
    use tracker::platform::Target;
    use tracker::storage::records::{DestinationRecordV3, decode};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v16.redb"),
        &path,
    )
    .unwrap();
    let before: Vec<DestinationRecordV3> = {
        let db = redb::Database::open(&path).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let table = txn
            .open_table(tracker::storage::schema::DESTINATIONS)
            .unwrap();
        redb::ReadableTable::iter(&table)
            .unwrap()
            .map(|entry| decode(entry.unwrap().1.value()).unwrap())
            .collect()
    };
    let kinds: Vec<u8> = before.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [3, 2, 4, 5], "{before:?}");
    let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
    drop(store);
    let after = destination_rows(&path);
    assert_eq!(after.len(), before.len());
    for (old, (version, new)) in before.iter().zip(&after) {
        // Rewritten in the version this build writes: 4 then, 5 since schema 19.
        assert_eq!(*version, 5, "{new:?}");
        assert_eq!(
            (&new.name, new.kind, new.events, new.created_at_ms),
            (&old.name, old.kind, old.events, old.created_at_ms)
        );
        let settings = new.settings.as_ref().unwrap();
        assert_eq!(settings.kind() as u8, old.kind, "{settings:?}");
        match settings {
            Target::Webhook(w) => {
                assert_eq!(Some(&w.url), old.url.as_ref());
                assert_eq!(
                    Some(w.signing_secret.expose()),
                    old.signing_secret.as_deref()
                );
            }
            Target::Postback(p) => {
                assert_eq!(Some(&p.url), old.url.as_ref());
                assert_eq!(
                    p.statuses.0,
                    old.statuses.iter().cloned().collect(),
                    "{p:?}"
                );
            }
            Target::TiktokEvents(t) => {
                assert_eq!(Some(&t.pixel_code), old.pixel_id.as_ref());
                assert_eq!(Some(&t.api_url), old.graph_url.as_ref());
                assert_eq!(Some(t.access_token.expose()), old.access_token.as_deref());
            }
            Target::GoogleAds(g) => {
                assert_eq!(Some(&g.user), old.user.as_ref());
                assert_eq!(Some(g.password.0), old.password_digest);
                assert_eq!(
                    (g.fetches.last_at_ms, g.fetches.count),
                    (old.last_fetched_ms, old.fetches)
                );
                assert_eq!(
                    g.conversion_names.0,
                    old.conversion_names.iter().cloned().collect()
                );
            }
            other => panic!("the fixture holds no destination of its kind: {other:?}"),
        }
    }
}

/// The migration to version 19 rewrites no destination: the version 18 fixture's Google Ads
/// destination, a version 4 record still, reads on the legacy template with its names and
/// fetch. The version 19 fixture's Meta destination keeps its
/// Limited Data Use, and its Data Manager one its template, rate and fetch.
#[tokio::test]
async fn destinations_keep_their_templates_and_gain_data_processing_through_the_migration_to_19() {
    use tracker::platform::{DataProcessing, Target, Template};
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    std::fs::copy(fixtures.join("v18.redb"), &path).unwrap();
    let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
    drop(store);
    let rows = destination_rows(&path);
    let (version, gads) = rows.iter().find(|(_, r)| r.name == "gads").unwrap();
    assert_eq!(*version, 4, "not rewritten: {gads:?}");
    let Some(Target::GoogleAds(g)) = &gads.settings else {
        panic!("{gads:?}")
    };
    assert_eq!(g.template, Template::Legacy);
    assert_eq!(g.fetches.count, 1);
    assert_eq!(
        g.conversion_names.0,
        [("deposit".to_owned(), "Telegram deposit".to_owned())].into()
    );

    let path = dir.path().join("v19.redb");
    std::fs::copy(fixtures.join("v19.redb"), &path).unwrap();
    let rows = destination_rows(&path);
    let named = |name: &str| rows.iter().find(|(_, r)| r.name == name).unwrap();
    let (version, meta) = named("meta");
    assert_eq!(*version, 5);
    let Some(Target::MetaCapi(m)) = &meta.settings else {
        panic!("{meta:?}")
    };
    assert_eq!(
        m.data_processing,
        Some(DataProcessing {
            country: Some(1),
            state: Some(1000)
        })
    );
    let (_, gdm) = named("gdm");
    let Some(Target::GoogleAds(g)) = &gdm.settings else {
        panic!("{gdm:?}")
    };
    assert_eq!((g.template, g.fetches.count), (Template::DataManager, 1));
    assert_eq!(
        g.currency_rates.shown().get("XTR").map(String::as_str),
        Some("0.013 USD")
    );
    let (version, gads) = named("gads");
    assert_eq!(*version, 5);
    assert!(
        matches!(&gads.settings, Some(Target::GoogleAds(g)) if g.template == Template::Legacy),
        "{gads:?}"
    );
}

/// The migration to version 18 leaves the links of the version 17 fixture as they were, with no
/// allowed origins and no views (the views' table is new and empty); the version 18 fixture's
/// landing link keeps its origin and the one view its page sent.
#[tokio::test]
async fn links_gain_allowed_origins_and_views_through_the_migration_to_18() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (file, slug, origins, views) in [
        ("v17.redb", "fixture-link", Vec::<&str>::new(), 0),
        ("v18.redb", "landing", vec!["https://land.example.com"], 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(fixtures.join(file), &path).unwrap();
        let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
        let app = crate::support::app_on(&std::sync::Arc::new(store), 0);
        let space = app.space_named("default".into()).await.unwrap();
        let links = app.links(&space).await.unwrap();
        let link = links
            .iter()
            .find(|l| l.slug == slug)
            .unwrap_or_else(|| panic!("{file}: no {slug} in {links:?}"));
        assert_eq!(
            (link.allowed_origins.clone(), link.views),
            (origins.iter().map(|o| (*o).to_owned()).collect(), views),
            "{file}"
        );
        assert_eq!(link.bot.as_deref(), Some("fixture_bot"), "{file}");
    }
}

/// The migration to version 20 leaves the links of the version 19 fixture one-target links (no
/// `targets`); the version 20 fixture's split link keeps its weighted targets and fallback.
#[tokio::test]
async fn split_links_keep_their_targets_through_the_migration_to_20() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (file, slug, targets) in [
        ("v19.redb", "landing", serde_json::Value::Null),
        (
            "v20.redb",
            "split",
            serde_json::json!([
                {"bot": "a_fixture_bot", "weight": 1, "variant": 0, "up": true},
                {"bot": "b_fixture_bot", "weight": 1, "variant": 1, "up": true}
            ]),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(fixtures.join(file), &path).unwrap();
        let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
        let app = crate::support::app_on(&std::sync::Arc::new(store), 0);
        let space = app.space_named("default".into()).await.unwrap();
        let links = app.links(&space).await.unwrap();
        let link = links.iter().find(|l| l.slug == slug).unwrap();
        let shown = serde_json::to_value(link).unwrap();
        assert_eq!(shown["targets"], targets, "{file}: {shown}");
        if file == "v20.redb" {
            assert_eq!(
                shown["fallback"],
                serde_json::json!({"bot": "spare_fixture_bot"})
            );
            assert_eq!(link.clicks, 2);
        }
    }
}

/// The migration to version 21 makes the `admin` password of a version 20 file its first
/// owner, `admin`, whose sessions are checked against that same hash; the version 21 fixture
/// also holds a manager of the default space, invited and without a password yet, and the
/// audit log of the changes its script made.
#[tokio::test]
async fn the_admin_password_becomes_the_first_owner_through_the_migration_to_21() {
    use tracker::app::users::UserSummary;
    use tracker::domain::user::Role;
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let owner = UserSummary {
        name: "admin".into(),
        role: Role::Owner,
        spaces: vec![],
        password_set: true,
        second_factor: false,
    };
    let manager = UserSummary {
        name: "anna".into(),
        role: Role::Manager,
        spaces: vec!["default".into()],
        password_set: false,
        second_factor: false,
    };
    for (file, users) in [
        ("v20.redb", vec![owner.clone()]),
        ("v21.redb", vec![owner, manager]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(fixtures.join(file), &path).unwrap();
        let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
        let app = crate::support::app_on(&std::sync::Arc::new(store), 0);
        assert_eq!(app.users().await.unwrap(), users, "{file}");
        let admin = app.user("admin").await.unwrap().unwrap();
        assert!(
            admin
                .password_hash
                .as_deref()
                .is_some_and(|h| h.starts_with("$argon2id$")),
            "{file}"
        );
        // The version 21 fixture's audit log has what the script changed, by the command line
        // and the API, the invitation last.
        let audit = app
            .audit(tracker::domain::audit::AuditFilter::default())
            .await
            .unwrap();
        let written: Vec<(&str, &str)> = audit
            .iter()
            .map(|e| (e.who.as_str(), e.action.as_str()))
            .collect();
        if file == "v21.redb" {
            assert_eq!(written.first(), Some(&("cli", "user add")), "{written:?}");
            for change in [("api", "POST /destinations"), ("cli", "link create")] {
                assert!(written.contains(&change), "{written:?}");
            }
        } else {
            assert_eq!(written, [], "{file}");
        }
        // The old password still logs in; nothing else does.
        assert!(
            app.check_login("admin", "not the password".into())
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// A file of the layout before merged dedup runs (version 21: one run per generation) opens,
/// and its generations merge with the new ones as events come (generations of two entries
/// here): the fixture's event and every new one stay duplicates of themselves, across a
/// restart, and `tracker check` finds the merged file clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_21_file_merges_its_dedup_generations_and_still_deduplicates() {
    let (_, fixture) = fixtures()
        .into_iter()
        .find(|(v, _)| *v == 21)
        .expect("v21 fixture");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    std::fs::copy(&fixture, &path).unwrap();
    let options = StoreOptions {
        dedup_generation: 2,
        ..StoreOptions::default()
    };
    let now = tracker::clock::Clock::now_ms(&tracker::clock::SystemClock);
    let event = |eid: &str| ValidEvent {
        kind: EventKind::Deposit,
        uid: None,
        tg_id: None,
        value: None,
        currency: "USD".into(),
        eid: Some(eid.into()),
        occurred_at_ms: now,
        time_supplied: false,
        received_at_ms: now,
        source: tracker::domain::event::Source::Post,
    };
    let mut stored = vec![("order-1".to_owned(), 3)];
    for round in 0..2 {
        let (store, _) = Store::open(&path, &options).unwrap();
        for n in 0..150 {
            let e = event(&format!("merge-{round}-{n}"));
            let key = dedup_key(&e, DAY_MS);
            let outcome = store.record_event(1, e, key).await.unwrap();
            assert!(!outcome.duplicate, "{round}-{n}");
            stored.push((format!("merge-{round}-{n}"), outcome.inbox_id));
        }
        for (eid, inbox_id) in &stored {
            let e = event(eid);
            let key = dedup_key(&e, DAY_MS);
            let outcome = store.record_event(1, e, key).await.unwrap();
            assert_eq!(
                (outcome.duplicate, outcome.inbox_id),
                (true, *inbox_id),
                "{eid}"
            );
        }
        store.close();
    }
    let db = tracker::storage::open_database(&path, None, tracker::storage::SERVER_CACHE_BYTES)
        .unwrap()
        .db;
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let table = txn.open_table(tracker::storage::schema::DEDUP).unwrap();
    let mut runs: Vec<u32> = redb::ReadableTable::iter(&table)
        .unwrap()
        .map(|e| e.unwrap().0.value().0)
        .collect();
    runs.dedup();
    assert!(
        runs.iter().any(|r| *r >= 1 << 31) && runs.len() < 20,
        "merged runs: {runs:?}"
    );
    drop((table, txn, db));
    let expiry = tracker::config::Settings::with_data(path.clone()).dedup_expiry(now);
    let report = tracker::storage::check::check_file(&path, false, expiry).unwrap();
    assert!(report.clean(), "{report:#?}");
}

/// The migration to version 23 reads version 22's users as they were, each without a second
/// factor and none required; the version 23 fixture, made by a build that requires it, has it
/// required of everyone and its users' records still read.
#[tokio::test]
async fn users_of_version_22_have_no_second_factor_after_the_migration_to_23() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (file, required) in [("v21.redb", false), ("v22.redb", false), ("v23.redb", true)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        std::fs::copy(fixtures.join(file), &path).unwrap();
        let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
        let app = crate::support::app_on(&std::sync::Arc::new(store), 0);
        let users = app.users().await.unwrap();
        let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["admin", "anna"], "{file}");
        assert!(users.iter().all(|u| !u.second_factor), "{file}");
        let admin = app.user("admin").await.unwrap().unwrap();
        assert!(admin.second_factor.is_none(), "{file}");
        assert!(admin.password_hash.is_some(), "{file}");
        assert_eq!(
            app.second_factor_required().await.unwrap(),
            required,
            "{file}"
        );
    }
}

/// The migration to version 24 keeps a space's `currency_rates` as its first set of rates, in
/// force on every day before: a version 23 file given rates keeps them for its old days and
/// for today, and its setting reads as it did. The version 24 fixture holds the set its script
/// typed, from the day it was typed.
#[tokio::test]
async fn currency_rates_become_the_first_set_of_every_day_through_the_migration_to_24() {
    use redb::ReadableTable as _;
    use tracker::storage::records::{SpaceSettingsRecord, decode, encode};
    use tracker::storage::schema::SPACE_SETTINGS;
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.redb");
    std::fs::copy(fixtures.join("v23.redb"), &path).unwrap();
    {
        // Rates typed in the default space by a version 23 release, as it stored them.
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(SPACE_SETTINGS).unwrap();
            let mut record: SpaceSettingsRecord = table
                .get(1)
                .unwrap()
                .map(|b| decode(b.value()).unwrap())
                .unwrap_or_default();
            record.values.push((
                "currency_rates".into(),
                "EUR=1.08 USD, XTR=0.013 USD".into(),
            ));
            table.insert(1, encode(&record).as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
    let store = std::sync::Arc::new(store);
    let app = crate::support::app_on(&store, 0);
    let space = tracker::domain::keyring::SpaceRef {
        no: 1,
        name: "default".into(),
    };
    let settings = app.space_settings(&space).await.unwrap();
    assert_eq!(
        settings.currency_rates.text(),
        "EUR=1.08 USD, XTR=0.013 USD"
    );
    let history = app.reporting(&space).await.unwrap().history;
    for day in [0, 20_000, u32::MAX] {
        assert_eq!(
            history.on(day, "USD").text(),
            "EUR=1.08 USD, XTR=0.013 USD",
            "day {day}"
        );
    }
    assert!(
        history.changes_within(0, u32::MAX).is_empty(),
        "one set, from day 0"
    );

    let path = dir.path().join("v24.redb");
    std::fs::copy(fixtures.join("v24.redb"), &path).unwrap();
    let (store, _) = Store::open(&path, &StoreOptions::default()).unwrap();
    let app = crate::support::app_on(&std::sync::Arc::new(store), 0);
    let space = tracker::domain::keyring::SpaceRef {
        no: 1,
        name: "default".into(),
    };
    let history = app.reporting(&space).await.unwrap().history;
    assert_eq!(history.on(0, "USD").text(), "EUR=1.08 USD");
    assert_eq!(
        history.changes_within(0, u32::MAX).len(),
        1,
        "typed on its day"
    );
}
