//! The admin page in a real browser: Debian's headless Chromium driven through chromedriver
//! (`WebDriver`, from Rust with `fantoccini`), against the real `tracker` binary. The test logs
//! in, creates a space, rotates its secret and reads the new one off the page, posts an event
//! with it, sees the event in the feed, changes the space's attribution setting, sees an event by
//! Telegram id in the feed, and logs out. Each page is looked at twice, on a phone
//! (375 px wide) and on a desktop (1280 px): at either width no element of it may sit outside
//! the screen sideways (a table scrolled off to the right counts), and a whole-page screenshot
//! of each is saved under `target/admin-screenshots/` (`NN-page-375.png`, `NN-page-1280.png`)
//! for a person to look at. The widths are set through chromedriver's endpoint for Chrome's
//! developer tools (`Emulation.setDeviceMetricsOverride`), since headless Chromium's window is
//! never narrower than 500 px. At the end the server's log must hold no password, credential or session id.
//!
//! Chromium and chromedriver are installed from Debian's packages when missing (as root, or
//! through sudo). Where they cannot be, the test says so and, under `CI=true`, fails.

use std::future::Future;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::support::{Request, TrackerProcess, assert_queued, send};

/// The screens every page is looked at on: (width, height, a phone's).
const SCREENS: [(u64, u64, bool); 2] = [(375, 812, true), (1280, 800, false)];

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser is there, installing it if it is not.
pub(crate) fn browser_installed() -> bool {
    let present = || Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if present() {
        return true;
    }
    eprintln!("installing Debian's chromium and chromium-driver for the admin page's browser test");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.args(["-n", "apt-get"]);
            c
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let _ = apt(&["update", "-qq"]);
    let _ = apt(&[
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "chromium",
        "chromium-driver",
    ]);
    present()
}

/// Chromedriver, in a process group of its own with the browser it starts: dropped, the whole
/// group is killed, so a failed test leaves no browser running.
pub(crate) struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(group) = i32::try_from(self.0.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn start_driver() -> (Driver, u16) {
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not start listening"
        );
        // Waiting for another program's port; not a time rule of the tracker.
        std::thread::sleep(Duration::from_millis(50));
    }
    (Driver(child), port)
}

/// The browser, and chromedriver's address for the developer-tools commands `WebDriver` lacks.
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: SocketAddr,
    session: String,
}

impl std::ops::Deref for Browser {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Browser {
    /// Runs a command of Chrome's developer tools through chromedriver.
    async fn devtools(&self, cmd: &str, params: Value) -> Value {
        let target = format!("/session/{}/goog/cdp/execute", self.session);
        let body = json!({"cmd": cmd, "params": params}).to_string();
        let response = send(self.driver, &Request::post(&target, None, &body)).await;
        assert_eq!(response.status, 200, "{cmd}: {}", response.text());
        response.json()["value"].clone()
    }

    /// Makes the page `width` x `height` CSS pixels, as a phone's screen or a desktop's.
    async fn screen(&self, width: u64, height: u64, mobile: bool) {
        self.devtools(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }
}

pub(crate) async fn browser(port: u16, profile: &Path) -> Browser {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=375,812",
                format!("--user-data-dir={}", profile.display()),
            ],
            // A phone's screen: headless Chromium's window is never narrower than 500 px.
            "mobileEmulation": {"deviceMetrics": {"width": 375, "height": 812, "pixelRatio": 1.0}},
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session with chromium");
    let session = client
        .session_id()
        .await
        .unwrap()
        .expect("a WebDriver session id");
    Browser {
        client,
        driver: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        session,
    }
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/admin-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The elements of the page that lie (partly) outside the screen sideways, also those hidden
/// in a box scrolled sideways, and the page's height.
const OFF_SCREEN: &str = r"
    const width = document.documentElement.clientWidth;
    const off = [...document.body.querySelectorAll('*')]
        .filter((e) => e.getClientRects().length > 0)
        .filter((e) => { const r = e.getBoundingClientRect(); return r.right > width + 0.5 || r.left < -0.5; })
        .map((e) => `${e.tagName.toLowerCase()} '${e.textContent.trim().slice(0, 30)}'`);
    return [off, document.documentElement.scrollHeight];
";

/// The elements whose words may be split at any letter (`word-break: break-all`), which cuts
/// "tracker.toml" in two with room for it on the next line.
const SPLITS_WORDS: &str = "
    return [...document.body.querySelectorAll('*')]
        .filter((e) => getComputedStyle(e).wordBreak === 'break-all')
        .map((e) => `${e.tagName.toLowerCase()} '${e.textContent.trim().slice(0, 30)}'`);
";

/// Looks at the page on each of the [`SCREENS`]: nothing of it may be off-screen sideways, and
/// a screenshot of the whole page is saved. The browser is left with a phone's screen.
pub(crate) async fn look(browser: &Browser, name: &str) {
    for (width, height, mobile) in SCREENS {
        browser.screen(width, height, mobile).await;
        let seen = browser.execute(OFF_SCREEN, vec![]).await.unwrap();
        let off = seen[0].as_array().unwrap();
        assert!(
            off.is_empty(),
            "{name} at {width} px: outside the screen sideways: {off:?}"
        );
        // A word breaks only where it alone is wider than its line, never anywhere in it.
        let split = browser.execute(SPLITS_WORDS, vec![]).await.unwrap();
        assert_eq!(
            split,
            json!([]),
            "{name} at {width} px: word-break: break-all splits words"
        );
        // The whole page in one picture: a screen as tall as the page.
        let page_height = seen[1].as_u64().unwrap().clamp(height, 6000);
        browser.screen(width, page_height, mobile).await;
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots().join(format!("{name}-{width}.png")), png).unwrap();
    }
    let (width, height, mobile) = SCREENS[0];
    browser.screen(width, height, mobile).await;
}

/// The text of the element `css` once it is on the page (a click's page may still be loading).
/// A look that the page's own navigation cuts short ("aborted by navigation", or an element
/// gone stale) is tried again; panics after 20 s with the last error.
pub(crate) async fn text_of(client: &Client, css: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let error = match client.find(Locator::Css(css)).await {
            Ok(element) => match element.text().await {
                Ok(text) => return text,
                Err(e) => e,
            },
            Err(e) => e,
        };
        assert!(Instant::now() < deadline, "{css} did not appear: {error}");
        // Waiting for the browser to load the page; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The address of the page the browser shows once it contains `part`: a click on a link may
/// return before the browser has begun to load the link's page. Panics after 20 s, naming the
/// address it still shows.
async fn url_with(client: &Client, part: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let url = client.current_url().await.unwrap().to_string();
        if url.contains(part) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the address never came to contain {part:?}: {url}"
        );
        // Waiting for the browser to navigate; not a time rule of the tracker.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path of the page once an element of it (`css`) is there.
pub(crate) async fn path_once(client: &Client, css: &str) -> String {
    text_of(client, css).await;
    client.current_url().await.unwrap().path().to_owned()
}

pub(crate) async fn fill(client: &Client, css: &str, value: &str) {
    let field = client.find(Locator::Css(css)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

pub(crate) async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// A failure's message, written as it is (not quoted, its new lines kept) when the test
/// returns it.
pub(crate) struct Failure(pub(crate) String);

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `driving` to its end on a runtime of its own. A panic inside is a [`Failure`] saying
/// that `what` failed, with the panic's message once more, after its backtrace and without one
/// of its own: a report that keeps only the end of the output still shows what failed.
pub(crate) fn run_caught<T>(driving: impl Future<Output = T>, what: &str) -> Result<T, Failure> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(driving))).map_err(
        |failure| {
            let message = failure
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| failure.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            Failure(format!("{what} failed: {message}"))
        },
    )
}

#[test]
fn the_admin_page_works_in_a_real_browser() -> Result<(), Failure> {
    if !browser_installed() {
        let why = "chromium and chromedriver could not be installed: the admin page was NOT \
                   tested in a browser";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        // Written to the stream itself: libtest hides what `eprintln!` says in a passing test.
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED the_admin_page_works_in_a_real_browser: {why} ***\n"
        );
        return Ok(());
    }
    let dir = tempfile::tempdir().unwrap();
    // The Destinations page sends to a receiver on loopback.
    let tracker = TrackerProcess::start_with_env(
        dir.path(),
        &[("TRACKER_ALLOW_PRIVATE_DESTINATIONS", "true")],
    );
    let password = tracker
        .admin_password
        .clone()
        .expect("the first start's password");
    let (_driver, port) = start_driver();
    let profile = dir.path().join("profile");
    let shown = run_caught(
        drive(tracker.addr, &password, port, &profile),
        "the browser test",
    )?;
    let log = tracker.stderr();
    for secret in shown.iter().chain([&password]) {
        assert!(!log.contains(secret.as_str()), "{secret} in the log: {log}");
    }
    crate::support::stop_cleanly(tracker);
    Ok(())
}

/// Drives the pages; answers the credentials they showed.
async fn drive(addr: SocketAddr, password: &str, port: u16, profile: &Path) -> [String; 3] {
    let browser = browser(port, profile).await;
    let base = format!("http://{addr}");

    // Not logged in: the page sends us to the login.
    browser.goto(&format!("{base}/admin/")).await.unwrap();
    assert_eq!(
        path_once(&browser, "input[name=password]").await,
        "/admin/login"
    );
    look(&browser, "01-login").await;
    // The user field starts empty: the first owner is `admin`.
    fill(&browser, "input[name=user]", "admin").await;
    fill(&browser, "input[name=password]", "not the password").await;
    click(&browser, "form button[type=submit]").await;
    assert!(
        text_of(&browser, ".error")
            .await
            .contains("Wrong user or password")
    );
    fill(&browser, "input[name=user]", "admin").await;
    fill(&browser, "input[name=password]", password).await;
    click(&browser, "form button[type=submit]").await;
    // One space (the first start's): the login lands on its dashboard.
    assert_eq!(
        path_once(&browser, "form.logout").await,
        "/admin/spaces/default/dashboard"
    );
    browser.goto(&format!("{base}/admin/")).await.unwrap();
    assert_eq!(path_once(&browser, "form.inline").await, "/admin/");
    look(&browser, "02-spaces").await;

    // A new space: its credentials are shown once.
    fill(&browser, "input[name=name]", "shop").await;
    click(&browser, "form.inline button").await;
    let first_secret = text_of(&browser, "#secret").await;
    assert!(first_secret.starts_with("trk_sk_"), "{first_secret}");
    let ingest_token = text_of(&browser, "#ingest").await;
    assert!(ingest_token.starts_with("trk_it_"), "{ingest_token}");
    look(&browser, "03-space-created").await;

    // Rotate its secret and read the new one from the page.
    browser
        .goto(&format!("{base}/admin/spaces/shop"))
        .await
        .unwrap();
    click(&browser, "#rotate-secret").await;
    let secret = text_of(&browser, "#new-credential").await;
    assert!(
        secret.starts_with("trk_sk_") && secret != first_secret,
        "{secret}"
    );
    look(&browser, "04-keys-rotated").await;

    // That secret works on the API, and the event shows in the feed page.
    let response = send(
        addr,
        &Request::post(
            "/events",
            Some(&secret),
            r#"{"event":"deposit","uid":"browser-click-1","value":"12.50","currency":"EUR"}"#,
        ),
    )
    .await;
    assert_queued(&response);
    browser
        .goto(&format!("{base}/admin/spaces/shop/events"))
        .await
        .unwrap();
    let feed = text_of(&browser, "#events tbody").await;
    assert!(
        feed.contains("deposit") && feed.contains("browser-click-1") && feed.contains("12.50 EUR"),
        "{feed}"
    );
    look(&browser, "05-events").await;

    links_postback_stats(&browser, &base).await;
    destinations(&browser, &base).await;
    settings_and_telegram(&browser, &base, addr, &secret).await;
    costs(&browser, &base, addr, &secret, profile.parent().unwrap()).await;
    charts(&browser, &base, addr, &secret).await;
    rejections_and_logout(&browser, &base, addr, &secret, &ingest_token).await;
    browser.client.close().await.unwrap();
    [first_secret, ingest_token, secret]
}

/// The pages that build on a space with one deposit: links, the postback builder, stats.
async fn links_postback_stats(browser: &Browser, base: &str) {
    // A tracking link, created and listed with its public address.
    browser
        .goto(&format!("{base}/admin/spaces/shop/links"))
        .await
        .unwrap();
    // A refused link comes back as it was typed, the error beside the slug.
    fill(browser, "input[name=slug]", "spring fb").await;
    fill(browser, "input[name=bot]", "shop_bot").await;
    fill(browser, "input[name=campaign_name]", "spring-sale").await;
    click(browser, "form.stack button").await;
    let fault = text_of(browser, "label:has(input[name=slug]) .fault").await;
    assert!(fault.contains("slug"), "{fault}");
    let kept = browser
        .find(Locator::Css("input[name=campaign_name]"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(kept.as_deref(), Some("spring-sale"));
    look(browser, "06-links-refused").await;
    fill(browser, "input[name=slug]", "spring-fb").await;
    click(browser, "form.stack button").await;
    assert!(
        text_of(browser, "#created-url")
            .await
            .ends_with("/l/spring-fb")
    );
    look(browser, "06-links").await;

    // The postback URL builder.
    browser
        .goto(&format!("{base}/admin/spaces/shop/postback"))
        .await
        .unwrap();
    click(browser, "form.stack button").await;
    let url = text_of(browser, "#postback-url").await;
    assert!(
        url.contains("/e?token=INGEST_TOKEN&event=deposit&uid={aff_sub}&value={payout}"),
        "{url}"
    );
    look(browser, "07-postback").await;

    browser
        .goto(&format!("{base}/admin/spaces/shop/stats?by=day&days=7"))
        .await
        .unwrap();
    let stats = text_of(browser, "#stats tbody").await;
    assert!(stats.contains("12.50 EUR"), "{stats}");
    look(browser, "08-stats").await;

    // The dashboard: totals against the week before, the funnel, the chart with its table for
    // screen readers, the campaigns sorted by a column's link.
    browser
        .goto(&format!("{base}/admin/spaces/shop/dashboard?days=7"))
        .await
        .unwrap();
    let totals = text_of(browser, "#totals tbody").await;
    assert!(totals.contains("12.50 EUR"), "{totals}");
    assert_eq!(
        browser
            .find_all(fantoccini::Locator::Css("#chart-clicks rect.clicks"))
            .await
            .unwrap()
            .len(),
        7,
        "a bar a day"
    );
    click(browser, "#sort a:nth-child(4)").await;
    url_with(browser, "sort=first_deposits").await;
    look(browser, "09-dashboard").await;
}

/// The Destinations page: a webhook created (its signing secret shown once), tested with the
/// remote's answer shown, and the deposit's delivery in the log.
async fn destinations(browser: &Browser, base: &str) {
    let receiver = crate::support::receiver::Receiver::start().await;
    browser
        .goto(&format!("{base}/admin/spaces/shop/destinations"))
        .await
        .unwrap();
    // One kind at a time: the kind first, then only its fields.
    assert!(
        browser
            .find_all(Locator::Css("input[name=url], input[name=pixel_id]"))
            .await
            .unwrap()
            .is_empty()
    );
    click(browser, "nav.kinds a[href*='kind=meta_capi']").await;
    let hint = text_of(browser, "#new-meta_capi #pixel_id-hint").await;
    assert!(hint.contains("Events Manager"), "{hint}");
    assert!(
        browser
            .find_all(Locator::Css("input[name=url], input[name=pixel_code]"))
            .await
            .unwrap()
            .is_empty(),
        "no other kind's field"
    );
    look(browser, "10-destination-meta-form").await;
    click(browser, "nav.kinds a[href*='kind=webhook']").await;
    text_of(browser, "#new-webhook").await;
    fill(browser, "input[name=name]", "crm").await;
    fill(browser, "input[name=url]", &receiver.url("/hook")).await;
    click(browser, "form.stack button").await;
    let secret = text_of(browser, "#signing-secret").await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    look(browser, "10-destination-created").await;
    click(browser, ".card form[action$='/test'] button").await;
    let result = text_of(browser, "#test-result").await;
    assert!(
        result.contains("delivered") && result.contains("HTTP 200"),
        "{result}"
    );
    assert!(!browser.source().await.unwrap().contains(&secret));
    look(browser, "11-destination-tested").await;
    assert!(
        receiver
            .received()
            .iter()
            .any(|r| r.header("webhook-signature").is_some()),
        "the test reached the receiver"
    );
}

/// The Settings page changes the space's attribution, as the API sees it; an event by Telegram
/// id then shows in the feed as attributed by it.
async fn settings_and_telegram(browser: &Browser, base: &str, addr: SocketAddr, secret: &str) {
    browser
        .goto(&format!("{base}/admin/spaces/shop/settings"))
        .await
        .unwrap();
    browser
        .find(Locator::Css("select[name=attribution]"))
        .await
        .unwrap()
        .select_by_value("last_touch")
        .await
        .unwrap();
    click(browser, "form.stack button").await;
    assert!(text_of(browser, ".notice").await.contains("Saved"));
    let chosen = text_of(browser, "select[name=attribution] option[selected]").await;
    assert_eq!(chosen, "The last click that reached the bot");
    look(browser, "12-settings").await;
    let space = send(
        addr,
        &Request::get("/space").header("Authorization", format!("Bearer {secret}")),
    )
    .await;
    assert_eq!(space.json()["settings"]["attribution"], "last_touch");

    let post = |path: &'static str, body: String| async move {
        send(addr, &Request::post(path, Some(secret), &body))
            .await
            .json()
    };
    let uid = post("/clicks", r#"{"campaign_name":"tg-campaign"}"#.to_owned()).await["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    post("/bind", format!(r#"{{"uid":"{uid}","tg_id":77}}"#)).await;
    let event = post(
        "/events",
        r#"{"event":"registration","tg_id":77}"#.to_owned(),
    )
    .await;
    assert_eq!(event["attributed_by"], "tg_id", "{event}");
    browser
        .goto(&format!("{base}/admin/spaces/shop/events"))
        .await
        .unwrap();
    let feed = text_of(browser, "#events tbody").await;
    assert!(
        feed.contains("(by Telegram id)") && feed.contains("tg-campaign") && feed.contains("77"),
        "{feed}"
    );
    look(browser, "13-events-by-telegram-id").await;

    // The dashboard's campaign opens its drill-down: two more clicks of the campaign through a
    // link, from two ads of one ad set.
    for ad in ["video-1", "carousel-summer-2026"] {
        let body = format!(
            r#"{{"campaign_name":"tg-campaign","link_slug":"spring-fb","raw_query":"utm_content={ad}&utm_term=women-25-34"}}"#
        );
        post("/clicks", body).await;
    }
    browser
        .goto(&format!("{base}/admin/spaces/shop/dashboard?days=7"))
        .await
        .unwrap();
    click(browser, "#campaigns a[href*='campaign=tg%2Dcampaign']").await;
    assert_eq!(text_of(browser, "#campaign").await, "tg-campaign");
    // The range is kept.
    url_with(browser, "from=").await;
    let links = text_of(browser, "#links tbody").await;
    assert!(
        links.contains("spring-fb") && links.contains("(none)"),
        "{links}"
    );
    let ads = text_of(browser, "#ads tbody").await;
    assert!(ads.contains("carousel-summer-2026"), "{ads}");
    click(browser, "#ads-sort a:nth-child(1)").await;
    url_with(browser, "sort=ads.group").await;
    let days = text_of(browser, "#days tbody").await;
    assert!(days.contains('1'), "{days}");
    look(browser, "14-campaign-drill-down").await;
}

/// The Costs page: a CSV file chosen in the file input and uploaded, the import's report shown
/// and the costs in `GET /costs`; a file with a bad row named by its line, and nothing imported.
async fn costs(browser: &Browser, base: &str, addr: SocketAddr, secret: &str, dir: &Path) {
    let listed = async || {
        send(
            addr,
            &Request::get("/costs").header("Authorization", format!("Bearer {secret}")),
        )
        .await
        .json()["costs"]
            .as_array()
            .unwrap()
            .len()
    };
    let upload = async |name: &str, text: &str| {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        browser
            .goto(&format!("{base}/admin/spaces/shop/costs"))
            .await
            .unwrap();
        browser
            .find(Locator::Css("input[type=file]"))
            .await
            .unwrap()
            .send_keys(file.to_str().unwrap())
            .await
            .unwrap();
        click(browser, "form[enctype] button").await;
    };
    upload(
        "meta.csv",
        "Campaign name,Day,Amount spent (USD)\nspring-sale,2026-11-24,40.00\n\
         spring-sale,2026-11-25,35.50\ntg-campaign,2026-11-25,12\n",
    )
    .await;
    let report = text_of(browser, "#imported").await;
    assert!(
        report.contains(
            "3 rows: 3 costs set, 0 removed, over 2 days (2026-11-24 to 2026-11-25) and 2 campaigns"
        ),
        "{report}"
    );
    assert_eq!(listed().await, 3);
    // The page lists the days the file named.
    let table = text_of(browser, "#costs tbody").await;
    assert!(
        table.contains("spring-sale") && table.contains("35.50") && table.contains("tg-campaign"),
        "{table}"
    );
    look(browser, "15-costs-imported").await;
    upload(
        "bad.csv",
        "day,campaign_name,amount,currency\n2026-11-26,spring-sale,5,USD\n2026-11-27,spring-sale,-1,USD\n",
    )
    .await;
    let error = text_of(browser, ".error").await;
    assert!(error.contains("line 3: amount"), "{error}");
    assert_eq!(listed().await, 3);
    look(browser, "16-costs-refused").await;
    // A day's spend typed in: the day is today's to begin with, the currency the reporting one.
    let day_form = "form[action$='/costs/day']";
    fill(
        browser,
        &format!("{day_form} input[name=day]"),
        "11/26/2026",
    )
    .await;
    fill(
        browser,
        &format!("{day_form} input[name=campaign_name]"),
        "spring-sale",
    )
    .await;
    fill(browser, &format!("{day_form} input[name=amount]"), "20.00").await;
    click(browser, &format!("{day_form} button")).await;
    let set = text_of(browser, "#spend-set").await;
    assert_eq!(set, "Set: 20.00 USD for spring-sale on 2026-11-26.");
    assert_eq!(listed().await, 4);
    look(browser, "16b-costs-day-spend").await;
}

/// The dashboard's charts over 14 days of first deposits and costs (and today's clicks): axes
/// with dates and values at both widths, each day's numbers on hover. A picture of the charts
/// at each width goes to `chart-375.png` and `chart-1280.png`, and the dashboard on a desktop's
/// screen to `admin-page.png` (the README's), under `target/admin-screenshots/`, or into `docs/`
/// with `TRACKER_DOCS_PICTURES=1` (a run changes no file of the repository unless asked).
async fn charts(browser: &Browser, base: &str, addr: SocketAddr, secret: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let post = async |path: &str, body: String| {
        let r = send(addr, &Request::post(path, Some(secret), &body)).await;
        assert_eq!(r.status, 200, "{path} {body}: {}", r.text());
    };
    for _ in 0..9 {
        post("/clicks", r#"{"campaign_name":"spring-sale"}"#.to_owned()).await;
    }
    let mut tg = 7_000_000_u64;
    for d in 0..14_u64 {
        let at = now - d * 86_400_000 - 3_600_000;
        let day = jiff::Timestamp::from_millisecond(i64::try_from(at).unwrap())
            .unwrap()
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .date();
        for _ in 0..=(d * 7 % 5) {
            tg += 1;
            let value = 20 + (tg * 13) % 40;
            post(
                "/events",
                format!(r#"{{"event":"deposit","tg_id":{tg},"value":"{value}","currency":"USD","occurred_at_ms":{at}}}"#),
            )
            .await;
        }
        let amount = 40 + (d * 17) % 35;
        post(
            "/costs",
            format!(r#"{{"day":"{day}","campaign_name":"spring-sale","amount":"{amount}","currency":"USD"}}"#),
        )
        .await;
    }
    let today = jiff::Timestamp::from_millisecond(i64::try_from(now).unwrap())
        .unwrap()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .date();
    let first = today.checked_sub(jiff::Span::new().days(13)).unwrap();
    browser
        .goto(&format!(
            "{base}/admin/spaces/shop/dashboard?from={first}&to={today}"
        ))
        .await
        .unwrap();
    let money = text_of(browser, "#chart-money-usd figcaption").await;
    assert!(money.contains("Revenue and cost by day, USD"), "{money}");
    let hover = browser
        .find(Locator::Css("#chart-money-usd g:last-of-type title"))
        .await
        .unwrap()
        .html(true)
        .await
        .unwrap();
    assert!(
        hover.contains("revenue") && hover.contains("USD"),
        "{hover}"
    );
    look(browser, "18-dashboard-charts").await;
    let docs = if std::env::var_os("TRACKER_DOCS_PICTURES").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
    } else {
        screenshots()
    };
    for (width, _, mobile) in SCREENS {
        // Tall enough for all the charts in one picture.
        browser.screen(width, 3000, mobile).await;
        let charts = browser.find(Locator::Css("#charts")).await.unwrap();
        // The dates on the axis: a narrow screen writes fewer of them, never none.
        let shown = browser
            .execute(
                "return [...document.querySelectorAll('#chart-clicks text.date')]\
                 .filter((t) => t.getClientRects().length > 0).length;",
                vec![],
            )
            .await
            .unwrap();
        assert!(shown.as_u64().unwrap() >= 3, "{width} px: {shown} dates");
        let png = charts.screenshot().await.unwrap();
        std::fs::write(docs.join(format!("chart-{width}.png")), png).unwrap();
    }
    // The README's picture: the dashboard as a desktop's screen first shows it.
    let (width, height, mobile) = SCREENS[1];
    browser.screen(width, height, mobile).await;
    let png = browser.screenshot().await.unwrap();
    std::fs::write(docs.join("admin-page.png"), png).unwrap();
    let (width, height, mobile) = SCREENS[0];
    browser.screen(width, height, mobile).await;
}

/// Refused requests in the rejection log, then logging out refuses the pages.
async fn rejections_and_logout(
    browser: &Browser,
    base: &str,
    addr: SocketAddr,
    secret: &str,
    ingest_token: &str,
) {
    // A postback whose network left a macro unreplaced, and a refused POST: both in the log,
    // the postback's query with its token redacted.
    let postback = format!(
        "/e?token={ingest_token}&event=deposit&uid=browser-click-1&value={{payout}}&eid=tx-1"
    );
    assert_eq!(send(addr, &Request::get(&postback)).await.status, 422);
    let refused = send(
        addr,
        &Request::post(
            "/events",
            Some(secret),
            r#"{"event":"deposit","value":"ten"}"#,
        ),
    )
    .await;
    assert_eq!(refused.status, 422);
    // Rejections are written with the writer's next commit: a write makes sure it happened.
    let contact = r#"{"event":"contact","uid":"browser-click-2"}"#;
    assert_queued(&send(addr, &Request::post("/events", Some(secret), contact)).await);
    browser
        .goto(&format!("{base}/admin/spaces/shop/rejections"))
        .await
        .unwrap();
    let log = text_of(browser, "table tbody").await;
    assert!(
        log.contains("POST /events") && log.contains("GET /e") && log.contains("invalid_value"),
        "{log}"
    );
    assert!(
        log.contains("value={payout}") && !log.contains(ingest_token),
        "{log}"
    );
    look(browser, "17-rejections").await;

    // Logged out, the pages are refused.
    click(browser, "form.logout button").await;
    assert_eq!(
        path_once(browser, "input[name=password]").await,
        "/admin/login"
    );
    browser
        .goto(&format!("{base}/admin/spaces/shop/events"))
        .await
        .unwrap();
    assert_eq!(
        path_once(browser, "input[name=password]").await,
        "/admin/login"
    );
}
