//! `tracker import`: a space's events from NDJSON or CSV (the columns of `tracker export`, the
//! fields of `POST /events`), read line by line (constant memory) and recorded in batches of up
//! to 1000 through the same operation as `POST /events/batch`, through the running server or on
//! the data file; sent to the space's destinations only with `--send`. A progress bar on a
//! terminal; then a summary: events queued, duplicates, each refused line with its number and
//! why, and which destinations the events were not sent to. How a line becomes an event, and the `eid` made
//! for one without (so that importing the file again stores nothing twice), is
//! `domain::import`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender};

use serde::Serialize;

use super::export::ExportFormat;
use super::output::{CliResult, Output};
use super::request::Target;
use crate::config::Settings;
use crate::control::{Answer, DestinationRequest, EventTexts, ImportedEvent, Request};
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
    /// Whether the queued events were sent to the space's destinations (`--send`).
    sent: bool,
    /// The space's destinations the queued events were not sent to (without `--send`).
    not_sent_to: Vec<String>,
}

/// A refused line: its number in the file (the header row of a CSV is line 1) and why.
#[derive(Serialize)]
struct Refusal {
    line: u64,
    status: String,
    error: String,
    field: Option<String>,
}

/// What the reading thread hands the sending one, in the file's order.
enum Piece {
    /// Events to record in one batch, each with its line's number.
    Batch {
        events: Vec<String>,
        lines: Vec<u64>,
    },
    /// A line that is not an event, or an event larger than any batch.
    Refused { line: u64, error: Error },
}

/// Batches read but not yet sent: the reading thread stays at most this many batches ahead of
/// the one being recorded, so an import's memory is a few batches whatever the file's size.
/// Two is enough for the reading of the next batch to overlap the commit of this one.
const BATCHES_AHEAD: usize = 2;

/// The batch being filled on the reading thread, and where it goes when full.
struct Batcher {
    events: Vec<String>,
    lines: Vec<u64>,
    bytes: u64,
    out: SyncSender<Piece>,
}

/// The sending side has stopped (it failed, and says why): reading stops too.
struct Stopped;

/// What a line whose event cannot fit in one batch is refused with.
fn larger_than_a_batch() -> Error {
    Error::new(
        Code::PayloadTooLarge,
        format!("the event is larger than a batch's limit of {MAX_BATCH_BYTES} bytes"),
    )
}

/// Reads one line (through its `\n`) into `line`, keeping at most a batch's bytes of it: the
/// rest of a longer line (a file without line ends, a JSON array on one line) is read and
/// dropped, so memory stays bounded whatever the file. Answers the bytes read and whether
/// `line` holds the whole line.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<(u64, bool)> {
    let n = reader
        .by_ref()
        .take(MAX_BATCH_BYTES)
        .read_until(b'\n', line)? as u64;
    if n < MAX_BATCH_BYTES || line.last() == Some(&b'\n') {
        return Ok((n, true));
    }
    let mut skipped = 0_u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((n + skipped, false));
        }
        let (used, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(used);
        skipped += used as u64;
        if end {
            return Ok((n + skipped, false));
        }
    }
}

impl Batcher {
    /// Adds a line's event, handing the batch on first when the event would not fit in it.
    fn add(&mut self, line: u64, json: String) -> Result<(), Stopped> {
        let size = json.len() as u64 + 1;
        if size + 16 > MAX_BATCH_BYTES {
            return self.refuse(line, larger_than_a_batch());
        }
        if self.events.len() == MAX_BATCH_EVENTS || self.bytes + size + 16 > MAX_BATCH_BYTES {
            self.hand_on()?;
        }
        self.events.push(json);
        self.lines.push(line);
        self.bytes += size;
        Ok(())
    }

    fn refuse(&mut self, line: u64, error: Error) -> Result<(), Stopped> {
        self.out
            .send(Piece::Refused { line, error })
            .map_err(|_| Stopped)
    }

    /// Hands the waiting events on as one batch.
    fn hand_on(&mut self) -> Result<(), Stopped> {
        if self.events.is_empty() {
            return Ok(());
        }
        let piece = Piece::Batch {
            events: std::mem::replace(&mut self.events, Vec::with_capacity(MAX_BATCH_EVENTS)),
            lines: std::mem::replace(&mut self.lines, Vec::with_capacity(MAX_BATCH_EVENTS)),
        };
        self.bytes = 0;
        self.out.send(piece).map_err(|_| Stopped)
    }
}

/// Where batches are recorded, and what became of their events.
struct Importer<'a> {
    settings: &'a Settings,
    target: Target,
    space: String,
    send: bool,
    done: Imported,
}

impl Importer<'_> {
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

    /// Records `events` in one batch and counts what became of each.
    fn send(&mut self, events: Vec<String>, lines: Vec<u64>) -> CliResult {
        self.done.events += events.len() as u64;
        let request = Request::ImportEvents {
            space: self.space.clone(),
            events: EventTexts(events),
            send: self.send,
        };
        let results = match self.target.run(self.settings, request)? {
            Answer::EventsImported(results) => results,
            other => return Err(format!("the server answered a batch with {other:?}").into()),
        };
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
        Ok(())
    }

    /// The space's destinations, which an import without `--send` held its events back from.
    fn destinations(&mut self) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let request = Request::Destination {
            request: DestinationRequest::List {
                space: self.space.clone(),
            },
        };
        match self.target.run(self.settings, request)? {
            Answer::Destinations(list) => Ok(list.into_iter().map(|d| d.name).collect()),
            other => {
                Err(format!("the server answered a list of destinations with {other:?}").into())
            }
        }
    }
}

/// `tracker import SPACE FILE`: one thread reads the file into batches while this one records
/// them, in the file's order, one at a time, so the reading of the next batch overlaps the
/// commit of this one.
pub(super) fn import(
    settings: &Settings,
    output: Output,
    (space, send_on): (&str, bool),
    file: &Path,
    format: Option<ExportFormat>,
) -> CliResult {
    let stdin = file.as_os_str() == "-";
    let (reader, size): (Box<dyn Read + Send>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin()), None)
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
        send: send_on,
        done: Imported {
            space: space.to_owned(),
            file: file.display().to_string(),
            sent: send_on,
            ..Imported::default()
        },
    };
    let (out, pieces) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
    let (sent, read) = std::thread::scope(|scope| {
        let progress = &progress;
        let reading = std::thread::Builder::new()
            .name("tracker-import-read".into())
            .spawn_scoped(scope, move || {
                let mut batcher = Batcher {
                    events: Vec::with_capacity(MAX_BATCH_EVENTS),
                    lines: Vec::with_capacity(MAX_BATCH_EVENTS),
                    bytes: 0,
                    out,
                };
                let read = match format {
                    ExportFormat::Ndjson => read_ndjson(reader, &mut batcher, progress),
                    ExportFormat::Csv => read_csv(reader, &mut batcher, progress),
                };
                match read {
                    Ok(Ok(())) => batcher.hand_on().map_err(|Stopped| None),
                    Ok(Err(Stopped)) => Err(None),
                    Err(e) => Err(Some(format!("cannot read {}: {e}", file.display()))),
                }
            });
        let reading = match reading {
            Ok(reading) => reading,
            Err(e) => return (Err(e.into()), Ok(())),
        };
        let sent = record(&mut importer, &pieces);
        // The reading thread is waiting on a full channel if the sending stopped early.
        drop(pieces);
        let read = reading
            .join()
            .unwrap_or_else(|_| Err(Some("the thread reading the file failed".to_owned())));
        (sent, read)
    });
    // A failure to read says why the import stopped; a failure to send ends the reading.
    if let Err(Some(e)) = read {
        return Err(e.into());
    }
    sent?;
    progress.finish_and_clear();
    if !send_on && importer.done.queued > 0 {
        importer.done.not_sent_to = importer.destinations()?;
    }
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

/// Records what the reading thread hands on, in its order, until it has read the whole file.
fn record(importer: &mut Importer<'_>, pieces: &Receiver<Piece>) -> CliResult {
    for piece in pieces {
        match piece {
            Piece::Batch { events, lines } => importer.send(events, lines)?,
            Piece::Refused { line, error } => importer.refuse_line(line, &error),
        }
    }
    Ok(())
}

/// Reads NDJSON lines into batches; the outer error is the file's, the inner says the sending
/// stopped.
fn read_ndjson(
    reader: Box<dyn Read + Send>,
    batcher: &mut Batcher,
    progress: &indicatif::ProgressBar,
) -> std::io::Result<Result<(), Stopped>> {
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let (mut line, mut number, mut read) = (Vec::new(), 0_u64, 0_u64);
    loop {
        line.clear();
        let (n, whole) = read_line(&mut reader, &mut line)?;
        if n == 0 {
            return Ok(Ok(()));
        }
        number += 1;
        read += n;
        // A byte order mark (Windows tools write one) begins the file, not its first event.
        let text = if number == 1 {
            line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&line)
        } else {
            &line
        };
        let event = if whole {
            std::str::from_utf8(text)
                .map_err(|e| Error::new(Code::InvalidJson, format!("the line is not UTF-8: {e}")))
                .and_then(import::ndjson_line)
        } else {
            Err(larger_than_a_batch())
        };
        let handed = match event {
            Ok(Some(json)) => batcher.add(number, json),
            Ok(None) => Ok(()),
            Err(e) => batcher.refuse(number, e),
        };
        if handed.is_err() {
            return Ok(handed);
        }
        if number % 1024 == 0 {
            progress.set_position(read);
        }
    }
}

/// The bytes the CSV reader may have read ahead of the row it parses: its own buffer.
const CSV_BUFFER_BYTES: usize = 1 << 16;

/// The file under the CSV reader, failing once the row being read passes a batch's bytes: the
/// `csv` crate holds a row whole, and one unterminated quoted field would otherwise hold the
/// rest of the file in memory. `row_ends_at` is where the last whole row ended (set by
/// [`read_csv`]).
struct RowBound<R> {
    inner: R,
    read: u64,
    row_ends_at: std::rc::Rc<std::cell::Cell<u64>>,
    passed: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for RowBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let limit = self.row_ends_at.get() + MAX_BATCH_BYTES + CSV_BUFFER_BYTES as u64;
        if self.read >= limit {
            self.passed.set(true);
            return Err(std::io::Error::other(larger_than_a_batch().message));
        }
        let room = usize::try_from(limit - self.read).unwrap_or(usize::MAX);
        let take = buf.len().min(room);
        let n = self.inner.read(&mut buf[..take])?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads CSV rows into batches, as [`read_ndjson`] reads lines. A row larger than a batch is
/// refused, and ends the file: where it ends cannot be told (an unterminated quote).
fn read_csv(
    reader: Box<dyn Read + Send>,
    batcher: &mut Batcher,
    progress: &indicatif::ProgressBar,
) -> std::io::Result<Result<(), Stopped>> {
    let row_ends_at = std::rc::Rc::new(std::cell::Cell::new(0));
    let passed = std::rc::Rc::new(std::cell::Cell::new(false));
    let bounded = RowBound {
        inner: reader,
        read: 0,
        row_ends_at: row_ends_at.clone(),
        passed: passed.clone(),
    };
    let mut rows = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(CSV_BUFFER_BYTES)
        .from_reader(bounded);
    let mut header: Option<Vec<String>> = None;
    let mut record = csv::StringRecord::new();
    loop {
        row_ends_at.set(rows.position().byte());
        let more = match rows.read_record(&mut record) {
            Ok(more) => more,
            Err(_) if passed.get() => {
                let line = rows.position().line();
                return Ok(batcher.refuse(line, larger_than_a_batch()));
            }
            Err(e) => {
                let line = e.position().map_or(0, csv::Position::line);
                let error = Error::new(Code::InvalidJson, format!("the row is not CSV: {e}"));
                if batcher.refuse(line, error).is_err() {
                    return Ok(Err(Stopped));
                }
                // An error of UTF-8 leaves the reader on the next row; any other ends the file.
                if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) {
                    continue;
                }
                return Ok(Ok(()));
            }
        };
        if !more {
            return Ok(Ok(()));
        }
        let line = record.position().map_or(0, csv::Position::line);
        let cells: Vec<String> = record.iter().map(str::to_owned).collect();
        match &header {
            None => {
                let names: Vec<String> = cells
                    .iter()
                    .map(|c| {
                        let c = c.trim_start_matches('\u{feff}');
                        crate::domain::spreadsheet::cell_text(c).to_owned()
                    })
                    .collect();
                // A column named twice would refuse every row: the header is refused once, and
                // the file with it.
                if let Err(e) = import::csv_header(&names) {
                    return Ok(batcher.refuse(line, e));
                }
                header = Some(names);
            }
            Some(names) => {
                if cells.iter().all(String::is_empty) {
                    continue;
                }
                let handed = match import::csv_row(names, &cells) {
                    Ok(json) => batcher.add(line, json),
                    Err(e) => batcher.refuse(line, e),
                };
                if handed.is_err() {
                    return Ok(handed);
                }
            }
        }
        if line.is_multiple_of(1024) {
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
    if done.sent && done.queued > 0 {
        let _ = write!(
            text,
            "\nthe {} queued event{} go to the space's destinations as new events do",
            done.queued,
            s(done.queued)
        );
    } else if !done.not_sent_to.is_empty() {
        let _ = write!(
            text,
            "\nnot sent: the {} queued event{} went to none of the space's destinations ({}), \
             so an ad platform never counts a conversion twice; to send an import, run it with \
             --send (events already imported are duplicates then, and are not sent)",
            done.queued,
            s(done.queued),
            done.not_sent_to.join(", ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_longer_than_a_batch_is_read_past_holding_no_more_than_a_batch() {
        let long = 3 * MAX_BATCH_BYTES as usize;
        let mut text = vec![b'x'; long];
        text.extend_from_slice(b"\n{\"next\":1}\nlast without an end");
        let mut reader = BufReader::with_capacity(1 << 16, text.as_slice());
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line).unwrap(),
            (long as u64 + 1, false)
        );
        assert_eq!(line.len() as u64, MAX_BATCH_BYTES, "held of the long line");
        // A line just within the bound is whole, and so is a last line without its `\n`.
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), (11, true));
        assert_eq!(line, b"{\"next\":1}\n");
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), (19, true));
        line.clear();
        assert_eq!(read_line(&mut reader, &mut line).unwrap(), (0, true));
        let mut edge = vec![b'y'; MAX_BATCH_BYTES as usize - 1];
        edge.push(b'\n');
        let mut reader = BufReader::new(edge.as_slice());
        line.clear();
        assert_eq!(
            read_line(&mut reader, &mut line).unwrap(),
            (MAX_BATCH_BYTES, true)
        );
        let over = vec![b'y'; MAX_BATCH_BYTES as usize + 1];
        let mut reader = BufReader::new(over.as_slice());
        line.clear();
        assert_eq!(
            read_line(&mut reader, &mut line).unwrap(),
            (MAX_BATCH_BYTES + 1, false)
        );
    }
}
