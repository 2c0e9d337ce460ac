//! End-to-end tests of `hoop serve http`'s response flags: `--cache-control`,
//! `--security-headers`, `--content-security-policy`, `--error-page` (and the one stderr line
//! said at start for a page file that cannot be read) and `--autoindex-format`, and their bad
//! values (exit 1 with one line). What the flags do in detail is tested in process by
//! hoop-http's own tests (`cache_control.rs`, `error_pages.rs`, `autoindex.rs`). Those that
//! run a server do so on both drivers (`auto`, which is io_uring where the kernel allows it,
//! and `epoll`).
//!
//! Every server is a child process owned by a guard that kills it on drop; every client read
//! and write has a timeout; every loop is bounded in count.

mod support;

use hoop_test_support as common;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::http::make_root;
use support::{ask_fresh, Response};

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `hoop serve http` on 127.0.0.1:0 with its stderr kept.
struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    fn start(root: &Path, extra: &[&str]) -> Server {
        let mut child = support::spawn_server(
            common::command(env!("CARGO_BIN_EXE_hoop"))
                .args(["serve", "http", "--addr", "127.0.0.1:0", "--root"])
                .arg(root)
                .args(extra),
            Stdio::piped(),
        );
        let mut err = child.stderr.take().expect("piped stderr");
        let (tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        let addr =
            support::listening_addr(child.stdout.take().expect("piped stdout"), START_TIMEOUT);
        Server {
            child,
            addr,
            stderr,
        }
    }

    fn get(&self, path: &str) -> Response {
        ask_fresh(
            self.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"),
        )
    }

    /// Ends the server and returns everything it said on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .recv_timeout(START_TIMEOUT)
            .expect("stderr read to its end")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CSP: &str = "default-src 'self'";

/// Every response flag at once; the 403 page's file is missing: the server starts, says so in
/// exactly one line on stderr, and the built-in 403 answers.
fn response_flags(driver: &str) {
    let (_base, root) = make_root(&format!("pages-{driver}"));
    std::fs::write(root.join("404.html"), b"<p>lost</p>\n").unwrap();
    std::fs::create_dir_all(root.join("list")).unwrap();
    std::fs::write(root.join("list/x.txt"), b"123").unwrap();
    let server = Server::start(
        &root,
        &[
            "--driver",
            driver,
            "--cache-control",
            "*.txt=max-age=5",
            "--cache-control",
            "text/html=no-cache",
            "--security-headers",
            "--content-security-policy",
            CSP,
            "--error-page",
            "404=/404.html",
            "--error-page",
            "403=/missing.html",
            "--autoindex",
            "--autoindex-format",
            "json",
        ],
    );
    let r = server.get("/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("max-age=5"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("content-security-policy"), Some(CSP));
    assert_eq!(server.get("/").header("cache-control"), Some("no-cache"));
    let r = server.get("/nope");
    assert_eq!((r.status, &r.body[..]), (404, &b"<p>lost</p>\n"[..]));
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(r.header("cache-control"), None);
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let r = server.get("/list/");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    assert_eq!(v[0]["name"], "x.txt");
    assert_eq!(v[0]["size"], 3);
    let stderr = server.stop();
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("error page"))
        .collect();
    assert_eq!(
        lines,
        [
            "hoop-http: error page 403 \"/missing.html\": No such file or directory (os error 2); \
             the built-in page answers"
        ],
        "{stderr}"
    );

    // The missing 403 page: the built-in one answers (no listing without --autoindex).
    let server = Server::start(
        &root,
        &["--driver", driver, "--error-page", "403=/missing.html"],
    );
    let r = server.get("/list/");
    assert_eq!((r.status, &r.body[..]), (403, &b"403 Forbidden\n"[..]));
    let stderr = server.stop();
    assert_eq!(
        stderr.lines().filter(|l| l.contains("error page")).count(),
        1,
        "{stderr}"
    );
}

#[test]
fn response_flags_and_a_missing_page_said_once_on_stderr_uring() {
    response_flags("auto");
}

#[test]
fn response_flags_and_a_missing_page_said_once_on_stderr_epoll() {
    response_flags("epoll");
}

#[test]
fn bad_response_flags_exit_one_with_one_line() {
    let (_base, root) = make_root("pages-bad");
    let r = root.to_str().unwrap();
    for (flag, value) in [
        ("--error-page", "500=/500.html"),
        ("--error-page", "404"),
        ("--error-page", "404=/../x.html"),
        ("--error-page", "404=/.hidden"),
        ("--cache-control", "html=no-cache"),
        ("--cache-control", "*.css="),
        ("--cache-control", "no-equals"),
        ("--autoindex-format", "xml"),
        ("--content-security-policy", ""),
        ("--content-security-policy", "a\u{1}b"),
    ] {
        let out = common::command(env!("CARGO_BIN_EXE_hoop"))
            .args([
                "serve",
                "http",
                "--addr",
                "127.0.0.1:0",
                "--root",
                r,
                flag,
                value,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{flag} {value:?}: {err}");
        assert!(err.contains(flag), "{flag} {value:?}: {err}");
        assert!(out.stdout.is_empty(), "{flag} {value:?}");
    }
}
