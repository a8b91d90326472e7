//! The real `tracker` binary across restarts (CONTRACT section 3): what was acknowledged is on
//! disk after a clean SIGTERM stop and after a SIGKILL in the middle of a load, and dedup and
//! bindings carry on from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Notify;

use crate::support::{
    Connection, Request, TestServer, TrackerProcess, assert_duplicate_of, assert_queued,
    dedup_entries_derived, event_answer, fbclid_entries_derived, first_start, send, stop_cleanly,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_dedup_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    let post = |body: &'static str| {
        let secret = creds.secret.clone();
        async move { send(addr, &Request::post("/events", Some(&secret), body)).await }
    };
    let get_target = |query: &str| format!("/e?token={}&{query}", creds.ingest_token);
    let bodies = [
        r#"{"event":"deposit","eid":"restart-1","value":"12.10"}"#,
        r#"{"event":"contact","uid":"restart-u"}"#,
        r#"{"event":"deposit","uid":"restart-u","value":"7.00","currency":"usdt"}"#,
    ];
    let mut ids = Vec::new();
    for body in bodies {
        ids.push(assert_queued(&post(body).await));
    }
    let from_get = assert_queued(
        &send(
            addr,
            &Request::get(&get_target("event=registration&uid=restart-u")),
        )
        .await,
    );
    stop_cleanly(process);

    let process = TrackerProcess::start(dir.path());
    assert!(
        process.created.is_none(),
        "credentials are printed on the first start only"
    );
    let addr = process.addr;
    let post = |body: &'static str| {
        let secret = creds.secret.clone();
        async move { send(addr, &Request::post("/events", Some(&secret), body)).await }
    };
    for (body, id) in bodies.into_iter().zip(&ids) {
        assert_duplicate_of(&post(body).await, *id);
    }
    // The same deposit spelled differently, and the GET one re-sent over POST.
    assert_duplicate_of(
        &post(r#"{"event":"deposit","uid":"restart-u","value":7,"currency":"USDT"}"#).await,
        ids[2],
    );
    assert_duplicate_of(
        &post(r#"{"event":"registration","uid":"restart-u"}"#).await,
        from_get,
    );
    let next = assert_queued(&post(r#"{"event":"deposit","eid":"restart-2"}"#).await);
    assert!(
        next > from_get,
        "inbox ids continue after a restart: {next} <= {from_get}"
    );
    stop_cleanly(process);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_and_bindings_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let secret = creds.secret.clone();
    let addr = process.addr;
    let post = |path: &'static str, body: String| {
        let secret = secret.clone();
        async move {
            send(addr, &Request::post(path, Some(&secret), &body))
                .await
                .json()
        }
    };
    let clicked = post(
        "/clicks",
        r#"{"fbclid":"IwAR-restart","link_slug":"l"}"#.into(),
    )
    .await;
    let bound_uid = clicked["uid"].as_str().expect("uid").to_owned();
    let unbound = post("/clicks", r#"{"link_slug":"l"}"#.into()).await;
    let unbound_uid = unbound["uid"].as_str().expect("uid").to_owned();
    let bound = post("/bind", format!(r#"{{"uid":"{bound_uid}","tg_id":111}}"#)).await;
    assert_eq!(bound, json!({"ok": true, "matched": true, "tg_id": 111}));
    stop_cleanly(process);

    let process = TrackerProcess::start(dir.path());
    let addr = process.addr;
    let post = |path: &'static str, body: String| {
        let secret = secret.clone();
        async move {
            send(addr, &Request::post(path, Some(&secret), &body))
                .await
                .json()
        }
    };
    let again = post("/clicks", r#"{"fbclid":"IwAR-restart"}"#.into()).await;
    assert_eq!(
        (again["uid"].as_str(), again["created"].as_bool()),
        (Some(bound_uid.as_str()), Some(false)),
        "{again}"
    );
    let conflict = post("/bind", format!(r#"{{"uid":"{bound_uid}","tg_id":222}}"#)).await;
    assert_eq!(
        conflict,
        json!({"ok": true, "matched": true, "tg_id": 111, "conflict": true})
    );
    let target = format!(
        "/bind?token={}&uid={unbound_uid}&tg=333",
        creds.ingest_token
    );
    let first_bind = send(addr, &Request::get(&target)).await.json();
    assert_eq!(
        first_bind,
        json!({"ok": true, "matched": true, "tg_id": 333})
    );
    for uid in [&bound_uid, &unbound_uid] {
        let event = post("/events", format!(r#"{{"event":"contact","uid":"{uid}"}}"#)).await;
        assert_eq!(
            (event["status"].as_str(), event["matched"].as_bool()),
            (Some("queued"), Some(true)),
            "{event}"
        );
    }
    stop_cleanly(process);
}

/// How many concurrent senders load the tracker, and the bounds of the load.
const SENDERS: usize = 32;
const MAX_REQUESTS: usize = 6000;
/// The kill comes right after this many acknowledgements (the newest are the ones a tracker
/// that answered before its commit would lose), or after `KILL_AFTER` at the latest.
const KILL_AFTER_ACKS: usize = 2500;
const KILL_AFTER: Duration = Duration::from_secs(2);
const LOAD_DEADLINE: Duration = Duration::from_secs(4);

/// What the senders share: request and acknowledgement counts, and the signal to kill.
#[derive(Default)]
struct Load {
    sent: AtomicUsize,
    acked: AtomicUsize,
    kill_now: Notify,
}

/// Drives unique events until the connection fails (the process was killed), the request budget
/// is spent, or the deadline passes. Returns each acknowledged `(eid, inbox_id)`.
async fn send_until_killed(
    addr: std::net::SocketAddr,
    secret: String,
    sender: usize,
    load: Arc<Load>,
) -> Vec<(String, u64)> {
    let mut acks = Vec::new();
    let Ok(mut conn) = Connection::open(addr).await else {
        return acks;
    };
    let started = Instant::now();
    for n in 0.. {
        if load.sent.fetch_add(1, Ordering::SeqCst) >= MAX_REQUESTS
            || started.elapsed() > LOAD_DEADLINE
        {
            break;
        }
        let eid = format!("crash-{sender}-{n}");
        let body = format!(r#"{{"event":"deposit","eid":"{eid}","value":"{n}.{sender:02}"}}"#);
        let Ok(response) = conn
            .send(&Request::post("/events", Some(&secret), &body))
            .await
        else {
            break;
        };
        // Only a complete 200 `queued` is an acknowledgement the tracker must keep.
        let answer = event_answer(&response);
        assert!(!answer.duplicate, "{eid} is new: {answer:?}");
        acks.push((eid, answer.inbox_id));
        if load.acked.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AFTER_ACKS {
            load.kill_now.notify_one();
        }
    }
    acks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_a_sigkill_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    let load = Arc::new(Load::default());
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            tokio::spawn(send_until_killed(
                addr,
                creds.secret.clone(),
                sender,
                load.clone(),
            ))
        })
        .collect();
    let _ = tokio::time::timeout(KILL_AFTER, load.kill_now.notified()).await;
    let in_flight = load.sent.load(Ordering::SeqCst) < MAX_REQUESTS;
    process.kill_hard();
    let mut acks = Vec::new();
    for s in senders {
        acks.extend(s.await.expect("sender task"));
    }
    assert!(
        in_flight,
        "the load had ended before the kill; raise MAX_REQUESTS"
    );
    assert!(
        acks.len() >= 50,
        "too few acknowledgements to prove anything: {}",
        acks.len()
    );

    let process = TrackerProcess::start(dir.path());
    let addr = process.addr;
    // The newest dedup entries were only in the writer's memory at the kill; the restart derived
    // them again from the inbox (storage/dedup_buffer.rs). The checks below need every one.
    let log = process.log_when(|log| dedup_entries_derived(log).is_some());
    let derived = dedup_entries_derived(&log);
    assert!(derived.is_some_and(|n| n > 0), "{derived:?}\n{log}");
    let checked = Arc::new(AtomicUsize::new(0));
    let acks = Arc::new(acks);
    let checkers: Vec<_> = (0..SENDERS)
        .map(|part| {
            let (acks, checked, secret) = (acks.clone(), checked.clone(), creds.secret.clone());
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await.expect("connect after restart");
                for (eid, inbox_id) in acks.iter().skip(part).step_by(SENDERS) {
                    // The value differs from the first send: with an eid it must not matter.
                    let body = format!(r#"{{"event":"deposit","eid":"{eid}"}}"#);
                    let r = conn
                        .send(&Request::post("/events", Some(&secret), &body))
                        .await
                        .expect("response after restart");
                    assert_duplicate_of(&r, *inbox_id);
                    checked.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for c in checkers {
        c.await
            .expect("an acknowledged event was lost or changed its inbox_id");
    }
    let checked = checked.load(Ordering::SeqCst);
    assert_eq!(checked, acks.len());
    let max_acked = acks.iter().map(|(_, id)| *id).max().unwrap_or(0);
    let next = assert_queued(
        &send(
            addr,
            &Request::post("/events", Some(&creds.secret), r#"{"event":"contact"}"#),
        )
        .await,
    );
    assert!(
        next > max_acked,
        "a new event after the crash reuses no inbox id"
    );
    println!("crash test: {checked} acknowledged events re-sent after SIGKILL, all duplicates");
    stop_cleanly(process);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_right_after_acknowledgements_loses_no_click_or_binding() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    let secret = creds.secret.clone();
    let mut bound = Vec::new();
    for i in 0..20_u64 {
        let r = send(
            addr,
            &Request::post(
                "/clicks",
                Some(&secret),
                &format!(r#"{{"fbclid":"fb-kill-{i}"}}"#),
            ),
        )
        .await
        .json();
        let uid = r["uid"].as_str().expect("uid").to_owned();
        let r = send(
            addr,
            &Request::post(
                "/bind",
                Some(&secret),
                &format!(r#"{{"uid":"{uid}","tg_id":{}}}"#, 500 + i),
            ),
        )
        .await
        .json();
        assert_eq!(r["tg_id"].as_u64(), Some(500 + i), "{r}");
        bound.push(uid);
    }
    process.kill_hard();
    let process = TrackerProcess::start(dir.path());
    let addr = process.addr;
    for (i, uid) in (0_u64..).zip(&bound) {
        let r = send(
            addr,
            &Request::post(
                "/clicks",
                Some(&secret),
                &format!(r#"{{"fbclid":"fb-kill-{i}"}}"#),
            ),
        )
        .await
        .json();
        assert_eq!(r["uid"].as_str(), Some(uid.as_str()), "{r}");
        let r = send(
            addr,
            &Request::post(
                "/bind",
                Some(&secret),
                &format!(r#"{{"uid":"{uid}","tg_id":1}}"#),
            ),
        )
        .await
        .json();
        assert_eq!(
            r,
            json!({"ok": true, "matched": true, "tg_id": 500 + i, "conflict": true})
        );
    }
    stop_cleanly(process);
}

/// A click's `fbclid` index entry may be only in the writer's memory when the click is answered
/// (`storage/fbclid_buffer.rs`). After a SIGKILL the restart derives it again from the clicks, and
/// the same `fbclid` answers the same click instead of making a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fbclid_entries_in_memory_at_a_sigkill_are_derived_again() {
    const CLICKS: u64 = 64;
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    // At once, so that they share few commits and most entries are still waiting at the kill.
    let sends: Vec<_> = (0..CLICKS)
        .map(|i| {
            let secret = creds.secret.clone();
            tokio::spawn(async move {
                let body = format!(r#"{{"fbclid":"fb-buffered-{i}"}}"#);
                let r = send(addr, &Request::post("/clicks", Some(&secret), &body))
                    .await
                    .json();
                assert_eq!(r["created"], json!(true), "{r}");
                (body, r["uid"].as_str().expect("uid").to_owned())
            })
        })
        .collect();
    let mut made = Vec::new();
    for s in sends {
        made.push(s.await.unwrap());
    }
    process.kill_hard();

    let process = TrackerProcess::start(dir.path());
    let log = process.log_when(|log| fbclid_entries_derived(log).is_some());
    let derived = fbclid_entries_derived(&log);
    assert!(derived.is_some_and(|n| n > 0), "{derived:?}\n{log}");
    for (body, uid) in &made {
        let r = send(
            process.addr,
            &Request::post("/clicks", Some(&creds.secret), body),
        )
        .await
        .json();
        assert_eq!(r["uid"].as_str(), Some(uid.as_str()), "{body}: {r}");
        assert_eq!(r["created"], json!(false), "{body}: {r}");
    }
    stop_cleanly(process);
}

/// A clean stop lets requests in flight finish and commits them before the file closes, and
/// does not wait for a client that keeps an idle keep-alive connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_keeps_every_answered_request_and_ignores_idle_connections() {
    let s = TestServer::start().await;
    let mut idle = Connection::open(s.addr).await.expect("connect");
    let secret = s.a.secret.clone();
    let warm_up = idle
        .send(&Request::post(
            "/events",
            Some(&secret),
            r#"{"event":"contact","uid":"idle"}"#,
        ))
        .await
        .expect("response");
    let idle_id = assert_queued(&warm_up);

    let answered = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..40)
        .map(|i| {
            let (addr, secret, answered) = (s.addr, secret.clone(), answered.clone());
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await.ok()?;
                let body = format!(r#"{{"event":"deposit","eid":"stop-{i}"}}"#);
                let r = conn
                    .send(&Request::post("/events", Some(&secret), &body))
                    .await
                    .ok()?;
                answered.fetch_add(1, Ordering::SeqCst);
                Some((body, assert_queued(&r)))
            })
        })
        .collect();
    // Stop once the load is under way, so some requests are still in flight.
    let started = Instant::now();
    while answered.load(Ordering::SeqCst) < 5 && started.elapsed() < Duration::from_secs(5) {
        tokio::task::yield_now().await;
    }
    let stopping = Instant::now();
    let s = s.restart().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "the stop waited {:?} for an idle connection",
        stopping.elapsed()
    );
    drop(idle);
    let mut acked = Vec::new();
    for t in senders {
        acked.extend(t.await.expect("sender"));
    }
    assert!(!acked.is_empty());
    for (body, id) in &acked {
        assert_duplicate_of(&s.post_event(body).await, *id);
    }
    assert_duplicate_of(
        &s.post_event(r#"{"event":"contact","uid":"idle"}"#).await,
        idle_id,
    );
    s.stop().await;
}
