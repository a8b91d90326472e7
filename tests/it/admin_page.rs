//! The admin page over HTTP, against the real server: login, sessions, CSRF (the login form's
//! and the session's), the security headers, the login throttle, and `tracker admin password`.
//! `admin_browser.rs` drives the same pages in a real browser.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Instant;

use serde_json::json;
use tracker::domain::client::Cidr;

use crate::support::{
    Connection, Request, Response, TestServer, TrackerProcess, assert_queued, assert_succeeded,
    send,
};

const PASSWORD: &str = "correct horse battery staple";

pub(crate) fn form(target: &str, body: &str) -> (String, String) {
    (target.to_owned(), body.to_owned())
}

pub(crate) async fn post_form(
    server: &TestServer,
    cookie: Option<&str>,
    (target, body): (String, String),
) -> Response {
    post_form_at(server.addr, cookie, &[], (target, body)).await
}

async fn post_form_at(
    addr: SocketAddr,
    cookie: Option<&str>,
    headers: &[(&'static str, String)],
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
    for (name, value) in headers {
        request = request.header(name, value.clone());
    }
    send(addr, &request).await
}

pub(crate) async fn get_page(server: &TestServer, cookie: Option<&str>, target: &str) -> Response {
    let mut request = Request::get(target);
    if let Some(cookie) = cookie {
        request = request.header("Cookie", cookie);
    }
    server.send(&request).await
}

/// The `name=value` of a `Set-Cookie` header.
pub(crate) fn cookie_of(response: &Response) -> String {
    let set = response.header("set-cookie").expect("a Set-Cookie header");
    set.split(';').next().unwrap().to_owned()
}

/// The whole `Set-Cookie` header that sets cookie `name`.
fn set_cookie<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.as_str())
        .find(|v| v.starts_with(&format!("{name}=")))
}

/// The CSRF token in a page's forms.
pub(crate) fn csrf_of(page: &Response) -> String {
    let text = page.text();
    let start = text
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + "name=\"csrf\" value=\"".len();
    let len = text[start..].find('"').unwrap();
    text[start..start + len].to_owned()
}

/// A login form as the page serves it: its cookie (`tracker_login=...`) and its token.
struct LoginForm {
    cookie: String,
    token: String,
}

async fn login_form(addr: SocketAddr) -> LoginForm {
    let page = send(addr, &Request::get("/admin/login")).await;
    assert_eq!(page.status, 200);
    let set = set_cookie(&page, "tracker_login").expect("the login form's cookie");
    LoginForm {
        cookie: set.split(';').next().unwrap().to_owned(),
        token: csrf_of(&page),
    }
}

fn login_body(user: &str, password: &str, token: &str) -> String {
    format!(
        "user={user}&password={}&csrf={token}",
        password.replace(' ', "+")
    )
}

/// A login attempt with `user` and `password`, as the login form sends it (its token and
/// cookie from a fresh login page).
pub(crate) async fn log_in(server: &TestServer, user: &str, password: &str) -> Response {
    log_in_at(server.addr, user, password).await
}

async fn log_in_at(addr: SocketAddr, user: &str, password: &str) -> Response {
    let login = login_form(addr).await;
    let body = login_body(user, password, &login.token);
    post_form_at(addr, Some(&login.cookie), &[], form("/admin/login", &body)).await
}

/// The text of the element with id `id` (a credential shown once).
fn credential_in(page: &Response, id: &str) -> String {
    let text = page.text();
    let marker = format!("id=\"{id}\">");
    let at = text
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id}: {text}"))
        + marker.len();
    text[at..at + text[at..].find('<').unwrap()].to_owned()
}

/// Sets the admin password to [`PASSWORD`], as `tracker admin password` does.
async fn set_password(server: &TestServer) {
    crate::support::app_on(&server.store, crate::support::NOW_MS)
        .set_password(PASSWORD.to_owned())
        .await
        .unwrap();
}

pub(crate) async fn logged_in(server: &TestServer) -> String {
    set_password(server).await;
    let response = log_in(server, "admin", PASSWORD).await;
    assert_eq!(response.status, 303, "{}", response.text());
    assert_eq!(response.header("location"), Some("/admin/"));
    cookie_of(&response)
}

async fn space_names(server: &TestServer) -> Vec<String> {
    crate::support::app_on(&server.store, crate::support::NOW_MS)
        .spaces()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.space)
        .collect()
}

/// The headers every admin answer carries.
#[track_caller]
fn assert_security_headers(response: &Response, what: &str) {
    assert_eq!(
        response
            .header("content-security-policy")
            .map(|v| v.starts_with("default-src 'self'")),
        Some(true),
        "{what}"
    );
    assert_eq!(response.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(response.header("cache-control"), Some("no-store"), "{what}");
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
        assert_security_headers(&get_page(&server, None, target).await, target);
    }
    // Logged in: a page, a page that is not there, a refused form, a login refused.
    let cookie = logged_in(&server).await;
    for target in ["/admin/", "/admin/spaces/default", "/admin/nowhere"] {
        assert_security_headers(&get_page(&server, Some(&cookie), target).await, target);
    }
    let refused = post_form(&server, Some(&cookie), form("/admin/spaces", "name=d")).await;
    assert_security_headers(&refused, "a form without its CSRF token");
    let login = post_form(&server, None, form("/admin/login", "user=admin")).await;
    assert_security_headers(&login, "a login without its form's token");
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
async fn a_form_over_16_kib_is_refused_413_as_an_admin_page() {
    let server = TestServer::start().await;
    // `user=` and padding, with the login form's cookie (without it no body is read): exactly
    // the limit is read (and refused for its missing token), one byte more is not read at all.
    let login = login_form(server.addr).await;
    let body = |len: usize| format!("user={}", "a".repeat(len - "user=".len()));
    let inside = post_form(
        &server,
        Some(&login.cookie),
        form("/admin/login", &body(16 * 1024)),
    )
    .await;
    assert_eq!(inside.status, 403, "{}", inside.text());
    assert!(inside.text().contains("expired"), "{}", inside.text());
    let over = post_form(
        &server,
        Some(&login.cookie),
        form("/admin/login", &body(16 * 1024 + 1)),
    )
    .await;
    assert_eq!(over.status, 413, "{}", over.text());
    assert_security_headers(&over, "a form over the limit");
    assert_eq!(
        over.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(over.text().contains("larger than the limit of 16384 bytes"));
}

#[tokio::test]
async fn a_login_makes_a_strict_http_only_session_that_ends_at_logout_or_when_idle() {
    let server = TestServer::start().await;
    set_password(&server).await;
    // A wrong password is answered slowly, and makes no session.
    let started = Instant::now();
    let wrong = log_in(&server, "admin", "wrong horse battery").await;
    assert_eq!(wrong.status, 401);
    assert!(
        started.elapsed().as_millis() >= 1000,
        "answered after {:?}",
        started.elapsed()
    );
    assert!(set_cookie(&wrong, "tracker_admin").is_none());
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

    // A new password ends every session made with the old one.
    let cookie = logged_in(&server).await;
    assert_eq!(
        get_page(&server, Some(&cookie), "/admin/").await.status,
        200
    );
    crate::support::app_on(&server.store, crate::support::NOW_MS)
        .set_password("a-whole-new-password".to_owned())
        .await
        .unwrap();
    assert_eq!(
        get_page(&server, Some(&cookie), "/admin/")
            .await
            .header("location"),
        Some("/admin/login")
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
        assert_eq!(response.status, 403, "{body}");
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
    let created_secret = credential_in(&response, "secret");
    assert!(created_secret.starts_with("trk_sk_"), "{created_secret}");
    assert!(space_names(&server).await.contains(&"c".to_owned()));
    // Its times are in its zone.
    let zone = Request::patch(
        "/space",
        Some(&created_secret),
        r#"{"time_zone":"Asia/Kolkata"}"#,
    );
    assert_eq!(send(server.addr, &zone).await.status, 200);
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
    let secret = credential_in(&rotated, "new-credential");
    assert!(secret.starts_with("trk_sk_"), "{secret}");
    // Shown once: no page shows either secret again, only the first characters of each.
    for target in ["/admin/", "/admin/spaces/c"] {
        let again = get_page(&server, Some(&cookie), target).await.text();
        for shown_once in [&created_secret, &secret] {
            assert!(!again.contains(shown_once.as_str()), "{target}: {again}");
        }
    }
    let keys = get_page(&server, Some(&cookie), "/admin/spaces/c")
        .await
        .text();
    let shown = &secret[..tracker::domain::credential::PUBLIC_LEN];
    assert!(keys.contains(&format!("{shown}…")), "{keys}");
    // The replaced secret's grace ends at the time the rotation named, in the space's zone.
    let until = keys
        .split_once("in grace until ")
        .map_or_else(|| panic!("{keys}"), |(_, rest)| &rest[..19]);
    assert!(
        rotated
            .text()
            .contains(&format!("keeps working until {until} (Asia/Kolkata)")),
        "{until}: {}",
        rotated.text()
    );
    let response = send(
        server.addr,
        &Request::post(
            "/events",
            Some(&secret),
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

/// The Settings page shows a space's settings and changes them through the API's check and
/// operation: a value it does not take is refused with the API's sentence, a form without the
/// session's token changes nothing, and a change is what `GET /space` reads.
#[tokio::test]
async fn the_settings_page_shows_and_changes_a_spaces_settings() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/settings").await;
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains(
            "<option value=\"first_touch\" selected>The first click that reached the bot</option>"
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"href="/admin/spaces/a/settings" aria-current="page""#),
        "{text}"
    );
    let csrf = csrf_of(&page);
    let attribution = async || {
        server
            .send(
                &Request::get("/space")
                    .header("Authorization", format!("Bearer {}", server.a.secret)),
            )
            .await
            .json()["settings"]["attribution"]
            .clone()
    };
    let post = |body: String| {
        post_form(
            &server,
            Some(&cookie),
            form("/admin/spaces/a/settings", &body),
        )
    };
    let refused = post("attribution=last_touch".to_owned()).await;
    assert_eq!(refused.status, 403);
    let bad = post(format!("attribution=sometimes&csrf={csrf}")).await;
    assert_eq!(bad.status, 422);
    assert!(
        bad.text().contains("first_touch or last_touch"),
        "{}",
        bad.text()
    );
    assert_eq!(attribution().await, "first_touch");
    let saved = post(format!("attribution=last_touch&csrf={csrf}")).await;
    assert_eq!(saved.status, 200);
    assert!(
        saved.text().contains(
            "<option value=\"last_touch\" selected>The last click that reached the bot</option>"
        ),
        "{}",
        saved.text()
    );
    assert!(saved.text().contains("Saved"), "{}", saved.text());
    assert_eq!(attribution().await, "last_touch");
    // Another space is its own; a space that is not there is a 422 page, as the API says.
    assert_eq!(
        crate::support::app_on(&server.store, crate::support::NOW_MS)
            .spaces()
            .await
            .unwrap()
            .iter()
            .find(|s| s.space == "b")
            .map(|s| s.settings.attribution.as_str()),
        Some("first_touch")
    );
    let missing = get_page(&server, Some(&cookie), "/admin/spaces/nowhere/settings").await;
    assert_eq!(missing.status, 422);
}

/// Login CSRF: another site can make a browser POST a password, so a login counts only with the
/// token of a login form this server served and the cookie that came with it.
#[tokio::test]
async fn a_login_needs_the_login_forms_token_and_its_cookie() {
    let server = TestServer::start().await;
    set_password(&server).await;
    let page = send(server.addr, &Request::get("/admin/login")).await;
    let set = set_cookie(&page, "tracker_login").expect("the login form's cookie");
    for part in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/admin/login",
        "Max-Age=3600",
    ] {
        assert!(set.contains(part), "{set}");
    }
    let login = login_form(server.addr).await;
    let other = login_form(server.addr).await;
    assert_ne!(login.token, other.token);
    let right = login_body("admin", PASSWORD, &login.token);
    let attempt = |cookie: Option<String>, body: String| {
        let addr = server.addr;
        async move { post_form_at(addr, cookie.as_deref(), &[], form("/admin/login", &body)).await }
    };
    let refusals = [
        (
            "no token, no cookie",
            None,
            login_body("admin", PASSWORD, ""),
        ),
        (
            "no token",
            Some(login.cookie.clone()),
            login_body("admin", PASSWORD, ""),
        ),
        ("no cookie", None, right.clone()),
        (
            "another form's token",
            Some(login.cookie.clone()),
            login_body("admin", PASSWORD, &other.token),
        ),
        (
            "another form's cookie",
            Some(other.cookie.clone()),
            right.clone(),
        ),
        (
            "a made-up pair",
            Some("tracker_login=1.00".to_owned()),
            login_body("admin", PASSWORD, &"0".repeat(64)),
        ),
    ];
    for (what, cookie, body) in refusals {
        let refused = attempt(cookie, body).await;
        assert_eq!(refused.status, 403, "{what}");
        assert!(set_cookie(&refused, "tracker_admin").is_none(), "{what}");
        assert!(
            refused.text().contains("log in again"),
            "{what}: {}",
            refused.text()
        );
        // The refusal is a login page with a fresh form, so a person can simply try again.
        assert!(set_cookie(&refused, "tracker_login").is_some(), "{what}");
    }
    // None of these was counted as an attempt: the right pair still logs in, four wrong
    // passwords later (the sixth attempt of the address would be throttled). The wrong ones
    // are for names of their own: three for one name from this address would meet the bound of
    // one user at one address, which is another test's.
    for n in 0..4 {
        let wrong = login_body(&format!("user-{n}"), "nope-nope-nope", &login.token);
        assert_eq!(attempt(Some(login.cookie.clone()), wrong).await.status, 401);
    }
    let ok = attempt(Some(login.cookie.clone()), right.clone()).await;
    assert_eq!(ok.status, 303, "{}", ok.text());
    assert!(set_cookie(&ok, "tracker_admin").is_some());
    assert!(
        set_cookie(&ok, "tracker_login").is_some_and(|c| c.contains("Max-Age=0")),
        "the login form's cookie is deleted once it has served"
    );
    // A form is good for an hour.
    server.clock.advance(3_600_000 - 1);
    assert_eq!(
        attempt(Some(login.cookie.clone()), right.clone())
            .await
            .status,
        303
    );
    server.clock.advance(1);
    assert_eq!(attempt(Some(login.cookie.clone()), right).await.status, 403);
}

/// A login attempt through a trusted proxy that says it comes from `address`.
async fn log_in_from(addr: SocketAddr, address: &str, user: &str, password: &str) -> Response {
    let login = login_form(addr).await;
    let body = login_body(user, password, &login.token);
    let forwarded = [("X-Forwarded-For", address.to_owned())];
    post_form_at(
        addr,
        Some(&login.cookie),
        &forwarded,
        form("/admin/login", &body),
    )
    .await
}

async fn behind_a_trusted_proxy() -> TestServer {
    let server = TestServer::start_with(|settings| {
        settings.trusted_proxies = vec![Cidr::parse("127.0.0.1").unwrap()];
    })
    .await;
    set_password(&server).await;
    server
}

/// The overall bound: past 30 attempts a minute from all addresses together, an address that
/// has failed is refused `429`, and one that has not is checked after a pause; so a flood of
/// guesses from many addresses cannot keep the argon2id check busy, nor lock the admin out.
#[tokio::test]
async fn logins_from_many_addresses_meet_the_overall_bound() {
    let server = behind_a_trusted_proxy().await;
    let addr = server.addr;
    let from = |n: u32, user: &'static str, password: &'static str| async move {
        let address = std::net::Ipv4Addr::from(0xC000_0200 + n).to_string();
        log_in_from(addr, &address, user, password).await
    };
    // 30 attempts from 30 addresses, at once. They count when they start, before any check, so
    // a wrong user name (whose password is not checked, which keeps this test quick in a debug
    // build) counts like a wrong password.
    let answers = futures_util::future::join_all((0..30).map(|n| from(n, "root", PASSWORD))).await;
    assert!(answers.iter().all(|a| a.status == 401));
    // The 31st attempt in the minute, from an address that has failed, is not checked.
    let refused = from(0, "admin", PASSWORD).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(refused.header("retry-after").is_some());
    // From an address that has not, it is checked (after a pause).
    assert_eq!(from(100, "root", PASSWORD).await.status, 401);
    server.clock.advance(60_000);
    assert_eq!(from(0, "admin", PASSWORD).await.status, 303);
}

/// The lock-out as it was reproduced: 30 wrong logins from six addresses must not keep the
/// admin, at a new address, from logging in with the right password.
#[tokio::test]
async fn failed_logins_elsewhere_never_lock_out_the_right_password() {
    let server = behind_a_trusted_proxy().await;
    for n in 0..30 {
        let address = format!("198.51.100.{}", n % 6);
        // A name of its own per attempt from an address: five of one name from one address
        // would meet the bound of one user at one address before the address's own.
        let nobody = format!("nobody-{}", n / 6);
        let r = log_in_from(server.addr, &address, &nobody, "guess-guess-guess").await;
        assert_eq!(r.status, 401, "attempt {n}: {}", r.text());
    }
    let admin = log_in_from(server.addr, "203.0.113.9", "admin", PASSWORD).await;
    assert_eq!(admin.status, 303, "{}", admin.text());
    // Those six are each at their own bound of 5.
    let r = log_in_from(server.addr, "198.51.100.1", "admin", PASSWORD).await;
    assert_eq!(r.status, 429);
}

/// One user from one address is bounded sooner than the address (3 attempts, then `429`, also
/// for the right password), while the same user from another address, and another user from
/// this one, are not held back: failed logins elsewhere never lock out the right password.
#[tokio::test]
async fn logins_are_throttled_per_user_at_an_address_and_not_elsewhere() {
    let server = behind_a_trusted_proxy().await;
    let guesser = "198.51.100.7";
    for _ in 0..3 {
        let r = log_in_from(server.addr, guesser, "admin", "guess-guess-guess").await;
        assert_eq!(r.status, 401, "{}", r.text());
    }
    let refused = log_in_from(server.addr, guesser, "admin", PASSWORD).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(refused.header("retry-after").is_some());
    // Another user from the guesser's address: checked (the address has had 3 of its 5).
    let other = log_in_from(server.addr, guesser, "anna", "guess-guess-guess").await;
    assert_eq!(other.status, 401, "{}", other.text());
    // The admin from their own address: logged in.
    let admin = log_in_from(server.addr, "203.0.113.9", "admin", PASSWORD).await;
    assert_eq!(admin.status, 303, "{}", admin.text());
    // The pair's window over, its right password works again.
    server.clock.advance(15 * 60 * 1000);
    let later = log_in_from(server.addr, guesser, "admin", PASSWORD).await;
    assert_eq!(later.status, 303, "{}", later.text());
}

/// IPv6: a client holds a whole /64, so its attempts are counted per /64, not per address.
#[tokio::test]
async fn ipv6_logins_are_counted_per_64_prefix() {
    let server = behind_a_trusted_proxy().await;
    for n in 1..=5 {
        let address = format!("2001:db8:1:2::{n}");
        // A name of its own per attempt, so that the /64's own bound is what is met (one name
        // five times from one /64 would meet the bound of one user at one address first).
        let nobody = format!("nobody-{n}");
        let r = log_in_from(server.addr, &address, &nobody, "guess-guess-guess").await;
        assert_eq!(r.status, 401);
    }
    let same_64 = log_in_from(server.addr, "2001:db8:1:2:ffff::77", "admin", PASSWORD).await;
    assert_eq!(same_64.status, 429, "{}", same_64.text());
    let next_64 = log_in_from(server.addr, "2001:db8:1:3::1", "admin", PASSWORD).await;
    assert_eq!(next_64.status, 303, "{}", next_64.text());
}

/// A session also ends 7 days after its login, however busy it has been.
#[tokio::test]
async fn a_session_ends_seven_days_after_its_login_even_when_used() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let hour = 3_600_000;
    // Used every 11 hours: never idle for 12.
    for _ in 0..15 {
        server.clock.advance(11 * hour);
        assert_eq!(
            get_page(&server, Some(&cookie), "/admin/").await.status,
            200
        );
    }
    // 165 hours so far; 3 more is one millisecond short of 7 days.
    server.clock.advance(3 * hour - 1);
    assert_eq!(
        get_page(&server, Some(&cookie), "/admin/").await.status,
        200
    );
    server.clock.advance(1);
    let ended = get_page(&server, Some(&cookie), "/admin/").await;
    assert_eq!(
        (ended.status, ended.header("location")),
        (303, Some("/admin/login"))
    );
}

/// A credential whose parameter name is percent-encoded (`%74oken=`) authenticates like
/// `token=`, so it is redacted like it: in `GET /rejections` and on the Rejections page.
#[tokio::test]
async fn a_percent_encoded_token_name_is_redacted_in_the_rejection_log_and_its_page() {
    let server = TestServer::start().await;
    let token = server.a.ingest_token.clone();
    let encoded = token.replace('_', "%5F");
    let r = server
        .send(&Request::get(&format!("/e?%74oken={encoded}&event=nope")))
        .await;
    assert_eq!(r.status, 422, "{}", r.text());
    let secret_part = &token["trk_it_".len()..];
    // A commit (of another space) writes the log's pending entries.
    assert_queued(
        &server
            .post_as(&server.b, "/events", r#"{"event":"contact"}"#)
            .await,
    );
    let log = server.read_as(&server.a, "/rejections").await;
    assert_eq!(log.json()["rejections"].as_array().unwrap().len(), 1);
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/rejections").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("invalid_event"), "{}", page.text());
    for (what, text) in [("GET /rejections", log.text()), ("the page", page.text())] {
        for shown in [secret_part.to_owned(), secret_part.replace('_', "%5F")] {
            assert!(!text.contains(&shown), "{what} shows the token: {text}");
        }
    }
}

/// Refused login forms are logged at most once a minute per address, with a count of the
/// lines left out: anyone can send them, and the log must not fill with them.
#[test]
fn refused_login_forms_are_logged_once_per_address_and_interval() {
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..5 {
            let r = post_form_at(
                process.addr,
                Some("tracker_login=1.ff"),
                &[],
                form("/admin/login", "user=admin&password=x&csrf=00"),
            )
            .await;
            assert_eq!(r.status, 403);
        }
    });
    // Each answer's access-log line is written after its warning, if any.
    let answered = |log: &str| {
        log.lines()
            .filter(|l| l.contains("admin page") && l.contains("403"))
            .count()
    };
    let log = process.log_when(|log| answered(log) >= 5);
    assert_eq!(answered(&log), 5, "{log}");
    let lines = log
        .lines()
        .filter(|l| l.contains("admin login refused"))
        .count();
    assert_eq!(lines, 1, "{log}");
}

#[tokio::test]
async fn logins_are_throttled_per_address_even_for_the_right_password() {
    let server = TestServer::start().await;
    set_password(&server).await;
    // Wrong passwords for names of their own (each user is also bounded at one address, after
    // three, which is another test's): four wrong, one right, and the right one clears the
    // count.
    for n in 0..4 {
        let r = log_in(&server, &format!("user-{n}"), "nope-nope-nope").await;
        assert_eq!(r.status, 401);
    }
    assert_eq!(log_in(&server, "admin", PASSWORD).await.status, 303);
    for n in 0..5 {
        let r = log_in(&server, &format!("user-{n}"), "nope-nope-nope").await;
        assert_eq!(r.status, 401);
    }
    let refused = log_in(&server, "admin", PASSWORD).await;
    assert_eq!(refused.status, 429);
    assert!(refused.header("retry-after").is_some());
    assert!(set_cookie(&refused, "tracker_admin").is_none());
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
    assert_succeeded(&ok);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let login = |password: &str| runtime.block_on(log_in_at(first.addr, "admin", password));
    assert_eq!(login(&generated).status, 401);
    let session = login("twelve-chars");
    assert_eq!(session.status, 303);
    // A space made on the page, and a key rotated there: the credentials shown once.
    let cookie = cookie_of(&session);
    let shown_once = runtime.block_on(async {
        let spaces = send(
            first.addr,
            &Request::get("/admin/").header("Cookie", &cookie),
        )
        .await;
        let csrf = csrf_of(&spaces);
        let post = |target: &str, body: String| {
            post_form_at(first.addr, Some(&cookie), &[], form(target, &body))
        };
        let created = post("/admin/spaces", format!("name=logged&csrf={csrf}")).await;
        let rotated = post(
            "/admin/spaces/logged/rotate",
            format!("kind=ingest&csrf={csrf}"),
        )
        .await;
        [
            credential_in(&created, "secret"),
            credential_in(&created, "ingest"),
            credential_in(&rotated, "new-credential"),
            csrf,
        ]
    });
    // Never in the log: no password, no credential, no session id or CSRF token.
    let log = first.stderr();
    assert!(log.contains("admin logged in"), "{log}");
    for secret in [
        "twelve-chars",
        &generated,
        &cookie["tracker_admin=".len()..],
    ]
    .into_iter()
    .chain(shown_once.iter().map(String::as_str))
    {
        assert!(!log.contains(secret), "{secret} in the log: {log}");
    }
    crate::support::stop_cleanly(first);
    // A restart keeps the password and prints none.
    let again = TrackerProcess::start(dir.path());
    assert_eq!(again.admin_password, None);
    crate::support::stop_cleanly(again);
}

/// Whether the dashboard's campaign table sorted by `by` lists `loud` before `quiet`.
async fn loud_first(server: &TestServer, cookie: &str, by: &str) -> bool {
    let target = format!("/admin/spaces/a/dashboard?days=7&sort={by}");
    let text = get_page(server, Some(cookie), &target).await.text();
    text.find(">loud<").unwrap() < text.find(">quiet<").unwrap()
}

/// The dashboard: a period's totals against the one before, a bar a day, campaigns sorted by the
/// column asked for, and the table as a CSV whose cells are never formulas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_compares_periods_sorts_and_downloads_safe_csv() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    // A click of `=HYPERLINK(...)` and one of `quiet` a week ago, three of `loud` today.
    let now = tracker::clock::Clock::now_ms(&server.clock);
    server.clock.set(now - 7 * 86_400_000);
    server
        .click(&server.a, r#"{"campaign_name":"=HYPERLINK(\"x\")"}"#)
        .await;
    server
        .click(&server.a, r#"{"campaign_name":"quiet"}"#)
        .await;
    server.clock.set(now);
    for _ in 0..3 {
        server.click(&server.a, r#"{"campaign_name":"loud"}"#).await;
    }
    let quiet = server
        .click(&server.a, r#"{"campaign_name":"quiet"}"#)
        .await;
    let r = server
        .post_event(&format!(
            r#"{{"event":"deposit","uid":"{quiet}","value":"5"}}"#
        ))
        .await;
    assert_eq!(r.status, 200);
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/dashboard?days=7").await;
    assert_eq!(page.status, 200);
    let text = page.text();
    // 4 clicks this week, 2 the week before: +100%.
    assert!(text.contains(">4</td>") && text.contains("+100%"), "{text}");
    let clicks_chart = between(&text, "id=\"chart-clicks\"", "</figure>");
    assert_eq!(
        clicks_chart.matches("<rect class=\"clicks\"").count(),
        7,
        "a bar a day"
    );
    // Its axes: values 0 to 4 on the grid, today's date under its bar (written at either
    // width), today's 4 clicks on hover.
    let today = tracker::domain::cost::date_of(tracker::domain::stats::local_day(
        &jiff::tz::TimeZone::UTC,
        tracker::domain::stats::quarter_of(now),
    ));
    // The plot is 146 px tall from y = 18, a value written 3 px above its line.
    for (value, y) in [(0, 161), (1, 124), (2, 88), (3, 51), (4, 15)] {
        assert!(
            clicks_chart.contains(&format!("class=\"value\" x=\"2\" y=\"{y}\">{value}</text>")),
            "{value}: {clicks_chart}"
        );
    }
    assert!(!clicks_chart.contains(">5</text>"), "{clicks_chart}");
    let today_label = today.strftime("%b %-d").to_string();
    assert!(
        clicks_chart.contains(&format!(
            "class=\"date\" x=\"100.000%\" y=\"184\" text-anchor=\"end\">{today_label}</text>"
        )),
        "{today_label}: {clicks_chart}"
    );
    assert!(
        clicks_chart.contains(&format!("<title>{today}: 4 clicks</title>")),
        "{clicks_chart}"
    );
    // No cost in the range: no chart of revenue against cost; the figures in a table.
    assert!(!text.contains("id=\"chart-money"), "{text}");
    assert!(
        text.contains(&format!(
            "<td>{today}</td><td>4</td><td>1</td><td>5 USD</td><td>—</td>"
        )),
        "{text}"
    );
    assert!(!text.contains("No clicks in this range."), "{text}");
    assert!(
        loud_first(&server, &cookie, "clicks").await,
        "3 clicks before 1"
    );
    assert!(
        !loud_first(&server, &cookie, "first_deposits").await,
        "1 first deposit before none"
    );
    // Yesterday had nothing.
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/dashboard?days=y").await;
    assert!(page.text().contains("Nothing counted in this range."));
    assert!(page.text().contains("No clicks in this range."));
    // The CSV of 30 days: a header, every campaign, the formula made text.
    let csv = get_page(
        &server,
        Some(&cookie),
        "/admin/spaces/a/dashboard?days=30&format=csv",
    )
    .await;
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    let text = csv.text();
    assert!(
        text.starts_with("campaign,clicks,registrations,first_deposits,revenue,cost,roi\n"),
        "{text}"
    );
    assert!(text.contains("\"'=HYPERLINK(\"\"x\"\")\",1,"), "{text}");
    let bad = get_page(&server, Some(&cookie), "/admin/spaces/a/dashboard?days=9").await;
    assert_eq!(bad.status, 422);
    server.stop().await;
}

/// The part of a page from `from` to the next `to` (one table of a drill-down).
fn between<'t>(text: &'t str, from: &str, to: &str) -> &'t str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("{from} in {text}"));
    let rest = &text[start..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

/// A campaign of the dashboard opens its drill-down (the range kept): its totals, and its links,
/// ads, ad sets and days, each sorted by the column asked for and downloadable as a CSV whose
/// cells are never formulas; only that campaign's clicks count, and its days carry its costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_drills_down_into_links_ads_ad_sets_and_days() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let click = |body: &'static str| server.click(&server.a, body);
    click(r#"{"campaign_name":"spring sale","link_slug":"l1","raw_query":"utm_content=%3Dcmd"}"#)
        .await;
    for _ in 0..2 {
        click(r#"{"campaign_name":"spring sale","link_slug":"l2","raw_query":"utm_content=video&utm_term=women"}"#)
            .await;
    }
    click(r#"{"campaign_name":"quiet","link_slug":"l3"}"#).await;
    let today = server.read_as(&server.a, "/stats?by=day").await.json()["groups"][0]["group"]
        .as_str()
        .unwrap()
        .to_owned();
    let cost = format!(
        r#"{{"day":"{today}","campaign_name":"spring sale","amount":"9.50","currency":"USD"}}"#
    );
    assert_eq!(server.post_as(&server.a, "/costs", &cost).await.status, 200);
    let page = |query: String| {
        let (server, cookie) = (&server, &cookie);
        async move {
            get_page(
                server,
                Some(cookie),
                &format!("/admin/spaces/a/dashboard?{query}"),
            )
            .await
        }
    };
    let dashboard = page("days=7".into()).await.text();
    let range = between(&dashboard, "from=", "&");
    assert!(
        dashboard.contains("&amp;campaign=spring%20sale\">spring sale</a>"),
        "{dashboard}"
    );
    let drill = page("days=7&campaign=spring%20sale".into()).await;
    assert_eq!(drill.status, 200);
    let text = drill.text();
    assert!(
        text.contains(&format!("href=\"/admin/spaces/a/dashboard?{range}")),
        "{text}"
    );
    // 3 clicks this week, none the week before.
    assert!(
        text.contains("<td class=\"n\" data-label=\"This period\">3</td>"),
        "{text}"
    );
    let links = between(&text, "id=\"links\"", "</table>");
    assert!(
        links.find(">l2<").unwrap() < links.find(">l1<").unwrap(),
        "{links}"
    );
    assert!(!text.contains(">l3<"), "another campaign's link: {text}");
    assert!(
        !links.contains("data-label=\"Cost\""),
        "a link has no cost: {links}"
    );
    let ads = between(&text, "id=\"ads\"", "</table>");
    assert!(ads.contains(">=cmd<") && ads.contains(">video<"), "{ads}");
    let sets = between(&text, "id=\"ad_sets\"", "</table>");
    assert!(
        sets.contains(">(none)<") && sets.contains(">women<"),
        "{sets}"
    );
    let days = between(&text, "id=\"days\"", "</table>");
    assert!(
        days.contains(&format!(">{today}<")) && days.contains("9.50 USD"),
        "{days}"
    );
    // Spent with nothing earned: a return of -100%, in the day and in the totals; the funnel's
    // rates are percentages too.
    assert!(days.contains(">-100.00%<"), "{days}");
    let totals = between(&text, "Return (ROI)", "</tr>");
    assert!(totals.contains(">-100.00%<"), "{totals}");
    assert!(
        text.contains(
            "<li><span>Clicks</span> <strong>3</strong></li><li><span>Reached the bot</span> \
             <strong>0</strong> <span class=\"muted\">0.00% of clicks</span></li>\
             <li><span>Registrations</span> <strong>0</strong> <span class=\"muted\">no clicks \
             that reached the bot</span></li>"
        ),
        "{text}"
    );
    // Sorted by name, l1 comes first; the other tables keep their order.
    let sorted = page("days=7&campaign=spring%20sale&sort=links.group".into())
        .await
        .text();
    let links = between(&sorted, "id=\"links\"", "</table>");
    assert!(
        links.find(">l1<").unwrap() < links.find(">l2<").unwrap(),
        "{links}"
    );
    drill_csv_and_refusals(&server, &cookie).await;
    server.stop().await;
}

/// The drill-down's ads as CSV, and what its page refuses.
async fn drill_csv_and_refusals(server: &TestServer, cookie: &str) {
    let page = |query: String| async move {
        get_page(
            server,
            Some(cookie),
            &format!("/admin/spaces/a/dashboard?{query}"),
        )
        .await
    };
    // The ads as CSV: a header named for ads, the formula made text.
    let csv = page("days=7&campaign=spring%20sale&format=csv&table=ads".into()).await;
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    let text = csv.text();
    assert!(
        text.starts_with("ad,clicks,registrations,first_deposits,revenue,cost,roi\n"),
        "{text}"
    );
    assert!(
        text.contains("'=cmd,1,") && text.contains("video,2,"),
        "{text}"
    );
    assert!(!text.contains("l1"), "one table: {text}");
    // A campaign with nothing: its tables are empty; a bad table or name is refused.
    let nobody = page("days=7&campaign=nobody".into()).await;
    assert_eq!(nobody.status, 200);
    assert_eq!(
        nobody
            .text()
            .matches("Nothing counted in this range.")
            .count(),
        4
    );
    let bad = page("days=7&campaign=a&format=csv&table=week".into()).await;
    assert_eq!(bad.status, 422);
    let long = format!("days=7&campaign={}", "c".repeat(257));
    assert_eq!(page(long).await.status, 422);
    let fits = format!("days=7&campaign={}", "c".repeat(256));
    assert_eq!(page(fits).await.status, 200);
}

/// The feed page filters by kind, campaign, uid and Telegram id (each by its field's rule), and
/// its link to older events keeps the filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_page_filters_by_kind_campaign_uid_and_telegram_id() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let spring = server
        .click(&server.a, r#"{"campaign_name":"spring"}"#)
        .await;
    let autumn = server
        .click(&server.a, r#"{"campaign_name":"autumn"}"#)
        .await;
    server.bind(&server.a, &autumn, 77).await;
    for (kind, uid) in [
        ("contact", &spring),
        ("deposit", &spring),
        ("deposit", &autumn),
    ] {
        let body = format!(r#"{{"event":"{kind}","uid":"{uid}","value":"1"}}"#);
        assert_eq!(server.post_event(&body).await.status, 200);
    }
    let rows = |query: &'static str| {
        let server = &server;
        let cookie = &cookie;
        async move {
            let page = get_page(
                server,
                Some(cookie),
                &format!("/admin/spaces/a/events?{query}"),
            )
            .await;
            assert_eq!(page.status, 200, "{query}: {}", page.text());
            page.text().matches("<td data-label=\"Event\">").count()
        }
    };
    assert_eq!(rows("").await, 3);
    assert_eq!(rows("kind=deposit").await, 2);
    assert_eq!(rows("campaign=spring").await, 2);
    assert_eq!(rows("kind=deposit&campaign=spring").await, 1);
    assert_eq!(rows("tg=77").await, 1);
    assert_eq!(rows("campaign=winter").await, 0);
    let uid_query = format!("/admin/spaces/a/events?uid={autumn}");
    let page = get_page(&server, Some(&cookie), &uid_query).await;
    assert_eq!(page.text().matches("<td data-label=\"Event\">").count(), 1);
    for bad in ["kind=refund", "uid=a%20b", "tg=0"] {
        let page = get_page(
            &server,
            Some(&cookie),
            &format!("/admin/spaces/a/events?{bad}"),
        )
        .await;
        assert_eq!(page.status, 422, "{bad}");
    }
    server.stop().await;
}

/// The first page after logging in: the dashboard of the only space (the real binary's first
/// start makes one, `default`); with several spaces, the list to choose from (`logged_in`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_with_one_space_lands_on_its_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let process = crate::support::TrackerProcess::start(dir.path());
    let password = process
        .admin_password
        .clone()
        .expect("printed at first start");
    let response = log_in_at(process.addr, "admin", &password).await;
    assert_eq!(response.status, 303, "{}", response.text());
    assert_eq!(
        response.header("location"),
        Some("/admin/spaces/default/dashboard")
    );
    let cookie = cookie_of(&response);
    let page = send(
        process.addr,
        &Request::get("/admin/spaces/default/dashboard").header("Cookie", &cookie),
    )
    .await;
    assert_eq!(page.status, 200, "{}", page.text());
}

/// A `multipart/form-data` body as a browser sends the costs page's form: its `csrf` field (when
/// given) and the file under `file`.
fn upload_body(csrf: Option<&str>, file: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(csrf) = csrf {
        body.extend_from_slice(
            format!(
                "--{UPLOAD_BOUNDARY}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n\
                 {csrf}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{UPLOAD_BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"costs.csv\"\r\nContent-Type: text/csv\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{UPLOAD_BOUNDARY}--\r\n").as_bytes());
    body
}

const UPLOAD_BOUNDARY: &str = "----trackerTestBoundary7MA4YWxk";

/// Logged in, on space `a`'s costs page: the session's cookie, and the page with its token.
async fn on_costs_page(server: &TestServer) -> (String, Response) {
    let cookie = logged_in(server).await;
    let page = get_page(server, Some(&cookie), "/admin/spaces/a/costs").await;
    assert_eq!(page.status, 200, "{}", page.text());
    (cookie, page)
}

async fn upload(server: &TestServer, cookie: &str, body: &[u8]) -> Response {
    upload_within(server, cookie, body, crate::support::IO_TIMEOUT).await
}

/// [`upload`], waiting at most `limit` for the answer.
async fn upload_within(
    server: &TestServer,
    cookie: &str,
    body: &[u8],
    limit: std::time::Duration,
) -> Response {
    let request = Request {
        method: "POST",
        target: "/admin/spaces/a/costs",
        headers: vec![
            (
                "Content-Type",
                format!("multipart/form-data; boundary={UPLOAD_BOUNDARY}"),
            ),
            ("Cookie", cookie.to_owned()),
        ],
        body: Some(body),
    };
    let mut conn = Connection::open(server.addr).await.expect("connect");
    conn.send_within(&request, limit)
        .await
        .unwrap_or_else(|e| panic!("POST /admin/spaces/a/costs got no response: {e}"))
}

/// Uploads `file` to space `a`'s costs page with token `csrf`; the answer must have `status`
/// and say `says`.
async fn upload_answers(
    server: &TestServer,
    cookie: &str,
    (csrf, file): (Option<&str>, &[u8]),
    status: u16,
    says: &str,
) -> Response {
    let r = upload(server, cookie, &upload_body(csrf, file)).await;
    assert_eq!(r.status, status, "{}", r.text());
    assert!(r.text().contains(says), "{says}: {}", r.text());
    r
}

/// Space `a`'s costs as `GET /costs` lists them: `day campaign amount currency`.
async fn costs_of_a(server: &TestServer) -> Vec<String> {
    server
        .list_as(&server.a, "/costs", "costs")
        .await
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                c["day"].as_str().unwrap(),
                c["campaign_name"].as_str().unwrap(),
                c["amount"].as_str().unwrap(),
                c["currency"].as_str().unwrap()
            )
        })
        .collect()
}

/// The costs page's upload goes through `tracker costs import`'s operation: both headers, a
/// report of the rows, days and campaigns read, a re-import replacing, and every refusal (a bad
/// line, no CSRF token, a file over the bound) changing nothing.
#[tokio::test]
async fn the_costs_page_imports_an_uploaded_csv_file() {
    let server = TestServer::start().await;
    let (cookie, page) = on_costs_page(&server).await;
    assert!(
        page.text().contains(r#"enctype="multipart/form-data""#),
        "{}",
        page.text()
    );
    assert!(
        page.text()
            .contains(r#"href="/admin/spaces/a/costs" aria-current="page""#)
    );
    let csrf = csrf_of(&page);

    let ours = "day,campaign_name,amount,currency\n2026-11-24,autumn,120.00,USD\n\
                2026-11-24,spring,5,USD\n2026-11-25,autumn,80,USD\n";
    let ours = (Some(csrf.as_str()), ours.as_bytes());
    upload_answers(
        &server,
        &cookie,
        ours,
        200,
        "3 rows: 3 costs set, 0 removed, over 2 days (2026-11-24 to 2026-11-25) and 2 campaigns.",
    )
    .await;
    let imported = [
        "2026-11-24 autumn 120.00 USD",
        "2026-11-24 spring 5 USD",
        "2026-11-25 autumn 80 USD",
    ];
    assert_eq!(costs_of_a(&server).await, imported);
    // The other space is untouched.
    assert_eq!(
        server.read_as(&server.b, "/costs").await.json()["costs"],
        json!([])
    );

    // A bad row: its line named, on the costs page, and nothing of the file imported.
    let bad =
        "day,campaign_name,amount,currency\n2026-11-26,autumn,1,USD\n2026-11-27,autumn,one,USD\n";
    let bad = (Some(csrf.as_str()), bad.as_bytes());
    let refused = upload_answers(
        &server,
        &cookie,
        bad,
        422,
        "line 3: amount must be a decimal number",
    )
    .await;
    assert!(
        refused.text().contains(r#"name="file""#),
        "the form is there to try again"
    );
    assert_eq!(costs_of_a(&server).await, imported);

    // Without the session's CSRF token, or with another, nothing is imported.
    let new = "day,campaign_name,amount,currency\n2026-11-28,autumn,1,USD\n";
    for token in [None, Some("0".repeat(csrf.len()))] {
        let form = (token.as_deref(), new.as_bytes());
        upload_answers(&server, &cookie, form, 403, "CSRF").await;
    }
    assert_eq!(costs_of_a(&server).await, imported);

    // No file chosen.
    let none = (Some(csrf.as_str()), b"".as_slice());
    upload_answers(&server, &cookie, none, 422, "choose a CSV file").await;
    // A file that is not UTF-8 (a spreadsheet's "CSV" in a legacy code page): refused, saying so.
    let latin1 = b"day,campaign_name,amount,currency\n2026-11-28,caf\xe9,1,USD\n";
    let latin1 = (Some(csrf.as_str()), latin1.as_slice());
    upload_answers(&server, &cookie, latin1, 422, "file is not UTF-8 text").await;
    assert_eq!(costs_of_a(&server).await, imported);

    // Meta Ads Manager's export, re-importing: its days and campaigns replaced (a day without
    // spend removes the cost), the others kept.
    let meta = "\u{feff}Reporting starts,Reporting ends,Campaign name,Day,Amount spent (EUR)\n\
                2026-11-01,2026-11-30,autumn,2026-11-24,10.50\n\
                2026-11-01,2026-11-30,spring,2026-11-24,\n";
    let meta = (Some(csrf.as_str()), meta.as_bytes());
    upload_answers(
        &server,
        &cookie,
        meta,
        200,
        "2 rows: 1 cost set, 1 removed,",
    )
    .await;
    assert_eq!(
        costs_of_a(&server).await,
        ["2026-11-24 autumn 10.50 EUR", "2026-11-25 autumn 80 USD"]
    );
}

/// The upload's bound is on the whole form: exactly 2 MiB is read and imported, a byte more is
/// refused `413` with a sentence that says the bound and what to do, and nothing is imported.
#[tokio::test]
async fn an_upload_over_two_mib_is_refused_413() {
    const LIMIT: usize = 2 * 1024 * 1024;
    let server = TestServer::start().await;
    let (cookie, page) = on_costs_page(&server).await;
    let csrf = csrf_of(&page);
    // Blank lines pad the file to the size wanted; they are no rows.
    let padded = |len: usize| {
        let csv = "day,campaign_name,amount,currency\n2026-11-24,autumn,1,USD\n";
        let frame = upload_body(Some(&csrf), csv.as_bytes()).len();
        let mut file = csv.as_bytes().to_vec();
        file.resize(csv.len() + len - frame, b'\n');
        upload_body(Some(&csrf), &file)
    };
    let over = upload(&server, &cookie, &padded(LIMIT + 1)).await;
    assert_eq!(over.status, 413, "{}", over.text());
    assert!(
        over.text()
            .contains("larger than the upload limit of 2 MiB (2097152 bytes)"),
        "{}",
        over.text()
    );
    assert_eq!(costs_of_a(&server).await, Vec::<String>::new());
    let inside = upload(&server, &cookie, &padded(LIMIT)).await;
    assert_eq!(inside.status, 200, "{}", inside.text());
    assert!(
        inside.text().contains("1 row: 1 cost set"),
        "{}",
        inside.text()
    );
    assert_eq!(costs_of_a(&server).await, ["2026-11-24 autumn 1 USD"]);
}

/// 50,000 rows of costs, about 2 MiB (the upload's bound): 100 days of 500 campaigns.
fn large_costs_file() -> String {
    let mut csv = String::from("day,campaign_name,amount,currency\n");
    let first = jiff::civil::date(2026, 8, 1);
    for d in 0..100 {
        let day = first + jiff::Span::new().days(d);
        for c in 0..500 {
            let _ = writeln!(csv, "{day},spring-sale-fb-{c:03},{}.{:02},USD", 100 + c, d);
        }
    }
    csv
}

/// A large import is read in time linear in its size: 50,000 rows (about 2 MiB) all go in, and
/// `GET /healthz` keeps answering while they are read, on a server of a single request thread
/// (this test's). Counting the lines from the file's start for every row, as once done, takes
/// minutes here. The bound is loose for a debug build on a busy machine, and the file reads too
/// fast for this test to tell whether it is read on a request thread; `docs/admin.md` has a
/// release build's measure.
#[tokio::test]
async fn a_large_import_keeps_the_server_answering() {
    let server = TestServer::start().await;
    let (cookie, page) = on_costs_page(&server).await;
    let csrf = csrf_of(&page);
    let csv = large_costs_file();
    let body = upload_body(Some(&csrf), csv.as_bytes());
    assert!(
        (1_900_000..=2 * 1024 * 1024).contains(&body.len()),
        "{}",
        body.len()
    );
    let started = Instant::now();
    // The import's own speed is not the point: in a debug build beside the rest of the suite
    // it can take longer than the usual limit, while /healthz must still answer at once.
    let mut import = std::pin::pin!(upload_within(
        &server,
        &cookie,
        &body,
        std::time::Duration::from_secs(120)
    ));
    let mut slowest = std::time::Duration::ZERO;
    let mut probes = 0;
    let answer = loop {
        tokio::select! {
            answer = &mut import => break answer,
            () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {
                let asked = Instant::now();
                let health = server.send(&Request::get("/healthz")).await;
                assert_eq!(health.status, 200, "{}", health.text());
                slowest = slowest.max(asked.elapsed());
                probes += 1;
            }
        }
    };
    let took = started.elapsed();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(
        answer
            .text()
            .contains("50000 rows: 50000 costs set, 0 removed, over 100 days (2026-08-01 to 2026-11-08) and 500 campaigns."),
        "{}",
        answer.text()
    );
    eprintln!("import of 50,000 rows: {took:?}; /healthz {probes} times, slowest {slowest:?}");
    assert!(
        slowest < std::time::Duration::from_secs(1),
        "/healthz waited {slowest:?} during the import"
    );
    let r = server
        .read_as(&server.a, "/costs?from=2026-11-08&to=2026-11-08")
        .await;
    let last_day = r.json()["costs"].as_array().unwrap().clone();
    assert_eq!(last_day.len(), 500);
    assert_eq!(last_day[499]["amount"], "599.99");
}

/// The campaigns the costs page lists, in order (`<td ... data-label="Campaign">NAME</td>`).
fn listed_campaigns(page: &Response) -> Vec<String> {
    let text = page.text();
    text.split(r#"data-label="Campaign">"#)
        .skip(1)
        .map(|rest| rest[..rest.find('<').unwrap()].to_owned())
        .collect()
}

/// The costs page lists a range of days (by default the 31 days to today of the space's time
/// zone; after an upload, the days it named), at most 1000 costs, and offers our header row
/// as a template that imports as it is.
#[tokio::test]
async fn the_costs_page_lists_a_range_and_offers_the_template() {
    let server = TestServer::start().await;
    let (cookie, page) = on_costs_page(&server).await;
    let csrf = csrf_of(&page);
    // Today is 2027-01-15 (UTC): the 31 days to it start on 2026-12-16.
    let csv = "day,campaign_name,amount,currency\n2026-12-15,before,1,USD\n\
               2026-12-16,first,2,USD\n2027-01-15,today,3,USD\n2027-01-16,tomorrow,4,USD\n";
    let done = upload(&server, &cookie, &upload_body(Some(&csrf), csv.as_bytes())).await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert_eq!(
        listed_campaigns(&done),
        ["before", "first", "today", "tomorrow"],
        "the upload's days"
    );
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/costs").await;
    assert_eq!(listed_campaigns(&page), ["first", "today"]);
    let range = |query: &'static str| get_page(&server, Some(&cookie), query);
    let page = range("/admin/spaces/a/costs?from=2026-12-16&to=2026-12-16").await;
    assert_eq!(listed_campaigns(&page), ["first"]);
    assert!(page.text().contains(r#"name="from" value="2026-12-16""#));
    let page = range("/admin/spaces/a/costs?from=2027-01-15").await;
    assert_eq!(listed_campaigns(&page), ["today", "tomorrow"]);
    assert!(page.text().contains(r#"name="to" value="""#));
    let bad = range("/admin/spaces/a/costs?from=2027-01-16&to=2027-01-15").await;
    assert_eq!(bad.status, 422);
    assert!(
        bad.text().contains("to must not be before from"),
        "{}",
        bad.text()
    );

    // 1000 costs are listed; of 1001, the first 1000 and a word that there are more.
    let many = |n: usize| {
        let mut csv = String::from("day,campaign_name,amount,currency\n");
        for i in 0..n {
            let _ = writeln!(csv, "2026-10-01,c{i:04},1,USD");
        }
        csv
    };
    for (n, cut) in [(1000, false), (1001, true)] {
        let csv = many(n);
        let page = upload_answers(&server, &cookie, (Some(&csrf), csv.as_bytes()), 200, "").await;
        assert_eq!(listed_campaigns(&page).len(), 1000, "{n}");
        let note = "Only the first 1000 costs of these days are listed";
        assert_eq!(page.text().contains(note), cut, "{n}");
    }

    // The template: our header row, as an attachment, which imports as it is (no rows).
    let template = range("/admin/spaces/a/costs/template.csv").await;
    assert_eq!(template.status, 200);
    assert_eq!(
        template.header("content-type"),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(
        template.header("content-disposition"),
        Some("attachment; filename=\"costs-template.csv\"")
    );
    assert_eq!(template.text(), "day,campaign_name,amount,currency\n");
    let text = template.text();
    let empty = (Some(csrf.as_str()), text.as_bytes());
    upload_answers(&server, &cookie, empty, 200, "0 rows: 0 costs set").await;
    assert_eq!(
        range("/admin/spaces/nowhere/costs/template.csv")
            .await
            .status,
        422
    );
}

/// With `[backup_s3]`, the spaces page says where scheduled backups go, and when the last
/// upload failed, why (the endpoint here is a port nobody listens on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spaces_page_shows_a_failed_upload_of_a_scheduled_backup() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let server = TestServer::start_with(|s| {
        s.backups = Some(tracker::config::BackupSchedule {
            dir: None,
            every: std::time::Duration::from_secs(86_400),
            keep: 3,
            s3: Some(tracker::config::S3Settings {
                endpoint: endpoint.clone(),
                region: "us-east-1".into(),
                bucket: "offsite".into(),
                prefix: "tracker/".into(),
                access_key_id: "testing".into(),
                secret_access_key: "never-on-the-page".into(),
                secret_file: None,
                retry_for: std::time::Duration::from_secs(1),
            }),
        });
    })
    .await;
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while !server
        .metrics_text()
        .contains("tracker_backup_uploads_total{outcome=\"failed\"} 1\n")
    {
        assert!(Instant::now() < deadline, "{}", server.metrics_text());
        // Polling the server's background work; not a time rule of the tracker.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/").await;
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains("<code>s3://offsite/tracker/</code>"),
        "{text}"
    );
    assert!(
        text.contains("Last upload: none found in the bucket yet."),
        "{text}"
    );
    assert!(text.contains("The last upload failed at "), "{text}");
    assert!(
        text.contains(" UTC: "),
        "the failure's time says its zone: {text}"
    );
    assert!(text.contains(&endpoint), "{text}");
    assert!(!text.contains("never-on-the-page"), "{text}");
    server.stop().await;
}

/// A space's keys page gives its times in the space's zone and names it; the spaces page,
/// which spans spaces, gives them in UTC and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_page_shows_times_in_the_space_zone_and_the_spaces_page_in_utc() {
    let server = TestServer::start().await;
    let zone = server
        .patch_as(&server.a, "/space", r#"{"time_zone":"Asia/Kolkata"}"#)
        .await;
    assert_eq!(zone.status, 200);
    let cookie = logged_in(&server).await;
    let keys = get_page(&server, Some(&cookie), "/admin/spaces/a")
        .await
        .text();
    assert!(keys.contains("<th>Created (Asia/Kolkata)</th>"), "{keys}");
    // The keys were made at the test clock's now, 2027-01-15 08:00 UTC: 13:30 in Kolkata.
    assert!(keys.contains(">2027-01-15 13:30:00<"), "{keys}");
    assert!(!keys.contains("T08:00:00Z"), "{keys}");
    let spaces = get_page(&server, Some(&cookie), "/admin/").await.text();
    assert!(spaces.contains(">2027-01-15 08:00:00 UTC<"), "{spaces}");
    server.stop().await;
}

/// Without `public_url`, the Links page hands out this machine's own address: it says so
/// beside it, in red, with how to set it, and never calls it an address for ads; with it, the
/// address is for ads as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_links_page_warns_when_its_addresses_are_this_machines_own() {
    for public_url in ["", "https://t.example.com"] {
        let server = TestServer::start_with(|s| s.public_url = public_url.to_owned()).await;
        let cookie = logged_in(&server).await;
        let page = get_page(&server, Some(&cookie), "/admin/spaces/a/links").await;
        assert_eq!(page.status, 200);
        let csrf = csrf_of(&page);
        let created = post_form(
            &server,
            Some(&cookie),
            form(
                "/admin/spaces/a/links",
                &format!("slug=spring-fb&target=https%3A%2F%2Fshop.example%2F%3Fc%3D%7Buid%7D&csrf={csrf}"),
            ),
        )
        .await;
        assert_eq!(created.status, 200, "{}", created.text());
        let text = created.text();
        let warned = text.contains("id=\"public-url-unset\"");
        let for_ads = text.contains("Put this address in your ads:");
        if public_url.is_empty() {
            let base = server.app.as_ref().unwrap().settings.public_url();
            assert!(warned && !for_ads, "{text}");
            assert!(
                text.contains(&format!(
                    "these addresses use {base}, which only this machine"
                )) && text.contains("<code>TRACKER_PUBLIC_URL</code>"),
                "{text}"
            );
            assert!(text.contains(&format!("{base}/l/spring-fb")), "{text}");
        } else {
            assert!(!warned && for_ads, "{text}");
            assert!(text.contains("https://t.example.com/l/spring-fb"), "{text}");
        }
        server.stop().await;
    }
}

/// A day's spend typed on the Costs page is set as `POST /costs` sets it, a refused one changes
/// nothing and keeps the form as it was filled in, 0 removes it; and a dashboard without a cost
/// leads there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_days_spend_is_typed_on_the_costs_page_and_the_dashboard_leads_there() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let dashboard = get_page(&server, Some(&cookie), "/admin/spaces/a/dashboard?days=7").await;
    assert!(
        dashboard
            .text()
            .contains("href=\"/admin/spaces/a/costs#day-spend\""),
        "{}",
        dashboard.text()
    );
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/costs").await;
    let text = page.text();
    let today = tracker::domain::cost::date_of(tracker::domain::stats::local_day(
        &jiff::tz::TimeZone::UTC,
        tracker::domain::stats::quarter_of(tracker::clock::Clock::now_ms(&server.clock)),
    ));
    assert!(
        text.contains("id=\"day-spend\"")
            && text.contains(&format!("name=\"day\" value=\"{today}\""))
            && text.contains("name=\"currency\" value=\"USD\""),
        "{text}"
    );
    let csrf = csrf_of(&page);
    let set = |fields: String| {
        post_form(
            &server,
            Some(&cookie),
            form(
                "/admin/spaces/a/costs/day",
                &format!("{fields}&csrf={csrf}"),
            ),
        )
    };
    let costs = async || server.read_as(&server.a, "/costs").await.json()["costs"].clone();
    let refused =
        set("day=2026-11-24&campaign_name=autumn-fb&amount=12%2C5&currency=USD".into()).await;
    assert_eq!(refused.status, 422);
    let text = refused.text();
    assert!(
        text.contains("amount must be a decimal number")
            && text.contains("name=\"campaign_name\" value=\"autumn-fb\""),
        "{text}"
    );
    assert_eq!(costs().await, json!([]), "nothing set");
    let done = set(
        "day=2026-11-24&campaign_name=autumn-fb&adset_name=&ad_name=&amount=120.00&currency=usd"
            .into(),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text());
    assert!(
        done.text()
            .contains("Set: 120.00 USD for autumn-fb on 2026-11-24."),
        "{}",
        done.text()
    );
    assert_eq!(
        costs().await,
        json!([{"day": "2026-11-24", "campaign_name": "autumn-fb", "adset_name": "",
            "ad_name": "", "amount": "120.00", "currency": "USD", "source": "hand"}])
    );
    let removed = set("day=2026-11-24&campaign_name=autumn-fb&amount=0&currency=USD".into()).await;
    assert!(
        removed
            .text()
            .contains("Removed the cost of autumn-fb on 2026-11-24."),
        "{}",
        removed.text()
    );
    assert_eq!(costs().await, json!([]));
    server.stop().await;
}
