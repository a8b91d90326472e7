//! Automatic backups (`backup_dir`, `backup_every`, `backup_keep`, `[backup_s3]`): the server
//! writes a consistent copy of its data file on a schedule, uploads it off the machine when
//! `[backup_s3]` is set, and keeps the newest few in each place.
//!
//! Each backup is [`Store::backup`](crate::storage::Store::backup), the operation `tracker
//! backup` uses: one read snapshot copied on a reader thread into a file written under a
//! temporary name and linked into place only when complete. So a backup never overwrites, an
//! interrupted one leaves no file under a final name, and the writer (ingest) is never in its
//! way. A failed backup is logged when failures start and when they end, and counted in
//! `/metrics`; ingest does not notice it.
//!
//! A backup is named by its UTC time to the second, `tracker-20261124T031500Z.redb`, so the
//! names sort by age. Only files of exactly that shape are the schedule's: after each backup
//! written, the oldest of them beyond `backup_keep` are deleted, and nothing else in the
//! directory is touched. The schedule follows the newest such file across restarts: a server
//! that restarts more often than `backup_every` still makes one every `backup_every`.
//!
//! With `[backup_s3]`, each backup, once written, is uploaded under `prefix` with the same
//! name, and the oldest of the same shape there beyond `backup_keep` are deleted. The upload
//! runs on a blocking thread with a runtime of its own (`s3::on_own_runtime`), after the local
//! copy is complete: the read snapshot is held only while the local copy is written, as without
//! S3, and neither the writer nor the request threads ever wait for the network. Without
//! `backup_dir` the local copy is written beside the data file under a hidden name, uploaded and
//! deleted. A failed upload is a warning in the log, a count in `/metrics` and a line on the
//! admin page; the next backup is made and uploaded at its usual time.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use crate::clock::{self, Clock};
use crate::config::{BackupSchedule, S3Settings};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::s3::{self, Bucket, S3Error};
use crate::storage::{BackupStats, Store};
use crate::workers::Worker;

/// What every scheduled backup's name starts with.
pub const PREFIX: &str = "tracker-";
const SUFFIX: &str = ".redb";
/// After a failed backup, the next try comes this soon (or at `backup_every`, if sooner).
const RETRY_AFTER: Duration = Duration::from_secs(600);
/// A staging copy of an upload begun this long before a backup is deleted by its rotation: no
/// upload takes a day.
const STAGING_KEPT_MS: u64 = 86_400_000;

/// Makes `backup_dir` at the server's start if it is not there (mode `0700`, with any missing
/// parents: backups hold password hashes and platform tokens), so that "automatic backups on"
/// is true from the first minute.
///
/// # Errors
/// Why the folder cannot be made, naming `backup_dir`: the server refuses to start rather than
/// fail every backup.
pub fn make_backup_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt as _;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            format!(
                "backup_dir {} does not exist and cannot be made: {e}; make it (mode 0700, \
                 owned by the tracker's user) or set another backup_dir",
                dir.display()
            )
        })?;
    tracing::info!(dir = %dir.display(), "made backup_dir (mode 0700)");
    Ok(())
}

/// The file name of a backup made at `ms`: `tracker-20261124T031500Z.redb`.
#[must_use]
pub fn backup_name(ms: u64) -> String {
    let stamp: String = clock::rfc3339_s(ms)
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    format!("{PREFIX}{stamp}{SUFFIX}")
}

/// The time in a backup's file name, if the name is exactly one [`backup_name`] makes.
#[must_use]
pub fn backup_time(name: &str) -> Option<u64> {
    let stamp = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let b = stamp.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() != 16 || !digits(0..8) || b[8] != b'T' || !digits(9..15) || b[15] != b'Z' {
        return None;
    }
    let text = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    );
    let at = humantime::parse_rfc3339(&text).ok()?;
    let ms = u64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()?;
    // Only the name `backup_name` gives that time: not `...T246000Z` read as a later hour.
    (backup_name(ms) == name).then_some(ms)
}

/// The schedule's own backups in `dir`, oldest first.
fn own_backups(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(at) = entry.file_name().to_str().and_then(backup_time) else {
            continue;
        };
        if entry.file_type()?.is_file() {
            found.push((at, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Which of `backups` (with the times in their names) go, to keep `keep`: the oldest beyond the
/// newest `keep`, but never the one just made (named by its time, `made_at`), which counts as
/// kept; and a backup named after `made_at` (by a clock that was ahead) counts as older than
/// any other. So after a clock that ran ahead, the new backups stay and the future ones go in
/// their turn, instead of each new one sorting as the oldest and going at once.
fn beyond_keep<T>(mut backups: Vec<(u64, T)>, keep: u32, made_at: u64) -> Vec<T> {
    backups.sort_by_key(|(at, _)| (*at <= made_at, *at));
    let surplus = backups.len().saturating_sub(keep as usize);
    backups
        .into_iter()
        .filter(|(at, _)| *at != made_at)
        .map(|(_, b)| b)
        .take(surplus)
        .collect()
}

/// Deletes the oldest of the schedule's own backups in `dir` beyond the newest `keep`, never the
/// one made at `made_at` ([`beyond_keep`]); answers the files deleted. `live` is the server's data file: a
/// server restored by serving one of these backups in place has a data file named like one, and
/// it is never counted or deleted.
pub fn rotate(dir: &Path, keep: u32, live: &Path, made_at: u64) -> std::io::Result<Vec<PathBuf>> {
    let live = std::fs::canonicalize(live).ok();
    let mut backups = own_backups(dir)?;
    backups.retain(|(_, path)| live.is_none() || std::fs::canonicalize(path).ok() != live);
    let mut deleted = Vec::new();
    for path in beyond_keep(backups, keep, made_at) {
        std::fs::remove_file(&path)?;
        deleted.push(path);
    }
    Ok(deleted)
}

/// The process ids a temporary copy of the schedule's names, if `name` is one: `.<backup>.
/// upload-<pid>` (a copy for the upload, without `backup_dir`), `.<backup>.partial-<pid>` (a
/// copy being written) and `..<backup>.upload-<pid>.partial-<pid>` (the first while written),
/// and an earlier version's copy for the upload, which named no process: `.<backup>.upload`,
/// and `..<backup>.upload.partial-<pid>` while written.
fn temporary_of(name: &str) -> Option<Vec<u32>> {
    fn pid(text: &str) -> Option<u32> {
        // Digits only: `parse` alone would take a `+`.
        text.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse().ok())
            .flatten()
    }
    let rest = name.strip_prefix('.')?;
    let end = rest.find(SUFFIX)? + SUFFIX.len();
    let (backup, tail) = rest.split_at(end);
    if let Some(inner) = backup.strip_prefix('.') {
        // `..<backup>.upload-<pid>.partial-<pid>`
        backup_time(inner)?;
        if let Some(n) = tail.strip_prefix(".upload.partial-") {
            // An earlier version's copy for the upload, while written.
            return Some(vec![pid(n)?]);
        }
        let (upload, partial) = tail.strip_prefix(".upload-")?.split_once(".partial-")?;
        return Some(vec![pid(upload)?, pid(partial)?]);
    }
    backup_time(backup)?;
    if tail == ".upload" {
        return Some(Vec::new());
    }
    let n = tail
        .strip_prefix(".upload-")
        .or_else(|| tail.strip_prefix(".partial-"))?;
    Some(vec![pid(n)?])
}

/// What [`delete_leftovers`] deleted, and what it could not, with why.
pub type Leftovers = (Vec<PathBuf>, Vec<(PathBuf, String)>);

/// Deletes the temporary copies ([`temporary_of`]) in `dir` that a process which is no longer
/// running left there (stopped or killed while it wrote or uploaded a backup), or that an
/// earlier process with this one's id left (a container's tracker is often process 1 at every
/// start). Another running process's copies are kept, so two servers may share the folder: a
/// process that answers to its id is running (one of another user's included), and a copy
/// locked by whoever is uploading it ([`hold_while_uploaded`]: another container's process 1)
/// is in use. Answers the files deleted, and the files that could not be, with why.
pub fn delete_leftovers(dir: &Path) -> std::io::Result<Leftovers> {
    let own = std::process::id();
    let running = |pid: u32| {
        pid != own
            && rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)).is_some_and(|p| {
                !matches!(
                    rustix::process::test_kill_process(p),
                    Err(rustix::io::Errno::SRCH)
                )
            })
    };
    let (mut deleted, mut kept) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(pids) = entry.file_name().to_str().and_then(temporary_of) else {
            continue;
        };
        if pids.into_iter().any(running) || !entry.file_type()?.is_file() {
            continue;
        }
        let path = entry.path();
        let gone = std::fs::File::open(&path).and_then(|file| {
            if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .is_err()
            {
                return Ok(false);
            }
            std::fs::remove_file(&path).map(|()| true)
        });
        match gone {
            Ok(true) => deleted.push(path),
            Ok(false) => {}
            // Deleted meanwhile by another server starting beside this one.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => kept.push((path, e.to_string())),
        }
    }
    Ok((deleted, kept))
}

/// Opens the copy at `path` and holds a shared lock on it until the answer is dropped, so that
/// a server starting meanwhile beside this one ([`delete_leftovers`]) leaves it alone.
fn hold_while_uploaded(path: &Path) -> Option<std::fs::File> {
    let file = std::fs::File::open(path).ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).ok()?;
    Some(file)
}

/// The mark, in `backup_dir`, of the backup `name` whose upload has begun and not ended:
/// written before the upload and deleted once it has an outcome (uploaded, or failed after its
/// retries), so a mark found at start is an upload a stopped process cut short.
fn upload_mark(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.to-upload"))
}

/// A mark of an upload cut short, with the backup it names (its time and path), `None` where
/// that backup has since been deleted.
type CutUpload = (PathBuf, Option<(u64, PathBuf)>);

/// The backups of `dir` whose uploads were cut short ([`upload_mark`]), oldest first.
fn cut_uploads(dir: &Path) -> std::io::Result<Vec<CutUpload>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(name) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix('.')?.strip_suffix(".to-upload"))
        else {
            continue;
        };
        let Some(at) = backup_time(name) else {
            continue;
        };
        let backup = dir.join(name);
        found.push((entry.path(), backup.is_file().then_some((at, backup))));
    }
    found.sort_by_key(|(_, b)| b.as_ref().map(|(at, _)| *at));
    Ok(found)
}

/// Uploads again, at start, each backup of `dir` whose upload a stopped process cut short
/// (its mark, [`cut_uploads`]), counted and logged as any upload, and deletes the marks.
async fn resume_cut_uploads(backups: Backups, s3: S3Settings, dir: PathBuf) {
    let listed = dir.clone();
    let cut = match tokio::task::spawn_blocking(move || cut_uploads(&listed)).await {
        Ok(Ok(cut)) => cut,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, dir = %dir.display(), "looking for uploads cut short");
            return;
        }
        Err(_) => return,
    };
    for (mark, backup) in cut {
        if let Some((at, path)) = backup {
            tracing::info!(
                path = %path.display(),
                "uploading a backup whose upload a stopped process cut short"
            );
            upload(&backups, &s3, &path, at, backups.schedule.keep).await;
        }
        let _ = tokio::fs::remove_file(&mark).await;
    }
}

/// At the start of a schedule with `backup_dir`: the newest backup in the bucket, whose time is
/// the last upload's in `/metrics` until this process uploads one, then the uploads a stop cut
/// short ([`resume_cut_uploads`]).
async fn look_in_bucket(backups: Backups, s3: S3Settings, dir: PathBuf, now_ms: u64) {
    if let Some(at) = newest_uploaded(s3.clone(), now_ms).await {
        backups.metrics.backup_found_uploaded(at);
    }
    resume_cut_uploads(backups, s3, dir).await;
}

/// What the schedule is handed by the layer above: the store it copies, the clock that times
/// and names the backups, the counters of `/metrics`, and the schedule itself.
#[derive(Clone)]
pub struct Backups {
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub schedule: BackupSchedule,
}

impl Backups {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// Makes backups on `backups.schedule` until the task is dropped (at shutdown).
pub async fn run(backups: Backups) {
    let schedule = &backups.schedule;
    let dir = local_dir(&backups);
    let folder = dir.clone();
    match tokio::task::spawn_blocking(move || delete_leftovers(&dir)).await {
        Ok(Ok((deleted, kept))) => {
            for path in deleted {
                tracing::info!(path = %path.display(), "deleted a backup copy a stopped process left");
            }
            for (path, error) in kept {
                tracing::warn!(path = %path.display(), error, "a backup copy a stopped process left could not be deleted");
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(
                error = %e,
                dir = %folder.display(),
                "looking for backup copies a stopped process left"
            );
        }
        Err(_) => {}
    }
    let every_ms = u64::try_from(schedule.every.as_millis()).unwrap_or(u64::MAX);
    let retry_ms = u64::try_from(RETRY_AFTER.min(schedule.every).as_millis()).unwrap_or(u64::MAX);
    // A backup named in the future (by a clock that once ran ahead) says nothing of when the
    // last one was made: the newest is the newest up to now, and with none a backup is made at
    // once.
    let start = backups.now_ms();
    let newest = match (&schedule.dir, &schedule.s3) {
        (Some(dir), s3) => {
            if let Some(s3) = s3 {
                // Without holding the first local backup back while the bucket is slow or down.
                tokio::spawn(look_in_bucket(
                    backups.clone(),
                    s3.clone(),
                    dir.clone(),
                    start,
                ));
            }
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || own_backups(&dir))
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|b| newest_until(&b, start))
        }
        (None, Some(s3)) => {
            let at = newest_uploaded(s3.clone(), start).await;
            if let Some(at) = at {
                backups.metrics.backup_found_uploaded(at);
            }
            at
        }
        (None, None) => None,
    };
    let mut due = newest.map_or(0, |at| at.saturating_add(every_ms));
    let mut failing = false;
    loop {
        clock::sleep_until(&*backups.clock, due).await;
        let now = backups.now_ms();
        match backup_once(&backups, now).await {
            Ok((path, stats)) => {
                backups.metrics.backup(true);
                if failing {
                    tracing::info!("scheduled backups work again");
                    failing = false;
                }
                tracing::info!(
                    path = %path.display(),
                    rows = stats.rows,
                    bytes = stats.bytes,
                    "scheduled backup written"
                );
                due = now.saturating_add(every_ms);
                let held = schedule
                    .s3
                    .as_ref()
                    .and_then(|_| hold_while_uploaded(&path));
                if let Some(s3) = &schedule.s3 {
                    upload_marked(&backups, s3, &path, now).await;
                }
                if schedule.dir.is_none() {
                    let _ = tokio::fs::remove_file(&path).await;
                }
                drop(held);
            }
            Err(e) => {
                backups.metrics.backup(false);
                if failing {
                    tracing::debug!(error = %e.message, "scheduled backup failed again");
                } else {
                    tracing::error!(
                        error = %e.message,
                        dir = %local_dir(&backups).display(),
                        "scheduled backup failed; ingest goes on, and the backup is tried again \
                         (the next line about backups in this log says when it works)"
                    );
                    failing = true;
                }
                due = now.saturating_add(retry_ms);
            }
        }
    }
}

impl Worker for Backups {
    const NAME: &'static str = "backups";

    fn run(self) -> impl Future<Output = ()> + Send {
        run(self)
    }
}

/// Where a backup is written: `backup_dir`, or without it the data file's folder (the copy
/// is only there until it is uploaded).
fn local_dir(backups: &Backups) -> PathBuf {
    backups
        .schedule
        .dir
        .clone()
        .unwrap_or_else(|| crate::storage::folder_of(backups.store.path()).to_path_buf())
}

/// One scheduled backup at `now_ms` into `schedule.dir`, then the rotation; answers the new
/// file and what it holds. Without `backup_dir`, the file is written beside the data file
/// under a hidden name (`.tracker-20261124T031500Z.redb.upload-<pid>`) for the upload to
/// send.
///
/// # Errors
/// When the copy cannot be written (the directory is missing or unwritable, the disk is full,
/// the name is taken), or the rotation cannot delete an old backup.
pub async fn backup_once(backups: &Backups, now_ms: u64) -> Result<(PathBuf, BackupStats), Error> {
    let schedule = &backups.schedule;
    let Some(dir) = schedule.dir.clone() else {
        let dest = local_dir(backups).join(format!(
            ".{}.upload-{}",
            backup_name(now_ms),
            std::process::id()
        ));
        // Left by a process with the same id that stopped before it could delete it.
        let _ = tokio::fs::remove_file(&dest).await;
        let stats = backups.store.backup(dest.clone()).await?;
        return Ok((dest, stats));
    };
    let dest = dir.join(backup_name(now_ms));
    let stats = backups.store.backup(dest.clone()).await?;
    let (keep, live) = (schedule.keep, backups.store.path().to_owned());
    let rotated = tokio::task::spawn_blocking(move || rotate(&dir, keep, &live, now_ms))
        .await
        .map_err(|_| Error::internal())?;
    match rotated {
        Ok(deleted) => {
            for path in deleted {
                tracing::info!(path = %path.display(), "deleted an old scheduled backup");
            }
        }
        Err(e) => {
            return Err(Error::new(
                crate::error::Code::Unavailable,
                format!(
                    "backup {} written, but deleting the oldest in {} failed: {e}",
                    dest.display(),
                    local_dir(backups).display()
                ),
            ));
        }
    }
    Ok((dest, stats))
}

/// [`upload`] of the backup made at `made_at`, marked as begun in `backup_dir` while it runs
/// ([`upload_mark`]): the mark is kept only if a stop cuts the upload short, and then the next
/// start sends it.
async fn upload_marked(backups: &Backups, s3: &S3Settings, file: &Path, made_at: u64) {
    let schedule = &backups.schedule;
    let mark = schedule
        .dir
        .as_ref()
        .map(|d| upload_mark(d, &backup_name(made_at)));
    if let Some(mark) = &mark
        && let Err(e) = tokio::fs::write(mark, b"").await
    {
        tracing::warn!(
            error = %e,
            path = %mark.display(),
            "cannot mark the upload as begun: a stop that cuts it short loses it"
        );
    }
    upload(backups, s3, file, made_at, schedule.keep).await;
    if let Some(mark) = mark {
        let _ = tokio::fs::remove_file(mark).await;
    }
}

/// Uploads the backup at `file` as `prefix` + `name`, then deletes the oldest uploaded beyond
/// `keep`; logs and counts how it went. Never fails the schedule: the next backup is made and
/// uploaded at its time whatever happened to this one.
async fn upload(backups: &Backups, s3: &S3Settings, file: &Path, made_at: u64, keep: u32) {
    let key = format!("{}{}", s3.prefix, backup_name(made_at));
    let (settings, file_owned, key_owned) = (s3.clone(), file.to_owned(), key.clone());
    let sent = tokio::task::spawn_blocking(move || {
        s3::on_own_runtime(async move {
            let bucket = Bucket::new(&settings, None)?;
            let bytes = bucket.upload(&file_owned, &key_owned).await?;
            let rotated = rotate_bucket(&bucket, &settings.prefix, keep, made_at).await;
            Ok((bytes, bucket.address(&key_owned), rotated))
        })
    })
    .await
    .unwrap_or_else(|e| Err(S3Error(format!("the upload stopped: {e}"))));
    let now = backups.now_ms();
    match sent {
        Ok((bytes, address, rotated)) => {
            backups.metrics.backup_uploaded(now);
            if let Some(bytes) = bytes {
                tracing::info!(to = %address, bytes, "scheduled backup uploaded");
            } else {
                // An upload cut short after the object arrived, sent again at start; or another
                // server writing under the same prefix. The object is never replaced.
                tracing::info!(
                    to = %address,
                    "scheduled backup already in the bucket under its name: left as it was"
                );
            }
            match rotated {
                Ok(deleted) => {
                    for key in deleted {
                        tracing::info!(key, "deleted an old uploaded backup");
                    }
                }
                // Debug: quoted, its control characters escaped, so the service's text cannot
                // write a line of its own or escape sequences into the log.
                Err(e) => tracing::warn!(
                    error = ?e.0,
                    "scheduled backup uploaded, but deleting the oldest uploaded ones failed; \
                     it is tried again after the next upload"
                ),
            }
        }
        Err(e) => {
            backups.metrics.backup_upload_failed(now, e.0.clone());
            tracing::warn!(
                error = ?e.0,
                key,
                "uploading a scheduled backup failed; ingest goes on, and the next scheduled \
                 backup is uploaded at its time"
            );
        }
    }
}

/// Deletes the oldest backups directly under `prefix` beyond the newest `keep`, never the one
/// made at `made_at` ([`beyond_keep`]); nothing else is ever deleted. Answers the keys deleted.
async fn rotate_bucket(
    bucket: &Bucket,
    prefix: &str,
    keep: u32,
    made_at: u64,
) -> Result<Vec<String>, S3Error> {
    let mut deleted = Vec::new();
    let backups = bucket.backups(prefix, PREFIX, backup_time).await?;
    for key in beyond_keep(backups, keep, made_at) {
        bucket.delete(&key).await?;
        deleted.push(key);
    }
    // A kill between an upload's staging copy and its deletion leaves the copy behind; one begun
    // a day before this backup belongs to no upload still running.
    let left_behind = |name: &str| {
        s3::staging_begun_ms(name).filter(|begun| begun.saturating_add(STAGING_KEPT_MS) < made_at)
    };
    for (_, key) in bucket.backups(prefix, PREFIX, left_behind).await? {
        bucket.delete(&key).await?;
        tracing::info!(key, "deleted the staging copy of an upload cut short");
    }
    Ok(deleted)
}

/// The time of the newest backup uploaded under the prefix by `now_ms` ([`newest_until`]), for
/// a schedule without `backup_dir` to follow across restarts and for the last upload's time in
/// `/metrics`; `None` when there is none or the bucket cannot be listed (then a schedule
/// without `backup_dir` makes a backup at once).
async fn newest_uploaded(s3: S3Settings, now_ms: u64) -> Option<u64> {
    tokio::task::spawn_blocking(move || {
        s3::on_own_runtime(async move {
            let bucket = Bucket::new(&s3, None)?;
            bucket.backups(&s3.prefix, PREFIX, backup_time).await
        })
    })
    .await
    .ok()
    .and_then(Result::ok)
    .and_then(|b| newest_until(&b, now_ms))
}

/// The time of the newest of `backups` (oldest first) made by `now_ms`: one named later was
/// named by a clock that ran ahead.
fn newest_until<T>(backups: &[(u64, T)], now_ms: u64) -> Option<u64> {
    backups
        .iter()
        .rev()
        .map(|(at, _)| *at)
        .find(|at| *at <= now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_utc_second_and_read_back() {
        // 2026-11-24T03:15:00Z
        let ms = 1_795_490_100_000;
        assert_eq!(backup_name(ms), "tracker-20261124T031500Z.redb");
        assert_eq!(backup_time("tracker-20261124T031500Z.redb"), Some(ms));
        // Names sort by time.
        let (a, b) = (backup_name(ms), backup_name(ms + 86_400_000 * 40));
        assert!(a < b, "{a} {b}");
    }

    #[test]
    fn only_names_of_exactly_that_shape_are_the_schedules() {
        for other in [
            "tracker.redb",
            "tracker-20261124T031500Z.redb.bak",
            ".tracker-20261124T031500Z.redb.partial-42",
            "tracker-20261124T031500.redb",
            "tracker-20261124T031560Z.redb",
            "tracker-20261124t031500z.redb",
            "tracker-2026112T0315000Z.redb",
            "mine-20261124T031500Z.redb",
        ] {
            assert_eq!(backup_time(other), None, "{other}");
        }
    }

    #[test]
    fn temporary_copies_are_known_by_name_with_the_processes_they_name() {
        let b = "tracker-20261124T031500Z.redb";
        assert_eq!(temporary_of(&format!(".{b}.upload")), Some(vec![]));
        assert_eq!(temporary_of(&format!(".{b}.upload-42")), Some(vec![42]));
        assert_eq!(temporary_of(&format!(".{b}.partial-7")), Some(vec![7]));
        assert_eq!(
            temporary_of(&format!("..{b}.upload-42.partial-43")),
            Some(vec![42, 43])
        );
        for other in [
            b.to_owned(),
            format!("{b}.upload-42"),
            format!(".{b}.upload-"),
            format!(".{b}.upload-4x"),
            format!(".{b}.partial-"),
            format!(".{b}.uploaded"),
            format!("..{b}.upload-42"),
            format!("..{b}.partial-42"),
            ".tracker.redb.partial-42".to_owned(),
            ".tracker-20261124T031560Z.redb.upload-42".to_owned(),
            ".notes.redb.upload-42".to_owned(),
        ] {
            assert_eq!(temporary_of(&other), None, "{other}");
        }
    }

    #[test]
    fn leftovers_of_stopped_processes_go_and_a_running_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let b = "tracker-20261124T031500Z.redb";
        // A process id no process has: above the kernel's largest.
        let gone = 4_194_305;
        let own = std::process::id();
        // The test runner's parent: running, and not this process.
        let other =
            rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get().unsigned_abs());
        let leftovers = [
            format!(".{b}.upload"),
            format!(".{b}.upload-{gone}"),
            format!(".{b}.upload-{own}"),
            format!(".{b}.partial-{gone}"),
            format!("..{b}.upload-{gone}.partial-{gone}"),
            format!("..{b}.upload.partial-{gone}"),
        ];
        // Another server's (its process running), and one held by an upload in progress (as
        // another container's process 1 holds its own, with this one's id).
        let uploading = format!(".{b}.upload-4194306");
        let kept = [
            format!(".{b}.upload-{other}"),
            format!("..{b}.upload-{other}.partial-{gone}"),
            uploading.clone(),
            b.to_owned(),
            "tracker.redb".to_owned(),
            "notes.txt".to_owned(),
        ];
        for n in leftovers.iter().chain(&kept) {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let held = hold_while_uploaded(&dir.path().join(&uploading)).expect("locked");
        let (mut deleted, failed) = delete_leftovers(dir.path()).unwrap();
        drop(held);
        assert!(failed.is_empty(), "{failed:?}");
        deleted.sort();
        let mut expected: Vec<PathBuf> = leftovers.iter().map(|n| dir.path().join(n)).collect();
        expected.sort();
        assert_eq!(deleted, expected);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut kept = kept.to_vec();
        kept.sort();
        assert_eq!(left, kept);
    }

    #[test]
    fn rotation_keeps_the_newest_and_touches_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let ms = 1_795_490_100_000;
        let names: Vec<String> = (0..5).map(|i| backup_name(ms + i * 60_000)).collect();
        for n in &names {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let others = [
            "tracker.redb",
            "notes.txt",
            ".tracker-20261124T031500Z.redb.partial-7",
        ];
        for n in others {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let made = ms + 4 * 60_000;
        let deleted = rotate(dir.path(), 2, &dir.path().join("tracker.redb"), made).unwrap();
        assert_eq!(
            deleted,
            names[..3]
                .iter()
                .map(|n| dir.path().join(n))
                .collect::<Vec<_>>()
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want: Vec<String> = names[3..].to_vec();
        want.extend(others.iter().map(|s| (*s).to_owned()));
        want.sort();
        assert_eq!(left, want);
        assert!(
            rotate(dir.path(), 2, &dir.path().join("tracker.redb"), made)
                .unwrap()
                .is_empty()
        );
    }

    /// After a clock that was ahead named backups in the future, each new backup sorts as the
    /// oldest: it is kept all the same, and the future ones go in their turn.
    #[test]
    fn a_new_backup_is_kept_beside_backups_named_in_the_future() {
        let dir = tempfile::tempdir().unwrap();
        let ms = 1_795_490_100_000;
        let future: Vec<String> = (0..3)
            .map(|i| backup_name(ms + 365 * 86_400_000 + i * 86_400_000))
            .collect();
        for n in &future {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let live = dir.path().join("tracker.redb");
        for day in 0..3 {
            let made_at = ms + day * 86_400_000;
            let made = dir.path().join(backup_name(made_at));
            std::fs::write(&made, "new").unwrap();
            let deleted = rotate(dir.path(), 3, &live, made_at).unwrap();
            assert_eq!(deleted, vec![dir.path().join(&future[day as usize])]);
            assert!(made.exists(), "day {day}");
        }
        assert_eq!(own_backups(dir.path()).unwrap().len(), 3);
        assert_eq!(beyond_keep(vec![(1, 'a'), (2, 'b')], 1, 1), vec!['b']);
        assert_eq!(beyond_keep(vec![(1, 'a'), (2, 'b')], 1, 2), vec!['a']);
        assert_eq!(
            beyond_keep(vec![(1, 'a'), (2, 'b')], 2, 1),
            Vec::<char>::new()
        );
    }

    /// A server restored by serving a backup in place: its data file has a backup's name in
    /// `backup_dir`, and the rotation neither deletes it nor counts it among the backups.
    #[test]
    fn rotation_never_deletes_the_live_data_file() {
        let dir = tempfile::tempdir().unwrap();
        let ms = 1_795_490_100_000;
        let names: Vec<String> = (0..4).map(|i| backup_name(ms + i * 60_000)).collect();
        for n in &names {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let live = dir.path().join(&names[0]);
        let deleted = rotate(dir.path(), 2, &live, ms + 3 * 60_000).unwrap();
        assert_eq!(deleted, vec![dir.path().join(&names[1])]);
        assert!(live.exists());
    }
}
