//! What the CLI's tests share beside `hoop_test_support`: std clients whose exchanges survive
//! an injected reset (each runs through `resets::retry` on a fresh connection), and the check
//! of a bench record's errors under resets.
//!
//! Under a fault plan with `econnreset`, the `hoop` server a test starts may reset (close) any
//! connection; these clients reconnect and ask again, as a production client does. Wrong
//! bytes are never retried, and without injected resets the first reset fails the test.

// Each test file uses a part of this module.
#![allow(dead_code)]

use hoop_test_support::resets;
use hoop_test_support::ReadRetry as _;
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Output, Stdio};

/// The std client connection (timeouts on everything, `TCP_NODELAY`): the HTTP tests' own,
/// one copy.
pub use hoop_test_support::http::try_connect;

/// Runs `exchange` on a fresh connection to `addr` until it succeeds, reconnecting after a
/// reset while resets are injected (see `resets::retry`); any other error fails the test.
pub fn exchange<T>(
    what: &str,
    addr: SocketAddr,
    mut exchange: impl FnMut(&mut TcpStream) -> io::Result<T>,
) -> T {
    resets::retry(what, |_| {
        let mut s = try_connect(addr)?;
        exchange(&mut s)
    })
}

/// Sends `payload` on `s` (from a second thread, so neither side can block the other) and
/// reads the same number of bytes back: an end of stream first is `UnexpectedEof`, which
/// `resets::is_reset` retries.
pub fn echo_on(s: &TcpStream, payload: &[u8]) -> io::Result<Vec<u8>> {
    let mut writer = s.try_clone()?;
    std::thread::scope(|sc| {
        let w = sc.spawn(move || writer.write_all(payload));
        let mut back = vec![0u8; payload.len()];
        let read = (&*s).read_exact(&mut back);
        if read.is_err() {
            // The writer may wait on a peer that is gone: end it now.
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let wrote = w.join().expect("writer thread");
        read?;
        wrote?;
        Ok(back)
    })
}

/// Wrong bytes as an error `resets::retry` never retries.
pub fn wrong(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// One echo of `payload`, checked byte for byte as it comes back; fails the test unless it
/// all comes back intact (see [`echo_resuming`]).
pub fn check_echo(addr: SocketAddr, payload: &[u8]) {
    echo_resuming(
        &format!("echo of {} bytes", payload.len()),
        addr,
        payload,
        false,
    );
}

/// Echoes `payload` on a connection to `addr`, checking each byte as it comes back; with
/// `half_close`, the client shuts its side down after the payload and expects end of stream
/// right after the whole echo. After a reset (while resets are injected) it reconnects and
/// goes on from the first byte not yet echoed, as a client resuming a transfer does (an echo
/// server keeps no state between bytes): a large payload then needs no run of luck long enough
/// for all of it. Bytes that differ fail the test at once; so does a reset without injected
/// resets.
pub fn echo_resuming(what: &str, addr: SocketAddr, payload: &[u8], half_close: bool) {
    let mut done = 0;
    exchange(what, addr, |s| {
        let rest = &payload[done..];
        let mut writer = s.try_clone()?;
        let mut got = 0;
        let (read, wrote) = std::thread::scope(|sc| {
            let w = sc.spawn(move || {
                writer.write_all(rest)?;
                if half_close {
                    writer.shutdown(std::net::Shutdown::Write)?;
                }
                Ok::<_, io::Error>(())
            });
            let read = read_echo(s, rest, half_close, &mut got);
            if read.is_err() {
                // The writer may wait on a peer that is gone: end it now.
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            (read, w.join().expect("writer thread"))
        });
        done += got;
        read?;
        wrote
    });
}

/// Reads the echo of `rest` from `s`, counting verified bytes in `got`; with `half_close`,
/// then expects end of stream.
fn read_echo(s: &TcpStream, rest: &[u8], half_close: bool, got: &mut usize) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let want = if *got < rest.len() {
            buf.len().min(rest.len() - *got)
        } else if half_close {
            buf.len()
        } else {
            return Ok(());
        };
        let n = match (&*s).read_retry(&mut buf[..want])? {
            0 if *got == rest.len() => return Ok(()),
            0 => return Err(resets::closed_early("the whole echo")),
            n => n,
        };
        if *got == rest.len() {
            return Err(wrong(format!("{n} bytes after the whole echo")));
        }
        if buf[..n] != rest[*got..*got + n] {
            return Err(wrong(format!(
                "the echo differs within bytes {}..{} of the rest",
                *got,
                *got + n
            )));
        }
        *got += n;
    }
}

/// One HTTP response: its status, its head (as text) and its body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The head, status line and headers, as sent.
    pub head: String,
    /// The body (empty for HEAD and 304).
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(": ")?;
            k.eq_ignore_ascii_case(name).then_some(v)
        })
    }
}

/// Reads one response: the head, then `Content-Length` bytes unless `head_only` or 304. An
/// end of stream before the whole response is `resets::closed_early` (retried after resets);
/// a malformed head is an error never retried.
pub fn read_response(s: &mut TcpStream, head_only: bool) -> io::Result<Response> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read_retry(&mut byte)? == 0 {
            return Err(resets::closed_early("the whole response head"));
        }
        head.push(byte[0]);
        if head.len() >= 64 * 1024 {
            return Err(wrong("response head too long"));
        }
    }
    let head = String::from_utf8(head).map_err(|_| wrong("a head that is not UTF-8"))?;
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| wrong(format!("bad status line: {head:?}")))?;
    let mut r = Response {
        status,
        head,
        body: Vec::new(),
    };
    if !head_only && status != 304 {
        let len: usize = r
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| wrong(format!("no Content-Length: {:?}", r.head)))?;
        r.body.resize(len, 0);
        s.read_exact(&mut r.body)?;
    }
    Ok(r)
}

/// Sends `req` on `s` and reads the response.
pub fn ask(s: &mut TcpStream, req: &str) -> io::Result<Response> {
    s.write_all(req.as_bytes())?;
    read_response(s, req.starts_with("HEAD "))
}

/// `req` on a fresh connection to `addr`, retried after resets.
pub fn ask_fresh(addr: SocketAddr, req: &str) -> Response {
    let what = req.lines().next().unwrap_or(req).to_owned();
    exchange(&what, addr, |s| ask(s, req))
}

/// Checks a bench record's `errors`: none, or (only while resets are injected) none but
/// resets, which the record counts apart as `reconnects`; without injected resets there are
/// no reconnects either.
pub fn assert_only_reset_errors(v: &serde_json::Value) {
    let errors = v["errors"]
        .as_u64()
        .unwrap_or_else(|| panic!("errors: {v}"));
    let reconnects = v["reconnects"]
        .as_u64()
        .unwrap_or_else(|| panic!("reconnects: {v}"));
    assert_eq!(errors, 0, "{v}");
    if !resets::injected() {
        assert_eq!(reconnects, 0, "a reset without injected resets: {v}");
    }
}

/// The address of a server the test started, from its first stdout line
/// (`listening on IP:PORT`), waited for at most `within`; the rest of its stdout is drained
/// so the server never blocks on a full pipe.
pub fn listening_addr(
    stdout: impl Read + Send + 'static,
    within: std::time::Duration,
) -> SocketAddr {
    let line = hoop_test_support::first_line(stdout)
        .recv_timeout(within)
        .expect("no `listening on` line in time")
        .expect("read stdout");
    line.strip_prefix("listening on ")
        .and_then(|s| s.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("IP:PORT")
}

/// `hoop ARGS` run to its end with stdin closed: its exit status and output.
pub fn run_hoop(args: &[&str]) -> Output {
    hoop_test_support::command(env!("CARGO_BIN_EXE_hoop"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Starts `cmd`, a server: stdin closed, stdout piped (its `listening on` line comes first:
/// [`listening_addr`]), stderr as given.
pub fn spawn_server(cmd: &mut Command, stderr: Stdio) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn hoop")
}

/// A command line refused as it should be: exit status 1, `needle` on stderr, no panic.
pub fn assert_refused(out: &Output, args: &[&str], needle: &str) {
    let err = hoop_test_support::stderr_text(out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// The one JSON line of a bench run against one server with `--json`.
pub fn one_record(out: &Output) -> Value {
    let lines = hoop_test_support::json_lines(out);
    assert_eq!(
        lines.len(),
        1,
        "one measurement; stderr: {}",
        hoop_test_support::stderr_text(out)
    );
    lines[0].clone()
}

/// Exit status 1: the run found what it was to find (stderr says what).
pub fn assert_failed(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        hoop_test_support::stderr_text(out)
    );
}

/// A `hoop serve` child, killed on drop, and the address its first line gave.
pub struct Served {
    /// The server process.
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Served {
    /// Starts `cmd` (stderr as given) and waits up to `within` for its `listening on` line.
    pub fn start(cmd: &mut Command, stderr: Stdio, within: std::time::Duration) -> Served {
        let mut child = spawn_server(cmd, stderr);
        let stdout = child.stdout.take().expect("piped stdout");
        // Killed on drop, even if the first line never comes.
        let mut served = Served {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        served.addr = listening_addr(stdout, within);
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Exit status 0; returns stderr (the human text with `--json`).
pub fn assert_success(out: &Output) -> String {
    let err = hoop_test_support::stderr_text(out);
    assert!(out.status.success(), "exit {:?}: {err}", out.status);
    err
}

/// The JSON lines of stdout, each parsed (a line that is not JSON fails the test).
pub fn records(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}
