//! The axum-on-tokio baseline: [`router`] on `axum::serve`, a multi-thread tokio runtime.

use std::io::{self, Write};
use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::{router, Dataset};

/// Serves [`router`]`(dataset)` on `addr` (port 0 picks one) with `workers` tokio worker
/// threads, until the process ends. Once bound, the first line on stdout is
/// `listening on IP:PORT`, flushed (what a parent process waits for). Every accepted
/// connection gets `TCP_NODELAY` (responses are small and must not wait for Nagle).
///
/// Errors: `workers` of 0 (`InvalidInput`), the runtime, the bind, stdout, or the accept loop.
pub fn serve_tokio(addr: &str, workers: usize, dataset: Arc<Dataset>) -> io::Result<()> {
    if workers == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "serve_tokio: workers must be at least 1",
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
        let local = listener.local_addr()?;
        {
            let mut out = io::stdout().lock();
            writeln!(out, "listening on {local}")?;
            out.flush()?;
        }
        let listener = listener.tap_io(|stream| {
            // Best effort: a socket that refuses it still works, only slower.
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, router(dataset)).await
    })
}
