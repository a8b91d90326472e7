//! The read rows: a feed page of 1000 events with attribution and `GET /stats` over a
//! space of a million events, each timed while durable ingest runs at full rate beside it, and
//! `tracker export` of that space: wall time and the export process's peak RSS.
//!
//! The reads go to a space of their own (`spread`), made through the control socket, so that it
//! holds exactly `--feed-events` events whatever other rows ran, spread the way a real space's
//! are: 1000 clicks over 200 campaigns and 5 links (half of them bound), events in every hour
//! of the last 89 days for every campaign (as far as the events reach: a million events are
//! 5000 a campaign), and costs for every campaign on each of the last 90 days, the campaign's
//! own and one for each of its 2 ad sets' 2 ads (90,000, imported as a CSV through `tracker
//! costs import`). `GET /stats` by campaign over all time then reads each campaign's day rows,
//! its quarter rows of the partial days, and every cost: a space whose million events all fell
//! in one hour would make it look free. The events are filled through the server's own ingest
//! path (`POST /events` over 64 connections with the in-repo client, which counts exactly).
//!
//! The side client is sequential (one connection, one request at a time), on its own thread: the
//! load client's connection (`client::roundtrip`) driven by a runtime of that thread alone. Its
//! latencies go into the same histogram as the load's.

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::{self, Histogram, Load, MakeRequest};
use crate::http1;
use crate::scenario::{Fixture, HOUR_MS, Template};
use std::sync::Arc;

/// Groups of the read rows' space.
pub const CAMPAIGNS: u64 = 200;
pub const LINKS: u64 = 5;
/// Clicks of the read rows' space (a multiple of `CAMPAIGNS`), half of them bound.
pub const CLICKS: u64 = 1000;
/// Hours over which its events are spread: 89 days, inside the default `max_event_age` of 90.
pub const HOURS: u64 = 89 * 24;
/// Days back from now with a cost for every campaign.
pub const COST_DAYS: u64 = 90;
/// Ad sets and ads of each set with a cost of their own on each of those days, beside the
/// campaign's: costs kept per ad, as Meta's insights give them.
const COST_AD_SETS: u64 = 2;
const COST_ADS: u64 = 2;
/// The hours in which each campaign has events, once `events` are stored.
pub fn hours_used(events: u64) -> u64 {
    events.div_ceil(CAMPAIGNS).min(HOURS)
}

/// How long the side client waits for an answer before it counts an error.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The page the feed row reads.
pub const PAGE: usize = 1000;
/// The name of the read rows' space.
pub const SPACE: &str = "spread";

/// The read rows, as `--only` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRow {
    Feed,
    Stats,
    /// The admin page's dashboard over 30 days, logged in (`dashboard.rs`).
    Dashboard,
    Export,
}

impl ReadRow {
    pub const ALL: [ReadRow; 4] = [
        ReadRow::Feed,
        ReadRow::Stats,
        ReadRow::Dashboard,
        ReadRow::Export,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReadRow::Feed => "feed",
            ReadRow::Stats => "stats",
            ReadRow::Dashboard => "dashboard",
            ReadRow::Export => "export",
        }
    }

    /// What the table shows for the side client's row: back to back, or paced.
    pub fn label(self, pace: Option<Duration>) -> &'static str {
        match (self, pace) {
            (ReadRow::Feed, None) => "GET /events 1000 nonstop",
            (ReadRow::Feed, Some(_)) => "GET /events 1000 paced",
            (ReadRow::Stats, None) => "GET /stats nonstop",
            (ReadRow::Stats, Some(_)) => "GET /stats paced",
            (ReadRow::Dashboard, None) => "dashboard 30d nonstop",
            (ReadRow::Dashboard, Some(_)) => "dashboard 30d paced",
            (ReadRow::Export, _) => "tracker export",
        }
    }

    /// What the summary calls it.
    pub fn title(self) -> &'static str {
        match self {
            ReadRow::Feed => "GET /events?limit=1000 (a page with attribution)",
            ReadRow::Stats => "GET /stats?by=campaign_name (all time)",
            ReadRow::Dashboard => "the admin page's dashboard, 30 days (logged in)",
            ReadRow::Export => "tracker export",
        }
    }

    /// The p99 each side row must stay under, in milliseconds.
    pub fn target_p99_ms(self) -> f64 {
        match self {
            ReadRow::Dashboard => 50.0,
            _ => 20.0,
        }
    }
}

/// The read rows' space: its credentials and clicks, and how many events it holds.
pub struct Spread {
    pub fixture: Arc<Fixture>,
    pub events: u64,
    /// `occurred_at_ms` of its newest events; the others are whole hours before.
    base_ms: u64,
    /// Requests sent to fill it so far (numbers the next ones, so eids stay unique).
    sent: u64,
    /// The admin page's session cookie (`tracker_admin=...`) when the dashboard row runs.
    pub admin_cookie: String,
}

/// `tracker space create NAME` on the running server; what it printed.
pub fn space_create(cli: Command, name: &str) -> Result<serde_json::Value, String> {
    let out = tracker(cli, &["space", "create", name])?;
    serde_json::from_slice(&out)
        .map_err(|e| format!("reading what tracker space create printed: {e}"))
}

/// Runs `cli` with `args` (a command on the running server, through its control socket);
/// answers what it printed, or what it said when it failed.
pub fn tracker(mut cli: Command, args: &[&str]) -> Result<Vec<u8>, String> {
    let what = format!("tracker {}", args.join(" "));
    let out = cli
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {what}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// `tracker space create NAME` on the running server; the new space's credentials as a
/// fixture without clicks, its eids tagged with `run`.
pub fn space_fixture(cli: Command, name: &str, run: &str) -> Result<Fixture, String> {
    let created = space_create(cli, name)?;
    let field = |key: &str| {
        created
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or_else(|| format!("tracker space create printed no {key}: {created}"))
    };
    Ok(Fixture {
        secret: field("secret")?,
        ingest_token: field("ingest_token")?,
        click_uids: Vec::new(),
        known_events: 0,
        tg_users: Vec::new(),
        run: run.to_owned(),
        dest_secret: String::new(),
    })
}

/// Makes the space through the running server's control socket (`tracker space create`), and its
/// clicks and bindings over HTTP.
pub fn create_space(
    cli: impl Fn() -> Command,
    addr: SocketAddr,
    run: &str,
    now_ms: u64,
) -> Result<Spread, String> {
    let mut fixture = space_fixture(cli(), SPACE, run)?;
    let clicks = Template::spread_click(&fixture, CAMPAIGNS, LINKS);
    let requests = (0..CLICKS).map(|i| clicks.render(&fixture, i)).collect();
    fixture.click_uids = client::click_uids(addr, requests)
        .map_err(|e| format!("making the {SPACE} space's clicks: {e}"))?;
    // Bind the first half: the feed then shows bound and unbound clicks.
    let bind = Template::of(crate::scenario::Case::Bind, &fixture, "spread");
    let requests = (0..CLICKS / 2).map(|i| bind.render(&fixture, i)).collect();
    for (status, body) in client::fetch_all(addr, 16, requests) {
        if status != 200 {
            return Err(format!(
                "binding the {SPACE} space's clicks: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    import_costs(cli(), run, now_ms)?;
    Ok(Spread {
        fixture: Arc::new(fixture),
        events: 0,
        base_ms: now_ms - HOUR_MS,
        sent: 0,
        admin_cookie: String::new(),
    })
}

/// Costs for every campaign on each of the last [`COST_DAYS`] UTC days, its own and one per
/// ad of its ad sets, through `tracker costs import` (the control socket of the running server).
fn import_costs(mut cli: Command, run: &str, now_ms: u64) -> Result<(), String> {
    use std::fmt::Write as _;
    let today = now_ms / (24 * HOUR_MS);
    let mut csv = String::from("day,campaign_name,adset_name,ad_name,amount,currency\n");
    for back in 0..COST_DAYS {
        let ms = i64::try_from((today - back) * 24 * HOUR_MS).unwrap_or(0);
        let day = jiff::Timestamp::from_millisecond(ms)
            .map_err(|e| e.to_string())?
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .date();
        for c in 0..CAMPAIGNS {
            let _ = writeln!(csv, "{day},campaign-{c},,,{}.{:02},USD", 10 + c, back % 100);
            for set in 0..COST_AD_SETS {
                for ad in 0..COST_ADS {
                    let _ = writeln!(csv, "{day},campaign-{c},set-{set},ad-{ad},1.{ad}0,USD");
                }
            }
        }
    }
    let path = std::env::temp_dir().join(format!("tracker-bench-costs-{run}.csv"));
    std::fs::write(&path, csv).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let out = cli
        .args(["costs", "import", SPACE])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running tracker costs import: {e}"));
    let _ = std::fs::remove_file(&path);
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "tracker costs import {SPACE}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// What filling did.
pub struct Filled {
    pub added: u64,
    pub elapsed: Duration,
}

/// Adds events to the space over 64 connections until it holds `target`. Any failure fails the
/// run: the rows after it rely on the exact count.
pub fn fill(addr: SocketAddr, spread: &mut Spread, target: u64) -> Result<Filled, String> {
    let started = Instant::now();
    let want = target.saturating_sub(spread.events);
    if want == 0 {
        return Ok(Filled {
            added: 0,
            elapsed: Duration::ZERO,
        });
    }
    let template = Arc::new(Template::spread_event(
        &spread.fixture,
        spread.base_ms,
        CAMPAIGNS,
        HOURS,
    ));
    let (fixture, first) = (spread.fixture.clone(), spread.sent);
    let make: MakeRequest = Arc::new(move |seq| template.render(&fixture, first + seq));
    let load = Load {
        conns: 64,
        duration: None,
        max_requests: Some(want),
    };
    let o = client::run(addr, load, &make, Some(r#""status":"queued""#));
    spread.sent += want;
    spread.events += o.expected;
    if o.expected != want || o.errors > 0 || o.non_2xx > 0 {
        return Err(format!(
            "filling the {SPACE} space: {} of {want} events queued, {} non-2xx, {} errors",
            o.expected, o.non_2xx, o.errors
        ));
    }
    Ok(Filled {
        added: want,
        elapsed: started.elapsed(),
    })
}

/// What the side client saw.
pub struct SideOutcome {
    pub responses: u64,
    pub non_2xx: u64,
    pub errors: u64,
    pub latency: Histogram,
    pub elapsed: Duration,
    /// Answers that were 200 but not what the space holds.
    pub wrong: u64,
    /// The first few wrong or non-2xx answers, described.
    pub samples: Vec<String>,
    /// Bytes of the answers' bodies.
    pub bytes: u64,
}

impl SideOutcome {
    #[allow(clippy::cast_precision_loss)]
    pub fn rate(&self) -> f64 {
        self.responses as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Sends `row`'s request over one connection, one at a time, until `deadline` and at least
/// `min_requests` answers: back to back, or one every `pace`. The feed row pages forward from
/// the start as a follower does, and wraps around at the end; every answer is checked (its
/// status, and the number of events or groups), the first one in full.
pub fn side(
    addr: SocketAddr,
    (row, pace): (ReadRow, Option<Duration>),
    spread: &Spread,
    deadline: Instant,
    min_requests: u64,
) -> SideOutcome {
    let started = Instant::now();
    let mut o = SideOutcome {
        responses: 0,
        non_2xx: 0,
        errors: 0,
        latency: Histogram::new(),
        elapsed: Duration::ZERO,
        wrong: 0,
        samples: Vec::new(),
        bytes: 0,
    };
    // One request at a time, on this thread: the runtime only waits for the connection.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("side client runtime");
    let mut conn: Option<client::Conn> = None;
    let mut after: u64 = 0;
    // Events the pages have shown since the last wrap-around.
    let mut seen: u64 = 0;
    let mut next_at = Instant::now();
    while Instant::now() < deadline || o.responses < min_requests {
        if let Some(pace) = pace {
            let now = Instant::now();
            if next_at > now {
                std::thread::sleep(next_at - now);
            }
            next_at = next_at.max(now) + pace;
        }
        let target = match row {
            ReadRow::Feed => format!("/events?after={after}&limit={PAGE}"),
            ReadRow::Dashboard => crate::dashboard::target(SPACE),
            _ => "/stats?by=campaign_name".to_owned(),
        };
        let credential = match row {
            ReadRow::Dashboard => format!("Cookie: {}", spread.admin_cookie),
            _ => format!("Authorization: Bearer {}", spread.fixture.secret),
        };
        let request = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{credential}\r\n\r\n");
        let sent = Instant::now();
        let roundtrip = client::roundtrip(&mut conn, addr, request.as_bytes());
        let answer =
            runtime.block_on(async { tokio::time::timeout(READ_TIMEOUT, roundtrip).await });
        let Ok(Ok(http1::Answer { status, body, .. })) = answer else {
            o.errors += 1;
            if o.errors > 100 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        o.latency.record(sent.elapsed());
        o.responses += 1;
        o.bytes += body.len() as u64;
        if status != 200 {
            o.non_2xx += 1;
            if o.samples.len() < 3 {
                o.samples.push(format!(
                    "{target}: {status} {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ));
            }
            continue;
        }
        let checked = match row {
            ReadRow::Feed => {
                check_page(body, o.responses == 1, spread.events.saturating_sub(seen)).and_then(
                    |n| {
                        seen += n;
                        if let Some(next) = next_cursor(body) {
                            after = next;
                            return Ok(());
                        }
                        // The end of the space: every event must have been shown once.
                        let shown = seen;
                        (after, seen) = (0, 0);
                        if shown == spread.events {
                            Ok(())
                        } else {
                            Err(format!(
                                "paging through the feed showed {shown} events, the space holds {}",
                                spread.events
                            ))
                        }
                    },
                )
            }
            ReadRow::Dashboard => crate::dashboard::check(body, CAMPAIGNS),
            _ => check_stats(body, o.responses == 1, spread.events),
        };
        if let Err(e) = checked {
            o.wrong += 1;
            if o.samples.len() < 3 {
                o.samples.push(format!("{target}: {e}"));
            }
        }
    }
    o.elapsed = started.elapsed();
    o
}

/// Checks a feed page: as many events as expected (a full page, or what is left), and on the
/// first page every event's attribution. Answers the number of events.
fn check_page(body: &[u8], in_full: bool, left: u64) -> Result<u64, String> {
    let n = count(body, br#""inbox_id":"#);
    let want = left.min(PAGE as u64);
    if n != want {
        return Err(format!("a page of {n} events, expected {want}"));
    }
    if in_full {
        let page: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| format!("the page is not JSON: {e}"))?;
        let events = page
            .get("events")
            .and_then(|e| e.as_array())
            .ok_or("the page has no events")?;
        for e in events {
            let text = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or("");
            let attributed = e.get("matched") == Some(&serde_json::Value::Bool(true))
                && text("campaign_name").starts_with("campaign-")
                && text("link_slug").starts_with("link-")
                && text("fbc").starts_with("fb.1.");
            if !attributed {
                return Err(format!("an event without its attribution: {e}"));
            }
        }
    }
    Ok(n)
}

/// The `next` cursor of a feed page, if it has one (searched for from the end: it follows the
/// events).
fn next_cursor(body: &[u8]) -> Option<u64> {
    let key = br#""next":""#;
    let at = body.windows(key.len()).rposition(|w| w == key)? + key.len();
    let end = body[at..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&body[at..at + end]).ok()?.parse().ok()
}

/// Checks a stats answer: one group per campaign, and on the first answer, that the groups' new
/// deposits add up to the events of the space and their clicks to its clicks.
fn check_stats(body: &[u8], in_full: bool, events: u64) -> Result<(), String> {
    let groups = count(body, br#""group":"#);
    if groups != CAMPAIGNS {
        return Err(format!("{groups} groups, expected {CAMPAIGNS}"));
    }
    let costed = count(body, br#""cost":{"USD":"#);
    if costed != CAMPAIGNS {
        return Err(format!("{costed} groups with a cost, expected {CAMPAIGNS}"));
    }
    if in_full {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let groups = v
            .get("groups")
            .and_then(|g| g.as_array())
            .ok_or("no groups")?;
        let sum = |f: &dyn Fn(&serde_json::Value) -> Option<u64>| -> u64 {
            groups.iter().filter_map(f).sum()
        };
        let deposits = sum(&|g| g.get("events")?.get("deposit")?.as_u64());
        let clicks = sum(&|g| g.get("clicks")?.as_u64());
        let bound = sum(&|g| g.get("bound_clicks")?.as_u64());
        if deposits != events || clicks != CLICKS || bound != CLICKS / 2 {
            return Err(format!(
                "stats count {deposits} deposits, {clicks} clicks, {bound} bound; the space \
                 holds {events}, {CLICKS}, {}",
                CLICKS / 2
            ));
        }
    }
    Ok(())
}

fn count(haystack: &[u8], needle: &[u8]) -> u64 {
    haystack
        .windows(needle.len())
        .filter(|w| w == &needle)
        .count() as u64
}

/// One run of `tracker export`.
pub struct Export {
    /// Lines written (ndjson: events; csv: events and the header row).
    pub lines: u64,
    pub bytes: u64,
    pub wall: Duration,
    /// The export process's peak resident memory, in KiB.
    pub peak_rss_kib: u64,
    /// Its user and system CPU, in seconds.
    pub cpu_s: f64,
    /// The `inbox_id` of the line asked for (ndjson), to export what follows it next time.
    pub marked: Option<u64>,
}

/// Runs `cli export SPACE --format FORMAT --after AFTER`, reading its output through a pipe (as
/// a consumer would) and counting lines; with `mark`, notes the `inbox_id` of that line (from
/// 0). Peak RSS comes from `/usr/bin/time` (the kernel's `ru_maxrss` of the process) when it
/// is installed, else from polling `VmHWM` every 5 ms.
pub fn export(
    cli: &Command,
    format: &str,
    after: u64,
    mark: Option<u64>,
) -> Result<Export, String> {
    let time = Path::new("/usr/bin/time");
    let report = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let mut command = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f")
            .arg("%M %U %S")
            .arg("-o")
            .arg(report.path())
            .arg(cli.get_program());
        c.args(cli.get_args());
        c
    } else {
        let mut c = Command::new(cli.get_program());
        c.args(cli.get_args());
        c
    };
    command
        .args(["export", SPACE, "--format", format, "--after"])
        .arg(after.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("running tracker export: {e}"))?;
    let pid = child.id();
    let polled = (!time.exists()).then(|| crate::server::poll_peak_rss(pid));
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let mut stderr = child.stderr.take().expect("stderr was piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (lines, bytes, marked) = drain(&mut stdout, mark)?;
    let status = child.wait().map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let errors = errors.join().unwrap_or_default();
    let polled = polled.map_or(0, |p| p.join().unwrap_or(0));
    if !status.success() {
        return Err(format!("tracker export failed ({status}): {errors}"));
    }
    let (peak_rss_kib, cpu_s) = if time.exists() {
        let text = std::fs::read_to_string(report.path()).map_err(|e| e.to_string())?;
        let fields: Vec<f64> = text
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        match fields.as_slice() {
            #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
            [kib, user, system] => (*kib as u64, user + system),
            _ => return Err(format!("could not read /usr/bin/time's report: {text:?}")),
        }
    } else {
        (polled, 0.0)
    };
    if mark.is_some() && marked.is_none() {
        return Err(format!(
            "the export has no line {mark:?} starting with an inbox_id"
        ));
    }
    Ok(Export {
        lines,
        bytes,
        wall,
        peak_rss_kib,
        cpu_s,
        marked,
    })
}

/// Reads an export's output to its end: its lines and bytes, and the `inbox_id` that line
/// `mark` (from 0) starts with.
fn drain(stdout: &mut impl Read, mark: Option<u64>) -> Result<(u64, u64, Option<u64>), String> {
    let (mut lines, mut bytes) = (0u64, 0u64);
    // The start of line `mark`, enough to hold its `{"inbox_id":"…"`.
    let mut marked = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = stdout
            .read(&mut buf)
            .map_err(|e| format!("reading the export: {e}"))?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        // No crate for this: a few hundred MB at most, counted at memory speed.
        #[allow(clippy::naive_bytecount)]
        let newlines = buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        if let Some(m) = mark
            && marked.len() < 40
            && lines + newlines >= m
        {
            let mut line = lines;
            for &b in &buf[..n] {
                if line == m && marked.len() < 40 {
                    marked.push(b);
                }
                if b == b'\n' {
                    line += 1;
                    if line > m {
                        break;
                    }
                }
            }
        }
        lines += newlines;
    }
    let key = br#"{"inbox_id":""#;
    let marked = marked.strip_prefix(key).and_then(|rest| {
        let end = rest.iter().position(|&b| b == b'"')?;
        std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
    });
    Ok((lines, bytes, marked))
}
