//! What every integration test shares: a tiny HTTP/1.1 client over `tokio::net::TcpStream`,
//! an in-process [`TestServer`] (real store, real routes, a [`ManualClock`]) and a
//! [`TrackerProcess`] that runs the real binary for restart and crash tests.
//!
//! The client is written here rather than taken from a crate so the tests control every byte
//! that goes on the wire: chunked bodies, exact `Content-Length`s, keep-alive. It reads answers
//! with [`http1::Reader`], which the benchmark's load client shares.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader as StdBufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use tracker::app::App;
use tracker::clock::{Clock, ManualClock};
use tracker::config::Settings;
use tracker::domain::event::{EventKind, Source, ValidEvent};
use tracker::storage::{Store, StoreError, StoreOptions};

/// The in-process server's "now": a fixed instant, so time rules are tested by moving the clock.
pub const NOW_MS: u64 = 1_800_000_000_000;
pub const DAY_MS: u64 = 86_400_000;
/// How long any single network step may take before a test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// HTTP client

mod http1;
pub mod insights;
pub mod loopback;
pub mod receiver;
pub mod snapchat;
pub mod telegram;
pub mod tiktok;

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The answer `http1` read, with its headers as text.
    fn owned(answer: &http1::Answer<'_>) -> std::io::Result<Response> {
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "a header is not UTF-8")
            })
        };
        let headers = http1::headers(answer.head)
            .map(|(name, value)| Ok((text(name)?, text(value)?)))
            .collect::<std::io::Result<_>>()?;
        Ok(Response {
            status: answer.status,
            headers,
            body: answer.body.to_vec(),
        })
    }

    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// If the body is not JSON: every answer of the tracker except `return=TEXT` must be.
    #[must_use]
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "HTTP {} body is not JSON ({e}): {:?}",
                self.status,
                self.text()
            )
        })
    }
}

/// One request, as it goes on the wire.
pub struct Request<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub headers: Vec<(&'a str, String)>,
    pub body: Option<&'a [u8]>,
}

impl<'a> Request<'a> {
    #[must_use]
    pub fn get(target: &'a str) -> Self {
        Request {
            method: "GET",
            target,
            headers: Vec::new(),
            body: None,
        }
    }

    /// A POST with a JSON body and, if given, `Authorization: Bearer <secret>`.
    #[must_use]
    pub fn post(target: &'a str, secret: Option<&str>, body: &'a str) -> Self {
        let mut headers = vec![("Content-Type", "application/json".to_owned())];
        if let Some(secret) = secret {
            headers.push(("Authorization", format!("Bearer {secret}")));
        }
        Request {
            method: "POST",
            target,
            headers,
            body: Some(body.as_bytes()),
        }
    }

    /// A PATCH with a JSON body and, if given, `Authorization: Bearer <secret>`.
    #[must_use]
    pub fn patch(target: &'a str, secret: Option<&str>, body: &'a str) -> Self {
        Request {
            method: "PATCH",
            ..Request::post(target, secret, body)
        }
    }

    #[must_use]
    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn encode(&self, addr: SocketAddr, keep_alive: bool) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {addr}\r\n",
            self.method, self.target
        );
        for (name, value) in &self.headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        if let Some(body) = self.body {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str(if keep_alive {
            "Connection: keep-alive\r\n\r\n"
        } else {
            "Connection: close\r\n\r\n"
        });
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(self.body.unwrap_or_default());
        bytes
    }
}

/// The password of the Google Ads destination in `response`, answered `status` (`201` as it is
/// created, `200` as it is given a new one): the only time it is shown.
#[must_use]
pub fn google_password(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()["destination"]["password"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Asserts that a command ran by a test exited with success, showing its standard error if not.
#[track_caller]
pub fn assert_succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A contact received at `now_ms` with no uid, Telegram id, value or `eid`, as `POST /events`
/// validates it: for a test that writes to a store directly.
#[must_use]
pub fn contact_at(now_ms: u64) -> ValidEvent {
    ValidEvent {
        kind: EventKind::Contact,
        uid: None,
        tg_id: None,
        value: None,
        currency: "USD".into(),
        eid: None,
        occurred_at_ms: now_ms,
        time_supplied: false,
        received_at_ms: now_ms,
        source: Source::Post,
    }
}

/// The data file at `path`, opened as the server opens it.
#[must_use]
pub fn store_at(path: &Path) -> Arc<Store> {
    Arc::new(Store::open(path, &StoreOptions::default()).unwrap().0)
}

/// The operations of `store`, as the server would run them, at `now_ms` by a manual clock.
#[must_use]
pub fn app_on(store: &Arc<Store>, now_ms: u64) -> App {
    App::new(
        Settings::with_data(store.path().to_owned()),
        store.clone(),
        Arc::new(ManualClock::new(now_ms)),
    )
}

/// A connection that can carry several requests (keep-alive).
pub struct Connection {
    addr: SocketAddr,
    stream: TcpStream,
    answers: http1::Reader,
}

impl Connection {
    pub async fn open(addr: SocketAddr) -> std::io::Result<Connection> {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| std::io::Error::other("connect timed out"))??;
        stream.set_nodelay(true)?;
        Ok(Connection {
            addr,
            stream,
            answers: http1::Reader::new(8 * 1024),
        })
    }

    /// Sends `request` (keep-alive) and reads its response.
    pub async fn send(&mut self, request: &Request<'_>) -> std::io::Result<Response> {
        self.send_within(request, IO_TIMEOUT).await
    }

    /// [`Connection::send`] with a limit of its own, for a request whose work is the point of
    /// the test rather than its speed (a large import in a debug build on a busy machine).
    pub async fn send_within(
        &mut self,
        request: &Request<'_>,
        limit: Duration,
    ) -> std::io::Result<Response> {
        let bytes = request.encode(self.addr, true);
        self.exchange(&bytes, request.method == "HEAD", limit).await
    }

    /// The TCP stream, for tests that watch the connection itself.
    #[must_use]
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Writes `bytes` as they are and reads one response.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<Response> {
        self.exchange(bytes, false, IO_TIMEOUT).await
    }

    /// Writes `bytes` and reads one response; the answer to a `HEAD` has no body, whatever
    /// its `Content-Length` says.
    async fn exchange(
        &mut self,
        bytes: &[u8],
        head: bool,
        limit: Duration,
    ) -> std::io::Result<Response> {
        tokio::time::timeout(limit, async {
            self.stream.write_all(bytes).await?;
            Response::owned(&self.answers.read(&mut self.stream, head).await?)
        })
        .await
        .map_err(|_| std::io::Error::other("no response in time"))?
    }
}

/// Sends one request on a fresh connection with `Connection: close`.
///
/// # Panics
/// On any I/O failure: in these tests the server is expected to answer.
pub async fn send(addr: SocketAddr, request: &Request<'_>) -> Response {
    let bytes = request.encode(addr, false);
    let mut conn = Connection::open(addr).await.expect("connect");
    conn.exchange(&bytes, request.method == "HEAD", IO_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{} {} got no response: {e}", request.method, request.target))
}

/// Writes raw bytes on a fresh connection and reads one response.
///
/// # Panics
/// On any I/O failure.
pub async fn send_raw(addr: SocketAddr, bytes: &[u8]) -> Response {
    let mut conn = Connection::open(addr).await.expect("connect");
    conn.send_raw(bytes).await.unwrap_or_else(|e| {
        panic!(
            "request {:?} got no response: {e}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(120)])
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Assertions on the tracker's answers

/// Asserts a failure answer (`docs/api.md#errors`): HTTP status, `ok:false`, the `status` code,
/// the `field` (or its absence), and a non-empty `error` sentence. Returns the body.
#[track_caller]
pub fn assert_error(response: &Response, http: u16, code: &str, field: Option<&str>) -> Value {
    let body = response.json();
    assert_eq!(
        (response.status, body["status"].as_str()),
        (http, Some(code)),
        "wrong failure: {body}"
    );
    assert_eq!(body["ok"], Value::Bool(false), "{body}");
    assert_eq!(body["field"].as_str(), field, "wrong `field`: {body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "no error sentence: {body}"
    );
    body
}

/// What an event answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAnswer {
    pub duplicate: bool,
    pub inbox_id: u64,
    pub dedup: String,
    pub matched: bool,
}

/// Reads a `200` event answer (not a dry run), failing on anything else.
#[track_caller]
pub fn event_answer(response: &Response) -> EventAnswer {
    let body = response.json();
    assert_eq!(response.status, 200, "event refused: {body}");
    assert_eq!(body["ok"], Value::Bool(true), "{body}");
    let duplicate = match body["status"].as_str() {
        Some("queued") => false,
        Some("duplicate") => true,
        other => panic!("unexpected event status {other:?}: {body}"),
    };
    let inbox_id = body["inbox_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("inbox_id is not a numeric string: {body}"));
    EventAnswer {
        duplicate,
        inbox_id,
        dedup: body["dedup"].as_str().unwrap_or_default().to_owned(),
        matched: body["matched"]
            .as_bool()
            .unwrap_or_else(|| panic!("no `matched`: {body}")),
    }
}

/// Asserts the answer is a new event (`queued`) and returns its `inbox_id`.
#[track_caller]
pub fn assert_queued(response: &Response) -> u64 {
    let a = event_answer(response);
    assert!(!a.duplicate, "expected queued, got duplicate: {a:?}");
    a.inbox_id
}

/// Asserts the answer is a duplicate of `inbox_id`.
#[track_caller]
pub fn assert_duplicate_of(response: &Response, inbox_id: u64) {
    let a = event_answer(response);
    assert!(
        a.duplicate && a.inbox_id == inbox_id,
        "expected duplicate of {inbox_id}, got {a:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The in-process server

/// A space's name and its credentials (as `space create --json` and a first start print them).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Space {
    #[serde(rename = "space")]
    pub name: String,
    pub secret: String,
    pub ingest_token: String,
}

/// The real server (store, writer, routes) on 127.0.0.1:0 with a temporary data file, two
/// spaces (`a`, `b`), a [`ManualClock`] at [`NOW_MS`], and the disk fault switch.
pub struct TestServer {
    pub addr: SocketAddr,
    pub clock: ManualClock,
    /// Set to `true` to make every disk write and fsync fail.
    /// `tracker::storage::fault::{WORKS, FAIL_ALL, FAIL_SYNC}`.
    pub fault: Arc<AtomicU8>,
    pub store: Arc<Store>,
    /// The app being served (replaced at each restart): its settings, clock and metrics.
    pub app: Option<Arc<App>>,
    pub a: Space,
    pub b: Space,
    settings: Settings,
    queue_capacity: usize,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), StoreError>>>,
    // Dropped last: the data file lives here.
    _dir: tempfile::TempDir,
}

/// Opens the data file with the fault switch wired in. Blocking: call from a blocking thread.
fn open_store(path: &Path, fault: &Arc<AtomicU8>, queue_capacity: usize) -> (Store, bool) {
    let options = StoreOptions {
        fault: Some(fault.clone()),
        queue_capacity,
        ..StoreOptions::default()
    };
    Store::open(path, &options).expect("open store")
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    /// Starts with the default settings after `configure` has changed them.
    ///
    /// # Panics
    /// If the server cannot be set up.
    pub async fn start_with(configure: impl FnOnce(&mut Settings)) -> TestServer {
        TestServer::start_with_queue(StoreOptions::default().queue_capacity, configure).await
    }

    /// Like [`TestServer::start_with`], with room for only `queue_capacity` requests waiting
    /// for the writer.
    ///
    /// # Panics
    /// If the server cannot be set up.
    pub async fn start_with_queue(
        queue_capacity: usize,
        configure: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.redb");
        let fault = Arc::new(AtomicU8::new(tracker::storage::fault::WORKS));
        let store = {
            let (path, fault) = (path.clone(), fault.clone());
            // Opening blocks on the disk: off the async workers.
            tokio::task::spawn_blocking(move || {
                let (store, created) = open_store(&path, &fault, queue_capacity);
                assert!(created, "a fresh data file");
                Arc::new(store)
            })
            .await
            .expect("setup task")
        };
        let mut spaces = Vec::new();
        for name in ["a", "b"] {
            let c = app_on(&store, NOW_MS)
                .create_space(name)
                .await
                .expect("create space");
            spaces.push(Space {
                name: c.space,
                secret: c.secret,
                ingest_token: c.ingest_token,
            });
        }
        let [a, b]: [Space; 2] = spaces.try_into().expect("two spaces");
        let mut settings = Settings::with_data(path);
        // Every client of these tests is 127.0.0.1, and some open a hundred connections at once;
        // the share per address has its own tests (`connections.rs`).
        settings.connections.max_connections_per_address = 1_000_000;
        configure(&mut settings);
        let mut server = TestServer {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            clock: ManualClock::new(NOW_MS),
            fault,
            store,
            app: None,
            a,
            b,
            settings,
            queue_capacity,
            shutdown: None,
            task: None,
            _dir: dir,
        };
        server.serve().await;
        server
    }

    /// Serves `self.store` on a new listener.
    async fn serve(&mut self) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        self.addr = listener.local_addr().expect("local addr");
        let app = Arc::new(App::new(
            self.settings.clone(),
            self.store.clone(),
            Arc::new(self.clock.clone()) as Arc<dyn Clock>,
        ));
        let (trigger, stopped) = oneshot::channel::<()>();
        self.shutdown = Some(trigger);
        self.app = Some(app.clone());
        self.task = Some(tokio::spawn(tracker::server::serve(
            app,
            listener,
            async move {
                let _ = stopped.await;
            },
        )));
    }

    /// Stops the server (closing the data file), opens the file again and serves it on a new
    /// address: a restart, in process. The clock and the spaces carry over.
    ///
    /// # Panics
    /// If the server does not stop or the file does not open.
    pub async fn restart(self) -> TestServer {
        self.restart_with(|_| {}).await
    }

    /// [`TestServer::restart`], with the settings changed by `configure` first.
    ///
    /// # Panics
    /// If the server does not stop or the file does not open.
    pub async fn restart_with(mut self, configure: impl FnOnce(&mut Settings)) -> TestServer {
        self.stop_serving().await.expect("a clean stop");
        configure(&mut self.settings);
        self.reopen_and_serve().await
    }

    /// Asks the server to stop and answers how its serve loop ended.
    async fn stop_serving(&mut self) -> Result<(), StoreError> {
        if let Some(trigger) = self.shutdown.take() {
            let _ = trigger.send(());
        }
        match self.task.take() {
            Some(task) => tokio::time::timeout(IO_TIMEOUT, task)
                .await
                .expect("server stops in time")
                .expect("serve task"),
            None => Ok(()),
        }
    }

    /// Stops the server and waits until it has committed and closed the data file.
    ///
    /// # Panics
    /// If the serve task panicked, does not finish in time, or ended with a storage failure.
    pub async fn stop(mut self) {
        self.stop_serving().await.expect("a clean stop");
    }

    /// Waits, without asking it to stop, until the serve loop ends by itself (it does when
    /// storage fails for good), and answers how it ended.
    ///
    /// # Panics
    /// If it does not end within the I/O timeout.
    pub async fn serve_loop_ends(&mut self) -> Result<(), StoreError> {
        let task = self.task.take().expect("serving");
        tokio::time::timeout(IO_TIMEOUT, task)
            .await
            .expect("the serve loop ends by itself")
            .expect("serve task")
    }

    /// Opens the data file again in a new store and serves it, as a supervisor's restart of the
    /// process would after the serve loop ended. The clock and the spaces carry over.
    ///
    /// # Panics
    /// If the file does not open.
    pub async fn start_again(self) -> TestServer {
        self.fault.store(
            tracker::storage::fault::WORKS,
            std::sync::atomic::Ordering::SeqCst,
        );
        self.reopen_and_serve().await
    }

    /// Opens the data file again in a new store (the old one lets go of the file when its last
    /// handle is gone) and serves it on a new address.
    async fn reopen_and_serve(mut self) -> TestServer {
        let (path, fault, capacity) = (
            self.settings.data.clone(),
            self.fault.clone(),
            self.queue_capacity,
        );
        let (store, created) =
            tokio::task::spawn_blocking(move || open_store(&path, &fault, capacity))
                .await
                .expect("reopen task");
        assert!(!created, "the data file was kept");
        self.store = Arc::new(store);
        self.serve().await;
        self
    }

    pub async fn send(&self, request: &Request<'_>) -> Response {
        send(self.addr, request).await
    }

    /// What `/metrics` would answer now, for servers started without a metrics listener.
    ///
    /// # Panics
    /// If the server is not serving.
    #[must_use]
    pub fn metrics_text(&self) -> String {
        let app = self.app.as_ref().expect("serving");
        tracker::metrics::render(&tracker::metrics::registry(
            app.metrics.clone(),
            app.store.writer_metrics().clone(),
            None,
        ))
    }

    /// `POST <path>` with `space`'s secret.
    pub async fn post_as(&self, space: &Space, path: &str, body: &str) -> Response {
        self.send(&Request::post(path, Some(&space.secret), body))
            .await
    }

    /// `PATCH <path>` with `space`'s secret.
    pub async fn patch_as(&self, space: &Space, path: &str, body: &str) -> Response {
        self.send(&Request::patch(path, Some(&space.secret), body))
            .await
    }

    /// `POST /events` as space `a`.
    pub async fn post_event(&self, body: &str) -> Response {
        self.post_as(&self.a, "/events", body).await
    }

    /// `GET <path>?token=<space's ingest token>&<query>`.
    pub async fn get_as(&self, space: &Space, path: &str, query: &str) -> Response {
        let target = format!("{path}?token={}&{query}", space.ingest_token);
        self.send(&Request::get(&target)).await
    }

    /// `GET <target>` with `space`'s secret: the read side (`/events?after=1`).
    pub async fn read_as(&self, space: &Space, target: &str) -> Response {
        let request =
            Request::get(target).header("Authorization", format!("Bearer {}", space.secret));
        self.send(&request).await
    }

    /// `GET <target>` with `space`'s secret, answered `200`: the array under `key` (`"costs"`).
    pub async fn list_as(&self, space: &Space, target: &str, key: &str) -> Vec<Value> {
        let r = self.read_as(space, target).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()[key].as_array().unwrap().clone()
    }

    /// `GET /e` as space `a`.
    pub async fn get_e(&self, query: &str) -> Response {
        self.get_as(&self.a, "/e", query).await
    }

    /// `POST /bind` of click `uid` to Telegram user `tg_id` in `space`.
    pub async fn bind(&self, space: &Space, uid: &str, tg_id: u64) -> Response {
        let body = format!(r#"{{"uid":"{uid}","tg_id":{tg_id}}}"#);
        self.post_as(space, "/bind", &body).await
    }

    /// Back-fills a click in `space` and returns its uid.
    ///
    /// # Panics
    /// If the click is refused.
    pub async fn click(&self, space: &Space, body: &str) -> String {
        let r = self.post_as(space, "/clicks", body).await;
        let json = r.json();
        assert_eq!(r.status, 200, "click refused: {json}");
        json["uid"].as_str().expect("uid").to_owned()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A test that failed before `stop` still lets the server go.
        if let Some(trigger) = self.shutdown.take() {
            let _ = trigger.send(());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The real binary

/// Credentials printed on first start.
pub type FirstStart = Space;

/// A running `tracker serve` child process on a data file in `dir`.
pub struct TrackerProcess {
    pub child: Child,
    pub addr: SocketAddr,
    /// Where `/metrics` is served, when `metrics_listen` is set.
    pub metrics: Option<SocketAddr>,
    /// `Some` only on the first start of a data file.
    pub created: Option<FirstStart>,
    /// The admin page's password, printed with the address when this start generated it.
    pub admin_password: Option<String>,
    /// The admin page's address, printed at every start.
    pub admin_url: String,
    stderr_path: PathBuf,
}

impl TrackerProcess {
    /// Starts `tracker serve` on `<dir>/t.redb`, listening on 127.0.0.1:0, with an empty config
    /// file (the repository's own `tracker.toml` must not apply), and waits for its address.
    ///
    /// # Panics
    /// If it does not start listening within the time limit.
    #[must_use]
    pub fn start(dir: &Path) -> TrackerProcess {
        TrackerProcess::start_with_env(dir, &[])
    }

    /// Like [`TrackerProcess::start`], with `env` (`TRACKER_*` settings) set for the child.
    ///
    /// # Panics
    /// If it does not start listening within the time limit.
    #[must_use]
    pub fn start_with_env(dir: &Path, env: &[(&str, &str)]) -> TrackerProcess {
        TrackerProcess::try_start_with_env(dir, env)
            .unwrap_or_else(|log| panic!("tracker did not print its address; stderr:\n{log}"))
    }

    /// Like [`TrackerProcess::start_with_env`], but a process that exits (or prints nothing)
    /// instead of listening is an answer, not a failure: `Err` holds its exit status and log.
    pub fn try_start_with_env(dir: &Path, env: &[(&str, &str)]) -> Result<TrackerProcess, String> {
        let config = dir.join("empty.toml");
        std::fs::write(&config, "").expect("write empty config");
        let starts = std::fs::read_dir(dir).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("stderr"))
                .count()
        });
        let stderr_path = dir.join(format!("stderr-{starts}.log"));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tracker"))
            .arg("--config")
            .arg(&config)
            .arg("--json")
            .arg("--data")
            .arg(dir.join("t.redb"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("TRACKER_LISTEN")
            .env_remove("TRACKER_DATA")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("spawn tracker");
        let stdout = child.stdout.take().expect("stdout");
        let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
        // Reads stdout to its end, so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in StdBufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + IO_TIMEOUT;
        let mut created = None;
        let (addr, metrics, admin_password, admin_url) = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                let _ = child.kill();
                let status = child.wait();
                return Err(format!(
                    "{status:?}\n{}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                ));
            };
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            if let Some(listening) = value["listening"].as_str() {
                let password = value["admin_password"].as_str().map(str::to_owned);
                let metrics = value["metrics"]
                    .as_str()
                    .map(|m| m.parse().expect("metrics address"));
                let admin_url = value["admin_url"].as_str().expect("admin_url").to_owned();
                break (
                    listening.parse().expect("listening address"),
                    metrics,
                    password,
                    admin_url,
                );
            }
            created = Some(serde_json::from_value(value).expect("first-start credentials"));
        };
        Ok(TrackerProcess {
            child,
            addr,
            metrics,
            created,
            admin_password,
            admin_url,
            stderr_path,
        })
    }

    /// Sends SIGTERM and waits for the exit status.
    ///
    /// # Panics
    /// If the process does not exit in time.
    #[must_use]
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        self.wait_exit()
    }

    /// SIGKILL: the process gets no chance to close anything.
    pub fn kill_hard(mut self) {
        self.child.kill().expect("kill -9");
        let _ = self.child.wait();
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "tracker did not exit after SIGTERM; stderr:\n{}",
                    self.stderr()
                );
            }
            // Polling a child's exit; not a time rule of the tracker.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the process wrote to stderr so far (its log).
    #[must_use]
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The log once `ready` holds for it, or as it is after the time limit (for the caller's
    /// assertion to show). The tracker writes its log from a thread of its own, so a line logged
    /// before the process printed its address or answered a request may reach stderr a moment
    /// after.
    #[must_use]
    pub fn log_when(&self, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let log = self.stderr();
            if ready(&log) || Instant::now() > deadline {
                return log;
            }
            // Polling a file another process writes; not a time rule of the tracker.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TrackerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts the binary on a fresh data file and returns it with its first-start credentials.
pub fn first_start(dir: &Path) -> (TrackerProcess, FirstStart) {
    let mut process = TrackerProcess::start(dir);
    let created = process
        .created
        .take()
        .expect("first start prints the default space's credentials");
    assert_eq!(created.name, "default");
    assert!(created.secret.starts_with("trk_sk_"), "{created:?}");
    assert!(created.ingest_token.starts_with("trk_it_"), "{created:?}");
    (process, created)
}

/// Stops with SIGTERM and asserts a clean exit, and a log without terminal colour codes: stderr
/// is a file here, not a terminal (regression: the pretty format coloured every log file).
pub fn stop_cleanly(process: TrackerProcess) {
    let stderr_path = process.stderr_path.clone();
    let status = process.terminate();
    let log = std::fs::read_to_string(stderr_path).unwrap_or_default();
    assert!(
        status.success(),
        "SIGTERM must stop the tracker with exit status 0, got {status:?}; log:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
}

/// Ingest goes on while a background task fails: three events named `<prefix>-<n>` are queued.
/// Answers the text of `/metrics` afterwards, for the failure's counters.
pub fn events_still_queue(process: &TrackerProcess, secret: &str, prefix: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for i in 0..3 {
            let body = format!(r#"{{"event":"contact","eid":"{prefix}-{i}"}}"#);
            let r = send(process.addr, &Request::post("/events", Some(secret), &body)).await;
            assert_queued(&r);
        }
        let metrics = process.metrics.expect("metrics listener");
        send(metrics, &Request::get("/metrics")).await.text()
    })
}

/// How many dedup entries the log says the open derived again from the inbox (the writer's
/// in-memory entries of a process that did not stop cleanly), if it says so.
#[must_use]
pub fn dedup_entries_derived(log: &str) -> Option<u64> {
    entries_derived(log, "derived again from the inbox")
}

/// The same for the fbclid index's entries, derived again from the clicks.
#[must_use]
pub fn fbclid_entries_derived(log: &str) -> Option<u64> {
    entries_derived(log, "derived again from the clicks")
}

/// The `entries=` count of the log line that says `what`.
fn entries_derived(log: &str, what: &str) -> Option<u64> {
    // Without the terminal colours of the log format.
    let mut plain = String::new();
    let mut in_escape = false;
    for c in log.chars() {
        match (in_escape, c) {
            (false, '\u{1b}') => in_escape = true,
            (false, c) => plain.push(c),
            (true, 'm') => in_escape = false,
            (true, _) => {}
        }
    }
    plain
        .lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split("entries=").nth(1))
        .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
}

/// Runs `tracker --config <empty file> --data <data> <args>` in `cwd` to its end: no settings
/// from a `tracker.toml` or the environment but the data file, warnings only in the log.
pub fn run_cli<I, A>(cwd: &Path, data: &Path, args: I) -> std::process::Output
where
    I: IntoIterator<Item = A>,
    A: AsRef<std::ffi::OsStr>,
{
    run_cli_with_env(cwd, data, args, &[])
}

/// [`run_cli`] with `env` (`TRACKER_*` settings) set too.
pub fn run_cli_with_env<I, A>(
    cwd: &Path,
    data: &Path,
    args: I,
    env: &[(&str, &str)],
) -> std::process::Output
where
    I: IntoIterator<Item = A>,
    A: AsRef<std::ffi::OsStr>,
{
    let config = cwd.join("empty-cli.toml");
    std::fs::write(&config, "").expect("write an empty config");
    Command::new(env!("CARGO_BIN_EXE_tracker"))
        .arg("--config")
        .arg(&config)
        .arg("--data")
        .arg(data)
        .args(args)
        .current_dir(cwd)
        .env_remove("TRACKER_LISTEN")
        .env_remove("TRACKER_DATA")
        .env("TRACKER_LOG_LEVEL", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run tracker")
}

/// `POST <path>` with the secret; the answer's JSON.
pub async fn post_json(addr: SocketAddr, secret: &str, path: &str, body: &str) -> Value {
    let r = send(addr, &Request::post(path, Some(secret), body)).await;
    assert_eq!(r.status, 200, "POST {path} {body}: {}", r.text());
    r.json()
}

/// Every row of every table of the data file at `path`, read with redb itself (no server may
/// have it open): what `tracker backup` and `tracker check` must both report.
///
/// # Panics
/// If the file does not open.
#[must_use]
pub fn rows_in(path: &Path) -> u64 {
    use redb::{ReadableDatabase as _, ReadableTableMetadata as _};
    let db = redb::Database::open(path).expect("open the data file");
    let txn = db.begin_read().unwrap();
    txn.list_tables()
        .unwrap()
        .map(|t| txn.open_untyped_table(t).unwrap().len().unwrap())
        .sum()
}

/// `POST <path>` with the secret, expecting `status`; the answer's JSON.
pub async fn post_json_status(
    addr: SocketAddr,
    secret: &str,
    path: &str,
    body: &str,
    status: u16,
) -> Value {
    let r = send(addr, &Request::post(path, Some(secret), body)).await;
    assert_eq!(r.status, status, "POST {path} {body}: {}", r.text());
    r.json()
}

/// A tiny seeded generator, so a failing mix can be replayed from its seed.
pub struct Mix(pub u64);
impl Mix {
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
