//! The bench: a temporary directory with the server running on a data file in it, set up for
//! load (a space's clicks, known events, the tracking link, Telegram users and channels as the
//! rows ask), and, once the server stops, the data file checked against every acknowledged
//! event. Every mode measures on one.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use crate::args::{Args, MetricsChoice, Mode};
use crate::scenario::{Case, Fixture, Template};
use crate::server::{self, Server};
use crate::{channel, client, deliveries};
use tracker::storage::{Store, StoreOptions, read};

/// Clicks made during setup (events name them; binds bind them).
pub const SETUP_CLICKS: usize = 1000;

/// Events stored during setup, repeated by the duplicate case.
pub const KNOWN_EVENTS: usize = 1000;

/// Telegram users bound during setup for the `tg_unique` case: user `i` has `1 + i % 5` bound
/// clicks (900 clicks in all), bound one after another.
const TG_USERS: u64 = 300;

/// A temporary directory with the server running on a data file in it, set up for load.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub server: Server,
    pub fixture: Arc<Fixture>,
    /// Events stored so far that the data file must hold: setup's plus every acknowledged one.
    pub acked_events: u64,
    /// Events the server may have stored beyond those: requests in flight when `wrk` stopped
    /// counting.
    pub unacked_slack: u64,
    /// Load runs so far, which tag their eids.
    pub runs: u64,
}

impl Bench {
    pub fn start(args: &Args) -> Result<Bench, String> {
        Bench::start_counting(args, args.metrics == MetricsChoice::On)
    }

    /// [`Bench::start`], with a server that counts for `/metrics` or not.
    pub fn start_counting(args: &Args, metrics: bool) -> Result<Bench, String> {
        Bench::start_with(args, metrics, "")
    }

    /// [`Bench::start_counting`], with `extra` (TOML) after every other setting: a table such
    /// as `[backup_s3]` goes there.
    pub fn start_with(args: &Args, metrics: bool, extra: &str) -> Result<Bench, String> {
        let dir = tempfile::Builder::new()
            .prefix("tracker-bench-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        // Every connection of the load comes from 127.0.0.1: the per-address limits are set
        // where they never refuse, but still run (their cost is part of every row).
        // The `unique_dest` case's destinations are on loopback.
        let mut settings = String::from(
            "max_connections_per_address = 1000000\naddress_rate_limit = 10000000\n\
             allow_private_destinations = true\n",
        );
        if metrics {
            // `/metrics` on a port of its own, so the server counts every request.
            settings.push_str("metrics_listen = \"127.0.0.1:0\"\n");
        }
        if let Some(n) = args.rate_limit {
            let _ = writeln!(settings, "rate_limit = {n}\nrate_burst = {n}");
        }
        if args.mode == Mode::Prune {
            // A window short enough that the deposits stored expire during the run, and
            // `/metrics` (if not on already) to count what was pruned.
            settings.push_str("dedup_window = \"2s\"\n");
            if !metrics {
                settings.push_str("metrics_listen = \"127.0.0.1:0\"\n");
            }
        }
        // A channel link's rows: the server talks to the Bot API stand-in.
        let channels = matches!(args.mode, Mode::Full | Mode::Smoke)
            && (args.cases.contains(&Case::ChannelLink)
                || args.cases.contains(&Case::MiniAppBind)
                || args.joins);
        if channels {
            settings.push_str(&channel::settings()?);
        }
        settings.push_str(extra);
        let server = Server::start(dir.path(), args.log.as_deref(), &settings)?;
        let mut fixture = Fixture {
            secret: server.secret.clone(),
            ingest_token: server.ingest_token.clone(),
            click_uids: Vec::new(),
            known_events: KNOWN_EVENTS,
            tg_users: Vec::new(),
            run: format!("r{}", std::process::id()),
            dest_secret: String::new(),
        };
        if args.cases.contains(&Case::UniqueDest) {
            let receiver = deliveries::receiver()?;
            fixture.dest_secret = deliveries::setup(server.command(), server.addr, receiver)?;
        }
        let clicks = Template::of(Case::Clicks, &fixture, "setup");
        let requests = (0..SETUP_CLICKS as u64)
            .map(|i| clicks.render(&fixture, i))
            .collect();
        fixture.click_uids = client::click_uids(server.addr, requests)
            .map_err(|e| format!("setting up clicks: {e}"))?;
        if args.cases.contains(&Case::TgUnique) {
            fixture.tg_users = bind_tg_users(server.addr, &fixture)?;
        }
        let made = client::fetch_all(server.addr, 1, vec![Template::bench_link(&fixture)]);
        if !made.iter().all(|(status, _)| (200..300).contains(status)) {
            return Err(format!("setting up the tracking link: {made:?}"));
        }
        if channels {
            channel::setup(server.addr, &fixture.secret)?;
        }
        let requests = (0..KNOWN_EVENTS)
            .map(|i| Template::known_event(&fixture, i))
            .collect();
        for (status, body) in client::fetch_all(server.addr, 16, requests) {
            if status != 200 || !String::from_utf8_lossy(&body).contains(r#""status":"queued""#) {
                return Err(format!(
                    "setting up known events: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
            }
        }
        Ok(Bench {
            dir,
            server,
            fixture: Arc::new(fixture),
            acked_events: KNOWN_EVENTS as u64,
            unacked_slack: 0,
            runs: 0,
        })
    }

    /// Stops the server and checks the data file against what was acknowledged.
    pub fn finish(self, keep: bool) -> Result<DataCheck, String> {
        self.finish_then(keep, |_| ()).map(|(check, ())| check)
    }

    /// Stops the server, runs `after_stop` with a `tracker` command line on the data file it
    /// left (the direct export), and checks the data file against what was acknowledged.
    pub fn finish_then<T>(
        self,
        keep: bool,
        after_stop: impl FnOnce(std::process::Command) -> T,
    ) -> Result<(DataCheck, T), String> {
        let peak_rss = self.server.peak_rss().unwrap_or(0);
        let data = self.server.data.clone();
        let (bin, config) = (self.server.bin.clone(), self.server.config.clone());
        let status = self.server.stop()?;
        if !status.success() {
            return Err(format!("the server exited with {status}"));
        }
        let after = after_stop(server::command(&bin, &config, &data));
        let file_bytes = std::fs::metadata(&data).map_or(0, |m| m.len());
        let (stored, usage) = count_events(&data)?;
        let (low, high) = (self.acked_events, self.acked_events + self.unacked_slack);
        let verdict = if stored < low {
            Err(format!(
                "{} acknowledged events are missing: the data file holds {stored}, {low} were \
                 acknowledged",
                low - stored
            ))
        } else if stored > high {
            Err(format!(
                "the data file holds {stored} events, more than the {high} sent"
            ))
        } else {
            Ok(())
        };
        if keep {
            let path = self.dir.keep();
            eprintln!("kept {}", path.display());
        }
        Ok((
            DataCheck {
                stored,
                acked: low,
                file_bytes,
                peak_rss,
                usage,
                verdict,
            },
            after,
        ))
    }
}

/// Makes [`TG_USERS`] Telegram users with one to five bound clicks each (clicks of their own,
/// not the setup clicks the bind case binds); answers their ids.
fn bind_tg_users(addr: std::net::SocketAddr, fixture: &Fixture) -> Result<Vec<u64>, String> {
    let users: Vec<u64> = (0..TG_USERS).map(|i| 5_000_000 + i).collect();
    let owners: Vec<u64> = users
        .iter()
        .enumerate()
        .flat_map(|(i, &user)| std::iter::repeat_n(user, 1 + i % 5))
        .collect();
    let clicks = Template::of(Case::Clicks, fixture, "tg-setup");
    let requests = (0..owners.len() as u64)
        .map(|i| clicks.render(fixture, i))
        .collect();
    let uids = client::click_uids(addr, requests)
        .map_err(|e| format!("setting up the Telegram users' clicks: {e}"))?;
    // One at a time, so each user's bindings have an order.
    let binds = uids
        .iter()
        .zip(&owners)
        .map(|(uid, &user)| Template::bind(fixture, uid, user))
        .collect();
    for (status, body) in client::fetch_all(addr, 1, binds) {
        if status != 200 || !String::from_utf8_lossy(&body).contains(r#""matched":true"#) {
            return Err(format!(
                "binding the Telegram users' clicks: {status} {}",
                String::from_utf8_lossy(&body)
            ));
        }
    }
    Ok(users)
}

pub struct DataCheck {
    pub stored: u64,
    pub acked: u64,
    pub file_bytes: u64,
    pub peak_rss: u64,
    pub usage: Vec<read::TableUsage>,
    pub verdict: Result<(), String>,
}

impl DataCheck {
    #[allow(clippy::cast_precision_loss)]
    pub fn bytes_per_event(&self) -> f64 {
        self.file_bytes as f64 / self.stored.max(1) as f64
    }
}

/// Opens the data file with the library, as the server left it, counts the inbox and says
/// where the file's bytes are.
pub fn count_events(path: &Path) -> Result<(u64, Vec<read::TableUsage>), String> {
    let (store, _) =
        Store::open(path, &StoreOptions::default()).map_err(|e| format!("reopening: {e}"))?;
    let counted = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(store.usage())
        .map_err(|e| format!("counting events: {e}"))?;
    store.close();
    Ok(counted)
}

/// The `joins` row (`channel.rs`) with `n` joins, if asked for; the `subscribed` events it
/// recorded are counted as acknowledged.
pub fn channel_joins(
    bench: &mut Bench,
    args: &Args,
    n: u64,
) -> Result<Option<channel::Joins>, String> {
    if !args.joins {
        return Ok(None);
    }
    let visits = (n / 100).clamp(10, channel::POOL);
    let joins = channel::joins(bench.server.addr, &bench.fixture.secret, n, visits)?;
    bench.acked_events += joins.subscribed;
    Ok(Some(joins))
}
