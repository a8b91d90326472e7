//! `GET /metrics` (`docs/api.md#metrics`) on the real binary: off by default, on its own listener
//! when `metrics_listen` is set, in a strict Prometheus text format, and every counter moves by
//! exactly what was sent.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;

use crate::support::{Request, TrackerProcess, assert_error, assert_queued, send};

/// A scrape: every sample by `name{labels}` as written.
type Samples = BTreeMap<String, f64>;

/// Parses the `OpenMetrics` / Prometheus text strictly: every line is a `# HELP`, `# TYPE`,
/// `# UNIT` or `# EOF` line or a sample `name{labels} value` of a family declared by `# TYPE`
/// before it; the text ends with `# EOF`. Panics on anything else.
fn parse(text: &str) -> Samples {
    let mut samples = Samples::new();
    let mut families: HashSet<String> = HashSet::new();
    let mut eof = false;
    for line in text.lines() {
        assert!(!eof, "text after # EOF: {line:?}");
        if line == "# EOF" {
            eof = true;
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap(), parts.next().expect("a family name"));
            let rest = parts.next().unwrap_or_default();
            match kind {
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "histogram"].contains(&rest),
                        "type {rest:?} in {line:?}"
                    );
                    families.insert(name.to_owned());
                }
                "HELP" | "UNIT" => {}
                other => panic!("unknown comment {other:?}: {line:?}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number in {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':'),
            "metric name {name:?}"
        );
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            assert!(
                labels.starts_with('{') && labels.ends_with('}'),
                "labels of {line:?}"
            );
            for pair in labels[1..labels.len() - 1].split("\",") {
                let (key, value) = pair.split_once("=\"").expect("label=\"value\"");
                assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
                assert!(!value.trim_end_matches('"').contains('"'), "{line:?}");
            }
        }
        let family = ["_total", "_bucket", "_count", "_sum", "_created"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|f| families.contains(*f)))
            .unwrap_or(name);
        assert!(
            families.contains(family),
            "sample before its # TYPE: {line:?}"
        );
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "a series twice: {line:?}"
        );
    }
    assert!(eof, "no # EOF at the end");
    samples
}

async fn scrape(addr: SocketAddr) -> Samples {
    let r = send(addr, &Request::get("/metrics")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{:?}",
        r.header("content-type")
    );
    parse(&r.text())
}

/// How far each series moved between two scrapes (a series absent before counts from 0).
fn moved(before: &Samples, after: &Samples, series: &str) -> f64 {
    after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, clippy::float_cmp, clippy::cast_precision_loss)] // one story: send, scrape, compare; counts and file sizes here are small whole numbers, exact in f64
async fn metrics_count_exactly_what_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let mut process =
        TrackerProcess::start_with_env(dir.path(), &[("TRACKER_METRICS_LISTEN", "127.0.0.1:0")]);
    let created = process.created.take().expect("first start");
    let (addr, metrics) = (process.addr, process.metrics.expect("a metrics address"));
    assert_ne!(addr, metrics);
    assert_eq!(
        listening_sockets(process.child.id()),
        2,
        "public and metrics"
    );
    let secret = created.secret.as_str();
    let before = scrape(metrics).await;

    for (i, body) in [
        r#"{"event":"deposit","eid":"m-1","value":"5"}"#,
        r#"{"event":"deposit","eid":"m-2","value":"6"}"#,
        r#"{"event":"contact","eid":"m-3"}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let r = send(addr, &Request::post("/events", Some(secret), body)).await;
        assert_eq!(assert_queued(&r), i as u64 + 1);
    }
    let r = send(
        addr,
        &Request::post(
            "/events",
            Some(secret),
            r#"{"event":"contact","eid":"m-3"}"#,
        ),
    )
    .await;
    assert_eq!(r.json()["status"], "duplicate");
    let r = send(
        addr,
        &Request::post("/events", Some(secret), r#"{"event":"sale"}"#),
    )
    .await;
    assert_error(&r, 422, "invalid_event", Some("event"));
    let r = send(
        addr,
        &Request::post(
            "/events",
            Some(secret),
            r#"{"event":"deposit","value":"1,5"}"#,
        ),
    )
    .await;
    assert_error(&r, 422, "invalid_value", Some("value"));
    let r = send(
        addr,
        &Request::post("/events", Some("trk_sk_nope"), r#"{"event":"contact"}"#),
    )
    .await;
    assert_error(&r, 401, "unauthorized", None);
    let target = format!(
        "/e?token={}&event=registration&eid=m-4",
        created.ingest_token
    );
    assert_queued(&send(addr, &Request::get(&target)).await);
    let r = send(
        addr,
        &Request::post("/clicks", Some(secret), r#"{"fbclid":"m"}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = send(
        addr,
        &Request::post("/clicks", Some(secret), r#"{"fbclid":"m"}"#),
    )
    .await;
    assert_eq!(r.json()["created"], false, "the same fbclid: no new click");
    // The public listener does not serve metrics, and unknown paths stay unknown there.
    assert_error(
        &send(addr, &Request::get("/metrics")).await,
        404,
        "not_found",
        None,
    );
    assert_error(
        &send(metrics, &Request::get("/nothing")).await,
        404,
        "not_found",
        None,
    );

    let after = scrape(metrics).await;
    let m = |series: &str| moved(&before, &after, series);
    assert_eq!(m(r#"tracker_events_total{status="queued"}"#), 4.0);
    assert_eq!(m(r#"tracker_events_total{status="duplicate"}"#), 1.0);
    assert_eq!(m(r#"tracker_events_total{status="rejected"}"#), 2.0);
    assert_eq!(m("tracker_clicks_total"), 1.0);
    let requests = |route: &str, status: u16| {
        m(&format!(
            "tracker_http_requests_total{{route=\"{route}\",status=\"{status}\"}}"
        ))
    };
    assert_eq!(requests("POST /events", 200), 4.0);
    assert_eq!(requests("POST /events", 422), 2.0);
    assert_eq!(requests("POST /events", 401), 1.0);
    assert_eq!(requests("GET /e", 200), 1.0);
    assert_eq!(requests("POST /clicks", 200), 2.0);
    assert_eq!(
        requests("other", 404),
        1.0,
        "GET /metrics on the public port"
    );
    assert_eq!(
        m(r#"tracker_http_request_duration_seconds_count{route="POST /events"}"#),
        7.0
    );
    assert_eq!(
        m(r#"tracker_http_request_duration_seconds_bucket{le="+Inf",route="POST /events"}"#),
        7.0
    );
    // Writes that reached the writer: 4 new events, 1 duplicate, 2 back-fills.
    assert_eq!(m("tracker_writer_batch_size_sum"), 7.0);
    assert!(m("tracker_writer_commit_duration_seconds_count") >= 1.0);
    assert_eq!(after["tracker_writer_queue_depth"], 0.0);
    // The new events' dedup keys were looked up in the dedup table; a new file's filter has
    // hardly any keys, so none of them read a run in vain.
    assert!(m("tracker_dedup_lookups_total") >= 1.0);
    assert_eq!(m("tracker_dedup_wrong_maybe_reads_total"), 0.0);
    let size = after["tracker_data_file_size_bytes"];
    assert!(size > 0.0, "{size}");
    assert!(
        size <= std::fs::metadata(dir.path().join("t.redb")).unwrap().len() as f64,
        "{size}"
    );
    // Opening the file read at least its header from it.
    let read = after["tracker_data_file_read_bytes_total"];
    assert!(read > 0.0, "{read}");
    crate::support::stop_cleanly(process);
}

/// The TCP sockets the process `pid` listens on.
fn listening_sockets(pid: u32) -> usize {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // State 0A is LISTEN; column 9 is the inode.
            cols.get(3) == Some(&"0A") && cols.get(9).is_some_and(|i| inodes.contains(*i))
        })
        .count()
}

#[test]
fn metrics_are_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start(dir.path());
    assert_eq!(
        process.metrics, None,
        "no metrics address in the ready line"
    );
    assert_eq!(
        listening_sockets(process.child.id()),
        1,
        "only the public listener"
    );
    crate::support::stop_cleanly(process);
}
