//! `tracker import`: a space's events from NDJSON or CSV (the columns of `tracker export`, the
//! fields of `POST /events`), read line by line (constant memory) and recorded in batches of up
//! to 1000 through the same operation as `POST /events/batch`, through the running server or on
//! the data file. A progress bar on a terminal; then a summary: events queued, duplicates, and
//! each refused line with its number and why. How a line becomes an event, and the `eid` made
//! for one without (so that importing the file again stores nothing twice), is
//! `domain::import`.

use std::io::{BufRead as _, BufReader, Read};
use std::path::Path;

use serde::Serialize;

use super::export::ExportFormat;
use super::output::{CliResult, Output};
use super::request::Target;
use crate::config::Settings;
use crate::control::{Answer, EventTexts, ImportedEvent, Request};
use crate::domain::batch::{MAX_BATCH_BYTES, MAX_BATCH_EVENTS};
use crate::domain::import;
use crate::error::{Code, Error};

/// Refused lines listed one by one in the summary; past this, only counted.
const MAX_LISTED: usize = 1000;

/// What an import did: the summary, printed as JSON with `--json`.
#[derive(Serialize, Default)]
struct Imported {
    space: String,
    file: String,
    /// Lines that held an event (blank lines are skipped).
    events: u64,
    queued: u64,
    duplicates: u64,
    refused: u64,
    /// The first [`MAX_LISTED`] refused lines, in order.
    refusals: Vec<Refusal>,
}

/// A refused line: its number in the file (the header row of a CSV is line 1) and why.
#[derive(Serialize)]
struct Refusal {
    line: u64,
    status: String,
    error: String,
    field: Option<String>,
}

/// The batch being filled, and where its results go.
struct Importer<'a> {
    settings: &'a Settings,
    target: Target,
    space: String,
    /// The events waiting, each with its line's number.
    events: Vec<String>,
    lines: Vec<u64>,
    bytes: u64,
    done: Imported,
}

impl Importer<'_> {
    /// Adds a line's event, sending the batch first when the event would not fit in it.
    fn add(&mut self, line: u64, json: String) -> CliResult {
        self.done.events += 1;
        let size = json.len() as u64 + 1;
        if size + 16 > MAX_BATCH_BYTES {
            let error = Error::new(
                Code::PayloadTooLarge,
                format!("the event is larger than a batch's limit of {MAX_BATCH_BYTES} bytes"),
            );
            self.refuse(line, error.code.as_str(), error.message, None);
            return Ok(());
        }
        if self.events.len() == MAX_BATCH_EVENTS || self.bytes + size + 16 > MAX_BATCH_BYTES {
            self.send()?;
        }
        self.events.push(json);
        self.lines.push(line);
        self.bytes += size;
        Ok(())
    }

    /// A line refused before it was sent (it is not an event) or by the tracker.
    fn refuse(&mut self, line: u64, status: &str, error: String, field: Option<String>) {
        self.done.refused += 1;
        if self.done.refusals.len() < MAX_LISTED {
            self.done.refusals.push(Refusal {
                line,
                status: status.to_owned(),
                error,
                field,
            });
        }
    }

    /// A line that is not an event at all.
    fn refuse_line(&mut self, line: u64, error: &Error) {
        self.done.events += 1;
        let field = error.field.map(str::to_owned);
        self.refuse(line, error.code.as_str(), error.message.clone(), field);
    }

    /// Records the waiting events in one batch and counts what became of each.
    fn send(&mut self) -> CliResult {
        if self.events.is_empty() {
            return Ok(());
        }
        let request = Request::ImportEvents {
            space: self.space.clone(),
            events: EventTexts(std::mem::take(&mut self.events)),
        };
        let results = match self.target.run(self.settings, request)? {
            Answer::EventsImported(results) => results,
            other => return Err(format!("the server answered a batch with {other:?}").into()),
        };
        let lines = std::mem::take(&mut self.lines);
        if results.len() != lines.len() {
            return Err("the server answered a batch with a result missing".into());
        }
        for (line, result) in lines.into_iter().zip(results) {
            match result {
                ImportedEvent::Queued { .. } => self.done.queued += 1,
                ImportedEvent::Duplicate { .. } => self.done.duplicates += 1,
                ImportedEvent::Refused { code, error, field } => {
                    self.refuse(line, &code, error, field);
                }
            }
        }
        self.bytes = 0;
        Ok(())
    }
}

/// `tracker import SPACE FILE`.
pub(super) fn import(
    settings: &Settings,
    output: Output,
    space: &str,
    file: &Path,
    format: Option<ExportFormat>,
) -> CliResult {
    let stdin = file.as_os_str() == "-";
    let (reader, size): (Box<dyn Read>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let size = opened.metadata().ok().map(|m| m.len());
        (Box::new(opened), size)
    };
    let format = format.unwrap_or(
        if file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            ExportFormat::Csv
        } else {
            ExportFormat::Ndjson
        },
    );
    // On a terminal only: indicatif draws nothing when stderr is not one.
    let progress = match size {
        Some(size) => indicatif::ProgressBar::new(size).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} ({eta} left) {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let mut importer = Importer {
        settings,
        target: Target::Undecided,
        space: space.to_owned(),
        events: Vec::with_capacity(MAX_BATCH_EVENTS),
        lines: Vec::with_capacity(MAX_BATCH_EVENTS),
        bytes: 0,
        done: Imported {
            space: space.to_owned(),
            file: file.display().to_string(),
            ..Imported::default()
        },
    };
    match format {
        ExportFormat::Ndjson => read_ndjson(reader, &mut importer, &progress)?,
        ExportFormat::Csv => read_csv(reader, &mut importer, &progress)?,
    }
    importer.send()?;
    progress.finish_and_clear();
    let done = importer.done;
    output.print(&done, &summary_text(&done));
    if done.refused > 0 {
        let s = if done.refused == 1 { "" } else { "s" };
        return Err(format!(
            "{} line{s} refused (listed above); the other events were imported",
            done.refused
        )
        .into());
    }
    Ok(())
}

fn read_ndjson(
    reader: Box<dyn Read>,
    importer: &mut Importer<'_>,
    progress: &indicatif::ProgressBar,
) -> CliResult {
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let (mut line, mut number, mut read) = (Vec::new(), 0_u64, 0_u64);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        read += n as u64;
        let event = std::str::from_utf8(&line)
            .map_err(|e| Error::new(Code::InvalidJson, format!("the line is not UTF-8: {e}")))
            .and_then(import::ndjson_line);
        match event {
            Ok(Some(json)) => importer.add(number, json)?,
            Ok(None) => {}
            Err(e) => importer.refuse_line(number, &e),
        }
        if number % 1024 == 0 {
            progress.set_position(read);
        }
    }
}

fn read_csv(
    reader: Box<dyn Read>,
    importer: &mut Importer<'_>,
    progress: &indicatif::ProgressBar,
) -> CliResult {
    let mut rows = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(reader);
    let mut header: Option<Vec<String>> = None;
    let mut record = csv::StringRecord::new();
    loop {
        let more = match rows.read_record(&mut record) {
            Ok(more) => more,
            Err(e) => {
                let line = e.position().map_or(0, csv::Position::line);
                let error = Error::new(Code::InvalidJson, format!("the row is not CSV: {e}"));
                importer.refuse_line(line, &error);
                // An error of UTF-8 leaves the reader on the next row; any other ends the file.
                if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) {
                    continue;
                }
                return Ok(());
            }
        };
        if !more {
            return Ok(());
        }
        let line = record.position().map_or(0, csv::Position::line);
        let cells: Vec<String> = record.iter().map(str::to_owned).collect();
        match &header {
            None => {
                let names = cells
                    .iter()
                    .map(|c| {
                        let c = c.trim_start_matches('\u{feff}');
                        crate::domain::spreadsheet::cell_text(c).to_owned()
                    })
                    .collect();
                header = Some(names);
            }
            Some(names) => {
                if cells.iter().all(String::is_empty) {
                    continue;
                }
                match import::csv_row(names, &cells) {
                    Ok(json) => importer.add(line, json)?,
                    Err(e) => importer.refuse_line(line, &e),
                }
            }
        }
        if line % 1024 == 0 {
            progress.set_position(record.position().map_or(0, csv::Position::byte));
        }
    }
}

/// The summary as text: one line of counts, then each refused line.
fn summary_text(done: &Imported) -> String {
    use std::fmt::Write as _;
    let s = |n: u64| if n == 1 { "" } else { "s" };
    let mut text = format!(
        "{} event{} read from {} into space {}: {} queued, {} duplicate{}, {} refused",
        done.events,
        s(done.events),
        done.file,
        done.space,
        done.queued,
        done.duplicates,
        s(done.duplicates),
        done.refused,
    );
    for r in &done.refusals {
        let _ = write!(text, "\nline {}: {}: {}", r.line, r.status, r.error);
    }
    let unlisted = done.refused - done.refusals.len() as u64;
    if unlisted > 0 {
        let _ = write!(text, "\n... and {unlisted} more refused lines");
    }
    text
}
