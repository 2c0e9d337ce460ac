//! Precompressed variants (`a.css.br`, `a.css.zst`, `a.css.gz`), on both drivers, with and
//! without the cache: negotiation by `Accept-Encoding` (weights, then br, zstd, gzip), `Vary`,
//! the variant's own validators, ranges and conditionals on the encoded file, stale and
//! non-regular variants ignored, and `precompressed: false`.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::path::Path;
use std::time::Duration;

use hoop::DriverKind;
use hoop_http::Config;
use site::{make_root, TestServer};

/// Sets `path`'s modification time to `secs` after the epoch.
fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// `site/` in a test root: `a.css` with fresh `.br`, `.zst` and `.gz` variants, `stale.js`
/// with an older `.gz` and `.zst`, `b.css` with only a fresh `.zst`, `plain.css` without any, `img.png` with a `.gz` (not a compressible type),
/// `dir.css` whose `.gz` is a directory.
fn make_precompressed(root: &Path) {
    let site = root.join("site");
    std::fs::create_dir_all(site.join("dir.css.gz")).unwrap();
    let t = 1_700_000_000;
    for (name, data, mtime) in [
        ("a.css", &b"body { color: red }\n"[..], t),
        ("a.css.br", b"BR-BYTES", t + 10),
        ("a.css.gz", b"GZ-BYTES-0123456789", t),
        ("stale.js", b"let x = 1;\n", t),
        ("stale.js.gz", b"OLD-GZ", t - 100),
        ("a.css.zst", b"ZSTD-BYTES-abcdefghij", t + 1),
        ("stale.js.zst", b"OLD-ZST", t - 1),
        ("b.css", b"b {}\n", t),
        ("b.css.zst", b"B-ZST", t),
        ("plain.css", b"p {}\n", t),
        ("img.png", b"PNG", t),
        ("img.png.gz", b"PNG-GZ", t + 10),
        ("dir.css", b"d {}\n", t),
    ] {
        std::fs::write(site.join(name), data).unwrap();
        set_mtime(&site.join(name), mtime);
    }
    // As `brotli -k` leaves them: the source modified at .7 of a second, the variant given
    // the same second with its fraction dropped.
    std::fs::write(site.join("same.css"), b"s {}\n").unwrap();
    std::fs::write(site.join("same.css.br"), b"SAME-BR").unwrap();
    let at = |ns| std::time::UNIX_EPOCH + Duration::new(t, ns);
    let set = |name: &str, when| {
        let f = std::fs::File::options()
            .write(true)
            .open(site.join(name))
            .unwrap();
        f.set_modified(when).unwrap();
    };
    set("same.css", at(700_000_000));
    set("same.css.br", at(0));
}

fn precompressed(kind: DriverKind, cache: u64) {
    let (_base, root) = make_root(&format!("precomp-{kind}-{cache}"));
    make_precompressed(&root);
    let cfg = Config {
        cache_bytes: cache,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    let identity = b"body { color: red }\n";
    let gz = b"GZ-BYTES-0123456789";

    // Twice each, so that the second answer comes from the cache where there is one.
    for _ in 0..2 {
        // No Accept-Encoding: the file itself, with Vary (the answer depends on the field).
        let r = s.ask_with("GET", "/site/a.css", "");
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let identity_etag = r.header("etag").unwrap().to_string();

        // br first at equal weight.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            "Accept-Encoding: gzip, deflate, br\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &b"BR-BYTES"[..]));
        assert_eq!(r.header("content-encoding"), Some("br"));
        assert_eq!(r.header("content-type"), Some("text/css"));
        assert_eq!(r.header("content-length"), Some("8"));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let br_etag = r.header("etag").unwrap().to_string();
        assert_ne!(br_etag, identity_etag);

        // gzip by weight; the variant's own validators.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            "Accept-Encoding: br;q=0.5, gzip;q=0.8\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &gz[..]));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.header("content-type"), Some("text/css"));
        assert_eq!(r.header("content-length"), Some("19"));
        let gz_etag = r.header("etag").unwrap().to_string();
        assert!(gz_etag != identity_etag && gz_etag != br_etag);

        // Two fields are one list, names and spaces as they come.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            "accept-encoding: GZIP ; q=0.5\r\nACCEPT-ENCODING:\tbr;q=0.1\r\n",
        );
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let r = s.ask_with("GET", "/site/a.css", "Accept-Encoding: *\r\n");
        assert_eq!(r.header("content-encoding"), Some("br"));

        // q=0 refuses both: the file itself.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            "Accept-Encoding: br;q=0, gzip;q=0\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        assert_eq!(r.header("etag"), Some(identity_etag.as_str()));

        // Range and conditionals apply to the encoded file.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            "Accept-Encoding: gzip\r\nRange: bytes=0-3\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (206, &b"GZ-B"[..]));
        assert_eq!(r.header("content-range"), Some("bytes 0-3/19"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            &format!("Accept-Encoding: gzip\r\nRange: bytes=-4\r\nIf-Range: {gz_etag}\r\n"),
        );
        assert_eq!((r.status, &r.body[..]), (206, &b"6789"[..]));
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            &format!("Accept-Encoding: gzip\r\nIf-None-Match: {gz_etag}\r\n"),
        );
        assert_eq!(r.status, 304);
        assert_eq!(r.header("etag"), Some(gz_etag.as_str()));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        // The same validator from a client that takes no coding: not its copy.
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            &format!("If-None-Match: {gz_etag}\r\n"),
        );
        assert_eq!((r.status, &r.body[..]), (200, &identity[..]));

        // HEAD alike.
        let r = s.ask_with("HEAD", "/site/a.css", "Accept-Encoding: br\r\n");
        assert_eq!(r.status, 200);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-encoding"), Some("br"));
        assert_eq!(r.header("content-length"), Some("8"));
        assert_eq!(r.header("etag"), Some(br_etag.as_str()));

        // A variant of the file's second is fresh, whatever the fractions (brotli's).
        let r = s.ask_with("GET", "/site/same.css", "Accept-Encoding: br\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"SAME-BR"[..]));
        assert_eq!(r.header("content-encoding"), Some("br"));

        // A variant older than the file is ignored; so is one that is not a regular file.
        let r = s.ask_with("GET", "/site/stale.js", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"let x = 1;\n"[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let r = s.ask_with("GET", "/site/dir.css", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"d {}\n"[..]));
        // No variant, identity refused: the file anyway (as nginx; not 406).
        let r = s.ask_with(
            "GET",
            "/site/plain.css",
            "Accept-Encoding: gzip, identity;q=0\r\n",
        );
        assert_eq!((r.status, &r.body[..]), (200, &b"p {}\n"[..]));
        assert_eq!(r.header("content-encoding"), None);
        // Not a compressible type: no lookup, no Vary.
        let r = s.ask_with("GET", "/site/img.png", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"PNG"[..]));
        assert_eq!(
            (r.header("content-encoding"), r.header("vary")),
            (None, None)
        );
        // The variant asked for by name: a plain file, as before.
        let r = s.ask_with("GET", "/site/a.css.gz", "Accept-Encoding: gzip\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &gz[..]));
        assert_eq!(r.header("content-encoding"), None);
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert_ne!(r.header("etag"), Some(gz_etag.as_str()));
    }

    zstd_variants(&mut s);

    // A variant made fresh again is served (and the cache notices the change).
    set_mtime(&root.join("site/stale.js.gz"), 1_800_000_000);
    let r = s.ask_with("GET", "/site/stale.js", "Accept-Encoding: gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"OLD-GZ"[..]));
    assert_eq!(r.header("content-type"), Some("application/javascript"));
    drop(server);

    // Off (`--no-precompressed`): the file itself, no Vary.
    let cfg = Config {
        cache_bytes: cache,
        precompressed: false,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    let r = s.ask_with("GET", "/site/a.css", "Accept-Encoding: br, gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &identity[..]));
    assert_eq!(
        (r.header("content-encoding"), r.header("vary")),
        (None, None)
    );
    drop(server);
    // On again (the default).
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let r = server
        .client()
        .ask_with("GET", "/site/a.css", "Accept-Encoding: br\r\n");
    assert_eq!(r.header("content-encoding"), Some("br"));
}

/// `.zst` beside `.br` and `.gz`: chosen by weight, between br and gzip at a tie, with its own
/// validators; a stale one ignored; by name a plain file.
fn zstd_variants(s: &mut site::Client) {
    let zst = b"ZSTD-BYTES-abcdefghij";
    let identity = b"body { color: red }\n";
    let mut etags = Vec::new();
    for _ in 0..2 {
        for (accept, want) in [
            ("zstd", Some("zstd")),
            ("ZSTD;q=1.0", Some("zstd")),
            ("gzip, zstd", Some("zstd")),
            ("gzip, zstd, br", Some("br")),
            ("br;q=0.5, zstd;q=0.9, gzip", Some("gzip")),
            ("br;q=0.5, zstd;q=0.9, gzip;q=0.8", Some("zstd")),
            ("zstd;q=0.2, br;q=0.1", Some("zstd")),
            ("zstd;q=0, gzip", Some("gzip")),
            ("zstd;q=0.5, identity", None),
            ("*;q=0.5, br;q=0", Some("zstd")),
        ] {
            let r = s.ask_with(
                "GET",
                "/site/a.css",
                &format!("Accept-Encoding: {accept}\r\n"),
            );
            assert_eq!(r.status, 200, "{accept}");
            assert_eq!(r.header("content-encoding"), want, "{accept}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept}");
            assert_eq!(r.header("content-type"), Some("text/css"), "{accept}");
            match want {
                Some("zstd") => {
                    assert_eq!(r.body, zst, "{accept}");
                    assert_eq!(r.header("content-length"), Some("21"));
                    etags.push(r.header("etag").unwrap().to_string());
                }
                None => assert_eq!(r.body, identity, "{accept}"),
                _ => {}
            }
        }
    }
    // Its own validator: one for every answer in zstd, none of the others'.
    assert!(etags.windows(2).all(|w| w[0] == w[1]));
    let zst_etag = etags[0].clone();
    for accept in ["br", "gzip", "identity"] {
        let r = s.ask_with(
            "GET",
            "/site/a.css",
            &format!("Accept-Encoding: {accept}\r\n"),
        );
        assert_ne!(r.header("etag"), Some(zst_etag.as_str()), "{accept}");
    }
    let r = s.ask_with(
        "GET",
        "/site/a.css",
        &format!("Accept-Encoding: zstd\r\nIf-None-Match: {zst_etag}\r\n"),
    );
    assert_eq!(r.status, 304);
    // Ranges on the encoded bytes, several too.
    let r = s.ask_with(
        "GET",
        "/site/a.css",
        "Accept-Encoding: zstd\r\nRange: bytes=-4\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (206, &b"ghij"[..]));
    assert_eq!(r.header("content-range"), Some("bytes 17-20/21"));
    let r = s.ask_with(
        "GET",
        "/site/a.css",
        "Accept-Encoding: zstd\r\nRange: bytes=0-3,-4\r\n",
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("zstd"));
    let body = String::from_utf8_lossy(&r.body);
    assert!(
        body.contains("Content-Range: bytes 0-3/21\r\n\r\nZSTD\r\n"),
        "{body}"
    );
    assert!(
        body.contains("Content-Range: bytes 17-20/21\r\n\r\nghij\r\n"),
        "{body}"
    );
    // Only a .zst: a client that takes zstd gets it, one that takes gzip the file.
    let r = s.ask_with("GET", "/site/b.css", "Accept-Encoding: gzip, zstd\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"B-ZST"[..]));
    assert_eq!(r.header("content-encoding"), Some("zstd"));
    let r = s.ask_with("GET", "/site/b.css", "Accept-Encoding: br, gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"b {}\n"[..]));
    assert_eq!(r.header("content-encoding"), None);
    // Older than the file: not served (nor the older .gz).
    let r = s.ask_with("GET", "/site/stale.js", "Accept-Encoding: zstd, gzip\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"let x = 1;\n"[..]));
    assert_eq!(r.header("content-encoding"), None);
    // By name: a plain file.
    let r = s.ask_with("GET", "/site/a.css.zst", "Accept-Encoding: zstd\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &zst[..]));
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_ne!(r.header("etag"), Some(zst_etag.as_str()));
}

#[test]
fn precompressed_variants_uring() {
    precompressed(DriverKind::Uring, 64 << 20);
    precompressed(DriverKind::Uring, 0);
}

#[test]
fn precompressed_variants_epoll() {
    precompressed(DriverKind::Epoll, 64 << 20);
    precompressed(DriverKind::Epoll, 0);
}
