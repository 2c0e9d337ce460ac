//! The baseline of `hoop bench http`: the static-file server a Rust user would write instead
//! of hoop's, on tokio (one current-thread runtime) and hyper 1.x, reading each file with
//! `tokio::fs::read` (tokio's blocking pool) and answering it whole. Paths with a `..` segment
//! are refused; no cache, no ranges, no conditionals: what the benchmark asks of it is GET of
//! a file.

use std::convert::Infallible;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// Serves files under `root` on `listener` until the process ends.
pub(crate) fn run(listener: std::net::TcpListener, root: PathBuf) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let root = Arc::new(root);
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(c) => c,
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let root = root.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| serve(req, root.clone()));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    })
}

async fn serve(
    req: Request<Incoming>,
    root: Arc<PathBuf>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    let status = |code: StatusCode| {
        let mut r = Response::new(Full::new(Bytes::from(code.to_string())));
        *r.status_mut() = code;
        r
    };
    if path.split('/').any(|s| s == "..") {
        return Ok(status(StatusCode::BAD_REQUEST));
    }
    match tokio::fs::read(root.join(path.trim_start_matches('/'))).await {
        Ok(data) => {
            let mut r = Response::new(Full::new(Bytes::from(data)));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/octet-stream"),
            );
            Ok(r)
        }
        Err(_) => Ok(status(StatusCode::NOT_FOUND)),
    }
}
