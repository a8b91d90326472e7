//! The admin page's users and roles over HTTP, against the real server: every admin path walked
//! for an owner, a manager, a viewer and no session; a manager's and a viewer's spaces; an
//! invitation taken up; a removed user's or a changed role's sessions ended at once; the last
//! owner kept.

use crate::admin_page::{cookie_of, csrf_of, form, get_page, log_in, logged_in, post_form};
use crate::support::{NOW_MS, TestServer, app_on};
use tracker::domain::user::Role;

const PASSWORD: &str = "a long enough password";

/// The least role each admin path asks for, written out here, not read from the server's own
/// table: a path the router has and this list has not fails the walk.
const LEAST_ROLE: &[(&str, &str, Least)] = &[
    ("POST", "/admin/logout", Least::Anyone),
    ("GET", "/admin/", Least::Anyone),
    ("POST", "/admin/spaces", Least::Owner),
    ("GET", "/admin/audit", Least::Owner),
    ("GET", "/admin/users", Least::Owner),
    ("POST", "/admin/users", Least::Owner),
    ("POST", "/admin/users/second-factor", Least::Owner),
    ("POST", "/admin/users/{name}/role", Least::Owner),
    ("POST", "/admin/users/{name}/reset", Least::Owner),
    ("POST", "/admin/users/{name}/remove", Least::Owner),
    ("GET", "/admin/account", Least::Anyone),
    ("POST", "/admin/account/second-factor", Least::Anyone),
    ("POST", "/admin/account/second-factor/off", Least::Anyone),
    ("GET", "/admin/spaces/{space}/dashboard", Least::Viewer),
    ("GET", "/admin/spaces/{space}", Least::Manager),
    ("POST", "/admin/spaces/{space}/rotate", Least::Owner),
    ("POST", "/admin/spaces/{space}/revoke", Least::Owner),
    ("GET", "/admin/spaces/{space}/settings", Least::Owner),
    ("POST", "/admin/spaces/{space}/settings", Least::Owner),
    ("GET", "/admin/spaces/{space}/postback", Least::Manager),
    ("POST", "/admin/spaces/{space}/postback", Least::Manager),
    ("GET", "/admin/spaces/{space}/links", Least::Manager),
    ("POST", "/admin/spaces/{space}/links", Least::Manager),
    (
        "POST",
        "/admin/spaces/{space}/links/{slug}/delete",
        Least::Manager,
    ),
    ("GET", "/admin/spaces/{space}/destinations", Least::Manager),
    ("POST", "/admin/spaces/{space}/destinations", Least::Manager),
    (
        "POST",
        "/admin/spaces/{space}/destinations/{name}/test",
        Least::Manager,
    ),
    (
        "POST",
        "/admin/spaces/{space}/destinations/{name}/retry",
        Least::Manager,
    ),
    (
        "POST",
        "/admin/spaces/{space}/destinations/{name}/delete",
        Least::Manager,
    ),
    (
        "POST",
        "/admin/spaces/{space}/destinations/{name}/change",
        Least::Manager,
    ),
    (
        "POST",
        "/admin/spaces/{space}/destinations/{name}/rotate-secret",
        Least::Manager,
    ),
    ("GET", "/admin/spaces/{space}/events", Least::Viewer),
    ("GET", "/admin/spaces/{space}/stats", Least::Viewer),
    ("GET", "/admin/spaces/{space}/costs", Least::Viewer),
    ("POST", "/admin/spaces/{space}/costs", Least::Manager),
    ("POST", "/admin/spaces/{space}/costs/fetch", Least::Manager),
    ("POST", "/admin/spaces/{space}/costs/day", Least::Manager),
    (
        "GET",
        "/admin/spaces/{space}/costs/template.csv",
        Least::Viewer,
    ),
    ("GET", "/admin/spaces/{space}/rejections", Least::Manager),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Least {
    Owner,
    Manager,
    Viewer,
    Anyone,
}

/// Adds user `name` and sets their password through their invitation's address, as they would.
async fn invited_user(server: &TestServer, name: &str, role: Role, spaces: &[&str]) -> String {
    let app = app_on(&server.store, NOW_MS);
    let spaces = spaces.iter().map(|s| (*s).to_owned()).collect();
    let invited = app.add_user(name, role, spaces).await.unwrap();
    let path = &invited.address[invited.address.find("/admin/invite/").unwrap()..];
    let page = get_page(server, None, path).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains(name), "{}", page.text());
    let body = format!("password={0}&again={0}", PASSWORD.replace(' ', "+"));
    let set = post_form(server, None, form(path, &body)).await;
    assert_eq!(set.status, 200, "{}", set.text());
    // Used once: the address works no more.
    assert_eq!(get_page(server, None, path).await.status, 404);
    let response = log_in(server, name, PASSWORD).await;
    assert_eq!(response.status, 303, "{}", response.text());
    cookie_of(&response)
}

/// A session's CSRF token, from the spaces page every user may see.
async fn csrf_for(server: &TestServer, cookie: &str) -> String {
    csrf_of(&get_page(server, Some(cookie), "/admin/").await)
}

fn example(path: &str, space: &str) -> String {
    path.replace("{space}", space)
        .replace("{slug}", "nothing")
        .replace("{name}", "nothing")
        .replace("{token}", "0123")
}

/// Whether a page was refused for the user's role (not some other refusal of the handler's).
fn refused_for_role(response: &crate::support::Response) -> bool {
    response.status == 403 && response.text().contains("does not reach this page")
}

async fn request(
    server: &TestServer,
    cookie: Option<&str>,
    csrf: &str,
    method: &str,
    target: &str,
) -> crate::support::Response {
    if method == "GET" {
        get_page(server, cookie, target).await
    } else {
        post_form(server, cookie, form(target, &format!("csrf={csrf}"))).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_path_is_allowed_or_refused_by_role_and_space() {
    let server = TestServer::start().await;
    let owner = logged_in(&server).await;
    let manager = invited_user(&server, "mia", Role::Manager, &["a"]).await;
    let viewer = invited_user(&server, "vic", Role::Viewer, &["a"]).await;
    let sessions = [
        (Least::Owner, owner.clone(), csrf_for(&server, &owner).await),
        (
            Least::Manager,
            manager.clone(),
            csrf_for(&server, &manager).await,
        ),
        (
            Least::Viewer,
            viewer.clone(),
            csrf_for(&server, &viewer).await,
        ),
    ];
    let mut logouts = Vec::new();
    for (method, path, open) in tracker::web::every_page() {
        if open {
            continue;
        }
        let least = LEAST_ROLE
            .iter()
            .find(|(m, p, _)| *m == method && *p == path)
            .unwrap_or_else(|| panic!("{method} {path} has no expected role in this test"))
            .2;
        if path == "/admin/logout" {
            logouts.push((method, path));
            continue;
        }
        // The owner reaches every space; the others space a only, never b.
        for space in ["a", "b"] {
            let target = example(path, space);
            for (role, cookie, csrf) in &sessions {
                let in_space = *role == Least::Owner || space == "a" || !path.contains("{space}");
                let allowed = *role <= least && in_space;
                let response = request(&server, Some(cookie), csrf, method, &target).await;
                assert_eq!(
                    !refused_for_role(&response),
                    allowed,
                    "{role:?} {method} {target}: {} {}",
                    response.status,
                    response.text()
                );
            }
            let anonymous = request(&server, None, "x", method, &target).await;
            if method == "GET" {
                assert_eq!(anonymous.status, 303, "{method} {target}");
                assert_eq!(anonymous.header("location"), Some("/admin/login"));
            } else {
                assert_eq!(anonymous.status, 403, "{method} {target}");
                assert!(anonymous.text().contains("Your session has ended"));
            }
        }
    }
    for (method, path) in LEAST_ROLE.iter().map(|(m, p, _)| (*m, *p)) {
        assert!(
            tracker::web::every_page().any(|(m, p, _)| m == method && p == path),
            "{method} {path} is no admin path any more"
        );
    }
    assert_eq!(logouts.len(), 1);
    for (_, cookie, csrf) in &sessions {
        let out = post_form(
            &server,
            Some(cookie),
            form("/admin/logout", &format!("csrf={csrf}")),
        )
        .await;
        assert_eq!(out.status, 303);
        assert_eq!(get_page(&server, Some(cookie), "/admin/").await.status, 303);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_sees_only_their_spaces_and_keys_they_cannot_change() {
    let server = TestServer::start().await;
    logged_in(&server).await;
    let manager = invited_user(&server, "mia", Role::Manager, &["a"]).await;
    let spaces = get_page(&server, Some(&manager), "/admin/").await.text();
    assert!(spaces.contains("/admin/spaces/a"), "{spaces}");
    assert!(!spaces.contains("/admin/spaces/b"), "{spaces}");
    let keys = get_page(&server, Some(&manager), "/admin/spaces/a").await;
    assert_eq!(keys.status, 200);
    let csrf = csrf_of(&keys);
    let rotate = post_form(
        &server,
        Some(&manager),
        form(
            "/admin/spaces/a/rotate",
            &format!("csrf={csrf}&kind=secret"),
        ),
    )
    .await;
    assert!(refused_for_role(&rotate), "{}", rotate.text());
    // Nothing was rotated: the space's secret still works.
    let read = server.read_as(&server.a, "/space").await;
    assert_eq!(read.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_user_or_a_changed_role_has_no_session_left() {
    let server = TestServer::start().await;
    logged_in(&server).await;
    let app = app_on(&server.store, NOW_MS);
    let manager = invited_user(&server, "mia", Role::Manager, &["a"]).await;
    let viewer = invited_user(&server, "vic", Role::Viewer, &["a"]).await;
    assert_eq!(
        get_page(&server, Some(&manager), "/admin/").await.status,
        200
    );
    app.remove_user("mia").await.unwrap();
    let next = get_page(&server, Some(&manager), "/admin/").await;
    assert_eq!(next.status, 303);
    assert_eq!(next.header("location"), Some("/admin/login"));
    assert_eq!(log_in(&server, "mia", PASSWORD).await.status, 401);

    assert_eq!(
        get_page(&server, Some(&viewer), "/admin/").await.status,
        200
    );
    app.set_role("vic", Role::Manager, vec!["a".into()])
        .await
        .unwrap();
    assert_eq!(
        get_page(&server, Some(&viewer), "/admin/").await.status,
        303
    );
    // Logged in again, with the new role.
    let again = cookie_of(&log_in(&server, "vic", PASSWORD).await);
    assert_eq!(
        get_page(&server, Some(&again), "/admin/spaces/a/links")
            .await
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_owner_is_kept_and_an_invitation_keeps_the_password_rule() {
    let server = TestServer::start().await;
    logged_in(&server).await;
    let app = app_on(&server.store, NOW_MS);
    let last = app.remove_user("admin").await.unwrap_err();
    assert!(last.message.contains("last owner"), "{}", last.message);
    let demoted = app
        .set_role("admin", Role::Viewer, vec!["a".into()])
        .await
        .unwrap_err();
    assert!(
        demoted.message.contains("last owner"),
        "{}",
        demoted.message
    );
    // With a second owner, the first may go.
    app.add_user("olga", Role::Owner, vec![]).await.unwrap();
    app.set_role("admin", Role::Viewer, vec!["a".into()])
        .await
        .unwrap();
    // A space that does not exist, a name out of the rule, a name taken: refused, nothing added.
    assert!(
        app.add_user("x", Role::Viewer, vec!["zz".into()])
            .await
            .is_err()
    );
    assert!(app.add_user("Anna", Role::Viewer, vec![]).await.is_err());
    assert!(app.add_user("olga", Role::Viewer, vec![]).await.is_err());
    let names: Vec<String> = app
        .users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["admin", "olga"]);

    let invited = app.add_user("pat", Role::Viewer, vec![]).await.unwrap();
    let path = &invited.address[invited.address.find("/admin/invite/").unwrap()..];
    for (password, again, status) in [
        ("eleven char", "eleven char", 400),
        ("twelve chars", "twelve charz", 400),
        ("twelve chars", "twelve chars", 200),
    ] {
        let body = format!(
            "password={}&again={}",
            password.replace(' ', "+"),
            again.replace(' ', "+")
        );
        let set = post_form(&server, None, form(path, &body)).await;
        assert_eq!(set.status, status, "{password:?}: {}", set.text());
    }
    assert_eq!(log_in(&server, "pat", "twelve chars").await.status, 303);
}

/// A command line's request, as `tracker` parses its arguments.
fn command(args: &[&str]) -> tracker::control::Request {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        request: tracker::control::Request,
    }
    Cli::parse_from([&["tracker"], args].concat()).request
}

/// `tracker audit` names who made each change: the owner on the admin page, the command line,
/// and the API with a space's secret; a login and a failed one; a year later retention has
/// deleted them, not a millisecond before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_names_who_changed_what_and_is_kept_a_year() {
    use tracker::control::execute;
    use tracker::domain::audit::{AuditFilter, KEPT_MS};
    let server = TestServer::start().await;
    let owner = logged_in(&server).await;
    assert_eq!(
        log_in(&server, "admin", "a wrong password!").await.status,
        401
    );
    assert_eq!(log_in(&server, "my-secret-words", "x").await.status, 401);
    let csrf = csrf_for(&server, &owner).await;
    let created = post_form(
        &server,
        Some(&owner),
        form(
            "/admin/spaces/a/links",
            &format!("csrf={csrf}&slug=spring&bot=shop_bot"),
        ),
    )
    .await;
    assert!(created.status < 400, "{}", created.text());
    let by_api = server
        .post_as(&server.a, "/links", r#"{"slug":"summer","bot":"shop_bot"}"#)
        .await;
    assert_eq!(by_api.status, 201, "{}", by_api.text());
    let app = app_on(&server.store, NOW_MS);
    execute(&app, command(&["keys", "rotate", "a", "--kind", "secret"]))
        .await
        .unwrap();
    execute(
        &app,
        command(&["user", "add", "anna", "--role", "viewer", "--spaces", "a"]),
    )
    .await
    .unwrap();
    let answer = execute(&app, command(&["audit", "--space", "a"]))
        .await
        .unwrap();
    let shown = answer.json().to_string();
    let entries = app.audit(AuditFilter::default()).await.unwrap();
    let lines: Vec<(String, String, Option<String>, Option<String>)> = entries
        .iter()
        .rev()
        .map(|e| {
            (
                e.who.clone(),
                e.action.clone(),
                e.space.clone(),
                e.subject.clone(),
            )
        })
        .collect();
    let line = |who: &str, action: &str, space: Option<&str>, subject: Option<&str>| {
        (
            who.to_owned(),
            action.to_owned(),
            space.map(str::to_owned),
            subject.map(str::to_owned),
        )
    };
    assert_eq!(
        lines,
        [
            line("admin", "login", None, None),
            line("admin", "login failed", None, None),
            line("(no such user)", "login failed", None, None),
            line("admin", "links", Some("a"), Some("spring")),
            line("api", "POST /links", Some("a"), None),
            line("cli", "keys rotate", Some("a"), Some("secret")),
            line("cli", "user add", None, Some("anna")),
        ]
    );
    assert!(entries[..2].iter().all(|e| e.address.is_none()));
    assert!(
        entries[2..]
            .iter()
            .all(|e| e.address.as_deref() == Some("127.0.0.1"))
    );
    // `tracker audit --space a`: the space's changes only, newest first.
    for (who, action) in [
        ("cli", "keys rotate"),
        ("api", "POST /links"),
        ("admin", "links"),
    ] {
        assert!(shown.contains(&format!("\"who\":\"{who}\"")), "{shown}");
        assert!(
            shown.contains(&format!("\"action\":\"{action}\"")),
            "{shown}"
        );
    }
    assert!(!shown.contains("anna"), "{shown}");
    // Never a secret: no password typed, no key.
    let all = serde_json::to_string(&entries).unwrap();
    for secret in ["a wrong password", "my-secret-words", &server.a.secret] {
        assert!(!all.contains(secret), "{all}");
    }

    let retention = server.app.clone().unwrap().retention();
    let sweep = || tracker::workers::retention::sweep_audit(&retention);
    let written_last = entries[0].at_ms;
    server.clock.set(entries[6].at_ms + KEPT_MS);
    assert_eq!(sweep().await.unwrap(), 0);
    server.clock.set(written_last + KEPT_MS + 1);
    assert_eq!(sweep().await.unwrap(), 7);
}

/// Every `href` and `action` of a page's body that names a path of the admin page, with the
/// method it is requested with.
fn targets_of(body: &str) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    for (marker, method) in [("href=\"", "GET"), ("action=\"", "FORM")] {
        for (at, _) in body.match_indices(marker) {
            let rest = &body[at + marker.len()..];
            let target = &rest[..rest.find('"').unwrap_or(0)];
            let target = target.split('#').next().unwrap_or("").replace("&amp;", "&");
            if !target.starts_with("/admin/") {
                continue;
            }
            let form_tag = &body[body[..at].rfind('<').unwrap_or(0)..at];
            let method = match method {
                "FORM" if form_tag.contains("method=\"post\"") => "POST",
                "FORM" => "GET",
                other => other,
            };
            found.push((method, target));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_and_a_viewer_are_shown_only_links_and_forms_their_role_reaches() {
    // A destination in space a, so that its forms (test, retry, change, rotate, delete) are
    // walked too; on loopback, where nothing listens, so a test delivery fails at once.
    let server = TestServer::start_with(|c| {
        c.delivery.allow_private_destinations = true;
        c.delivery.timeout = std::time::Duration::from_millis(500);
    })
    .await;
    let hook = r#"{"name":"hook","kind":"webhook","url":"http://127.0.0.1:9/hook"}"#;
    let made = server.post_as(&server.a, "/destinations", hook).await;
    assert_eq!(made.status, 201, "{}", made.text());
    logged_in(&server).await;
    for (name, role) in [("mia", Role::Manager), ("vic", Role::Viewer)] {
        let cookie = invited_user(&server, name, role, &["a"]).await;
        let csrf = csrf_for(&server, &cookie).await;
        let mut seen = std::collections::HashSet::new();
        let mut pages = vec!["/admin/".to_owned()];
        while let Some(page) = pages.pop() {
            let shown = get_page(&server, Some(&cookie), &page).await;
            assert!(!refused_for_role(&shown), "{name} was linked to {page}");
            for (method, target) in targets_of(&shown.text()) {
                if target == "/admin/logout" || !seen.insert((method, target.clone())) {
                    continue;
                }
                if method == "GET" {
                    pages.push(target);
                    continue;
                }
                let posted = request(&server, Some(&cookie), &csrf, method, &target).await;
                assert!(
                    !refused_for_role(&posted),
                    "{name} was shown a form to {target} on {page}"
                );
            }
        }
        assert!(
            seen.iter().any(|(_, t)| t == "/admin/spaces/a/dashboard"),
            "{name} walked the space's pages: {seen:?}"
        );
        assert_eq!(
            seen.iter()
                .any(|(_, t)| t.starts_with("/admin/spaces/a/destinations/hook/")),
            role == Role::Manager,
            "{name} walked the destination's forms as their role reaches: {seen:?}"
        );
    }
}

/// The Users page, linked for an owner from every page's header, does what `tracker user` does,
/// through the same operations: a user added
/// (the invitation's address shown once), given another role, reset, removed; a name outside
/// the rule refused with nothing added; everyone's second factor required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_page_adds_changes_resets_and_removes_a_user() {
    let server = TestServer::start().await;
    let owner = logged_in(&server).await;
    let app = app_on(&server.store, NOW_MS);
    // An owner finds the page (and the audit log) from every page's header.
    let spaces = get_page(&server, Some(&owner), "/admin/").await;
    for page in ["/admin/users", "/admin/audit"] {
        assert!(
            targets_of(&spaces.text()).contains(&("GET", page.to_owned())),
            "{page} is not linked: {}",
            spaces.text()
        );
    }
    let page = get_page(&server, Some(&owner), "/admin/users").await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("<td data-label=\"User\">admin</td>"));
    let csrf = csrf_of(&page);
    let post = |target: &str, body: &str| {
        post_form(
            &server,
            Some(&owner),
            form(target, &format!("csrf={csrf}&{body}")),
        )
    };
    let added = post("/admin/users", "name=mia&role=manager&spaces=a").await;
    assert_eq!(added.status, 200, "{}", added.text());
    assert!(added.text().contains("/admin/invite/"), "{}", added.text());
    let mia = app.user("mia").await.unwrap().unwrap();
    assert_eq!(
        (mia.role, mia.spaces.clone()),
        (Role::Manager, vec!["a".into()])
    );

    let refused = post("/admin/users", "name=Mia+B&role=viewer&spaces=").await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert!(app.user("Mia B").await.unwrap().is_none());
    assert_eq!(app.users().await.unwrap().len(), 2);

    let changed = post("/admin/users/mia/role", "role=viewer&spaces=a,b").await;
    assert_eq!(changed.status, 200, "{}", changed.text());
    let mia = app.user("mia").await.unwrap().unwrap();
    assert_eq!(mia.role, Role::Viewer);
    assert_eq!(mia.spaces, ["a", "b"]);

    let reset = post("/admin/users/mia/reset", "").await;
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert!(reset.text().contains("/admin/invite/"), "{}", reset.text());

    let required = post("/admin/users/second-factor", "required=on").await;
    assert_eq!(required.status, 200, "{}", required.text());
    assert!(app.second_factor_required().await.unwrap());
    assert!(required.text().contains("Required of every user"));

    let removed = post("/admin/users/mia/remove", "").await;
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert!(app.user("mia").await.unwrap().is_none());
    // The last owner is kept, as the command line keeps it.
    let last = post("/admin/users/admin/remove", "").await;
    assert_eq!(last.status, 409, "{}", last.text());
}
