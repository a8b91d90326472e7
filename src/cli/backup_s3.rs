//! `tracker backup s3://BUCKET/KEY`: a backup written straight to S3-compatible object storage
//! with `[backup_s3]`'s endpoint, region and keys (`s3.rs` moves the bytes).

use std::path::Path;

use super::data_file::backed_up_text;
use super::output::{CliResult, Output};
use super::request::Target;
use super::restore::hidden_beside;
use crate::config::Settings;
use crate::control::{Answer, Request};
use crate::storage::BackupStats;

/// `tracker backup s3://BUCKET/KEY`: the same consistent copy as `tracker backup FILE` (through
/// the running server, or of the file), written beside the data file under a hidden name,
/// uploaded with `[backup_s3]`'s endpoint, region and keys into the address's bucket, and
/// deleted. Like a backup to a file, it never replaces an object already there.
pub(super) fn backup_to_s3(settings: &Settings, out: Output, address: &str) -> CliResult {
    let (bucket, key) = crate::s3::parse_address(address).ok_or("not an s3:// address")??;
    let s3 = settings
        .backups
        .as_ref()
        .and_then(|b| b.s3.as_ref())
        .ok_or(
            "a backup to s3:// needs [backup_s3] in the configuration (the endpoint, region and \
             keys; docs/backups.md)",
        )?;
    let bucket = crate::s3::Bucket::new(s3, Some(&bucket))?;
    if crate::s3::on_own_runtime(bucket.exists(&key))? {
        return Err(format!("{address} already exists; a backup never overwrites").into());
    }
    let data = std::path::absolute(&settings.data)?;
    let temp = hidden_beside(&data, &format!("s3-upload-{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let result = (|| -> Result<BackupStats, Box<dyn std::error::Error>> {
        // The target is dropped before the upload: a data file opened here is closed again
        // while the bytes travel.
        let answer = Target::Undecided.run(settings, Request::Backup { dest: temp.clone() })?;
        let Answer::BackedUp(stats) = answer else {
            return Err(format!("the server answered a backup with {answer:?}").into());
        };
        // Looked up above for an early answer; the upload's condition is what holds when
        // another writer took the key meanwhile.
        if crate::s3::on_own_runtime(bucket.upload(&temp, &key))?.is_none() {
            return Err(format!("{address} already exists; a backup never overwrites").into());
        }
        Ok(stats)
    })();
    let _ = std::fs::remove_file(&temp);
    let stats = result?;
    out.print(&stats, &backed_up_text(&stats, Some(Path::new(address))));
    Ok(())
}
