//! Compression on the fly (`Config::compress`), on both drivers, with and without the file
//! cache: the coding the client prefers, the body that decodes to the file, `Vary` and an ETag
//! per coding, conditionals and ranges on the encoded bytes, a precompressed variant winning,
//! what is not compressed (other types, small files, no `Accept-Encoding`), and a changed file
//! compressed again.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::io::Read;

use hoop::DriverKind;
use hoop_http::Config;
use site::{make_root, TestServer};

fn decode(coding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        "zstd" => out = zstd::stream::decode_all(body).unwrap(),
        other => panic!("coding {other}"),
    }
    out
}

fn compress(kind: DriverKind, cache: u64) {
    let (_base, root) = make_root(&format!("compress-{kind}-{cache}"));
    let site = root.join("site");
    std::fs::create_dir_all(&site).unwrap();
    let css: Vec<u8> = b"body { color: red; margin: 0 auto; }\n".repeat(200);
    std::fs::write(site.join("a.css"), &css).unwrap();
    std::fs::write(site.join("b.js"), b"let x = 1;\n".repeat(100)).unwrap();
    std::fs::write(site.join("b.js.gz"), b"PRE-GZ").unwrap();
    std::fs::write(site.join("small.css"), b"p {}\n").unwrap();
    std::fs::write(site.join("img.png"), vec![b'x'; 4096]).unwrap();
    let cfg = Config {
        cache_bytes: cache,
        compress: true,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();

    // Each coding, chosen by the weights; twice, the second from the compressed cache.
    let mut etags = Vec::new();
    for (accept, coding) in [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip;q=0.5, br;q=0.9, zstd;q=0.1", "br"),
        ("gzip, deflate", "gzip"),
    ] {
        for round in 0..2 {
            let r = s.ask_with(
                "GET",
                "/site/a.css",
                &format!("Accept-Encoding: {accept}\r\n"),
            );
            assert_eq!(r.status, 200, "{accept}");
            assert_eq!(r.header("content-encoding"), Some(coding), "{accept}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"));
            assert_eq!(r.header("content-type"), Some("text/css"));
            assert!(r.body.len() < css.len() / 5, "{accept}: {}", r.body.len());
            assert_eq!(decode(coding, &r.body), css, "{accept} round {round}");
            etags.push((coding, r.header("etag").unwrap().to_string()));
        }
    }
    let identity = s.ask_with("GET", "/site/a.css", "");
    assert_eq!((identity.status, &identity.body), (200, &css));
    assert_eq!(identity.header("content-encoding"), None);
    assert_eq!(identity.header("vary"), Some("Accept-Encoding"));
    let id_etag = identity.header("etag").unwrap().to_string();
    for (coding, etag) in &etags {
        assert_ne!(etag, &id_etag, "{coding}");
        let same = etags.iter().filter(|(c, _)| c == coding);
        assert!(same.clone().all(|(_, e)| e == etag), "one ETag per coding");
    }

    // Conditionals and ranges on the encoded bytes.
    let (_, gz_etag) = etags.iter().find(|(c, _)| *c == "gzip").unwrap();
    let r = s.ask_with(
        "GET",
        "/site/a.css",
        &format!("Accept-Encoding: gzip\r\nIf-None-Match: {gz_etag}\r\n"),
    );
    assert_eq!(r.status, 304);
    let whole = s.ask_with("GET", "/site/a.css", "Accept-Encoding: gzip\r\n");
    let r = s.ask_with(
        "GET",
        "/site/a.css",
        "Accept-Encoding: gzip\r\nRange: bytes=0-9\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (206, &whole.body[..10]));
    assert_eq!(r.header("content-encoding"), Some("gzip"));

    // A precompressed variant wins; other types, small files and a client without
    // Accept-Encoding get the file.
    let r = s.ask_with("GET", "/site/b.js", "Accept-Encoding: gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"PRE-GZ"[..]));
    let r = s.ask_with("GET", "/site/b.js", "Accept-Encoding: br\r\n");
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &r.body), b"let x = 1;\n".repeat(100));
    let r = s.ask_with("GET", "/site/img.png", "Accept-Encoding: gzip\r\n");
    assert_eq!((r.header("content-encoding"), r.body.len()), (None, 4096));
    let r = s.ask_with("GET", "/site/small.css", "Accept-Encoding: gzip\r\n");
    assert_eq!(
        (r.header("content-encoding"), &r.body[..]),
        (None, &b"p {}\n"[..])
    );
    let r = s.ask_with("HEAD", "/site/a.css", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        r.header("content-length"),
        Some(&*whole.body.len().to_string())
    );

    // A changed file is compressed again.
    let new_css: Vec<u8> = b"h1 { font-weight: bold; }\n".repeat(300);
    std::fs::write(site.join("a.css"), &new_css).unwrap();
    let r = s.ask_with("GET", "/site/a.css", "Accept-Encoding: gzip\r\n");
    assert_eq!(decode("gzip", &r.body), new_css);
    assert_ne!(r.header("etag"), Some(gz_etag.as_str()));
}

#[test]
fn compress_on_the_fly_uring() {
    compress(DriverKind::Uring, 64 << 20);
    compress(DriverKind::Uring, 0);
}

#[test]
fn compress_on_the_fly_epoll() {
    compress(DriverKind::Epoll, 64 << 20);
    compress(DriverKind::Epoll, 0);
}
