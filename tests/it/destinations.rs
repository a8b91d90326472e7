//! Destinations (`docs/api.md#destinations`): managing them through the API and the command
//! line, each field's rule at its bounds, credentials that are never shown again, and the
//! delivery log's query.

use serde_json::{Value, json};

use crate::support::{Space, TestServer, assert_error, assert_succeeded, run_cli};

async fn create(s: &TestServer, space: &Space, body: &Value) -> crate::support::Response {
    s.post_as(space, "/destinations", &body.to_string()).await
}

async fn delete(s: &TestServer, space: &Space, name: &str) -> crate::support::Response {
    let target = format!("/destinations/{name}");
    let request = crate::support::Request {
        method: "DELETE",
        ..crate::support::Request::get(&target)
    }
    .header("Authorization", format!("Bearer {}", space.secret));
    s.send(&request).await
}

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "kind": "meta_capi",
        "pixel_id": "1234567890",
        "access_token": "EAAB-secret-token-wxyz",
    })
}

async fn list(s: &TestServer, space: &Space) -> Vec<Value> {
    let r = s.read_as(space, "/destinations").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["destinations"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_are_created_listed_and_removed_per_space() {
    let s = TestServer::start().await;
    let r = create(&s, &s.a, &meta("meta")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let d = r.json()["destination"].clone();
    assert_eq!(d["kind"], "meta_capi");
    assert_eq!(d["access_token"], "…wxyz");
    assert_eq!(d["api_version"], "v25.0");
    assert_eq!(d["graph_url"], "https://graph.facebook.com");
    assert_eq!(d["only_attributed"], true);
    assert_eq!(
        d["events"],
        json!(["contact", "subscribed", "registration", "deposit"])
    );
    assert!(d.get("signing_secret").is_none(), "{d}");
    assert!(!r.text().contains("EAAB"), "{}", r.text());

    let r = create(
        &s,
        &s.a,
        &json!({"name": "hook", "kind": "webhook", "url": "https://hooks.example.com/t",
                "events": ["deposit"]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let hook = r.json()["destination"].clone();
    let secret = hook["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{hook}");
    assert_eq!(hook["only_attributed"], false);
    assert_eq!(hook["events"], json!(["deposit"]));

    // Listed: the token by its last 4 characters, the secret never again.
    let listed = list(&s, &s.a).await;
    assert_eq!(listed.len(), 2);
    let text = serde_json::to_string(&listed).unwrap();
    assert!(!text.contains("EAAB") && !text.contains(&secret), "{text}");
    assert_eq!(listed[0]["name"], "meta");
    assert_eq!(
        listed[1]["deliveries"],
        json!({"pending": 0, "delivered": 0, "retrying": 0, "dead": 0, "cancelled": 0, "paused": 0})
    );
    assert_eq!(listed[1]["last_error"], Value::Null);
    assert!(list(&s, &s.b).await.is_empty(), "another space's");

    // A name is unique among a space's live destinations, and free again once removed.
    assert_error(
        &create(&s, &s.a, &meta("meta")).await,
        409,
        "conflict",
        Some("name"),
    );
    assert_eq!(create(&s, &s.b, &meta("meta")).await.status, 201);
    assert_eq!(delete(&s, &s.a, "meta").await.status, 200);
    assert_error(&delete(&s, &s.a, "meta").await, 404, "not_found", None);
    assert_error(&delete(&s, &s.a, "nothing").await, 404, "not_found", None);
    assert_eq!(list(&s, &s.a).await.len(), 1);
    assert_eq!(create(&s, &s.a, &meta("meta")).await.status, 201);

    // Kept across a restart.
    let s = s.restart().await;
    let names: Vec<Value> = list(&s, &s.a)
        .await
        .iter()
        .map(|d| d["name"].clone())
        .collect();
    assert_eq!(names, [json!("hook"), json!("meta")]);
    s.stop().await;
}

// Every field's bounds, both sides, in one walk; long by nature.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_field_is_checked_at_its_bounds() {
    let s = TestServer::start().await;
    let with = |changes: Value| {
        let mut body = meta("m");
        for (k, v) in changes.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let long_url = |len: usize| {
        let head = "https://hooks.example.com/";
        format!("{head}{}", "a".repeat(len - head.len()))
    };
    let ok = [
        json!({"name": "a".repeat(32)}),
        json!({"name": "0-a"}),
        json!({"pixel_id": "1".repeat(32)}),
        json!({"access_token": "x".repeat(1024)}),
        json!({"test_event_code": "T".repeat(64)}),
        json!({"api_version": "v999.999"}),
        json!({"events": ["deposit"]}),
        json!({"only_attributed": false}),
    ];
    for (i, change) in ok.iter().enumerate() {
        let mut body = with(change.clone());
        if change.get("name").is_none() {
            body["name"] = json!(format!("ok-{i}"));
        }
        let r = create(&s, &s.a, &body).await;
        assert_eq!(r.status, 201, "{change}: {}", r.text());
    }
    let bad = [
        (json!({"name": "a".repeat(33)}), "name", "invalid_field"),
        (json!({"name": "-a"}), "name", "invalid_field"),
        (json!({"name": "A"}), "name", "invalid_field"),
        (json!({"name": null}), "name", "missing_field"),
        (json!({"kind": "email"}), "kind", "invalid_field"),
        (
            json!({"pixel_id": "1".repeat(33)}),
            "pixel_id",
            "invalid_field",
        ),
        (json!({"pixel_id": "12a"}), "pixel_id", "invalid_field"),
        (json!({"pixel_id": ""}), "pixel_id", "missing_field"),
        (
            json!({"access_token": "x".repeat(1025)}),
            "access_token",
            "invalid_field",
        ),
        (
            json!({"access_token": null}),
            "access_token",
            "missing_field",
        ),
        (
            json!({"test_event_code": "T".repeat(65)}),
            "test_event_code",
            "invalid_field",
        ),
        (
            json!({"api_version": "v1000.0"}),
            "api_version",
            "invalid_field",
        ),
        (
            json!({"graph_url": "http://graph.example.com"}),
            "graph_url",
            "invalid_field",
        ),
        (json!({"events": []}), "events", "invalid_field"),
        (json!({"events": ["purchase"]}), "events", "invalid_field"),
        (
            json!({"url": "https://x.example.com"}),
            "url",
            "invalid_field",
        ),
    ];
    for (change, field, code) in bad {
        let r = create(&s, &s.a, &with(change.clone())).await;
        assert_error(&r, 422, code, Some(field));
    }
    let hook = |url: String| json!({"name": "w", "kind": "webhook", "url": url});
    assert_eq!(create(&s, &s.a, &hook(long_url(2048))).await.status, 201);
    assert_error(
        &create(&s, &s.b, &hook(long_url(2049))).await,
        422,
        "invalid_field",
        Some("url"),
    );
    assert_error(
        &create(&s, &s.b, &json!({"name": "w", "kind": "webhook"})).await,
        422,
        "missing_field",
        Some("url"),
    );
    assert_error(
        &create(
            &s,
            &s.b,
            &json!({"name": "w", "kind": "postback", "url": "https://n.example.com/?c={click}"}),
        )
        .await,
        422,
        "invalid_field",
        Some("url"),
    );
    assert_error(
        &create(
            &s,
            &s.b,
            &json!({"name": "w", "kind": "webhook", "url": "x", "color": 1}),
        )
        .await,
        400,
        "invalid_json",
        None,
    );
    // Nothing of the refused ones was stored.
    assert_eq!(list(&s, &s.a).await.len(), ok.len() + 1);
    assert!(list(&s, &s.b).await.is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_allowed() {
    let s = TestServer::start().await;
    for url in [
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://100.64.0.1/hook",
        "http://hooks.example.com/hook",
    ] {
        let r = create(
            &s,
            &s.a,
            &json!({"name": "w", "kind": "webhook", "url": url}),
        )
        .await;
        assert_error(&r, 422, "invalid_field", Some("url"));
        let mut m = meta("m");
        m["graph_url"] = json!(url);
        assert_error(
            &create(&s, &s.a, &m).await,
            422,
            "invalid_field",
            Some("graph_url"),
        );
    }
    // A public address literal is taken.
    let r = create(
        &s,
        &s.a,
        &json!({"name": "w", "kind": "webhook", "url": "https://8.8.8.8/hook"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    s.stop().await;

    let s = TestServer::start_with(|c| c.delivery.allow_private_destinations = true).await;
    for url in ["http://127.0.0.1:9/hook", "https://[::1]/hook"] {
        let r = create(
            &s,
            &s.a,
            &json!({"name": "w", "kind": "webhook", "url": url}),
        )
        .await;
        assert_eq!(r.status, 201, "{url}: {}", r.text());
        let name = r.json()["destination"]["name"].as_str().unwrap().to_owned();
        assert_eq!(delete(&s, &s.a, &name).await.status, 200);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_log_and_retry_check_what_they_are_asked() {
    let s = TestServer::start().await;
    assert_eq!(
        create(
            &s,
            &s.a,
            &json!({"name": "w", "kind": "webhook", "url": "https://8.8.8.8/hook"})
        )
        .await
        .status,
        201
    );
    for query in ["", "?limit=1", "?limit=1000", "?destination=w&state=dead"] {
        let r = s.read_as(&s.a, &format!("/deliveries{query}")).await;
        assert_eq!(r.status, 200, "{query}: {}", r.text());
        assert_eq!(r.json()["deliveries"], json!([]));
    }
    for (query, field) in [
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?state=lost", "state"),
        ("?destination=Bad", "destination"),
    ] {
        let r = s.read_as(&s.a, &format!("/deliveries{query}")).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    assert_error(
        &s.read_as(&s.a, "/deliveries?destination=nothing").await,
        404,
        "not_found",
        None,
    );
    let retry = |body: &'static str| s.post_as(&s.a, "/deliveries/retry", body);
    let r = retry(r#"{"destination":"w"}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"ok": true, "destination": "w", "retried": 0})
    );
    assert_eq!(
        retry(r#"{"destination":"w","state":"dead"}"#).await.status,
        200
    );
    assert_error(
        &retry(r#"{"destination":"w","state":"pending"}"#).await,
        422,
        "invalid_field",
        Some("state"),
    );
    assert_error(
        &retry("{}").await,
        422,
        "missing_field",
        Some("destination"),
    );
    assert_error(
        &retry(r#"{"destination":"nothing"}"#).await,
        404,
        "not_found",
        None,
    );
    s.stop().await;
}

async fn patch(
    s: &TestServer,
    space: &Space,
    name: &str,
    body: &Value,
) -> crate::support::Response {
    s.patch_as(space, &format!("/destinations/{name}"), &body.to_string())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_has_at_most_32_destinations() {
    let s = TestServer::start().await;
    for i in 0..32 {
        let r = create(
            &s,
            &s.a,
            &json!({"name": format!("pb-{i}"), "kind": "postback",
                    "url": "https://n.example.com/pb?c={uid}"}),
        )
        .await;
        assert_eq!(r.status, 201, "destination {i}: {}", r.text());
    }
    let r = create(
        &s,
        &s.a,
        &json!({"name": "pb-32", "kind": "postback", "url": "https://n.example.com/pb"}),
    )
    .await;
    let e = assert_error(&r, 409, "conflict", None);
    assert!(e["error"].as_str().unwrap().contains("32"), "{e}");
    assert_eq!(list(&s, &s.a).await.len(), 32);
    // Another space has its own 32; a removal makes room.
    assert_eq!(create(&s, &s.b, &meta("m")).await.status, 201);
    assert_eq!(delete(&s, &s.a, "pb-0").await.status, 200);
    let r = create(
        &s,
        &s.a,
        &json!({"name": "pb-32", "kind": "postback", "url": "https://n.example.com/pb"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_replaces_secrets_and_settings_by_the_rules_of_a_new_one() {
    let s = TestServer::start().await;
    assert_eq!(create(&s, &s.a, &meta("m")).await.status, 201);
    let pb = json!({"name": "pb", "kind": "postback", "url": "https://n.example.com/pb?c={uid}",
                    "statuses": {"deposit": "sale"}});
    assert_eq!(create(&s, &s.a, &pb).await.status, 201);
    let r = patch(
        &s,
        &s.a,
        "m",
        &json!({"access_token": "EAAB-other-1234", "test_event_code": "TEST7",
                "currency_rates": {"XTR": "0.013 USD"}, "event_names": {"deposit": "Deposit"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.text().contains("EAAB-other"), "write-only: {}", r.text());
    let m = &r.json()["destination"];
    assert_eq!(m["access_token"], "…1234");
    assert_eq!(m["test_event_code"], "TEST7");
    assert_eq!(m["pixel_id"], "1234567890", "kept");
    assert_eq!(m["currency_rates"], json!({"XTR": "0.013 USD"}));
    // null: back to the default.
    let r = patch(
        &s,
        &s.a,
        "m",
        &json!({"test_event_code": null, "event_names": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let m = &r.json()["destination"];
    assert!(m.get("test_event_code").is_none(), "{m}");
    assert_eq!(m["event_names"], json!({}), "{m}");
    assert_eq!(
        m["currency_rates"],
        json!({"XTR": "0.013 USD"}),
        "kept: {m}"
    );
    let listed = list(&s, &s.a).await;
    assert_eq!(listed[0]["access_token"], "…1234");
    assert_error(
        &patch(&s, &s.a, "none", &json!({})).await,
        404,
        "not_found",
        None,
    );
    assert_error(
        &patch(&s, &s.b, "m", &json!({})).await,
        404,
        "not_found",
        None,
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_breaks_a_rule_changes_nothing() {
    let s = TestServer::start().await;
    assert_eq!(create(&s, &s.a, &meta("m")).await.status, 201);
    let pb = json!({"name": "pb", "kind": "postback", "url": "https://n.example.com/pb?c={uid}",
                    "statuses": {"deposit": "sale"}});
    assert_eq!(create(&s, &s.a, &pb).await.status, 201);
    // Each rule of a new destination, and what cannot change; nothing changes.
    for (name, body, field) in [
        ("m", json!({"name": "other"}), "name"),
        ("m", json!({"kind": "webhook"}), "kind"),
        ("m", json!({"access_token": null}), "access_token"),
        (
            "m",
            json!({"currency_rates": {"XTR": "0.013"}}),
            "currency_rates",
        ),
        (
            "m",
            json!({"currency_rates": {"USD": "1 EUR"}}),
            "currency_rates",
        ),
        (
            "m",
            json!({"event_names": {"refund": "Refund"}}),
            "event_names",
        ),
        (
            "m",
            json!({"event_names": {"deposit": "a".repeat(41)}}),
            "event_names",
        ),
        ("m", json!({"statuses": {"deposit": "sale"}}), "statuses"),
        (
            "pb",
            json!({"statuses": {"deposit": "a".repeat(41)}}),
            "statuses",
        ),
        (
            "pb",
            json!({"url": "https://n.example.com/pb?c={nope}"}),
            "url",
        ),
        (
            "pb",
            json!({"currency_rates": {"XTR": "1 USD"}}),
            "currency_rates",
        ),
    ] {
        let r = patch(&s, &s.a, name, &body).await;
        assert_error(&r, 422, "invalid_field", Some(field));
    }
    let r = patch(
        &s,
        &s.a,
        "pb",
        &json!({"statuses": {"deposit": "a".repeat(40)}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = patch(
        &s,
        &s.a,
        "m",
        &json!({"event_names": {"deposit": "a".repeat(40)}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let listed = list(&s, &s.a).await;
    assert_eq!(listed[0]["access_token"], "…wxyz");
    assert_eq!(listed[1]["url"], "https://n.example.com/pb?c={uid}");
    s.stop().await;
}

#[test]
fn the_command_line_manages_destinations() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t.redb");
    let run = |args: &[&str]| {
        let out = run_cli(dir.path(), &data, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    run(&["init"]);
    run(&["space", "create", "shop"]);
    let created: Value = serde_json::from_str(&run(&[
        "--json",
        "destination",
        "create",
        "shop",
        "hook",
        "--kind",
        "webhook",
        "--url",
        "https://hooks.example.com/t",
        "--events",
        "deposit,contact",
    ]))
    .unwrap();
    assert!(
        created["signing_secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_")),
        "{created}"
    );
    assert_eq!(created["events"], json!(["contact", "deposit"]));
    let text = run(&["destination", "list", "shop"]);
    assert!(text.contains("hook") && text.contains("webhook"), "{text}");
    let rotated: Value = serde_json::from_str(&run(&[
        "--json",
        "destination",
        "rotate-secret",
        "shop",
        "hook",
    ]))
    .unwrap();
    let new_secret = rotated["signing_secret"].as_str().unwrap();
    assert!(new_secret.starts_with("whsec_"), "{rotated}");
    assert_ne!(new_secret, created["signing_secret"].as_str().unwrap());
    assert!(rotated["previous_secret_until_ms"].is_u64(), "{rotated}");
    let text = run(&[
        "destination",
        "change",
        "shop",
        "hook",
        "--events",
        "deposit",
    ]);
    assert!(text.contains("changed destination hook"), "{text}");
    let listed: Value =
        serde_json::from_str(&run(&["--json", "destination", "list", "shop"])).unwrap();
    assert_eq!(listed[0]["events"], json!(["deposit"]), "{listed}");
    assert!(
        listed[0].get("signing_secret").is_none(),
        "shown once: {listed}"
    );
    let text = run(&["destination", "deliveries", "shop", "--state", "dead"]);
    assert!(text.contains("no deliveries"), "{text}");
    let text = run(&["destination", "retry", "shop", "hook"]);
    assert!(text.contains("0 dead deliveries"), "{text}");
    let text = run(&["destination", "delete", "shop", "hook"]);
    assert!(text.contains("removed destination hook"), "{text}");
    let out = run_cli(
        dir.path(),
        &data,
        [
            "destination",
            "create",
            "shop",
            "x",
            "--kind",
            "webhook",
            "--url",
            "https://10.0.0.1/",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("private"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Meta's access token, given to `tracker destination create` on stdin while a server runs, goes
/// through the control socket, whose log line names the command: the line never holds the token.
#[test]
fn the_control_log_never_holds_an_access_token() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let process = crate::support::TrackerProcess::start(dir.path());
    let token = "EAABsecretTOKEN0123456789";
    let config = dir.path().join("empty-cli.toml");
    std::fs::write(&config, "").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(dir.path().join("t.redb"))
        .args([
            "destination",
            "create",
            "default",
            "meta",
            "--kind",
            "meta_capi",
        ])
        .args(["--pixel-id", "1234567890"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{token}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_succeeded(&out);
    let log = process.log_when(|log| log.contains("control command"));
    assert!(
        log.contains("control command"),
        "through the socket:\n{log}"
    );
    assert!(log.contains("meta_capi"), "the command is named:\n{log}");
    assert!(!log.contains(token), "the token is in the log:\n{log}");
    // The command line's look for a server (a connection closed unsaid) is no warning.
    assert!(
        !log.contains("WARN"),
        "a warning for a command that worked:\n{log}"
    );
}
