//! The second factor in a real browser, against the real `tracker` binary and its real clock:
//! the owner turns it on from the account page, typing a code computed here from the key the
//! page shows, keeps the recovery codes, logs out, and logs in again with the password and then
//! a code on its own form. The setup page, the recovery codes, the code form and the Users page
//! are looked at on a phone and a desktop (`target/admin-screenshots/2N-*.png`), as every admin
//! page is.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::admin_browser::{
    Failure, browser, browser_installed, click, fill, look, path_once, run_caught, start_driver,
    text_of,
};
use crate::support::TrackerProcess;
use tracker::domain::totp::{STEP_S, code_of_step};

/// The code of the step `ahead` steps after now, by the machine's clock as the server's is.
fn code_now(secret: &[u8], ahead: u64) -> String {
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    code_of_step(secret, now_s / STEP_S + ahead)
}

#[test]
fn a_login_with_a_password_and_a_totp_code_works_in_a_real_browser() -> Result<(), Failure> {
    if !browser_installed() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium and chromedriver could not be installed: the second factor was NOT tested \
             in a browser"
        );
        return Ok(());
    }
    let dir = tempfile::tempdir().unwrap();
    let tracker = TrackerProcess::start_with_env(dir.path(), &[]);
    let password = tracker
        .admin_password
        .clone()
        .expect("the first start's password");
    let (_driver, port) = start_driver();
    let profile = dir.path().join("profile");
    let key = run_caught(
        drive(tracker.addr, &password, port, &profile),
        "the second factor's browser test",
    )?;
    let log = tracker.stderr();
    assert!(!log.contains(&key), "the key in the log: {log}");
    crate::support::stop_cleanly(tracker);
    Ok(())
}

/// Drives the pages; answers the key the setup page showed.
async fn drive(addr: SocketAddr, password: &str, port: u16, profile: &Path) -> String {
    let browser = browser(port, profile).await;
    let base = format!("http://{addr}");
    let log_in = || async {
        browser.goto(&format!("{base}/admin/login")).await.unwrap();
        fill(&browser, "input[name=user]", "admin").await;
        fill(&browser, "input[name=password]", password).await;
        click(&browser, "form button[type=submit]").await;
    };
    log_in().await;
    path_once(&browser, "form.logout").await;

    // The account page, reached by the user's name at the top: the QR code and the key.
    click(&browser, "header a.account").await;
    assert_eq!(path_once(&browser, "#totp-secret").await, "/admin/account");
    let key: String = text_of(&browser, "#totp-secret")
        .await
        .split_whitespace()
        .collect();
    let secret = totp_rs::Secret::try_from_base32(&key)
        .expect("the key is base32")
        .as_bytes()
        .to_vec();
    look(&browser, "21-account-setup").await;
    fill(&browser, "input[name=code]", &code_now(&secret, 0)).await;
    click(&browser, "form.stack button[type=submit]").await;
    let codes = text_of(&browser, "#recovery-codes").await;
    assert_eq!(codes.split_whitespace().count(), 10, "{codes}");
    look(&browser, "22-recovery-codes").await;

    // Log out, and in again: the password, then the code on its own form. The code of the next
    // step, since the one of this step was used to turn it on (and drift allows one step).
    click(&browser, "form.logout button").await;
    log_in().await;
    assert_eq!(
        path_once(&browser, "input[name=code]").await,
        "/admin/login/code"
    );
    look(&browser, "23-login-code").await;
    fill(&browser, "input[name=code]", &code_now(&secret, 1)).await;
    click(&browser, "form.stack button[type=submit]").await;
    assert_eq!(
        path_once(&browser, "form.logout").await,
        "/admin/spaces/default/dashboard"
    );

    // The Users page: the owner, with their second factor on.
    browser.goto(&format!("{base}/admin/users")).await.unwrap();
    let users = text_of(&browser, "#users tbody").await;
    assert!(users.contains("admin") && users.contains("on"), "{users}");
    look(&browser, "24-users").await;
    browser.client.close().await.unwrap();
    key
}
