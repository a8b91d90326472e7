//! `tracker restore SOURCE`: a backup (a file, or an `s3://BUCKET/KEY` address) put in place of
//! the data file, offline only.
//!
//! The copy is first written beside the data file under a hidden name (created new, mode
//! `0600`, never through a link), brought to this release's schema if an older release wrote
//! it (a move to a new machine with a newer release), then checked as `tracker check` checks a file
//! (`storage::check::check_file`), and only a clean copy is renamed over the data file: a
//! rename within one folder is atomic, so the data file is at every moment either the old one
//! or the whole restored one. A damaged or unreadable copy is deleted and nothing else is
//! touched. The file it replaces is kept beside it (`tracker.redb.replaced-20261124T031500Z`),
//! linked, not copied, so restoring the wrong backup can be undone.
//!
//! A running server has the data file open and would go on writing to the file it opened, not
//! the restored one: restore refuses while one answers on the control socket or holds the
//! file's lock, as `tracker compact` does.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::output::{CliResult, Output, create_private};
use crate::clock::{Clock as _, SystemClock};
use crate::config::Settings;
use crate::control;
use crate::s3::{self, Bucket};
use crate::storage::StoreError;

/// What a restore did, for `--json`.
#[derive(Serialize)]
struct Restored {
    source: String,
    data: String,
    rows: u64,
    bytes: u64,
    /// Where the data file it replaced is kept, if there was one.
    replaced: Option<String>,
    /// The schema version of a backup written by an older release, migrated before the check.
    migrated_from: Option<u64>,
}

/// `tracker restore SOURCE`.
pub(super) fn restore(settings: &Settings, out: Output, source: &str) -> CliResult {
    let data = std::path::absolute(&settings.data)?;
    refuse_if_served(&data)?;
    let temp = hidden_beside(&data, &format!("restore-{}", std::process::id()));
    // Left by a restore of an earlier process with the same id; unlinking a link removes the
    // link, never its target.
    let _ = std::fs::remove_file(&temp);
    let fetched = fetch(settings, source, &temp).and_then(|bytes| {
        let migrated = crate::storage::migrate_copy(&temp).map_err(|e| {
            format!(
                "{source} could not be brought to this release's schema: {e}; nothing was changed"
            )
        })?;
        let now = SystemClock.now_ms();
        let checked = crate::storage::check::check_file(&temp, false, settings.dedup_expiry(now));
        let report = checked.map_err(|e| match e {
            StoreError::Corrupt(why) => {
                format!("{source} is damaged ({why}); nothing was changed: restore another backup")
            }
            e => format!(
                "{source} is not a data file this release can read: {e}; nothing was changed"
            ),
        })?;
        if report.redb_integrity == Some(false) || !report.clean() {
            let problems: Vec<String> = report
                .findings
                .iter()
                .take(5)
                .map(|f| format!("{} [{}]: {}", f.table, f.key, f.problem))
                .collect();
            return Err(format!(
                "{source} is damaged ({}{} problem(s){}{}); nothing was changed: restore another \
                 backup",
                if report.redb_integrity == Some(false) {
                    "redb's page check failed, "
                } else {
                    ""
                },
                report.findings.len(),
                if problems.is_empty() { "" } else { ": " },
                problems.join("; ")
            )
            .into());
        }
        // A server may have started while the copy came.
        refuse_if_served(&data)?;
        Ok((report.rows, bytes, migrated))
    });
    let (rows, bytes, migrated) = match fetched {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            return Err(e);
        }
    };
    let replaced = if data.exists() {
        let stamp = crate::workers::backups::backup_name(SystemClock.now_ms());
        let stamp = stamp
            .trim_start_matches("tracker-")
            .trim_end_matches(".redb");
        let kept = with_suffix(&data, &format!(".replaced-{stamp}"));
        if let Err(e) = std::fs::hard_link(&data, &kept) {
            let _ = std::fs::remove_file(&temp);
            return Err(format!(
                "cannot keep the data file as {} before replacing it: {e}; nothing was changed",
                kept.display()
            )
            .into());
        }
        Some(kept)
    } else {
        None
    };
    if let Err(e) = std::fs::rename(&temp, &data) {
        let _ = std::fs::remove_file(&temp);
        return Err(format!("cannot put the backup in place of {}: {e}", data.display()).into());
    }
    // The rename is in the folder's entry: synced, so it outlives a power cut.
    if let Some(folder) = data.parent() {
        let _ = std::fs::File::open(folder).and_then(|f| f.sync_all());
    }
    let text = format!(
        "restored {source} into {} ({rows} rows, {bytes} bytes, {}checked){}",
        data.display(),
        migrated.map_or_else(String::new, |from| format!(
            "migrated from schema version {from}, "
        )),
        replaced.as_ref().map_or_else(String::new, |kept| format!(
            "; the file it replaced is kept as {}",
            kept.display()
        ))
    );
    out.print(
        &Restored {
            source: source.to_owned(),
            data: data.display().to_string(),
            rows,
            bytes,
            replaced: replaced.map(|p| p.display().to_string()),
            migrated_from: migrated,
        },
        &text,
    );
    Ok(())
}

/// Refuses while a server answers on the data file's control socket, or anything holds the
/// file's lock.
fn refuse_if_served(data: &Path) -> CliResult {
    let served = control::reachable(&control::socket_path(data))
        || crate::storage::require_unused(data).is_err();
    if served {
        return Err(format!(
            "a server has {} open, and a restore replaces the file under it: stop the server \
             (e.g. systemctl stop tracker), run tracker restore, then start it again; nothing \
             was changed",
            data.display()
        )
        .into());
    }
    Ok(())
}

/// Writes the backup at `source` into a new file at `temp`; answers its size.
fn fetch(
    settings: &Settings,
    source: &str,
    temp: &Path,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut file = create_private(temp)
        .map_err(|e| format!("cannot create {} for the download: {e}", temp.display()))?;
    if let Some(address) = s3::parse_address(source) {
        let (bucket, key) = address?;
        let s3 = settings
            .backups
            .as_ref()
            .and_then(|b| b.s3.as_ref())
            .ok_or(
                "restoring from s3:// needs [backup_s3] in the configuration (the endpoint, \
                    region and keys; docs/backups.md)",
            )?;
        let bucket = Bucket::new(s3, Some(&bucket))?;
        return Ok(s3::on_own_runtime(bucket.download(&key, &mut file))?);
    }
    let mut from = std::fs::File::open(source).map_err(|e| format!("cannot read {source}: {e}"))?;
    let bytes = std::io::copy(&mut from, &mut file)
        .map_err(|e| format!("copying {source} to {}: {e}", temp.display()))?;
    file.flush()?;
    file.sync_all()?;
    Ok(bytes)
}

/// `.NAME.what` beside `data`: hidden, and in the same folder so a rename is atomic.
pub(super) fn hidden_beside(data: &Path, what: &str) -> PathBuf {
    let name = data.file_name().map_or_else(
        || "tracker.redb".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    data.with_file_name(format!(".{name}.{what}"))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
