//! End-to-end tests of the `hoop serve http` command: the real binary on 127.0.0.1:0, a root
//! made for the test, raw std clients. What they check is the command's own: its flags
//! (`--index`, `--access-log`, `--precompressed`/`--no-precompressed`, `--max-ranges`, bad ones), its exit
//! codes, its stdout lines, and SIGTERM/SIGINT. The server's behaviour (heads, traversal,
//! limits, bodies, pipelining, precompressed files, listings) is tested in process by
//! hoop-http's own tests (`crates/hoop-http/tests`). Those that run a server do so on both
//! drivers (`auto`, which is io_uring where the kernel allows it, and `epoll`).
//!
//! Every server is a child process owned by a guard that kills it on drop; every client read
//! and write has a timeout; every loop is bounded in count.

mod support;

use hoop_test_support as common;
use hoop_test_support::resets;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(20);

use common::http::{bytes, make_root, IO_TIMEOUT};
use support::{ask_fresh, Response};

// ===== the server process =====

use support::Served as Server;

impl Server {
    fn start_http(root: &Path, extra: &[&str]) -> Server {
        Server::start(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
                .arg(root)
                .args(extra),
            Stdio::inherit(),
            START_TIMEOUT,
        )
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
    /// One request on a fresh connection (retried on another after a reset).
    fn get(&self, path: &str) -> Response {
        ask_fresh(
            self.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"),
        )
    }
}

// ===== process =====

/// A response in flight at `sig` finishes, then the server exits 0. The whole scenario is one
/// exchange: a reset of the response (injected, before or after the signal) starts it again
/// with a new server, since a stopping server takes no new connection.
fn graceful_stop(driver: &str, sig: i32) {
    let (_base, root) = make_root(&format!("stop-{driver}-{sig}"));
    let data = bytes(8 << 20, 7);
    std::fs::write(root.join("big.bin"), &data).unwrap();
    resets::retry("a response in flight at the signal", |_| {
        let mut server = Server::start_http(&root, &["--driver", driver, "--cache-bytes", "0"]);
        let idle = support::try_connect(server.addr)?;
        let mut s = support::try_connect(server.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        // A small receive buffer and a slow start: the response is in flight at the signal.
        s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")?;
        let mut first = [0u8; 12];
        s.read_exact(&mut first)?;
        if &first != b"HTTP/1.1 200" {
            return Err(support::wrong(format!("status line {first:?}")));
        }
        server.signal(sig);
        let mut rest = Vec::new();
        let read = s.read_to_end(&mut rest);
        let start = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| resets::closed_early("the response head"))?
            + 4;
        let body = &rest[start..];
        if body.len() < data.len() && data.starts_with(body) {
            read?;
            return Err(resets::closed_early("the whole body"));
        }
        if body != data {
            return Err(support::wrong(
                "the response in flight did not finish intact",
            ));
        }
        let status = server
            .wait_exit(Duration::from_secs(10))
            .expect("exit in time");
        assert_eq!(status.code(), Some(0), "{status:?}");
        drop(idle);
        Ok::<_, io::Error>(())
    });
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

/// A response still going when `--shutdown-grace-ms` runs out is cut: one stderr line names
/// it (method, target, client), and the command exits 3; a stop with nothing in flight exits
/// 0 (above).
fn grace_runs_out(driver: &str) {
    let (_base, root) = make_root(&format!("grace-{driver}"));
    std::fs::write(root.join("big.bin"), bytes(64 << 20, 3)).unwrap();
    let mut server = Server::start(
        common::command(env!("CARGO_BIN_EXE_hoop"))
            .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(&root)
            .args(["--driver", driver, "--shutdown-grace-ms", "200"]),
        Stdio::piped(),
        START_TIMEOUT,
    );
    // A client that reads the head and then nothing: the body cannot finish in 200 ms.
    let mut s = support::try_connect(server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 12];
    if let Err(e) = s.read_exact(&mut first) {
        // An injected reset before the answer began: nothing was in flight to cut.
        eprintln!("SKIP the cut: {e}");
        return;
    }
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(20))
        .expect("exit in time");
    let mut err = String::new();
    server
        .child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut err)
        .unwrap();
    // An injected reset may end the download first: then nothing was cut and the stop is
    // clean.
    if status.code() == Some(0) && !err.contains("cut the answer") {
        eprintln!("SKIP the cut: the download ended before the grace ran out");
        return;
    }
    assert_eq!(status.code(), Some(3), "{status:?}; stderr: {err}");
    let cut: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("cut the answer"))
        .collect();
    assert_eq!(cut.len(), 1, "{err}");
    assert!(
        cut[0].starts_with(
            "hoop-http: shutdown grace of 200 ms ran out: cut the answer to GET /big.bin from 127.0.0.1:"
        ),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l == "hoop: stopped with 1 answer(s) cut short by --shutdown-grace-ms"),
        "{err}"
    );
    drop(s);
}

#[test]
fn a_response_the_grace_cuts_is_said_and_exits_three_uring() {
    grace_runs_out("auto");
}

#[test]
fn a_response_the_grace_cuts_is_said_and_exits_three_epoll() {
    grace_runs_out("epoll");
}

#[test]
fn bad_root_or_flag_exits_one_with_one_line() {
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
/// `hoop serve http --access-log EXTRA --root ROOT` with its stdout lines on a channel, and the
/// address of its `listening on` line.
fn logging_server(
    root: &Path,
    extra: &[&str],
) -> (std::process::Child, mpsc::Receiver<String>, SocketAddr) {
    let mut child = common::command(env!("CARGO_BIN_EXE_hoop"))
        .args(["serve", "http", "--addr", "127.0.0.1:0", "--access-log"])
        .args(extra)
        .arg("--root")
        .arg(root)
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
    (child, rx, addr)
}

/// `--access-log-file` with `--access-log-format combined`: nginx's fields in the file (the
/// client's address, the request, status, bytes, referer, user agent); `json` on stdout: one
/// object per line with the same fields; a file that cannot be opened: exit 1, one line.
#[test]
fn access_log_to_a_file_in_nginx_combined_and_json() {
    let (base, root) = make_root("log-formats");
    let file = base.0.join("access.log");
    let server = Server::start_http(
        &root,
        &[
            "--access-log-file",
            file.to_str().unwrap(),
            "--access-log-format",
            "combined",
        ],
    );
    let asked =
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nReferer: http://r/\r\nUser-Agent: t/1 \"x\"\r\n\r\n";
    assert_eq!(ask_fresh(server.addr, asked).status, 200);
    drop(server);
    let text = std::fs::read_to_string(&file).unwrap();
    // An injected reset may have made the request go twice: every line is the same.
    let line = text.lines().last().expect("a line");
    let (addr, rest) = line.split_once(" - - [").expect(line);
    assert_eq!(addr, "127.0.0.1", "{line}");
    let (time, rest) = rest.split_once("] ").expect(line);
    assert!(time.ends_with(" +0000") && time.len() == 26, "{line}");
    assert_eq!(
        rest, "\"GET /a.txt HTTP/1.1\" 200 13 \"http://r/\" \"t/1 \\x22x\\x22\"",
        "{line}"
    );

    let (mut child, rx, addr) = logging_server(&root, &["--access-log-format=json"]);
    assert_eq!(ask_fresh(addr, asked).status, 200);
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a log line");
    let v: serde_json::Value = serde_json::from_str(&line).expect(&line);
    assert_eq!(v["method"], "GET", "{line}");
    assert_eq!(v["target"], "/a.txt");
    assert_eq!(v["version"], "HTTP/1.1");
    assert_eq!(v["status"], 200);
    assert_eq!(v["body_bytes"], 13);
    assert_eq!(v["referer"], "http://r/");
    assert_eq!(v["user_agent"], "t/1 \"x\"");
    assert!(v["remote"]
        .as_str()
        .is_some_and(|r| r.starts_with("127.0.0.1:")));
    assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    let _ = child.kill();
    let _ = child.wait();

    // A log file that cannot be opened, and a format that does not exist.
    for (flag, value, want) in [
        (
            "--access-log-file",
            "/nonexistent/dir/access.log",
            "hoop: cannot open the access log /nonexistent/dir/access.log: No such file or directory (os error 2)",
        ),
        (
            "--access-log-format",
            "apache",
            "hoop: invalid value 'apache' for '--access-log-format <FORMAT>': unknown access-log format \"apache\" (hoop, combined or json)",
        ),
    ] {
        let out = common::command(env!("CARGO_BIN_EXE_hoop"))
            .args(["serve", "http", "--addr", "127.0.0.1:0", flag, value, "--root"])
            .arg(&root)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.lines().any(|l| l == want), "{flag}: {err}");
    }
}

#[test]
fn access_log_lines_follow_the_listening_line() {
    let (_base, root) = make_root("log");
    let (mut child, rx, addr) = logging_server(&root, &[]);
    // A request a reset ended may or may not have been logged: each is asked (on a fresh
    // connection) until it is answered, and its line is the last one for it.
    assert_eq!(
        ask_fresh(addr, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    assert_eq!(
        ask_fresh(addr, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n").status,
        404
    );
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.contains("\"GET /nope HTTP/1.1\" 404"))
    {
        lines.push(rx.recv_timeout(IO_TIMEOUT).unwrap());
        assert!(
            lines.len() <= 2 + 2 * resets::MAX_RETRIES as usize,
            "{lines:?}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let a = lines
        .iter()
        .rposition(|l| l.contains("\"GET /a.txt HTTP/1.1\" 200"));
    let b = lines
        .iter()
        .rposition(|l| l.contains("\"GET /nope HTTP/1.1\" 404"));
    assert!(a.is_some_and(|a| Some(a) < b), "{lines:?}");
    if !resets::injected() {
        assert_eq!(lines.len(), 2, "one line per request: {lines:?}");
    }
}

/// `--index NAME`: a directory target serves NAME (not index.html); a directory without it is
/// 403; a bad NAME is refused at start (exit code 1, as every bad argument of the CLI).
fn index_option(driver: &str) {
    let (_base, root) = make_root(&format!("index-{driver}"));
    std::fs::write(root.join("home.htm"), b"home page\n").unwrap();
    std::fs::write(root.join("docs/home.htm"), b"docs home\n").unwrap();
    let server = Server::start_http(&root, &["--driver", driver, "--index", "home.htm"]);
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

/// GET `path` with extra header lines `headers` (each ending in CRLF), on a fresh connection
/// (retried on another after a reset).
fn ask_with(addr: SocketAddr, path: &str, headers: &str) -> Response {
    ask_fresh(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n"),
    )
}

/// `--no-precompressed` turns precompressed files off; of it and `--precompressed`, the last
/// one given wins. (The variants themselves: hoop-http's `tests/precompressed.rs`.)
fn precompressed_flags(driver: &str) {
    let (_base, root) = make_root(&format!("precomp-{driver}"));
    let site = root.join("site");
    std::fs::create_dir_all(&site).unwrap();
    // Each variant written after the file: not older than it.
    for (name, data) in [
        ("a.css", &b"body { color: red }\n"[..]),
        ("a.css.br", b"BR-BYTES"),
        ("a.css.gz", b"GZ-BYTES-0123456789"),
    ] {
        std::fs::write(site.join(name), data).unwrap();
    }
    let identity = b"body { color: red }\n";
    for flags in [
        &["--no-precompressed"][..],
        &["--precompressed", "--no-precompressed"],
    ] {
        let mut args = vec!["--driver", driver];
        args.extend_from_slice(flags);
        let server = Server::start_http(&root, &args);
        let r = ask_with(server.addr, "/site/a.css", "Accept-Encoding: br, gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]), "{flags:?}");
        assert_eq!(
            (r.header("content-encoding"), r.header("vary")),
            (None, None)
        );
    }
    for flags in [&[][..], &["--no-precompressed", "--precompressed"]] {
        let mut args = vec!["--driver", driver];
        args.extend_from_slice(flags);
        let server = Server::start_http(&root, &args);
        let r = ask_with(server.addr, "/site/a.css", "Accept-Encoding: br\r\n");
        assert_eq!(r.header("content-encoding"), Some("br"), "{flags:?}");
    }
}

#[test]
fn precompressed_flags_the_last_one_wins_uring() {
    precompressed_flags("auto");
}

#[test]
fn precompressed_flags_the_last_one_wins_epoll() {
    precompressed_flags("epoll");
}

// ===== ranges =====

/// `--max-ranges N`: the bound on the parts of a range request (default 32: two parts are a
/// multipart answer), 1 (single ranges only), 0 (ranges off, no Accept-Ranges); a bad N is
/// refused at start with one line (exit code 1). (The ranges themselves: hoop-http's
/// `tests/ranges.rs`.)
fn max_ranges_flag(driver: &str) {
    let (_base, root) = make_root(&format!("ranges-{driver}"));
    let data = bytes(4000, 3);
    std::fs::write(root.join("r.bin"), &data).unwrap();
    let two = "Range: bytes=0-9,100-109\r\n";
    for (flags, multi, one) in [
        (&[][..], 206, 206),
        (&["--max-ranges", "2"][..], 206, 206),
        (&["--max-ranges", "1"][..], 200, 206),
        (&["--max-ranges", "0"][..], 200, 200),
    ] {
        let mut args = vec!["--driver", driver];
        args.extend_from_slice(flags);
        let server = Server::start_http(&root, &args);
        let r = ask_with(server.addr, "/r.bin", two);
        assert_eq!(r.status, multi, "{flags:?}");
        if multi == 206 {
            let ct = r.header("content-type").unwrap_or_default();
            assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
        } else {
            assert_eq!(r.body, data, "{flags:?}");
        }
        let r = ask_with(server.addr, "/r.bin", "Range: bytes=10-19\r\n");
        assert_eq!(r.status, one, "{flags:?}");
        let ranges_on = flags != ["--max-ranges", "0"];
        assert_eq!(
            r.header("accept-ranges"),
            ranges_on.then_some("bytes"),
            "{flags:?}"
        );
    }
    for bad in ["x", "-1", ""] {
        let out = common::command(env!("CARGO_BIN_EXE_hoop"))
            .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
            .arg(&root)
            .args(["--driver", driver, &format!("--max-ranges={bad}")])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "--max-ranges {bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "--max-ranges {bad:?}: {err}");
        assert!(err.contains("--max-ranges"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn max_ranges_flag_bounds_the_parts_uring() {
    max_ranges_flag("auto");
}

#[test]
fn max_ranges_flag_bounds_the_parts_epoll() {
    max_ranges_flag("epoll");
}
