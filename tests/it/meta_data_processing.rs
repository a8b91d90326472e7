//! Meta's data processing options (`docs/api.md#meta`): a `meta_capi` destination's Limited
//! Data Use, sent with every event of its requests exactly when set, against Meta's stand-in
//! (`support/receiver.rs`), and the rules of its three fields at their edges.

use serde_json::{Value, json};

use crate::deliveries::{WAIT, bound_click, destination, private_server};
use crate::support::receiver::Receiver;
use crate::support::{NOW_MS, assert_error, assert_queued};

/// Three Meta destinations, each on a stand-in of its own: with `LDU` and the United States
/// and California (`1`, `1000`), with `LDU` alone (Meta geolocates), and without. Meta's page
/// (developers.facebook.com/docs/marketing-apis/data-processing-options): "Limited Data Use
/// is sent through a parameter called Data Processing Options, and it can optionally be sent
/// alongside a user's country and state."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metas_events_carry_data_processing_options_exactly_when_set() {
    let s = private_server().await;
    let mut stand_ins = Vec::new();
    for (name, own) in [
        (
            "california",
            json!({"data_processing_options": "LDU", "data_processing_options_country": "1",
                   "data_processing_options_state": "1000"}),
        ),
        ("located", json!({"data_processing_options": "LDU"})),
        ("plain", json!({})),
    ] {
        let meta = Receiver::meta(NOW_MS).await;
        let mut body = json!({"name": name, "kind": "meta_capi", "pixel_id": "1234567890",
                              "access_token": "EAAB-token-wxyz", "graph_url": meta.url("")});
        for (field, value) in own.as_object().unwrap() {
            body[field] = value.clone();
        }
        let created = destination(&s, &s.a, &body).await;
        for field in ["data_processing_options", "data_processing_options_country"] {
            assert_eq!(created.get(field), own.get(field), "{created}");
        }
        stand_ins.push(meta);
    }
    let uid = bound_click(&s, "fbclid", "IwAR-ldu", 777).await;
    assert_queued(
        &s.post_event(&format!(
            r#"{{"event":"deposit","uid":"{uid}","value":"10","currency":"USD"}}"#
        ))
        .await,
    );
    let event_of = |meta: &Receiver| -> Value { meta.received()[0].json()["data"][0].clone() };
    let mut events = Vec::new();
    for meta in &stand_ins {
        meta.wait_for(1, WAIT).await;
        events.push(event_of(meta));
    }
    let [california, located, plain] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(california["data_processing_options"], json!(["LDU"]));
    assert_eq!(california["data_processing_options_country"], 1);
    assert_eq!(california["data_processing_options_state"], 1000);
    assert_eq!(located["data_processing_options"], json!(["LDU"]));
    assert!(
        located.get("data_processing_options_country").is_none(),
        "{located}"
    );
    for key in [
        "data_processing_options",
        "data_processing_options_country",
        "data_processing_options_state",
    ] {
        assert!(plain.get(key).is_none(), "{plain}");
    }

    // Set and unset by a change: the next event follows it.
    let r = s
        .patch_as(
            &s.a,
            "/destinations/plain",
            r#"{"data_processing_options":"LDU","data_processing_options_country":"0","data_processing_options_state":"0"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s
        .patch_as(
            &s.a,
            "/destinations/located",
            r#"{"data_processing_options":null}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_queued(
        &s.post_event(&format!(r#"{{"event":"contact","uid":"{uid}"}}"#))
            .await,
    );
    let second = |meta: &Receiver| meta.received()[1].json()["data"][0].clone();
    stand_ins[2].wait_for(2, WAIT).await;
    stand_ins[1].wait_for(2, WAIT).await;
    let now_plain = second(&stand_ins[2]);
    assert_eq!(
        (
            &now_plain["data_processing_options"],
            &now_plain["data_processing_options_country"],
            &now_plain["data_processing_options_state"]
        ),
        (&json!(["LDU"]), &json!(0), &json!(0))
    );
    assert!(
        second(&stand_ins[1])
            .get("data_processing_options")
            .is_none(),
        "{}",
        second(&stand_ins[1])
    );
    s.stop().await;
}

/// `data_processing_options` is `LDU` only; the country and the state are integers from 0 to
/// 9999, given together and only with `LDU`. Each value just inside its rule is taken, each
/// just outside refused naming its field, and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_processing_fields_have_rules() {
    let s = private_server().await;
    let ldu = |country: &str, state: &str| {
        json!({"data_processing_options": "LDU", "data_processing_options_country": country,
               "data_processing_options_state": state})
    };
    let refused = [
        (
            json!({"data_processing_options": "ldu"}),
            "data_processing_options",
        ),
        (
            json!({"data_processing_options": "LDU,X"}),
            "data_processing_options",
        ),
        (ldu("10000", "0"), "data_processing_options_country"),
        (ldu("0", "10000"), "data_processing_options_state"),
        (ldu("-1", "0"), "data_processing_options_country"),
        (ldu("+1", "0"), "data_processing_options_country"),
        (ldu("1.0", "0"), "data_processing_options_country"),
        (
            json!({"data_processing_options": "LDU", "data_processing_options_country": "1"}),
            "data_processing_options_state",
        ),
        (
            json!({"data_processing_options": "LDU", "data_processing_options_state": "1000"}),
            "data_processing_options_country",
        ),
    ];
    for (own, field) in refused {
        let mut body = json!({"name": "m", "kind": "meta_capi", "pixel_id": "1",
                              "access_token": "t"});
        for (k, v) in own.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = s.post_as(&s.a, "/destinations", &body.to_string()).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"m","kind":"meta_capi","pixel_id":"1","access_token":"t","data_processing_options_country":"1","data_processing_options_state":"1000"}"#,
        )
        .await;
    assert_error(&r, 422, "missing_field", Some("data_processing_options"));
    let listed = s.list_as(&s.a, "/destinations", "destinations").await;
    assert!(listed.is_empty(), "{listed:?}");
    for (i, own) in [ldu("9999", "9999"), ldu("0", "0")].into_iter().enumerate() {
        let mut body = json!({"name": format!("m{i}"), "kind": "meta_capi", "pixel_id": "1",
                              "access_token": "t"});
        for (k, v) in own.as_object().unwrap() {
            body[k] = v.clone();
        }
        destination(&s, &s.a, &body).await;
    }
    // Another kind's destination takes none of them.
    let r = s
        .post_as(
            &s.a,
            "/destinations",
            r#"{"name":"w","kind":"webhook","url":"https://x.example","data_processing_options":"LDU"}"#,
        )
        .await;
    assert_error(&r, 422, "invalid_field", Some("data_processing_options"));
    s.stop().await;
}
