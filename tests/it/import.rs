//! `tracker import` (`docs/integration.md#moving-a-history-from-another-tracker`): NDJSON and
//! CSV, on the data file and through a running server; a second import stores nothing; a bad
//! line is reported with its number and the rest are imported.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{
    Connection, Request, TrackerProcess, assert_succeeded, first_start, run_cli, stop_cleanly,
};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `tracker --json import default FILE` on `data`: the summary and whether it succeeded.
fn import(dir: &Path, data: &Path, file: &Path, extra: &[&str]) -> (Value, bool) {
    let mut args = vec!["--json", "import", "default", file.to_str().unwrap()];
    args.extend(extra);
    let out = run_cli(dir, data, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no summary ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (summary, out.status.success())
}

/// The counts of a summary: `(events, queued, duplicates, refused)`.
fn counts(summary: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| {
        summary[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {summary}"))
    };
    (n("events"), n("queued"), n("duplicates"), n("refused"))
}

/// A data file with its `default` space, and no server running.
fn stopped_server(dir: &Path) -> std::path::PathBuf {
    let process = TrackerProcess::start(dir);
    stop_cleanly(process);
    dir.join("t.redb")
}

/// Every event of the default space, read through `tracker export` on the file.
fn exported(dir: &Path, data: &Path) -> Vec<Value> {
    let out = run_cli(dir, data, ["export", "default"]);
    assert_succeeded(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn an_ndjson_file_is_imported_once_however_often_it_is_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let at = now_ms() - 3_600_000;
    let file = dir.path().join("history.ndjson");
    let mut lines: Vec<String> = (0..2500)
        .map(|n| {
            json!({"event": "deposit", "value": format!("{n}.50"), "occurred_at_ms": at + n})
                .to_string()
        })
        .collect();
    lines.push(String::new());
    lines.push(json!({"event": "registration", "uid": "u-1", "eid": "own-1"}).to_string());
    lines.push(json!({"event": "contact"}).to_string());
    std::fs::write(&file, lines.join("\n")).unwrap();

    let (first, ok) = import(dir.path(), &data, &file, &[]);
    assert!(ok, "{first}");
    assert_eq!(counts(&first), (2502, 2502, 0, 0), "{first}");
    let events = exported(dir.path(), &data);
    assert_eq!(events.len(), 2502);
    assert_eq!(events[7]["value"], "7.50");
    assert_eq!(events[7]["occurred_at_ms"], at + 7);
    assert!(
        events[7]["eid"].as_str().unwrap().starts_with("import-"),
        "{}",
        events[7]
    );
    assert_eq!(events[2500]["eid"], "own-1");

    // Again: nothing new, the line without anything to tell it apart included.
    let (again, ok) = import(dir.path(), &data, &file, &[]);
    assert!(ok, "{again}");
    assert_eq!(counts(&again), (2502, 0, 2502, 0), "{again}");
    assert_eq!(exported(dir.path(), &data).len(), 2502);
}

#[test]
fn a_csv_export_imports_and_a_bad_line_is_named_while_the_rest_go_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let at = now_ms() - 60_000;
    // The columns of `tracker export --format csv`, a formula-like eid as the export writes it,
    // and a bad value on line 3.
    let csv = format!(
        "inbox_id,event,uid,value,currency,eid,occurred_at_ms,received_at_ms,source,matched,link_slug,fbclid,campaign_name,clicked_at_ms,tg_id,fbc,attributed_by,first_deposit\n\
         1,deposit,u-1,-3.50,USD,'=tx-1,{at},{at},post,false,,,,,,,,\n\
         2,deposit,u-1,\"12,5\",USD,tx-2,{at},{at},post,false,,,,,,,,\n\
         3,contact,,,USD,,{at},{at},get,false,,,,,,,,\n"
    );
    let file = dir.path().join("history.csv");
    std::fs::write(&file, csv).unwrap();
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok, "a refused line fails the command: {summary}");
    assert_eq!(counts(&summary), (3, 2, 0, 1), "{summary}");
    let refused = &summary["refusals"][0];
    assert_eq!(refused["line"], 3, "{summary}");
    assert_eq!(refused["status"], "invalid_value");
    assert_eq!(refused["field"], "value");
    let events = exported(dir.path(), &data);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["eid"], "=tx-1");
    assert_eq!(events[0]["value"], "-3.50");
    assert_eq!(events[1]["event"], "contact");

    // The tracker's own CSV export of them imports as nothing new, and in text the summary
    // names the counts.
    let export = dir.path().join("export.csv");
    let out = run_cli(
        dir.path(),
        &data,
        [
            "export",
            "default",
            "--format",
            "csv",
            "--out",
            export.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let out = run_cli(
        dir.path(),
        &data,
        ["import", "default", export.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("2 events read") && text.contains("0 queued, 2 duplicates, 0 refused"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_goes_through_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let file = dir.path().join("h.ndjson");
    std::fs::write(
        &file,
        "{\"event\":\"contact\",\"uid\":\"u-9\"}\nnot json\n{\"event\":\"subscribed\",\"uid\":\"u-9\",\"eid\":\"x\"}\n",
    )
    .unwrap();
    let data = dir.path().join("t.redb");
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok);
    assert_eq!(counts(&summary), (3, 2, 0, 1), "{summary}");
    assert_eq!(summary["refusals"][0]["line"], 2);
    assert_eq!(summary["refusals"][0]["status"], "invalid_json");
    // The server has them: its feed shows both.
    let mut conn = Connection::open(process.addr).await.unwrap();
    let r = conn
        .send(&Request::get("/events").header("Authorization", format!("Bearer {}", creds.secret)))
        .await
        .unwrap();
    assert_eq!(
        r.json()["events"].as_array().unwrap().len(),
        2,
        "{}",
        r.text()
    );
    stop_cleanly(process);
}

/// The file is read ahead of the batches being recorded: a line that is not an event, read
/// while an earlier batch is still being recorded, is listed after that batch's refusals and
/// before the next one's, and the events keep the file's order in the feed.
#[test]
fn refusals_are_listed_in_the_file_order_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let at = now_ms() - 3_600_000;
    let file = dir.path().join("history.ndjson");
    let lines: Vec<String> = (1..=2600_u64)
        .map(|line| match line {
            10 | 2600 => json!({"event": "deposit", "value": "x"}).to_string(),
            1500 => "not json".to_owned(),
            _ => json!({"event": "contact", "uid": format!("u-{line}"), "occurred_at_ms": at})
                .to_string(),
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok, "{summary}");
    assert_eq!(counts(&summary), (2600, 2597, 0, 3), "{summary}");
    let listed: Vec<&Value> = summary["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["line"])
        .collect();
    assert_eq!(listed, [10, 1500, 2600], "{summary}");
    let uids: Vec<String> = exported(dir.path(), &data)
        .iter()
        .map(|e| e["uid"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (1..=2600_u64)
        .filter(|l| ![10, 1500, 2600].contains(l))
        .map(|l| format!("u-{l}"))
        .collect();
    assert_eq!(uids, expected);
}

/// A byte order mark before the first line (as Windows tools write) is not part of its event,
/// and a line longer than a batch (here 3 MiB, as a file without line ends would be) is refused
/// by its number, read past without being held whole, while the lines around it go in.
#[test]
fn a_byte_order_mark_is_skipped_and_a_line_larger_than_a_batch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let at = now_ms() - 3_600_000;
    let event = |uid: &str| json!({"event": "contact", "uid": uid, "occurred_at_ms": at});
    let long = format!(
        "{{\"event\":\"contact\",\"uid\":\"{}\"}}",
        "x".repeat(3 << 20)
    );
    let text = format!(
        "\u{feff}{}\n{long}\n{}\n",
        event("after-the-mark"),
        event("after-the-long-line")
    );
    let file = dir.path().join("history.ndjson");
    std::fs::write(&file, text).unwrap();
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok, "{summary}");
    assert_eq!(counts(&summary), (3, 2, 0, 1), "{summary}");
    let refused = &summary["refusals"][0];
    assert_eq!(refused["line"], 2, "{summary}");
    assert_eq!(refused["status"], "payload_too_large", "{summary}");
    let uids: Vec<Value> = exported(dir.path(), &data)
        .iter()
        .map(|e| e["uid"].clone())
        .collect();
    assert_eq!(
        uids,
        [json!("after-the-mark"), json!("after-the-long-line")]
    );
}

/// A CSV column named twice in the header: the header is refused once, naming the column, and
/// no row is imported (each would be refused for it).
#[test]
fn a_csv_header_naming_a_column_twice_is_refused_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let file = dir.path().join("history.csv");
    let rows = "contact,u-0,\ncontact,u-1,\ncontact,u-2,\n";
    std::fs::write(&file, format!("event,uid,uid\n{rows}")).unwrap();
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok, "{summary}");
    assert_eq!(summary["refused"], 1, "{summary}");
    let refused = &summary["refusals"][0];
    assert_eq!(refused["line"], 1, "{summary}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("duplicate field `uid`")),
        "{summary}"
    );
    assert!(exported(dir.path(), &data).is_empty());
}

/// A CSV row larger than a batch (an unterminated quoted field running on for 3 MiB, which the
/// `csv` crate would hold whole, with the rest of the file) is refused by its line, as a long
/// NDJSON line is, and ends the file; the rows before it go in.
#[test]
fn a_csv_row_larger_than_a_batch_is_refused_without_being_held_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let file = dir.path().join("history.csv");
    let unterminated = format!("contact,\"{}\ncontact,u-2,\n", "x".repeat(3 << 20));
    std::fs::write(
        &file,
        format!("event,uid,eid\ncontact,u-1,\n{unterminated}"),
    )
    .unwrap();
    let (summary, ok) = import(dir.path(), &data, &file, &[]);
    assert!(!ok, "{summary}");
    assert_eq!(summary["refused"], 1, "{summary}");
    let refused = &summary["refusals"][0];
    assert_eq!(refused["line"], 3, "{summary}");
    assert_eq!(refused["status"], "payload_too_large", "{summary}");
    let uids: Vec<Value> = exported(dir.path(), &data)
        .iter()
        .map(|e| e["uid"].clone())
        .collect();
    assert_eq!(uids, [json!("u-1")]);
}

/// All deliveries of destination `hook` of the default space, whatever their state.
fn hook_deliveries(dir: &Path, data: &Path) -> u64 {
    let out = run_cli(dir, data, ["--json", "destination", "list", "default"]);
    assert_succeeded(&out);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hook = list
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "hook")
        .unwrap_or_else(|| panic!("no hook in {list}"));
    hook["deliveries"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum()
}

/// Moving from another tracker must not send months-old conversions to the ad platforms again:
/// an import gives its events no deliveries and says which destinations it held them back
/// from; `--send` sends them as new events are.
#[test]
fn an_import_sends_nothing_unless_told_to_and_says_what_it_did_not_send() {
    let dir = tempfile::tempdir().unwrap();
    let data = stopped_server(dir.path());
    let hook = [
        "destination",
        "create",
        "default",
        "hook",
        "--kind",
        "webhook",
        "--url",
        "https://hooks.example.com/in",
    ];
    assert_succeeded(&run_cli(dir.path(), &data, hook));
    let at = now_ms() - 3_600_000;
    let write = |name: &str, eids: [&str; 2]| {
        let file = dir.path().join(name);
        let lines: Vec<String> = eids
            .iter()
            .map(|eid| {
                json!({"event": "deposit", "value": "10", "eid": eid, "occurred_at_ms": at})
                    .to_string()
            })
            .collect();
        std::fs::write(&file, lines.join("\n")).unwrap();
        file
    };
    let history = write("history.ndjson", ["old-1", "old-2"]);
    let (summary, ok) = import(dir.path(), &data, &history, &[]);
    assert!(ok, "{summary}");
    assert_eq!(counts(&summary), (2, 2, 0, 0));
    assert_eq!(
        (&summary["sent"], &summary["not_sent_to"]),
        (&json!(false), &json!(["hook"]))
    );
    assert_eq!(hook_deliveries(dir.path(), &data), 0, "nothing sent");
    // In words: what was not sent, and how an import is sent.
    let again = write("again.ndjson", ["old-3", "old-4"]);
    let out = run_cli(
        dir.path(),
        &data,
        ["import", "default", again.to_str().unwrap()],
    );
    assert_succeeded(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "not sent: the 2 queued events went to none of the space's destinations (hook)"
        ) && text.contains("run it with --send"),
        "{text}"
    );
    let fresh = write("fresh.ndjson", ["new-1", "new-2"]);
    let (summary, ok) = import(dir.path(), &data, &fresh, &["--send"]);
    assert!(ok, "{summary}");
    assert_eq!(
        (&summary["sent"], &summary["not_sent_to"]),
        (&json!(true), &json!([]))
    );
    assert_eq!(hook_deliveries(dir.path(), &data), 2, "sent when told to");
}
