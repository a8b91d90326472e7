//! `examples/webhook_receiver.rs`, run as the process a reader copies: a `Content-Length` past
//! its bound is answered `413` at once, before any body is read or room made for it (a length
//! of `u64::MAX`, which the receiver could never allocate, is answered and the receiver goes
//! on); one just inside is read, and its missing signature answered `401`.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::IO_TIMEOUT;

/// The example's bound on a body (`MAX_BODY_BYTES` there).
const MAX_BODY_BYTES: usize = 64 * 1024;

/// The example's binary beside this test binary's, built first if `cargo test` was told to
/// build only the tests.
fn receiver_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().unwrap().parent().unwrap();
    let binary = profile.join("examples").join("webhook_receiver");
    if !binary.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--example", "webhook_receiver"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --example webhook_receiver");
        assert!(status.success(), "the example does not build");
    }
    binary
}

/// The receiver on a free loopback port, killed when dropped.
struct Receiver {
    child: Child,
    addr: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Receiver {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let child = Command::new(receiver_binary())
        .arg(&addr)
        .env(
            "TRACKER_SIGNING_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the example");
    let deadline = Instant::now() + IO_TIMEOUT;
    while TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "the example did not listen");
        // Waiting for another process to listen; not a time rule of the tracker.
        std::thread::sleep(Duration::from_millis(20));
    }
    Receiver { child, addr }
}

/// Sends a `POST` with `length` as its `Content-Length` and `body` (possibly shorter: the
/// rest never comes) and answers the status line, read within a few seconds.
fn status_of(receiver: &Receiver, length: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(&receiver.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn the_example_receiver_refuses_a_large_body_before_reading_or_allocating_it() {
    let receiver = start();
    // Just outside, with no body sent: answered without waiting for one.
    let over = (MAX_BODY_BYTES + 1).to_string();
    assert_eq!(
        status_of(&receiver, &over, b""),
        "HTTP/1.1 413 Content Too Large"
    );
    // A length no machine could allocate: answered, and the receiver goes on.
    assert_eq!(
        status_of(&receiver, &u64::MAX.to_string(), b""),
        "HTTP/1.1 413 Content Too Large"
    );
    // Just inside: read whole, and refused for its missing signature.
    let inside = vec![b'x'; MAX_BODY_BYTES];
    assert_eq!(
        status_of(&receiver, &MAX_BODY_BYTES.to_string(), &inside),
        "HTTP/1.1 401 Unauthorized"
    );
}
