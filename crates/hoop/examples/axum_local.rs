//! An axum `Router` on hoop's own runtime (`hoop::axum::serve`), a thread per core with a
//! listener each of one `SO_REUSEPORT` group.
//!
//! ```text
//! cargo run --release -p hoop --features axum --example axum_local -- [ADDR] [--threads N] [--tokio]
//! ```
//! `--tokio`: the same `Router` on `axum::serve` with tokio's own listener, in tokio's
//! multi-thread runtime with N workers: the baseline hoop is measured against (DESIGN.md,
//! "Apps at io_uring speed, part two"). Routes: `GET /` answers `hello from axum on hoop\n`; `GET /users/{id}` answers the JSON
//! `{"id":ID,"name":"user ID"}`; `POST /echo` answers its body. The first line on stdout is
//! `listening on ADDR`. Needs feature `axum`.

use std::io;

use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Json, Router};
use hoop::net::ReuseportGroup;
use serde::Serialize;

/// What `GET /users/{id}` answers, as JSON.
#[derive(Serialize)]
pub struct User {
    id: u64,
    name: String,
}

/// The example's routes (also served by `tests/axum.rs`).
pub fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello from axum on hoop\n" }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u64>| async move {
                Json(User {
                    id,
                    name: format!("user {id}"),
                })
            }),
        )
        .route("/echo", post(|body: String| async move { body }))
}

fn main() -> io::Result<()> {
    let mut addr = "127.0.0.1:3000".to_string();
    let mut threads = 1;
    let mut on_tokio = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidInput, "--threads N: N >= 1")
                    })?
            }
            "--tokio" => on_tokio = true,
            other => addr = other.to_string(),
        }
    }
    if on_tokio {
        return serve_on_tokio(&addr, threads);
    }
    let group = ReuseportGroup::bind_n(&addr, threads)?;
    println!("listening on {}", group.local_addr());
    hoop::run_per_core(threads, move |_| {
        let listener = group.listener();
        async move { hoop::axum::serve(listener?, app()).await }
    })?
    .into_iter()
    .collect::<io::Result<Vec<()>>>()
    .map(drop)
}

/// The baseline: the same routes on `axum::serve`, tokio's listener and runtime.
fn serve_on_tokio(addr: &str, workers: usize) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("listening on {}", listener.local_addr()?);
        axum::serve(listener, app()).await
    })
}
