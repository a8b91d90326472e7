//! The `dashboard` read row's session: the admin password set through the command line (`tracker
//! admin password`, which reads it from stdin's first line when stdin is not a terminal), then a
//! login as the login form does it (its page's cookie and token, then the form posted), so the
//! row reads the dashboard as a logged-in admin does.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use crate::client;
use crate::http1;

/// The password the benchmark sets: long enough for the rule (at least 12 characters).
const PASSWORD: &str = "bench-admin-password";

/// The page the row reads: `space`'s dashboard over the last 30 days.
pub fn target(space: &str) -> String {
    format!("/admin/spaces/{space}/dashboard?days=30")
}

/// Sets the admin password with `cli admin password` and logs in; answers the session's cookie
/// (`tracker_admin=...`).
pub fn log_in(cli: Command, addr: SocketAddr) -> Result<String, String> {
    set_password(cli)?;
    let (status, head, body) = exchange(
        addr,
        b"GET /admin/login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )?;
    let form_cookie = cookie(&head, "tracker_login")
        .ok_or_else(|| format!("GET /admin/login {status}: no login cookie"))?;
    let token = csrf(&body).ok_or_else(|| format!("GET /admin/login {status}: no form token"))?;
    let form = format!("user=admin&password={PASSWORD}&csrf={token}");
    let login = format!(
        "POST /admin/login HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {form_cookie}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    let (status, head, body) = exchange(addr, login.as_bytes())?;
    cookie(&head, "tracker_admin").ok_or_else(|| {
        format!(
            "logging in to the admin page: {status} {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    })
}

fn set_password(mut cli: Command) -> Result<(), String> {
    let mut child = cli
        .args(["admin", "password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running tracker admin password: {e}"))?;
    child
        .stdin
        .take()
        .expect("stdin was piped")
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .map_err(|e| format!("writing to tracker admin password: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("running tracker admin password: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tracker admin password: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One request on a connection of its own: the answer's status, head and body.
fn exchange(addr: SocketAddr, request: &[u8]) -> Result<(u16, Vec<u8>, Vec<u8>), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut conn = None;
        let http1::Answer {
            status, head, body, ..
        } = client::roundtrip(&mut conn, addr, request)
            .await
            .map_err(|e| format!("asking the admin page: {e}"))?;
        Ok((status, head.to_vec(), body.to_vec()))
    })
}

/// `name=value` of the `Set-Cookie` header that sets cookie `name`.
fn cookie(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.trim())
        .find(|v| v.starts_with(&format!("{name}=")))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

/// The token of a page's form.
fn csrf(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let key = "name=\"csrf\" value=\"";
    let at = text.find(key)? + key.len();
    let len = text[at..].find('"')?;
    Some(text[at..at + len].to_owned())
}

/// Checks a dashboard page: a row for each of the space's `campaigns`, each name a link to
/// its drill-down.
pub fn check(body: &[u8], campaigns: u64) -> Result<(), String> {
    let needle = br#"data-label="Campaign"><a href="?"#;
    let rows = body.windows(needle.len()).filter(|w| w == needle).count() as u64;
    if rows == campaigns {
        Ok(())
    } else {
        Err(format!("{rows} campaign rows, expected {campaigns}"))
    }
}
