//! Bodies, on both drivers, with and without the cache: every size around the buffer and
//! chunk sizes (whole and a range), a file replaced or rewritten while it is served (every
//! answer one whole version), and a sparse file over 4 GiB (64-bit sizes and offsets).
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoop::DriverKind;
use hoop_http::Config;
use site::{bytes, make_root, TestServer};

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

fn bodies(kind: DriverKind, cache: u64) {
    let (_base, root) = make_root(&format!("bodies-{kind}-{cache}"));
    for (i, &n) in SIZES.iter().enumerate() {
        std::fs::write(root.join(format!("f{n}.bin")), bytes(n, i as u64)).unwrap();
    }
    let cfg = Config {
        cache_bytes: cache,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    for round in 0..2 {
        for (i, &n) in SIZES.iter().enumerate() {
            let r = s.ask(&format!("GET /f{n}.bin HTTP/1.1\r\nHost: t\r\n\r\n"));
            assert_eq!(r.status, 200);
            assert!(r.body == bytes(n, i as u64), "{n} bytes, round {round}");
            // A range in the middle.
            if n > 10 {
                let (a, b) = (n / 3, n - n / 4);
                let r = s.ask(&format!(
                    "GET /f{n}.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={a}-{b}\r\n\r\n"
                ));
                assert_eq!(r.status, 206);
                assert!(r.body == bytes(n, i as u64)[a..=b], "{n} bytes {a}-{b}");
            }
        }
    }
}

#[test]
fn bodies_of_every_size_uring() {
    bodies(DriverKind::Uring, 64 << 20);
    bodies(DriverKind::Uring, 0);
}

#[test]
fn bodies_of_every_size_epoll() {
    bodies(DriverKind::Epoll, 64 << 20);
    bodies(DriverKind::Epoll, 0);
}

/// A file replaced (rename) and rewritten in place while it is served: every response is one
/// whole version with its own length, never a mix of two lengths or a short body.
fn changing_file(kind: DriverKind, cache: u64) {
    let (base, root) = make_root(&format!("change-{kind}-{cache}"));
    let versions: Vec<Vec<u8>> = [1000usize, 70_000, 2 * (1 << 20) + 3]
        .iter()
        .enumerate()
        .map(|(i, &n)| bytes(n, 100 + i as u64))
        .collect();
    std::fs::write(root.join("c.bin"), &versions[0]).unwrap();
    let cfg = Config {
        cache_bytes: cache,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
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
    let mut s = server.client();
    for _ in 0..150 {
        let r = s.ask("GET /c.bin HTTP/1.1\r\nHost: t\r\n\r\n");
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
    assert!(s.ask("GET /c.bin HTTP/1.1\r\nHost: t\r\n\r\n").body == now);
}

#[test]
fn files_changing_while_served_uring() {
    changing_file(DriverKind::Uring, 64 << 20);
    changing_file(DriverKind::Uring, 0);
}

#[test]
fn files_changing_while_served_epoll() {
    changing_file(DriverKind::Epoll, 64 << 20);
    changing_file(DriverKind::Epoll, 0);
}

/// A sparse file over 4 GiB: its length, a range past 4 GiB, and a suffix range, with 64-bit
/// sizes and offsets throughout (only the ranges' bytes are read).
fn over_4_gib(kind: DriverKind) {
    let (_base, root) = make_root(&format!("big-{kind}"));
    let size: u64 = (5 << 30) + 3;
    let f = std::fs::File::create(root.join("huge.bin")).unwrap();
    f.set_len(size).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"tail!", size - 5).unwrap();
    f.write_all_at(b"past4", 1 << 32).unwrap();
    drop(f);
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let mut s = server.client();
    let r = s.ask("HEAD /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
    let r =
        s.ask("GET /huge.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=4294967296-4294967300\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &b"past4"[..]));
    let want = format!("bytes 4294967296-4294967300/{size}");
    assert_eq!(r.header("content-range"), Some(want.as_str()));
    let r = s.ask("GET /huge.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=-5\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &b"tail!"[..]));
}

#[test]
fn files_over_4_gib_uring() {
    over_4_gib(DriverKind::Uring);
}

#[test]
fn files_over_4_gib_epoll() {
    over_4_gib(DriverKind::Epoll);
}
