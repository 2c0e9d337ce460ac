//! End-to-end tests of `hoop serve http`: the real binary on 127.0.0.1:0, a root made for the
//! test, raw std clients. Every rule runs on both drivers (`auto`, which is io_uring where the
//! kernel allows it, and `epoll`).
//!
//! Every server is a child process owned by a guard that kills it on drop; every client read
//! and write has a timeout; every loop is bounded in count.

use hoop_test_support as common;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(20);
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ===== the root =====

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("hoop-http-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic bytes (xorshift64*), different for each seed.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
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

const SECRET: &str = "the secret outside the root";

/// `base/www` (the root) and `base/outside/secret.txt` next to it.
fn make_root(name: &str) -> (TempDir, PathBuf) {
    let base = TempDir::new(name);
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

// ===== the server process =====

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(root: &Path, extra: &[&str]) -> Server {
        Server::start_env(root, extra, &[])
    }

    fn start_env(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
        let mut cmd = common::command(env!("CARGO_BIN_EXE_hoop"));
        cmd.args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn hoop");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let res = reader.read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
            // Keep draining (access log lines) so the server never blocks on a full pipe.
            let _ = io::copy(&mut reader, &mut io::sink());
        });
        let line = rx
            .recv_timeout(START_TIMEOUT)
            .expect("no `listening on` line in time")
            .expect("read stdout");
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        server.addr = addr.parse().expect("IP:PORT");
        server
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child, not reaped yet.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn assert_running(&mut self) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(status.is_none(), "server exited: {status:?}");
    }

    /// Open fds of the server process.
    fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn connect(&self) -> TcpStream {
        connect(self.addr)
    }

    /// One request on a fresh connection.
    fn get(&self, path: &str) -> Response {
        let mut s = self.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        read_response(&mut s, false)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

// ===== responses =====

#[derive(Debug)]
struct Response {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// Reads one response: the head, then `Content-Length` bytes unless `head_only` or 304.
fn read_response(s: &mut TcpStream, head_only: bool) -> Response {
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
fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close, got {other:?}"),
    }
}

/// Sends `req` on `s` and reads the response.
fn ask(s: &mut TcpStream, req: &str) -> Response {
    s.write_all(req.as_bytes()).unwrap();
    read_response(s, req.starts_with("HEAD "))
}

// ===== header rules =====

fn header_rules(driver: &str) {
    let (_base, root) = make_root(&format!("rules-{driver}"));
    let server = Server::start(&root, &["--driver", driver]);
    let mut s = server.connect();

    let r = ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello, world\n");
    assert_eq!(r.header("content-length"), Some("13"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("server"), Some("hoop"));
    assert_eq!(r.header("connection"), Some("keep-alive"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
    let lm = r
        .header("last-modified")
        .expect("Last-Modified")
        .to_string();
    let etag = r.header("etag").expect("ETag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag {etag}"
    );

    // HEAD: the same head, no body; the connection goes on.
    let h = ask(&mut s, "HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(h.status, 200);
    for k in ["content-length", "content-type", "etag", "last-modified"] {
        assert_eq!(h.header(k), r.header(k), "{k}");
    }

    // Conditionals.
    let c = ask(
        &mut s,
        &format!("GET /a.txt HTTP/1.1\r\nIf-None-Match: {etag}\r\n\r\n"),
    );
    assert_eq!(c.status, 304);
    assert!(c.body.is_empty());
    assert_eq!(c.header("etag"), Some(etag.as_str()));
    let c = ask(
        &mut s,
        "GET /a.txt HTTP/1.1\r\nIf-None-Match: \"other\"\r\n\r\n",
    );
    assert_eq!(c.status, 200);
    let c = ask(
        &mut s,
        &format!("GET /a.txt HTTP/1.1\r\nIf-Modified-Since: {lm}\r\n\r\n"),
    );
    assert_eq!(c.status, 304);
    let old = "Thu, 01 Jan 1970 00:00:01 GMT";
    let c = ask(
        &mut s,
        &format!("GET /a.txt HTTP/1.1\r\nIf-Modified-Since: {old}\r\n\r\n"),
    );
    assert_eq!(c.status, 200);

    // Ranges.
    let range =
        |s: &mut TcpStream, r: &str| ask(s, &format!("GET /a.txt HTTP/1.1\r\nRange: {r}\r\n\r\n"));
    let p = range(&mut s, "bytes=0-4");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"hello"[..]));
    assert_eq!(p.header("content-range"), Some("bytes 0-4/13"));
    let p = range(&mut s, "bytes=-6");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"world\n"[..]));
    assert_eq!(p.header("content-range"), Some("bytes 7-12/13"));
    let p = range(&mut s, "bytes=7-");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"world\n"[..]));
    let p = range(&mut s, "bytes=7-1000");
    assert_eq!(p.header("content-range"), Some("bytes 7-12/13"));
    let p = range(&mut s, "bytes=0-1,3-4");
    assert_eq!((p.status, p.body.len()), (200, 13));
    let p = range(&mut s, "bytes=13-");
    assert_eq!(p.status, 416);
    assert_eq!(p.header("content-range"), Some("bytes */13"));

    // Methods.
    let m = ask(&mut s, "DELETE /a.txt HTTP/1.1\r\n\r\n");
    assert_eq!(m.status, 405);
    assert_eq!(m.header("allow"), Some("GET, HEAD"));

    // Paths.
    for (path, status, body) in [
        ("/", 200, &b"<h1>home</h1>\n"[..]),
        ("/a.txt?x=1&y=../../etc", 200, b"hello, world\n"),
        ("/text..txt", 200, b"two dots\n"),
        ("/docs/", 200, b"docs index\n"),
        ("/inside-link.txt", 200, b"hello, world\n"),
        ("/a%2etxt", 200, b"hello, world\n"),
    ] {
        let r = ask(&mut s, &format!("GET {path} HTTP/1.1\r\n\r\n"));
        assert_eq!((r.status, r.body.as_slice()), (status, body), "{path}");
    }
    for (path, status) in [
        ("/empty/", 403),
        ("/a.txt/", 404),
        ("/nope", 404),
        ("/.hidden", 404),
        ("/.git/config", 404),
        ("/docs/.%2e/.hidden", 404),
    ] {
        let r = ask(&mut s, &format!("GET {path} HTTP/1.1\r\n\r\n"));
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.header("connection"), Some("keep-alive"), "{path}");
    }
    let r = ask(&mut s, "GET /docs?q=1 HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/docs/?q=1"));

    // Content types (nginx's mime.types values, no charset).
    for (ext, t) in [
        ("html", "text/html"),
        ("css", "text/css"),
        ("js", "application/javascript"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("png", "image/png"),
        ("gif", "image/gif"),
        ("svg", "image/svg+xml"),
        ("swf", "application/x-shockwave-flash"),
        ("txt", "text/plain"),
        ("json", "application/json"),
        ("wasm", "application/wasm"),
        ("pdf", "application/pdf"),
        ("xyz", "application/octet-stream"),
    ] {
        let r = ask(&mut s, &format!("HEAD /types/f.{ext} HTTP/1.1\r\n\r\n"));
        assert_eq!(r.header("content-type"), Some(t), "{ext}");
    }

    // Connection: close closes after the response.
    let r = ask(&mut s, "GET /a.txt HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert_closed(&mut s);

    // HTTP/1.0: close unless keep-alive.
    let mut s = server.connect();
    let r = ask(&mut s, "GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert_closed(&mut s);
    let mut s = server.connect();
    let r = ask(
        &mut s,
        "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(r.header("connection"), Some("keep-alive"));
    let r = ask(
        &mut s,
        "GET /b.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(r.body, b"second file\n");

    // Errors that close the connection.
    for (req, status) in [
        ("GET / HTTP/2.0\r\n\r\n", 505),
        ("GET /a%zz HTTP/1.1\r\n\r\n", 400),
        ("GET /a%00b HTTP/1.1\r\n\r\n", 400),
        ("GARBAGE\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nbad header\r\n\r\n", 400),
    ] {
        let mut s = server.connect();
        let r = ask(&mut s, req);
        assert_eq!(r.status, status, "{req:?}");
        assert_eq!(r.header("connection"), Some("close"), "{req:?}");
        assert!(!r.body.is_empty(), "a short text body");
        assert_closed(&mut s);
    }
}

#[test]
fn header_rules_uring() {
    header_rules("auto");
}

#[test]
fn header_rules_epoll() {
    header_rules("epoll");
}

// ===== traversal =====

fn traversal(driver: &str, env: &[(&str, &str)]) {
    let (base, root) = make_root(&format!("trav-{driver}-{}", env.len()));
    let server = Server::start_env(&root, &["--driver", driver], env);
    let outside = base.0.join("outside/secret.txt");
    let outside = outside.to_str().unwrap();
    let attempts = [
        "/../outside/secret.txt".to_string(),
        "/%2e%2e/outside/secret.txt".into(),
        "/%2E%2E/outside/secret.txt".into(),
        "/..%2foutside%2fsecret.txt".into(),
        "/%2e%2e%2foutside%2fsecret.txt".into(),
        "/docs/../../outside/secret.txt".into(),
        "/..\\outside\\secret.txt".into(),
        "/..%5coutside%5csecret.txt".into(),
        format!("/{outside}"),
        format!("//{outside}"),
        format!("/%2f{}", &outside[1..]),
        "http://t/../outside/secret.txt".into(),
        "/out/secret.txt".into(),
        "/secret-link".into(),
        "/etc/passwd".into(),
        "/etc/hostname".into(),
        "/%252e%252e/outside/secret.txt".into(),
        "/./../outside/secret.txt".into(),
    ];
    for path in &attempts {
        let mut s = server.connect();
        let req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all).or_else(|e| {
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut {
                Ok(0)
            } else {
                Err(e)
            }
        });
        let text = String::from_utf8_lossy(&all);
        assert!(!text.starts_with("HTTP/1.1 200"), "{path}: {text}");
        assert!(!text.contains(SECRET), "{path}: {text}");
        assert!(!text.contains("root:"), "{path}: {text}");
    }
    // Still serving.
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn traversal_attempts_never_escape_uring() {
    traversal("auto", &[]);
}

#[test]
fn traversal_attempts_never_escape_epoll() {
    traversal("epoll", &[]);
}

/// The check used where openat2 is missing (forced here).
#[test]
fn traversal_attempts_never_escape_without_openat2() {
    traversal("auto", &[("HOOP_HTTP_NO_OPENAT2", "1")]);
    traversal("epoll", &[("HOOP_HTTP_NO_OPENAT2", "1")]);
}

// ===== slowloris and idle connections =====

fn timeouts(driver: &str) {
    let (_base, root) = make_root(&format!("slow-{driver}"));
    let server = Server::start(
        &root,
        &[
            "--driver",
            driver,
            "--header-timeout-ms",
            "300",
            "--idle-timeout-ms",
            "400",
        ],
    );
    // A client that sends its head a byte every 50 ms is cut off after ~300 ms.
    let mut s = server.connect();
    let start = Instant::now();
    let mut closed = false;
    for b in b"GET /a.txt HTTP/1.1\r\nX-Slow: "
        .iter()
        .chain([b'a'; 200].iter())
    {
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        if start.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    if !closed {
        assert_closed(&mut s);
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "slowloris not cut off"
    );

    // A connection that sends nothing is closed too.
    let mut s = server.connect();
    assert_closed(&mut s);

    // An idle keep-alive connection is closed after the idle timeout.
    let mut s = server.connect();
    let r = ask(&mut s, "GET /a.txt HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 200);
    let idle = Instant::now();
    assert_closed(&mut s);
    assert!(
        idle.elapsed() >= Duration::from_millis(300),
        "closed too early"
    );

    // Others are served throughout.
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn slowloris_and_idle_connections_are_closed_uring() {
    timeouts("auto");
}

#[test]
fn slowloris_and_idle_connections_are_closed_epoll() {
    timeouts("epoll");
}

// ===== limits =====

fn limits_then_serves(driver: &str) {
    let (_base, root) = make_root(&format!("limits-{driver}"));
    let mut server = Server::start(&root, &["--driver", driver]);
    let long_uri = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
    let big_head = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(17_000));
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
    let body = "GET /a.txt HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".to_string();
    let chunked = "GET /a.txt HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_string();
    for (req, status) in [
        (long_uri, 414),
        (big_head, 431),
        (many, 431),
        (body, 413),
        (chunked, 413),
    ] {
        let mut s = server.connect();
        let r = ask(&mut s, &req);
        assert_eq!(r.status, status);
        assert_eq!(r.header("connection"), Some("close"));
        assert_closed(&mut s);
        server.assert_running();
        assert_eq!(
            server.get("/a.txt").body,
            b"hello, world\n",
            "after {status}"
        );
    }
    // A head bigger than every limit, sent without end: refused, not buffered forever.
    let mut s = server.connect();
    let junk = vec![b'x'; 64 * 1024];
    let _ = s.write_all(b"GET /");
    let _ = s.write_all(&junk);
    let r = read_response(&mut s, false);
    assert_eq!(r.status, 414);
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn limits_413_414_431_then_still_serves_uring() {
    limits_then_serves("auto");
}

#[test]
fn limits_413_414_431_then_still_serves_epoll() {
    limits_then_serves("epoll");
}

// ===== many connections, max-conns =====

/// Sockets in CLOSE_WAIT whose local port is `port` (from /proc/net/tcp).
fn close_wait_on(port: u16) -> usize {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3
                && f[3] == "08"
                && f[1]
                    .rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
                    == Some(port)
        })
        .count()
}

/// 2,000 connections (in waves of 200 open at once), each with one request, half closed by the
/// client and half by the server (`Connection: close`): afterwards no CLOSE_WAIT and no more
/// fds than before. (The issue asks for 10,000; 2,000 keeps CI fast and exercises the same
/// paths: every wave reuses slots of the fixed-file table freed by the previous one.)
fn many_connections(driver: &str) {
    let (_base, root) = make_root(&format!("many-{driver}"));
    let server = Server::start(&root, &["--driver", driver]);
    assert_eq!(server.get("/a.txt").status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let fds_before = server.fd_count();
    for wave in 0..10 {
        let mut conns: Vec<TcpStream> = (0..200).map(|_| server.connect()).collect();
        for (i, s) in conns.iter_mut().enumerate() {
            let close = if i % 2 == 0 { "close" } else { "keep-alive" };
            let r = ask(
                s,
                &format!("GET /b.txt HTTP/1.1\r\nConnection: {close}\r\n\r\n"),
            );
            assert_eq!(r.body, b"second file\n", "wave {wave}");
        }
        drop(conns);
    }
    // The server closes its side of every connection promptly.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cw = close_wait_on(server.addr.port());
        let fds = server.fd_count();
        if cw == 0 && fds <= fds_before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{cw} sockets in CLOSE_WAIT, {fds} fds (was {fds_before})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn many_connections_leave_no_close_wait_uring() {
    many_connections("auto");
}

#[test]
fn many_connections_leave_no_close_wait_epoll() {
    many_connections("epoll");
}

fn max_conns(driver: &str) {
    let (_base, root) = make_root(&format!("max-{driver}"));
    let server = Server::start(&root, &["--driver", driver, "--max-conns", "4"]);
    let mut held: Vec<TcpStream> = (0..4).map(|_| server.connect()).collect();
    for s in &mut held {
        assert_eq!(ask(s, "GET /a.txt HTTP/1.1\r\n\r\n").status, 200);
    }
    // The fifth is accepted and closed at once.
    let mut extra = server.connect();
    let _ = extra.write_all(b"GET /a.txt HTTP/1.1\r\n\r\n");
    assert_closed(&mut extra);
    // Room again once one closes.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = server.connect();
        let _ = s.write_all(b"GET /a.txt HTTP/1.1\r\n\r\n");
        let mut buf = [0u8; 12];
        if s.read_exact(&mut buf).is_ok() {
            assert_eq!(&buf, b"HTTP/1.1 200");
            break;
        }
        assert!(Instant::now() < deadline, "no room after a close");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn max_conns_accepts_and_closes_uring() {
    max_conns("auto");
}

#[test]
fn max_conns_accepts_and_closes_epoll() {
    max_conns("epoll");
}

// ===== bodies =====

const SIZES: [usize; 12] = [
    0,
    1,
    100,
    4095,
    4096,
    4097,
    65_535,
    65_536,
    65_537,
    1 << 20,
    (1 << 20) + 1,
    3 * (1 << 20) + 7,
];

fn bodies(driver: &str, cache: &str) {
    let (_base, root) = make_root(&format!("bodies-{driver}-{cache}"));
    for (i, &n) in SIZES.iter().enumerate() {
        std::fs::write(root.join(format!("f{n}.bin")), bytes(n, i as u64)).unwrap();
    }
    let server = Server::start(&root, &["--driver", driver, "--cache-bytes", cache]);
    let mut s = server.connect();
    for round in 0..2 {
        for (i, &n) in SIZES.iter().enumerate() {
            let r = ask(&mut s, &format!("GET /f{n}.bin HTTP/1.1\r\n\r\n"));
            assert_eq!(r.status, 200);
            assert!(r.body == bytes(n, i as u64), "{n} bytes, round {round}");
            // A range in the middle.
            if n > 10 {
                let (a, b) = (n / 3, n - n / 4);
                let r = ask(
                    &mut s,
                    &format!("GET /f{n}.bin HTTP/1.1\r\nRange: bytes={a}-{b}\r\n\r\n"),
                );
                assert_eq!(r.status, 206);
                assert!(r.body == bytes(n, i as u64)[a..=b], "{n} bytes {a}-{b}");
            }
        }
    }
}

#[test]
fn bodies_of_every_size_uring() {
    bodies("auto", "64M");
    bodies("auto", "0");
}

#[test]
fn bodies_of_every_size_epoll() {
    bodies("epoll", "64M");
    bodies("epoll", "0");
}

/// A file replaced (rename) and rewritten in place while it is served: every response is one
/// whole version with its own length, never a mix of two lengths or a short body.
fn changing_file(driver: &str, cache: &str) {
    let (base, root) = make_root(&format!("change-{driver}-{cache}"));
    let versions: Vec<Vec<u8>> = [1000usize, 70_000, 2 * (1 << 20) + 3]
        .iter()
        .enumerate()
        .map(|(i, &n)| bytes(n, 100 + i as u64))
        .collect();
    std::fs::write(root.join("c.bin"), &versions[0]).unwrap();
    let server = Server::start(&root, &["--driver", driver, "--cache-bytes", cache]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, root, versions) = (stop.clone(), root.clone(), versions.clone());
        let tmp = base.0.join("c.tmp");
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && i < 100_000 {
                i += 1;
                std::fs::write(&tmp, &versions[i % versions.len()]).unwrap();
                std::fs::rename(&tmp, root.join("c.bin")).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let mut seen = [0usize; 3];
    let mut s = server.connect();
    for _ in 0..150 {
        let r = ask(&mut s, "GET /c.bin HTTP/1.1\r\n\r\n");
        assert_eq!(r.status, 200);
        let which = versions.iter().position(|v| *v == r.body);
        let which =
            which.unwrap_or_else(|| panic!("a body of {} bytes matching no version", r.body.len()));
        seen[which] += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        seen.iter().filter(|&&n| n > 0).count() >= 2,
        "the file changed under the server: {seen:?}"
    );
    // Once it stops changing, the current version is served (the cache noticed).
    let now = std::fs::read(root.join("c.bin")).unwrap();
    assert!(ask(&mut s, "GET /c.bin HTTP/1.1\r\n\r\n").body == now);
}

#[test]
fn files_changing_while_served_uring() {
    changing_file("auto", "64M");
    changing_file("auto", "0");
}

#[test]
fn files_changing_while_served_epoll() {
    changing_file("epoll", "64M");
    changing_file("epoll", "0");
}

/// A sparse file over 4 GiB: its length, a range past 4 GiB, and a suffix range, with 64-bit
/// sizes and offsets throughout (only the ranges' bytes are read).
fn over_4_gib(driver: &str) {
    let (_base, root) = make_root(&format!("big-{driver}"));
    let size: u64 = (5 << 30) + 3;
    let f = std::fs::File::create(root.join("huge.bin")).unwrap();
    f.set_len(size).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"tail!", size - 5).unwrap();
    f.write_all_at(b"past4", 1 << 32).unwrap();
    drop(f);
    let server = Server::start(&root, &["--driver", driver]);
    let mut s = server.connect();
    let r = ask(&mut s, "HEAD /huge.bin HTTP/1.1\r\n\r\n");
    assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
    let r = ask(
        &mut s,
        "GET /huge.bin HTTP/1.1\r\nRange: bytes=4294967296-4294967300\r\n\r\n",
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &b"past4"[..]));
    let want = format!("bytes 4294967296-4294967300/{size}");
    assert_eq!(r.header("content-range"), Some(want.as_str()));
    let r = ask(&mut s, "GET /huge.bin HTTP/1.1\r\nRange: bytes=-5\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &b"tail!"[..]));
}

#[test]
fn files_over_4_gib_uring() {
    over_4_gib("auto");
}

#[test]
fn files_over_4_gib_epoll() {
    over_4_gib("epoll");
}

// ===== pipelining =====

/// Three pipelined requests sent in two writes, split at every byte boundary: the three
/// responses come back whole and in order.
fn pipelined(driver: &str) {
    pipelined_env(driver, &[]);
}

fn pipelined_env(driver: &str, env: &[(&str, &str)]) {
    let (_base, root) = make_root(&format!("pipe-{driver}-{}", env.len()));
    let server = Server::start_env(&root, &["--driver", driver], env);
    let reqs = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\nHEAD /b.txt HTTP/1.1\r\n\r\nGET /b.txt HTTP/1.1\r\nRange: bytes=0-5\r\n\r\n";
    let bytes = reqs.as_bytes();
    for cut in 0..=bytes.len() {
        let mut s = server.connect();
        s.write_all(&bytes[..cut]).unwrap();
        if cut > 0 && cut < bytes.len() {
            // Let the first part arrive alone.
            std::thread::sleep(Duration::from_millis(2));
        }
        s.write_all(&bytes[cut..]).unwrap();
        let r = read_response(&mut s, false);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"hello, world\n"[..]),
            "cut {cut}"
        );
        let r = read_response(&mut s, true);
        assert_eq!(
            (r.status, r.header("content-length")),
            (200, Some("12")),
            "cut {cut}"
        );
        let r = read_response(&mut s, false);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (206, &b"second"[..]),
            "cut {cut}"
        );
    }
    // Many in one write, the last one closing.
    let mut s = server.connect();
    let mut all = String::new();
    for i in 0..50 {
        let f = if i % 2 == 0 { "a" } else { "b" };
        all.push_str(&format!("GET /{f}.txt HTTP/1.1\r\n\r\n"));
    }
    all.push_str("GET /a.txt HTTP/1.1\r\nConnection: close\r\n\r\n");
    s.write_all(all.as_bytes()).unwrap();
    for i in 0..51 {
        let r = read_response(&mut s, false);
        let want: &[u8] = if i % 2 == 0 {
            b"hello, world\n"
        } else {
            b"second file\n"
        };
        assert_eq!(r.body, want, "response {i}");
    }
    assert_closed(&mut s);
}

#[test]
fn pipelined_requests_split_at_every_byte_uring() {
    pipelined("auto");
}

#[test]
fn pipelined_requests_split_at_every_byte_epoll() {
    pipelined("epoll");
}

/// Past the buffer ring's share of readers (forced to 0 here; half the ring's buffers in a
/// real server), connections read by readiness into the thread's scratch: requests split at
/// every byte, pipelined and closing behave the same. On io_uring with ring-mapped buffers
/// the ring path stays (the setting only matters for a ring in user memory).
#[test]
fn readiness_reads_past_the_ring_share_epoll() {
    pipelined_env("epoll", &[("HOOP_HTTP_RING_READERS_MAX", "0")]);
}

// ===== process =====

fn graceful_stop(driver: &str, sig: i32) {
    let (_base, root) = make_root(&format!("stop-{driver}-{sig}"));
    let data = bytes(8 << 20, 7);
    std::fs::write(root.join("big.bin"), &data).unwrap();
    let mut server = Server::start(&root, &["--driver", driver, "--cache-bytes", "0"]);
    let idle = server.connect();
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // A small receive buffer and a slow start: the response is in flight at the signal.
    s.write_all(b"GET /big.bin HTTP/1.1\r\n\r\n").unwrap();
    let mut first = [0u8; 12];
    s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    server.signal(sig);
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let start = rest
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("head")
        + 4;
    assert!(rest[start..] == data[..], "the response in flight finished");
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("exit in time");
    assert_eq!(status.code(), Some(0), "{status:?}");
    drop(idle);
}

#[test]
fn sigterm_and_sigint_let_responses_finish_then_exit_zero_uring() {
    graceful_stop("auto", libc::SIGTERM);
    graceful_stop("auto", libc::SIGINT);
}

#[test]
fn sigterm_and_sigint_let_responses_finish_then_exit_zero_epoll() {
    graceful_stop("epoll", libc::SIGTERM);
}

#[test]
fn bad_root_or_flag_exits_one_with_one_line() {
    let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
    let (_base, root) = make_root("bad");
    let r = root.to_str().unwrap();
    let file = format!("{r}/a.txt");
    for args in [
        vec!["serve", "http", "--root", "/nonexistent/hoop/root"],
        vec!["serve", "http", "--root", &file],
        vec!["serve", "http", "--root", r, "--bogus"],
        vec!["serve", "http", "--root", r, "--threads", "0"],
        vec!["serve", "http", "--root", r, "--max-conns", "x"],
        vec!["serve", "http", "--root", r, "--driver", "nosuch"],
        vec!["serve", "http"],
    ] {
        let out = common::command(env!("CARGO_BIN_EXE_hoop"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `--access-log`: one line per request on stdout, after the `listening on` line.
#[test]
fn access_log_lines_follow_the_listening_line() {
    let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
    let (_base, root) = make_root("log");
    let mut child = common::command(env!("CARGO_BIN_EXE_hoop"))
        .args([
            "serve",
            "http",
            "--addr",
            "127.0.0.1:0",
            "--access-log",
            "--root",
        ])
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(START_TIMEOUT).unwrap();
    let addr: SocketAddr = first
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    let mut s = connect(addr);
    assert_eq!(ask(&mut s, "GET /a.txt HTTP/1.1\r\n\r\n").status, 200);
    assert_eq!(ask(&mut s, "GET /nope HTTP/1.1\r\n\r\n").status, 404);
    let a = rx.recv_timeout(IO_TIMEOUT).unwrap();
    let b = rx.recv_timeout(IO_TIMEOUT).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(a.contains("\"GET /a.txt HTTP/1.1\" 200"), "{a}");
    assert!(b.contains("\"GET /nope HTTP/1.1\" 404"), "{b}");
}

/// `--index NAME`: a directory target serves NAME (not index.html); a directory without it is
/// 403; a bad NAME is refused at start (exit code 1, as every bad argument of the CLI).
fn index_option(driver: &str) {
    let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
    let (_base, root) = make_root(&format!("index-{driver}"));
    std::fs::write(root.join("home.htm"), b"home page\n").unwrap();
    std::fs::write(root.join("docs/home.htm"), b"docs home\n").unwrap();
    let server = Server::start(&root, &["--driver", driver, "--index", "home.htm"]);
    let r = server.get("/");
    assert_eq!((r.status, &r.body[..]), (200, &b"home page\n"[..]));
    let r = server.get("/docs/");
    assert_eq!((r.status, &r.body[..]), (200, &b"docs home\n"[..]));
    // index.html is an ordinary file now; a directory without home.htm is 403 (no listing).
    assert_eq!(server.get("/index.html").body, b"<h1>home</h1>\n");
    assert_eq!(server.get("/empty/").status, 403);
    drop(server);
    for bad in ["", ".hidden", "a/b"] {
        let out = common::command(env!("CARGO_BIN_EXE_hoop"))
            .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(&root)
            .args(["--index", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "--index {bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--index"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn index_option_names_the_directory_file_uring() {
    index_option("auto");
}

#[test]
fn index_option_names_the_directory_file_epoll() {
    index_option("epoll");
}

// ===== precompressed files =====

/// Sets `path`'s modification time to `secs` after the epoch.
fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// `site/` in a test root: `a.css` with fresh `.br` and `.gz` variants, `stale.js` with an
/// older `.gz`, `plain.css` without any, `img.png` with a `.gz` (not a compressible type),
/// `dir.css` whose `.gz` is a directory.
fn make_precompressed(root: &Path) {
    let site = root.join("site");
    std::fs::create_dir_all(site.join("dir.css.gz")).unwrap();
    let t = 1_700_000_000;
    for (name, data, mtime) in [
        ("a.css", &b"body { color: red }\n"[..], t),
        ("a.css.br", b"BR-BYTES", t + 10),
        ("a.css.gz", b"GZ-BYTES-0123456789", t),
        ("stale.js", b"let x = 1;\n", t),
        ("stale.js.gz", b"OLD-GZ", t - 100),
        ("plain.css", b"p {}\n", t),
        ("img.png", b"PNG", t),
        ("img.png.gz", b"PNG-GZ", t + 10),
        ("dir.css", b"d {}\n", t),
    ] {
        std::fs::write(site.join(name), data).unwrap();
        set_mtime(&site.join(name), mtime);
    }
}

/// GET (or HEAD) `path` with extra header lines `headers` (each ending in CRLF).
fn ask_with(s: &mut TcpStream, method: &str, path: &str, headers: &str) -> Response {
    ask(
        s,
        &format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n"),
    )
}

fn precompressed(driver: &str, cache: &str) {
    let (_base, root) = make_root(&format!("precomp-{driver}-{cache}"));
    make_precompressed(&root);
    let server = Server::start(&root, &["--driver", driver, "--cache-bytes", cache]);
    let mut s = server.connect();
    let identity = b"body { color: red }\n";
    let gz = b"GZ-BYTES-0123456789";

    // Twice each, so that the second answer comes from the cache where there is one.
    for _ in 0..2 {
        // No Accept-Encoding: the file itself, with Vary (the answer depends on the field).
        let r = ask_with(&mut s, "GET", "/site/a.css", "");
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let identity_etag = r.header("etag").unwrap().to_string();

        // br first at equal weight.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "Accept-Encoding: gzip, deflate, br\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &b"BR-BYTES"[..]));
        assert_eq!(r.header("content-encoding"), Some("br"));
        assert_eq!(r.header("content-type"), Some("text/css"));
        assert_eq!(r.header("content-length"), Some("8"));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let br_etag = r.header("etag").unwrap().to_string();
        assert_ne!(br_etag, identity_etag);

        // gzip by weight; the variant's own validators.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "Accept-Encoding: br;q=0.5, gzip;q=0.8\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &gz[..]));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.header("content-type"), Some("text/css"));
        assert_eq!(r.header("content-length"), Some("19"));
        let gz_etag = r.header("etag").unwrap().to_string();
        assert!(gz_etag != identity_etag && gz_etag != br_etag);

        // Two fields are one list, names and spaces as they come.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "accept-encoding: GZIP ; q=0.5\r\nACCEPT-ENCODING:\tbr;q=0.1\r\n",
        );
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let r = ask_with(&mut s, "GET", "/site/a.css", "Accept-Encoding: *\r\n");
        assert_eq!(r.header("content-encoding"), Some("br"));

        // q=0 refuses both: the file itself.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "Accept-Encoding: br;q=0, gzip;q=0\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        assert_eq!(r.header("etag"), Some(identity_etag.as_str()));

        // Range and conditionals apply to the encoded file.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "Accept-Encoding: gzip\r\nRange: bytes=0-3\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (206, &b"GZ-B"[..]));
        assert_eq!(r.header("content-range"), Some("bytes 0-3/19"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            &format!("Accept-Encoding: gzip\r\nRange: bytes=-4\r\nIf-Range: {gz_etag}\r\n"),
        );
        assert_eq!((r.status, &r.body[..]), (206, &b"6789"[..]));
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            &format!("Accept-Encoding: gzip\r\nIf-None-Match: {gz_etag}\r\n"),
        );
        assert_eq!(r.status, 304);
        assert_eq!(r.header("etag"), Some(gz_etag.as_str()));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        // The same validator from a client that takes no coding: not its copy.
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            &format!("If-None-Match: {gz_etag}\r\n"),
        );
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));

        // HEAD alike.
        let r = ask_with(&mut s, "HEAD", "/site/a.css", "Accept-Encoding: br\r\n");
        assert_eq!(r.status, 200);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-encoding"), Some("br"));
        assert_eq!(r.header("content-length"), Some("8"));
        assert_eq!(r.header("etag"), Some(br_etag.as_str()));

        // A variant older than the file is ignored; so is one that is not a regular file.
        let r = ask_with(&mut s, "GET", "/site/stale.js", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"let x = 1;\n"[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let r = ask_with(&mut s, "GET", "/site/dir.css", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"d {}\n"[..]));
        // No variant, identity refused: the file anyway (as nginx; not 406).
        let r = ask_with(
            &mut s,
            "GET",
            "/site/plain.css",
            "Accept-Encoding: gzip, identity;q=0\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &b"p {}\n"[..]));
        assert_eq!(r.header("content-encoding"), None);
        // Not a compressible type: no lookup, no Vary.
        let r = ask_with(&mut s, "GET", "/site/img.png", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"PNG"[..]));
        assert_eq!(
            (r.header("content-encoding"), r.header("vary")),
            (None, None)
        );
        // The variant asked for by name: a plain file, as before.
        let r = ask_with(&mut s, "GET", "/site/a.css.gz", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &gz[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert_ne!(r.header("etag"), Some(gz_etag.as_str()));
    }

    // A variant made fresh again is served (and the cache notices the change).
    set_mtime(&root.join("site/stale.js.gz"), 1_800_000_000);
    let r = ask_with(&mut s, "GET", "/site/stale.js", "Accept-Encoding: gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"OLD-GZ"[..]));
    assert_eq!(r.header("content-type"), Some("application/javascript"));
    drop(server);

    // --no-precompressed: the file itself, no Vary; the last of the two flags wins.
    for flags in [
        &["--no-precompressed"][..],
        &["--precompressed", "--no-precompressed"],
    ] {
        let mut args = vec!["--driver", driver, "--cache-bytes", cache];
        args.extend_from_slice(flags);
        let server = Server::start(&root, &args);
        let mut s = server.connect();
        let r = ask_with(
            &mut s,
            "GET",
            "/site/a.css",
            "Accept-Encoding: br, gzip\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]), "{flags:?}");
        assert_eq!(
            (r.header("content-encoding"), r.header("vary")),
            (None, None)
        );
    }
    let server = Server::start(
        &root,
        &["--driver", driver, "--no-precompressed", "--precompressed"],
    );
    let r = ask_with(
        &mut server.connect(),
        "GET",
        "/site/a.css",
        "Accept-Encoding: br\r\n",
    );
    assert_eq!(r.header("content-encoding"), Some("br"));
}

#[test]
fn precompressed_variants_uring() {
    precompressed("auto", "64M");
    precompressed("auto", "0");
}

#[test]
fn precompressed_variants_epoll() {
    precompressed("epoll", "64M");
    precompressed("epoll", "0");
}

// ===== autoindex =====

fn autoindex(driver: &str) {
    let (_base, root) = make_root(&format!("autoindex-{driver}"));
    let list = root.join("list");
    std::fs::create_dir_all(list.join("sub")).unwrap();
    std::fs::write(list.join("a<b>&\"c'.txt"), b"escaped\n").unwrap();
    std::fs::write(list.join("z.txt"), b"zz").unwrap();
    std::fs::write(list.join(".secret"), b"hidden").unwrap();

    // Off by default: 403, as before.
    let server = Server::start(&root, &["--driver", driver]);
    assert_eq!(server.get("/list/").status, 403);
    drop(server);

    let server = Server::start(&root, &["--driver", driver, "--autoindex"]);
    let mut s = server.connect();
    let r = ask_with(&mut s, "GET", "/list/", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let page = String::from_utf8(r.body.clone()).unwrap();
    assert!(page.contains("Index of /list/"), "{page}");
    let escaped = "<a href=\"a%3Cb%3E%26%22c%27.txt\">a&lt;b&gt;&amp;&quot;c&#39;.txt</a>";
    let (a, sub, z) = (
        page.find(escaped).expect("the escaped name"),
        page.find("<a href=\"sub/\">sub/</a>")
            .expect("the subdirectory"),
        page.find("<a href=\"z.txt\">z.txt</a>").expect("z.txt"),
    );
    assert!(a < sub && sub < z, "sorted by name: {page}");
    assert!(page.contains("<a href=\"../\">"));
    assert!(!page.contains("secret"), "{page}");
    assert!(!page.contains('\''), "a raw quote in {page}");
    // The link works.
    let r = ask_with(&mut s, "GET", "/list/a%3Cb%3E%26%22c%27.txt", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"escaped\n"[..]));
    // HEAD alike.
    let h = ask_with(&mut s, "HEAD", "/list/", "");
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(
        h.header("content-length"),
        Some(page.len().to_string().as_str())
    );
    // An empty directory; a directory with its index still serves the index; no trailing
    // slash is still 301; a dot-directory is still 404.
    let r = ask_with(&mut s, "GET", "/empty/", "");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("Index of /empty/"));
    assert_eq!(ask_with(&mut s, "GET", "/docs/", "").body, b"docs index\n");
    let r = ask_with(&mut s, "GET", "/list", "");
    assert_eq!((r.status, r.header("location")), (301, Some("/list/")));
    assert_eq!(ask_with(&mut s, "GET", "/.git/", "").status, 404);
    // A link out of the root is listed as a name, never followed.
    let r = ask_with(&mut s, "GET", "/out/", "");
    assert_eq!(r.status, 404);
    std::fs::remove_file(root.join("index.html")).unwrap();
    let page = String::from_utf8(ask_with(&mut s, "GET", "/", "").body).unwrap();
    assert!(page.contains("<a href=\"out\">out</a>"), "{page}");
    assert!(page.contains("<a href=\"list/\">list/</a>"), "{page}");
    assert!(
        !page.contains("../") && !page.contains("secret.txt"),
        "{page}"
    );
}

#[test]
fn autoindex_lists_directories_without_index_uring() {
    autoindex("auto");
}

#[test]
fn autoindex_lists_directories_without_index_epoll() {
    autoindex("epoll");
}
