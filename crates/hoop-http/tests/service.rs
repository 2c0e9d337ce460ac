//! The service behind the files (`Builder::fallback_service`), on both drivers: an axum
//! `Router` with path and query extractors and a JSON body, files still answered in front of
//! it, request bodies with `Content-Length` and chunked (streamed: a 20 MB upload counted),
//! pipelining with a body, `Expect: 100-continue`, a service error and a panic in a handler
//! (500, and the connection and the server go on), a client that leaves mid-upload (nothing
//! held), bad framing, the body limit, and a server with a service and no root.
//!
//! Every read has a timeout, every loop is bounded; nothing measures speed. Under injected
//! resets a scenario runs again on a new server.

use hoop_test_support as common;
mod serve;
use serve::spawn_server_for;

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use common::http::{parse_head, try_connect, try_read_any, try_read_head, Response};
use common::resets;
use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{Body, Server};
use http_body_util::BodyExt;

fn drivers(test: impl Fn(DriverKind)) {
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        test(kind);
    }
}

/// Cancels the server when the scenario ends, however it ends.
struct Stopper(CancellationToken);

impl Drop for Stopper {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A root with `a.txt`.
fn make_root(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hoop-http-svc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), b"hello\n").unwrap();
    dir
}

#[derive(serde::Deserialize)]
struct Page {
    page: u32,
}

#[derive(serde::Deserialize, serde::Serialize)]
struct Order {
    item: String,
    count: u32,
}

/// What the test router counts: upload bytes and body errors seen.
#[derive(Default)]
struct Seen {
    uploaded_bytes: AtomicU64,
    body_errors: AtomicU64,
}

/// The router under test.
fn router(seen: Arc<Seen>) -> Router {
    Router::new()
        .route(
            "/users/{id}",
            get(|Path(id): Path<u32>, Query(p): Query<Page>| async move {
                format!("user {id} page {}", p.page)
            }),
        )
        .route(
            "/orders",
            post(|Json(o): Json<Order>| async move {
                Json(Order {
                    item: o.item.to_uppercase(),
                    count: o.count * 2,
                })
            }),
        )
        .route(
            "/upload",
            post(move |body: axum::body::Body| {
                let seen = seen.clone();
                async move {
                    let mut body = body;
                    let mut n: u64 = 0;
                    while let Some(frame) = body.frame().await {
                        match frame {
                            Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
                            Err(_) => {
                                seen.body_errors.fetch_add(1, Ordering::SeqCst);
                                return (axum::http::StatusCode::BAD_REQUEST, "body".to_string());
                            }
                        }
                    }
                    seen.uploaded_bytes.fetch_add(n, Ordering::SeqCst);
                    (axum::http::StatusCode::OK, n.to_string())
                }
            }),
        )
        .route(
            "/stream",
            get(|| async {
                // No length known: sent chunked.
                let parts = (0..3).map(|i| Bytes::from(format!("part{i};"))).collect();
                axum::body::Body::new(Pieces(parts))
            }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("a handler panicked (on purpose)");
                }
                "never"
            }),
        )
}

/// A body of pieces, its length unknown.
struct Pieces(std::collections::VecDeque<Bytes>);

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// Starts `server` on `kind` (`None` where io_uring cannot be set up).
fn start(kind: DriverKind, server: Server, attempt: u32) -> Option<(SocketAddr, Stopper)> {
    let token = CancellationToken::new();
    let stopper = Stopper(token.clone());
    let (addr, _done) = spawn_server_for(kind, server, token, None, attempt)?;
    Some((addr, stopper))
}

fn ask(s: &mut TcpStream, req: &[u8]) -> io::Result<Response> {
    s.write_all(req)?;
    try_read_any(s)
}

/// Whether the server closed `s` within `wait`.
fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    let _ = s.set_read_timeout(Some(wait));
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn an_axum_router_answers_behind_the_files() {
    let root = make_root("router");
    drivers(|kind| {
        resets::retry(&format!("{kind}: the router behind files"), |attempt| {
            let seen = Arc::new(Seen::default());
            let server = Server::builder(&root)
                .fallback_service(router(seen))
                .build()
                .unwrap();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            let r = ask(&mut s, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(
                (r.status, &r.body[..]),
                (200, &b"hello\n"[..]),
                "{kind}: a file"
            );
            let r = ask(&mut s, b"GET /users/7?page=3 HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(
                (r.status, &r.body[..]),
                (200, &b"user 7 page 3"[..]),
                "{kind}"
            );
            assert!(r.header("date").is_some(), "{kind}: a Date");
            let json = br#"{"item":"pen","count":21}"#;
            let req = format!(
                "POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                json.len()
            );
            let mut bytes = req.into_bytes();
            bytes.extend_from_slice(json);
            let r = ask(&mut s, &bytes)?;
            assert_eq!(
                r.status,
                200,
                "{kind}: {:?}",
                String::from_utf8_lossy(&r.body)
            );
            let o: Order = serde_json::from_slice(&r.body).unwrap();
            assert_eq!((o.item.as_str(), o.count), ("PEN", 42), "{kind}");
            // Extractors refuse bad input with axum's own 400s; a route nobody has is 404.
            let r = ask(&mut s, b"GET /users/x?page=3 HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 400, "{kind}: a path that is not a number");
            let r = ask(&mut s, b"GET /users/1 HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 400, "{kind}: a missing query");
            let r = ask(&mut s, b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 404, "{kind}");
            let r = ask(&mut s, b"DELETE /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 404, "{kind}: other methods go to the service");
            // A body of unknown length goes out chunked; HEAD gets the head alone.
            let r = ask(&mut s, b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(
                (r.status, &r.body[..]),
                (200, &b"part0;part1;part2;"[..]),
                "{kind}"
            );
            s.write_all(b"HEAD /users/7?page=1 HTTP/1.1\r\nHost: x\r\n\r\n")?;
            let head = parse_head(&try_read_head(&mut s)?);
            assert_eq!(head.status, 200, "{kind}: HEAD");
            let r = ask(&mut s, b"GET /users/8?page=1 HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(&r.body[..], b"user 8 page 1", "{kind}: after the HEAD");
            Ok(())
        })
    });
}

/// A request with a body of `len_bytes` (a pattern), `Content-Length` or chunked in pieces.
fn upload(len_bytes: usize, chunked: bool) -> Vec<u8> {
    let body: Vec<u8> = (0..len_bytes).map(|i| (i % 251) as u8).collect();
    if !chunked {
        let mut req =
            format!("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {len_bytes}\r\n\r\n")
                .into_bytes();
        req.extend_from_slice(&body);
        return req;
    }
    let mut req =
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in body.chunks(70_001) {
        req.extend_from_slice(format!("{:x};ext=1\r\n", piece.len()).as_bytes());
        req.extend_from_slice(piece);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
    req
}

#[test]
fn bodies_stream_to_the_service_with_a_length_or_chunked() {
    let root = make_root("bodies");
    // A read that fails ends the connection; at one failure per fifty reads an upload of
    // 20 MB (over a thousand reads) never gets through. The kinds that end reads are off
    // here; the others (short reads, late completions, ...) stay, and failing reads in the
    // middle of a body are `a_client_that_leaves_mid_upload_leaves_nothing_behind`'s case.
    let _faults = common::faults_off(
        &["econnreset", "ecanceled", "enobufs"],
        "a 20 MB upload is a thousand reads, none of which may fail",
    );
    let big = 20 * 1000 * 1000;
    drivers(|kind| {
        resets::retry(&format!("{kind}: uploads"), |attempt| {
            let seen = Arc::new(Seen::default());
            let server = Server::builder(&root)
                .fallback_service(router(seen.clone()))
                .build()
                .unwrap();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            for (len, chunked) in [(big, false), (3_000_000, true), (20, true), (0, false)] {
                let req = upload(len, chunked);
                // Written from another thread: the server reads as the service asks.
                let mut w = s.try_clone()?;
                let writer = std::thread::spawn(move || w.write_all(&req));
                let r = try_read_any(&mut s)?;
                writer.join().unwrap()?;
                assert_eq!(r.status, 200, "{kind}: {len} chunked={chunked}");
                assert_eq!(r.body, len.to_string().as_bytes(), "{kind}: counted");
            }
            assert_eq!(
                seen.uploaded_bytes.load(Ordering::SeqCst),
                (big + 3_000_020) as u64
            );
            // Pipelined: a POST with its body, then a GET, in one write.
            let mut two = upload(5, true);
            two.extend_from_slice(b"GET /users/2?page=9 HTTP/1.1\r\nHost: x\r\n\r\n");
            s.write_all(&two)?;
            let r = try_read_any(&mut s)?;
            assert_eq!(&r.body[..], b"5", "{kind}: the pipelined POST");
            let r = try_read_any(&mut s)?;
            assert_eq!(&r.body[..], b"user 2 page 9", "{kind}: the GET after it");
            Ok(())
        })
    });
}

#[test]
fn expect_100_continue_is_answered_when_the_service_reads() {
    let root = make_root("continue");
    drivers(|kind| {
        resets::retry(&format!("{kind}: 100-continue"), |attempt| {
            let server = Server::builder(&root)
                .fallback_service(router(Arc::default()))
                .build()
                .unwrap();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            s.write_all(
                b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
            )?;
            let interim = parse_head(&try_read_head(&mut s)?);
            assert_eq!(interim.status, 100, "{kind}: the interim response first");
            s.write_all(b"abcd")?;
            let r = try_read_any(&mut s)?;
            assert_eq!((r.status, &r.body[..]), (200, &b"4"[..]), "{kind}");
            // A route that never reads the body answers without a 100, and the connection
            // closes (the client may or may not send the body).
            s.write_all(
                b"POST /users/1?page=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
            )?;
            let r = try_read_any(&mut s)?;
            assert_eq!(r.status, 405, "{kind}: answered without the body");
            assert!(
                closed(&mut s, Duration::from_secs(5)),
                "{kind}: then closed"
            );
            Ok(())
        })
    });
}

/// A service that fails every other call, and checks its requests' bodies are empty.
#[derive(Clone)]
struct Flaky(Arc<AtomicU64>);

impl tower_service::Service<http::Request<Body>> for Flaky {
    type Response = http::Response<String>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: http::Request<Body>) -> Self::Future {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n.is_multiple_of(2) {
                Err(io::Error::other("the service failed"))
            } else {
                Ok(http::Response::new(format!("call {n}")))
            }
        })
    }
}

#[test]
fn a_service_error_or_a_panic_answers_500_and_everything_goes_on() {
    let root = make_root("errors");
    drivers(|kind| {
        resets::retry(&format!("{kind}: errors and panics"), |attempt| {
            let server = Server::with_service(Flaky(Arc::default())).build().unwrap();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            let r = ask(&mut s, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 500, "{kind}: no root, the service's error");
            let r = ask(
                &mut s,
                b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
            )?;
            assert_eq!(
                (r.status, &r.body[..]),
                (200, &b"call 1"[..]),
                "{kind}: same conn"
            );

            let server = Server::builder(&root)
                .fallback_service(router(Arc::default()))
                .build()
                .unwrap();
            let Some((addr, _stop2)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let mut s = try_connect(addr)?;
            for _ in 0..3 {
                let r = ask(&mut s, b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!(r.status, 500, "{kind}: a panicking handler");
                let r = ask(&mut s, b"GET /users/3?page=1 HTTP/1.1\r\nHost: x\r\n\r\n")?;
                assert_eq!(
                    &r.body[..],
                    b"user 3 page 1",
                    "{kind}: the connection goes on"
                );
            }
            let mut other = try_connect(addr)?;
            let r = ask(&mut other, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")?;
            assert_eq!(r.status, 200, "{kind}: and the server");
            Ok(())
        })
    });
}

#[test]
fn a_client_that_leaves_mid_upload_leaves_nothing_behind() {
    let root = make_root("leave");
    drivers(|kind| {
        resets::retry(&format!("{kind}: a client leaves mid-upload"), |attempt| {
            let seen = Arc::new(Seen::default());
            let server = Server::builder(&root)
                .fallback_service(router(seen.clone()))
                .build()
                .unwrap();
            let watch = server.clone();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            for _ in 0..3 {
                let mut s = try_connect(addr)?;
                s.write_all(
                    b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n",
                )?;
                s.write_all(&vec![7u8; 300_000])?;
                drop(s);
            }
            let give_up = Instant::now() + Duration::from_secs(20);
            let faults = hoop::fault::describe().is_some();
            while (watch.open_connections() > 0
                || (!faults && seen.body_errors.load(Ordering::SeqCst) < 3))
                && Instant::now() < give_up
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(
                watch.open_connections(),
                0,
                "{kind}: every connection closed"
            );
            // An injected fault may end a connection before its head is read (no call).
            let errors = seen.body_errors.load(Ordering::SeqCst);
            match hoop::fault::describe() {
                None => assert_eq!(errors, 3, "{kind}: each body erred"),
                Some(_) => assert!(errors <= 3, "{kind}: {errors} body errors"),
            }
            assert_eq!(seen.uploaded_bytes.load(Ordering::SeqCst), 0, "{kind}");
            Ok(())
        })
    });
}

#[test]
fn bad_framing_and_bodies_over_the_limit_are_refused() {
    let root = make_root("framing");
    drivers(|kind| {
        resets::retry(&format!("{kind}: bad framing"), |attempt| {
            let log = Arc::new(Mutex::new(Vec::new()));
            let l = log.clone();
            let server = Server::builder(&root)
                .fallback_service(router(Arc::default()))
                .max_body_bytes(1000)
                .access_log(move |e| l.lock().unwrap().push(e.status))
                .build()
                .unwrap();
            let Some((addr, _stop)) = start(kind, server, attempt) else {
                return Ok(());
            };
            let cases: [(&[u8], u16); 4] = [
                (b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", 413),
                (
                    b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                    400,
                ),
                (b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
                (b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
            ];
            for (req, status) in cases {
                let mut s = try_connect(addr)?;
                let r = ask(&mut s, req)?;
                assert_eq!(
                    r.status,
                    status,
                    "{kind}: {:?}",
                    String::from_utf8_lossy(req)
                );
                assert!(
                    closed(&mut s, Duration::from_secs(5)),
                    "{kind}: closed after"
                );
            }
            // Chunked past the limit: the service sees the body end in an error.
            let mut s = try_connect(addr)?;
            let mut req =
                b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            req.extend_from_slice(b"3e8\r\n");
            req.extend_from_slice(&[b'a'; 1000]);
            req.extend_from_slice(b"\r\n");
            s.write_all(&req)?;
            std::thread::sleep(Duration::from_millis(50));
            s.write_all(b"1\r\nb\r\n0\r\n\r\n")?;
            let r = try_read_any(&mut s)?;
            assert_eq!(r.status, 400, "{kind}: the handler saw the body fail");
            let give_up = Instant::now() + Duration::from_secs(5);
            while log.lock().unwrap().len() < 5 && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(
                *log.lock().unwrap(),
                [413, 400, 400, 400, 400],
                "{kind}: logged"
            );
            Ok(())
        })
    });
}

#[test]
fn a_builder_needs_a_root_or_a_service() {
    let e = hoop_http::Builder::new().build().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("root"), "{e}");
}
