//! The automatic backups' keys: `backup_dir`, `backup_every`, `backup_keep`, and the
//! `[backup_s3]` table with its secret key from the environment or a file, never the file itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de;
use serde::{Deserialize, Serialize};

use super::rules::{ConfigError, duration};

/// Where and how often the server writes its own backups, and how many it keeps
/// (`workers/backups.rs`): into `backup_dir`, uploaded to `[backup_s3]`, or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupSchedule {
    /// `backup_dir`; `None`: the copy is made beside the data file only to be uploaded, and
    /// deleted once it is.
    pub dir: Option<PathBuf>,
    pub every: Duration,
    pub keep: u32,
    /// `[backup_s3]`: every scheduled backup is also uploaded there.
    pub s3: Option<S3Settings>,
}

/// `[backup_s3]`: an S3-compatible bucket that scheduled backups are uploaded to, and that
/// `tracker backup s3://` and `tracker restore s3://` reach with the same settings.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// `https://s3.eu-central-1.amazonaws.com`, without a path or a trailing `/`.
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    /// `""`, or a prefix ending in `/` that every scheduled backup's key starts with.
    pub prefix: String,
    pub access_key_id: String,
    /// From `TRACKER_BACKUP_S3_SECRET_ACCESS_KEY` or `secret_access_key_file`, never from the
    /// configuration file; left out of `Debug`, so never in a log line.
    pub secret_access_key: String,
    /// `secret_access_key_file`, when the key came from one: warned about at start if users
    /// other than its owner may read it ([`S3Settings::warn_if_others_can_read`]).
    pub secret_file: Option<PathBuf>,
    /// How long an upload's or a download's failing requests are tried again (with backoff)
    /// before it counts as failed: `retry_for`.
    pub retry_for: Duration,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("secret_file", &self.secret_file)
            .field("retry_for", &self.retry_for)
            .finish()
    }
}

impl S3Settings {
    /// Says so when users other than the owner may read `secret_access_key_file`, as for the
    /// data file: the key reads and deletes every backup, and backups hold the admin password's
    /// hash and the platforms' tokens. The mode is left as it is.
    pub fn warn_if_others_can_read(&self) {
        use std::os::unix::fs::PermissionsExt as _;
        if let Some(file) = &self.secret_file
            && let Ok(meta) = file.metadata()
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %file.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "backup_s3.secret_access_key_file can be read by other users; `chmod 600` it"
            );
        }
    }
}

/// The environment variable the S3 secret key is read from.
pub const S3_SECRET_ENV: &str = "TRACKER_BACKUP_S3_SECRET_ACCESS_KEY";

/// The `[backup_s3]` table as written. `secret_access_key` is read only to be refused by name
/// (`load`): its value is never kept, and never written into a merged layer.
#[derive(Deserialize, Serialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBackupS3 {
    pub(super) endpoint: Option<String>,
    pub(super) region: Option<String>,
    pub(super) bucket: Option<String>,
    pub(super) prefix: Option<String>,
    pub(super) access_key_id: Option<String>,
    pub(super) secret_access_key_file: Option<PathBuf>,
    pub(super) retry_for: Option<String>,
    pub(super) allow_http: Option<bool>,
    #[serde(default, skip_serializing)]
    pub(super) secret_access_key: Option<de::IgnoredAny>,
}

/// The least `backup_every`: a full copy of the data file more often than this is load, not
/// safety.
pub(super) const MIN_BACKUP_EVERY: Duration = Duration::from_secs(60);
/// The most backups `backup_keep` keeps.
pub(super) const MAX_BACKUP_KEEP: u32 = 1000;

/// The automatic backup keys, checked even when neither `backup_dir` nor `[backup_s3]` uses
/// them, so a bad value is found before the day it is turned on.
pub(super) fn backup_schedule(
    dir: Option<PathBuf>,
    every: Option<String>,
    keep: Option<u32>,
    s3: Option<S3Settings>,
) -> Result<Option<BackupSchedule>, ConfigError> {
    let every = duration("backup_every", every, "1d", MIN_BACKUP_EVERY)?;
    let keep = keep.unwrap_or(7);
    if !(1..=MAX_BACKUP_KEEP).contains(&keep) {
        return Err(ConfigError(format!(
            "`backup_keep` must be between 1 and {MAX_BACKUP_KEEP}, got {keep}"
        )));
    }
    let dir = dir.filter(|d| !d.as_os_str().is_empty());
    Ok((dir.is_some() || s3.is_some()).then_some(BackupSchedule {
        dir,
        every,
        keep,
        s3,
    }))
}

/// `[backup_s3]`, checked: every key but `prefix` and `retry_for` is needed, and the secret key
/// comes from `env_secret` (the environment) or `secret_access_key_file` (relative to `base`,
/// the configuration file's folder), exactly one of them.
pub(super) fn backup_s3(
    raw: Option<RawBackupS3>,
    env_secret: Option<String>,
    base: &Path,
) -> Result<Option<S3Settings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let missing = |key: &str, example: &str| {
        ConfigError(format!(
            "[backup_s3] needs `{key}`, e.g. {example} (docs/backups.md shows it for AWS, B2, R2 \
             and MinIO)"
        ))
    };
    let endpoint = s3_endpoint(
        &raw.endpoint
            .ok_or_else(|| missing("endpoint", "\"https://s3.eu-central-1.amazonaws.com\""))?,
        raw.allow_http.unwrap_or(false),
    )?;
    let region = raw
        .region
        .ok_or_else(|| missing("region", "\"eu-central-1\" (R2: \"auto\")"))?;
    if !(1..=32).contains(&region.len())
        || !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ConfigError(format!(
            "`backup_s3.region` must be 1 to 32 lowercase letters, digits and -, such as \
             \"eu-central-1\" or \"auto\", got {region:?}"
        )));
    }
    let bucket = raw
        .bucket
        .ok_or_else(|| missing("bucket", "\"tracker-backups\""))?;
    s3_bucket(&bucket).map_err(ConfigError)?;
    let prefix = s3_prefix(raw.prefix.unwrap_or_default())?;
    let access_key_id = raw
        .access_key_id
        .ok_or_else(|| missing("access_key_id", "\"AKIAIOSFODNN7EXAMPLE\""))?;
    if !(1..=128).contains(&access_key_id.len())
        || !access_key_id.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ConfigError(format!(
            "`backup_s3.access_key_id` must be 1 to 128 visible ASCII characters, got \
             {access_key_id:?}"
        )));
    }
    let (secret_access_key, secret_file) = s3_secret(env_secret, raw.secret_access_key_file, base)?;
    if !(1..=256).contains(&secret_access_key.len())
        || !secret_access_key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ConfigError(format!(
            "the S3 secret key must be 1 to 256 visible ASCII characters (it is not shown here); \
             check {S3_SECRET_ENV} or `backup_s3.secret_access_key_file`"
        )));
    }
    let retry_for = duration(
        "backup_s3.retry_for",
        raw.retry_for,
        "3m",
        Duration::from_secs(1),
    )?;
    if retry_for > MAX_S3_RETRY {
        return Err(ConfigError(format!(
            "`backup_s3.retry_for` must be between 1s and 5m, got {:?}",
            humantime::format_duration(retry_for).to_string()
        )));
    }
    Ok(Some(S3Settings {
        endpoint,
        region,
        bucket,
        prefix,
        access_key_id,
        secret_access_key,
        secret_file,
        retry_for,
    }))
}

/// The S3 secret key, from `env_secret` (the environment) or `file` (relative to `base`),
/// exactly one of them, and the file's path when it came from one.
fn s3_secret(
    env_secret: Option<String>,
    file: Option<PathBuf>,
    base: &Path,
) -> Result<(String, Option<PathBuf>), ConfigError> {
    let mut named = None;
    let secret = match (env_secret, file) {
        (Some(_), Some(_)) => {
            return Err(ConfigError(format!(
                "the S3 secret key is given twice, by {S3_SECRET_ENV} and by \
                 `backup_s3.secret_access_key_file`: keep one"
            )));
        }
        (None, None) => {
            return Err(ConfigError(format!(
                "[backup_s3] needs the secret key: set the environment variable {S3_SECRET_ENV}, \
                 or name a file holding it (and nothing else) with `secret_access_key_file`"
            )));
        }
        (Some(secret), None) => secret,
        (None, Some(file)) => {
            let file = base.join(file);
            named = Some(file.clone());
            std::fs::read_to_string(&file)
                .map_err(|e| {
                    ConfigError(format!(
                        "cannot read `backup_s3.secret_access_key_file` {}: {e}",
                        file.display()
                    ))
                })?
                .trim_end_matches(['\n', '\r'])
                .to_owned()
        }
    };
    Ok((secret, named))
}

/// The longest `backup_s3.retry_for`: a request is signed once and retried as it is, and a
/// signature is good for a few minutes only.
pub(super) const MAX_S3_RETRY: Duration = Duration::from_secs(300);

/// `backup_s3.endpoint`: an `https://` address of a host (`http://` to a loopback address, or
/// to any with `allow_http`: backups hold password hashes and platform tokens, and plain HTTP
/// shows them to the network), with no user, password, path, query or fragment (the bucket is
/// named by `bucket`, not in the address).
pub(super) fn s3_endpoint(text: &str, allow_http: bool) -> Result<String, ConfigError> {
    let refuse = |why: &str| {
        ConfigError(format!(
            "`backup_s3.endpoint` must be the service's address, such as \
             \"https://s3.eu-central-1.amazonaws.com\" ({why}), got {text:?}"
        ))
    };
    let url = url::Url::parse(text).map_err(|e| refuse(&e.to_string()))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(refuse("https:// or http://"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse("a host is needed"));
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() == "http" && !loopback && !allow_http {
        return Err(ConfigError(format!(
            "`backup_s3.endpoint` {text:?} is plain http:// to another machine: backups hold the \
             admin password's hash and the platforms' tokens, which would cross the network \
             unencrypted; use https://, or set `backup_s3.allow_http = true` for a private \
             network"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "no credentials in the address: they go in access_key_id and the secret key",
        ));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(refuse(
            "no path, query or fragment: the bucket goes in `bucket`",
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// A bucket's name, as S3-compatible services allow them: 3 to 63 letters, digits, `.`, `-`
/// and `_`, beginning and ending with a letter or digit. Also the rule for the bucket of an
/// `s3://BUCKET/KEY` address.
///
/// # Errors
/// The sentence that says what is wrong.
pub fn s3_bucket(bucket: &str) -> Result<(), String> {
    let b = bucket.as_bytes();
    let ok = (3..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b".-_".contains(c))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a bucket's name must be 3 to 63 letters, digits, '.', '-' or '_', beginning and \
             ending with a letter or digit, got {bucket:?}"
        ))
    }
}

/// `backup_s3.prefix`: `""` (the bucket's top), or up to 256 bytes of folders such as
/// `tracker/prod`, without a leading `/`, an empty or `..` folder or a control character;
/// answered ending in `/`.
pub(super) fn s3_prefix(prefix: String) -> Result<String, ConfigError> {
    if prefix.is_empty() {
        return Ok(prefix);
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(&prefix);
    let ok = prefix.len() <= 256
        && !prefix.chars().any(char::is_control)
        && trimmed
            .split('/')
            .all(|f| !f.is_empty() && f != "." && f != "..");
    if !ok {
        return Err(ConfigError(format!(
            "`backup_s3.prefix` must be \"\" or folders such as \"tracker/prod\" (at most 256 \
             bytes, no leading /, no empty, . or .. folder, no control character), got {prefix:?}"
        )));
    }
    Ok(format!("{trimmed}/"))
}
