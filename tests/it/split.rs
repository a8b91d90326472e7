//! Split tests (`docs/api.md#split-tests`): a link with weighted targets splits its visits by
//! weight, a repeat of the same ad click keeps its target, each click records its variant,
//! and bad `targets` are refused with nothing stored.

use serde_json::{Value, json};
use tracker::domain::rate::Rate;

use crate::support::{Request, Response, TestServer, assert_error};

/// A server whose visitors are not limited: these tests send faster than a person.
pub async fn server() -> TestServer {
    TestServer::start_with(|c| {
        c.address_rate_limit = Rate {
            per_second: 0,
            burst: 0,
        };
    })
    .await
}

pub async fn visit(s: &TestServer, target: &str) -> Response {
    s.send(&Request::get(target).header("User-Agent", "Mozilla/5.0 (split test)"))
        .await
}

/// The bot a visit was sent to (`https://t.me/<bot>?start=...`), or the URL without its uid.
pub fn sent_to(r: &Response) -> String {
    assert_eq!(r.status, 302, "{}", r.text());
    let location = r.header("location").unwrap();
    match location.strip_prefix("https://t.me/") {
        Some(rest) => rest.split('?').next().unwrap().to_owned(),
        None => location.split('?').next().unwrap().to_owned(),
    }
}

const SPLIT: &str = r#"{"slug":"ab","campaign_name":"split",
    "targets":[{"bot":"a_bot","weight":1},{"bot":"b_bot","weight":3}],
    "fallback":{"target":"https://spare.example.com/?u={uid}"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visits_split_by_weight_within_binomial_bounds() {
    let s = server().await;
    let r = s.post_as(&s.a, "/links", SPLIT).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let link = &r.json()["link"];
    assert_eq!(
        link["targets"],
        json!([{"bot": "a_bot", "weight": 1, "variant": 0, "up": true},
               {"bot": "b_bot", "weight": 3, "variant": 1, "up": true}])
    );
    assert_eq!(
        link["fallback"],
        json!({"target": "https://spare.example.com/?u={uid}"})
    );
    assert!(
        link.get("bot").is_none() && link.get("target").is_none(),
        "{link}"
    );

    let visits = 1000;
    let mut to_a = 0;
    for i in 0..visits {
        match sent_to(&visit(&s, &format!("/l/ab?fbclid=IwAR-{i}")).await).as_str() {
            "a_bot" => to_a += 1,
            "b_bot" => {}
            other => panic!("a visit went to {other}"),
        }
    }
    // Binomial(1000, 1/4): mean 250, standard deviation 13.7; three of them either side.
    assert!((209..=291).contains(&to_a), "{to_a} of {visits} to a_bot");
    let links = s.read_as(&s.a, "/links").await.json();
    assert_eq!(links["links"][0]["clicks"], visits);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_ad_click_keeps_its_target() {
    let s = server().await;
    assert_eq!(s.post_as(&s.a, "/links", SPLIT).await.status, 201);
    for i in 0..20 {
        let first = sent_to(&visit(&s, &format!("/l/ab?fbclid=IwAR-again-{i}")).await);
        for _ in 0..3 {
            let again = sent_to(&visit(&s, &format!("/l/ab?fbclid=IwAR-again-{i}&x=1")).await);
            assert_eq!(again, first, "fbclid IwAR-again-{i}");
        }
        // Another platform's click id keeps its target as well.
        let first = sent_to(&visit(&s, &format!("/l/ab?ttclid=E.C.P.{i}")).await);
        let again = sent_to(&visit(&s, &format!("/l/ab?ttclid=E.C.P.{i}")).await);
        assert_eq!(again, first, "ttclid E.C.P.{i}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_target_link_keeps_its_shape() {
    let s = server().await;
    let r = s
        .post_as(&s.a, "/links", r#"{"slug":"one","bot":"shop_bot"}"#)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let link = r.json()["link"].clone();
    for absent in ["targets", "fallback"] {
        assert!(link.get(absent).is_none(), "{absent} in {link}");
    }
    assert_eq!(link["bot"], "shop_bot");
    assert_eq!(sent_to(&visit(&s, "/l/one?fbclid=F").await), "shop_bot");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_targets_are_refused_and_store_nothing() {
    let s = server().await;
    let body = |targets: Value, extra: Value| {
        let mut b = json!({"slug": "bad", "targets": targets});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };
    let two = |w: Value| json!([{"bot": "a_bot", "weight": w}, {"bot": "b_bot", "weight": 1}]);
    let refused = [
        (two(json!(0)), json!({}), "targets"),
        (two(json!(10_001)), json!({}), "targets"),
        (two(json!(null)), json!({}), "targets"),
        (json!([{"bot": "a_bot", "weight": 1}]), json!({}), "targets"),
        (
            json!([{"bot": "a_bot", "weight": 1}, {"bot": "no", "weight": 1}]),
            json!({}),
            "targets",
        ),
        (two(json!(1)), json!({"bot": "c_bot"}), "targets"),
        (
            two(json!(1)),
            json!({"fallback": {"bot": "c_bot", "weight": 1}}),
            "fallback",
        ),
        (
            two(json!(1)),
            json!({"fallback": "https://t.me/+abc"}),
            "fallback",
        ),
    ];
    for (targets, extra, field) in refused {
        let r = s.post_as(&s.a, "/links", &body(targets, extra)).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    assert_eq!(s.read_as(&s.a, "/links").await.json()["links"], json!([]));
    let r = s
        .post_as(&s.a, "/links", &body(two(json!(10_000)), json!({})))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    s.stop().await;
}

/// Stats by variant: each target's clicks and binds, rates per click, and whether a rate's
/// difference from the best is significant; a one-target link, another space's link and no
/// link are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_by_variant_count_each_targets_clicks_and_binds() {
    let s = server().await;
    assert_eq!(s.post_as(&s.a, "/links", SPLIT).await.status, 201);
    let mut sent = [0u64; 2];
    let mut bound = [0u64; 2];
    for i in 0..400 {
        let r = visit(&s, &format!("/l/ab?fbclid=IwAR-stats-{i}")).await;
        let variant = usize::from(sent_to(&r) == "b_bot");
        sent[variant] += 1;
        // Every visit of a_bot binds, one in ten of b_bot's: a difference no chance makes.
        if variant == 0 || i % 10 == 0 {
            let uid = r
                .header("location")
                .unwrap()
                .rsplit_once("start=")
                .unwrap()
                .1;
            assert_eq!(s.bind(&s.a, uid, 1000 + i).await.status, 200);
            bound[variant] += 1;
        }
    }
    let r = s.read_as(&s.a, "/stats?by=variant&link=ab").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(
        (&body["by"], &body["link"]),
        (&json!("variant"), &json!("ab"))
    );
    let variants = body["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    for (i, v) in variants.iter().enumerate() {
        assert_eq!(v["variant"], i);
        assert_eq!(v["stats"]["clicks"], sent[i], "{v}");
        assert_eq!(v["stats"]["bound_clicks"], bound[i], "{v}");
    }
    assert_eq!(variants[0]["target"]["bot"], "a_bot");
    assert_eq!(variants[0]["significance"]["bound"], "best");
    assert_eq!(variants[1]["significance"]["bound"], "significant");
    assert_eq!(variants[0]["per_click"]["bound"], "1.0000");
    // No registration anywhere: every variant as good as the best.
    assert_eq!(variants[1]["significance"]["registration"], "best");

    assert_eq!(
        s.post_as(&s.a, "/links", r#"{"slug":"one","bot":"shop_bot"}"#)
            .await
            .status,
        201
    );
    let one = s.read_as(&s.a, "/stats?by=variant&link=one").await;
    assert_error(&one, 422, "invalid_field", Some("link"));
    let none = s.read_as(&s.a, "/stats?by=variant").await;
    assert_error(&none, 422, "invalid_field", Some("link"));
    let other = s.read_as(&s.b, "/stats?by=variant&link=ab").await;
    assert_error(&other, 404, "not_found", Some("link"));
    // A `link` that is no slug is refused whatever `by` is; just inside the rule, it is read
    // (and ignored by the other groupings).
    let typo = s.read_as(&s.a, "/stats?link=0.5").await;
    assert_error(&typo, 422, "invalid_field", Some("link"));
    let slug = s.read_as(&s.a, "/stats?link=one_-9").await;
    assert_eq!(
        slug.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&slug.body)
    );
    s.stop().await;
}
