//! Byte ranges, on both drivers: several ranges as `multipart/byteranges` (each part parsed
//! and compared with the file byte for byte) on every body path (a cached file, `sendfile(2)`,
//! spliced, streamed in chunks, a precompressed variant), HEAD's head equal to GET's, the
//! refusals (over the part bound, overlapping, malformed), unsatisfiable specs dropped or 416,
//! `max_ranges` 0 and 1, and `If-Range` (the ETag, a weak one, the exact date, another date,
//! garbage).
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use std::collections::HashMap;
use std::path::Path;

use hoop::DriverKind;
use hoop_http::Config;
use site::{bytes, make_root, Client, Response, TestServer};

/// Sizes of the test files: one the cache keeps, one past every threshold the configs below
/// set (sendfile's default 16 KiB, the splice threshold they lower to 64 KiB).
const SMALL: usize = 5000;
const BIG: usize = 300 * 1024;

/// The test files: `small.txt`, `big.bin`, `a.css` with a fresh `a.css.gz`.
fn make_files(root: &Path) -> HashMap<&'static str, Vec<u8>> {
    let mut files = HashMap::new();
    files.insert("small.txt", bytes(SMALL, 1));
    files.insert("big.bin", bytes(BIG, 2));
    files.insert("a.css", b"body { color: red; margin: 0 }\n".to_vec());
    files.insert("a.css.gz", b"GZ-BYTES-0123456789abcdef".to_vec());
    // Written in this order: the variant is not older than the file.
    for name in ["small.txt", "big.bin", "a.css", "a.css.gz"] {
        std::fs::write(root.join(name), &files[name]).unwrap();
    }
    files
}

/// One part of a multipart body: its `Content-Type`, `Content-Range` and bytes.
#[derive(Debug)]
struct BodyPart {
    content_type: String,
    content_range: String,
    bytes: Vec<u8>,
}

/// Parses a `multipart/byteranges` response as the server frames it (the parts' heads in the
/// order `Content-Type`, `Content-Range`), checking every delimiter, that the body ends with the
/// close delimiter, and that nothing follows it.
fn parse_multipart(r: &Response) -> Vec<BodyPart> {
    let ct = r.header("content-type").expect("Content-Type");
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart: {ct}"));
    assert!(
        boundary.len() >= 20 && boundary.bytes().all(|b| b.is_ascii_hexdigit()),
        "{boundary}"
    );
    assert_eq!(
        r.header("content-length").unwrap(),
        r.body.len().to_string()
    );
    let mut rest = &r.body[..];
    let mut parts = Vec::new();
    let delim = format!("--{boundary}");
    for _ in 0..1000 {
        rest = rest
            .strip_prefix(delim.as_bytes())
            .unwrap_or_else(|| panic!("no delimiter at {:?}", String::from_utf8_lossy(rest)));
        if let Some(end) = rest.strip_prefix(b"--\r\n") {
            assert!(end.is_empty(), "bytes after the close delimiter");
            return parts;
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .expect("CRLF after the delimiter");
        let head_end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a part's head");
        let head = std::str::from_utf8(&rest[..head_end]).unwrap();
        rest = &rest[head_end + 4..];
        let mut lines = head.split("\r\n");
        let content_type = lines.next().unwrap().strip_prefix("Content-Type: ");
        let content_range = lines.next().unwrap().strip_prefix("Content-Range: ");
        assert!(lines.next().is_none(), "{head}");
        let content_range = content_range.expect("Content-Range").to_string();
        let (a, b) = content_range
            .strip_prefix("bytes ")
            .and_then(|s| s.split_once('/'))
            .and_then(|(r, _)| r.split_once('-'))
            .expect("bytes a-b/size");
        let len = b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1;
        parts.push(BodyPart {
            content_type: content_type.expect("Content-Type").to_string(),
            content_range,
            bytes: rest[..len].to_vec(),
        });
        rest = rest[len..]
            .strip_prefix(b"\r\n")
            .expect("CRLF after a part");
    }
    panic!("too many parts");
}

/// GET `path` with `Range: bytes=SET` (and `extra` header lines) asked of a file `file`: a
/// 206 multipart whose parts are `want` (`(first, last)` each, in order), byte for byte, and
/// whose head HEAD repeats.
fn check_multipart(
    s: &mut Client,
    path: &str,
    set: &str,
    extra: &str,
    (file, content_type): (&[u8], &str),
    want: &[(usize, usize)],
) {
    let headers = format!("Range: bytes={set}\r\n{extra}");
    let r = s.ask_with("GET", path, &headers);
    assert_eq!(r.status, 206, "{path} {set}");
    assert_eq!(r.header("content-range"), None, "{path} {set}");
    let parts = parse_multipart(&r);
    assert_eq!(parts.len(), want.len(), "{path} {set}");
    for (p, &(a, b)) in parts.iter().zip(want) {
        assert_eq!(p.content_type, content_type);
        assert_eq!(p.content_range, format!("bytes {a}-{b}/{}", file.len()));
        assert!(p.bytes == file[a..=b], "{path} {set}: part {a}-{b} differs");
    }
    // HEAD: the same head (the boundary too), no body.
    let h = s.ask_with("HEAD", path, &headers);
    let mut get = r.headers.clone();
    let mut head = h.headers.clone();
    get.remove("date");
    head.remove("date");
    assert_eq!((h.status, head), (206, get), "{path} {set}");
}

/// Every body path: the configs that send `big.bin` by sendfile (the default), spliced and
/// streamed; `small.txt` from the cache, or streamed without one.
fn configs() -> Vec<(&'static str, Config)> {
    vec![
        ("default", Config::default()),
        (
            "splice",
            Config {
                sendfile_min_bytes: u64::MAX,
                splice_min_bytes: 64 * 1024,
                ..Config::default()
            },
        ),
        (
            "stream",
            Config {
                sendfile_min_bytes: u64::MAX,
                splice_min_bytes: u64::MAX,
                cache_bytes: 0,
                stream_chunk_bytes: 64 * 1024,
                ..Config::default()
            },
        ),
    ]
}

fn multipart_bodies(kind: DriverKind) {
    let (_base, root) = make_root(&format!("ranges-multi-{kind}"));
    let files = make_files(&root);
    for (name, cfg) in configs() {
        let Some(server) = TestServer::start_with(kind, &root, cfg) else {
            return;
        };
        let mut s = server.client();
        // Twice: the second answer comes from the cache (or the kept fd) where there is one.
        for round in 0..2 {
            let small = (&files["small.txt"][..], "text/plain");
            check_multipart(
                &mut s,
                "/small.txt",
                "0-9,100-199,-50",
                "",
                small,
                &[(0, 9), (100, 199), (SMALL - 50, SMALL - 1)],
            );
            // Out of order, adjacent, a spec past the end dropped.
            check_multipart(
                &mut s,
                "/small.txt",
                "4000-,10-19,20-29,9000-",
                "",
                small,
                &[(4000, SMALL - 1), (10, 19), (20, 29)],
            );
            let big = (&files["big.bin"][..], "application/octet-stream");
            check_multipart(
                &mut s,
                "/big.bin",
                "0-0,70000-200000,-100000",
                "",
                big,
                &[(0, 0), (70000, 200000), (BIG - 100000, BIG - 1)],
            );
            let set: Vec<String> = (0..32)
                .map(|i| format!("{}-{}", i * 9000, i * 9000 + 99))
                .collect();
            let want: Vec<(usize, usize)> = (0..32).map(|i| (i * 9000, i * 9000 + 99)).collect();
            check_multipart(&mut s, "/big.bin", &set.join(","), "", big, &want);
            // A precompressed variant: the ranges are of its bytes, its coding on the whole.
            let gz = (&files["a.css.gz"][..], "text/css");
            let extra = "Accept-Encoding: gzip\r\n";
            check_multipart(&mut s, "/a.css", "0-1,-4", extra, gz, &[(0, 1), (21, 24)]);
            let r = s.ask_with(
                "GET",
                "/a.css",
                "Range: bytes=0-1,-4\r\nAccept-Encoding: gzip\r\n",
            );
            assert_eq!(r.header("content-encoding"), Some("gzip"));
            assert_eq!(r.header("vary"), Some("Accept-Encoding"));
            // The connection goes on after a multipart body.
            let r = s.get("/small.txt");
            assert!(
                r.status == 200 && r.body == files["small.txt"],
                "{name} {round}"
            );
        }
        // Pipelined: a multipart answer between two others, in order.
        let mut c = server.connect();
        let set = "Range: bytes=1-2,5-6\r\n";
        let req = format!(
            "{}{}{}",
            site::request("GET", "/big.bin", set),
            site::request("GET", "/small.txt", set),
            site::request("GET", "/a.css", "")
        );
        use std::io::Write;
        if c.write_all(req.as_bytes()).is_ok() {
            let rs: Vec<_> = (0..3)
                .map_while(|_| site::try_read_response(&mut c, false).ok())
                .collect();
            // Under injected resets the exchange may end early; what came is checked.
            for (i, r) in rs.iter().enumerate() {
                let file = [&files["big.bin"], &files["small.txt"], &files["a.css"]][i];
                if i < 2 {
                    let parts = parse_multipart(r);
                    assert_eq!(parts[0].bytes, file[1..=2]);
                    assert_eq!(parts[1].bytes, file[5..=6]);
                } else {
                    assert_eq!(&r.body, file);
                }
            }
        }
    }
}

#[test]
fn multipart_bodies_on_every_body_path_uring() {
    multipart_bodies(DriverKind::Uring);
}

#[test]
fn multipart_bodies_on_every_body_path_epoll() {
    multipart_bodies(DriverKind::Epoll);
}

fn range_rules(kind: DriverKind) {
    let (_base, root) = make_root(&format!("ranges-rules-{kind}"));
    let files = make_files(&root);
    let small = &files["small.txt"];
    let size = small.len();
    for (name, cfg) in configs() {
        let Some(server) = TestServer::start_with(kind, &root, cfg) else {
            return;
        };
        let mut s = server.client();
        let range = |s: &mut Client, set: &str| {
            s.ask_with("GET", "/small.txt", &format!("Range: bytes={set}\r\n"))
        };
        let whole = |r: &Response, what: &str| {
            assert_eq!(r.status, 200, "{name}: {what}");
            assert!(r.body == *small, "{name}: {what}");
            assert_eq!(r.header("content-range"), None, "{name}: {what}");
        };
        assert_eq!(s.get("/small.txt").header("accept-ranges"), Some("bytes"));
        // Over the part bound (32 by default), satisfiable or not: the whole file.
        let set: Vec<String> = (0..33).map(|i| format!("{}-{}", i * 10, i * 10)).collect();
        whole(&range(&mut s, &set.join(",")), "33 parts");
        let mut set: Vec<String> = (0..2).map(|i| format!("{i}-{i}")).collect();
        set.extend((0..31).map(|i| format!("{}-", size + i)));
        whole(&range(&mut s, &set.join(",")), "2 + 31 unsatisfiable");
        // Overlapping or past the size in all: the whole file.
        whole(&range(&mut s, "0-10,10-20"), "overlap");
        whole(&range(&mut s, "100-200,0-150"), "overlap out of order");
        whole(&range(&mut s, "0-,-1"), "more than the file");
        // A malformed spec anywhere: the header is ignored.
        whole(&range(&mut s, "0-1,x-2"), "malformed");
        whole(&range(&mut s, "0-1,5-3"), "backwards");
        whole(&range(&mut s, ","), "empty set");
        // Unsatisfiable specs are dropped: one left is an ordinary 206.
        let r = range(&mut s, "9000-,100-109,-0");
        assert_eq!((r.status, &r.body[..]), (206, &small[100..110]));
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes 100-109/{size}").as_str())
        );
        assert_eq!(r.header("content-type"), Some("text/plain"));
        // None left: 416 with the size.
        let r = range(&mut s, "9000-,-0,5000-");
        assert_eq!(r.status, 416);
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes */{size}").as_str())
        );
        let h = s.ask_with("HEAD", "/small.txt", "Range: bytes=9000-,-0\r\n");
        assert_eq!(h.status, 416);
        assert_eq!(h.header("content-length"), r.header("content-length"));
        // Unsatisfiable and satisfiable mixed, two left: their parts.
        check_multipart(
            &mut s,
            "/small.txt",
            "9000-,0-0,-0,10-10",
            "",
            (small, "text/plain"),
            &[(0, 0), (10, 10)],
        );
    }
}

#[test]
fn range_rules_refusals_and_unsatisfiable_uring() {
    range_rules(DriverKind::Uring);
}

#[test]
fn range_rules_refusals_and_unsatisfiable_epoll() {
    range_rules(DriverKind::Epoll);
}

fn max_ranges(kind: DriverKind) {
    let (_base, root) = make_root(&format!("ranges-max-{kind}"));
    let files = make_files(&root);
    for path in ["/small.txt", "/big.bin"] {
        let file = &files[&path[1..]];
        // 0: ranges off.
        let cfg = Config {
            max_ranges: 0,
            ..Config::default()
        };
        let Some(server) = TestServer::start_with(kind, &root, cfg) else {
            return;
        };
        let mut s = server.client();
        for set in ["0-1", "0-1,5-6", "99999999-"] {
            let r = s.ask_with("GET", path, &format!("Range: bytes={set}\r\n"));
            assert!(r.status == 200 && r.body == *file, "{path} {set}");
            assert_eq!(r.header("accept-ranges"), None);
        }
        let r = s.ask_with("HEAD", path, "");
        assert_eq!(r.header("accept-ranges"), None);
        drop(server);
        // 1: single ranges only.
        let server = hoop_http::Server::builder(&root)
            .max_ranges(1)
            .build()
            .unwrap();
        let token = hoop::sync::CancellationToken::new();
        let Some((addr, done)) = serve::spawn_server_for(kind, server, token.clone(), None, 0)
        else {
            return;
        };
        let mut s = Client::new(addr);
        let r = s.ask_with("GET", path, "Range: bytes=2-5\r\n");
        assert_eq!((r.status, &r.body[..]), (206, &file[2..6]));
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        let r = s.ask_with("GET", path, "Range: bytes=0-1,5-6\r\n");
        assert!(r.status == 200 && r.body == *file, "{path}");
        // One spec left of two is still a set of two: over the bound.
        let r = s.ask_with("GET", path, "Range: bytes=0-1,99999999-\r\n");
        assert_eq!(r.status, 200, "{path}");
        token.cancel();
        let _ = done.recv_timeout(serve::THREAD_TIMEOUT);
    }
}

#[test]
fn max_ranges_zero_and_one_uring() {
    max_ranges(DriverKind::Uring);
}

#[test]
fn max_ranges_zero_and_one_epoll() {
    max_ranges(DriverKind::Epoll);
}

fn if_range(kind: DriverKind) {
    let (_base, root) = make_root(&format!("ranges-if-{kind}"));
    let files = make_files(&root);
    for (name, cfg) in configs() {
        let Some(server) = TestServer::start_with(kind, &root, cfg) else {
            return;
        };
        let mut s = server.client();
        for path in ["/small.txt", "/big.bin"] {
            let file = &files[&path[1..]];
            let r = s.get(path);
            let etag = r.header("etag").unwrap().to_string();
            let lm = r.header("last-modified").unwrap().to_string();
            let other = "Thu, 01 Jan 1970 00:00:01 GMT";
            let ask = |s: &mut Client, set: &str, ir: &str| {
                s.ask_with(
                    "GET",
                    path,
                    &format!("Range: bytes={set}\r\nIf-Range: {ir}\r\n"),
                )
            };
            let (weak, upper) = (format!("W/{etag}"), lm.to_ascii_uppercase());
            for set in ["0-3", "0-3,10-13"] {
                for (ir, ranged) in [
                    (etag.as_str(), true),
                    (lm.as_str(), true),
                    (weak.as_str(), false),
                    ("\"other\"", false),
                    (other, false),
                    ("garbage", false),
                    (upper.as_str(), false),
                ] {
                    let r = ask(&mut s, set, ir);
                    let what = format!("{name} {path} {set} If-Range: {ir}");
                    if !ranged {
                        assert!(r.status == 200 && r.body == *file, "{what}");
                    } else if set.contains(',') {
                        assert_eq!(r.status, 206, "{what}");
                        let parts = parse_multipart(&r);
                        assert_eq!(parts[0].bytes, file[0..4], "{what}");
                        assert_eq!(parts[1].bytes, file[10..14], "{what}");
                    } else {
                        assert_eq!((r.status, &r.body[..]), (206, &file[0..4]), "{what}");
                    }
                }
            }
            // Without Range, If-Range is ignored.
            let r = s.ask_with("GET", path, &format!("If-Range: {etag}\r\n"));
            assert!(r.status == 200 && r.body == *file);
            let r = s.ask_with("GET", path, "If-Range: garbage\r\n");
            assert!(r.status == 200 && r.body == *file);
        }
    }
}

#[test]
fn if_range_strong_etag_or_exact_date_uring() {
    if_range(DriverKind::Uring);
}

#[test]
fn if_range_strong_etag_or_exact_date_epoll() {
    if_range(DriverKind::Epoll);
}
