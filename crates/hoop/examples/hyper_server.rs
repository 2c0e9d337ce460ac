//! hyper 1.x serving HTTP/1.1 on hoop's shared io_uring sockets inside tokio's multi-thread
//! runtime: `hoop::shared::TcpListener` accepts, each connection's `hoop::shared::TcpStream`
//! goes to hyper through `hyper_util::rt::TokioIo`, and every read and write is an io_uring
//! operation on shared rings, awaited from whichever tokio worker runs the connection's task.
//!
//! ```text
//! cargo run --release -p hoop --features tokio --example hyper_server -- [ADDR] [--net hoop|tokio]
//! ```
//! `GET /echo/TEXT` answers `TEXT`; any other path answers `hello from hoop\n`. The first line
//! on stdout is `listening on ADDR`. `--net tokio` serves the same on tokio's own `TcpStream`
//! (the baseline for the requests/s comparison). Needs feature `tokio`.

use std::convert::Infallible;
use std::io;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.uri().path().strip_prefix("/echo/") {
        Some(text) => Bytes::copy_from_slice(text.as_bytes()),
        None => Bytes::from_static(b"hello from hoop\n"),
    };
    Ok(Response::new(Full::new(body)))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> io::Result<()> {
    let mut addr = "127.0.0.1:8080".to_string();
    let mut net = "hoop".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--net" => net = args.next().unwrap_or_default(),
            other => addr = other.to_string(),
        }
    }
    match net.as_str() {
        "hoop" => serve_hoop(&addr).await,
        "tokio" => serve_tokio(&addr).await,
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--net {other:?}: expected hoop or tokio"),
        )),
    }
}

async fn serve_hoop(addr: &str) -> io::Result<()> {
    // One ring per CPU, shared by every tokio worker.
    let rings = hoop::shared::Rings::new()?;
    let listener = hoop::shared::TcpListener::bind(&rings, addr).await?;
    println!("listening on {}", listener.local_addr()?);
    serve(|| async {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
    .await
}

async fn serve_tokio(addr: &str) -> io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    serve(|| async {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
    .await
}

/// Accepts connections forever, each served by hyper in a task of its own.
async fn serve<S, F, Fut>(mut accept: F) -> io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<S>>,
{
    loop {
        let stream = match accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("accept: {e}");
                continue;
            }
        };
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await;
        });
    }
}
