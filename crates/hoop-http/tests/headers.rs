//! The answers' heads, on both drivers: the headers of a 200, HEAD, conditionals, ranges,
//! methods, paths (index, query, dots, symlinks inside, directories, dotfiles), content types,
//! `Connection` (keep-alive, close, HTTP/1.0) and the errors that close the connection.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use hoop::DriverKind;
use site::{make_root, Client, TestServer};

fn header_rules(kind: DriverKind) {
    let (_base, root) = make_root(&format!("rules-{kind}"));
    std::fs::write(root.join("empty.txt"), b"").unwrap();
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    // Keep-alive throughout; a reset (injected) ends the connection and the request goes again
    // on a new one.
    let mut s = server.client();

    let r = s.ask("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello, world\n");
    assert_eq!(r.header("content-length"), Some("13"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("server"), Some("hoop"));
    assert_eq!(r.header("connection"), Some("keep-alive"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
    let lm = r
        .header("last-modified")
        .expect("Last-Modified")
        .to_string();
    let etag = r.header("etag").expect("ETag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag {etag}"
    );

    // HEAD: the same head, no body; the connection goes on.
    let h = s.ask("HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(h.status, 200);
    for k in ["content-length", "content-type", "etag", "last-modified"] {
        assert_eq!(h.header(k), r.header(k), "{k}");
    }

    // Conditionals.
    let c = s.ask(&format!(
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n"
    ));
    assert_eq!(c.status, 304);
    assert!(c.body.is_empty());
    assert_eq!(c.header("etag"), Some(etag.as_str()));
    let c = s.ask("GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n\r\n");
    assert_eq!(c.status, 200);
    let c = s.ask(&format!(
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {lm}\r\n\r\n"
    ));
    assert_eq!(c.status, 304);
    let old = "Thu, 01 Jan 1970 00:00:01 GMT";
    let c = s.ask(&format!(
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {old}\r\n\r\n"
    ));
    assert_eq!(c.status, 200);

    // The preconditions (RFC 9110, 13.1.1 and 13.1.4): a failed one is 412 with a text body,
    // before If-None-Match and Range are looked at; the connection goes on.
    let before = "Thu, 01 Jan 1970 00:00:01 GMT";
    for (h, status) in [
        (format!("If-Match: {etag}"), 200),
        ("If-Match: *".to_string(), 200),
        ("If-Match: \"other\"".to_string(), 412),
        (format!("If-Match: W/{etag}"), 412),
        (format!("If-Unmodified-Since: {lm}"), 200),
        (format!("If-Unmodified-Since: {before}"), 412),
        ("If-Unmodified-Since: not a date".to_string(), 200),
        // If-Match present: If-Unmodified-Since is not evaluated.
        (
            format!("If-Match: {etag}\r\nIf-Unmodified-Since: {before}"),
            200,
        ),
        (format!("If-Match: \"x\"\r\nIf-None-Match: {etag}"), 412),
        (format!("If-Match: {etag}\r\nIf-None-Match: {etag}"), 304),
        (
            format!("If-Unmodified-Since: {before}\r\nRange: bytes=0-1"),
            412,
        ),
        (format!("If-Match: {etag}\r\nRange: bytes=0-1"), 206),
    ] {
        let c = s.ask(&format!("GET /a.txt HTTP/1.1\r\nHost: t\r\n{h}\r\n\r\n"));
        assert_eq!(c.status, status, "{h}");
        if status == 412 {
            assert_eq!(c.header("content-type"), Some("text/plain"), "{h}");
            assert_eq!(c.header("etag"), None, "{h}");
            assert_eq!(c.body, b"412 Precondition Failed\n");
            assert_eq!(c.header("connection"), Some("keep-alive"));
        }
    }

    // Ranges.
    let range = |s: &mut Client, r: &str| {
        s.ask(&format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: {r}\r\n\r\n"
        ))
    };
    let p = range(&mut s, "bytes=0-4");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"hello"[..]));
    assert_eq!(p.header("content-range"), Some("bytes 0-4/13"));
    let p = range(&mut s, "bytes=-6");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"world\n"[..]));
    assert_eq!(p.header("content-range"), Some("bytes 7-12/13"));
    let p = range(&mut s, "bytes=7-");
    assert_eq!((p.status, p.body.as_slice()), (206, &b"world\n"[..]));
    let p = range(&mut s, "bytes=7-1000");
    assert_eq!(p.header("content-range"), Some("bytes 7-12/13"));
    // Several: multipart (tests/ranges.rs); overlapping: the whole file.
    let p = range(&mut s, "bytes=0-1,3-4");
    assert_eq!(p.status, 206);
    assert!(p
        .header("content-type")
        .is_some_and(|t| t.starts_with("multipart/byteranges")));
    let p = range(&mut s, "bytes=0-3,3-4");
    assert_eq!((p.status, p.body.len()), (200, 13));
    let p = range(&mut s, "bytes=13-");
    assert_eq!(p.status, 416);
    assert_eq!(p.header("content-range"), Some("bytes */13"));
    // Its body is the status text, and its type says so (not the file's).
    assert_eq!(p.header("content-type"), Some("text/plain"));
    assert_eq!(p.body, b"416 Range Not Satisfiable\n");
    // A suffix of an empty file: the whole of it, 200 and no bytes.
    for r in ["bytes=-5", "bytes=-5,0-1"] {
        let p = s.ask(&format!(
            "GET /empty.txt HTTP/1.1\r\nHost: t\r\nRange: {r}\r\n\r\n"
        ));
        assert_eq!((p.status, p.body.len()), (200, 0), "{r}");
        assert_eq!(p.header("content-length"), Some("0"));
    }
    let p = s.ask("GET /empty.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-\r\n\r\n");
    assert_eq!(p.status, 416);

    // Methods.
    let m = s.ask("DELETE /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(m.status, 405);
    assert_eq!(m.header("allow"), Some("GET, HEAD"));

    // Paths.
    for (path, status, body) in [
        ("/", 200, &b"<h1>home</h1>\n"[..]),
        ("/a.txt?x=1&y=../../etc", 200, b"hello, world\n"),
        ("/text..txt", 200, b"two dots\n"),
        ("/docs/", 200, b"docs index\n"),
        ("/inside-link.txt", 200, b"hello, world\n"),
        ("/a%2etxt", 200, b"hello, world\n"),
    ] {
        let r = s.ask(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
        assert_eq!((r.status, r.body.as_slice()), (status, body), "{path}");
    }
    for (path, status) in [
        ("/empty/", 403),
        ("/a.txt/", 404),
        ("/nope", 404),
        ("/.hidden", 404),
        ("/.git/config", 404),
        ("/docs/.%2e/.hidden", 404),
    ] {
        let r = s.ask(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.header("connection"), Some("keep-alive"), "{path}");
    }
    let r = s.ask("GET /docs?q=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/docs/?q=1"));

    // Content types (nginx's mime.types values, no charset).
    for (ext, t) in [
        ("html", "text/html"),
        ("css", "text/css"),
        ("js", "application/javascript"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("png", "image/png"),
        ("gif", "image/gif"),
        ("svg", "image/svg+xml"),
        ("swf", "application/x-shockwave-flash"),
        ("txt", "text/plain"),
        ("json", "application/json"),
        ("wasm", "application/wasm"),
        ("pdf", "application/pdf"),
        ("xyz", "application/octet-stream"),
    ] {
        let r = s.ask(&format!("HEAD /types/f.{ext} HTTP/1.1\r\nHost: t\r\n\r\n"));
        assert_eq!(r.header("content-type"), Some(t), "{ext}");
    }

    // Connection: close closes after the response.
    let r = s.ask("GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    s.assert_closed();

    // HTTP/1.0: close unless keep-alive.
    let mut s = server.client();
    let r = s.ask("GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    s.assert_closed();
    let mut s = server.client();
    let r = s.ask("GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.header("connection"), Some("keep-alive"));
    let r = s.ask("GET /b.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.body, b"second file\n");

    // Errors that close the connection.
    for (req, status) in [
        ("GET / HTTP/2.0\r\n\r\n", 505),
        ("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        ("GET /a%00b HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        ("GARBAGE\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: t\r\nbad header\r\n\r\n", 400),
        // Host per RFC 9112, 3.2: missing on HTTP/1.1, repeated, or not a host.
        ("GET /a.txt HTTP/1.1\r\n\r\n", 400),
        ("GET /a.txt HTTP/1.1\r\nHost: t\r\nHost: t\r\n\r\n", 400),
        ("GET /a.txt HTTP/1.0\r\nHost: t\r\nHost: u\r\n\r\n", 400),
        ("GET /a.txt HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        ("GET /a.txt HTTP/1.1\r\nHost: t:80x\r\n\r\n", 400),
        ("GET /a.txt HTTP/1.1\r\nHost: u@t\r\n\r\n", 400),
    ] {
        let mut s = server.client();
        let r = s.ask(req);
        assert_eq!(r.status, status, "{req:?}");
        assert_eq!(r.header("connection"), Some("close"), "{req:?}");
        assert!(!r.body.is_empty(), "a short text body");
        s.assert_closed();
    }
}

#[test]
fn header_rules_uring() {
    header_rules(DriverKind::Uring);
}

#[test]
fn header_rules_epoll() {
    header_rules(DriverKind::Epoll);
}
