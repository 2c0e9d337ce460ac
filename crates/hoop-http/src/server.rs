//! Serving: the [`Server`] (the root, the configuration, the connection count shared by every
//! thread) and what one runtime thread runs: accept with the connection limit, one task per
//! connection, and the graceful stop.
//!
//! Accept takes hoop's best path: one multishot accept into direct descriptors, and each
//! connection reads from a multishot recv on the thread's provided buffer ring (single accepts
//! and reads where the kernel or the epoll driver lack them). Past [`Config::max_conns`] open
//! connections a new one is accepted and closed at once, so it never waits in the backlog.
//! When the shutdown future completes the thread stops accepting, lets the responses in flight
//! finish (at most [`Config::shutdown_grace`]), then closes every connection.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use hoop::net::{DirectTcpStream, TcpListener};
use hoop::BufRing;

use crate::accept::AcceptPacing;
use crate::cache::Cache;
use crate::config::Config;
use crate::conn::{self, Shared};
use crate::date::DateCache;
use crate::deadline::Deadlines;
use crate::resolve::Root;

/// Buffers in each thread's provided buffer ring, and their size.
const RING_ENTRIES: u16 = 4096;
const RING_BUF_BYTES: usize = 4096;

/// How often the graceful stop checks whether responses are still in flight.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// A static-file server: a root directory and a [`Config`], served on any number of hoop
/// runtime threads (each with its own listener) by [`Server::serve`]. Cloning is cheap and
/// shares the connection count that [`Config::max_conns`] bounds.
#[derive(Debug, Clone)]
pub struct Server {
    cfg: Arc<Config>,
    root: Arc<Root>,
    open_conns: Arc<AtomicUsize>,
    next_thread: Arc<AtomicUsize>,
}

impl Server {
    /// A server of the directory `root` (opened now: a missing or unreadable root is an error
    /// here, not at the first request).
    pub fn new(root: impl AsRef<Path>, cfg: Config) -> io::Result<Server> {
        Ok(Server {
            root: Arc::new(Root::open(root.as_ref())?),
            cfg: Arc::new(cfg),
            open_conns: Arc::new(AtomicUsize::new(0)),
            next_thread: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Connections open right now, over every thread.
    pub fn open_connections(&self) -> usize {
        self.open_conns.load(Ordering::Acquire)
    }

    /// Serves `listener` on the current hoop runtime thread until `shutdown` completes, then
    /// stops accepting, lets the responses in flight finish (at most
    /// [`Config::shutdown_grace`]) and returns; connections still open are closed when the
    /// runtime drops their tasks.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let i = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let mut sh = Rc::new(Shared {
            cfg: self.cfg.clone(),
            root: self.root.clone(),
            cache: RefCell::new(Cache::new(
                self.cfg.cache_bytes / self.cfg.threads.max(1) as u64,
            )),
            deadlines: Rc::new(Deadlines::default()),
            date: RefCell::new(DateCache::default()),
            busy: Cell::new(0),
            stopping: Cell::new(false),
            open_conns: self.open_conns.clone(),
            pipes: None,
        });
        // io_uring needs IORING_OP_SPLICE (5.7); the epoll driver runs splice(2).
        let splice = hoop::driver::Driver::current().is_some_and(|d| {
            d.kind() == hoop::DriverKind::Epoll || d.supports_opcode(io_uring::opcode::Splice::CODE)
        }) && std::env::var_os("HOOP_HTTP_NO_SPLICE").is_none();
        if splice {
            if let Some(s) = Rc::get_mut(&mut sh) {
                s.pipes = Some(crate::splice::PipePool::default());
            }
        }
        let mut cfg_override = None;
        if let Some(v) = std::env::var_os("HOOP_HTTP_SPLICE_MIN_BYTES") {
            cfg_override = v.to_str().and_then(|v| v.parse::<u64>().ok());
        }
        if let (Some(min), Some(s)) = (cfg_override, Rc::get_mut(&mut sh)) {
            let mut cfg = (*s.cfg).clone();
            cfg.splice_min_bytes = min;
            s.cfg = Arc::new(cfg);
        }
        if let Some(v) = std::env::var_os("HOOP_HTTP_SENDFILE_MIN_BYTES") {
            if let (Some(min), Some(s)) = (
                v.to_str().and_then(|v| v.parse::<u64>().ok()),
                Rc::get_mut(&mut sh),
            ) {
                let mut cfg = (*s.cfg).clone();
                cfg.sendfile_min_bytes = min;
                s.cfg = Arc::new(cfg);
            }
        }
        let ring = match BufRing::new(RING_ENTRIES, RING_BUF_BYTES) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("hoop http: thread {i}: no buffer ring ({e}); single reads");
                None
            }
        };
        let sweeper = hoop::spawn(sh.deadlines.clone().sweep_forever(sh.cfg.sweep_interval()));
        until(shutdown, accept_loop(listener, i, ring, sh.clone())).await;
        // The listener is closed: no new connection. Answer what is in hand, within the grace.
        sh.stopping.set(true);
        let give_up = Instant::now() + sh.cfg.shutdown_grace;
        while sh.busy.get() > 0 && Instant::now() < give_up {
            hoop::time::sleep(DRAIN_POLL).await;
        }
        sweeper.abort();
    }
}

/// Runs `fut` until it completes or `stop` does, whichever comes first.
async fn until<S: Future<Output = ()>, F: Future<Output = ()>>(stop: S, fut: F) {
    let mut fut = pin!(fut);
    let mut stop = pin!(stop);
    std::future::poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        fut.as_mut().poll(cx)
    })
    .await
}

/// Accepts forever, one task per connection, closing at once those past `--max-conns`.
async fn accept_loop(listener: TcpListener, i: usize, ring: Option<BufRing>, sh: Rc<Shared>) {
    let mut pacing = AcceptPacing::new("http", i);
    // Direct descriptors cannot be set one by one: connections inherit it from the listener.
    let _ = listener.set_nodelay(true);
    // sendfile(2) needs an fd: connections are plain sockets when it is on.
    let plain = sh.cfg.sendfile_min_bytes != u64::MAX
        && std::env::var_os("HOOP_HTTP_ACCEPT_DIRECT").is_none();
    let mut incoming = Incoming::new(&listener, plain);
    loop {
        match incoming.next().await {
            Some(Ok(stream)) => {
                pacing.ok();
                if sh.open_conns.fetch_add(1, Ordering::AcqRel) >= sh.cfg.max_conns {
                    sh.open_conns.fetch_sub(1, Ordering::AcqRel);
                    // Closed through the ring on this tick.
                    drop(stream);
                    continue;
                }
                // No TCP_NODELAY per connection: Linux copies it from the listener.
                drop(hoop::spawn(conn::serve(stream, ring.clone(), sh.clone())));
            }
            Some(Err(e)) => pacing.failed(e).await,
            // The stream ended for good (it is re-armed otherwise): start a new one.
            None => {
                hoop::time::sleep(pacing.backoff).await;
                incoming = Incoming::new(&listener, plain);
            }
        }
    }
}

/// The accept stream: direct descriptors, or plain sockets (which `sendfile(2)` can name).
enum Incoming<'a> {
    Direct(hoop::net::IncomingDirect<'a>),
    Plain(hoop::net::Incoming<'a>),
}

impl<'a> Incoming<'a> {
    fn new(listener: &'a TcpListener, plain: bool) -> Incoming<'a> {
        if plain {
            Incoming::Plain(listener.incoming())
        } else {
            Incoming::Direct(listener.incoming_direct())
        }
    }

    async fn next(&mut self) -> Option<io::Result<DirectTcpStream>> {
        match self {
            Incoming::Direct(i) => i.next().await,
            Incoming::Plain(i) => Some(i.next().await?.map(DirectTcpStream::from)),
        }
    }
}
