//! axum on hoop (feature `axum`): a `Router` served on hoop's own runtime by
//! `hoop::axum::serve`, and `axum::serve` on tokio's runtime accepting from a
//! `hoop::shared::TcpListener`; each serves a JSON route with a path parameter, a plain route,
//! a POST body and keep-alive, on io_uring and on epoll.

use std::net::SocketAddr;
use std::sync::mpsc;

use hoop::DriverKind;
use hoop_test_support as common;
use hoop_test_support::http::{exchange, request, Client};

/// The example's router (`GET /`, `GET /users/{id}` as JSON, `POST /echo`).
#[path = "../examples/axum_local.rs"]
#[allow(dead_code)]
mod axum_local;
use axum_local::app;

/// The routes answer what the router says: JSON with the path parameter, a 400 for a path
/// that is not a number, a POST's body echoed, and three requests on one connection.
fn check_routes(addr: SocketAddr, kind: DriverKind) {
    let r = exchange(addr, &request("GET", "/users/42", "Connection: close\r\n"));
    assert_eq!(r.status, 200, "{kind:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{kind:?}"
    );
    assert_eq!(r.body, br#"{"id":42,"name":"user 42"}"#, "{kind:?}");

    let r = exchange(
        addr,
        &request("GET", "/users/forty-two", "Connection: close\r\n"),
    );
    assert_eq!(
        r.status, 400,
        "{kind:?}: a path parameter that is not a u64"
    );

    let r = exchange(
        addr,
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello, axum",
    );
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &b"hello, axum"[..]),
        "{kind:?}"
    );

    let mut c = Client::new(addr);
    for id in [1u64, 2, 3] {
        let r = c.get(&format!("/users/{id}"));
        assert_eq!(r.status, 200, "{kind:?}");
        assert_eq!(
            r.body,
            format!(r#"{{"id":{id},"name":"user {id}"}}"#).into_bytes(),
            "{kind:?}"
        );
    }
    let r = c.get("/");
    assert_eq!(r.body, b"hello from axum on hoop\n", "{kind:?}");
}

#[test]
fn router_on_hoops_runtime() {
    common::each_driver(|kind| {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
        let server = common::spawn(move || {
            let rt = common::builder(kind).build().unwrap();
            rt.block_on(async move {
                let listener = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                hoop::select! {
                    r = hoop::axum::serve(listener, app()) => panic!("serve ended: {r:?}"),
                    _ = stop_rx => {}
                }
            });
        });
        let addr = addr_rx.recv().unwrap();
        check_routes(addr, kind);
        stop_tx.send(()).unwrap();
        server.join().unwrap();
    });
}

#[test]
fn axum_serve_accepts_from_a_shared_listener() {
    common::each_driver(|kind| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let rings = hoop::shared::Rings::builder().driver(kind).build().unwrap();
        let listener = rt
            .block_on(hoop::shared::TcpListener::bind(&rings, "127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = rt.spawn(async move { axum::serve(listener, app()).await });
        rt.block_on(async {
            tokio::task::spawn_blocking(move || check_routes(addr, kind))
                .await
                .unwrap()
        });
        server.abort();
        drop(rt);
        drop(rings);
    });
}
