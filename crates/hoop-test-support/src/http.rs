//! What the HTTP tests share, std only: a root made for the test (files of every kind, a
//! secret outside it, symlinks in and out), deterministic bytes, and a raw client with
//! timeouts that reads one response at a time.

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
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
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
}

/// Reads one response: the head, then `Content-Length` bytes unless `head_only` or 304.
pub fn read_response(s: &mut TcpStream, head_only: bool) -> Response {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!(
                "connection ended in a response head ({other:?}) after {:?}",
                String::from_utf8_lossy(&head)
            ),
        }
        assert!(head.len() < 64 * 1024, "response head too long");
    }
    let text = String::from_utf8(head).expect("ASCII head");
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
    let mut body = Vec::new();
    if !head_only && status != 304 {
        let len: usize = headers
            .get("content-length")
            .expect("Content-Length")
            .parse()
            .unwrap();
        body.resize(len, 0);
        s.read_exact(&mut body).expect("the whole body");
    }
    Response {
        status,
        headers,
        body,
    }
}

/// The server closed `s`: end of stream or a reset.
pub fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
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

/// GET (or HEAD) `path` with extra header lines `headers` (each ending in CRLF).
pub fn ask_with(s: &mut TcpStream, method: &str, path: &str, headers: &str) -> Response {
    ask(
        s,
        &format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n"),
    )
}
