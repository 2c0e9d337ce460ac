//! Many requests at once for files not yet cached, on both drivers: the server reads each file
//! once per thread (and compresses it once) while the others wait for its bytes
//! (`crate::fill`), and every client still gets exactly the file's bytes: small and big files
//! through the cache, a body compressed on the fly, a file rewritten between rounds (its new
//! bytes, never the old ones), and a client that leaves with its request unanswered (one of
//! them may have been leading a fill) taking nothing from the others.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::io::{Read, Write};
use std::sync::{Arc, Barrier};

use hoop::DriverKind;
use hoop_http::Config;
use site::{connect, make_root, Client, TestServer};

/// Clients asking at once.
const CLIENTS: usize = 12;
/// Rounds of requests at once, the file rewritten between the second and the third.
const ROUNDS: usize = 4;

fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .expect("a gzip body");
    out
}

/// `n` bytes of `seed`'s text: compressible, and different per seed.
fn text(seed: &str, n: usize) -> Vec<u8> {
    let line = format!("{seed}: body {{ color: red; margin: 0 auto; }}\n");
    line.as_bytes().iter().copied().cycle().take(n).collect()
}

fn at_once(kind: DriverKind) {
    let (_base, root) = make_root(&format!("fills-{kind}"));
    let site = root.join("site");
    std::fs::create_dir_all(&site).unwrap();
    let files = [("small.css", 12 * 1024), ("big.css", 900 * 1024)];
    for (name, n) in files {
        std::fs::write(site.join(name), text("v1", n)).unwrap();
    }
    let cfg = Config {
        compress: true,
        // Every body through the cache (or the compressor), none by sendfile.
        sendfile_min_bytes: u64::MAX,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let addr = server.addr;
    for round in 0..ROUNDS {
        let version = if round < 2 { "v1" } else { "v2" };
        if round == 2 {
            for (name, n) in files {
                std::fs::write(site.join(name), text("v2", n)).unwrap();
            }
        }
        for (name, n) in files {
            let want = Arc::new(text(version, n));
            for gzip in [false, true] {
                let start = Arc::new(Barrier::new(CLIENTS + 1));
                let clients: Vec<_> = (0..CLIENTS)
                    .map(|i| {
                        let (start, want) = (start.clone(), want.clone());
                        let path = format!("/site/{name}");
                        hoop_test_support::spawn(move || {
                            let mut client = Client::new(addr);
                            let headers = if gzip {
                                "Accept-Encoding: gzip\r\n"
                            } else {
                                ""
                            };
                            start.wait();
                            let r = client.ask_with("GET", &path, headers);
                            assert_eq!(r.status, 200, "{path} gzip {gzip} client {i}");
                            let body = if gzip {
                                assert_eq!(r.header("content-encoding"), Some("gzip"));
                                gunzip(&r.body)
                            } else {
                                assert_eq!(r.header("content-encoding"), None);
                                r.body
                            };
                            assert!(body == *want, "{path} gzip {gzip} client {i}: other bytes");
                        })
                    })
                    .collect();
                // A client that asks too and leaves at once: it may be the one reading.
                let mut leaver = connect(addr);
                let req = format!("GET /site/{name} HTTP/1.1\r\nHost: x\r\n\r\n");
                start.wait();
                let _ = leaver.write_all(req.as_bytes());
                drop(leaver);
                for c in clients {
                    c.join().expect("a client thread");
                }
            }
        }
    }
    server.assert_running();
}

#[test]
fn requests_at_once_share_one_fill_uring() {
    at_once(DriverKind::Uring);
}

#[test]
fn requests_at_once_share_one_fill_epoll() {
    at_once(DriverKind::Epoll);
}
