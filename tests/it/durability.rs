//! The real `tracker` binary across restarts (`docs/api.md#durability`): what was acknowledged is on
//! disk after a clean SIGTERM stop and after a SIGKILL in the middle of a load, and dedup and
//! bindings carry on from it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Notify;

use crate::support::{
    Connection, Request, TestServer, TrackerProcess, assert_duplicate_of, assert_queued,
    dedup_entries_derived, event_answer, fbclid_entries_derived, first_start, post_json, send,
    stop_cleanly,
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

/// A `POST` with the space's secret to the server at `addr`, answering its JSON.
fn poster(
    addr: std::net::SocketAddr,
    secret: &str,
) -> impl Fn(&'static str, String) -> std::pin::Pin<Box<dyn Future<Output = serde_json::Value>>> {
    let secret = secret.to_owned();
    move |path, body| {
        let secret = secret.clone();
        Box::pin(async move {
            send(addr, &Request::post(path, Some(&secret), &body))
                .await
                .json()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_and_bindings_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let secret = creds.secret.clone();
    let post = poster(process.addr, &secret);
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
    let post = poster(addr, &secret);
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

/// What the senders share: request and acknowledgement counts, and the signal to kill after
/// `kill_after_acks`.
struct Load {
    sent: AtomicUsize,
    acked: AtomicUsize,
    kill_after_acks: usize,
    kill_now: Notify,
}

/// What one sender had acknowledged before the kill.
#[derive(Default)]
struct Acks {
    /// `(eid, inbox_id)` of each event answered `queued`.
    events: Vec<(String, u64)>,
    /// `(eid, uid)` of each of those that named an acknowledged click: stored `matched`.
    matched: Vec<(String, String)>,
    /// `(fbclid, uid)` of each click answered.
    clicks: Vec<(String, String)>,
    /// `(uid, tg_id)` of each binding answered `matched`.
    binds: Vec<(String, u64)>,
}

/// Drives a mix of requests until the connection fails (the process was killed), the request
/// budget is spent, or the deadline passes: a back-filled click, an event with an eid naming
/// that click, a binding of it, and an event with an eid alone. `label` keeps the names of each
/// round's requests apart. Only a complete `200` answer is an acknowledgement the tracker must
/// keep.
async fn send_until_killed(
    addr: std::net::SocketAddr,
    secret: String,
    (label, sender): (String, usize),
    load: Arc<Load>,
) -> Acks {
    let mut acks = Acks::default();
    let Ok(mut conn) = Connection::open(addr).await else {
        return acks;
    };
    let started = Instant::now();
    let mut click: Option<String> = None;
    for n in 0_u64.. {
        if load.sent.fetch_add(1, Ordering::SeqCst) >= MAX_REQUESTS
            || started.elapsed() > LOAD_DEADLINE
        {
            break;
        }
        let eid = format!("{label}-{sender}-{n}");
        let (path, body) = match (n % 4, &click) {
            (0, _) => ("/clicks", format!(r#"{{"fbclid":"{eid}"}}"#)),
            (1, Some(uid)) => (
                "/events",
                format!(r#"{{"event":"deposit","eid":"{eid}","uid":"{uid}","value":"{n}.5"}}"#),
            ),
            (2, Some(uid)) => ("/bind", format!(r#"{{"uid":"{uid}","tg_id":{}}}"#, n + 1)),
            _ => (
                "/events",
                format!(r#"{{"event":"deposit","eid":"{eid}","value":"{n}.{sender:02}"}}"#),
            ),
        };
        let Ok(response) = conn.send(&Request::post(path, Some(&secret), &body)).await else {
            break;
        };
        match path {
            "/clicks" => {
                let uid = response.json()["uid"].as_str().expect("uid").to_owned();
                acks.clicks.push((eid, uid.clone()));
                click = Some(uid);
            }
            "/bind" => {
                let uid = click.clone().expect("a click to bind");
                let answer = response.json();
                assert_eq!(answer["tg_id"].as_u64(), Some(n + 1), "{answer}");
                acks.binds.push((uid, n + 1));
            }
            _ => {
                let answer = event_answer(&response);
                assert!(!answer.duplicate, "{eid} is new: {answer:?}");
                if let Some(uid) = &click
                    && n % 4 == 1
                {
                    assert!(answer.matched, "{eid} names acknowledged click {uid}");
                    acks.matched.push((eid.clone(), uid.clone()));
                }
                acks.events.push((eid, answer.inbox_id));
            }
        }
        if load.acked.fetch_add(1, Ordering::SeqCst) + 1 == load.kill_after_acks {
            load.kill_now.notify_one();
        }
    }
    acks
}

/// Runs [`SENDERS`] senders against `addr` and SIGKILLs the process after `kill_after_acks`
/// acknowledgements or once `kill_when` resolves, whichever comes first, or at [`KILL_AFTER`].
/// Answers every acknowledgement, and whether the load was still going at the kill.
async fn load_then_kill(
    process: TrackerProcess,
    secret: &str,
    (label, kill_after_acks): (&str, usize),
    kill_when: impl Future<Output = ()>,
) -> (Acks, bool) {
    let load = Arc::new(Load {
        sent: AtomicUsize::new(0),
        acked: AtomicUsize::new(0),
        kill_after_acks,
        kill_now: Notify::new(),
    });
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            tokio::spawn(send_until_killed(
                process.addr,
                secret.to_owned(),
                (label.to_owned(), sender),
                load.clone(),
            ))
        })
        .collect();
    let _ = tokio::time::timeout(KILL_AFTER, async {
        tokio::select! {
            () = load.kill_now.notified() => {}
            () = kill_when => {}
        }
    })
    .await;
    let in_flight = load.sent.load(Ordering::SeqCst) < MAX_REQUESTS;
    process.kill_hard();
    let mut acks = Acks::default();
    for s in senders {
        let a = s.await.expect("sender task");
        acks.events.extend(a.events);
        acks.matched.extend(a.matched);
        acks.clicks.extend(a.clicks);
        acks.binds.extend(a.binds);
    }
    (acks, in_flight)
}

/// Re-sends every acknowledged event (a duplicate with its own `inbox_id`), click (the same
/// uid) and binding (the same id), from [`SENDERS`] connections at once.
async fn assert_acknowledged(addr: std::net::SocketAddr, secret: &str, acks: &Arc<Acks>) {
    let checkers: Vec<_> = (0..SENDERS)
        .map(|part| {
            let (acks, secret) = (acks.clone(), secret.to_owned());
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await.expect("connect after restart");
                let mut post = async |path: &str, body: String| {
                    conn.send(&Request::post(path, Some(&secret), &body))
                        .await
                        .expect("response after restart")
                };
                for (eid, inbox_id) in acks.events.iter().skip(part).step_by(SENDERS) {
                    // The value differs from the first send: with an eid it must not matter.
                    let body = format!(r#"{{"event":"deposit","eid":"{eid}"}}"#);
                    assert_duplicate_of(&post("/events", body).await, *inbox_id);
                }
                for (fbclid, uid) in acks.clicks.iter().skip(part).step_by(SENDERS) {
                    let r = post("/clicks", format!(r#"{{"fbclid":"{fbclid}"}}"#)).await;
                    assert_eq!(r.json()["uid"].as_str(), Some(uid.as_str()), "{fbclid}");
                }
                for (uid, tg_id) in acks.binds.iter().skip(part).step_by(SENDERS) {
                    let r = post("/bind", format!(r#"{{"uid":"{uid}","tg_id":{tg_id}}}"#)).await;
                    assert_eq!(
                        r.json(),
                        json!({"ok": true, "matched": true, "tg_id": tg_id}),
                        "{uid}"
                    );
                }
            })
        })
        .collect();
    for c in checkers {
        c.await.expect("something acknowledged was lost or changed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_a_sigkill_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let (acks, in_flight) = load_then_kill(
        process,
        &creds.secret,
        ("crash", KILL_AFTER_ACKS),
        std::future::pending(),
    )
    .await;
    assert!(
        in_flight,
        "the load had ended before the kill; raise MAX_REQUESTS"
    );
    assert!(
        acks.events.len() >= 50,
        "too few acknowledgements to prove anything: {}",
        acks.events.len()
    );

    let process = TrackerProcess::start(dir.path());
    let addr = process.addr;
    // The newest dedup entries were only in the writer's memory at the kill; the restart derived
    // them again from the inbox (storage/index/dedup_buffer.rs). The checks below need every one.
    let log = process.log_when(|log| dedup_entries_derived(log).is_some());
    let derived = dedup_entries_derived(&log);
    assert!(derived.is_some_and(|n| n > 0), "{derived:?}\n{log}");
    let acks = Arc::new(acks);
    assert_acknowledged(addr, &creds.secret, &acks).await;
    let max_acked = acks.events.iter().map(|(_, id)| *id).max().unwrap_or(0);
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
    println!(
        "crash test: {} events, {} clicks, {} bindings acknowledged before SIGKILL, all kept",
        acks.events.len(),
        acks.clicks.len(),
        acks.binds.len()
    );
    stop_cleanly(process);
}

/// Rounds of load and SIGKILL at a random moment on one data file: each round starts
/// the tracker on what the crashes before left, loads it with events, clicks and bindings from
/// [`SENDERS`] connections, and kills it between 0.2 s and 1.5 s in. At the end every
/// acknowledged event is in the inbox exactly once under its `inbox_id`, the ones that named a
/// click are `matched`, and every click and binding answers as it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_at_random_moments_over_rounds_lose_nothing_acknowledged() {
    const ROUNDS: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let (mut process, creds) = first_start(dir.path());
    let mut all = Acks::default();
    let mut delays = Vec::new();
    for round in 0..ROUNDS {
        let delay = Duration::from_millis(200 + random_below(1300));
        delays.push(delay);
        let (acks, _) = load_then_kill(
            process,
            &creds.secret,
            (&format!("round{round}"), usize::MAX),
            tokio::time::sleep(delay),
        )
        .await;
        all.events.extend(acks.events);
        all.matched.extend(acks.matched);
        all.clicks.extend(acks.clicks);
        all.binds.extend(acks.binds);
        process = TrackerProcess::start(dir.path());
    }
    let addr = process.addr;
    assert!(
        all.events.len() >= 50,
        "too few acknowledgements to prove anything: {}",
        all.events.len()
    );
    // Exactly once: the inbox, read from the start, holds each acknowledged eid once, under the
    // id its answer gave.
    let mut stored: HashMap<String, (u64, bool, usize)> = HashMap::new();
    let mut after = String::new();
    loop {
        let target = format!("/events?limit=1000&after={after}");
        let page = send(
            addr,
            &Request::get(&target).header("Authorization", format!("Bearer {}", creds.secret)),
        )
        .await
        .json();
        for e in page["events"].as_array().expect("events") {
            let id: u64 = e["inbox_id"]
                .as_str()
                .and_then(|i| i.parse().ok())
                .expect("id");
            let eid = e["eid"]
                .as_str()
                .expect("every event here has an eid")
                .to_owned();
            let seen = stored
                .entry(eid)
                .or_insert((id, e["matched"] == json!(true), 0));
            seen.2 += 1;
        }
        match page["next"].as_str() {
            Some(next) => next.clone_into(&mut after),
            None => break,
        }
    }
    for (eid, inbox_id) in &all.events {
        assert_eq!(
            stored.get(eid).map(|s| (s.0, s.2)),
            Some((*inbox_id, 1)),
            "{eid}: acknowledged as {inbox_id}"
        );
    }
    for (eid, uid) in &all.matched {
        assert!(
            stored[eid].1,
            "{eid} named click {uid} and must stay matched"
        );
    }
    let all = Arc::new(all);
    assert_acknowledged(addr, &creds.secret, &all).await;
    println!(
        "{ROUNDS} SIGKILL rounds (after {delays:?}): {} events, {} clicks, {} bindings \
         acknowledged, all kept",
        all.events.len(),
        all.clicks.len(),
        all.binds.len()
    );
    stop_cleanly(process);
}

/// A number below `bound` that differs from run to run (no crate needed for a kill moment).
fn random_below(bound: u64) -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    hasher.finish() % bound
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_right_after_acknowledgements_loses_no_click_or_binding() {
    let dir = tempfile::tempdir().unwrap();
    let (process, creds) = first_start(dir.path());
    let addr = process.addr;
    let secret = creds.secret.clone();
    let click = |addr, i: u64| {
        let secret = secret.clone();
        async move {
            let body = format!(r#"{{"fbclid":"fb-kill-{i}"}}"#);
            post_json(addr, &secret, "/clicks", &body).await
        }
    };
    let mut bound = Vec::new();
    for i in 0..20_u64 {
        let r = click(addr, i).await;
        let uid = r["uid"].as_str().expect("uid").to_owned();
        let body = format!(r#"{{"uid":"{uid}","tg_id":{}}}"#, 500 + i);
        let r = post_json(addr, &secret, "/bind", &body).await;
        assert_eq!(r["tg_id"].as_u64(), Some(500 + i), "{r}");
        bound.push(uid);
    }
    process.kill_hard();
    let process = TrackerProcess::start(dir.path());
    let addr = process.addr;
    for (i, uid) in (0_u64..).zip(&bound) {
        let r = click(addr, i).await;
        assert_eq!(r["uid"].as_str(), Some(uid.as_str()), "{r}");
        let r = post_json(
            addr,
            &secret,
            "/bind",
            &format!(r#"{{"uid":"{uid}","tg_id":1}}"#),
        )
        .await;
        assert_eq!(
            r,
            json!({"ok": true, "matched": true, "tg_id": 500 + i, "conflict": true})
        );
    }
    stop_cleanly(process);
}

/// A click's `fbclid` index entry may be only in the writer's memory when the click is answered
/// (`storage/index/fbclid_buffer.rs`). After a SIGKILL the restart derives it again from the clicks, and
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

/// The dedup table's runs merge while events come (`storage/index/dedup_runs.rs`; generations of
/// 4 entries here, so that a thousand events make merges of three tiers, each over many
/// commits), and the process is killed (SIGKILL), round after round, until a restart finds a merge
/// under way. After each restart every acknowledged event is still a duplicate of itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_while_dedup_runs_merge_loses_no_acknowledged_event() {
    const ROUNDS: usize = 4;
    let env = [("TRACKER_DEV_DEDUP_GENERATION", "4")];
    let dir = tempfile::tempdir().unwrap();
    let mut process = TrackerProcess::start_with_env(dir.path(), &env);
    let creds = process.created.take().expect("first start credentials");
    let mut all = Acks::default();
    let mut resumed = 0;
    for round in 0..ROUNDS {
        let delay = Duration::from_millis(400 + random_below(800));
        let (acks, _) = load_then_kill(
            process,
            &creds.secret,
            (&format!("merge{round}"), usize::MAX),
            tokio::time::sleep(delay),
        )
        .await;
        all.events.extend(acks.events);
        all.clicks.extend(acks.clicks);
        all.binds.extend(acks.binds);
        process = TrackerProcess::start_with_env(dir.path(), &env);
        let log = process.log_when(|log| dedup_entries_derived(log).is_some());
        if log.contains("a merge of dedup runs resumes") {
            resumed += 1;
        }
        let so_far = Arc::new(std::mem::take(&mut all));
        assert_acknowledged(process.addr, &creds.secret, &so_far).await;
        all = Arc::into_inner(so_far).expect("checkers are done");
        if resumed > 0 && round > 0 {
            break;
        }
    }
    assert!(
        resumed > 0,
        "no kill of {ROUNDS} came while a merge was under way"
    );
    assert!(
        all.events.len() >= 200,
        "too few events to fill many generations: {}",
        all.events.len()
    );
    stop_cleanly(process);
}
