//! Limits and timeouts, on both drivers: a slowloris client and idle connections are closed,
//! oversized requests get 413, 414 or 431 and the server goes on, and past `max_conns` a
//! connection is accepted and closed at once.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count and time.

mod serve;
mod site;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hoop::DriverKind;
use hoop_http::Config;
use site::{ask, assert_closed, make_root, read_response, TestServer};

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
    limits_then_serves(DriverKind::Uring);
}

#[test]
fn limits_413_414_431_then_still_serves_epoll() {
    limits_then_serves(DriverKind::Epoll);
}

fn max_conns(kind: DriverKind) {
    let (_base, root) = make_root(&format!("max-{kind}"));
    let cfg = Config {
        max_conns: 4,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
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
    max_conns(DriverKind::Uring);
}

#[test]
fn max_conns_accepts_and_closes_epoll() {
    max_conns(DriverKind::Epoll);
}
