//! Pipelined requests, on both drivers: split at every byte, answered whole and in order,
//! and the same past the buffer ring's share of readers (connections read by readiness).
//!
//! The server runs in this process (`site::TestServer`); the share, read from the
//! environment, in a child process of this test binary. Every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::io::Write;
use std::time::Duration;

use hoop::DriverKind;
use hoop_test_support::resets;
use site::{assert_closed, make_root, try_connect, try_read_response, TestServer};

/// Three pipelined requests sent in two writes, split at every byte boundary: the three
/// responses come back whole and in order. Pipelining is the subject, so when a reset
/// (injected) ends a connection the whole split runs again on a new one.
fn pipelined(kind: DriverKind) {
    let (_base, root) = make_root(&format!("pipe-{kind}"));
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let reqs = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\nHEAD /b.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-5\r\n\r\n";
    let bytes = reqs.as_bytes();
    for cut in 0..=bytes.len() {
        resets::retry(&format!("three pipelined requests cut at {cut}"), |_| {
            let mut s = try_connect(server.addr)?;
            s.write_all(&bytes[..cut])?;
            if cut > 0 && cut < bytes.len() {
                // Let the first part arrive alone.
                std::thread::sleep(Duration::from_millis(2));
            }
            s.write_all(&bytes[cut..])?;
            let r = try_read_response(&mut s, false)?;
            assert_eq!(
                (r.status, r.body.as_slice()),
                (200, &b"hello, world\n"[..]),
                "cut {cut}"
            );
            let r = try_read_response(&mut s, true)?;
            assert_eq!(
                (r.status, r.header("content-length")),
                (200, Some("12")),
                "cut {cut}"
            );
            let r = try_read_response(&mut s, false)?;
            assert_eq!(
                (r.status, r.body.as_slice()),
                (206, &b"second"[..]),
                "cut {cut}"
            );
            Ok(())
        });
    }
    // Many in one write, the last one closing.
    let mut all = String::new();
    for i in 0..50 {
        let f = if i % 2 == 0 { "a" } else { "b" };
        all.push_str(&format!("GET /{f}.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
    }
    all.push_str("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    resets::retry("51 pipelined requests in one write", |_| {
        let mut s = try_connect(server.addr)?;
        s.write_all(all.as_bytes())?;
        for i in 0..51 {
            let r = try_read_response(&mut s, false)?;
            let want: &[u8] = if i % 2 == 0 {
                b"hello, world\n"
            } else {
                b"second file\n"
            };
            assert_eq!(r.body, want, "response {i}");
        }
        assert_closed(&mut s);
        Ok(())
    });
}

#[test]
fn pipelined_requests_split_at_every_byte_uring() {
    pipelined(DriverKind::Uring);
}

#[test]
fn pipelined_requests_split_at_every_byte_epoll() {
    pipelined(DriverKind::Epoll);
}

/// Past the buffer ring's share of readers (forced to 0 here; half the ring's buffers in a
/// real server), connections read by readiness into the thread's scratch: requests split at
/// every byte, pipelined and closing behave the same. On io_uring with ring-mapped buffers
/// the ring path stays (the setting only matters for a ring in user memory). The share comes
/// from the environment (`HOOP_HTTP_RING_READERS_MAX`), so this runs in a child process.
#[test]
fn readiness_reads_past_the_ring_share_epoll() {
    if site::in_child() {
        pipelined(DriverKind::Epoll);
        return;
    }
    site::run_in_child_with(
        "readiness_reads_past_the_ring_share_epoll",
        &[("HOOP_HTTP_RING_READERS_MAX", "0")],
    );
}
