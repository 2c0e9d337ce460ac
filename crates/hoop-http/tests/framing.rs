//! Malformed framing stays refused, on both drivers: each request a review checked
//! by hand, with the status it must get, so that a parser change cannot reopen one. Content-
//! Length with Transfer-Encoding: 413; two different Content-Lengths: 400; a chunked GET: 413;
//! an obs-fold line: 400; a NUL in the target: 400; a space in a header name (inside it or
//! before the colon): 400; a thousand ranges, and overlapping ranges: 200 with the whole file
//! exactly once (no amplification); `bytes=-0`: 416.
//!
//! The server thread is `serve::spawn_server_for`, shared with `api.rs`; one request per
//! connection is read to its end (under injected resets, sent again on a new connection when
//! a reset ended it first). Every read has a timeout, every loop is bounded; nothing measures
//! speed.

mod serve;
use serve::{spawn_server_for, THREAD_TIMEOUT};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::Server;
use hoop_test_support::http::{
    exchange_until_closed, try_connect, try_read_response, try_read_to_close, Response,
};
use hoop_test_support::resets;

/// The served file's size.
const FILE_BYTES: usize = 1024;

/// A fresh root with `f.bin`, 1 KiB of a pattern.
fn make_root(name: &str) -> (PathBuf, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("hoop-http-framing-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let body: Vec<u8> = (0..FILE_BYTES).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("f.bin"), &body).unwrap();
    (dir, body)
}

/// One answer and how many bytes came after its body.
struct Answer {
    r: Response,
    extra: usize,
}

/// Sends `req` on a new connection and reads until the server closes it (every answer here
/// ends the connection: an error closes it, the others ask `Connection: close`); a reset
/// (injected) before the whole answer sends it again on a new connection.
fn ask(addr: SocketAddr, req: &[u8]) -> Answer {
    let (r, after) = exchange_until_closed(addr, req);
    Answer {
        r,
        extra: after.len(),
    }
}

/// The refused requests and their statuses.
fn refused() -> Vec<(&'static str, Vec<u8>, u16)> {
    vec![
        (
            "Content-Length with Transfer-Encoding",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello"
                .to_vec(),
            413,
        ),
        (
            "two different Content-Lengths",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello"
                .to_vec(),
            400,
        ),
        (
            "a chunked GET",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            413,
        ),
        (
            "obs-fold",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a NUL in the target",
            b"GET /f\0.bin HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a space in a header name",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n".to_vec(),
            400,
        ),
        (
            "a space before the colon",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bytes=-0",
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-0\r\nConnection: close\r\n\r\n"
                .to_vec(),
            416,
        ),
    ]
}

/// Range headers answered with the whole file, once.
fn whole_file_ranges() -> Vec<(&'static str, String)> {
    let thousand = (0..1000)
        .map(|i| format!("{}-{}", i % FILE_BYTES, i % FILE_BYTES))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        ("a thousand ranges", format!("bytes={thousand}")),
        (
            "the whole file three times",
            "bytes=0-1023,0-1023,0-1023".into(),
        ),
        ("two overlapping ranges", "bytes=0-100,50-200".into()),
        ("overlapping suffixes", "bytes=-1024,-512,0-".into()),
    ]
}

#[test]
fn malformed_framing_is_refused_and_ranges_do_not_amplify() {
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        let (root, file) = make_root(&kind.to_string());
        let server = Server::builder(&root).build().unwrap();
        let token = CancellationToken::new();
        let Some((addr, done)) = spawn_server_for(kind, server, token.clone(), None, 0) else {
            continue;
        };
        for (what, req, status) in refused() {
            let a = ask(addr, &req);
            assert_eq!(a.r.status, status, "{kind}: {what}: {:?}", a.r);
            assert_eq!(a.extra, 0, "{kind}: {what}: one answer");
            if status == 416 {
                assert_eq!(
                    a.r.header("content-range"),
                    Some(format!("bytes */{FILE_BYTES}").as_str()),
                    "{kind}: {what}"
                );
            }
        }
        for (what, range) in whole_file_ranges() {
            let req = format!(
                "GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: {range}\r\nConnection: close\r\n\r\n"
            );
            let a = ask(addr, req.as_bytes());
            assert_eq!(a.r.status, 200, "{kind}: {what}");
            assert_eq!(
                a.r.header("content-length"),
                Some(FILE_BYTES.to_string().as_str()),
                "{kind}: {what}"
            );
            assert!(a.r.body == file, "{kind}: {what}: the body is the file");
            assert_eq!(
                a.extra, 0,
                "{kind}: {what}: the file once, nothing after it"
            );
            assert!(
                a.r.header("content-type")
                    .is_none_or(|t| !t.starts_with("multipart")),
                "{kind}: {what}: no multipart answer"
            );
        }
        // Still serving afterwards.
        let a = ask(
            addr,
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(a.r.status == 200 && a.r.body == file, "{kind}: a plain GET");
        token.cancel();
        done.recv_timeout(THREAD_TIMEOUT)
            .expect("serve returned after the stop");
        let _ = std::fs::remove_dir_all(&root);
    }
}

/// A HEAD answered 416 has no body, as any HEAD response: its head keeps the
/// `Content-Length` a GET gets (the status text's), and the next response on the connection
/// follows the head directly. From the cache and from an opened file (`cache_bytes(0)`).
#[test]
fn head_answered_416_has_no_body() {
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        for cache in [true, false] {
            let what = format!("{kind}, cache {cache}");
            let (root, file) = make_root(&format!("head416-{kind}-{cache}"));
            let mut builder = Server::builder(&root);
            if !cache {
                builder = builder.cache_bytes(0);
            }
            let token = CancellationToken::new();
            let Some((addr, done)) =
                spawn_server_for(kind, builder.build().unwrap(), token.clone(), None, 0)
            else {
                continue;
            };
            // The GET's answer, for its Content-Length.
            let get = ask(
                addr,
                b"GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-0\r\nConnection: close\r\n\r\n",
            );
            assert_eq!(get.r.status, 416, "{what}: GET");
            let get_len = get.r.header("content-length").map(str::to_owned);
            assert_eq!(get_len, Some(get.r.body.len().to_string()), "{what}: GET");
            // HEAD (keep-alive), then a GET on the same connection, sent together: both on
            // one connection are the subject, so a reset (injected) sends both again on a new
            // one.
            resets::retry("a HEAD answered 416 and a GET, pipelined", |_| {
                let mut s = try_connect(addr)?;
                s.write_all(
                    b"HEAD /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-0\r\n\r\n\
                      GET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                )?;
                let head = try_read_response(&mut s, true)?;
                assert_eq!(head.status, 416, "{what}: {head:?}");
                assert_eq!(
                    head.header("content-length"),
                    get_len.as_deref(),
                    "{what}: the HEAD's Content-Length is the GET's"
                );
                // The next response follows the HEAD's head directly (no body between:
                // anything else there is not a status line, and fails the test), then the
                // server closes.
                let (next, after) = try_read_to_close(&mut s, false)?;
                assert_eq!(next.status, 200, "{what}: {next:?}");
                assert!(next.body == file, "{what}: then the whole file");
                assert!(after.is_empty(), "{what}: and nothing after it");
                Ok(())
            });
            token.cancel();
            done.recv_timeout(THREAD_TIMEOUT)
                .expect("serve returned after the stop");
            let _ = std::fs::remove_dir_all(&root);
        }
    }
}
