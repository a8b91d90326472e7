//! The rows that start servers of their own, after the table's server has stopped:
//! `unique_backup` (`backup_s3.rs`) and `import` (`import.rs`).

use crate::args::{Args, Mode};
use crate::{backup_s3, import};

/// Runs the rows of `args.own` and answers what failed; under `--smoke` the import is small
/// and `unique_backup` is skipped, saying why.
pub fn run(args: &Args, wrk_path: Option<&str>) -> Result<Vec<String>, String> {
    let smoke = args.mode == Mode::Smoke;
    let mut failures = Vec::new();
    if args.own.backup {
        if smoke {
            println!(
                "unique_backup: skipped under --smoke: it needs two scheduled backups during its \
                 load, at least {} s (run it with --only unique_backup)",
                backup_s3::MIN_LOAD.as_secs()
            );
        } else {
            failures.append(&mut backup_s3::run(args, wrk_path)?);
        }
    }
    if args.own.import {
        let default = if smoke { 10_000 } else { 1_000_000 };
        let events = args.own.import_events.unwrap_or(default);
        failures.append(&mut import::run(events, args.keep)?);
    }
    Ok(failures)
}
