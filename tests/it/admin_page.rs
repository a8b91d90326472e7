//! The admin page over HTTP, against the real server: login, sessions, CSRF, the security
//! headers, the login throttle, and `tracker admin password`. `admin_browser.rs` drives the same
//! pages in a real browser.

use std::time::Instant;

use crate::support::{Request, Response, TestServer, TrackerProcess, assert_queued, send};

const PASSWORD: &str = "correct horse battery staple";

fn form(target: &str, body: &str) -> (String, String) {
    (target.to_owned(), body.to_owned())
}

async fn post_form(
    server: &TestServer,
    cookie: Option<&str>,
    (target, body): (String, String),
) -> Response {
    let mut request = Request {
        method: "POST",
        target: &target,
        headers: vec![(
            "Content-Type",
            "application/x-www-form-urlencoded".to_owned(),
        )],
        body: Some(body.as_bytes()),
    };
    if let Some(cookie) = cookie {
        request = request.header("Cookie", cookie);
    }
    server.send(&request).await
}

async fn get_page(server: &TestServer, cookie: Option<&str>, target: &str) -> Response {
    let mut request = Request::get(target);
    if let Some(cookie) = cookie {
        request = request.header("Cookie", cookie);
    }
    server.send(&request).await
}

/// The `name=value` of a `Set-Cookie` header.
fn cookie_of(response: &Response) -> String {
    let set = response.header("set-cookie").expect("a Set-Cookie header");
    set.split(';').next().unwrap().to_owned()
}

/// The CSRF token in a page's forms.
fn csrf_of(page: &Response) -> String {
    let text = page.text();
    let start = text
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + "name=\"csrf\" value=\"".len();
    text[start..start + 32].to_owned()
}

/// A login attempt with `user` and `password`, as the login form sends it.
async fn log_in(server: &TestServer, user: &str, password: &str) -> Response {
    let body = format!("user={user}&password={}", password.replace(' ', "+"));
    post_form(server, None, form("/admin/login", &body)).await
}

async fn logged_in(server: &TestServer) -> String {
    tracker::admin::set_password(&server.store, PASSWORD.to_owned())
        .await
        .unwrap();
    let response = log_in(server, "admin", PASSWORD).await;
    assert_eq!(response.status, 303, "{}", response.text());
    assert_eq!(response.header("location"), Some("/admin/"));
    cookie_of(&response)
}

async fn space_names(server: &TestServer) -> Vec<String> {
    tracker::admin::list(&server.store)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.space)
        .collect()
}

#[tokio::test]
async fn pages_need_a_session_and_every_page_has_the_security_headers() {
    let server = TestServer::start().await;
    let response = get_page(&server, None, "/admin/").await;
    assert_eq!(response.status, 303);
    assert_eq!(response.header("location"), Some("/admin/login"));
    for target in [
        "/admin/login",
        "/admin/",
        "/admin/spaces/a/events",
        "/admin/style.css",
    ] {
        let response = get_page(&server, None, target).await;
        assert_eq!(
            response
                .header("content-security-policy")
                .map(|v| v.starts_with("default-src 'self'")),
            Some(true),
            "{target}"
        );
        assert_eq!(response.header("x-frame-options"), Some("DENY"), "{target}");
        assert_eq!(
            response.header("cache-control"),
            Some("no-store"),
            "{target}"
        );
    }
    // A POST without a session changes nothing.
    let response = post_form(&server, None, form("/admin/spaces", "name=c&csrf=x")).await;
    assert_eq!(response.status, 403);
    assert!(!space_names(&server).await.contains(&"c".to_owned()));
    // `/admin` itself leads to the page.
    assert_eq!(
        get_page(&server, None, "/admin").await.header("location"),
        Some("/admin/")
    );
}

#[tokio::test]
async fn a_login_makes_a_strict_http_only_session_that_ends_at_logout_or_when_idle() {
    let server = TestServer::start().await;
    tracker::admin::set_password(&server.store, PASSWORD.to_owned())
        .await
        .unwrap();
    // A wrong password is answered slowly, and makes no session.
    let started = Instant::now();
    let wrong = log_in(&server, "admin", "wrong horse battery").await;
    assert_eq!(wrong.status, 401);
    assert!(
        started.elapsed().as_millis() >= 1000,
        "answered after {:?}",
        started.elapsed()
    );
    assert!(wrong.header("set-cookie").is_none());
    assert!(wrong.text().contains("Wrong user or password"));
    // The right password with another user name is no login either.
    assert_eq!(log_in(&server, "root", PASSWORD).await.status, 401);

    let response = log_in(&server, "admin", PASSWORD).await;
    assert_eq!(response.status, 303);
    let set = response.header("set-cookie").unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/admin"] {
        assert!(set.contains(part), "{set}");
    }
    // `public_url` is not https here, so the cookie must still reach the server.
    assert!(!set.contains("Secure"), "{set}");
    let cookie = cookie_of(&response);
    assert_eq!(
        cookie.len(),
        "tracker_admin=".len() + 32,
        "128 random bits: {cookie}"
    );

    let page = get_page(&server, Some(&cookie), "/admin/").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("/admin/spaces/a"), "{}", page.text());

    // Used within 12 hours it lives on; 12 hours idle ends it.
    server.clock.advance(12 * 3_600_000 - 1);
    assert_eq!(
        get_page(&server, Some(&cookie), "/admin/").await.status,
        200
    );
    server.clock.advance(12 * 3_600_000);
    assert_eq!(
        get_page(&server, Some(&cookie), "/admin/").await.status,
        303
    );

    // Logging out ends the session at once.
    let cookie = logged_in(&server).await;
    let csrf = csrf_of(&get_page(&server, Some(&cookie), "/admin/").await);
    let out = post_form(
        &server,
        Some(&cookie),
        form("/admin/logout", &format!("csrf={csrf}")),
    )
    .await;
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = get_page(&server, Some(&cookie), "/admin/spaces/a/events").await;
    assert_eq!(
        (after.status, after.header("location")),
        (303, Some("/admin/login"))
    );
}

#[tokio::test]
async fn a_state_changing_form_without_the_sessions_csrf_token_changes_nothing() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let csrf = csrf_of(&get_page(&server, Some(&cookie), "/admin/").await);
    for body in [
        "name=c".to_owned(),
        "name=c&csrf=".to_owned(),
        format!("name=c&csrf={}", "0".repeat(32)),
        format!("name=c&csrf={}", &csrf[..31]),
    ] {
        let response = post_form(&server, Some(&cookie), form("/admin/spaces", &body)).await;
        assert_eq!(response.status, 401, "{body}");
        assert!(response.text().contains("CSRF"), "{}", response.text());
    }
    assert!(!space_names(&server).await.contains(&"c".to_owned()));
    // The same form with the token creates the space, and shows its credentials once.
    let response = post_form(
        &server,
        Some(&cookie),
        form("/admin/spaces", &format!("name=c&csrf={csrf}")),
    )
    .await;
    assert_eq!(response.status, 200);
    assert!(response.text().contains("trk_sk_"), "{}", response.text());
    assert!(space_names(&server).await.contains(&"c".to_owned()));
    // A rotation through the page gives a secret that the API takes.
    let rotated = post_form(
        &server,
        Some(&cookie),
        form(
            "/admin/spaces/c/rotate",
            &format!("kind=secret&csrf={csrf}"),
        ),
    )
    .await;
    let text = rotated.text();
    let at = text
        .find("id=\"new-credential\">")
        .expect("the new credential")
        + "id=\"new-credential\">".len();
    let secret = &text[at..text[at..].find('<').unwrap() + at];
    assert!(secret.starts_with("trk_sk_"), "{secret}");
    let response = send(
        server.addr,
        &Request::post(
            "/events",
            Some(secret),
            r#"{"event":"contact","uid":"page-test"}"#,
        ),
    )
    .await;
    assert_queued(&response);
    // The page's own validation is the API's: a bad name is refused with the same sentence.
    let bad = post_form(
        &server,
        Some(&cookie),
        form("/admin/spaces", &format!("name=-bad&csrf={csrf}")),
    )
    .await;
    assert_eq!(bad.status, 422);
    assert!(
        bad.text().contains("a space name is 1 to 32 of a-z"),
        "{}",
        bad.text()
    );
}

#[tokio::test]
async fn logins_are_throttled_per_address_even_for_the_right_password() {
    let server = TestServer::start().await;
    tracker::admin::set_password(&server.store, PASSWORD.to_owned())
        .await
        .unwrap();
    // Four wrong, one right: the right one clears the count.
    for _ in 0..4 {
        let r = log_in(&server, "admin", "nope-nope-nope").await;
        assert_eq!(r.status, 401);
    }
    assert_eq!(log_in(&server, "admin", PASSWORD).await.status, 303);
    for _ in 0..5 {
        let r = log_in(&server, "admin", "nope-nope-nope").await;
        assert_eq!(r.status, 401);
    }
    let refused = log_in(&server, "admin", PASSWORD).await;
    assert_eq!(refused.status, 429);
    assert!(refused.header("retry-after").is_some());
    assert!(refused.header("set-cookie").is_none());
    // After the window, the right password works again.
    server.clock.advance(15 * 60 * 1000);
    assert_eq!(log_in(&server, "admin", PASSWORD).await.status, 303);
}

/// `tracker admin password`: through the server's socket while it runs, from standard input;
/// a password outside the rule is refused and changes nothing.
#[test]
fn the_admin_password_command_sets_the_password_a_login_checks() {
    let dir = tempfile::tempdir().unwrap();
    let first = TrackerProcess::start(dir.path());
    let generated = first
        .admin_password
        .clone()
        .expect("a generated password on first start");
    assert_eq!(generated.len(), 24);
    let set = |password: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tracker"))
            .arg("--config")
            .arg(dir.path().join("empty.toml"))
            .arg("--data")
            .arg(dir.path().join("t.redb"))
            .args(["admin", "password"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(
            &mut child.stdin.take().unwrap(),
            format!("{password}\n").as_bytes(),
        )
        .unwrap();
        child.wait_with_output().unwrap()
    };
    let short = set("eleven-char");
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 12"));
    let ok = set("twelve-chars");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let login = |password: &str| {
        let body = format!("user=admin&password={password}");
        runtime
            .block_on(send(
                first.addr,
                &Request {
                    method: "POST",
                    target: "/admin/login",
                    headers: vec![(
                        "Content-Type",
                        "application/x-www-form-urlencoded".to_owned(),
                    )],
                    body: Some(body.as_bytes()),
                },
            ))
            .status
    };
    assert_eq!(login("twelve-chars"), 303);
    assert_eq!(login(&generated), 401);
    // Never in the log.
    let log = first.stderr();
    assert!(
        !log.contains("twelve-chars") && !log.contains(&generated),
        "{log}"
    );
    crate::support::stop_cleanly(first);
    // A restart keeps the password and prints none.
    let again = TrackerProcess::start(dir.path());
    assert_eq!(again.admin_password, None);
    crate::support::stop_cleanly(again);
}
