//! Traversal attempts never escape the root, on both drivers, with openat2's
//! `RESOLVE_BENEATH` and with the check used where openat2 is missing.
//!
//! The server runs in this process (`site::TestServer`); the fallback, chosen once per
//! process from the environment, in a child process of this test binary. Every client read
//! and write has a timeout; every loop is bounded in count.

mod serve;
mod site;
use hoop::DriverKind;
use site::{exchange_until_closed, make_root, TestServer, SECRET};

fn traversal(kind: DriverKind) {
    let (base, root) = make_root(&format!("trav-{kind}"));
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    let outside = base.0.join("outside/secret.txt");
    let outside = outside.to_str().unwrap();
    let attempts = [
        "/../outside/secret.txt".to_string(),
        "/%2e%2e/outside/secret.txt".into(),
        "/%2E%2E/outside/secret.txt".into(),
        "/..%2foutside%2fsecret.txt".into(),
        "/%2e%2e%2foutside%2fsecret.txt".into(),
        "/docs/../../outside/secret.txt".into(),
        "/..\\outside\\secret.txt".into(),
        "/..%5coutside%5csecret.txt".into(),
        format!("/{outside}"),
        format!("//{outside}"),
        format!("/%2f{}", &outside[1..]),
        "http://t/../outside/secret.txt".into(),
        "/out/secret.txt".into(),
        "/secret-link".into(),
        "/etc/passwd".into(),
        "/etc/hostname".into(),
        "/%252e%252e/outside/secret.txt".into(),
        "/./../outside/secret.txt".into(),
    ];
    for path in &attempts {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        // The whole answer, to the server's close (a new connection while a reset ends it).
        let (r, after) = exchange_until_closed(server.addr, req.as_bytes());
        let text = format!(
            "{} {:?} {}{}",
            r.status,
            r.headers,
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(&after)
        );
        assert_ne!(r.status, 200, "{path}: {text}");
        assert!(!text.contains(SECRET), "{path}: {text}");
        assert!(!text.contains("root:"), "{path}: {text}");
    }
    // Still serving.
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn traversal_attempts_never_escape_uring() {
    traversal(DriverKind::Uring);
}

#[test]
fn traversal_attempts_never_escape_epoll() {
    traversal(DriverKind::Epoll);
}

/// The check used where openat2 is missing (forced here: `HOOP_HTTP_NO_OPENAT2=1`, read once
/// per process, so in a child process of its own).
#[test]
fn traversal_attempts_never_escape_without_openat2() {
    if site::in_child() {
        traversal(DriverKind::Uring);
        traversal(DriverKind::Epoll);
        return;
    }
    site::run_in_child_with(
        "traversal_attempts_never_escape_without_openat2",
        &[("HOOP_HTTP_NO_OPENAT2", "1")],
    );
}
