//! The library API of hoop-http, on both drivers: serving on a listener the caller made, the
//! graceful stop from a CancellationToken with a response in flight (and idle connections
//! closed by it, the runtime still running), the access-log hook,
//! `Server::run` on threads of its own, and the builder's checks.
//!
//! Every read and write has a timeout, every wait on the server thread is bounded, and every
//! loop is bounded in count; nothing measures speed. Under injected resets
//! (`hoop_test_support::resets`) a request a reset ended goes again on a new connection, and
//! a scenario whose subject is one server's connections and counts runs again on a new server.

use hoop_test_support as common;
use hoop_test_support::ReadRetry as _;
mod serve;
use serve::{spawn_server_for, THREAD_TIMEOUT};
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::http::{
    parse_head, read_fully, try_ask, try_connect, try_read_head, Response, IO_TIMEOUT,
};
use common::resets::{self, closed_early};
use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{ConfigError, ServeStats, Server};

const BIG_BYTES: usize = 16 << 20;

/// A fresh root: `a.txt`, `docs/index.html`, and (with `big`) a 16 MiB `big.bin`.
fn make_root(name: &str, big: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hoop-http-api-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("a.txt"), b"hello\n").unwrap();
    std::fs::write(dir.join("docs/index.html"), b"<p>docs</p>\n").unwrap();
    if big {
        let body: Vec<u8> = (0..BIG_BYTES).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.join("big.bin"), body).unwrap();
    }
    dir
}

/// Reads the head of one response (byte by byte: bounded by the head size); an end of stream
/// in it is [`closed_early`].
fn read_head(s: &mut TcpStream) -> io::Result<Response> {
    Ok(parse_head(&try_read_head(s)?))
}

/// Exactly `len` body bytes; an end of stream before them is [`closed_early`].
fn read_body(s: &mut TcpStream, len: usize) -> io::Result<Vec<u8>> {
    let mut body = vec![0u8; len];
    read_fully(s, &mut body, "the whole body")?;
    Ok(body)
}

/// A small receive buffer, so that most of a big body waits on the server's side.
fn small_receive_buffer(s: &TcpStream) {
    let small: libc::c_int = 16 * 1024;
    // SAFETY: a live socket; the option value is a c_int of the size given.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Whether the server closed `s`: end of stream or a reset within `wait` (a connection the
/// server closes reads so at once; one it keeps open times out).
fn closed_by_server(s: &mut TcpStream, wait: Duration) -> bool {
    let _ = s.set_read_timeout(Some(wait));
    let mut byte = [0u8; 1];
    let closed = match s.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => resets::is_reset(&e),
    };
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    closed
}

fn drivers(test: impl Fn(DriverKind)) {
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        test(kind);
    }
}

/// A server thread of one attempt: its token (and `hold`'s) are cancelled when the attempt
/// ends, however it ends, so that an attempt a reset ended leaves no server behind.
struct Stopper(Vec<CancellationToken>);

impl Drop for Stopper {
    fn drop(&mut self) {
        for t in &self.0 {
            t.cancel();
        }
    }
}

/// Stops the server and waits (bounded) for what `serve` returned.
fn stop(token: &CancellationToken, done: mpsc::Receiver<ServeStats>) -> ServeStats {
    token.cancel();
    done.recv_timeout(THREAD_TIMEOUT)
        .expect("serve returned after the stop")
}

/// Three requests on one connection, then the server's counts. The counts of one server and
/// one connection are the subject, so a reset (injected) runs the whole of it again on a new
/// server.
#[test]
fn serves_a_file_on_a_listener_of_the_callers() {
    drivers(|kind| {
        let root = make_root(&format!("get-{kind}"), false);
        resets::retry(
            &format!("{kind}: three requests, one connection"),
            |attempt| {
                let server = Server::builder(&root).build().unwrap();
                let token = CancellationToken::new();
                let _stop = Stopper(vec![token.clone()]);
                let Some((addr, done)) =
                    spawn_server_for(kind, server.clone(), token.clone(), None, attempt)
                else {
                    return Ok(());
                };
                let mut s = try_connect(addr)?;
                let r = try_ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!((r.status, &r.body[..]), (200, &b"hello\n"[..]), "{kind}");
                let ctype = r.header("content-type").unwrap_or_default();
                assert!(ctype.starts_with("text/plain"), "{kind}: {ctype}");
                let r = try_ask(&mut s, "GET /docs/ HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!(
                    (r.status, &r.body[..]),
                    (200, &b"<p>docs</p>\n"[..]),
                    "{kind}"
                );
                let r = try_ask(&mut s, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!(r.status, 404, "{kind}");
                let open = server.open_connections();
                if open == 0 && closed_by_server(&mut s, Duration::from_secs(1)) {
                    return Err(closed_early("the count of open connections"));
                }
                assert_eq!(open, 1, "{kind}");
                drop(s);
                let stats = stop(&token, done);
                assert_eq!(
                    (stats.accepted, stats.requests),
                    (1, 3),
                    "{kind}: {stats:?}"
                );
                assert_eq!((stats.refused, stats.cut_off), (0, 0), "{kind}: {stats:?}");
                Ok(())
            },
        );
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// The token stops the server: a response in flight (16 MiB to a client that reads slowly)
/// finishes whole within the grace, `serve` returns, and the listener is closed. That one
/// response is the subject, so a reset (injected) runs the whole of it again on a new server.
#[test]
fn cancelling_the_token_lets_the_response_in_flight_finish() {
    drivers(|kind| {
        let root = make_root(&format!("stop-{kind}"), true);
        resets::retry(
            &format!("{kind}: a response in flight at the stop"),
            |attempt| {
                let server = Server::builder(&root)
                    .shutdown_grace(Duration::from_secs(20))
                    .build()
                    .unwrap();
                let token = CancellationToken::new();
                let _stop = Stopper(vec![token.clone()]);
                let Some((addr, done)) =
                    spawn_server_for(kind, server, token.clone(), None, attempt)
                else {
                    return Ok(());
                };
                let mut s = try_connect(addr)?;
                small_receive_buffer(&s);
                s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")?;
                let head = read_head(&mut s)?;
                assert_eq!(head.status, 200, "{kind}");
                let len: usize = head.header("content-length").unwrap().parse().unwrap();
                assert_eq!(len, BIG_BYTES, "{kind}");
                let first = read_body(&mut s, 64 * 1024)?;
                // The stop begins with most of the body unsent.
                token.cancel();
                let rest = read_body(&mut s, len - first.len())?;
                let body = [first, rest].concat();
                assert!(
                    body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
                    "{kind}: the body differs"
                );
                let stats = done
                    .recv_timeout(THREAD_TIMEOUT)
                    .expect("serve returned after the stop");
                assert_eq!((stats.requests, stats.cut_off), (1, 0), "{kind}: {stats:?}");
                // The connection ends after its response, and nothing listens any more.
                let mut byte = [0u8; 1];
                assert!(matches!(s.read_retry(&mut byte), Ok(0) | Err(_)), "{kind}");
                assert!(
                    TcpStream::connect_timeout(&addr, IO_TIMEOUT).is_err(),
                    "{kind}"
                );
                Ok(())
            },
        );
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// After `serve` returns (the graceful stop), no idle connection of it is left open, while its
/// runtime still runs: a keep-alive connection between requests and a connection that sent
/// nothing both read end of stream (a bounded wait: the idle timeout is far longer), and the
/// response in flight at the stop still finishes whole. Those three connections are the
/// subject, so a reset (injected) runs the whole of it again on a new server.
#[test]
fn idle_keep_alive_connections_are_closed_when_serve_returns() {
    drivers(|kind| {
        let root = make_root(&format!("idle-stop-{kind}"), true);
        resets::retry(
            &format!("{kind}: three connections at the stop"),
            |attempt| {
                let server = Server::builder(&root)
                    .shutdown_grace(Duration::from_secs(20))
                    .idle_timeout(Duration::from_secs(600))
                    .header_timeout(Duration::from_secs(600))
                    .build()
                    .unwrap();
                let token = CancellationToken::new();
                let hold = CancellationToken::new();
                let _stop = Stopper(vec![token.clone(), hold.clone()]);
                let Some((addr, done)) = spawn_server_for(
                    kind,
                    server.clone(),
                    token.clone(),
                    Some(hold.clone()),
                    attempt,
                ) else {
                    return Ok(());
                };
                let mut idle = try_connect(addr)?;
                let r = try_ask(&mut idle, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!((r.status, &r.body[..]), (200, &b"hello\n"[..]), "{kind}");
                assert_eq!(r.header("connection"), Some("keep-alive"), "{kind}");
                let mut silent = try_connect(addr)?;
                let mut busy = try_connect(addr)?;
                small_receive_buffer(&busy);
                busy.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")?;
                let head = read_head(&mut busy)?;
                assert_eq!(head.status, 200, "{kind}");
                let first = read_body(&mut busy, 64 * 1024)?;
                // Every connection is open and accepted when the stop begins.
                let open = server.open_connections();
                if open < 3
                    && [&mut idle, &mut silent]
                        .into_iter()
                        .any(|s| closed_by_server(s, Duration::from_millis(200)))
                {
                    return Err(closed_early("the stop, an idle connection"));
                }
                assert_eq!(open, 3, "{kind}");
                token.cancel();
                let rest = read_body(&mut busy, BIG_BYTES - first.len())?;
                let body = [first, rest].concat();
                assert!(
                    body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
                    "{kind}: the response in flight finished whole"
                );
                let stats = done
                    .recv_timeout(THREAD_TIMEOUT)
                    .expect("serve returned after the stop");
                assert_eq!((stats.requests, stats.cut_off), (2, 0), "{kind}: {stats:?}");
                // `serve` returned; its runtime still runs (until `hold`).
                for (what, s) in [("keep-alive", &mut idle), ("silent", &mut silent)] {
                    let mut byte = [0u8; 1];
                    let got = s.read_retry(&mut byte);
                    assert!(
                        matches!(got, Ok(0)),
                        "{kind}: the {what} connection reads end of stream, not {got:?}"
                    );
                }
                assert_eq!(server.open_connections(), 0, "{kind}");
                Ok(())
            },
        );
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// What the hook saw of one request: the request line, the status, the body bytes.
type Seen = (Option<String>, u16, u64);

/// Every answered request, in order, on one server: the log of one server is the subject, so
/// a reset (injected) runs the whole of it again on a new server.
#[test]
fn the_access_log_hook_sees_every_answered_request() {
    drivers(|kind| {
        let root = make_root(&format!("log-{kind}"), false);
        resets::retry(&format!("{kind}: six logged requests"), |attempt| {
            let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
            let lines: Arc<Mutex<Vec<String>>> = Arc::default();
            let (seen_w, lines_w) = (seen.clone(), lines.clone());
            let server = Server::builder(&root)
                .access_log(move |e| {
                    let req = e.request.map(|r| {
                        format!(
                            "{} {} HTTP/1.{}",
                            r.method,
                            String::from_utf8_lossy(r.target),
                            r.minor_version
                        )
                    });
                    seen_w.lock().unwrap().push((req, e.status, e.body_bytes));
                    lines_w.lock().unwrap().push(e.to_string());
                })
                .build()
                .unwrap();
            let token = CancellationToken::new();
            let _stop = Stopper(vec![token.clone()]);
            let Some((addr, done)) = spawn_server_for(kind, server, token.clone(), None, attempt)
            else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            assert_eq!(
                try_ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?.status,
                200
            );
            assert_eq!(
                try_ask(&mut s, "HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?.status,
                200
            );
            assert_eq!(
                try_ask(
                    &mut s,
                    "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1-2\r\n\r\n"
                )?
                .status,
                206
            );
            assert_eq!(
                try_ask(&mut s, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n")?.status,
                404
            );
            let mut old = try_connect(addr)?;
            assert_eq!(
                try_ask(&mut old, "GET /a.txt HTTP/1.0\r\n\r\n")?.status,
                200
            );
            // Not HTTP: 400, logged as "-", and the connection closes.
            let mut bad = try_connect(addr)?;
            assert_eq!(try_ask(&mut bad, "GARBAGE\r\n\r\n")?.status, 400);
            let seen = seen.lock().unwrap().clone();
            let want: Vec<Seen> = vec![
                (Some("GET /a.txt HTTP/1.1".into()), 200, 6),
                (Some("HEAD /a.txt HTTP/1.1".into()), 200, 0),
                (Some("GET /a.txt HTTP/1.1".into()), 206, 2),
                (
                    Some("GET /nope HTTP/1.1".into()),
                    404,
                    "404 Not Found\n".len() as u64,
                ),
                (Some("GET /a.txt HTTP/1.0".into()), 200, 6),
                (None, 400, "400 Bad Request\n".len() as u64),
            ];
            assert_eq!(seen, want, "{kind}");
            let lines = lines.lock().unwrap().clone();
            assert!(lines[0].starts_with('['), "{kind}: {}", lines[0]);
            assert!(
                lines[0].ends_with("] \"GET /a.txt HTTP/1.1\" 200"),
                "{kind}: {}",
                lines[0]
            );
            assert!(lines[5].ends_with("] \"-\" 400"), "{kind}: {}", lines[5]);
            drop((s, old, bad));
            let stats = stop(&token, done);
            assert_eq!(stats.requests, 6, "{kind}: {stats:?}");
            Ok(())
        });
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// `bind` then `run`: threads of the server's own, stopped by the builder's token. A reset
/// (injected) sends a request again on a new connection, and the counts say so.
#[test]
fn run_serves_on_threads_of_its_own_until_the_token() {
    let root = make_root("run", false);
    let token = CancellationToken::new();
    let bound = Server::builder(&root)
        .threads(2)
        .shutdown_on(token.clone())
        .build()
        .unwrap()
        .bind("127.0.0.1:0")
        .unwrap();
    let addr = bound.local_addr();
    assert_ne!(addr.port(), 0);
    let (tx, rx) = mpsc::channel();
    common::spawn(move || {
        let _ = tx.send(bound.run().map_err(|e| e.to_string()));
    });
    // Connections spread over both listeners; each gets its file.
    let mut retries = 0;
    for i in 0..8 {
        let r = resets::retry(&format!("request {i}"), |attempt| {
            retries += u64::from(attempt > 0);
            try_ask(
                &mut try_connect(addr)?,
                "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
            )
        });
        assert_eq!(
            (r.status, &r.body[..]),
            (200, &b"hello\n"[..]),
            "request {i}"
        );
    }
    token.cancel();
    let stats = rx
        .recv_timeout(THREAD_TIMEOUT)
        .expect("run returned after the stop")
        .expect("run succeeded");
    // Every connection was accepted; a request a reset ended may have been answered or not.
    assert_eq!(stats.accepted, 8 + retries, "{stats:?}");
    assert!(
        (8..=8 + retries).contains(&stats.requests),
        "{stats:?}, {retries} retried"
    );
    assert!(TcpStream::connect_timeout(&addr, IO_TIMEOUT).is_err());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_builder_refuses_a_bad_configuration() {
    let root = make_root("builder", false);
    let config_error = |b: hoop_http::Builder| {
        let e = b.build().expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        e.get_ref()
            .and_then(|e| e.downcast_ref::<ConfigError>())
            .cloned()
            .expect("a ConfigError")
    };
    let b = || Server::builder(&root);
    assert_eq!(config_error(b().max_conns(0)), ConfigError::ZeroMaxConns);
    assert_eq!(config_error(b().threads(0)), ConfigError::ZeroThreads);
    assert_eq!(
        config_error(b().header_timeout(Duration::ZERO)),
        ConfigError::ZeroHeaderTimeout
    );
    assert_eq!(
        config_error(b().idle_timeout(Duration::ZERO)),
        ConfigError::ZeroIdleTimeout
    );
    for bad in ["", ".hidden", "a/b", "nul\0"] {
        let e = config_error(b().index(bad));
        assert_eq!(e, ConfigError::BadIndex(bad.to_string()));
        assert!(e.to_string().contains("an index is one file name"), "{e}");
    }
    // Server::new checks the same.
    let cfg = hoop_http::Config {
        max_conns: 0,
        ..Default::default()
    };
    assert!(Server::new(&root, cfg).is_err());
    // A good one; the root must exist and be a directory.
    let ok = b()
        .index("home.htm")
        .max_conns(3)
        .cache_bytes(0)
        .threads(4)
        .build()
        .unwrap();
    assert_eq!(
        (ok.config().index.as_str(), ok.config().max_conns),
        ("home.htm", 3)
    );
    let e = Server::builder(root.join("missing")).build().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(Server::builder(root.join("a.txt")).build().is_err());
    let _ = std::fs::remove_dir_all(&root);
}
