//! What the stand-ins on loopback read (the Bot API's in `channel.rs`, the destinations'
//! receiver in `deliveries.rs`): one HTTP/1.1 request at a time off a keep-alive connection.

use std::io::BufRead;

/// A request as a stand-in needs it.
pub struct Request {
    /// The request line, `POST /path HTTP/1.1` and its line end.
    pub line: String,
    /// Each header as sent, its value trimmed.
    pub headers: Vec<(String, String)>,
    /// `Content-Length` bytes of body (none without the header).
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (in any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The next request off `read`: its line, its headers up to the blank line, then its body;
/// `None` once the connection ends or breaks, also part way through a request.
pub fn read(read: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if read.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let (mut headers, mut length) = (Vec::new(), 0);
    loop {
        let mut header = String::new();
        match read.read_line(&mut header) {
            Ok(0) | Err(_) => return None,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {
                if let Some((name, value)) = header.split_once(':') {
                    let value = value.trim();
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.parse().unwrap_or(0);
                    }
                    headers.push((name.to_owned(), value.to_owned()));
                }
            }
        }
    }
    let mut body = vec![0; length];
    read.read_exact(&mut body).ok()?;
    Some(Request {
        line,
        headers,
        body,
    })
}
