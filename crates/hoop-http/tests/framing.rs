//! Malformed framing stays refused, on both drivers: each request a review checked
//! by hand, with the status it must get, so that a parser change cannot reopen one. Content-
//! Length with Transfer-Encoding: 413; two different Content-Lengths: 400; a chunked GET: 413;
//! an obs-fold line: 400; a NUL in the target: 400; a space in a header name (inside it or
//! before the colon): 400; a thousand ranges, and overlapping ranges: 200 with the whole file
//! exactly once (no amplification); `bytes=-0`: 416.
//!
//! The server thread is `serve::spawn_server`, shared with `api.rs`; one request per connection
//! is read to its end. Every read has a timeout, every loop is
//! bounded; nothing measures speed.

use hoop_test_support as common;
mod serve;
use serve::{spawn_server, THREAD_TIMEOUT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::Server;

const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The served file's size.
const FILE_BYTES: usize = 1024;
/// Most bytes read of one answer.
const MAX_ANSWER: usize = 1 << 20;

/// A fresh root with `f.bin`, 1 KiB of a pattern.
fn make_root(name: &str) -> (PathBuf, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("hoop-http-framing-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let body: Vec<u8> = (0..FILE_BYTES).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("f.bin"), &body).unwrap();
    (dir, body)
}

/// One answer: status, headers (lower-case names), body, and bytes after the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    extra: usize,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `req` on a new connection and reads until the server closes it (every answer here
/// ends the connection: an error closes it, the others ask `Connection: close`).
fn ask(addr: SocketAddr, req: &[u8]) -> Answer {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(req).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while got.len() < MAX_ANSWER {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // A reset after the answer (the server closed with request bytes unread).
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !got.is_empty() => break,
            Err(e) => panic!("read: {e} after {} bytes", got.len()),
        }
    }
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&got)));
    let text = String::from_utf8(got[..end].to_vec()).unwrap();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let rest = &got[end + 4..];
    assert!(rest.len() >= len, "body cut short: {} of {len}", rest.len());
    Answer {
        status,
        headers,
        body: rest[..len].to_vec(),
        extra: rest.len() - len,
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
    let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        let (root, file) = make_root(&kind.to_string());
        let server = Server::builder(&root).build().unwrap();
        let token = CancellationToken::new();
        let Some((addr, done)) = spawn_server(kind, server, token.clone()) else {
            continue;
        };
        for (what, req, status) in refused() {
            let a = ask(addr, &req);
            assert_eq!(a.status, status, "{kind}: {what}: {a:?}");
            assert_eq!(a.extra, 0, "{kind}: {what}: one answer");
            if status == 416 {
                assert_eq!(
                    a.header("content-range"),
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
            assert_eq!(a.status, 200, "{kind}: {what}");
            assert_eq!(
                a.header("content-length"),
                Some(FILE_BYTES.to_string().as_str()),
                "{kind}: {what}"
            );
            assert!(a.body == file, "{kind}: {what}: the body is the file");
            assert_eq!(
                a.extra, 0,
                "{kind}: {what}: the file once, nothing after it"
            );
            assert!(
                a.header("content-type")
                    .is_none_or(|t| !t.starts_with("multipart")),
                "{kind}: {what}: no multipart answer"
            );
        }
        // Still serving afterwards.
        let a = ask(
            addr,
            b"GET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(a.status == 200 && a.body == file, "{kind}: a plain GET");
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
    let _faults = common::faults_off(&["econnreset"], common::NO_RESETS);
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        for cache in [true, false] {
            let what = format!("{kind}, cache {cache}");
            let (root, file) = make_root(&format!("head416-{kind}-{cache}"));
            let mut builder = Server::builder(&root);
            if !cache {
                builder = builder.cache_bytes(0);
            }
            let token = CancellationToken::new();
            let Some((addr, done)) = spawn_server(kind, builder.build().unwrap(), token.clone())
            else {
                continue;
            };
            // The GET's answer, for its Content-Length.
            let get = ask(
                addr,
                b"GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-0\r\nConnection: close\r\n\r\n",
            );
            assert_eq!(get.status, 416, "{what}: GET");
            let get_len = get.header("content-length").map(str::to_owned);
            assert_eq!(get_len, Some(get.body.len().to_string()), "{what}: GET");
            // HEAD (keep-alive), then a GET on the same connection, sent together.
            let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
            s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            s.write_all(
                b"HEAD /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-0\r\n\r\n\
                  GET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .expect("write");
            let mut got = Vec::new();
            let mut buf = [0u8; 16 * 1024];
            while got.len() < MAX_ANSWER {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("{what}: read: {e} after {} bytes", got.len()),
                }
            }
            let end = got
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("a head")
                + 4;
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 416 "), "{what}: {head}");
            let len = get_len.as_deref().unwrap_or("?");
            assert!(
                head.contains(&format!("\r\ncontent-length: {len}\r\n")),
                "{what}: the HEAD's Content-Length is the GET's: {head}"
            );
            let rest = &got[end..];
            assert!(
                rest.starts_with(b"HTTP/1.1 200 "),
                "{what}: the next response follows the HEAD's head, no body between: {:?}",
                String::from_utf8_lossy(&rest[..rest.len().min(64)])
            );
            assert!(rest.ends_with(&file), "{what}: then the whole file");
            token.cancel();
            done.recv_timeout(THREAD_TIMEOUT)
                .expect("serve returned after the stop");
            let _ = std::fs::remove_dir_all(&root);
        }
    }
}
