//! Limits and timeouts, on both drivers: a slowloris client and idle connections are closed,
//! oversized requests get 413, 414 or 431 and the server goes on, and past `max_conns` a
//! connection is accepted and closed at once.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count and time.

mod serve;
mod site;
use hoop_test_support::ReadRetry as _;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hoop::DriverKind;
use hoop_http::Config;
use hoop_test_support::resets::{self, closed_early};
use site::{assert_closed, make_root, try_ask, try_connect, try_read_response, TestServer};

/// The earliest a connection may be closed for a timeout of 300 ms or more here: an end
/// before it is not the timeout (under injected resets, a reset the server saw; without them,
/// a bug).
const NOT_BEFORE: Duration = Duration::from_millis(250);

/// Reads from `s` until the server closes it (end of stream or a reset): `Ok` once it did,
/// any bytes or a timeout fail the test.
fn closed(s: &mut TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 64];
    match s.read_retry(&mut buf) {
        Ok(0) => Ok(()),
        Err(e) if resets::is_reset(&e) => Ok(()),
        other => panic!("expected the server to close, got {other:?}"),
    }
}

/// An end of the connection before [`NOT_BEFORE`] is an early close (see there).
fn not_before(start: Instant, what: &str) -> io::Result<()> {
    if start.elapsed() < NOT_BEFORE {
        return Err(closed_early(&format!(
            "{what} (after {:?})",
            start.elapsed()
        )));
    }
    Ok(())
}

fn timeouts(kind: DriverKind) {
    let (_base, root) = make_root(&format!("slow-{kind}"));
    let cfg = Config {
        header_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(400),
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    // A client that sends its head a byte every 50 ms is cut off after ~300 ms (not before:
    // a reset is retried on a new connection).
    resets::retry("a slowloris head", |_| {
        let mut s = try_connect(server.addr)?;
        let start = Instant::now();
        let mut cut_off = false;
        for b in b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Slow: "
            .iter()
            .chain([b'a'; 200].iter())
        {
            if s.write_all(&[*b]).is_err() {
                cut_off = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            if start.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        if !cut_off {
            closed(&mut s)?;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "slowloris not cut off"
        );
        not_before(start, "the header timeout")
    });

    // A connection that sends nothing is closed too.
    resets::retry("a silent connection", |_| {
        let mut s = try_connect(server.addr)?;
        let start = Instant::now();
        closed(&mut s)?;
        not_before(start, "the header timeout")
    });

    // An idle keep-alive connection is closed after the idle timeout.
    resets::retry("an idle keep-alive connection", |_| {
        let mut s = try_connect(server.addr)?;
        let r = try_ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?;
        assert_eq!(r.status, 200);
        let idle = Instant::now();
        closed(&mut s)?;
        not_before(idle, "the idle timeout")
    });

    // Others are served throughout.
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn slowloris_and_idle_connections_are_closed_uring() {
    timeouts(DriverKind::Uring);
}

#[test]
fn slowloris_and_idle_connections_are_closed_epoll() {
    timeouts(DriverKind::Epoll);
}

// ===== limits =====

fn limits_then_serves(kind: DriverKind) {
    let (_base, root) = make_root(&format!("limits-{kind}"));
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(17_000)
    );
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n");
    // A body longer than the files read past (64 KiB).
    let body = "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 65537\r\n\r\nhello".to_string();
    let chunked =
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_string();
    for (req, status) in [
        (long_uri, 414),
        (big_head, 431),
        (many, 431),
        (body, 413),
        (chunked, 413),
    ] {
        resets::retry(&format!("a request refused with {status}"), |_| {
            let mut s = try_connect(server.addr)?;
            let r = try_ask(&mut s, &req)?;
            assert_eq!(r.status, status);
            assert_eq!(r.header("connection"), Some("close"));
            assert_closed(&mut s);
            Ok(())
        });
        server.assert_running();
        assert_eq!(
            server.get("/a.txt").body,
            b"hello, world\n",
            "after {status}"
        );
    }
    // A short body on a GET is read past, whether it came with the head or after it: the
    // file is answered and the connection goes on.
    resets::retry("a GET with a short body", |_| {
        let mut s = try_connect(server.addr)?;
        let r = try_ask(
            &mut s,
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi",
        )?;
        assert_eq!((r.status, &r.body[..]), (200, &b"hello, world\n"[..]));
        s.write_all(b"HEAD /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n")?;
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.write_all(b"abc")?;
        let r = try_read_response(&mut s, true)?;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("keep-alive"));
        let r = try_ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?;
        assert_eq!((r.status, &r.body[..]), (200, &b"hello, world\n"[..]));
        Ok(())
    });
    // A head bigger than every limit, sent without end: refused, not buffered forever.
    let junk = vec![b'x'; 64 * 1024];
    resets::retry("a head without end", |_| {
        let mut s = try_connect(server.addr)?;
        let _ = s.write_all(b"GET /");
        let _ = s.write_all(&junk);
        let r = try_read_response(&mut s, false)?;
        assert_eq!(r.status, 414);
        Ok(())
    });
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn limits_413_414_431_then_still_serves_uring() {
    limits_then_serves(DriverKind::Uring);
}

#[test]
fn limits_413_414_431_then_still_serves_epoll() {
    limits_then_serves(DriverKind::Epoll);
}

/// Whether the server closed `s` (end of stream or a reset waiting), without waiting for it.
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    let _ = s.set_nonblocking(true);
    let closed = match s.peek(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => resets::is_reset(&e),
    };
    let _ = s.set_nonblocking(false);
    closed
}

/// Past `max_conns` (4) a connection is accepted and closed at once. The four open
/// connections are the subject, so when a reset (injected) closes one of them the whole
/// scenario runs again, on a new server.
fn max_conns(kind: DriverKind) {
    let (_base, root) = make_root(&format!("max-{kind}"));
    resets::retry("four connections held, a fifth closed at once", |attempt| {
        let cfg = Config {
            max_conns: 4,
            ..Config::default()
        };
        let Some(server) = TestServer::start_for(kind, &root, cfg, attempt) else {
            return Ok(());
        };
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut s = try_connect(server.addr)?;
            assert_eq!(
                try_ask(&mut s, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")?.status,
                200
            );
            held.push(s);
        }
        // The fifth is accepted and closed at once.
        let mut extra = try_connect(server.addr)?;
        let _ = extra.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut buf = [0u8; 64];
        match extra.read_retry(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Ok(_) => {
                // Served: right only if one of the four was closed under it (a reset).
                std::thread::sleep(Duration::from_millis(100));
                if held.iter_mut().any(closed_by_server) {
                    return Err(closed_early("the fifth connection, one of the four"));
                }
                panic!("a fifth connection was served past max_conns 4");
            }
            Err(e) => panic!("expected the server to close the fifth, got {e}"),
        }
        // Room again once one closes.
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut s = try_connect(server.addr)?;
            let _ = s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
            let mut buf = [0u8; 12];
            if s.read_exact(&mut buf).is_ok() {
                assert_eq!(&buf, b"HTTP/1.1 200");
                break;
            }
            assert!(Instant::now() < deadline, "no room after a close");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    });
}

#[test]
fn max_conns_accepts_and_closes_uring() {
    max_conns(DriverKind::Uring);
}

#[test]
fn max_conns_accepts_and_closes_epoll() {
    max_conns(DriverKind::Epoll);
}
