//! The admin page's second factor over HTTP, against the real server and its manual clock: set
//! up on the account page from the key the page shows, then asked after the password on its own
//! form (a step either side accepted, two refused, a code never twice, a recovery code once,
//! the half-login bounded in time and tries), and an owner's requirement leading a user without
//! one to set it up before anything else.

use crate::admin_page::{cookie_of, csrf_of, form, get_page, log_in, logged_in, post_form};
use crate::support::{NOW_MS, Response, TestServer, app_on};
use tracker::clock::Clock as _;
use tracker::domain::totp::{STEP_S, code_of_step};

const PASSWORD: &str = "correct horse battery staple";
const STEP_MS: u64 = STEP_S * 1000;

/// The text of the element with id `id`.
fn text_of(page: &Response, id: &str) -> String {
    let text = page.text();
    let marker = format!("id=\"{id}\"");
    let at = text
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id}: {text}"));
    let from = at + text[at..].find('>').unwrap() + 1;
    text[from..from + text[from..].find("</").unwrap()].to_owned()
}

/// The secret behind the key a page shows (base32 in groups), as an app that cannot scan
/// takes it typed in.
fn secret_shown(page: &Response) -> Vec<u8> {
    let key: String = text_of(page, "totp-secret").split_whitespace().collect();
    totp_rs::Secret::try_from_base32(&key)
        .expect("the key is base32")
        .as_bytes()
        .to_vec()
}

/// The recovery codes a page shows, once.
fn recovery_codes(page: &Response) -> Vec<String> {
    let text = page.text();
    let at = text
        .find("id=\"recovery-codes\"")
        .expect("the recovery codes");
    text[at..at + text[at..].find("</ul>").unwrap()]
        .split("<code>")
        .skip(1)
        .map(|c| c[..c.find('<').unwrap()].to_owned())
        .collect()
}

/// The step the server's clock is in now.
fn step_now(server: &TestServer) -> u64 {
    server.clock.now_ms() / STEP_MS
}

/// The code of the step `drift` steps from the server's now.
fn code_at(server: &TestServer, secret: &[u8], drift: i64) -> String {
    code_of_step(secret, step_now(server).checked_add_signed(drift).unwrap())
}

/// Turns the logged-in session's second factor on from its account page: the secret and the
/// recovery codes.
async fn turn_on(server: &TestServer, session: &str) -> (Vec<u8>, Vec<String>) {
    let account = get_page(server, Some(session), "/admin/account").await;
    assert_eq!(account.status, 200, "{}", account.text());
    assert!(account.text().contains("<svg"), "a QR code is drawn");
    let secret = secret_shown(&account);
    // The same key however often the page is loaded, until it is on.
    let again = get_page(server, Some(session), "/admin/account").await;
    assert_eq!(secret_shown(&again), secret);
    let csrf = csrf_of(&account);
    let on = |code: String| {
        post_form(
            server,
            Some(session),
            form(
                "/admin/account/second-factor",
                &format!("csrf={csrf}&code={code}"),
            ),
        )
    };
    // A wrong code turns nothing on.
    let wrong = on(code_at(server, &secret, 2)).await;
    assert_eq!(wrong.status, 422, "{}", wrong.text());
    assert!(
        wrong.text().contains("Nothing was changed"),
        "{}",
        wrong.text()
    );
    let turned = on(code_at(server, &secret, 0)).await;
    assert_eq!(turned.status, 200, "{}", turned.text());
    let codes = recovery_codes(&turned);
    assert_eq!(codes.len(), 10, "{}", turned.text());
    let account = get_page(server, Some(session), "/admin/account").await;
    assert!(
        account.text().contains("10 recovery codes left"),
        "{}",
        account.text()
    );
    (secret, codes)
}

/// The password step: the half-login's cookie, which is no session.
async fn password_step(server: &TestServer, user: &str) -> String {
    let response = log_in(server, user, PASSWORD).await;
    assert_eq!(response.status, 303, "{}", response.text());
    assert_eq!(response.header("location"), Some("/admin/login/code"));
    let half = cookie_of(&response);
    assert!(half.starts_with("tracker_second="), "{half}");
    // The password alone gives no session.
    let spaces = get_page(server, Some(&half), "/admin/").await;
    assert_eq!(spaces.status, 303);
    assert_eq!(spaces.header("location"), Some("/admin/login"));
    half
}

/// Sends `code` on the half-login's form.
async fn send_code(server: &TestServer, half: &str, code: &str) -> Response {
    let page = get_page(server, Some(half), "/admin/login/code").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let csrf = csrf_of(&page);
    post_form(
        server,
        Some(half),
        form("/admin/login/code", &format!("csrf={csrf}&code={code}")),
    )
    .await
}

/// Whether `response` is a completed login: a session that opens the spaces page.
async fn is_logged_in(server: &TestServer, response: &Response) -> bool {
    if response.status != 303 {
        return false;
    }
    let session = cookie_of(response);
    session.starts_with("tracker_admin=")
        && get_page(server, Some(&session), "/admin/").await.status == 200
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_asked_after_the_password_one_step_either_side_and_only_once() {
    let server = TestServer::start().await;
    let session = logged_in(&server).await;
    let (secret, _) = turn_on(&server, &session).await;
    server.clock.advance(10 * STEP_MS);

    // One step before now, now, and one after, each in a login of its own.
    for drift in [-1, 0, 1] {
        let half = password_step(&server, "admin").await;
        let answer = send_code(&server, &half, &code_at(&server, &secret, drift)).await;
        assert!(
            is_logged_in(&server, &answer).await,
            "{drift}: {}",
            answer.text()
        );
        server.clock.advance(3 * STEP_MS);
    }

    // Two steps away either side: refused, and the same form takes the right code after.
    let half = password_step(&server, "admin").await;
    for drift in [-2, 2] {
        let answer = send_code(&server, &half, &code_at(&server, &secret, drift)).await;
        assert_eq!(answer.status, 401, "{drift}: {}", answer.text());
        assert!(
            answer.text().contains("This code is wrong"),
            "{}",
            answer.text()
        );
    }
    let code = code_at(&server, &secret, 0);
    let answer = send_code(&server, &half, &code).await;
    assert!(is_logged_in(&server, &answer).await, "{}", answer.text());

    // The same code again, within its step: refused (a code is accepted once).
    let half = password_step(&server, "admin").await;
    let replay = send_code(&server, &half, &code).await;
    assert_eq!(replay.status, 401, "{}", replay.text());
    // An older code still within the drift: refused too, being older than the last used.
    let older = send_code(&server, &half, &code_at(&server, &secret, -1)).await;
    assert_eq!(older.status, 401, "{}", older.text());

    let audit = app_on(&server.store, NOW_MS)
        .audit(tracker::domain::audit::AuditFilter {
            space: None,
            who: Some("admin".to_owned()),
            since_ms: None,
        })
        .await
        .unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"second factor failed"), "{actions:?}");
    assert!(actions.contains(&"account second-factor"), "{actions:?}");
    let secret_text = tracker::domain::totp::secret_text(&secret);
    for entry in &audit {
        let shown = format!("{entry:?}");
        assert!(
            !shown.contains(&secret_text) && !shown.contains(&code),
            "{shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_code_logs_in_once_and_wrong_codes_end_the_half_login() {
    let server = TestServer::start().await;
    let session = logged_in(&server).await;
    let (_, codes) = turn_on(&server, &session).await;

    let half = password_step(&server, "admin").await;
    // As typed from paper: upper case, a space for the dash.
    let typed = codes[3].to_uppercase().replace('-', "+");
    let answer = send_code(&server, &half, &typed).await;
    assert!(is_logged_in(&server, &answer).await, "{}", answer.text());
    let account = get_page(&server, Some(&cookie_of(&answer)), "/admin/account").await;
    assert!(
        account.text().contains("9 recovery codes left"),
        "{}",
        account.text()
    );

    let half = password_step(&server, "admin").await;
    let again = send_code(&server, &half, &codes[3]).await;
    assert_eq!(again.status, 401, "{}", again.text());
    // Four more wrong codes: the fifth wrong one ends the half-login, and the password is
    // asked again.
    for _ in 0..3 {
        let wrong = send_code(&server, &half, "000000").await;
        assert_eq!(wrong.status, 401);
    }
    let page = get_page(&server, Some(&half), "/admin/login/code").await;
    let csrf = csrf_of(&page);
    let last = post_form(
        &server,
        Some(&half),
        form(
            "/admin/login/code",
            &format!("csrf={csrf}&code=zzzzz-zzzzz"),
        ),
    )
    .await;
    assert_eq!(last.status, 401, "{}", last.text());
    assert!(
        last.text().contains("Too many wrong codes"),
        "{}",
        last.text()
    );
    let gone = get_page(&server, Some(&half), "/admin/login/code").await;
    assert_eq!(gone.header("location"), Some("/admin/login"));

    // A half-login lasts five minutes: then its right code is not taken.
    let half = password_step(&server, "admin").await;
    server.clock.advance(tracker::web::session::HALF_LOGIN_MS);
    let late = send_code_unchecked(&server, &half, &codes[4]).await;
    assert_eq!(late.status, 401, "{}", late.text());
    assert!(late.text().contains("took too long"), "{}", late.text());
}

/// Sends `code` on a half-login's form whose page may be gone, with a token of its time.
async fn send_code_unchecked(server: &TestServer, half: &str, code: &str) -> Response {
    post_form(
        server,
        Some(half),
        form("/admin/login/code", &format!("csrf=0&code={code}")),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_requiring_it_leads_a_user_without_one_to_set_it_up_first() {
    let server = TestServer::start().await;
    logged_in(&server).await;
    let app = app_on(&server.store, NOW_MS);
    app.require_second_factor(true).await.unwrap();

    let half = password_step(&server, "admin").await;
    let page = get_page(&server, Some(&half), "/admin/login/code").await;
    assert!(
        page.text().contains("Set up your second factor"),
        "{}",
        page.text()
    );
    assert!(page.text().contains("<svg"), "{}", page.text());
    let secret = secret_shown(&page);
    let wrong = send_code(&server, &half, &code_at(&server, &secret, 3)).await;
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    let csrf = csrf_of(&page);
    let on = post_form(
        &server,
        Some(&half),
        form(
            "/admin/login/code",
            &format!("csrf={csrf}&code={}", code_at(&server, &secret, 0)),
        ),
    )
    .await;
    assert_eq!(on.status, 200, "{}", on.text());
    assert_eq!(recovery_codes(&on).len(), 10);
    let session = cookie_of(&on);
    assert!(session.starts_with("tracker_admin="), "{session}");
    let account = get_page(&server, Some(&session), "/admin/account").await;
    assert_eq!(account.status, 200);
    assert!(account.text().contains("it stays on"), "{}", account.text());

    // The next login asks for its code, as any user's with one.
    server.clock.advance(STEP_MS);
    let half = password_step(&server, "admin").await;
    let page = get_page(&server, Some(&half), "/admin/login/code").await;
    assert!(page.text().contains("Your code"), "{}", page.text());

    // Left to each user again, with none set up: the password alone logs in.
    app.require_second_factor(false).await.unwrap();
    app.turn_off_second_factor("admin").await.unwrap();
    let plain = log_in(&server, "admin", PASSWORD).await;
    assert!(is_logged_in(&server, &plain).await, "{}", plain.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_it_off_takes_a_current_code_and_a_reset_clears_it() {
    let server = TestServer::start().await;
    let session = logged_in(&server).await;
    let (secret, _) = turn_on(&server, &session).await;
    server.clock.advance(STEP_MS);
    let account = get_page(&server, Some(&session), "/admin/account").await;
    let csrf = csrf_of(&account);
    let off = |code: String| {
        post_form(
            &server,
            Some(&session),
            form(
                "/admin/account/second-factor/off",
                &format!("csrf={csrf}&code={code}"),
            ),
        )
    };
    let refused = off("123456".to_owned()).await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(refused.text().contains("Turn it off"), "{}", refused.text());
    let done = off(code_at(&server, &secret, 0)).await;
    assert_eq!(done.status, 303, "{}", done.text());
    let account = get_page(&server, Some(&session), "/admin/account").await;
    assert!(account.text().contains("Turn it on"), "{}", account.text());

    // On again, then reset: the user's new password logs in without a code.
    let (_, _) = turn_on(&server, &session).await;
    let app = app_on(&server.store, NOW_MS);
    app.reset_user("admin").await.unwrap();
    let user = app.user("admin").await.unwrap().unwrap();
    assert!(user.second_factor.is_none());
}
