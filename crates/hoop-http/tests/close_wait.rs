//! Many connections leave nothing behind, on both drivers: no socket in CLOSE_WAIT and no
//! more descriptors than before.
//!
//! The server runs in this process (`site::TestServer`), so the descriptors counted are this
//! process's: this file holds only these tests, and they take turns (`common::serial`). Every
//! client read and write has a timeout; every loop is bounded in count and time.

use hoop_test_support as common;
mod serve;
mod site;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hoop::DriverKind;
use hoop_test_support::resets;
use site::{make_root, try_ask, try_connect, TestServer};

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
/// client and half by the server (`Connection: close`; and any that a reset ended, by the
/// server): afterwards no CLOSE_WAIT and no more fds than before. (2,000 rather than 10,000
/// keeps CI fast and exercises the same paths: every wave reuses slots of the fixed-file table
/// freed by the previous one.) The server and the clients are this process: the fds counted
/// are both sides', and no other test runs meanwhile.
fn many_connections(kind: DriverKind) {
    let _serial = common::serial();
    let (_base, root) = make_root(&format!("many-{kind}"));
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    assert_eq!(server.get("/a.txt").status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let fds_before = common::fd_count();
    for wave in 0..10 {
        let mut conns: Vec<TcpStream> = (0..200).map(|_| server.connect()).collect();
        for (i, s) in conns.iter_mut().enumerate() {
            let close = if i % 2 == 0 { "close" } else { "keep-alive" };
            let req = format!("GET /b.txt HTTP/1.1\r\nHost: t\r\nConnection: {close}\r\n\r\n");
            // A reset (injected) ends this one: the request goes again on a new connection,
            // which takes its place in the wave.
            let r = resets::retry("a request of the wave", |attempt| {
                if attempt > 0 {
                    *s = try_connect(server.addr)?;
                }
                try_ask(s, &req)
            });
            assert_eq!(r.body, b"second file\n", "wave {wave}");
        }
        drop(conns);
    }
    // The server closes its side of every connection promptly.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cw = close_wait_on(server.addr.port());
        let fds = common::fd_count_now();
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
    many_connections(DriverKind::Uring);
}

#[test]
fn many_connections_leave_no_close_wait_epoll() {
    many_connections(DriverKind::Epoll);
}
