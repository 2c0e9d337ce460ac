//! hyper on three kinds of socket and runtime, the same service otherwise: `hyper-shared`
//! (hoop's shared-ring sockets) and `hyper-tokio` (tokio's), in tokio's multi-thread runtime,
//! and `hyper-hoop` (hoop's own runtime, a thread per allowed CPU with `run_per_core`, each
//! connection a `hoop::spawn`ed task): one hyper HTTP/1.1 service answering from memory (the
//! files under the root read once at start), so that the comparison is about the sockets and
//! the runtime alone. None sets a hyper timer (hyper's default: no header-read timeout without
//! one), so each connection does the same work.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// Which sockets the hyper service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Net {
    /// `hoop::shared::TcpListener` / `TcpStream` on `hoop::shared::Rings::new()`.
    Shared,
    /// `tokio::net::TcpListener` / `TcpStream`.
    Tokio,
    /// `hoop::net::TcpListener` / `TcpStream` on hoop's runtime, a thread per allowed CPU.
    Hoop,
}

/// Most bytes loaded from the root (the bench's files are about 1.1 MiB).
const MAX_LOADED_BYTES: u64 = 256 << 20;

/// The files served: `/name` -> contents.
type Files = HashMap<String, Bytes>;

/// Reads every regular file directly under `root` (not below) into memory.
pub(crate) fn load_files(root: &Path) -> io::Result<Files> {
    let mut files = HashMap::new();
    let mut total = 0u64;
    let dir = std::fs::read_dir(root)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", root.display())))?;
    for entry in dir {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        total += entry.metadata()?.len();
        if total > MAX_LOADED_BYTES {
            return Err(io::Error::other(format!(
                "the files under {} exceed {} MiB: these servers hold them all in memory",
                root.display(),
                MAX_LOADED_BYTES >> 20
            )));
        }
        files.insert(
            format!("/{name}"),
            Bytes::from(std::fs::read(entry.path())?),
        );
    }
    Ok(files)
}

/// Serves the files under `root` on `listener` with hyper on `net` sockets until the process
/// ends: a tokio multi-thread runtime with one worker per allowed CPU, the accept loop a task
/// on it (so that accepts, like connections, run on the workers).
pub(crate) fn run(listener: std::net::TcpListener, root: &Path, net: Net) -> io::Result<()> {
    let files = Arc::new(load_files(root)?);
    let workers = hoop_bench::machine::allowed_cpus().len().max(1);
    if net == Net::Hoop {
        return run_hoop(listener, files, workers);
    }
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(workers).enable_all();
    // hoop's park hook: the workers' socket writes are sent by the ring, all of a turn of the
    // loop in one `io_uring_enter` when the worker is about to sleep. `HOOP_SHARED_PARK_SUBMIT=0`
    // leaves it out (each write a `sendmsg(2)` of its own), for comparisons.
    let park_submit = std::env::var("HOOP_SHARED_PARK_SUBMIT").map_or(true, |v| v != "0");
    if net == Net::Shared && park_submit {
        b.on_thread_park(hoop::shared::submit_deferred);
    }
    let rt = b.build()?;
    rt.block_on(async move {
        let task = match net {
            Net::Shared => {
                let rings = hoop::shared::Rings::new()?;
                let listener = hoop::shared::TcpListener::from_std(&rings, listener);
                tokio::spawn(accept_loop(
                    move || {
                        let accept = listener.accept();
                        async move {
                            let (stream, _) = accept.await?;
                            stream.set_nodelay(true)?;
                            Ok(stream)
                        }
                    },
                    files,
                ))
            }
            Net::Hoop => unreachable!("served by run_hoop"),
            Net::Tokio => {
                listener.set_nonblocking(true)?;
                let listener = Arc::new(tokio::net::TcpListener::from_std(listener)?);
                tokio::spawn(accept_loop(
                    move || {
                        let listener = listener.clone();
                        async move {
                            let (stream, _) = listener.accept().await?;
                            stream.set_nodelay(true)?;
                            Ok(stream)
                        }
                    },
                    files,
                ))
            }
        };
        task.await.map_err(io::Error::other)
    })
}

/// hyper on hoop's runtime: `workers` threads (`run_per_core`), each accepting on the same
/// listener with its own multishot accept, every connection a task on the thread that
/// accepted it. Runs until the process ends.
fn run_hoop(listener: std::net::TcpListener, files: Arc<Files>, workers: usize) -> io::Result<()> {
    let listener = Arc::new(listener);
    let outcomes = hoop::run_per_core(workers, move |worker| {
        let listener = listener.try_clone();
        let files = files.clone();
        async move {
            let listener = hoop::net::TcpListener::from_std(listener?);
            let _ = listener.set_nodelay(true);
            let mut pacing = hoop::net::AcceptPacing::new("hyper-hoop", worker);
            let mut incoming = listener.incoming();
            loop {
                match incoming.next().await {
                    Some(Ok(stream)) => {
                        pacing.accepted().await;
                        drop(hoop::spawn(serve_conn(stream, files.clone())));
                    }
                    Some(Err(e)) => pacing.failed(e).await,
                    None => return Ok::<(), io::Error>(()),
                }
            }
        }
    })?;
    outcomes
        .into_iter()
        .collect::<io::Result<Vec<()>>>()
        .map(drop)
}

/// Accepts forever, each connection served by [`serve_conn`] in a task of its own. A failed
/// accept (out of descriptors, an aborted connection) waits 1 ms and goes on.
async fn accept_loop<S, F, Fut>(mut accept: F, files: Arc<Files>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<S>>,
{
    loop {
        match accept().await {
            Ok(stream) => {
                tokio::spawn(serve_conn(stream, files.clone()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// One HTTP/1.1 connection (keep-alive by default), whatever the stream type.
pub(crate) async fn serve_conn<S>(stream: S, files: Arc<Files>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let svc = service_fn(move |req| answer(req, files.clone()));
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), svc)
        .await;
}

/// The file at the request's path (200, `application/octet-stream`), or 404.
async fn answer(
    req: Request<Incoming>,
    files: Arc<Files>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match files.get(req.uri().path()) {
        Some(body) => {
            let mut r = Response::new(Full::new(body.clone()));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/octet-stream"),
            );
            r
        }
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"404 Not Found")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_top_level_files_only() {
        let dir = std::env::temp_dir().join(format!("hoop-hyper-sockets-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.bin"), b"abc").unwrap();
        std::fs::write(dir.join("sub/b.bin"), b"x").unwrap();
        let files = load_files(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(files.len(), 1);
        assert_eq!(files["/a.bin"], Bytes::from_static(b"abc"));
    }
}
