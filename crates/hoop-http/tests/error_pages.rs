//! Custom error pages, on both drivers: a file under the root answers 404 and 403 with its own
//! type and bytes (HEAD: the head only; the connection stays open; the access log counts the
//! page's bytes), a page bigger than one send, a page file that cannot be read at start (the
//! built-in page answers), and paths refused when the server is built. The stderr line said
//! at start for a missing page is tested through the CLI (`apps/hoop-cli/tests/http_pages.rs`).
//!
//! The server runs in this process (`serve::spawn_server_for`); every client read and write
//! has a timeout; every loop is bounded in count.

mod serve;
mod site;
use std::sync::{Arc, Mutex};

use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{ConfigError, Server};
use site::{make_root, Client};

const PAGE_404: &[u8] = b"<!DOCTYPE html><h1>Nothing here</h1>\n";
const PAGE_403: &[u8] = b"not for you\n";

/// A server built by `b` with an access-log hook that keeps `(method, status, body bytes)`,
/// serving on driver `kind` until the returned token is dropped... cancelled.
struct Running {
    client: Client,
    log: Arc<Mutex<Vec<(String, u16, u64)>>>,
    token: CancellationToken,
    done: std::sync::mpsc::Receiver<hoop_http::ServeStats>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.token.cancel();
        let _ = self.done.recv_timeout(serve::THREAD_TIMEOUT);
    }
}

fn start(kind: DriverKind, b: hoop_http::Builder) -> Option<Running> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let server = b
        .access_log(move |e| {
            let method = e.request.as_ref().map_or("-", |r| r.method).to_string();
            l.lock().unwrap().push((method, e.status, e.body_bytes));
        })
        .build()
        .expect("a server of the test root");
    let token = CancellationToken::new();
    let (addr, done) = serve::spawn_server_for(kind, server, token.clone(), None, 0)?;
    Some(Running {
        client: Client::new(addr),
        log,
        token,
        done,
    })
}

fn error_pages(kind: DriverKind) {
    let (_base, root) = make_root(&format!("error-pages-{kind}"));
    std::fs::write(root.join("404.html"), PAGE_404).unwrap();
    std::fs::create_dir_all(root.join("errors")).unwrap();
    std::fs::write(root.join("errors/denied.txt"), PAGE_403).unwrap();
    let b = Server::builder(&root)
        .error_page(404, "/404.html")
        .error_page(403, "errors/denied.txt");
    let Some(mut run) = start(kind, b) else {
        return;
    };
    let s = &mut run.client;
    let r = s.get("/nope");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(r.body, PAGE_404);
    assert_eq!(r.header("connection"), Some("keep-alive"));
    assert_eq!(r.header("etag"), None);
    assert_eq!(r.header("cache-control"), None);
    // HEAD: the head only, the same length.
    let h = s.ask_with("HEAD", "/deep/er/nope.css", "");
    assert_eq!(h.status, 404);
    assert!(h.body.is_empty());
    assert_eq!(
        h.header("content-length"),
        Some(PAGE_404.len().to_string().as_str())
    );
    assert_eq!(h.header("content-type"), Some("text/html"));
    // Dotfiles and links out of the root are 404s too: the page answers.
    assert_eq!(s.get("/.hidden").body, PAGE_404);
    assert_eq!(s.get("/secret-link").body, PAGE_404);
    // 403: a directory without an index (no listing).
    let r = s.get("/empty/");
    assert_eq!(r.status, 403);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.body, PAGE_403);
    // The connection went on throughout; files still served.
    assert_eq!(s.get("/a.txt").body, b"hello, world\n");
    // Other errors keep their built-in text.
    let r = s.ask_with("DELETE", "/a.txt", "");
    assert_eq!(
        (r.status, &r.body[..]),
        (405, &b"405 Method Not Allowed\n"[..])
    );
    drop(r);
    // The access log counts the bytes sent (an exchange a reset ended, injected, is answered
    // again: counts, not lengths, may differ).
    let log = run.log.lock().unwrap().clone();
    let find = |method: &str, status: u16| {
        log.iter()
            .filter(|(m, st, _)| m == method && *st == status)
            .map(|e| e.2)
            .collect::<Vec<_>>()
    };
    assert!(
        find("GET", 404).iter().all(|&n| n == PAGE_404.len() as u64),
        "{log:?}"
    );
    assert!(!find("GET", 404).is_empty());
    assert!(!find("HEAD", 404).is_empty(), "{log:?}");
    assert!(find("HEAD", 404).iter().all(|&n| n == 0), "{log:?}");
    assert!(find("GET", 403).iter().all(|&n| n == PAGE_403.len() as u64));
}

#[test]
fn error_pages_answer_404_and_403_with_their_type_and_bytes_uring() {
    error_pages(DriverKind::Uring);
}

#[test]
fn error_pages_answer_404_and_403_with_their_type_and_bytes_epoll() {
    error_pages(DriverKind::Epoll);
}

/// A page bigger than one send goes out after its head, from memory; keep-alive goes on.
fn big_page(kind: DriverKind) {
    let (_base, root) = make_root(&format!("error-pages-big-{kind}"));
    let page = site::bytes(300 * 1024, 3);
    std::fs::write(root.join("big404.bin"), &page).unwrap();
    let Some(mut run) = start(kind, Server::builder(&root).error_page(404, "/big404.bin")) else {
        return;
    };
    let s = &mut run.client;
    for _ in 0..3 {
        let r = s.get("/nope");
        assert_eq!(r.status, 404);
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert!(
            r.body == page,
            "the page's bytes ({} received)",
            r.body.len()
        );
        assert_eq!(s.get("/b.txt").body, b"second file\n");
    }
}

#[test]
fn a_big_error_page_goes_out_whole_uring() {
    big_page(DriverKind::Uring);
}

#[test]
fn a_big_error_page_goes_out_whole_epoll() {
    big_page(DriverKind::Epoll);
}

/// Page files that cannot be read at start: missing, a link out of the root, a directory, over
/// 1 MiB. The server starts and the built-in page answers.
fn unreadable_pages(kind: DriverKind) {
    let (base, root) = make_root(&format!("error-pages-missing-{kind}"));
    std::os::unix::fs::symlink(base.0.join("outside/secret.txt"), root.join("out.html")).unwrap();
    std::fs::write(root.join("huge.html"), vec![b'x'; (1 << 20) + 1]).unwrap();
    for (status, path) in [
        (404, "/missing.html"),
        (404, "/out.html"),
        (403, "/docs"),
        (403, "/huge.html"),
    ] {
        let b = Server::builder(&root).error_page(status, path);
        let Some(mut run) = start(kind, b) else {
            return;
        };
        let s = &mut run.client;
        let (url, text) = match status {
            404 => ("/nope", &b"404 Not Found\n"[..]),
            _ => ("/empty/", &b"403 Forbidden\n"[..]),
        };
        let r = s.get(url);
        assert_eq!((r.status, &r.body[..]), (status, text), "{path}");
        assert_eq!(r.header("content-type"), Some("text/plain"), "{path}");
    }
}

#[test]
fn an_unreadable_page_file_leaves_the_built_in_page_uring() {
    unreadable_pages(DriverKind::Uring);
}

#[test]
fn an_unreadable_page_file_leaves_the_built_in_page_epoll() {
    unreadable_pages(DriverKind::Epoll);
}

/// Needs no runtime: refused before anything serves.
#[test]
fn bad_statuses_and_paths_are_refused_by_build() {
    let (_base, root) = make_root("error-pages-bad");
    for (status, path) in [
        (500, "/404.html"),
        (200, "/a.txt"),
        (404, "/../outside/secret.txt"),
        (404, "/docs/../../x.html"),
        (404, "/.hidden"),
        (403, "/.git/config"),
        (404, ""),
        (404, "/"),
    ] {
        let e = Server::builder(&root)
            .error_page(status, path)
            .build()
            .expect_err("refused");
        let e = e
            .get_ref()
            .and_then(|e| e.downcast_ref::<ConfigError>())
            .expect("a ConfigError");
        match e {
            ConfigError::BadErrorPage { page, .. } => assert_eq!(page, &format!("{status}={path}")),
            e => panic!("{status}={path}: {e:?}"),
        }
    }
    let e = hoop_http::ErrorPage::parse("500=/x.html")
        .unwrap_err()
        .to_string();
    assert!(e.contains("500") && e.contains("403 and 404"), "{e}");
}
