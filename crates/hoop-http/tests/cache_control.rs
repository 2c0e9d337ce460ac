//! The headers the configuration adds, on both drivers: `Cache-Control` per path glob or
//! content type (first match wins, none without a match, on 200/206/304 and listings, never on
//! errors or redirects), the security headers (off by default, then on every response, errors
//! included), and bad rules refused when the server is built.
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use hoop::DriverKind;
use hoop_http::{CacheControlRule, Config, ConfigError, Server};
use site::{make_root, TestServer};

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

fn rules() -> Vec<CacheControlRule> {
    [
        &*format!("/assets/*={IMMUTABLE}"),
        "*.css=max-age=600",
        "image/*=max-age=60",
        "text/html=no-cache",
    ]
    .iter()
    .map(|r| CacheControlRule::parse(r).unwrap())
    .collect()
}

fn cache_control(kind: DriverKind) {
    let (_base, root) = make_root(&format!("cache-control-{kind}"));
    std::fs::create_dir_all(root.join("assets/sub")).unwrap();
    std::fs::write(root.join("assets/app.js"), b"let x;\n").unwrap();
    std::fs::write(root.join("assets/sub/a.css"), b"p{}\n").unwrap();
    std::fs::write(root.join("style.css"), b"body{margin:0}\n").unwrap();
    let cfg = Config {
        cache_control: rules(),
        autoindex: true,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    let cc = |s: &mut site::Client, method: &str, path: &str, headers: &str| {
        let r = s.ask_with(method, path, headers);
        (r.status, r.header("cache-control").map(str::to_string), r)
    };
    for (path, want) in [
        // By glob.
        ("/assets/app.js", Some(IMMUTABLE)),
        ("/style.css", Some("max-age=600")),
        // The first match wins: /assets/* comes before *.css.
        ("/assets/sub/a.css", Some(IMMUTABLE)),
        // By `type/*`.
        ("/types/f.png", Some("max-age=60")),
        ("/types/f.svg", Some("max-age=60")),
        // By exact type; a directory's index file by its own path and type.
        ("/types/f.html", Some("no-cache")),
        ("/", Some("no-cache")),
        ("/docs/", Some("no-cache")),
        // None matching: no header.
        ("/a.txt", None),
        ("/types/f.json", None),
        // A listing: of type text/html, and at /assets/.
        ("/empty/", Some("no-cache")),
        ("/assets/", Some(IMMUTABLE)),
    ] {
        for method in ["GET", "HEAD"] {
            let (status, got, _) = cc(&mut s, method, path, "");
            assert_eq!(status, 200, "{method} {path}");
            assert_eq!(got.as_deref(), want, "{method} {path}");
        }
    }
    // 304 and 206 carry it.
    let (_, _, r) = cc(&mut s, "GET", "/style.css", "");
    let etag = r.header("etag").unwrap().to_string();
    let (status, got, _) = cc(
        &mut s,
        "GET",
        "/style.css",
        &format!("If-None-Match: {etag}\r\n"),
    );
    assert_eq!((status, got.as_deref()), (304, Some("max-age=600")));
    let (status, got, r) = cc(&mut s, "GET", "/style.css", "Range: bytes=0-3\r\n");
    assert_eq!((status, got.as_deref()), (206, Some("max-age=600")));
    assert_eq!(r.body, b"body");
    // Errors and redirects never do, even where a rule matches the path.
    for (method, path, headers, want) in [
        ("GET", "/nope.css", "", 404),
        ("GET", "/assets/nope.js", "", 404),
        ("GET", "/style.css", "Range: bytes=999-\r\n", 416),
        ("GET", "/assets", "", 301),
        ("DELETE", "/style.css", "", 405),
        ("GET", "/.hidden.css", "", 404),
    ] {
        let (status, got, _) = cc(&mut s, method, path, headers);
        assert_eq!((status, got), (want, None), "{method} {path} {headers:?}");
    }
    // Without rules: no header anywhere.
    drop(server);
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let mut s = server.client();
    for path in ["/assets/app.js", "/style.css", "/types/f.png", "/"] {
        assert_eq!(s.get(path).header("cache-control"), None, "{path}");
    }
}

#[test]
fn cache_control_by_glob_and_type_first_match_wins_uring() {
    cache_control(DriverKind::Uring);
}

#[test]
fn cache_control_by_glob_and_type_first_match_wins_epoll() {
    cache_control(DriverKind::Epoll);
}

const CSP: &str = "default-src 'self'; img-src *";

fn security_headers(kind: DriverKind) {
    let (_base, root) = make_root(&format!("security-{kind}"));
    // Off by default.
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let mut s = server.client();
    for path in ["/a.txt", "/nope"] {
        let r = s.get(path);
        assert_eq!(r.header("x-content-type-options"), None, "{path}");
        assert_eq!(r.header("content-security-policy"), None, "{path}");
    }
    drop(server);

    let cfg = Config {
        security_headers: true,
        content_security_policy: Some(CSP.into()),
        autoindex: true,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let check = |r: &site::Response, what: &str| {
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{what}"
        );
        assert_eq!(r.header("content-security-policy"), Some(CSP), "{what}");
    };
    let mut s = server.client();
    let r = s.get("/a.txt");
    assert_eq!(r.status, 200);
    check(&r, "200");
    let etag = r.header("etag").unwrap().to_string();
    let r = s.ask_with("GET", "/a.txt", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!(r.status, 304);
    check(&r, "304");
    for (method, path, headers, status) in [
        ("HEAD", "/a.txt", "", 200),
        ("GET", "/a.txt", "Range: bytes=0-1\r\n", 206),
        ("GET", "/a.txt", "Range: bytes=99-\r\n", 416),
        ("GET", "/empty/", "", 200),
        ("GET", "/docs", "", 301),
        ("GET", "/nope", "", 404),
        ("HEAD", "/nope", "", 404),
        ("DELETE", "/a.txt", "", 405),
    ] {
        let r = s.ask_with(method, path, headers);
        assert_eq!(r.status, status, "{method} {path}");
        check(&r, &format!("{method} {path} {headers:?}"));
    }
    // The refusals that close the connection too.
    for (req, status) in [
        ("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\n\r\n", 505),
    ] {
        let mut s = server.client();
        let r = s.ask(req);
        assert_eq!(r.status, status, "{req:?}");
        check(&r, req);
    }
}

#[test]
fn security_headers_only_when_on_and_on_every_response_uring() {
    security_headers(DriverKind::Uring);
}

#[test]
fn security_headers_only_when_on_and_on_every_response_epoll() {
    security_headers(DriverKind::Epoll);
}

/// The `ConfigError` inside a refused build.
fn refused(b: hoop_http::Builder) -> ConfigError {
    let e = b.build().expect_err("a bad configuration is refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    e.get_ref()
        .and_then(|e| e.downcast_ref::<ConfigError>())
        .expect("a ConfigError inside")
        .clone()
}

/// Needs no runtime: the configuration is refused before anything serves.
#[test]
fn bad_rules_and_header_values_are_refused_by_build() {
    let (_base, root) = make_root("bad-rules");
    for (pattern, value) in [
        ("html", "no-cache"),
        ("text/", "no-cache"),
        ("*.css", ""),
        ("*.css", "max-age=1\r\nSet-Cookie: a=b"),
        ("*.css", "a\u{7f}"),
    ] {
        let b = Server::builder(&root)
            .cache_control("*.js", "max-age=1")
            .cache_control(pattern, value);
        match refused(b) {
            ConfigError::BadCacheControl { rule, .. } => {
                assert_eq!(rule, format!("{pattern}={value}"))
            }
            e => panic!("{pattern}={value:?}: {e:?}"),
        }
    }
    for csp in ["", "a\nb", "caf\u{e9}"] {
        let b = Server::builder(&root).content_security_policy(csp);
        assert!(
            matches!(refused(b), ConfigError::BadContentSecurityPolicy(..)),
            "{csp:?}"
        );
    }
    // Good ones build.
    Server::builder(&root)
        .cache_control("*.css", "max-age=600")
        .cache_control("image/*", "no-store")
        .security_headers(true)
        .content_security_policy("default-src 'self'")
        .build()
        .unwrap();
}
