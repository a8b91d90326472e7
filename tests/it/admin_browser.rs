//! The admin page in a real browser: Debian's headless Chromium driven through chromedriver
//! (`WebDriver`, from Rust with `fantoccini`), against the real `tracker` binary. The test logs
//! in, creates a space, rotates its secret and reads the new one off the page, posts an event
//! with it, sees the event in the feed, and logs out; at a phone's width (375 px) no page is
//! wider than the screen. A screenshot of each page is saved under
//! `target/admin-screenshots/` for a person to look at.
//!
//! Chromium and chromedriver are installed from Debian's packages when missing (as root, or
//! through sudo). Where they cannot be, the test says so and, under `CI=true`, fails.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::support::{Request, TrackerProcess, assert_queued, send};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser is there, installing it if it is not.
fn browser_installed() -> bool {
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

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
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

fn start_driver() -> (Driver, u16) {
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
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

async fn browser(port: u16, profile: &Path) -> Client {
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
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session with chromium")
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/admin-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves a screenshot and checks the page fits a phone's width.
async fn look(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
    let widths = client
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            vec![],
        )
        .await
        .unwrap();
    let (page, screen) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
    assert!(
        page <= screen,
        "{name}: the page is {page} px wide on a {screen} px screen"
    );
}

/// The text of the element `css` once it is on the page (a click's page may still be loading).
async fn text_of(client: &Client, css: &str) -> String {
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} did not appear: {e}"))
        .text()
        .await
        .unwrap()
}

/// The path of the page once an element of it (`css`) is there.
async fn path_once(client: &Client, css: &str) -> String {
    text_of(client, css).await;
    client.current_url().await.unwrap().path().to_owned()
}

async fn fill(client: &Client, css: &str, value: &str) {
    let field = client.find(Locator::Css(css)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

#[test]
fn the_admin_page_works_in_a_real_browser() {
    if !browser_installed() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium and chromedriver could not be installed: the admin page is not tested"
        );
        eprintln!("SKIPPED the browser test: chromium and chromedriver could not be installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tracker = TrackerProcess::start(dir.path());
    let password = tracker
        .admin_password
        .clone()
        .expect("the first start's password");
    let (_driver, port) = start_driver();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(drive(
        tracker.addr,
        &password,
        port,
        &dir.path().join("profile"),
    ));
    crate::support::stop_cleanly(tracker);
}

async fn drive(addr: SocketAddr, password: &str, port: u16, profile: &Path) {
    let client = browser(port, profile).await;
    let base = format!("http://{addr}");

    // Not logged in: the page sends us to the login.
    client.goto(&format!("{base}/admin/")).await.unwrap();
    assert_eq!(
        path_once(&client, "input[name=password]").await,
        "/admin/login"
    );
    look(&client, "01-login").await;
    fill(&client, "input[name=password]", "not the password").await;
    click(&client, "form button[type=submit]").await;
    assert!(
        text_of(&client, ".error")
            .await
            .contains("Wrong user or password")
    );
    fill(&client, "input[name=password]", password).await;
    click(&client, "form button[type=submit]").await;
    assert_eq!(path_once(&client, "form.logout").await, "/admin/");
    look(&client, "02-spaces").await;

    // A new space: its credentials are shown once.
    fill(&client, "input[name=name]", "shop").await;
    click(&client, "form.inline button").await;
    let first_secret = text_of(&client, "#secret").await;
    assert!(first_secret.starts_with("trk_sk_"), "{first_secret}");
    look(&client, "03-space-created").await;

    // Rotate its secret and read the new one from the page.
    client
        .goto(&format!("{base}/admin/spaces/shop"))
        .await
        .unwrap();
    click(&client, "#rotate-secret").await;
    let secret = text_of(&client, "#new-credential").await;
    assert!(
        secret.starts_with("trk_sk_") && secret != first_secret,
        "{secret}"
    );
    look(&client, "04-keys-rotated").await;

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
    client
        .goto(&format!("{base}/admin/spaces/shop/events"))
        .await
        .unwrap();
    let feed = text_of(&client, "#events tbody").await;
    assert!(
        feed.contains("deposit") && feed.contains("browser-click-1") && feed.contains("12.50 EUR"),
        "{feed}"
    );
    look(&client, "05-events").await;

    links_postback_stats(&client, &base).await;
    rejections_and_logout(&client, &base, addr, &secret).await;
    client.close().await.unwrap();
}

/// The pages that build on a space with one deposit: links, the postback builder, stats.
async fn links_postback_stats(client: &Client, base: &str) {
    // A tracking link, created and listed with its public address.
    client
        .goto(&format!("{base}/admin/spaces/shop/links"))
        .await
        .unwrap();
    fill(client, "input[name=slug]", "spring-fb").await;
    fill(client, "input[name=bot]", "shop_bot").await;
    fill(client, "input[name=campaign_name]", "spring-sale").await;
    click(client, "form.stack button").await;
    assert!(
        text_of(client, "#created-url")
            .await
            .ends_with("/l/spring-fb")
    );
    look(client, "06-links").await;

    // The postback URL builder.
    client
        .goto(&format!("{base}/admin/spaces/shop/postback"))
        .await
        .unwrap();
    click(client, "form.stack button").await;
    let url = text_of(client, "#postback-url").await;
    assert!(
        url.contains("/e?token=INGEST_TOKEN&event=deposit&uid={aff_sub}&value={payout}"),
        "{url}"
    );
    look(client, "07-postback").await;

    client
        .goto(&format!("{base}/admin/spaces/shop/stats?by=day&days=7"))
        .await
        .unwrap();
    let stats = text_of(client, "#stats tbody").await;
    assert!(stats.contains("12.50 EUR"), "{stats}");
    look(client, "08-stats").await;
}

/// A refused postback in the rejection log, then logging out refuses the pages.
async fn rejections_and_logout(client: &Client, base: &str, addr: SocketAddr, secret: &str) {
    // A refused postback shows in the rejection log.
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
    client
        .goto(&format!("{base}/admin/spaces/shop/rejections"))
        .await
        .unwrap();
    let log = text_of(client, "table tbody").await;
    assert!(
        log.contains("POST /events") && log.contains("invalid_value"),
        "{log}"
    );
    look(client, "09-rejections").await;

    // Logged out, the pages are refused.
    click(client, "form.logout button").await;
    assert_eq!(
        path_once(client, "input[name=password]").await,
        "/admin/login"
    );
    client
        .goto(&format!("{base}/admin/spaces/shop/events"))
        .await
        .unwrap();
    assert_eq!(
        path_once(client, "input[name=password]").await,
        "/admin/login"
    );
}
