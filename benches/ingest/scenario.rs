//! What the benchmark sends: one [`Scenario`] per endpoint and case, each a request template
//! that both load generators render from the same pieces, so `wrk` and the in-repo client send
//! byte-for-byte the same kind of request.

use std::fmt::Write as _;

/// Credentials and the records made before the load starts.
pub struct Fixture {
    pub secret: String,
    pub ingest_token: String,
    /// Clicks created during setup; events name them (so the `matched` look-up finds one) and
    /// binds bind them.
    pub click_uids: Vec<String>,
    /// How many events with eids `known-0..` were stored during setup, for the duplicate case.
    pub known_events: usize,
    /// Telegram users with bound clicks (one to five each), made during setup when the
    /// `tg_unique` case runs; its events name them.
    pub tg_users: Vec<u64>,
    /// Makes eids and fbclids unique to this run of the benchmark.
    pub run: String,
    /// The secret of the `unique_dest` case's space (`deliveries.rs`); empty unless it runs.
    pub dest_secret: String,
}

/// A part of a request.
#[derive(Clone, Debug)]
pub enum Piece {
    Lit(String),
    /// A token no other request of the run repeats.
    Unique,
    /// A setup click's uid, chosen round-robin.
    ClickUid,
    /// The Telegram id that goes with that click: 1000000 + its index, so a repeat is a retry.
    TgId,
    /// A Telegram user with bound clicks, chosen round-robin.
    TgUser,
    /// The index of a known event, round-robin.
    Known,
    /// The request's number modulo this: spreads requests over a few names (campaigns, links).
    Cycle(u64),
    /// An `occurred_at_ms` in the past: `base_ms` less a whole number of hours, `(seq / stride) %
    /// hours`, so that with `stride` equal to the number of groups every group gets every hour.
    PastTime {
        base_ms: u64,
        stride: u64,
        hours: u64,
    },
}

/// One hour in milliseconds.
pub const HOUR_MS: u64 = 3_600_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    Healthz,
    DryRun,
    Unique,
    Duplicate,
    GetE,
    Bind,
    Clicks,
    /// `GET /l/<slug>`: a tracking link in redirect mode, each visit a new click.
    Link,
    /// The same with a new `fbclid` each visit, as Meta's ads add it.
    LinkFbclid,
    /// The same with a new `TikTok` `ttclid` each visit.
    LinkTtclid,
    /// The same with a new Google `gclid` each visit.
    LinkGclid,
    /// `GET /l/<slug>` of a link to a Telegram channel (`channel.rs`), its pool of invite links
    /// filled before the row: each visit a click that takes an invite link.
    ChannelLink,
    /// `POST /l/<slug>/view` of [`BENCH_LINK`] from its allowed origin: a landing page's view,
    /// counted per link per day.
    View,
    /// `POST /miniapp/<space>/bind` with one `initData` signed by the space's bot (the Bot API
    /// stand-in's, `channel.rs`), naming one click: each a bind, answered as the same one.
    MiniAppBind,
    /// `POST /events` of unique events naming a Telegram user (one to five bound clicks) and no
    /// uid: attributed by the user's first bound click.
    TgUnique,
    /// `unique` in a space with one `meta_capi` and one `webhook` destination (answered at once
    /// by a receiver on loopback): each event also writes its two deliveries.
    UniqueDest,
    /// `POST /events/batch` of [`BATCH_EVENTS`] unique events (the `unique` case's event, each
    /// with its own eid) a request.
    Batch,
}

/// Events in each request of the `batch` case.
pub const BATCH_EVENTS: u64 = 100;

/// The tracking link the link cases visit, made during setup.
pub const BENCH_LINK: &str = "bench-link";

/// The origin [`BENCH_LINK`] counts views from, and the `view` case's requests come from.
pub const BENCH_ORIGIN: &str = "https://land.bench.example";

impl Case {
    pub const ALL: [Case; 17] = [
        Case::Healthz,
        Case::DryRun,
        Case::Unique,
        Case::Batch,
        Case::UniqueDest,
        Case::TgUnique,
        Case::Duplicate,
        Case::GetE,
        Case::Bind,
        Case::Clicks,
        Case::Link,
        Case::LinkFbclid,
        Case::LinkTtclid,
        Case::LinkGclid,
        Case::ChannelLink,
        Case::View,
        Case::MiniAppBind,
    ];

    /// The short name used on the command line (`--only unique,dry_run`).
    pub fn name(self) -> &'static str {
        match self {
            Case::Healthz => "healthz",
            Case::DryRun => "dry_run",
            Case::Unique => "unique",
            Case::TgUnique => "tg_unique",
            Case::UniqueDest => "unique_dest",
            Case::Batch => "batch",
            Case::Duplicate => "duplicate",
            Case::GetE => "get_e",
            Case::Bind => "bind",
            Case::Clicks => "clicks",
            Case::Link => "link",
            Case::LinkFbclid => "link_fbclid",
            Case::LinkTtclid => "link_ttclid",
            Case::LinkGclid => "link_gclid",
            Case::ChannelLink => "channel_link",
            Case::View => "view",
            Case::MiniAppBind => "miniapp_bind",
        }
    }

    /// What the table shows.
    pub fn label(self) -> &'static str {
        match self {
            Case::Healthz => "GET /healthz",
            Case::DryRun => "POST /events dry_run",
            Case::Unique => "POST /events unique",
            Case::TgUnique => "POST /events by tg_id",
            Case::UniqueDest => "POST /events unique, 2 destinations",
            Case::Batch => "POST /events/batch 100",
            Case::Duplicate => "POST /events duplicate",
            Case::GetE => "GET /e unique",
            Case::Bind => "POST /bind",
            Case::Clicks => "POST /clicks",
            Case::Link => "GET /l/<slug>",
            Case::LinkFbclid => "GET /l/<slug> fbclid",
            Case::LinkTtclid => "GET /l/<slug> ttclid",
            Case::LinkGclid => "GET /l/<slug> gclid",
            Case::ChannelLink => "GET /l/<slug> channel",
            Case::View => "POST /l/<slug>/view",
            Case::MiniAppBind => "POST /miniapp/<space>/bind",
        }
    }

    /// Whether each 2xx answer stored new events ([`Case::events_per_request`] of them).
    pub fn stores_an_event(self) -> bool {
        matches!(
            self,
            Case::Unique | Case::GetE | Case::TgUnique | Case::UniqueDest | Case::Batch
        )
    }

    /// The events each request carries: [`BATCH_EVENTS`] for `batch`, else one.
    pub fn events_per_request(self) -> u64 {
        if self == Case::Batch { BATCH_EVENTS } else { 1 }
    }

    /// Text every successful answer (head and body) must contain.
    pub fn expect(self) -> &'static str {
        match self {
            Case::Healthz | Case::Bind => r#""ok":true"#,
            Case::View => "cache-control: no-store",
            Case::MiniAppBind => r#""matched":true"#,
            Case::DryRun => r#""dry_run":true"#,
            Case::Unique | Case::GetE | Case::UniqueDest => r#""status":"queued""#,
            // The first event's result; the count of stored events shows every one was new.
            Case::Batch => r#"{"ok":true,"results":[{"ok":true,"status":"queued""#,
            // Every one found its click; the count of stored events shows each was new.
            Case::TgUnique => r#""matched":true,"attributed_by":"tg_id""#,
            Case::Duplicate => r#""status":"duplicate""#,
            Case::Clicks => r#""created":true"#,
            // hyper writes header names in lower case.
            Case::Link | Case::LinkFbclid | Case::LinkTtclid | Case::LinkGclid => {
                "location: https://t.me/bench_bot?start="
            }
            // An invite link of the pool, or the fallback once the pool is empty.
            Case::ChannelLink => "location: https://t.me/+",
        }
    }
}

/// The start of the click id a link case's visit adds, as each platform's ads add it (a new one
/// each visit: [`Piece::Unique`] follows); `None` for the plain visit.
fn click_id(case: Case, fx: &Fixture, tag: &str) -> Option<String> {
    let run = &fx.run;
    match case {
        Case::LinkFbclid => Some(format!("&fbclid=IwAR{run}-{tag}-")),
        Case::LinkTtclid => Some(format!("&ttclid=E.C.P.{run}-{tag}-")),
        Case::LinkGclid => Some(format!("&gclid=Cj0KCQiA{run}-{tag}-")),
        _ => None,
    }
}

/// A request template: method, target (path and query) and body, as pieces.
pub struct Template {
    pub method: &'static str,
    pub target: Vec<Piece>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<Piece>>,
}

/// The headers of a POST with the space's secret.
fn bearer(fx: &Fixture) -> Vec<(&'static str, String)> {
    vec![
        ("Authorization", format!("Bearer {}", fx.secret)),
        ("Content-Type", "application/json".to_owned()),
    ]
}

fn lit(s: &str) -> Piece {
    Piece::Lit(s.to_owned())
}

/// The event every ingest case sends: a deposit of a known click, the common postback.
fn event_body(eid: Vec<Piece>, dry_run: bool) -> Vec<Piece> {
    let mut body = vec![
        lit(r#"{"event":"deposit","uid":""#),
        Piece::ClickUid,
        lit(r#"","value":"12.50","currency":"USD","eid":""#),
    ];
    body.extend(eid);
    body.push(lit(if dry_run {
        r#"","dry_run":true}"#
    } else {
        r#""}"#
    }));
    body
}

/// A batch of [`BATCH_EVENTS`] of the `unique` case's events, the `i`th with eid `<eid>-i`.
fn batch_body(eid: &[Piece]) -> Vec<Piece> {
    let mut body = vec![lit(r#"{"events":["#)];
    for i in 0..BATCH_EVENTS {
        if i > 0 {
            body.push(lit(","));
        }
        let mut eid = eid.to_vec();
        eid.push(Piece::Lit(format!("-{i}")));
        body.extend(event_body(eid, false));
    }
    body.push(lit("]}"));
    body
}

impl Template {
    /// The template of `case`; `tag` is unique per run of a case (e.g. `unique-64`).
    pub fn of(case: Case, fx: &Fixture, tag: &str) -> Template {
        let bearer = bearer(fx);
        let unique_eid = vec![Piece::Lit(format!("{}-{tag}-", fx.run)), Piece::Unique];
        let post = |target: &str, body| Template {
            method: "POST",
            target: vec![lit(target)],
            headers: bearer.clone(),
            body: Some(body),
        };
        match case {
            Case::Healthz => Template {
                method: "GET",
                target: vec![lit("/healthz")],
                headers: Vec::new(),
                body: None,
            },
            Case::DryRun => post("/events", event_body(unique_eid, true)),
            Case::Unique => post("/events", event_body(unique_eid, false)),
            Case::Batch => post("/events/batch", batch_body(&unique_eid)),
            Case::UniqueDest => Template {
                method: "POST",
                target: vec![lit("/events")],
                headers: vec![
                    ("Authorization", format!("Bearer {}", fx.dest_secret)),
                    ("Content-Type", "application/json".to_owned()),
                ],
                body: Some(event_body(unique_eid, false)),
            },
            Case::TgUnique => {
                let mut body = vec![lit(r#"{"event":"deposit","tg_id":"#), Piece::TgUser];
                body.push(lit(r#","value":"12.50","currency":"USD","eid":""#));
                body.extend(unique_eid);
                body.push(lit(r#""}"#));
                post("/events", body)
            }
            Case::Duplicate => post(
                "/events",
                event_body(
                    vec![Piece::Lit(format!("{}-known-", fx.run)), Piece::Known],
                    false,
                ),
            ),
            Case::GetE => {
                let mut target = vec![Piece::Lit(format!(
                    "/e?token={}&event=deposit&uid=",
                    fx.ingest_token
                ))];
                target.push(Piece::ClickUid);
                target.push(lit("&value=12.50&currency=USD&eid="));
                target.extend(unique_eid);
                Template {
                    method: "GET",
                    target,
                    headers: Vec::new(),
                    body: None,
                }
            }
            Case::Bind => post(
                "/bind",
                vec![
                    lit(r#"{"uid":""#),
                    Piece::ClickUid,
                    lit(r#"","tg_id":"#),
                    Piece::TgId,
                    lit("}"),
                ],
            ),
            Case::Link
            | Case::LinkFbclid
            | Case::LinkTtclid
            | Case::LinkGclid
            | Case::ChannelLink => Template::visit(case, fx, tag),
            Case::View => Template::view(fx, tag),
            Case::MiniAppBind => Template::miniapp_bind(fx),
            Case::Clicks => post(
                "/clicks",
                vec![
                    lit(r#"{"link_slug":"summer-sale","fbclid":"IwAR"#),
                    Piece::Lit(format!("{}-{tag}-", fx.run)),
                    Piece::Unique,
                    lit(r#"","campaign_name":"bench campaign"}"#),
                ],
            ),
        }
    }

    /// A visit of a tracking link by a phone's browser: [`BENCH_LINK`], or the channel link
    /// for `channel_link`, with a new click id each time for the click-id cases.
    fn visit(case: Case, fx: &Fixture, tag: &str) -> Template {
        let slug = if case == Case::ChannelLink {
            crate::channel::BENCH_CHANNEL
        } else {
            BENCH_LINK
        };
        let mut target = vec![Piece::Lit(format!(
            "/l/{slug}?utm_source=fb&utm_campaign=bench"
        ))];
        if let Some(click_id) = click_id(case, fx, tag) {
            target.push(Piece::Lit(click_id));
            target.push(Piece::Unique);
        }
        Template {
            method: "GET",
            target,
            // A phone's browser: crawlers' agents get a preview and record nothing.
            headers: vec![(
                "User-Agent",
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148".to_owned(),
            )],
            body: None,
        }
    }

    /// A landing page's view of [`BENCH_LINK`], from its allowed origin, with the page's ids.
    fn view(fx: &Fixture, tag: &str) -> Template {
        Template {
            method: "POST",
            target: vec![Piece::Lit(format!(
                "/l/{BENCH_LINK}/view?utm_source=fb&fbclid=IwAR{}-{tag}",
                fx.run
            ))],
            headers: vec![("Origin", BENCH_ORIGIN.to_owned())],
            body: None,
        }
    }

    /// A Mini App's bind of the first setup click, with `initData` signed now by the space's bot
    /// (the Bot API stand-in's token) as Telegram signs it.
    fn miniapp_bind(fx: &Fixture) -> Template {
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .to_string();
        let uid = fx.click_uids.first().map_or("none", String::as_str);
        let init_data = tracker::domain::init_data::sign(
            &[
                ("auth_date", &now_s),
                ("user", r#"{"id":777000,"first_name":"Bench"}"#),
                ("start_param", uid),
            ],
            crate::channel::TOKEN,
        );
        Template {
            method: "POST",
            target: vec![lit("/miniapp/default/bind")],
            headers: vec![("Content-Type", "application/json".to_owned())],
            body: Some(vec![Piece::Lit(
                serde_json::json!({ "init_data": init_data }).to_string(),
            )]),
        }
    }

    /// The request that makes [`BENCH_LINK`] during setup.
    pub fn bench_link(fx: &Fixture) -> Vec<u8> {
        let body = format!(
            r#"{{"slug":"{BENCH_LINK}","bot":"bench_bot","campaign_name":"bench campaign","allowed_origins":["{BENCH_ORIGIN}"]}}"#
        );
        Template {
            method: "POST",
            target: vec![lit("/links")],
            headers: bearer(fx),
            body: Some(vec![Piece::Lit(body)]),
        }
        .render(fx, 0)
    }

    /// A click of the read rows' space: campaign `campaign-(seq % campaigns)`, link
    /// `link-(seq % links)`, a new `fbclid` each (so the feed shows an `fbc`).
    pub fn spread_click(fx: &Fixture, campaigns: u64, links: u64) -> Template {
        Template {
            method: "POST",
            target: vec![lit("/clicks")],
            headers: bearer(fx),
            body: Some(vec![
                lit(r#"{"link_slug":"link-"#),
                Piece::Cycle(links),
                Piece::Lit(format!(r#"","fbclid":"IwAR{}-spread-"#, fx.run)),
                Piece::Unique,
                lit(r#"","campaign_name":"campaign-"#),
                Piece::Cycle(campaigns),
                lit(r#""}"#),
            ]),
        }
    }

    /// An event of the read rows' space: a deposit of click `seq % clicks` (so of campaign
    /// `seq % campaigns` when `clicks` is a multiple of it), in hour `(seq / campaigns) % hours`
    /// before `base_ms`, so every campaign has events in every one of those hours.
    pub fn spread_event(fx: &Fixture, base_ms: u64, campaigns: u64, hours: u64) -> Template {
        let mut body = vec![
            lit(r#"{"event":"deposit","uid":""#),
            Piece::ClickUid,
            lit(r#"","value":"12.50","currency":"USD","eid":""#),
            Piece::Lit(format!("{}-spread-", fx.run)),
            Piece::Unique,
            lit(r#"","occurred_at_ms":"#),
        ];
        body.push(Piece::PastTime {
            base_ms,
            stride: campaigns,
            hours,
        });
        body.push(lit("}"));
        Template {
            method: "POST",
            target: vec![lit("/events")],
            headers: bearer(fx),
            body: Some(body),
        }
    }

    /// The binding of click `uid` to Telegram user `tg_id`, made during setup.
    pub fn bind(fx: &Fixture, uid: &str, tg_id: u64) -> Vec<u8> {
        Template {
            method: "POST",
            target: vec![lit("/bind")],
            headers: bearer(fx),
            body: Some(vec![Piece::Lit(format!(
                r#"{{"uid":"{uid}","tg_id":{tg_id}}}"#
            ))]),
        }
        .render(fx, 0)
    }

    /// The known events stored during setup, as requests: the duplicate case repeats them.
    pub fn known_event(fx: &Fixture, i: usize) -> Vec<u8> {
        let t = Template::of(Case::Duplicate, fx, "known");
        t.render(fx, i as u64)
    }

    /// Request number `seq` as HTTP/1.1 bytes.
    pub fn render(&self, fx: &Fixture, seq: u64) -> Vec<u8> {
        let fill = |pieces: &[Piece], out: &mut String| {
            let n = fx.click_uids.len().max(1) as u64;
            for p in pieces {
                match p {
                    Piece::Lit(s) => out.push_str(s),
                    Piece::Unique => {
                        let _ = write!(out, "{seq}");
                    }
                    Piece::ClickUid => {
                        out.push_str(fx.click_uids.get((seq % n) as usize).map_or("none", |s| s));
                    }
                    Piece::TgId => {
                        let _ = write!(out, "{}", 1_000_000 + seq % n);
                    }
                    Piece::TgUser => {
                        let users = &fx.tg_users;
                        let user = users.get((seq % users.len().max(1) as u64) as usize);
                        let _ = write!(out, "{}", user.copied().unwrap_or(1));
                    }
                    Piece::Known => {
                        let _ = write!(out, "{}", seq % fx.known_events.max(1) as u64);
                    }
                    Piece::Cycle(k) => {
                        let _ = write!(out, "{}", seq % k.max(&1));
                    }
                    Piece::PastTime {
                        base_ms,
                        stride,
                        hours,
                    } => {
                        let back = (seq / stride.max(&1)) % hours.max(&1);
                        let _ = write!(out, "{}", base_ms - back * HOUR_MS);
                    }
                }
            }
        };
        let mut target = String::new();
        fill(&self.target, &mut target);
        let mut out = format!("{} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n", self.method);
        for (k, v) in &self.headers {
            let _ = write!(out, "{k}: {v}\r\n");
        }
        match &self.body {
            Some(pieces) => {
                let mut body = String::new();
                fill(pieces, &mut body);
                let _ = write!(out, "Content-Length: {}\r\n\r\n{body}", body.len());
            }
            None => out.push_str("\r\n"),
        }
        out.into_bytes()
    }

    /// A `wrk` script that sends the same requests. Each wrk thread numbers its own requests;
    /// the thread's number goes in front, so unique tokens stay unique across threads.
    pub fn lua(&self, fx: &Fixture) -> String {
        let mut s = String::new();
        s.push_str("-- written by benches/ingest; one copy per wrk thread\n");
        s.push_str("local n = 0\nlocal threads = 0\n");
        s.push_str(
            "function setup(thread)\n  threads = threads + 1\n  thread:set(\"tid\", threads)\nend\n",
        );
        s.push_str("local uids = {");
        for (i, u) in fx.click_uids.iter().enumerate() {
            if i % 8 == 0 {
                s.push_str("\n  ");
            }
            let _ = write!(s, "\"{u}\", ");
        }
        s.push_str("\n}\nif #uids == 0 then uids = {\"none\"} end\n");
        s.push_str("local tg_users = {");
        for (i, u) in fx.tg_users.iter().enumerate() {
            if i % 8 == 0 {
                s.push_str("\n  ");
            }
            let _ = write!(s, "{u}, ");
        }
        s.push_str("\n}\nif #tg_users == 0 then tg_users = {1} end\n");
        let _ = writeln!(s, "local known = {}", fx.known_events.max(1));
        s.push_str("local headers = {");
        for (k, v) in &self.headers {
            let _ = write!(s, "[ {} ] = {}, ", lua_str(k), lua_str(v));
        }
        s.push_str("}\n");
        // Each piece's Lua expression, joined by `sep`.
        let expr_joined = |pieces: &[Piece], sep: &str| {
            pieces
                .iter()
                .map(|p| match p {
                    Piece::Lit(l) => lua_str(l),
                    Piece::Unique => "tid .. \"x\" .. n".to_owned(),
                    Piece::ClickUid => "uids[(n % #uids) + 1]".to_owned(),
                    Piece::TgId => "(1000000 + n % #uids)".to_owned(),
                    Piece::TgUser => "tg_users[(n % #tg_users) + 1]".to_owned(),
                    Piece::Known => "(n % known)".to_owned(),
                    Piece::Cycle(k) => format!("(n % {})", k.max(&1)),
                    Piece::PastTime {
                        base_ms,
                        stride,
                        hours,
                    } => format!(
                        "string.format(\"%d\", {base_ms} - (math.floor(n / {}) % {}) * {HOUR_MS})",
                        stride.max(&1),
                        hours.max(&1)
                    ),
                })
                .collect::<Vec<_>>()
                .join(sep)
        };
        let expr = |pieces: &[Piece]| expr_joined(pieces, " .. ");
        s.push_str("function request()\n  n = n + 1\n");
        let _ = writeln!(s, "  local target = {}", expr(&self.target));
        match &self.body {
            Some(body) => {
                // The pieces as one table, joined once: a batch's body as one `..` expression
                // is hundreds of operands, past what LuaJIT's parser takes ("chunk has too many
                // syntax levels"), and wrk then sends its default request instead.
                let items = expr_joined(body, ", ");
                let _ = writeln!(s, "  local body = table.concat({{ {items} }})");
                let _ = writeln!(
                    s,
                    "  return wrk.format({}, target, headers, body)",
                    lua_str(self.method)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  return wrk.format({}, target, headers)",
                    lua_str(self.method)
                );
            }
        }
        s.push_str("end\n");
        s
    }
}

/// A Lua long string: no escaping needed for JSON or URLs.
fn lua_str(s: &str) -> String {
    format!("[==[{s}]==]")
}
