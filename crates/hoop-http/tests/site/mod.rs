//! What the behaviour tests of the server share (`headers.rs`, `traversal.rs`, `limits.rs`,
//! `close_wait.rs`, `bodies.rs`, `pipelining.rs`, `precompressed.rs`, `autoindex.rs`): a root
//! made for the test, the server running in this process on a thread of its own
//! ([`TestServer`]: `serve::spawn_server` on 127.0.0.1:0, on the driver the test names,
//! stopped by its token when dropped), and raw std clients.
//!
//! Every client read and write has a timeout; every loop is bounded in count.

// Each test file uses a part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, TryRecvError};
use std::time::Duration;

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{Config, ServeStats, Server};
use hoop_test_support as common;

use crate::serve::{spawn_server, THREAD_TIMEOUT};

pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the root =====

pub use hoop_test_support::TempDir;

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

// ===== the server =====

/// A server of `root` on a thread of its own, serving 127.0.0.1:0 on one driver; cancelling
/// its token (on drop, or [`stop`](TestServer::stop)) stops it gracefully and the thread
/// ends with the runtime dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    token: CancellationToken,
    done: mpsc::Receiver<ServeStats>,
}

impl TestServer {
    /// The server with the defaults of `hoop serve http` (those of [`Config::default`]).
    /// `None` (said on stderr) where io_uring cannot be set up.
    pub fn start(kind: DriverKind, root: &Path) -> Option<TestServer> {
        TestServer::start_with(kind, root, Config::default())
    }

    /// The server with `cfg`.
    pub fn start_with(kind: DriverKind, root: &Path, cfg: Config) -> Option<TestServer> {
        // Carried to the server thread.
        let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
        let server = Server::new(root, cfg).expect("a server of the test root");
        let token = CancellationToken::new();
        let (addr, done) = spawn_server(kind, server, token.clone())?;
        Some(TestServer { addr, token, done })
    }

    /// Fails unless the server is still serving (it has not returned, nor panicked).
    pub fn assert_running(&self) {
        match self.done.try_recv() {
            Err(TryRecvError::Empty) => {}
            Ok(stats) => panic!("the server stopped: {stats:?}"),
            Err(TryRecvError::Disconnected) => panic!("the server thread ended"),
        }
    }

    pub fn connect(&self) -> TcpStream {
        connect(self.addr)
    }

    /// One request on a fresh connection.
    pub fn get(&self, path: &str) -> Response {
        let mut s = self.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        read_response(&mut s, false)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.token.cancel();
        // Its runtime is gone once it sent what `serve` returned (or it panicked).
        let _ = self.done.recv_timeout(THREAD_TIMEOUT);
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// The server's behaviour with a setting only the environment gives, read once per process or
/// per serving thread (`HOOP_HTTP_NO_OPENAT2`, `HOOP_HTTP_RING_READERS_MAX`): test `name` runs
/// again in a child process of this test binary with `env` set, where [`in_child`] is true.
pub fn run_in_child_with(name: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let out = common::command(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child with {env:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // A skipped driver stays visible, past the harness's capture.
    for line in stderr.lines().filter(|l| l.contains("SKIPPED")) {
        let _ = writeln!(io::stderr(), "{name}: {line}");
    }
}

/// Set in the child processes [`run_in_child_with`] starts.
const CHILD_ENV: &str = "HOOP_HTTP_TEST_CHILD";

/// Whether this process is a child started by [`run_in_child_with`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

// ===== responses =====

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
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
