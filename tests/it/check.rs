//! `tracker check` through the real binary: a clean file passes, through the running server's
//! control socket and on the file itself; each kind of damage made with redb directly is found
//! and named by table and key; `--repair` rebuilds what is derivable and leaves the rest.
//! (Backups under load and every fixture are checked in `backup.rs` and `fixtures.rs`.)

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

use redb::{ReadableDatabase, ReadableTable};
use serde_json::Value;
use tracker::storage::schema::{
    CLICKS_BY_FBCLID, CLICKS_BY_TG, COST_SUMS, DEDUP, FIRST_DEPOSITS_BY_CLICK,
    FIRST_DEPOSITS_BY_TG, INBOX, META, META_INBOX_SEQ, SPACE_SETTINGS, STATS, TG_TOUCHES,
};

use crate::support::{
    FirstStart, Request, assert_queued, first_start, run_cli, send, stop_cleanly,
};

/// `tracker --config <empty> --data <data> --json check [FILE] [--repair]`, run in `cwd`.
pub fn run_check(data: &Path, file: Option<&Path>, repair: bool, cwd: &Path) -> Output {
    let mut args: Vec<&OsStr> = vec!["--json".as_ref(), "check".as_ref()];
    args.extend(file.map(Path::as_os_str));
    if repair {
        args.push("--repair".as_ref());
    }
    run_cli(cwd, data, args)
}

/// The report of a check, and whether it exited 0.
fn report(out: &Output) -> (bool, Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "check output is not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), value)
}

fn findings(report: &Value, key: &str) -> Vec<(String, String, String, bool)> {
    report[key]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["table"].as_str().unwrap().to_owned(),
                f["key"].as_str().unwrap().to_owned(),
                f["problem"].as_str().unwrap().to_owned(),
                f["repairable"].as_bool().unwrap(),
            )
        })
        .collect()
}

async fn post(addr: std::net::SocketAddr, secret: &str, path: &str, body: &str) -> Value {
    let r = send(addr, &Request::post(path, Some(secret), body)).await;
    let v = r.json();
    assert_eq!(v["ok"], true, "{path} {body}: {v}");
    v
}

/// A file with something in every table an invariant covers: a space, a link and a click
/// through it, a back-filled click with an fbclid, a binding, events of each dedup rule.
async fn fill(addr: std::net::SocketAddr, creds: &FirstStart) {
    let s = &creds.secret;
    post(
        addr,
        s,
        "/links",
        r#"{"slug":"ad-1","bot":"promo_bot","campaign_name":"spring"}"#,
    )
    .await;
    let visit = send(
        addr,
        &Request::get("/l/ad-1?fbclid=IwAR-link&utm_campaign=spring"),
    )
    .await;
    assert_eq!(visit.status, 302, "{}", visit.text());
    let uid = post(
        addr,
        s,
        "/clicks",
        r#"{"fbclid":"IwAR-check","campaign_name":"c1"}"#,
    )
    .await["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    post(
        addr,
        s,
        "/bind",
        &format!(r#"{{"uid":"{uid}","tg_id":4242}}"#),
    )
    .await;
    post(
        addr,
        s,
        "/costs",
        r#"{"day":"2026-11-24","campaign_name":"c1","adset_name":"s1","ad_name":"a1","amount":"2.50","currency":"USD"}"#,
    )
    .await;
    for body in [
        format!(r#"{{"event":"deposit","uid":"{uid}","eid":"order-1","value":"12.50"}}"#),
        format!(r#"{{"event":"contact","uid":"{uid}"}}"#),
        format!(r#"{{"event":"deposit","uid":"{uid}","value":"7"}}"#),
        r#"{"event":"registration"}"#.to_owned(),
    ] {
        assert_queued(&send(addr, &Request::post("/events", Some(s), &body)).await);
    }
}

/// A clean file, made by the server and stopped: the path to it.
async fn clean_file(dir: &Path) -> PathBuf {
    let (process, creds) = first_start(dir);
    fill(process.addr, &creds).await;
    // Through the running server: the invariants on a snapshot, no redb page check.
    let (ok, through) = report(&run_check(&dir.join("t.redb"), None, false, dir));
    assert!(ok, "{through}");
    assert_eq!(through["findings"], serde_json::json!([]), "{through}");
    assert_eq!(through["redb_integrity"], Value::Null, "{through}");
    assert!(through["rows"].as_u64().unwrap() > 10, "{through}");
    // --repair needs the server stopped, and says so.
    let refused = run_check(&dir.join("t.redb"), None, true, dir);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("stop it"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    stop_cleanly(process);
    dir.join("t.redb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_file_passes_through_the_server_and_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = clean_file(dir.path()).await;
    let (ok, offline) = report(&run_check(&data, None, false, dir.path()));
    assert!(ok, "{offline}");
    assert_eq!(offline["redb_integrity"], true, "{offline}");
    assert_eq!(offline["findings"], serde_json::json!([]));
}

/// Bytes of a page overwritten: redb panics reading some such pages instead of answering an
/// error. `tracker check` says the file is damaged, without a panic's text, and exits non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_redb_cannot_read_is_reported_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let data = clean_file(dir.path()).await;
    let mut bytes = std::fs::read(&data).unwrap();
    // A page that holds rows (the space's name is in it), not free space.
    let at = bytes
        .windows(7)
        .position(|w| w == b"default")
        .expect("the space's name in the file");
    for b in &mut bytes[at - 16..at + 16] {
        *b ^= 0x5a;
    }
    let damaged = dir.path().join("damaged.redb");
    std::fs::write(&damaged, bytes).unwrap();
    let out = run_check(&data, Some(&damaged), false, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A click's `fbclid` index entry waits in the writer's memory until a later commit writes it
/// (`storage/index/fbclid_buffer.rs`): the check through the running server must not call it missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_whose_fbclid_entry_is_still_in_memory_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    // Its commit writes the entries buffered before it, not its own.
    post(
        process.addr,
        &creds.secret,
        "/clicks",
        r#"{"fbclid":"IwAR-waiting"}"#,
    )
    .await;
    let db_path = dir.path().join("t.redb");
    let (ok, report) = report(&run_check(&db_path, None, false, dir.path()));
    assert!(ok, "{report}");
    assert_eq!(report["findings"], serde_json::json!([]), "{report}");
    stop_cleanly(process);
}

/// Damages a copy of `clean` with `damage`, and returns the checks before and after
/// `--repair`, and the repair's own report.
fn damage_and_check(
    clean: &Path,
    dir: &Path,
    name: &str,
    damage: impl FnOnce(&redb::WriteTransaction),
) -> (Value, Value, Value) {
    let path = dir.join(format!("{name}.redb"));
    std::fs::copy(clean, &path).unwrap();
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        damage(&txn);
        txn.commit().unwrap();
    }
    let (ok, before) = report(&run_check(&path, Some(&path), false, dir));
    assert!(!ok, "{name}: check must fail: {before}");
    let (_, repaired) = report(&run_check(&path, Some(&path), true, dir));
    let (_, after) = report(&run_check(&path, Some(&path), false, dir));
    (before, repaired, after)
}

// One clean file, damaged four ways in turn: each a copy, each checked, repaired, checked again.
#[allow(clippy::too_many_lines, clippy::many_single_char_names)] // four damages in turn; (t, k, p, r) are a finding's table, key, problem, repairable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_damage_is_found_named_and_repaired_where_derivable() {
    let dir = tempfile::tempdir().unwrap();
    let clean = clean_file(dir.path()).await;

    // An undecodable record: reported, not derivable, left for a person.
    let (before, _, after) = damage_and_check(&clean, dir.path(), "undecodable", |txn| {
        txn.open_table(INBOX)
            .unwrap()
            .insert((1, 3), [0xff_u8, 1, 2].as_slice())
            .unwrap();
    });
    let f = findings(&before, "findings");
    assert!(
        f.iter().any(|(t, k, p, r)| t == "inbox"
            && k == "space 1, inbox_id 3"
            && p.contains("data file is damaged: event record")
            && !r),
        "{before}"
    );
    let left = findings(&after, "findings");
    assert!(
        left.iter()
            .any(|(t, k, _, _)| t == "inbox" && k == "space 1, inbox_id 3"),
        "--repair must not touch a record it cannot derive: {after}"
    );
    // The stats still count the event that no longer decodes: not rebuilt without it.
    assert!(
        left.iter().any(|(t, _, _, r)| t == "stats" && !r),
        "{after}"
    );

    // An index entry without its row.
    let (before, repaired, after) = damage_and_check(&clean, dir.path(), "orphan", |txn| {
        txn.open_table(CLICKS_BY_TG)
            .unwrap()
            .insert((1, 777, "no-such-click"), ())
            .unwrap();
    });
    let want = (
        "clicks_by_tg".to_owned(),
        "space 1, tg_id 777, uid no-such-click".to_owned(),
        "names a click that does not exist".to_owned(),
        true,
    );
    assert_eq!(
        findings(&before, "findings"),
        vec![want.clone()],
        "{before}"
    );
    assert_eq!(findings(&repaired, "repaired"), vec![want], "{repaired}");
    assert_eq!(after["findings"], serde_json::json!([]), "{after}");

    // Rows without their index entries: the click's fbclid entry, the eid event's dedup entry.
    let (before, _, after) = damage_and_check(&clean, dir.path(), "unindexed", |txn| {
        let mut by_fbclid = txn.open_table(CLICKS_BY_FBCLID).unwrap();
        let key = (1, tracker::domain::click::fbclid_key("IwAR-check"));
        assert!(by_fbclid.remove(key).unwrap().is_some());
        let mut dedup = txn.open_table(DEDUP).unwrap();
        let first = dedup
            .iter()
            .unwrap()
            .map(Result::unwrap)
            .find(|(_, v)| v.value().0 == 1)
            .map(|(k, _)| k.value())
            .expect("the first event's dedup entry");
        dedup.remove(first).unwrap();
    });
    let f = findings(&before, "findings");
    assert!(
        f.iter().any(|(t, k, p, r)| t == "clicks_by_fbclid"
            && k == "space 1, fbclid IwAR-check"
            && p.contains("missing from the fbclid index")
            && *r),
        "{before}"
    );
    assert!(
        f.iter().any(|(t, _, p, r)| t == "dedup"
            && p.contains("space 1, inbox_id 1 has no dedup entry")
            && *r),
        "{before}"
    );
    assert_eq!(after["findings"], serde_json::json!([]), "{after}");

    // Wrong counters: inbox_seq behind the inbox, a stats row that counts too many clicks (a
    // row of a campaign's drill-down: by its links).
    let (before, _, after) = damage_and_check(&clean, dir.path(), "counters", |txn| {
        txn.open_table(META)
            .unwrap()
            .insert(META_INBOX_SEQ, 1)
            .unwrap();
        let mut stats = txn.open_table(STATS).unwrap();
        let (key, mut record) = {
            let (k, v) = stats
                .iter()
                .unwrap()
                .map(Result::unwrap)
                .find(|(k, _)| k.value().1 == 5)
                .expect("a row of a campaign's links");
            let record: tracker::storage::records::StatsRecord =
                tracker::storage::records::decode(v.value()).unwrap();
            let (s, d, g, h) = k.value();
            ((s, d, g.to_owned(), h), record)
        };
        record.clicks += 99;
        stats
            .insert(
                (key.0, key.1, key.2.as_str(), key.3),
                tracker::storage::records::encode(&record).as_slice(),
            )
            .unwrap();
        // A campaign's day that sums to more than its cost.
        let mut sums = txn.open_table(COST_SUMS).unwrap();
        let day = sums
            .iter()
            .unwrap()
            .map(Result::unwrap)
            .find(|(k, _)| k.value().1 == 0)
            .map(|(k, _)| k.value().2)
            .expect("a campaign's day sum");
        let wrong = tracker::storage::records::CostSumRecord {
            sums: vec![("USD".into(), "3.50".into())],
        };
        sums.insert(
            (1, 0, day, "c1"),
            tracker::storage::records::encode(&wrong).as_slice(),
        )
        .unwrap();
    });
    let f = findings(&before, "findings");
    assert!(
        f.iter().any(|(t, k, p, r)| t == "meta"
            && k == "inbox_seq"
            && p.contains("inbox_seq is 1 but inbox_id 4 exists")
            && *r),
        "{before}"
    );
    assert!(
        f.iter().any(|(t, k, p, r)| t == "stats"
            && k.contains("dimension 5")
            && p.contains("but the file counts")
            && *r),
        "{before}"
    );
    assert!(
        f.iter().any(|(t, k, p, r)| t == "cost_sums"
            && k.contains(r#"level 0x0, period 20781, campaign "c1""#)
            && p.contains("holds 3.50 USD but the costs add up to 2.50 USD")
            && *r),
        "{before}"
    );
    assert_eq!(after["findings"], serde_json::json!([]), "{after}");
    // The repaired file serves, and its next event does not reuse an id.
    let repaired_dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("counters.redb"),
        repaired_dir.path().join("t.redb"),
    )
    .unwrap();
    let process = crate::support::TrackerProcess::start(repaired_dir.path());
    stop_cleanly(process);
    let db = redb::Database::open(repaired_dir.path().join("t.redb")).unwrap();
    let seq = db
        .begin_read()
        .unwrap()
        .open_table(META)
        .unwrap()
        .get(META_INBOX_SEQ)
        .unwrap()
        .unwrap()
        .value();
    assert_eq!(seq, 4);
}

/// A Telegram user's first and last bound click are derived from the bindings: a missing or a
/// stray entry is found and rebuilt. Settings of a space that does not exist are not derivable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_touches_are_rebuilt_and_foreign_settings_reported() {
    let dir = tempfile::tempdir().unwrap();
    let clean = clean_file(dir.path()).await;
    let (before, repaired, after) = damage_and_check(&clean, dir.path(), "touches", |txn| {
        let mut touches = txn.open_table(TG_TOUCHES).unwrap();
        assert!(touches.remove((1, 4242)).unwrap().is_some());
        touches
            .insert((1, 99), [1_u8, 0, 0, 0, 0].as_slice())
            .unwrap();
    });
    let f = findings(&before, "findings");
    assert_eq!(f.len(), 2, "{before}");
    assert!(
        f.iter().any(|(t, k, p, r)| t == "tg_touches"
            && k == "space 1, tg_id 4242"
            && p.starts_with("is missing")
            && *r),
        "{before}"
    );
    assert!(
        f.iter().any(|(t, k, p, r)| t == "tg_touches"
            && k == "space 1, tg_id 99"
            && p.contains("no bound click")
            && *r),
        "{before}"
    );
    assert_eq!(findings(&repaired, "repaired").len(), 2, "{repaired}");
    assert_eq!(after["findings"], serde_json::json!([]), "{after}");

    let (before, _, after) = damage_and_check(&clean, dir.path(), "settings", |txn| {
        let settings = tracker::storage::records::SpaceSettingsRecord::default();
        txn.open_table(SPACE_SETTINGS)
            .unwrap()
            .insert(9, tracker::storage::records::encode(&settings).as_slice())
            .unwrap();
    });
    let want = vec![(
        "space_settings".to_owned(),
        "space 9".to_owned(),
        "settings of a space that does not exist".to_owned(),
        false,
    )];
    assert_eq!(findings(&before, "findings"), want, "{before}");
    assert_eq!(findings(&after, "findings"), want, "{after}");
}

/// A file whose deposits take every way the first-deposit rule knows, then stopped: a click's
/// deposit before its binding, a user's deposit by Telegram id alone, a deposit naming one
/// user through a click later bound to another, an unmatched deposit. Answers its path.
async fn deposits_file(dir: &Path) -> PathBuf {
    let (process, creds) = first_start(dir);
    let (addr, s) = (process.addr, creds.secret.as_str());
    fill(addr, &creds).await;
    let click = async |campaign: &str| {
        post(
            addr,
            s,
            "/clicks",
            &format!(r#"{{"campaign_name":"{campaign}"}}"#),
        )
        .await["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let deposit = async |body: String| {
        let v = post(addr, s, "/events", &body).await;
        assert_eq!(v["status"], "queued", "{v}");
    };
    let bind = async |uid: &str, tg: u64| {
        post(
            addr,
            s,
            "/bind",
            &format!(r#"{{"uid":"{uid}","tg_id":{tg}}}"#),
        )
        .await;
    };
    let (c2, c3) = (click("c2").await, click("c3").await);
    deposit(format!(r#"{{"event":"deposit","uid":"{c2}","value":"5"}}"#)).await;
    deposit(r#"{"event":"deposit","tg_id":777,"value":"6"}"#.to_owned()).await;
    bind(&c2, 777).await;
    deposit(format!(r#"{{"event":"deposit","uid":"{c2}","value":"7"}}"#)).await;
    deposit(r#"{"event":"deposit","uid":"no-such-click","value":"8"}"#.to_owned()).await;
    deposit(format!(
        r#"{{"event":"deposit","uid":"{c3}","tg_id":888,"value":"9"}}"#
    ))
    .await;
    bind(&c3, 999).await;
    deposit(format!(
        r#"{{"event":"deposit","uid":"{c3}","value":"10"}}"#
    ))
    .await;
    let (ok, through) = report(&run_check(&dir.join("t.redb"), None, false, dir));
    assert!(ok, "{through}");
    stop_cleanly(process);
    let data = dir.join("t.redb");
    let (ok, offline) = report(&run_check(&data, None, false, dir));
    assert!(ok, "{offline}");
    assert_eq!(offline["findings"], serde_json::json!([]), "{offline}");
    data
}

/// The uid of the click whose first deposit is `inbox_id`.
fn click_of_first_deposit(txn: &redb::WriteTransaction, inbox_id: u64) -> String {
    txn.open_table(FIRST_DEPOSITS_BY_CLICK)
        .unwrap()
        .iter()
        .unwrap()
        .map(Result::unwrap)
        .find(|(_, v)| v.value() == inbox_id)
        .map(|(k, _)| k.value().1.to_owned())
        .expect("a click's first deposit")
}

/// The first-deposit tables against the deposits: an intact file passes (above), and a
/// missing, a wrong and an extra entry, and a deposit marked first that is not, are each
/// reported by table and key with a sentence, and the check fails. Nothing is repaired.
// One file, damaged four ways in turn: each a copy, each checked.
#[allow(clippy::too_many_lines, clippy::many_single_char_names)] // (t, k, p, r): a finding's table, key, problem, repairable
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_deposit_entries_are_checked_against_the_deposits() {
    let dir = tempfile::tempdir().unwrap();
    let clean = deposits_file(dir.path()).await;
    let has = |report: &Value, table: &str, key: &str, problem: &str| {
        findings(report, "findings")
            .iter()
            .any(|(t, k, p, r)| t == table && k == key && p.contains(problem) && !r)
    };
    let found = |report: &Value, table: &str, key: &str, problem: &str| {
        assert!(
            has(report, table, key, problem),
            "{table}, {key}: {problem}: {report}"
        );
    };
    let uid_cell = std::cell::RefCell::new(String::new());

    // Missing: deposit 1's click entry and its user's.
    let (before, _, after) = damage_and_check(&clean, dir.path(), "fd-missing", |txn| {
        let uid = click_of_first_deposit(txn, 1);
        txn.open_table(FIRST_DEPOSITS_BY_CLICK)
            .unwrap()
            .remove((1, uid.as_str()))
            .unwrap()
            .unwrap();
        txn.open_table(FIRST_DEPOSITS_BY_TG)
            .unwrap()
            .remove((1, 4242))
            .unwrap()
            .unwrap();
        *uid_cell.borrow_mut() = uid;
    });
    let uid = uid_cell.borrow().clone();
    let key = format!("space 1, uid {uid}");
    found(
        &before,
        "first_deposits_by_click",
        &key,
        &format!("is missing, but deposit 1 went through click {uid}"),
    );
    found(
        &before,
        "first_deposits_by_tg",
        "space 1, tg_id 4242",
        "is missing, but deposit 1 went through a click bound to the user",
    );
    assert!(
        has(&after, "first_deposits_by_click", &key, "is missing"),
        "not repaired: {after}"
    );

    // Wrong: the click's entry a later deposit, the user's entry one not marked first, and user
    // 777's entry (deposit 6, which named the user) an earlier deposit of another user.
    let (before, _, _) = damage_and_check(&clean, dir.path(), "fd-wrong", |txn| {
        let mut by_click = txn.open_table(FIRST_DEPOSITS_BY_CLICK).unwrap();
        by_click.insert((1, uid.as_str()), 3).unwrap();
        let mut by_tg = txn.open_table(FIRST_DEPOSITS_BY_TG).unwrap();
        by_tg.insert((1, 4242), 3).unwrap();
        by_tg.insert((1, 777), 1).unwrap();
    });
    found(
        &before,
        "first_deposits_by_click",
        &key,
        "names inbox_id 3, but deposit 1 through the click is earlier",
    );
    found(
        &before,
        "first_deposits_by_tg",
        "space 1, tg_id 4242",
        "names inbox_id 3, a deposit not marked first",
    );
    found(
        &before,
        "first_deposits_by_tg",
        "space 1, tg_id 777",
        "names inbox_id 1, but deposit 6 of the user is marked first",
    );

    // Extra: entries for a user and a click that made no such deposit.
    let (before, _, _) = damage_and_check(&clean, dir.path(), "fd-extra", |txn| {
        txn.open_table(FIRST_DEPOSITS_BY_TG)
            .unwrap()
            .insert((1, 99), 1)
            .unwrap();
        txn.open_table(FIRST_DEPOSITS_BY_CLICK)
            .unwrap()
            .insert((1, "no-such-click"), 2)
            .unwrap();
    });
    found(
        &before,
        "first_deposits_by_tg",
        "space 1, tg_id 99",
        "names inbox_id 1, a deposit neither naming this user nor through a click bound",
    );
    found(
        &before,
        "first_deposits_by_click",
        "space 1, uid no-such-click",
        "names inbox_id 2, which is not a deposit through this click",
    );

    // A deposit marked first that its click's entry says is not.
    let (before, _, _) = damage_and_check(&clean, dir.path(), "fd-mark", |txn| {
        let mut inbox = txn.open_table(INBOX).unwrap();
        let mut event: tracker::storage::records::EventRecord =
            tracker::storage::records::decode(inbox.get((1, 3)).unwrap().unwrap().value()).unwrap();
        assert!(!event.first_deposit);
        event.first_deposit = true;
        inbox
            .insert((1, 3), tracker::storage::records::encode(&event).as_slice())
            .unwrap();
    });
    found(
        &before,
        "first_deposits_by_click",
        &key,
        "names inbox_id 1, but deposit 3 is marked first and names no Telegram id",
    );
}
