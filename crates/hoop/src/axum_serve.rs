//! axum on hoop (feature `axum`): an axum `Router` served on hoop's own runtime with
//! [`serve`], and `axum::serve` (which runs on tokio) accepting from a
//! [`shared::TcpListener`](crate::shared::TcpListener) directly, through its
//! `axum::serve::Listener` impl.
//!
//! On hoop's runtime, one thread or one per core with [`run_per_core`](crate::run_per_core):
//!
//! ```no_run
//! use axum::{routing::get, Router};
//!
//! fn main() -> std::io::Result<()> {
//!     hoop::Runtime::new()?.block_on(async {
//!         let app = Router::new().route("/", get(|| async { "hello" }));
//!         let listener = hoop::net::TcpListener::bind("127.0.0.1:3000").await?;
//!         hoop::axum::serve(listener, app).await
//!     })
//! }
//! ```
//!
//! On tokio's runtime, with hoop's sockets on shared rings:
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use axum::{routing::get, Router};
//!
//! let rings = hoop::shared::Rings::new()?;
//! let listener = hoop::shared::TcpListener::bind(&rings, "127.0.0.1:3000").await?;
//! let app = Router::new().route("/", get(|| async { "hello" }));
//! axum::serve(listener, app).await
//! # }
//! ```

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ::hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;

use crate::hyper::HoopTimer;
use crate::net::{AcceptPacing, TcpListener};

/// How long a connection may take to send a request head before it is closed (hyper's
/// `header_read_timeout`; axum's `serve` leaves hyper's default, 30 s, which needs a timer).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` for ever, on the current hoop runtime: every connection is
/// a [`spawn`](crate::spawn)ed task running hyper's HTTP/1.1 connection (keep-alive,
/// upgrades such as WebSocket, [`HEADER_READ_TIMEOUT`] on hoop's timers), its socket a
/// [`net::TcpStream`](crate::net::TcpStream) through `hyper_util::rt::TokioIo`. `TCP_NODELAY`
/// is set on the listener, so connections inherit it. The accept loop yields every
/// [`ACCEPT_BATCH`](crate::net::ACCEPT_BATCH) connections and waits out failures (out of
/// descriptors: 1 ms, logged once) as hoop's servers do; it returns only if the listener's
/// stream ends for good (the runtime shutting down).
pub async fn serve(listener: TcpListener, router: ::axum::Router) -> io::Result<()> {
    let _ = listener.set_nodelay(true);
    let mut pacing = AcceptPacing::new("axum", 0);
    let mut incoming = listener.incoming();
    loop {
        match incoming.next().await {
            Some(Ok(stream)) => {
                pacing.accepted().await;
                let service = TowerToHyperService::new(router.clone());
                drop(crate::spawn(async move {
                    let mut builder = http1::Builder::new();
                    builder
                        .timer(HoopTimer)
                        .header_read_timeout(HEADER_READ_TIMEOUT);
                    // A connection's error (a reset, a malformed request) is its own.
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                }));
            }
            Some(Err(e)) => pacing.failed(e).await,
            None => return Ok(()),
        }
    }
}

/// `axum::serve(listener, router)` with a shared-ring listener: accepts on hoop's rings from
/// whichever tokio worker runs axum's accept loop. A failed accept is retried after a pause
/// (1 ms when out of descriptors or memory, else doubling up to 100 ms, logged), as axum's own
/// `TcpListener` impl does.
impl ::axum::serve::Listener for crate::shared::TcpListener {
    type Io = crate::shared::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let mut backoff = Duration::from_millis(1);
        loop {
            match crate::shared::TcpListener::accept(self).await {
                Ok(conn) => return conn,
                Err(e) => {
                    let exhausted = matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    );
                    let pause = if exhausted {
                        Duration::from_millis(1)
                    } else {
                        eprintln!("hoop axum: accept failed: {e}; retrying");
                        let p = backoff;
                        backoff = (backoff * 2).min(Duration::from_millis(100));
                        p
                    };
                    crate::time::sleep(pause).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        crate::shared::TcpListener::local_addr(self)
    }
}
