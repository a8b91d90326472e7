//! Commands on the data file as a whole: `tracker backup`'s answer, `tracker check` (through the
//! running server, or on the file itself with redb's page check as well) and `tracker compact`
//! (offline only).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::output::CliResult;
use super::output::Output;
use crate::clock::{Clock as _, SystemClock};
use crate::config::Settings;
use crate::control::{self, Answer, Reached, Request};
use crate::storage::BackupStats;

/// `tracker backup`'s answer, naming `dest`, where the copy went.
pub(super) fn backed_up_text(stats: &BackupStats, dest: Option<&Path>) -> String {
    format!(
        "backed up {} rows ({} bytes) to {}",
        stats.rows,
        stats.bytes,
        dest.map_or_else(String::new, |d| d.display().to_string())
    )
}

/// `tracker check`: through the running server's control socket when it has the data file open (the
/// invariants only), else on the file itself (redb's page check as well). An error when
/// anything is wrong, so scripts and timers can alert on the exit status.
pub(super) fn check(
    settings: &Settings,
    out: Output,
    file: Option<PathBuf>,
    repair: bool,
) -> CliResult {
    let socket = control::socket_path(&settings.data);
    let through_server = match &file {
        None => match control::send(&socket, &Request::Check { repair })? {
            Reached::Answered(answer) => Some(answer?),
            Reached::NoServer => None,
        },
        Some(_) => None,
    };
    let path = file.unwrap_or_else(|| settings.data.clone());
    let report = match through_server {
        Some(Answer::Checked(report)) => report,
        Some(other) => return Err(format!("the server answered a check with {other:?}").into()),
        None => crate::storage::check::check_file(
            &path,
            repair,
            settings.dedup_expiry(SystemClock.now_ms()),
        )?,
    };
    let mut text = String::new();
    match report.redb_integrity {
        Some(true) => text.push_str("redb page check: passed\n"),
        Some(false) => text.push_str("redb page check: FAILED, and redb repaired the file\n"),
        None => text.push_str(
            "redb page check: not run (the server has the file open; check a backup, or stop \
             the server)\n",
        ),
    }
    for f in &report.repaired {
        let _ = writeln!(text, "repaired: {} [{}]: {}", f.table, f.key, f.problem);
    }
    for f in &report.findings {
        let how = if f.repairable {
            "tracker check --repair rebuilds it"
        } else {
            "not derivable: restore from a backup"
        };
        let _ = writeln!(text, "{} [{}]: {} ({how})", f.table, f.key, f.problem);
    }
    let _ = write!(
        text,
        "{}: {} rows read, {} problem(s)",
        path.display(),
        report.rows,
        report.findings.len()
    );
    out.print(&report, &text);
    if report.clean() {
        Ok(())
    } else {
        Err(format!(
            "{} has {} problem(s)",
            path.display(),
            report.findings.len()
        )
        .into())
    }
}

/// `tracker compact`: offline only (`storage/engine/compact.rs` says why).
pub(super) fn compact(settings: &Settings, out: Output) -> CliResult {
    let path = &settings.data;
    if control::reachable(&control::socket_path(path)) {
        return Err(format!(
            "a server has {} open, and compacting needs the file to itself: stop the server \
             (e.g. systemctl stop tracker), run tracker compact, then start it again",
            path.display()
        )
        .into());
    }
    let done = crate::storage::compact_file(path)?;
    let text = format!(
        "compacted {}: {} bytes before, {} after ({} freed)",
        path.display(),
        done.bytes_before,
        done.bytes_after,
        done.bytes_before.saturating_sub(done.bytes_after)
    );
    out.print(&done, &text);
    Ok(())
}
