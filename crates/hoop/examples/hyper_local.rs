//! hyper 1.x on hoop's own runtime: a thread per core (`hoop::run_per_core`), each with its
//! own listener of one `SO_REUSEPORT` group, every connection a `hoop::spawn`ed task that
//! hyper serves through `hyper_util::rt::TokioIo`, with hoop's timer for the header-read
//! timeout and hoop's executor for HTTP/2's streams.
//!
//! ```text
//! cargo run --release -p hoop --features hyper --example hyper_local -- [ADDR] [--threads N] [--h2]
//! ```
//! `GET /echo/TEXT` answers `TEXT`; any other path answers `hello from hoop\n`. The first line
//! on stdout is `listening on ADDR`. `--h2` serves HTTP/2 with prior knowledge (h2c, as
//! `curl --http2-prior-knowledge` asks) instead of HTTP/1.1. Needs feature `hyper`.

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use hoop::hyper::{HoopExecutor, HoopTimer};
use hoop::net::{AcceptPacing, ReuseportGroup, TcpStream};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::{http1, http2};
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

/// Serves one connection with hyper, HTTP/1.1 or HTTP/2.
async fn serve_conn(stream: TcpStream, h2: bool) {
    let io = TokioIo::new(stream);
    // A connection's error (a reset, a malformed request) ends that connection only.
    let _ = if h2 {
        http2::Builder::new(HoopExecutor)
            .timer(HoopTimer)
            .serve_connection(io, service_fn(answer))
            .await
    } else {
        http1::Builder::new()
            .timer(HoopTimer)
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(io, service_fn(answer))
            .await
    };
}

fn main() -> io::Result<()> {
    let mut addr = "127.0.0.1:8080".to_string();
    let mut threads = 1;
    let mut h2 = false;
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
            "--h2" => h2 = true,
            other => addr = other.to_string(),
        }
    }
    let group = ReuseportGroup::bind_n(&addr, threads)?;
    println!("listening on {}", group.local_addr());
    hoop::run_per_core(threads, move |worker| {
        let listener = group.listener();
        async move {
            let listener = listener?;
            let _ = listener.set_nodelay(true);
            let mut pacing = AcceptPacing::new("hyper_local", worker);
            let mut incoming = listener.incoming();
            loop {
                match incoming.next().await {
                    Some(Ok(stream)) => {
                        pacing.accepted().await;
                        drop(hoop::spawn(serve_conn(stream, h2)));
                    }
                    Some(Err(e)) => pacing.failed(e).await,
                    None => return Ok::<(), io::Error>(()),
                }
            }
        }
    })?
    .into_iter()
    .collect::<io::Result<Vec<()>>>()
    .map(drop)
}
