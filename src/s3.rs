//! S3-compatible object storage (`[backup_s3]`): a file uploaded under a key, a key downloaded
//! into a file, and the scheduled backups under a prefix kept to the newest few. What a backup
//! is, and when one is made, is the caller's (`workers/backups.rs`, `cli/data_file.rs`,
//! `cli/restore.rs`); this file only moves bytes.
//!
//! The client is `object_store`'s S3 store: requests signed with the configured keys, each one
//! that fails for a reason worth another try (no connection, a 5xx, a timeout of an idempotent
//! request) tried again with exponential backoff for up to `retry_for`, and a file larger than
//! [`PART_BYTES`] sent as a multipart upload, so a large backup is never one request that a
//! dropped connection sends back to the start.
//!
//! An upload never replaces an object (S3's `If-None-Match: *`). `object_store` sends that
//! condition with a single `PUT` and with the completion of a copy made by parts, but not with
//! the completion of its own multipart upload: so a large file is uploaded in parts under a
//! staging key beside the target, then copied into place on the condition and the staging key
//! deleted. S3 copies at most [`MAX_COPY_BYTES`] in one part; a file larger than that is
//! uploaded straight to its key after a look that it is free, which a writer racing for the
//! same key could still pass. A refusal because the key is taken is checked against the object
//! there: the file's own bytes are an upload that arrived (a request tried again after its answer
//! was lost finds its own first try's object).
//!
//! Every call runs on a runtime of its own ([`on_own_runtime`]): uploading hashes and encrypts
//! every byte of a backup, and that work belongs on a thread of its own, never on the threads
//! that answer requests (nor on the writer, which never waits for it).

use std::collections::VecDeque;
use std::future::Future;
use std::io::{Read as _, Write as _};
use std::path::Path as FilePath;
use std::time::Duration;

use futures_util::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::aws::{S3ConditionalPut, S3CopyIfNotExists};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore as _, PutMode, PutOptions, PutPayload, RetryConfig,
};
use tokio::task::{JoinError, JoinHandle};

use crate::config::S3Settings;

/// Files up to this size are one `PUT`; larger ones a multipart upload of parts this size
/// (S3 takes parts of 5 MiB to 5 GiB).
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 2;
/// The most parts S3 takes in one upload.
const MAX_PARTS: u64 = 10_000;
/// The most S3 copies into one part (`UploadPartCopy`): the largest file put in place on the
/// condition after a multipart upload.
pub const MAX_COPY_BYTES: u64 = 5 << 30;

/// The size of each part of a multipart upload of `size` bytes: [`PART_BYTES`], or for a file
/// too large for [`MAX_PARTS`] of those (above about 78 GiB), whole MiB enough to stay within.
fn part_bytes(size: u64) -> usize {
    let fewest = size.div_ceil(MAX_PARTS).div_ceil(1 << 20) << 20;
    usize::try_from(fewest).map_or(usize::MAX, |b| b.max(PART_BYTES))
}

/// Reads into `buf` until it is full or the file ends; answers the bytes read.
fn read_full(source: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A failure of object storage, in words that name the bucket and key and never the secret key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Error(pub String);

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for S3Error {}

/// One bucket of the configured service.
pub struct Bucket {
    store: AmazonS3,
    name: String,
    endpoint: String,
}

impl Bucket {
    /// The bucket `bucket` (default: the configured one) at the configured endpoint, with the
    /// configured keys.
    ///
    /// # Errors
    /// When the client cannot be built from the settings.
    pub fn new(settings: &S3Settings, bucket: Option<&str>) -> Result<Bucket, S3Error> {
        let name = bucket.unwrap_or(&settings.bucket).to_owned();
        // Bounded by time alone (`retry_for`): a count of tries would end first, since ten of
        // these growing pauses add up to about 5 s, and a throttle (`503 SlowDown`) lasts longer.
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(200),
                max_backoff: Duration::from_secs(30),
                base: 2.0,
            },
            max_retries: usize::MAX,
            retry_timeout: settings.retry_for,
        };
        // A part of 8 MiB in 5 minutes is 28 KB/s: slow links still finish a part.
        let client = ClientOptions::new()
            .with_allow_http(settings.endpoint.starts_with("http://"))
            .with_connect_timeout(Duration::from_secs(10))
            .with_timeout(Duration::from_secs(300));
        let store = AmazonS3Builder::new()
            .with_endpoint(&settings.endpoint)
            .with_region(&settings.region)
            .with_bucket_name(&name)
            .with_access_key_id(&settings.access_key_id)
            .with_secret_access_key(&settings.secret_access_key)
            .with_retry(retry)
            .with_client_options(client)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_copy_if_not_exists(S3CopyIfNotExists::Multipart)
            .build()
            .map_err(|e| S3Error(format!("S3 client for bucket {name}: {e}")))?;
        Ok(Bucket {
            store,
            name,
            endpoint: settings.endpoint.clone(),
        })
    }

    /// `s3://BUCKET/KEY`, for messages.
    #[must_use]
    pub fn address(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.name)
    }

    fn failed(
        &self,
        what: &str,
        key: &str,
        e: impl std::fmt::Display + std::fmt::Debug,
    ) -> S3Error {
        S3Error(format!(
            "{what} {} at {} failed: {e}",
            self.address(key),
            self.endpoint
        ))
    }

    /// Uploads the file at `file` under `key` unless an object has that key: one conditional
    /// request up to [`PART_BYTES`], else a multipart upload of parts of [`part_bytes`], two in
    /// flight (aborted if any part or the completion fails, so no parts are left to be billed),
    /// under a staging key then copied into place on the condition (see the module's words on
    /// files above [`MAX_COPY_BYTES`]). Answers the bytes sent, or `None` when an object already
    /// had the key: then it is left as it was.
    ///
    /// # Errors
    /// When the file cannot be read or the service does not take it (after the retries).
    pub async fn upload(&self, file: &FilePath, key: &str) -> Result<Option<u64>, S3Error> {
        let location = object_path(key)?;
        let mut source = std::fs::File::open(file)
            .map_err(|e| S3Error(format!("cannot read {}: {e}", file.display())))?;
        let size = source.metadata().map_or(0, |m| m.len());
        if size <= PART_BYTES as u64 {
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            source
                .read_to_end(&mut bytes)
                .map_err(|e| S3Error(format!("cannot read {}: {e}", file.display())))?;
            let sent = bytes.len() as u64;
            let create = PutOptions::from(PutMode::Create);
            return match self
                .store
                .put_opts(&location, PutPayload::from(bytes), create)
                .await
            {
                Ok(_) => Ok(Some(sent)),
                Err(object_store::Error::AlreadyExists { .. }) => {
                    self.ours_or_taken(key, file, sent).await
                }
                Err(e) => Err(self.failed("uploading to", key, e)),
            };
        }
        if size > MAX_COPY_BYTES {
            if self.exists(key).await? {
                return Ok(None);
            }
            return self.upload_parts(source, size, file, key).await.map(Some);
        }
        let begun = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let staging_key = staging_key(key, std::process::id(), begun);
        let staging = object_path(&staging_key)?;
        let sent = self.upload_parts(source, size, file, &staging_key).await?;
        let placed = self.store.copy_if_not_exists(&staging, &location).await;
        if let Err(e) = self.store.delete(&staging).await {
            tracing::warn!(error = ?e.to_string(), key = staging_key, "deleting a staging copy");
        }
        match placed {
            Ok(()) => Ok(Some(sent)),
            Err(object_store::Error::AlreadyExists { .. }) => {
                self.ours_or_taken(key, file, sent).await
            }
            Err(e) => Err(self.failed("copying the upload into", key, e)),
        }
    }

    /// After S3 refused to write `key` because an object holds it: `Some(size)` when that
    /// object is byte for byte the file at `file` (`size` bytes), else `None`. A request whose
    /// answer was lost is tried again, and the second try finds the first one's object: the
    /// upload arrived and must not read as a key taken by someone else. An equal object put there
    /// earlier is as good: the bucket holds what was to be uploaded.
    ///
    /// # Errors
    /// When the object or the file cannot be read.
    async fn ours_or_taken(
        &self,
        key: &str,
        file: &FilePath,
        size: u64,
    ) -> Result<Option<u64>, S3Error> {
        let location = object_path(key)?;
        let theirs = match self.store.get(&location).await {
            Ok(got) if got.meta.size == size => got,
            Ok(_) | Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.failed("reading back", key, e)),
        };
        let mut ours = std::fs::File::open(file)
            .map_err(|e| S3Error(format!("cannot read {}: {e}", file.display())))?;
        let mut stream = theirs.into_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|e| self.failed("reading back", key, e))?
        {
            buf.resize(chunk.len(), 0);
            let read = read_full(&mut ours, &mut buf)
                .map_err(|e| S3Error(format!("cannot read {}: {e}", file.display())))?;
            if read != chunk.len() || buf[..] != chunk[..] {
                return Ok(None);
            }
        }
        Ok(Some(size))
    }

    /// A multipart upload of `source` (`size` bytes, read from `file`) under `key`, parts of
    /// [`part_bytes`], two in flight; aborted at the store if any part or the completion fails.
    /// Answers the bytes sent.
    async fn upload_parts(
        &self,
        mut source: std::fs::File,
        size: u64,
        file: &FilePath,
        key: &str,
    ) -> Result<u64, S3Error> {
        let location = object_path(key)?;
        let mut upload = self
            .store
            .put_multipart(&location)
            .await
            .map_err(|e| self.failed("starting a multipart upload to", key, e))?;
        let part_bytes = part_bytes(size);
        let mut in_flight: VecDeque<JoinHandle<object_store::Result<()>>> = VecDeque::new();
        let mut sent = 0_u64;
        let joined = |part: Result<object_store::Result<()>, JoinError>| match part {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.failed("uploading a part to", key, e)),
            Err(e) => Err(S3Error(format!(
                "uploading a part to {} stopped: {e}",
                self.address(key)
            ))),
        };
        let result = async {
            loop {
                let mut part = vec![0; part_bytes];
                let n = read_full(&mut source, &mut part)
                    .map_err(|e| S3Error(format!("cannot read {}: {e}", file.display())))?;
                if n == 0 {
                    break;
                }
                part.truncate(n);
                if in_flight.len() >= PARTS_IN_FLIGHT
                    && let Some(first) = in_flight.pop_front()
                {
                    joined(first.await)?;
                }
                in_flight.push_back(tokio::spawn(upload.put_part(PutPayload::from(part))));
                sent += n as u64;
            }
            while let Some(part) = in_flight.pop_front() {
                joined(part.await)?;
            }
            upload
                .complete()
                .await
                .map_err(|e| self.failed("completing the upload to", key, e))
        }
        .await;
        match result {
            Ok(_) => Ok(sent),
            Err(e) => {
                // Every part, the last ones and the completion included: none is left to be
                // billed (an abort after a completion that did happen changes nothing).
                for part in &in_flight {
                    part.abort();
                }
                let _ = upload.abort().await;
                Err(e)
            }
        }
    }

    /// Whether `key` is in the bucket.
    ///
    /// # Errors
    /// When the service cannot be asked (after the retries).
    pub async fn exists(&self, key: &str) -> Result<bool, S3Error> {
        match self.store.head(&object_path(key)?).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.failed("looking up", key, e)),
        }
    }

    /// Downloads `key` into `into` (written from where it stands, then synced). Answers the
    /// bytes received.
    ///
    /// # Errors
    /// When the key is not there, the service fails (after the retries) or the file cannot be
    /// written.
    pub async fn download(&self, key: &str, into: &mut std::fs::File) -> Result<u64, S3Error> {
        let got = self
            .store
            .get(&object_path(key)?)
            .await
            .map_err(|e| self.failed("downloading", key, e))?;
        let mut stream = got.into_stream();
        let mut received = 0_u64;
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|e| self.failed("downloading", key, e))?
        {
            into.write_all(&chunk)
                .map_err(|e| S3Error(format!("writing the download of {key}: {e}")))?;
            received += chunk.len() as u64;
        }
        into.sync_all()
            .map_err(|e| S3Error(format!("writing the download of {key}: {e}")))?;
        Ok(received)
    }

    /// Deletes `key`.
    ///
    /// # Errors
    /// When the service does not (after the retries).
    pub async fn delete(&self, key: &str) -> Result<(), S3Error> {
        self.store
            .delete(&object_path(key)?)
            .await
            .map_err(|e| self.failed("deleting", key, e))
    }

    /// The backups directly under `prefix`, oldest first, with their times: only keys whose
    /// name (the key after the prefix) starts with `name_start` are listed, and `time_of` tells
    /// such a name's time, answering `None` for anything else.
    ///
    /// Only those keys are asked for (S3's `prefix` is the raw text `prefix` + `name_start`):
    /// the client refuses a whole page of a listing that holds one key it cannot read (`..`,
    /// `//`, a control character), and a stranger's odd key elsewhere under the prefix must not
    /// stop the rotation for good.
    ///
    /// # Errors
    /// When the listing fails (after the retries).
    pub async fn backups(
        &self,
        prefix: &str,
        name_start: &str,
        time_of: impl Fn(&str) -> Option<u64>,
    ) -> Result<Vec<(u64, String)>, S3Error> {
        use object_store::list::{PaginatedListOptions, PaginatedListStore as _};
        let listed_prefix = format!("{prefix}{name_start}");
        let mut backups: Vec<(u64, String)> = Vec::new();
        let mut page_token = None;
        loop {
            // Only the objects directly under the prefix (`/` as the delimiter, every page).
            let options = PaginatedListOptions {
                delimiter: Some("/".into()),
                page_token: page_token.take(),
                ..PaginatedListOptions::default()
            };
            let page = self
                .store
                .list_paginated(Some(&listed_prefix), options)
                .await
                .map_err(|e| self.failed("listing", prefix, e))?;
            backups.extend(page.result.objects.into_iter().filter_map(|meta| {
                let key = meta.location.to_string();
                let name = key.strip_prefix(prefix)?;
                if name.contains('/') {
                    return None;
                }
                Some((time_of(name)?, key))
            }));
            match page.page_token {
                Some(token) => page_token = Some(token),
                None => break,
            }
        }
        backups.sort();
        Ok(backups)
    }
}

/// What a staging copy of an upload under `key` is named: the key, then the process and the
/// time (milliseconds since the epoch) it was begun, so that [`staging_begun_ms`] can tell a
/// copy a kill left behind from one still being sent.
fn staging_key(key: &str, process: u32, begun_ms: u64) -> String {
    format!("{key}{STAGING}{process}-{begun_ms}")
}

/// Between a key and the rest of a staging copy's name.
const STAGING: &str = ".staging-";

/// When the staging copy named `name` (see [`staging_key`]) was begun; `None` for any other
/// name.
#[must_use]
pub fn staging_begun_ms(name: &str) -> Option<u64> {
    let (_, rest) = name.rsplit_once(STAGING)?;
    let (process, begun) = rest.split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(process) || !digits(begun) {
        return None;
    }
    begun.parse().ok()
}

/// A key as the client takes it: folders separated by `/`, none empty.
fn object_path(key: &str) -> Result<Path, S3Error> {
    Path::parse(key).map_err(|e| S3Error(format!("{key:?} is not a key S3 can hold: {e}")))
}

/// The bucket and key of an `s3://BUCKET/KEY` address; `None` for any other text (a file's
/// path).
///
/// # Errors
/// For an `s3://` address whose bucket or key is not valid.
#[must_use]
pub fn parse_address(text: &str) -> Option<Result<(String, String), S3Error>> {
    let rest = text.strip_prefix("s3://")?;
    Some(match rest.split_once('/') {
        Some((bucket, key)) if !key.is_empty() && !key.ends_with('/') => {
            crate::config::s3_bucket(bucket)
                .map_err(|e| S3Error(format!("{text}: {e}")))
                .and_then(|()| object_path(key).map_err(|e| S3Error(format!("{text}: {e}"))))
                .map(|_| (bucket.to_owned(), key.to_owned()))
        }
        _ => Err(S3Error(format!(
            "{text:?} is not an s3://BUCKET/KEY address: it needs a bucket and a key, such as \
             s3://my-backups/tracker/2026-11-24.redb"
        ))),
    })
}

/// Runs `work` to its end on a runtime of its own in this thread: for a blocking thread
/// (`spawn_blocking`) or the command line, never an async worker.
///
/// # Errors
/// When the runtime cannot be started (no threads or file descriptors left).
pub fn on_own_runtime<T>(work: impl Future<Output = Result<T, S3Error>>) -> Result<T, S3Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| S3Error(format!("cannot start the S3 client's runtime: {e}")))?
        .block_on(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_grow_only_where_ten_thousand_would_not_hold_the_file() {
        let most = MAX_PARTS * PART_BYTES as u64;
        assert_eq!(part_bytes(0), PART_BYTES);
        assert_eq!(part_bytes(most), PART_BYTES);
        assert_eq!(part_bytes(most + 1), PART_BYTES + (1 << 20));
        for size in [most + 1, 200 << 30, 5 << 40] {
            let part = part_bytes(size) as u64;
            assert!(size.div_ceil(part) <= MAX_PARTS, "{size}: {part}");
            assert_eq!(part % (1 << 20), 0, "{size}: whole MiB");
        }
    }

    #[test]
    fn a_staging_copy_tells_when_it_was_begun_and_nothing_else_does() {
        let name = staging_key("tracker-20261124T031500Z.redb", 4242, 1_795_490_100_123);
        assert_eq!(staging_begun_ms(&name), Some(1_795_490_100_123));
        for other in [
            "tracker-20261124T031500Z.redb",
            "tracker-20261124T031500Z.redb.staging-",
            "tracker-20261124T031500Z.redb.staging-12",
            "tracker-20261124T031500Z.redb.staging-12-",
            "tracker-20261124T031500Z.redb.staging--5",
            "tracker-20261124T031500Z.redb.staging-x-5",
            "tracker-20261124T031500Z.redb.staging-1-5x",
        ] {
            assert_eq!(staging_begun_ms(other), None, "{other}");
        }
    }

    #[test]
    fn addresses_are_a_bucket_and_a_key() {
        assert_eq!(parse_address("/srv/backup.redb"), None);
        assert_eq!(parse_address("backup.redb"), None);
        assert_eq!(
            parse_address("s3://my-backups/tracker/a.redb"),
            Some(Ok(("my-backups".into(), "tracker/a.redb".into())))
        );
        assert_eq!(
            parse_address("s3://abc/k"),
            Some(Ok(("abc".into(), "k".into())))
        );
        for bad in [
            "s3://",
            "s3://bucket",
            "s3://bucket/",
            "s3://bucket/folder/",
            "s3://ab/key",
            "s3://bu cket/key",
            "s3://bucket/a//b",
        ] {
            assert!(
                matches!(parse_address(bad), Some(Err(_))),
                "{bad}: {:?}",
                parse_address(bad)
            );
        }
    }
}
