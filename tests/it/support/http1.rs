//! Reading HTTP/1.1 responses off a connection: the status line, the headers, and the body,
//! framed by `Content-Length`, by chunks or by the end of the connection, or absent (the answer
//! to a `HEAD`, a `204` or `304` without a length).
//!
//! Two clients read with it: the integration tests' (`support.rs`), which write every byte of
//! their requests themselves and must understand every framing the server may use, and the
//! benchmark's load client (`benches/ingest/client.rs` includes this file with `#[path]`), which
//! must be cheap. So a [`Reader`] keeps one buffer for its connection and allocates nothing per
//! answer once that buffer is large enough: the head and body it hands out are slices of the
//! buffer, a chunked body's chunks are joined in place, and the bytes that follow an answer (a
//! pipelined second one) stay in the buffer for the next read.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The least room a read from the connection is given.
const READ_ROOM: usize = 4096;

/// One answer, as slices of its reader's buffer.
pub struct Answer<'a> {
    pub status: u16,
    /// The status line and the header lines, with the blank line that ends them.
    pub head: &'a [u8],
    /// The body, its chunks joined.
    pub body: &'a [u8],
}

/// The reading side of one connection: a buffer, and how far the answer being read has come.
pub struct Reader {
    buf: Vec<u8>,
    /// Bytes of `buf` that belong to the last answer handed out, dropped before the next.
    consumed: usize,
    /// The connection has ended: no more bytes will come.
    eof: bool,
    state: State,
}

/// How far the answer at the start of the buffer has come.
enum State {
    /// Its head has not all arrived; a `bodyless` answer (to a `HEAD`) ends with its head.
    Head { bodyless: bool },
    /// Its head ends at `head_end`; its body is framed by `framing`.
    Body {
        status: u16,
        head_end: usize,
        framing: Framing,
    },
}

enum Framing {
    /// This many bytes.
    Length(usize),
    /// Chunks: those joined so far end at `joined`; the next one's size line starts at `next`.
    Chunked { joined: usize, next: usize },
    /// Whatever comes until the server closes the connection.
    UntilClose,
}

/// Where a whole answer lies in the buffer.
struct Found {
    status: u16,
    head_end: usize,
    body_end: usize,
}

impl Reader {
    /// A reader whose buffer has room for `capacity` bytes to start with; it grows to hold the
    /// largest answer read.
    pub fn new(capacity: usize) -> Reader {
        Reader {
            buf: Vec::with_capacity(capacity),
            consumed: 0,
            eof: false,
            state: State::Head { bodyless: false },
        }
    }

    /// Reads the next answer from `stream`, the connection this reader buffers. With
    /// `bodyless` (the request was a `HEAD`) the answer ends with its head, whatever its
    /// `Content-Length` says.
    pub async fn read<S>(&mut self, stream: &mut S, bodyless: bool) -> io::Result<Answer<'_>>
    where
        S: AsyncRead + Unpin,
    {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        self.state = State::Head { bodyless };
        let found = loop {
            if let Some(found) = self.advance()? {
                break found;
            }
            // Into all of the buffer's spare room, which need not be zeroed first; the buffer
            // doubles when less than a page of it is left.
            self.buf.reserve(READ_ROOM);
            self.eof = stream.read_buf(&mut self.buf).await? == 0;
        };
        Ok(Answer {
            status: found.status,
            head: &self.buf[..found.head_end],
            body: &self.buf[found.head_end..found.body_end],
        })
    }

    /// Goes as far through the answer as the buffer allows: where it lies once it is whole.
    fn advance(&mut self) -> io::Result<Option<Found>> {
        if let State::Head { bodyless } = self.state {
            let Some(head_end) = after_blank_line(&self.buf, 0) else {
                return self.more();
            };
            let head = &self.buf[..head_end];
            let status = status(head)?;
            let framing = framing(head, status, bodyless)?;
            self.state = State::Body {
                status,
                head_end,
                framing,
            };
        }
        let State::Body {
            status,
            head_end,
            ref mut framing,
        } = self.state
        else {
            unreachable!("the head was read above");
        };
        let (body_end, end) = match framing {
            Framing::Length(length) => {
                let end = head_end.saturating_add(*length);
                if self.buf.len() < end {
                    return self.more();
                }
                (end, end)
            }
            Framing::UntilClose => {
                if !self.eof {
                    return Ok(None);
                }
                (self.buf.len(), self.buf.len())
            }
            Framing::Chunked { joined, next } => {
                let Some(end) = join_chunks(&mut self.buf, joined, next)? else {
                    return self.more();
                };
                (*joined, end)
            }
        };
        self.consumed = end;
        Ok(Some(Found {
            status,
            head_end,
            body_end,
        }))
    }

    /// The answer is not whole yet: more bytes are needed, unless the connection has ended.
    fn more(&self) -> io::Result<Option<Found>> {
        if self.eof {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a full response",
            ))
        } else {
            Ok(None)
        }
    }
}

/// Where the first blank line at or after `at` in `buf` ends, once it has arrived: the end of
/// a head, or of a chunked body's trailers.
fn after_blank_line(buf: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let (line, next) = line_at(buf, at)?;
        if line.is_empty() {
            return Some(next);
        }
        at = next;
    }
}

/// The line that starts at `at` in `buf` (without its `\r\n` or `\n`) and where the next one
/// starts, if it has all arrived.
fn line_at(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let newline = buf.get(at..)?.iter().position(|&b| b == b'\n')?;
    let line = &buf[at..at + newline];
    Some((trim_cr(line), at + newline + 1))
}

fn trim_cr(line: &[u8]) -> &[u8] {
    let cr = line.iter().rev().take_while(|&&b| b == b'\r').count();
    &line[..line.len() - cr]
}

/// The lines of a head, without their line ends, up to the blank line.
fn lines(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    head.split(|&b| b == b'\n')
        .map(trim_cr)
        .take_while(|line| !line.is_empty())
}

/// The status code of the status line (`HTTP/1.1 200 OK`).
fn status(head: &[u8]) -> io::Result<u16> {
    let line = lines(head).next().unwrap_or_default();
    std::str::from_utf8(line)
        .ok()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            bad(format!(
                "bad status line {:?}",
                String::from_utf8_lossy(line)
            ))
        })
}

/// The headers of a head, names and values without the white space around them.
pub fn headers(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    lines(head).skip(1).filter_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
    })
}

/// The value of the first header named `name` (in any case).
pub fn header<'h>(head: &'h [u8], name: &str) -> Option<&'h [u8]> {
    headers(head)
        .find(|(key, _)| key.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, value)| value)
}

/// How the body of an answer with this head is framed (RFC 9112 section 6.3, as far as a
/// client of this server needs): chunks win over a length; an answer with neither runs to the
/// end of the connection, unless it is one that never has a body.
fn framing(head: &[u8], status: u16, bodyless: bool) -> io::Result<Framing> {
    if let Some(line) = lines(head).skip(1).find(|line| !line.contains(&b':')) {
        return Err(bad(format!(
            "bad header line {:?}",
            String::from_utf8_lossy(line)
        )));
    }
    let head_end = head.len();
    Ok(if bodyless {
        Framing::Length(0)
    } else if header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"))
    {
        Framing::Chunked {
            joined: head_end,
            next: head_end,
        }
    } else if let Some(length) = header(head, "content-length") {
        let length = std::str::from_utf8(length)
            .ok()
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| {
                bad(format!(
                    "bad content-length {:?}",
                    String::from_utf8_lossy(length)
                ))
            })?;
        Framing::Length(length)
    } else if status == 204 || status == 304 {
        Framing::Length(0)
    } else {
        Framing::UntilClose
    })
}

/// Joins the chunks that have arrived in place, right after those joined before (the body so
/// far ends at `joined`, the next size line starts at `next`). Once the last chunk and the
/// trailers have arrived, answers where the chunked body ends on the wire.
fn join_chunks(buf: &mut [u8], joined: &mut usize, next: &mut usize) -> io::Result<Option<usize>> {
    loop {
        let Some((size_line, data)) = line_at(buf, *next) else {
            return Ok(None);
        };
        let size = std::str::from_utf8(size_line)
            .ok()
            .and_then(|line| line.split(';').next())
            .and_then(|size| usize::from_str_radix(size.trim(), 16).ok())
            .ok_or_else(|| {
                bad(format!(
                    "bad chunk size {:?}",
                    String::from_utf8_lossy(size_line)
                ))
            })?;
        if size == 0 {
            // Trailers, then the blank line.
            return Ok(after_blank_line(buf, data));
        }
        let data = data..data.saturating_add(size);
        // The data, then the line end that closes the chunk.
        let Some((_, after)) = line_at(buf, data.end) else {
            return Ok(None);
        };
        buf.copy_within(data, *joined);
        *joined += size;
        *next = after;
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

#[cfg(test)]
mod tests {
    use super::Reader;
    use tokio::io::AsyncWriteExt as _;

    /// `wire` as a server would send it and then close, arriving `piece` bytes at a time:
    /// every answer read from it, as (status, head, body), until the first error.
    #[allow(
        dead_code,
        reason = "cargo builds the benchmark, which includes this file, with cfg(test) but \
                  without the test harness: the tests that call this are not built there"
    )]
    async fn read_all(wire: &[u8], piece: usize, bodyless: bool) -> Vec<(u16, String, String)> {
        let (mut client, mut server) = tokio::io::duplex(piece);
        let wire = wire.to_vec();
        let writer = tokio::spawn(async move {
            server.write_all(&wire).await.expect("write");
        });
        let mut reader = Reader::new(16);
        let mut answers = Vec::new();
        while let Ok(a) = reader.read(&mut client, bodyless).await {
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            answers.push((a.status, text(a.head), text(a.body)));
        }
        writer.await.expect("writer");
        answers
    }

    #[tokio::test]
    async fn answers_framed_every_way_are_read_whole_however_they_arrive() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\
            HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n\
            HTTP/1.1 204 No Content\r\n\r\n\
            HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n\
            HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
        for piece in [1, 7, 4096] {
            let bodies: Vec<(u16, String)> = read_all(wire, piece, false)
                .await
                .into_iter()
                .map(|(status, _, body)| (status, body))
                .collect();
            assert_eq!(
                bodies,
                [
                    (200, "hello".to_owned()),
                    (200, "abc0123456789abcdef".to_owned()),
                    (204, String::new()),
                    (404, String::new()),
                    (200, "until the end".to_owned()),
                ],
                "arriving {piece} bytes at a time"
            );
        }
    }

    #[tokio::test]
    async fn the_answer_to_a_head_ends_with_its_head() {
        let wire = b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 9\r\n\r\n\
            HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
        let answers = read_all(wire, 3, true).await;
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(answers[0].0, 302);
        assert!(answers[0].1.ends_with("Content-Length: 9\r\n\r\n"));
        assert_eq!(answers[0].2, "");
        assert_eq!(
            super::header(answers[0].1.as_bytes(), "location"),
            Some(&b"/x"[..])
        );
    }

    #[tokio::test]
    async fn a_malformed_or_cut_off_answer_is_an_error() {
        for (wire, kind) in [
            (&b"HTTP/1.1 OK\r\n\r\n"[..], std::io::ErrorKind::InvalidData),
            (
                b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
                std::io::ErrorKind::InvalidData,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                std::io::ErrorKind::InvalidData,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
                std::io::ErrorKind::InvalidData,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",
                std::io::ErrorKind::UnexpectedEof,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Le",
                std::io::ErrorKind::UnexpectedEof,
            ),
        ] {
            let mut reader = Reader::new(16);
            let mut stream = wire;
            let error = reader.read(&mut stream, false).await.err();
            assert_eq!(
                error.map(|e| e.kind()),
                Some(kind),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}
