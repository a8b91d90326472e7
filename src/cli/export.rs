//! `tracker export`: a space's events, with attribution, as `GET /events` shows them and with
//! their times in the space's zone too (`domain::export`), page by page through the running
//! server or on the data file, as NDJSON or CSV, to standard output or
//! a file (then saying what it wrote and where the next export starts). The file is created
//! new with mode `0600`, never over an existing one or through a link.

use std::io::Write as _;
use std::path::Path;

use clap::ValueEnum;
use serde::Serialize;

use super::output::CliResult;
use super::output::Output;
use super::request::Target;
use crate::config::Settings;
use crate::control::SpaceRequest;
use crate::control::{Answer, Request};
use crate::domain::export::ExportedEvent;
use crate::domain::spreadsheet::CsvRows;

/// The time zone of `space`, which the export writes its times in; UTC for a space that is
/// not there (the export then fails naming it).
fn space_zone(
    target: &mut Target,
    settings: &Settings,
    space: &str,
) -> Result<jiff::tz::TimeZone, Box<dyn std::error::Error>> {
    let request = Request::Space {
        request: SpaceRequest::List,
    };
    match target.run(settings, request)? {
        Answer::Spaces(spaces) => Ok(spaces
            .iter()
            .find(|s| s.space == space)
            .map_or(jiff::tz::TimeZone::UTC, |s| s.settings.time_zone.zone())),
        other => Err(format!("the server answered a list of spaces with {other:?}").into()),
    }
}

/// What `tracker export --format` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum ExportFormat {
    /// One JSON object per line
    Ndjson,
    /// RFC 4180, with a header row
    Csv,
}

/// `tracker export`: the space's feed page by page (constant memory), through the server when
/// one runs. Stops at the end of what is committed when it reaches it.
pub(super) fn export(
    settings: &Settings,
    output: Output,
    (space, mut after, format): (&str, u64, ExportFormat),
    out: Option<&Path>,
) -> CliResult {
    let mut target = Target::Undecided;
    let file: Box<dyn std::io::Write> = match out {
        // A new file, its owner's alone: the events hold visitors' data. Never an existing
        // file nor through a link, which could point anywhere the user may write.
        Some(path) => Box::new(super::output::create_private(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!(
                    "{} already exists; an export writes a new file and never replaces one \
                     (or writes through a link): remove it or name another",
                    path.display()
                )
            } else {
                format!("cannot write {}: {e}", path.display())
            }
        })?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut sink = std::io::BufWriter::new(file);
    // CSV through the one writer that neutralises formulas (`domain::spreadsheet`).
    let mut csv = (format == ExportFormat::Csv).then(|| CsvRows::new(Vec::new()));
    // Progress on a terminal only: indicatif draws nothing when stderr is not one.
    let progress = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} events exported ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let zone = space_zone(&mut target, settings, space)?;
    let (mut written, mut last) = (0_u64, None);
    loop {
        let request = Request::ExportPage {
            space: space.to_owned(),
            after,
            limit: crate::domain::feed::MAX_PAGE,
        };
        let page = match target.run(settings, request)? {
            Answer::Page(page) => page,
            other => return Err(format!("the server answered a page with {other:?}").into()),
        };
        for event in &page.events {
            let event = ExportedEvent::new(event, &zone);
            if let Some(w) = &mut csv {
                w.row(&event)?;
            } else {
                serde_json::to_writer(&mut sink, &event)?;
                sink.write_all(b"\n")?;
            }
        }
        // The CSV rows of a page, emptied into the sink: memory stays one page whatever the
        // size of the export.
        if let Some(w) = &mut csv {
            sink.write_all(&w.take_written()?)?;
        }
        progress.inc(page.events.len() as u64);
        written += page.events.len() as u64;
        if let Some(event) = page.events.last() {
            last = Some(event.inbox_id.clone());
        }
        match page.next {
            Some(next) => after = next.parse()?,
            None => break,
        }
    }
    sink.flush()?;
    progress.finish_and_clear();
    // With the events in a file, standard output says what was written and how to go on.
    if let Some(path) = out {
        #[derive(Serialize)]
        struct Exported<'a> {
            space: &'a str,
            file: String,
            events: u64,
            /// The last event's `inbox_id`: the `--after` of the next export.
            last_inbox_id: Option<&'a str>,
        }
        let file = path.display().to_string();
        let s = if written == 1 { "" } else { "s" };
        let text = match &last {
            Some(id) => format!(
                "wrote {written} event{s} of space {space} to {file}; the last is inbox_id {id}, \
                 and --after {id} exports what comes after it"
            ),
            None if after == 0 => format!("wrote 0 events of space {space} to {file}: it has none"),
            None => {
                format!("wrote 0 events of space {space} to {file}: none after inbox_id {after}")
            }
        };
        output.print(
            &Exported {
                space,
                file,
                events: written,
                last_inbox_id: last.as_deref(),
            },
            &text,
        );
    }
    Ok(())
}
