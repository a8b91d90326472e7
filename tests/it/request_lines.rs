//! Request lines from the network, generated: no target may reach a panic. Odd targets (no
//! leading slash, `*`, absolute-form, authority-form, control bytes, `%` escapes, very long)
//! go over raw TCP to the real binary, started with `RUST_BACKTRACE=1` as many shells have it;
//! none may be answered `500`, and the log may hold no panic.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::support::{IO_TIMEOUT, TrackerProcess};

/// The status of the answer to `line` (a request line without its CRLF), sent on a fresh
/// connection with a `Host`; `None` when the server closed without answering.
fn status_of(addr: SocketAddr, method: &str, target: &[u8]) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut request = format!("{method} ").into_bytes();
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    stream.write_all(&request).ok()?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let status = answer.get(9..12)?;
    std::str::from_utf8(status).ok()?.parse().ok()
}

/// The targets every run sends, each a shape HTTP allows or a parser may stumble on.
fn known_targets() -> Vec<Vec<u8>> {
    let mut targets: Vec<Vec<u8>> = [
        "_bot",
        "*",
        "e",
        "events",
        "telegram/default",
        "l/abc",
        "admin/",
        "http://t/e",
        "http://t",
        "https://t:443/l/x?y=1",
        "t:80",
        "t",
        "[::1]:80",
        "//e",
        "/%",
        "/%zz",
        "/%00",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..",
        "?a=1",
        "#frag",
        "/l/%ff%fe",
        "/telegram/%0d%0aforged",
        "/conversions/%1b[31m/x.csv",
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect();
    targets.push(vec![b'a'; 9000]);
    targets.push([b"/".as_slice(), &[b'a'; 9000]].concat());
    targets.push(b"/\x01".to_vec());
    targets.push(b"/\x7f".to_vec());
    targets.push(b"x\x1b[2J".to_vec());
    targets
}

/// A target made of the pieces parsers treat specially.
fn generated_target() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"/".to_vec()),
        Just(b"*".to_vec()),
        Just(b":".to_vec()),
        Just(b"@".to_vec()),
        Just(b"?".to_vec()),
        Just(b"#".to_vec()),
        Just(b"%".to_vec()),
        Just(b"%2f".to_vec()),
        Just(b"..".to_vec()),
        Just(b"http://".to_vec()),
        Just(b"[::1]".to_vec()),
        Just(b"_bot".to_vec()),
        Just(b"telegram".to_vec()),
        Just(b"conversions".to_vec()),
        (0u8..=255).prop_map(|b| vec![b]),
        "[a-z0-9]{1,12}".prop_map(String::into_bytes),
    ];
    proptest::collection::vec(piece, 1..12).prop_map(|pieces| pieces.concat())
}

#[test]
fn no_request_line_from_the_network_reaches_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let process = TrackerProcess::start_with_env(dir.path(), &[("RUST_BACKTRACE", "1")]);
    let addr = process.addr;
    for target in known_targets() {
        for method in ["GET", "POST", "OPTIONS"] {
            let status = status_of(addr, method, &target);
            assert_ne!(
                status,
                Some(500),
                "{method} {:?} answered 500",
                String::from_utf8_lossy(&target)
            );
        }
    }
    assert_eq!(status_of(addr, "GET", b"_bot"), Some(400));
    assert_eq!(status_of(addr, "OPTIONS", b"*"), Some(400));
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&generated_target(), |target| {
            let status = status_of(addr, "GET", &target);
            prop_assert_ne!(status, Some(500), "{:?}", String::from_utf8_lossy(&target));
            Ok(())
        })
        .unwrap();
    let log = process.stderr();
    assert!(
        !log.contains("panicked") && !log.contains("stack backtrace"),
        "a request line reached a panic:\n{}",
        &log[..log.len().min(4000)]
    );
}
