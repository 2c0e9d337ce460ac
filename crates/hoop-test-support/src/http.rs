//! What the HTTP tests share, std only: a root made for the test (files of every kind, a
//! secret outside it, symlinks in and out), deterministic bytes, and a raw client with
//! timeouts that reads one response at a time.
//!
//! Under injected resets (`HOOP_FAULTS` with `econnreset`) the server closes a connection
//! as on a real reset, so a client sees `ECONNRESET`, `EPIPE` or an end of stream before the
//! whole answer. The `try_` functions return those (an early end as
//! [`closed_early`](crate::resets::closed_early)) for [`resets::retry`](crate::resets::retry)
//! to run the exchange again on a new connection; [`exchange`], [`exchange_until_closed`]
//! and [`Client`] do that themselves. The functions without `try_` fail the test on them.

use crate::ReadRetry as _;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use crate::TempDir;

/// How long a client read or write may wait.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Deterministic bytes (xorshift64*), different for each seed.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    v
}

/// What `outside/secret.txt` holds: no response may ever carry it.
pub const SECRET: &str = "the secret outside the root";

/// `base/www` (the root) and `base/outside/secret.txt` next to it.
pub fn make_root(name: &str) -> (TempDir, PathBuf) {
    let base = TempDir::new("http-test", name);
    let root = base.0.join("www");
    let w = |p: &str, data: &[u8]| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    };
    w("index.html", b"<h1>home</h1>\n");
    w("a.txt", b"hello, world\n");
    w("b.txt", b"second file\n");
    w("text..txt", b"two dots\n");
    w(".hidden", b"dotfile\n");
    w(".git/config", b"dotdir\n");
    w("docs/index.html", b"docs index\n");
    std::fs::create_dir_all(root.join("empty")).unwrap();
    for ext in [
        "html", "css", "js", "jpg", "jpeg", "png", "gif", "svg", "swf", "txt", "json", "wasm",
        "pdf", "xyz",
    ] {
        w(&format!("types/f.{ext}"), b"x");
    }
    std::fs::create_dir_all(base.0.join("outside")).unwrap();
    std::fs::write(base.0.join("outside/secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
    std::os::unix::fs::symlink(base.0.join("outside"), root.join("out")).unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", root.join("secret-link")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("inside-link.txt")).unwrap();
    (base, root)
}

/// A client connection with read and write timeouts and `TCP_NODELAY`.
pub fn connect(addr: SocketAddr) -> TcpStream {
    try_connect(addr).expect("connect")
}

/// [`connect`], with its error returned (a refused connection is not a reset: a retry fails
/// on it).
pub fn try_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// One response: its status, its headers (names in lower case) and its body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header name (lower case) to value.
    pub headers: HashMap<String, String>,
    /// The body (empty for HEAD and 304).
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Whether the server said it closes the connection after this response.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Reads one response: the head, then `Content-Length` bytes unless `head_only` or 304.
pub fn read_response(s: &mut TcpStream, head_only: bool) -> Response {
    try_read_response(s, head_only)
        .unwrap_or_else(|e| panic!("connection ended in a response: {e}"))
}

/// [`read_response`], with how the connection ended returned: the read's error (a reset, a
/// timeout), or an end of stream before the whole response as
/// [`closed_early`](crate::resets::closed_early) (which [`resets::retry`](crate::resets::retry)
/// retries while resets are injected). Bytes that are not a response still fail the test
/// here: a wrong answer is never retried.
pub fn try_read_response(s: &mut impl Read, head_only: bool) -> io::Result<Response> {
    let head = try_read_head(s)?;
    let mut r = parse_head(&head);
    if !head_only && r.status != 304 {
        let len: usize = r
            .headers
            .get("content-length")
            .expect("Content-Length")
            .parse()
            .unwrap();
        r.body.resize(len, 0);
        read_fully(s, &mut r.body, "the whole body")?;
    }
    Ok(r)
}

/// Reads one response whatever its framing: its body by `Content-Length`, chunked (no
/// trailers), or none; interim responses (`100 Continue`) are skipped. For a server that
/// answers with a service's bodies, whose length may be unknown. How the connection ended is
/// returned as in [`try_read_response`]; bad chunked framing fails the test.
pub fn try_read_any(s: &mut impl Read) -> io::Result<Response> {
    let mut r = parse_head(&try_read_head(s)?);
    while r.status == 100 {
        r = parse_head(&try_read_head(s)?);
    }
    if let Some(len) = r.header("content-length") {
        let len: usize = len.parse().unwrap();
        r.body.resize(len, 0);
        read_fully(s, &mut r.body, "the whole body")?;
    } else if r.header("transfer-encoding") == Some("chunked") {
        loop {
            let line = read_line(s)?;
            let size = usize::from_str_radix(line.trim(), 16).expect("a chunk size");
            if size == 0 {
                assert_eq!(read_line(s)?, "", "no trailers");
                break;
            }
            let at = r.body.len();
            r.body.resize(at + size, 0);
            read_fully(s, &mut r.body[at..], "a chunk")?;
            assert_eq!(read_line(s)?, "", "CRLF after a chunk");
        }
    }
    Ok(r)
}

/// One CRLF-ended line of a chunked body, without its CRLF, read byte by byte.
fn read_line(s: &mut impl Read) -> io::Result<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < 1024 {
        if s.read_retry(&mut b)? == 0 {
            return Err(crate::resets::closed_early("a chunk line"));
        }
        if b[0] == b'\n' {
            break;
        }
        line.push(b[0]);
    }
    assert_eq!(line.pop(), Some(b'\r'), "a line ends with CRLF");
    Ok(String::from_utf8(line).unwrap())
}

/// Reads the head of one response, byte by byte (so nothing after it is consumed), up to
/// and with its blank line.
pub fn try_read_head(s: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read_retry(&mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) => {
                return Err(crate::resets::closed_early(&format!(
                    "the end of a response head (after {:?})",
                    String::from_utf8_lossy(&head)
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        assert!(head.len() < 64 * 1024, "response head too long");
    }
    Ok(head)
}

/// `buf.len()` bytes, or [`closed_early`](crate::resets::closed_early) (naming `what`) at an
/// end of stream before them.
pub fn read_fully(s: &mut impl Read, buf: &mut [u8], what: &str) -> io::Result<()> {
    s.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            crate::resets::closed_early(what)
        } else {
            e
        }
    })
}

/// A response head (status line, headers, blank line), parsed; the body is left empty. Bytes
/// that are not one fail the test.
pub fn parse_head(head: &[u8]) -> Response {
    let text = std::str::from_utf8(head).expect("ASCII head");
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
    let status: u16 = status_line[9..12].parse().unwrap();
    let mut headers = HashMap::new();
    for l in lines.filter(|l| !l.is_empty()) {
        let (k, v) = l
            .split_once(": ")
            .unwrap_or_else(|| panic!("bad header {l:?}"));
        assert!(
            headers
                .insert(k.to_ascii_lowercase(), v.to_string())
                .is_none(),
            "duplicate header {k}"
        );
    }
    Response {
        status,
        headers,
        body: Vec::new(),
    }
}

/// The server closed `s`: end of stream or a reset.
pub fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    match s.read_retry(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close, got {other:?}"),
    }
}

/// Sends `req` on `s` and reads the response.
pub fn ask(s: &mut TcpStream, req: &str) -> Response {
    s.write_all(req.as_bytes()).unwrap();
    read_response(s, req.starts_with("HEAD "))
}

/// [`ask`], with a reset or an early end of stream returned (see [`try_read_response`]).
pub fn try_ask(s: &mut TcpStream, req: &str) -> io::Result<Response> {
    s.write_all(req.as_bytes())?;
    try_read_response(s, req.starts_with("HEAD "))
}

/// GET (or HEAD) `path` with extra header lines `headers` (each ending in CRLF).
pub fn ask_with(s: &mut TcpStream, method: &str, path: &str, headers: &str) -> Response {
    ask(s, &request(method, path, headers))
}

/// The request `ask_with` sends.
pub fn request(method: &str, path: &str, headers: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n")
}

/// The first line of `req`, to name an exchange in a failure or a retry: printable (a control
/// byte is written `\xNN`: the line goes to a log that tools read as text) and at most 100
/// characters.
fn first_line(req: &str) -> String {
    let line = req.split("\r\n").next().unwrap_or(req);
    let mut out = String::new();
    for c in line.chars().take(100) {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    if line.chars().count() > 100 {
        out.push_str("...");
    }
    out
}

/// One request on a fresh connection, retried on a new one while a reset ends it (see
/// [`resets::retry`](crate::resets::retry)); `req` must be one a client may repeat.
pub fn exchange(addr: SocketAddr, req: &str) -> Response {
    crate::resets::retry(&first_line(req), |_| try_ask(&mut try_connect(addr)?, req))
}

/// A client that survives resets: it keeps one connection open between requests (keep-alive),
/// and when a reset or an early end of stream ends an exchange, it makes a new connection and
/// sends the request again ([`resets::retry`](crate::resets::retry): only while resets are
/// injected, bounded and counted). After an answer that closes the connection
/// (`Connection: close`) the next request goes on a new connection. Every request it sends
/// must be one a client may repeat (GET, HEAD, or one the server refuses).
pub struct Client {
    /// The server's address.
    pub addr: SocketAddr,
    /// The open connection, if any.
    stream: Option<TcpStream>,
    /// Whether the last answer closed the connection.
    closing: bool,
    /// Connections made after a reset ended an exchange.
    retries: u32,
}

impl Client {
    /// A client of `addr`; it connects at its first request.
    pub fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            stream: None,
            closing: false,
            retries: 0,
        }
    }

    /// Sends `req` and reads its answer (see the type's docs).
    pub fn ask(&mut self, req: &str) -> Response {
        let r = crate::resets::retry(&first_line(req), |attempt| {
            if attempt > 0 {
                self.retries += 1;
                self.stream = None;
            }
            if self.closing {
                self.stream = None;
                self.closing = false;
            }
            let s = match &mut self.stream {
                Some(s) => s,
                None => self.stream.insert(try_connect(self.addr)?),
            };
            try_ask(s, req)
        });
        self.closing = r.closes();
        r
    }

    /// GET (or HEAD) `path` with extra header lines `headers` (each ending in CRLF).
    pub fn ask_with(&mut self, method: &str, path: &str, headers: &str) -> Response {
        self.ask(&request(method, path, headers))
    }

    /// GET `path`.
    pub fn get(&mut self, path: &str) -> Response {
        self.ask_with("GET", path, "")
    }

    /// After an answer that closes the connection: the server closed it.
    pub fn assert_closed(&mut self) {
        assert!(self.closing, "the last answer did not close the connection");
        let mut s = self.stream.take().expect("a connection");
        self.closing = false;
        assert_closed(&mut s);
    }

    /// How many exchanges needed a new connection after a reset, so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

/// Most bytes [`try_read_to_close`] reads.
const MAX_TO_CLOSE: usize = 1 << 20;

/// Reads one response and what follows it until the server closes the connection (after an
/// answer that closes it): the response and the bytes after its body (at most 1 MiB in all).
/// A reset once the whole response is in counts as the close (a server that closes with
/// request bytes unread resets the connection); an end of stream or an error before the
/// whole response is returned (an end of stream as
/// [`closed_early`](crate::resets::closed_early)).
pub fn try_read_to_close(s: &mut impl Read, head_only: bool) -> io::Result<(Response, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut ended = None;
    while got.len() < MAX_TO_CLOSE {
        match s.read_retry(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => {
                ended = Some(e);
                break;
            }
        }
    }
    match (split_response(&got, head_only), ended) {
        (Some((r, end)), None) => Ok((r, got[end..].to_vec())),
        (Some((r, end)), Some(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
            Ok((r, got[end..].to_vec()))
        }
        (_, Some(e)) => Err(e),
        (None, None) => Err(crate::resets::closed_early(&format!(
            "a whole response (after {} bytes)",
            got.len()
        ))),
    }
}

/// The response at the start of `got` and where it ends, if all of it is there.
fn split_response(got: &[u8], head_only: bool) -> Option<(Response, usize)> {
    let end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut r = parse_head(&got[..end]);
    let len = if head_only || r.status == 304 {
        0
    } else {
        r.header("content-length")
            .map_or(0, |v| v.parse().expect("a Content-Length"))
    };
    let body = got.get(end..end + len)?;
    r.body = body.to_vec();
    Some((r, end + len))
}

/// Sends `req` on a fresh connection and reads until the server closes it
/// ([`try_read_to_close`]), on a new connection again while a reset ends it (see
/// [`resets::retry`](crate::resets::retry)); `req` must be one a client may repeat.
pub fn exchange_until_closed(addr: SocketAddr, req: &[u8]) -> (Response, Vec<u8>) {
    let text = String::from_utf8_lossy(req);
    crate::resets::retry(&first_line(&text), |_| {
        let mut s = try_connect(addr)?;
        s.write_all(req)?;
        try_read_to_close(&mut s, req.starts_with(b"HEAD "))
    })
}
