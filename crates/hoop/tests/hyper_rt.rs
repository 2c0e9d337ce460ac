//! hyper 1.x on hoop's own runtime (feature `hyper`): HTTP/1.1 with hoop's timer behind
//! `header_read_timeout`, and HTTP/2 (server and client) with hoop's executor running the
//! streams, every answer checked, on io_uring and on epoll.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::time::Duration;

use hoop::hyper::{HoopExecutor, HoopTimer};
use hoop::net::{TcpListener, TcpStream};
use hoop_test_support as common;
use hoop_test_support::http::{connect, exchange, request};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.uri().path().strip_prefix("/echo/") {
        Some(text) => Bytes::copy_from_slice(text.as_bytes()),
        None => Bytes::from_static(b"hello\n"),
    };
    Ok(Response::new(Full::new(body)))
}

/// A server on its own thread (carrying the test's fault opt-outs) and runtime of `kind`:
/// every connection served by `serve`.
fn server<F, Fut>(kind: hoop::DriverKind, serve: F) -> (std::net::SocketAddr, impl FnOnce())
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
    let thread = common::spawn(move || {
        let rt = common::builder(kind).build().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let accept = async {
                loop {
                    let (s, _) = match listener.accept().await {
                        Ok(c) => c,
                        // An injected error on an accept: the client retries.
                        Err(_) => continue,
                    };
                    drop(hoop::spawn(serve(s)));
                }
            };
            hoop::select! {
                () = accept => {}
                _ = stop_rx => {}
            }
        });
    });
    let addr = addr_rx.recv().unwrap();
    (addr, move || {
        stop_tx.send(()).unwrap();
        thread.join().unwrap();
    })
}

/// HTTP/1.1 with hoop's timer: requests are answered, and a client that sends half a request
/// head is closed by the header-read timeout (without a timer hyper could not time it out).
#[test]
fn http1_with_hoops_timer() {
    common::each_driver(|kind| {
        let (addr, stop) = server(kind, |s| async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(HoopTimer)
                .header_read_timeout(Duration::from_millis(200))
                .serve_connection(TokioIo::new(s), service_fn(answer))
                .await;
        });
        let r = exchange(addr, &request("GET", "/echo/abc", "Connection: close\r\n"));
        assert_eq!((r.status, &r.body[..]), (200, &b"abc"[..]), "{kind:?}");

        let mut slow = connect(addr);
        slow.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
        // The server answers 408 or just closes; either way the connection ends, long before
        // the client's 10 s read timeout.
        let mut rest = Vec::new();
        match slow.read_to_end(&mut rest) {
            Ok(_) => assert!(
                rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
                "{kind:?}: {:?}",
                String::from_utf8_lossy(&rest)
            ),
            Err(e) => assert!(
                e.kind() == std::io::ErrorKind::ConnectionReset,
                "{kind:?}: the header-read timeout did not close the connection: {e}"
            ),
        }
        stop();
    });
}

/// HTTP/2 with prior knowledge, server and client on hoop: the server's streams and the
/// client's connection run on `HoopExecutor`; 20 requests at once on one connection each get
/// their own answer.
#[test]
fn http2_with_hoops_executor() {
    let _faults = common::faults_off(
        &["econnreset"],
        "one HTTP/2 connection carries every request: a reset would end them all, and hyper's \
         client does not retry",
    );
    common::each_driver(|kind| {
        let (addr, stop) = server(kind, |s| async move {
            let _ = hyper::server::conn::http2::Builder::new(HoopExecutor)
                .timer(HoopTimer)
                .serve_connection(TokioIo::new(s), service_fn(answer))
                .await;
        });
        let rt = common::builder(kind).build().unwrap();
        rt.block_on(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (sender, conn) = hyper::client::conn::http2::Builder::new(HoopExecutor)
                .timer(HoopTimer)
                .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .unwrap();
            drop(hoop::spawn(conn));
            let mut tasks = Vec::new();
            for i in 0..20 {
                let mut sender = sender.clone();
                tasks.push(hoop::spawn(async move {
                    let req = Request::get(format!("http://t/echo/n{i}"))
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let res = sender.send_request(req).await.unwrap();
                    assert_eq!(res.status(), 200);
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(body, format!("n{i}").as_bytes());
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
        stop();
    });
}
