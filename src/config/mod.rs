//! Configuration: built-in defaults, then `tracker.toml`, then `TRACKER_*` variables, then flags.
//!
//! Each layer is read into [`RawSettings`] (every key optional, an unknown key refused by name),
//! the layers are merged, and the result is checked into [`Settings`], whose every field is valid.
//! `RawSettings` is the one list of keys: the file, the environment and the merge all go by it. A
//! configuration error names the key (and, in the file, its line) and exits before the data file
//! is touched.

mod backup;
mod rules;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::value::{self, MapDeserializer};
use serde::de::{self, Deserializer, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize};

use crate::domain::client::Cidr;
use crate::domain::rate::Rate;
use backup::{RawBackupS3, backup_s3, backup_schedule};
use rules::{POSITIVE, duration, millis};

pub use backup::{BackupSchedule, S3_SECRET_ENV, S3Settings, s3_bucket};
pub use rules::ConfigError;

/// Every setting with its default and a comment: what `tracker default-config` prints for a
/// user to start a `tracker.toml` from. Compiled in, and checked against the defaults by a test;
/// the `tracker.toml` beside the sources is the user's own and may differ.
pub const EXAMPLE: &str = include_str!("../default-config.toml");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// Every setting, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub listen: SocketAddr,
    pub data: PathBuf,
    pub default_currency: String,
    pub max_event_age: Duration,
    pub max_clock_skew: Duration,
    pub dedup_window: Duration,
    pub rotation_grace: Duration,
    pub max_body_bytes: u64,
    /// Requests per space: `rate_limit` a second with bursts of `rate_burst` (off at 0).
    pub rate_limit: Rate,
    /// Requests per client address on the public paths (`/l/<slug>`): `address_rate_limit` a
    /// second with bursts of `address_rate_burst` (off at 0).
    pub address_rate_limit: Rate,
    /// Peers whose `X-Forwarded-For` names the client (a reverse proxy in front).
    pub trusted_proxies: Vec<Cidr>,
    pub log_format: LogFormat,
    pub log_level: String,
    /// The public base address of links and snippets; empty means `http://<listen>`.
    pub public_url: String,
    /// User agents (substrings, any case) that get a tracking link's page without a click.
    pub link_preview_agents: Vec<String>,
    /// `miniapp_max_age`: a Mini App's `initData` older than this is refused (`docs/bots.md`).
    pub miniapp_max_age: Duration,
    /// Connections (`docs/api.md#limits`): see `server/mod.rs`.
    pub connections: ConnectionLimits,
    /// Where `GET /metrics` is served (`docs/api.md#metrics`); `None`: nowhere (the default).
    pub metrics_listen: Option<SocketAddr>,
    /// Automatic backups (`backup_dir`, `backup_every`, `backup_keep`); `None`: off (the
    /// default, an empty `backup_dir`).
    pub backups: Option<BackupSchedule>,
    /// Conversions out (`docs/api.md#destinations`): see [`Delivery`].
    pub delivery: Delivery,
    /// Telegram channels (`docs/channels.md`): see [`Telegram`].
    pub telegram: Telegram,
}

/// How the tracker talks to Telegram's Bot API for channel links (`docs/channels.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Telegram {
    /// `telegram_api_url`: the Bot API's address (`https://api.telegram.org`; a local
    /// stand-in's in tests, a private one only with `allow_private_destinations`).
    pub api_url: String,
    /// `invite_pool`: invite links each channel link keeps made ahead.
    pub invite_pool: u32,
    /// `invite_ttl`: an invite link handed out and not used for this long is revoked.
    pub invite_ttl: Duration,
    /// `telegram_poll_timeout`: how long one `getUpdates` waits for an update (long polling).
    pub poll_timeout: Duration,
    /// `telegram_webhook`: updates come to `POST /telegram/<space>` (set with `setWebhook`)
    /// instead of long polling; needs an `https://` `public_url`.
    pub webhook: bool,
    /// `target_check_every`: how often the health checks ask Telegram about each watched bot
    /// and channel (`docs/api.md#target-health`).
    pub check_every: Duration,
}

/// `telegram_api_url`, `invite_pool` (1 to `MAX_INVITE_POOL`), `invite_ttl` (at least a
/// minute), `telegram_poll_timeout` (0 to 50 s, Telegram's longest) and `telegram_webhook`
/// (only with an `https://` `public_url`: Telegram refuses any other webhook), and
/// `target_check_every` (at least a second).
fn telegram_settings(raw: &mut RawSettings) -> Result<Telegram, ConfigError> {
    use crate::domain::channel::MAX_INVITE_POOL;
    let allow_private = raw.allow_private_destinations.unwrap_or(false);
    let api_url = raw
        .telegram_api_url
        .take()
        .unwrap_or_else(|| "https://api.telegram.org".to_owned())
        .trim_end_matches('/')
        .to_owned();
    crate::platform::check_url("telegram_api_url", &api_url, allow_private)
        .map_err(|e| ConfigError(format!("`telegram_api_url`: {}", e.message)))?;
    let invite_pool = raw.invite_pool.unwrap_or(50);
    if !(1..=MAX_INVITE_POOL).contains(&invite_pool) {
        return Err(ConfigError(format!(
            "`invite_pool` must be between 1 and {MAX_INVITE_POOL}, got {invite_pool}"
        )));
    }
    let invite_ttl = duration(
        "invite_ttl",
        raw.invite_ttl.take(),
        "7d",
        Duration::from_secs(60),
    )?;
    let poll_timeout = duration(
        "telegram_poll_timeout",
        raw.telegram_poll_timeout.take(),
        "25s",
        Duration::ZERO,
    )?;
    if poll_timeout > Duration::from_secs(50) {
        return Err(ConfigError(
            "`telegram_poll_timeout` must be between 0s and 50s".to_owned(),
        ));
    }
    let webhook = raw.telegram_webhook.unwrap_or(false);
    let public_url = raw.public_url.as_deref().unwrap_or_default();
    if webhook && !public_url.starts_with("https://") {
        return Err(ConfigError(format!(
            "`telegram_webhook = true` needs an https:// `public_url` (Telegram sends updates \
             to https:// addresses only: \"bad webhook: An HTTPS URL must be provided for \
             webhook\"), got {public_url:?}; or set `telegram_webhook = false` to poll"
        )));
    }
    let check_every = duration(
        "target_check_every",
        raw.target_check_every.take(),
        "1m",
        Duration::from_secs(1),
    )?;
    Ok(Telegram {
        api_url,
        invite_pool,
        invite_ttl,
        poll_timeout,
        webhook,
        check_every,
    })
}

/// How destinations are sent to (`docs/api.md#destinations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Whether a destination may be on a loopback, private or link-local address, and `http://`.
    pub allow_private_destinations: bool,
    /// A delivery still failing this long after its first attempt (or its first after its
    /// destination was paused) is `dead`.
    pub max_age: Duration,
    /// The longest one request to a destination may take, connecting included.
    pub timeout: Duration,
    /// Delivered and cancelled deliveries' rows are deleted this long after their last attempt
    /// (a cancelled one's: after its destination's removal); their counts stay.
    pub retention: Duration,
}

impl Delivery {
    #[must_use]
    pub fn max_age_ms(&self) -> u64 {
        millis(self.max_age)
    }

    #[must_use]
    pub fn retention_ms(&self) -> u64 {
        millis(self.retention)
    }
}

/// `allow_private_destinations`, `delivery_max_age` (at least a minute), `delivery_timeout`
/// (100 ms to 5 minutes) and `delivery_retention` (at least an hour).
fn delivery_settings(
    allow_private: Option<bool>,
    max_age: Option<String>,
    timeout: Option<String>,
    retention: Option<String>,
) -> Result<Delivery, ConfigError> {
    let max_age = duration("delivery_max_age", max_age, "72h", Duration::from_secs(60))?;
    let retention = duration(
        "delivery_retention",
        retention,
        "30d",
        Duration::from_secs(3600),
    )?;
    let timeout = duration(
        "delivery_timeout",
        timeout,
        "10s",
        Duration::from_millis(100),
    )?;
    if timeout > Duration::from_secs(300) {
        return Err(ConfigError(format!(
            "`delivery_timeout` must be between 100ms and 5m, got {:?}",
            humantime::format_duration(timeout).to_string()
        )));
    }
    Ok(Delivery {
        allow_private_destinations: allow_private.unwrap_or(false),
        max_age,
        timeout,
        retention,
    })
}

/// How long a client may take, and how many may be connected (`docs/api.md#limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request head must be complete this long after its first byte (for a new connection:
    /// after it opened).
    pub header_timeout: Duration,
    /// A request body must be complete this long after its head (a deadline for the whole
    /// body, not a gap between bytes).
    pub body_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// SIGTERM ends the process within this, whatever the clients do.
    pub shutdown_timeout: Duration,
    /// Open connections at most; past it new ones wait in the kernel's queue.
    pub max_connections: u32,
    /// Open connections of one client address at most (a peer in `trusted_proxies` is not
    /// counted); past it a new one is answered `429` and closed.
    pub max_connections_per_address: u32,
}

/// The keys as written, each optional; `deny_unknown_fields` makes a typo an error that names it.
/// `Serialize` leaves out the keys a layer does not set (`toml` writes no `None`), which is how
/// one layer is laid over another in [`load`].
#[derive(Deserialize, Serialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    listen: Option<String>,
    data: Option<PathBuf>,
    default_currency: Option<String>,
    max_event_age: Option<String>,
    max_clock_skew: Option<String>,
    dedup_window: Option<String>,
    rotation_grace: Option<String>,
    max_body_bytes: Option<u64>,
    rate_limit: Option<u32>,
    rate_burst: Option<u32>,
    address_rate_limit: Option<u32>,
    address_rate_burst: Option<u32>,
    trusted_proxies: Option<String>,
    log_format: Option<String>,
    log_level: Option<String>,
    public_url: Option<String>,
    link_preview_agents: Option<String>,
    miniapp_max_age: Option<String>,
    header_timeout: Option<String>,
    body_timeout: Option<String>,
    idle_timeout: Option<String>,
    shutdown_timeout: Option<String>,
    max_connections: Option<u32>,
    max_connections_per_address: Option<u32>,
    metrics_listen: Option<String>,
    backup_dir: Option<PathBuf>,
    backup_every: Option<String>,
    backup_keep: Option<u32>,
    backup_s3: Option<RawBackupS3>,
    allow_private_destinations: Option<bool>,
    delivery_max_age: Option<String>,
    delivery_timeout: Option<String>,
    delivery_retention: Option<String>,
    telegram_api_url: Option<String>,
    invite_pool: Option<u32>,
    invite_ttl: Option<String>,
    telegram_poll_timeout: Option<String>,
    telegram_webhook: Option<bool>,
    target_check_every: Option<String>,
}

impl RawSettings {
    /// The keys this layer sets, as TOML values of their own types.
    fn to_table(&self) -> Result<toml::Table, ConfigError> {
        toml::Table::try_from(self).map_err(|e| ConfigError(format!("configuration: {e}")))
    }

    /// One `TRACKER_<KEY>` variable as a layer of its own, read by the same derive as the file,
    /// so the variable must name a key of this struct and its value must fit the key's type.
    fn from_env(name: &str, key: &str, value: &str) -> Result<RawSettings, ConfigError> {
        let one = std::iter::once((key, EnvValue(value)));
        RawSettings::deserialize(MapDeserializer::new(one))
            .map_err(|e: value::Error| ConfigError(format!("environment variable {name}: {e}")))
    }
}

/// An environment variable's value, given to the key it names as that key asks for it: a number
/// for a whole-number key, a boolean for a yes-or-no key, the text for every other.
struct EnvValue<'a>(&'a str);

impl<'de> Deserializer<'de> for EnvValue<'_> {
    type Error = value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor.visit_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, value::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, value::Error> {
        self.deserialize_u64(visitor)
    }

    /// Read as TOML's integer, an `i64`, so the layer can be written as TOML; the key's type
    /// then refuses a negative or too large one.
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, value::Error> {
        match self.0.trim().parse() {
            Ok(n) => visitor.visit_i64(n),
            Err(_) => Err(de::Error::invalid_value(
                de::Unexpected::Str(self.0),
                &"a whole number",
            )),
        }
    }

    /// `true` or `false` for a yes-or-no key (`allow_private_destinations`).
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, value::Error> {
        match self.0.trim() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(de::Error::invalid_value(
                de::Unexpected::Str(self.0),
                &"true or false",
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u8 u16 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl IntoDeserializer<'_, value::Error> for EnvValue<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// Values given on the command line, the top layer.
#[derive(Default, Debug, Clone)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub data: Option<PathBuf>,
}

/// Loads the settings from every layer. `env` is the process environment (a parameter, so tests
/// need not change their own).
pub fn load(
    flags: &Flags,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let (path, explicit) = match &flags.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from("tracker.toml"), false),
    };
    let file = match std::fs::read_to_string(&path) {
        // toml's message gives the line and column, and shows the line.
        Ok(text) => toml::from_str::<RawSettings>(&text).map_err(|e| {
            ConfigError(format!("{}: {}", path.display(), e.to_string().trim_end()))
        })?,
        Err(e) if explicit || e.kind() != std::io::ErrorKind::NotFound => {
            return Err(ConfigError(format!(
                "cannot read config file {}: {e}",
                path.display()
            )));
        }
        Err(_) => RawSettings::default(),
    };
    if file
        .backup_s3
        .as_ref()
        .is_some_and(|s3| s3.secret_access_key.is_some())
    {
        return Err(ConfigError(format!(
            "{}: `secret_access_key` is never read from the configuration file, which is \
             readable by more people and programs than a secret should be: put the secret key \
             in the environment variable {S3_SECRET_ENV}, or in a file of its own named by \
             `secret_access_key_file` in [backup_s3]",
            path.display()
        )));
    }
    let file_gave_data = file.data.is_some();
    // The data file is relative to the config file when the file names it or leaves the default.
    let base = if path.exists() {
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        PathBuf::new()
    };
    let mut table = file.to_table()?;
    let mut cli_data = None;
    let mut env_backup_dir = false;
    let mut env_secret = None;
    for (name, value) in env {
        let Some(key) = name.strip_prefix("TRACKER_") else {
            continue;
        };
        // Not settings: the known credentials of `serve --ephemeral` (read by the command line).
        if key.starts_with("DEV_") {
            continue;
        }
        if name == S3_SECRET_ENV {
            env_secret = Some(value);
            continue;
        }
        let key = key.to_ascii_lowercase();
        // `TRACKER_BACKUP_S3_REGION`: a key of the `[backup_s3]` table, laid over the file's.
        if let Some(s3_key) = key.strip_prefix("backup_s3_") {
            let one = std::iter::once((s3_key, EnvValue(&value)));
            let layer = RawBackupS3::deserialize(MapDeserializer::new(one)).map_err(
                |e: value::Error| ConfigError(format!("environment variable {name}: {e}")),
            )?;
            let layer = toml::Table::try_from(&layer)
                .map_err(|e| ConfigError(format!("configuration: {e}")))?;
            let entry = table
                .entry("backup_s3")
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(s3) = entry {
                s3.extend(layer);
            }
            continue;
        }
        let layer = RawSettings::from_env(&name, &key, &value)?;
        cli_data = layer.data.clone().or(cli_data);
        env_backup_dir |= layer.backup_dir.is_some();
        table.extend(layer.to_table()?);
    }
    let flags_layer = RawSettings {
        listen: flags.listen.clone(),
        data: flags.data.clone(),
        ..RawSettings::default()
    };
    cli_data = flags.data.clone().or(cli_data);
    table.extend(flags_layer.to_table()?);
    let mut raw: RawSettings = table
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError(format!("configuration: {}", e.message())))?;
    let s3 = backup_s3(raw.backup_s3.take(), env_secret, &base)?;
    let mut settings = check(raw, s3)?;
    if cli_data.is_none() && (file_gave_data || !base.as_os_str().is_empty()) {
        settings.data = base.join(&settings.data);
    }
    // Like `data`: relative to the config file when the file names it.
    if let Some(dir) = settings.backups.as_mut().and_then(|b| b.dir.as_mut())
        && !env_backup_dir
    {
        *dir = base.join(&*dir);
    }
    Ok(settings)
}

fn check(mut raw: RawSettings, s3: Option<S3Settings>) -> Result<Settings, ConfigError> {
    let telegram = telegram_settings(&mut raw)?;
    // Read before `raw` is used up; a refusal is still reported where the connection keys'
    // turn comes.
    let connections = connection_limits(&raw);
    let listen_text = raw.listen.unwrap_or_else(|| "127.0.0.1:8080".into());
    let listen = listen_text.parse().map_err(|_| {
        ConfigError(format!(
            "`listen` must be an address and port such as 127.0.0.1:8080, got {listen_text:?}"
        ))
    })?;
    let currency = raw.default_currency.unwrap_or_else(|| "USD".into());
    if !(3..=10).contains(&currency.len()) || !currency.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ConfigError(format!(
            "`default_currency` must be 3 to 10 ASCII letters or digits, got {currency:?}"
        )));
    }
    let log_format = match raw.log_format.as_deref().unwrap_or("pretty") {
        "pretty" => LogFormat::Pretty,
        "json" => LogFormat::Json,
        other => {
            return Err(ConfigError(format!(
                "`log_format` must be \"pretty\" or \"json\", got {other:?}"
            )));
        }
    };
    let log_level = log_level(raw.log_level.unwrap_or_else(|| "info".into()))?;
    let max_body_bytes = raw.max_body_bytes.unwrap_or(16 * 1024);
    if !(256..=16 * 1024 * 1024).contains(&max_body_bytes) {
        return Err(ConfigError(format!(
            "`max_body_bytes` must be between 256 and 16777216, got {max_body_bytes}"
        )));
    }
    // A clock skew of 0 (no time ahead of ours) and a rotation grace of 0 (the replaced
    // credential ends at once) are strict but meaningful. A maximum age of 0 would refuse every
    // time in the past, and a dedup window of 0 would never find a duplicate.
    let max_event_age = duration("max_event_age", raw.max_event_age, "90d", POSITIVE)?;
    let max_clock_skew = duration("max_clock_skew", raw.max_clock_skew, "10m", Duration::ZERO)?;
    let dedup_window = duration("dedup_window", raw.dedup_window, "24h", POSITIVE)?;
    let rotation_grace = duration("rotation_grace", raw.rotation_grace, "24h", Duration::ZERO)?;
    let miniapp_max_age = duration("miniapp_max_age", raw.miniapp_max_age, "1d", POSITIVE)?;
    let public_url = raw.public_url.unwrap_or_default();
    if !(public_url.is_empty()
        || public_url.starts_with("https://")
        || public_url.starts_with("http://"))
        || public_url.bytes().any(|b| !b.is_ascii_graphic())
    {
        return Err(ConfigError(format!(
            "`public_url` must be an http:// or https:// address such as \"https://t.example.com\", got {public_url:?}"
        )));
    }
    let metrics_listen = match raw.metrics_listen.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(text.parse().map_err(|_| {
            ConfigError(format!(
                "`metrics_listen` must be an address and port such as 127.0.0.1:9464, or \"\" \
                 for none, got {text:?}"
            ))
        })?),
    };
    let link_preview_agents = raw
        .link_preview_agents
        .unwrap_or_else(|| crate::domain::link::DEFAULT_PREVIEW_AGENTS.to_owned())
        .split(',')
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    let trusted_proxies = trusted_proxies(raw.trusted_proxies.take())?;
    Ok(Settings {
        listen,
        data: raw.data.unwrap_or_else(|| PathBuf::from("tracker.redb")),
        default_currency: currency.to_ascii_uppercase(),
        max_event_age,
        max_clock_skew,
        dedup_window,
        rotation_grace,
        max_body_bytes,
        rate_limit: rate("rate_limit", raw.rate_limit, "rate_burst", raw.rate_burst)?,
        address_rate_limit: address_rate(raw.address_rate_limit, raw.address_rate_burst)?,
        trusted_proxies,
        log_format,
        log_level,
        public_url: public_url.trim_end_matches('/').to_owned(),
        link_preview_agents,
        miniapp_max_age,
        connections: connections?,
        metrics_listen,
        backups: backup_schedule(raw.backup_dir, raw.backup_every, raw.backup_keep, s3)?,
        delivery: delivery_settings(
            raw.allow_private_destinations,
            raw.delivery_max_age,
            raw.delivery_timeout,
            raw.delivery_retention,
        )?,
        telegram,
    })
}

/// `log_level`: a comma-separated list of directives, each a level or `target=level`, as
/// tracing's `EnvFilter` reads them. `EnvFilter` alone would take any word:
/// a bare `verbose` is to it a target name with every level on, so a mistyped level would turn
/// on trace logging for nothing. Here every directive must name its level.
fn log_level(text: String) -> Result<String, ConfigError> {
    use tracing_subscriber::filter::LevelFilter;
    let is_level = |word: &str| word.trim().parse::<LevelFilter>().is_ok();
    let directives: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let each_names_a_level = directives.iter().all(|directive| {
        is_level(directive)
            || directive
                .rsplit_once('=')
                .is_some_and(|(target, level)| !target.trim().is_empty() && is_level(level))
    });
    if directives.is_empty()
        || !each_names_a_level
        || tracing_subscriber::EnvFilter::try_new(&text).is_err()
    {
        return Err(ConfigError(format!(
            "`log_level` must be one of off, error, warn, info, debug, trace, or a list of \
             directives each ending in one, such as \"info,tracker::access=warn\"; got {text:?}"
        )));
    }
    Ok(text)
}

/// `trusted_proxies`: addresses and ranges, comma-separated.
fn trusted_proxies(text: Option<String>) -> Result<Vec<Cidr>, ConfigError> {
    text.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| Cidr::parse(a).map_err(|e| ConfigError(format!("`trusted_proxies`: {e}"))))
        .collect()
}

/// The most a rate or burst key accepts: far above what one process serves, low enough that
/// a bucket's arithmetic in thousandths cannot overflow.
const MAX_RATE: u32 = 10_000_000;

/// A limit's rate and burst keys: the burst defaults to one second's worth, and must hold at
/// least one request when the limit is on.
fn rate(
    rate_key: &str,
    per_second: Option<u32>,
    burst_key: &str,
    burst: Option<u32>,
) -> Result<Rate, ConfigError> {
    let per_second = per_second.unwrap_or(0);
    if per_second > MAX_RATE {
        return Err(ConfigError(format!(
            "`{rate_key}` must be between 0 (off) and {MAX_RATE}, got {per_second}"
        )));
    }
    let burst = burst.unwrap_or(per_second);
    if per_second > 0 && !(1..=MAX_RATE).contains(&burst) {
        return Err(ConfigError(format!(
            "`{burst_key}` must be between 1 and {MAX_RATE}, got {burst}"
        )));
    }
    Ok(Rate { per_second, burst })
}

/// The per-address limit of the public paths: on by default, at a rate no person clicking an
/// ad meets (`docs/security.md`); `address_rate_limit = 0` turns it off. Its burst defaults to
/// [`ADDRESS_BURST`] while the rate is the default, and to the rate when the rate is set.
fn address_rate(per_second: Option<u32>, burst: Option<u32>) -> Result<Rate, ConfigError> {
    let default_burst = if per_second.is_none() {
        Some(ADDRESS_BURST)
    } else {
        None
    };
    rate(
        "address_rate_limit",
        Some(per_second.unwrap_or(ADDRESS_RATE)),
        "address_rate_burst",
        burst.or(default_burst),
    )
}

/// The default per-address limit of `/l/<slug>`: 2 visits a second with bursts of 20.
const ADDRESS_RATE: u32 = 2;
const ADDRESS_BURST: u32 = 20;

/// The connection keys (`docs/api.md#limits`). A timeout of zero would cut every client off,
/// and one over an hour is no bound at all: both are refused.
fn connection_limits(raw: &RawSettings) -> Result<ConnectionLimits, ConfigError> {
    let bounded = |key: &str, value: &Option<String>, default: &str| {
        let d = duration(key, value.clone(), default, Duration::ZERO)?;
        if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
            return Err(ConfigError(format!(
                "`{key}` must be between 100ms and 1h, got {:?}",
                humantime::format_duration(d).to_string()
            )));
        }
        Ok(d)
    };
    let max_connections = raw.max_connections.unwrap_or(4096);
    if !(1..=1_000_000).contains(&max_connections) {
        return Err(ConfigError(format!(
            "`max_connections` must be between 1 and 1000000, got {max_connections}"
        )));
    }
    let max_connections_per_address = raw.max_connections_per_address.unwrap_or(64);
    if !(1..=1_000_000).contains(&max_connections_per_address) {
        return Err(ConfigError(format!(
            "`max_connections_per_address` must be between 1 and 1000000, got \
             {max_connections_per_address}"
        )));
    }
    Ok(ConnectionLimits {
        header_timeout: bounded("header_timeout", &raw.header_timeout, "10s")?,
        body_timeout: bounded("body_timeout", &raw.body_timeout, "20s")?,
        idle_timeout: bounded("idle_timeout", &raw.idle_timeout, "60s")?,
        shutdown_timeout: bounded("shutdown_timeout", &raw.shutdown_timeout, "10s")?,
        max_connections,
        max_connections_per_address,
    })
}

impl Settings {
    /// The public base address: `public_url`, or `http://<listen>` when it is not set, with
    /// loopback in place of an address of every interface (`0.0.0.0`, `[::]`), which no
    /// browser or HTTP client can be pointed at elsewhere.
    #[must_use]
    pub fn public_url(&self) -> String {
        if !self.public_url.is_empty() {
            return self.public_url.clone();
        }
        let mut at = self.listen;
        if at.ip().is_unspecified() {
            at.set_ip(match at.ip() {
                std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{at}")
    }

    /// Whether the addresses printed and answered are only this machine's own although the
    /// server listens on every interface: `public_url` is not set, so loopback stands in for
    /// `0.0.0.0` or `[::]` ([`Settings::public_url`]) and visitors need `public_url`.
    #[must_use]
    pub fn public_url_missing(&self) -> bool {
        self.public_url.is_empty() && self.listen.ip().is_unspecified()
    }

    /// The built-in defaults, with the data file at `data`: what tests start from.
    ///
    /// # Panics
    /// Never: the defaults are checked by a test.
    #[must_use]
    pub fn with_data(data: PathBuf) -> Settings {
        let mut s = check(RawSettings::default(), None).expect("the defaults are valid");
        s.data = data;
        s
    }

    #[must_use]
    pub fn event_rules(&self) -> crate::domain::event::EventRules {
        crate::domain::event::EventRules {
            default_currency: self.default_currency.clone(),
            max_event_age_ms: millis(self.max_event_age),
            max_clock_skew_ms: millis(self.max_clock_skew),
        }
    }

    /// `miniapp_max_age` in milliseconds, as `domain::event::Freshness` takes it.
    #[must_use]
    pub fn miniapp_max_age_ms(&self) -> u64 {
        millis(self.miniapp_max_age)
    }

    /// `dedup_window` in milliseconds, as `domain::dedup::dedup_key` takes it.
    #[must_use]
    pub fn dedup_window_ms(&self) -> u64 {
        millis(self.dedup_window)
    }

    /// Which windowed dedup entries can no longer match at `now_ms` under `dedup_window`: what
    /// `tracker check` forgives missing (retention prunes them).
    #[must_use]
    pub fn dedup_expiry(&self, now_ms: u64) -> crate::domain::dedup::Expiry {
        crate::domain::dedup::Expiry {
            now_ms,
            window_ms: self.dedup_window_ms(),
        }
    }

    /// `rotation_grace` in milliseconds, as a rotation stores the replaced credential's end.
    #[must_use]
    pub fn rotation_grace_ms(&self) -> u64 {
        millis(self.rotation_grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str, env: &[(&str, &str)], flags: Flags) -> Result<Settings, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracker.toml");
        std::fs::write(&path, text).unwrap();
        let flags = Flags {
            config: Some(path),
            ..flags
        };
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        load(&flags, env).map(|mut s| {
            // Paths are relative to the temporary directory; compare the file name only.
            s.data = PathBuf::from(s.data.file_name().unwrap());
            s
        })
    }

    /// What [`load_text`] refuses `text` and `env` with, no flags given.
    fn load_error(text: &str, env: &[(&str, &str)]) -> ConfigError {
        load_text(text, env, Flags::default()).unwrap_err()
    }

    /// The keys of [`RawSettings`], read from its derived `Deserialize`: serde hands a struct's
    /// field names to `deserialize_struct`, and this deserializer keeps them and stops there.
    fn raw_settings_keys() -> &'static [&'static str] {
        struct Keys(std::cell::Cell<&'static [&'static str]>);
        impl<'de> Deserializer<'de> for &Keys {
            type Error = value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, value::Error> {
                Err(de::Error::custom("RawSettings is a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, value::Error> {
                self.0.set(fields);
                Err(de::Error::custom("the field names are all that is wanted"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let keys = Keys(std::cell::Cell::new(&[]));
        let _ = RawSettings::deserialize(&keys);
        keys.0.get()
    }

    #[test]
    fn the_compiled_in_example_is_every_default() {
        let from_example = load_text(EXAMPLE, &[], Flags::default()).unwrap();
        let defaults = load_text("", &[], Flags::default()).unwrap();
        assert_eq!(from_example, defaults);
        assert_eq!(defaults.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(defaults.dedup_window, Duration::from_secs(86_400));
        assert_eq!(defaults.max_body_bytes, 16_384);
        // Every key is in the example, so the example documents them all.
        assert!(raw_settings_keys().contains(&"backup_keep"));
        for key in raw_settings_keys() {
            assert!(
                EXAMPLE.contains(&format!("{key} =")) || EXAMPLE.contains(&format!("[{key}]")),
                "example lacks {key}"
            );
        }
    }

    #[test]
    fn layers_override_in_order() {
        let s = load_text(
            "listen = \"127.0.0.1:1\"\nrate_limit = 5\n",
            &[
                ("TRACKER_LISTEN", "127.0.0.1:2"),
                ("TRACKER_RATE_LIMIT", "7"),
                ("PATH", "/bin"),
            ],
            Flags::default(),
        )
        .unwrap();
        assert_eq!((s.listen.port(), s.rate_limit.per_second), (2, 7));
        let s = load_text(
            "listen = \"127.0.0.1:1\"\n",
            &[("TRACKER_LISTEN", "127.0.0.1:2")],
            Flags {
                listen: Some("127.0.0.1:3".into()),
                ..Flags::default()
            },
        )
        .unwrap();
        assert_eq!(s.listen.port(), 3);
    }

    #[test]
    fn errors_name_the_key() {
        let e = load_error("listen = \"127.0.0.1:1\"\ndedup_windw = \"1h\"\n", &[]);
        assert!(e.0.contains("unknown field `dedup_windw`"), "{e}");
        assert!(e.0.contains("line 2, column 1"), "{e}");
        assert!(e.0.contains("expected one of `listen`"), "{e}");
        let e = load_error("dedup_window = \"soon\"\n", &[]);
        assert!(e.0.contains("dedup_window"), "{e}");
        let e = load_error("", &[("TRACKER_LISTN", "x")]);
        assert!(e.0.contains("TRACKER_LISTN"), "{e}");
        assert!(e.0.contains("expected one of `listen`"), "{e}");
        for (name, value) in [
            ("TRACKER_RATE_LIMIT", "fast"),
            ("TRACKER_RATE_LIMIT", "-1"),
            ("TRACKER_MAX_BODY_BYTES", "99999999999999999999"),
        ] {
            let e = load_error("", &[(name, value)]);
            assert!(
                e.0.starts_with(&format!("environment variable {name}: ")),
                "{e}"
            );
        }
        let e = load_error("listen = \"nowhere\"\n", &[]);
        assert!(e.0.contains("listen"), "{e}");
        let e = load_error("max_body_bytes = \"big\"\n", &[]);
        assert!(e.0.contains("max_body_bytes"), "{e}");
        assert!(e.0.contains("invalid type: string \"big\""), "{e}");
        let e = load_error("log_format = \"xml\"\n", &[]);
        assert!(e.0.contains("log_format"), "{e}");
    }

    /// A syntax error in the file names the file, the line and the column, and shows the line.
    #[test]
    fn a_syntax_error_names_the_file_line_and_column() {
        let e = load_error(
            "listen = \"127.0.0.1:8080\"\nrate_limit = 5\npublic_url = \"https://x\n",
            &[],
        );
        assert!(
            e.0.contains("tracker.toml: TOML parse error at line 3, column"),
            "{e}"
        );
        assert!(e.0.contains("public_url = \"https://x"), "{e}");
        // Just inside: the same file with the quote closed loads.
        load_text(
            "listen = \"127.0.0.1:8080\"\nrate_limit = 5\npublic_url = \"https://x\"\n",
            &[],
            Flags::default(),
        )
        .unwrap();
    }

    /// `log_level`: levels and `target=level` directives pass; a word that is neither (a
    /// mistyped level, which tracing would read as a target with every level on) is refused,
    /// with the accepted values in the message, from the file and the environment alike.
    #[test]
    fn log_level_takes_levels_and_directives_only() {
        let one = |value: &str| {
            load_text(
                &format!("log_level = {}\n", toml::Value::from(value)),
                &[],
                Flags::default(),
            )
        };
        for good in [
            "info",
            "off",
            "TRACE",
            "warn,tracker::access=info",
            "info,tracker::access=warn",
            "tracker=debug",
            "info,",
            "tracker[request{path=/e}]=debug",
        ] {
            assert_eq!(
                one(good).map(|s| s.log_level),
                Ok(good.to_owned()),
                "{good}"
            );
        }
        for bad in [
            "verbose",
            "",
            "info,verbose",
            "tracker",
            "tracker=verbose",
            "=info",
            "info,tracker=loud",
        ] {
            let e = one(bad).unwrap_err();
            assert!(
                e.0.starts_with("`log_level` must be one of off, error, warn, info, debug, trace"),
                "{bad}: {e}"
            );
            assert!(e.0.contains(&format!("got {bad:?}")), "{e}");
        }
        let e = load_error("", &[("TRACKER_LOG_LEVEL", "verbose")]);
        assert!(e.0.contains("`log_level`"), "{e}");
    }

    /// Every duration key, just inside and just outside its bounds; an error names the key.
    #[test]
    fn durations_are_bounded() {
        let with = |key: &str, value: &str| {
            load_text(&format!("{key} = \"{value}\"\n"), &[], Flags::default())
        };
        let hundred_years = Duration::from_secs(100 * 365 * 86_400 + 25 * 86_400);
        for key in [
            "max_event_age",
            "max_clock_skew",
            "dedup_window",
            "rotation_grace",
        ] {
            let s = with(key, "100y").unwrap_or_else(|e| panic!("{e}"));
            let got = match key {
                "max_event_age" => s.max_event_age,
                "max_clock_skew" => s.max_clock_skew,
                "dedup_window" => s.dedup_window,
                _ => s.rotation_grace,
            };
            assert_eq!(got, hundred_years, "{key}");
            let e = with(key, "100y 1ms").unwrap_err();
            assert!(e.0.starts_with(&format!("`{key}` must be")), "{e}");
            assert!(e.0.contains("100years"), "{e}");
            assert!(with(key, "1ms").is_ok(), "{key}");
        }
        for key in ["max_event_age", "dedup_window"] {
            for zero in ["0s", "999us"] {
                let e = with(key, zero).unwrap_err();
                assert!(
                    e.0.contains(&format!("`{key}` must be between 1ms and")),
                    "{e}"
                );
            }
        }
        for key in ["max_clock_skew", "rotation_grace"] {
            assert!(with(key, "0s").is_ok(), "{key}");
        }
        // Through the environment the same bound holds, and it is the key that is named.
        let e = load_error("", &[("TRACKER_DEDUP_WINDOW", "0s")]);
        assert!(e.0.contains("`dedup_window`"), "{e}");
    }

    #[test]
    fn delivery_settings_have_bounds() {
        let s = load_text("", &[], Flags::default()).unwrap();
        assert_eq!(
            s.delivery,
            Delivery {
                allow_private_destinations: false,
                max_age: Duration::from_secs(72 * 3600),
                timeout: Duration::from_secs(10),
                retention: Duration::from_secs(30 * 86_400),
            }
        );
        let with = |text: &str| load_text(text, &[], Flags::default());
        let with_retention = |d: &str| with(&format!("delivery_retention = \"{d}\""));
        assert!(with_retention("1h").is_ok());
        assert!(with_retention("59m 59s").is_err());
        assert!(with("delivery_timeout = \"100ms\"").is_ok());
        assert!(with("delivery_timeout = \"5m\"").is_ok());
        assert!(with("delivery_timeout = \"99ms\"").is_err());
        assert!(with("delivery_timeout = \"5m 1ms\"").is_err());
        assert!(with("delivery_max_age = \"1m\"").is_ok());
        assert!(with("delivery_max_age = \"59s\"").is_err());
        let env = |v: &str| {
            load_text(
                "",
                &[("TRACKER_ALLOW_PRIVATE_DESTINATIONS", v)],
                Flags::default(),
            )
        };
        assert!(env("true").unwrap().delivery.allow_private_destinations);
        assert!(!env("false").unwrap().delivery.allow_private_destinations);
        assert!(env("yes").unwrap_err().0.contains("true or false"));
    }

    #[test]
    fn milliseconds_of_the_longest_durations_fit() {
        let s = load_text(
            "max_event_age = \"100y\"\nmax_clock_skew = \"100y\"\ndedup_window = \"100y\"\n\
             rotation_grace = \"100y\"\n",
            &[],
            Flags::default(),
        )
        .unwrap();
        let ms = 3_155_760_000_000;
        let rules = s.event_rules();
        assert_eq!((rules.max_event_age_ms, rules.max_clock_skew_ms), (ms, ms));
        assert_eq!((s.dedup_window_ms(), s.rotation_grace_ms()), (ms, ms));
        let defaults = Settings::with_data(PathBuf::from("t.redb"));
        assert_eq!(defaults.dedup_window_ms(), 86_400_000);
        // Settings built by hand skip `check`; the conversion saturates instead of wrapping.
        let huge = Settings {
            dedup_window: Duration::MAX,
            ..defaults
        };
        assert_eq!(huge.dedup_window_ms(), u64::MAX);
    }

    #[test]
    fn connection_limits_are_bounded() {
        let one = |text: &str| load_text(text, &[], Flags::default());
        let c = one("").unwrap().connections;
        assert_eq!(
            (c.header_timeout, c.idle_timeout, c.max_connections),
            (Duration::from_secs(10), Duration::from_secs(60), 4096)
        );
        for key in [
            "header_timeout",
            "body_timeout",
            "idle_timeout",
            "shutdown_timeout",
        ] {
            assert!(one(&format!("{key} = \"100ms\"")).is_ok(), "{key}");
            assert!(one(&format!("{key} = \"1h\"")).is_ok(), "{key}");
            let e = one(&format!("{key} = \"99ms\"")).unwrap_err();
            assert!(e.0.contains(key), "{e}");
            assert!(one(&format!("{key} = \"3601s\"")).is_err(), "{key}");
        }
        assert!(one("max_connections = 1").is_ok());
        assert!(one("max_connections = 1000000").is_ok());
        assert!(
            one("max_connections = 0")
                .unwrap_err()
                .0
                .contains("max_connections")
        );
        assert!(one("max_connections = 1000001").is_err());
        let s = load_text("", &[("TRACKER_MAX_CONNECTIONS", "12")], Flags::default()).unwrap();
        assert_eq!(s.connections.max_connections, 12);
    }

    #[test]
    fn metrics_listen_is_off_unless_given() {
        assert_eq!(
            load_text("", &[], Flags::default()).unwrap().metrics_listen,
            None
        );
        let s = load_text("metrics_listen = \"127.0.0.1:9464\"", &[], Flags::default()).unwrap();
        assert_eq!(s.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        let e = load_error("metrics_listen = \"9464\"", &[]);
        assert!(e.0.contains("metrics_listen"), "{e}");
    }

    /// Automatic backups: off unless `backup_dir` is given; `backup_every` and `backup_keep`
    /// bounded just inside and just outside; a relative directory is the config file's.
    #[test]
    fn backups_are_off_unless_a_directory_is_given() {
        let one = |text: &str| load_text(text, &[], Flags::default());
        assert_eq!(one("").unwrap().backups, None);
        assert_eq!(one("backup_dir = \"\"").unwrap().backups, None);
        let s = one("backup_dir = \"/srv/backups\"").unwrap();
        assert_eq!(
            s.backups,
            Some(BackupSchedule {
                dir: Some(PathBuf::from("/srv/backups")),
                every: Duration::from_secs(86_400),
                keep: 7,
                s3: None,
            })
        );
        let with = |extra: &str| one(&format!("backup_dir = \"/b\"\n{extra}"));
        assert_eq!(
            with("backup_every = \"1m\"")
                .unwrap()
                .backups
                .unwrap()
                .every,
            Duration::from_secs(60)
        );
        let e = with("backup_every = \"59s\"").unwrap_err();
        assert!(e.0.contains("`backup_every` must be between 1m and"), "{e}");
        assert!(with("backup_every = \"100y\"").is_ok());
        assert!(with("backup_every = \"100y 1ms\"").is_err());
        assert_eq!(with("backup_keep = 1").unwrap().backups.unwrap().keep, 1);
        assert_eq!(
            with("backup_keep = 1000").unwrap().backups.unwrap().keep,
            1000
        );
        for bad in ["backup_keep = 0", "backup_keep = 1001"] {
            let e = with(bad).unwrap_err();
            assert!(
                e.0.contains("`backup_keep` must be between 1 and 1000"),
                "{e}"
            );
        }
        // Checked while unused too, so a bad value shows before the day it is turned on.
        assert!(one("backup_every = \"1s\"").is_err());
        // Through the environment the same keys and bounds.
        let s = load_text(
            "",
            &[
                ("TRACKER_BACKUP_DIR", "/e"),
                ("TRACKER_BACKUP_KEEP", "3"),
                ("TRACKER_BACKUP_EVERY", "2h"),
            ],
            Flags::default(),
        )
        .unwrap();
        assert_eq!(
            s.backups,
            Some(BackupSchedule {
                dir: Some(PathBuf::from("/e")),
                every: Duration::from_secs(7200),
                keep: 3,
                s3: None,
            })
        );
        // Relative to the config file, as `data` is.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracker.toml");
        std::fs::write(&path, "backup_dir = \"backups\"\n").unwrap();
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        let s = load(&flags, std::iter::empty()).unwrap();
        assert_eq!(s.backups.unwrap().dir, Some(dir.path().join("backups")));
    }

    /// A `[backup_s3]` table whose every key is valid, with `extra` lines after it.
    fn s3_text(extra: &str) -> String {
        format!(
            "[backup_s3]\nendpoint = \"https://s3.eu-central-1.amazonaws.com\"\n\
             region = \"eu-central-1\"\nbucket = \"tracker-backups\"\n\
             access_key_id = \"AKIAEXAMPLE\"\n{extra}"
        )
    }

    const SECRET: (&str, &str) = (S3_SECRET_ENV, "wJalrXUtnFEMI/K7MDENG");

    /// `[backup_s3]` alone turns the schedule on (uploads only, no `backup_dir`); the secret
    /// comes from the environment or a file, and is never in `Debug`.
    #[test]
    fn backup_s3_turns_uploads_on_with_the_secret_from_outside_the_file() {
        let s = load_text(&s3_text(""), &[SECRET], Flags::default()).unwrap();
        let backups = s.backups.clone().unwrap();
        assert_eq!(backups.dir, None);
        assert_eq!(backups.every, Duration::from_secs(86_400));
        let s3 = backups.s3.unwrap();
        assert_eq!(
            (s3.endpoint.as_str(), s3.bucket.as_str(), s3.prefix.as_str()),
            (
                "https://s3.eu-central-1.amazonaws.com",
                "tracker-backups",
                ""
            )
        );
        assert_eq!(s3.secret_access_key, SECRET.1);
        assert_eq!(s3.retry_for, Duration::from_secs(180));
        for shown in [format!("{s:?}"), format!("{s3:?}")] {
            assert!(!shown.contains(SECRET.1), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        // From a file of its own, relative to the configuration file; its newline is not part
        // of the key.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s3.secret"), "from-a-file\n").unwrap();
        let path = dir.path().join("tracker.toml");
        std::fs::write(&path, s3_text("secret_access_key_file = \"s3.secret\"\n")).unwrap();
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        let s = load(&flags, std::iter::empty()).unwrap();
        assert_eq!(
            s.backups.unwrap().s3.unwrap().secret_access_key,
            "from-a-file"
        );
        // Each key through the environment too.
        let s = load_text(
            &s3_text(""),
            &[
                SECRET,
                ("TRACKER_BACKUP_S3_PREFIX", "prod"),
                ("TRACKER_BACKUP_S3_REGION", "auto"),
            ],
            Flags::default(),
        )
        .unwrap();
        let s3 = s.backups.unwrap().s3.unwrap();
        assert_eq!((s3.prefix.as_str(), s3.region.as_str()), ("prod/", "auto"));
        assert_eq!(s3.bucket, "tracker-backups");
        let e = load_error("", &[("TRACKER_BACKUP_S3_BUCKT", "x")]);
        assert!(e.0.contains("TRACKER_BACKUP_S3_BUCKT"), "{e}");
    }

    #[test]
    fn the_s3_secret_is_refused_in_the_file_and_needed_once() {
        let e = load_error(&s3_text("secret_access_key = \"in-the-file\"\n"), &[SECRET]);
        assert!(
            e.0.contains("`secret_access_key` is never read from the configuration file"),
            "{e}"
        );
        assert!(e.0.contains(S3_SECRET_ENV), "{e}");
        assert!(!e.0.contains("in-the-file"), "{e}");
        let e = load_error(&s3_text(""), &[]);
        assert!(e.0.contains("needs the secret key"), "{e}");
        let e = load_error(
            &s3_text("secret_access_key_file = \"/nonexistent/secret\"\n"),
            &[],
        );
        assert!(
            e.0.contains("cannot read `backup_s3.secret_access_key_file`"),
            "{e}"
        );
        let e = load_error(
            &s3_text("secret_access_key_file = \"/nonexistent/secret\"\n"),
            &[SECRET],
        );
        assert!(e.0.contains("given twice"), "{e}");
        for bad in ["", "has space", &"k".repeat(257)] {
            let e = load_error(&s3_text(""), &[(S3_SECRET_ENV, bad)]);
            assert!(e.0.contains("1 to 256 visible ASCII"), "{e}");
            assert!(bad.is_empty() || !e.0.contains(bad), "{e}");
        }
        assert!(
            load_text(
                &s3_text(""),
                &[(S3_SECRET_ENV, &"k".repeat(256))],
                Flags::default()
            )
            .is_ok()
        );
        // The environment's secret without a table is not an error (the table may come later).
        assert!(
            load_text("", &[SECRET], Flags::default())
                .unwrap()
                .backups
                .is_none()
        );
    }

    /// Each `[backup_s3]` rule just inside and just outside; an error names the key.
    #[test]
    fn backup_s3_keys_are_checked() {
        let with = |line: &str| {
            let text = s3_text("")
                .lines()
                .filter(|l| {
                    line.split_once(" = ")
                        .is_none_or(|(k, _)| !l.starts_with(&format!("{k} =")))
                })
                .collect::<Vec<_>>()
                .join("\n");
            load_text(&format!("{text}\n{line}\n"), &[SECRET], Flags::default())
        };
        let s3 = |line: &str| with(line).map(|s| s.backups.unwrap().s3.unwrap());
        for good in [
            "endpoint = \"http://127.0.0.1:9000\"",
            "endpoint = \"http://localhost:9000\"",
            "endpoint = \"http://s3.lan:9000\"\nallow_http = true",
            "endpoint = \"https://abc.r2.cloudflarestorage.com/\"",
            "region = \"auto\"",
            &format!("region = \"{}\"", "a".repeat(32)),
            "bucket = \"abc\"",
            &format!("bucket = \"{}\"", "b".repeat(63)),
            "bucket = \"My_Bucket.2\"",
            "prefix = \"\"",
            "prefix = \"tracker/prod/\"",
            &format!("prefix = \"{}\"", "p".repeat(256)),
            &format!("access_key_id = \"{}\"", "A".repeat(128)),
            "retry_for = \"1s\"",
            "retry_for = \"5m\"",
        ] {
            assert!(s3(good).is_ok(), "{good}: {:?}", s3(good));
        }
        assert_eq!(
            s3("endpoint = \"https://x.example/\"").unwrap().endpoint,
            "https://x.example"
        );
        assert_eq!(s3("prefix = \"a/b\"").unwrap().prefix, "a/b/");
        for (bad, names) in [
            ("endpoint = \"s3.amazonaws.com\"", "backup_s3.endpoint"),
            ("endpoint = \"ftp://s3.example\"", "backup_s3.endpoint"),
            ("endpoint = \"http://s3.lan:9000\"", "allow_http"),
            ("endpoint = \"http://10.0.0.2:9000\"", "allow_http"),
            (
                "endpoint = \"https://key:secret@s3.example\"",
                "no credentials",
            ),
            ("endpoint = \"https://s3.example/bucket\"", "no path"),
            ("endpoint = \"https://s3.example/?x=1\"", "no path"),
            ("region = \"\"", "backup_s3.region"),
            ("region = \"EU\"", "backup_s3.region"),
            (
                &format!("region = \"{}\"", "a".repeat(33)),
                "backup_s3.region",
            ),
            ("bucket = \"ab\"", "bucket's name"),
            (&format!("bucket = \"{}\"", "b".repeat(64)), "bucket's name"),
            ("bucket = \"-abc\"", "bucket's name"),
            ("bucket = \"a/b\"", "bucket's name"),
            ("prefix = \"/abs\"", "backup_s3.prefix"),
            ("prefix = \"a//b\"", "backup_s3.prefix"),
            ("prefix = \"a/../b\"", "backup_s3.prefix"),
            ("prefix = \"a\\u001b\"", "backup_s3.prefix"),
            (
                &format!("prefix = \"{}\"", "p".repeat(257)),
                "backup_s3.prefix",
            ),
            ("access_key_id = \"\"", "backup_s3.access_key_id"),
            ("access_key_id = \"a b\"", "backup_s3.access_key_id"),
            (
                &format!("access_key_id = \"{}\"", "A".repeat(129)),
                "backup_s3.access_key_id",
            ),
            ("retry_for = \"999ms\"", "backup_s3.retry_for"),
            ("retry_for = \"5m 1s\"", "backup_s3.retry_for"),
            (
                "secret_acces_key = \"x\"",
                "unknown field `secret_acces_key`",
            ),
        ] {
            let e = with(bad).unwrap_err();
            assert!(e.0.contains(names), "{bad}: {e}");
        }
        for key in ["endpoint", "region", "bucket", "access_key_id"] {
            let text = s3_text("")
                .lines()
                .filter(|l| !l.starts_with(&format!("{key} =")))
                .collect::<Vec<_>>()
                .join("\n");
            let e = load_error(&text, &[SECRET]);
            assert!(e.0.contains(&format!("[backup_s3] needs `{key}`")), "{e}");
        }
    }

    #[test]
    fn a_missing_explicit_config_file_is_an_error() {
        let flags = Flags {
            config: Some(PathBuf::from("/nonexistent/tracker.toml")),
            ..Flags::default()
        };
        assert!(load(&flags, std::iter::empty()).is_err());
    }

    #[test]
    fn an_address_of_every_interface_is_shown_as_loopback() {
        let mut settings = Settings::with_data("t.redb".into());
        for (listen, shown, missing) in [
            ("0.0.0.0:8080", "http://127.0.0.1:8080", true),
            ("[::]:8080", "http://[::1]:8080", true),
            ("127.0.0.1:8080", "http://127.0.0.1:8080", false),
            ("[::1]:9000", "http://[::1]:9000", false),
            ("192.0.2.7:8080", "http://192.0.2.7:8080", false),
        ] {
            settings.listen = listen.parse().unwrap();
            assert_eq!(settings.public_url(), shown, "{listen}");
            assert_eq!(settings.public_url_missing(), missing, "{listen}");
        }
        settings.public_url = "https://t.example.com".into();
        settings.listen = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(settings.public_url(), "https://t.example.com");
        assert!(!settings.public_url_missing());
    }
}
