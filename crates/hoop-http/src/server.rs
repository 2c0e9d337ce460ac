//! Serving: the [`Server`] (the root, the configuration, the connection count shared by every
//! thread), what one runtime thread runs (accept with the connection limit, one task per
//! connection, and the graceful stop), and [`Server::run`]: one pinned runtime thread per
//! [`Config::threads`], each with its own `SO_REUSEPORT` listener.
//!
//! Accept takes hoop's best path: one multishot accept into direct descriptors, and each
//! connection reads from a multishot recv on the thread's provided buffer ring (single accepts
//! and reads where the kernel or the epoll driver lack them). Past [`Config::max_conns`] open
//! connections a new one is accepted and closed at once, so it never waits in the backlog.
//! When the shutdown future completes the thread stops accepting, closes the idle connections
//! at once, and lets the responses in flight finish (at most [`Config::shutdown_grace`]), each
//! connection closing after its response.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use hoop::net::{AcceptPacing, DirectTcpStream, TcpListener};
use hoop::sync::CancellationToken;
use hoop::BufRing;

use crate::access_log::{stdout_logger, AccessLog, Hook};
use crate::cache::Cache;
use crate::config::Config;
use crate::conn::{self, Shared};
use crate::date::DateCache;
use crate::deadline::Deadlines;
use crate::resolve::Root;
use crate::service::MakeFallback;
use crate::stop::{stop_future, StopOn};

/// Buffers in each thread's provided buffer ring, and their size.
const RING_ENTRIES: u16 = 4096;
const RING_BUF_BYTES: usize = 4096;
/// The buffer ring where buffers are consumed incrementally: the same 16 MiB in 64 KiB
/// buffers.
const INC_RING_ENTRIES: u16 = 256;
const INC_RING_BUF_BYTES: usize = 64 * 1024;

/// What a [`Server`] is made of (the builder's result).
pub(crate) struct Parts<'a> {
    pub(crate) root: Option<&'a Path>,
    pub(crate) cfg: Config,
    pub(crate) log: Option<AccessLog>,
    pub(crate) stop: StopOn,
    pub(crate) service: Option<MakeFallback>,
}

/// How often the graceful stop checks whether responses are still in flight.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// A static-file server: a root directory and a [`Config`], served on any number of hoop
/// runtime threads (each with its own listener): by [`Server::serve`] on runtimes of the
/// caller's, or by [`Server::run`] on threads of its own. Cloning is cheap and shares the
/// connection count that [`Config::max_conns`] bounds.
#[derive(Clone)]
pub struct Server {
    cfg: Arc<Config>,
    root: Option<Arc<Root>>,
    service: Option<MakeFallback>,
    open_conns: Arc<AtomicUsize>,
    next_thread: Arc<AtomicUsize>,
    log: Option<AccessLog>,
    stop: StopOn,
    extras: Arc<crate::extras::Extras>,
    tls: Option<Arc<crate::tls::Certs>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("cfg", &self.cfg)
            .field("root", &self.root)
            .field("open_conns", &self.open_conns)
            .field("access_log_hook", &self.log.is_some())
            .field("stop", &self.stop)
            .finish()
    }
}

/// What a server did: returned by [`Server::serve`] for one thread, by [`Server::run`] summed
/// over its threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeStats {
    /// Connections accepted and served.
    pub accepted: u64,
    /// Connections accepted and closed at once, past [`Config::max_conns`].
    pub refused: u64,
    /// Requests answered (each one the access log sees).
    pub requests: u64,
    /// Connections still answering a request when [`Config::shutdown_grace`] ran out (closed
    /// with their response unfinished).
    pub cut_off: u64,
    /// TLS handshakes that failed (garbage instead of a ClientHello, no protocol or suite in
    /// common, a client that stalled past the header deadline).
    pub tls_failed: u64,
}

impl std::ops::AddAssign for ServeStats {
    fn add_assign(&mut self, o: ServeStats) {
        self.accepted += o.accepted;
        self.refused += o.refused;
        self.requests += o.requests;
        self.cut_off += o.cut_off;
        self.tls_failed += o.tls_failed;
    }
}

impl Server {
    /// A server of the directory `root` with `cfg` (checked: [`Config::validate`]; the error
    /// is a [`ConfigError`](crate::ConfigError) in an `InvalidInput` [`io::Error`]). The root
    /// is opened now: a missing or unreadable root is an error here, not at the first request.
    pub fn new(root: impl AsRef<Path>, cfg: Config) -> io::Result<Server> {
        let parts = Parts {
            root: Some(root.as_ref()),
            cfg,
            log: None,
            stop: StopOn::default(),
            service: None,
        };
        Server::with(parts)
    }

    pub(crate) fn with(parts: Parts<'_>) -> io::Result<Server> {
        let Parts {
            root,
            cfg,
            log,
            stop,
            service,
        } = parts;
        cfg.validate()?;
        let log = log.or_else(|| cfg.access_log.then(stdout_logger));
        let root = match root {
            Some(root) => Some(Root::open(root)?),
            None if service.is_some() => None,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a server needs a root directory, a fallback service, or both",
                ))
            }
        };
        let extras = Arc::new(crate::extras::Extras::load(&cfg, root.as_ref()));
        let tls = crate::tls::load(cfg.tls.as_ref(), cfg.http2)?;
        Ok(Server {
            root: root.map(Arc::new),
            service,
            cfg: Arc::new(cfg),
            open_conns: Arc::new(AtomicUsize::new(0)),
            next_thread: Arc::new(AtomicUsize::new(0)),
            log,
            stop,
            extras,
            tls,
        })
    }

    /// With HTTPS, a handle that reloads the certificate and key from their files (as
    /// `hoop serve http` does on SIGHUP); `None` for plain HTTP.
    pub fn tls_reloader(&self) -> Option<crate::TlsReloader> {
        self.tls.clone().map(crate::TlsReloader)
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
    /// stops accepting (the listener is closed), closes every idle connection (keep-alive
    /// connections between requests, and new ones that sent nothing: their clients read end
    /// of stream), lets the responses in flight finish (at most [`Config::shutdown_grace`];
    /// each connection closes after its response) and returns. A connection still receiving a
    /// request head is answered if the head completes within its header deadline; connections
    /// still open when `serve` returns (that one, or a response cut off by the grace) are
    /// closed when the runtime drops their tasks (at the latest when it is dropped).
    ///
    /// Call it once per runtime thread, each with its own listener (for several threads on one
    /// port: [`TcpListener::bind_with`] with `reuse_port`). Must run inside a hoop runtime.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> ServeStats {
        let i = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let mut sh = Rc::new(Shared {
            cfg: self.cfg.clone(),
            root: self.root.clone(),
            cache: RefCell::new(Cache::new(
                self.cfg.cache_bytes / self.cfg.threads.max(1) as u64,
            )),
            compressed: RefCell::new(Cache::new(
                self.cfg.compress_cache_bytes / self.cfg.threads.max(1) as u64,
            )),
            deadlines: Rc::new(Deadlines::default()),
            date: RefCell::new(DateCache::default()),
            busy: Cell::new(0),
            stopping: Cell::new(false),
            gave_up: Cell::new(false),
            idle: Cell::new(0),
            open_conns: self.open_conns.clone(),
            pipes: None,
            log: self.log.clone().map(Hook),
            requests: Cell::new(0),
            missing: RefCell::default(),
            fills: RefCell::default(),
            compress_fills: RefCell::default(),
            ring_readers: Cell::new(0),
            ring_readers_max: std::env::var("HOOP_HTTP_RING_READERS_MAX")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(usize::from(RING_ENTRIES) / 2),
            scratch: RefCell::new(vec![0; conn::READ_BYTES]),
            extras: self.extras.clone(),
            service: self.service.as_ref().map(|m| RefCell::new(m.make())),
            tls: self.tls.clone(),
            tls_failed: Cell::new(0),
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
        // Where the kernel consumes buffers incrementally (6.12), a few large buffers: a small
        // request takes only its bytes of one, and a body arriving in bulk is received up to
        // 64 KiB at a time instead of 4 KiB (a sixteenth of the receives, of their copies'
        // setup and of the window updates each sends, the last of which on loopback also
        // pays for the sender's next segments).
        let made = match std::env::var_os("HOOP_HTTP_RING_PLAIN").is_none()
            && BufRing::incremental_supported()
        {
            true => BufRing::new_incremental(INC_RING_ENTRIES, INC_RING_BUF_BYTES),
            false => BufRing::new(RING_ENTRIES, RING_BUF_BYTES),
        };
        let ring = match made {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("hoop http: thread {i}: no buffer ring ({e}); single reads");
                None
            }
        };
        let sweeper = hoop::spawn(sh.deadlines.clone().sweep_forever(sh.cfg.sweep_interval()));
        // One thread gives memory back after bursts of closes (the trim is process-wide).
        let trimmer =
            (i == 0).then(|| hoop::spawn(crate::trim::trim_forever(sh.open_conns.clone())));
        let counts = AcceptCounts::default();
        until(
            shutdown,
            accept_loop(listener, i, ring, sh.clone(), &counts),
        )
        .await;
        // The listener is closed: no new connection. Close the idle connections (their tasks
        // end at their next poll) and answer what is in hand, within the grace; a connection
        // that finishes its response then closes too, as it finds `stopping` set.
        sh.stopping.set(true);
        sh.deadlines.expire_idle();
        let give_up = Instant::now() + sh.cfg.shutdown_grace;
        while (sh.busy.get() > 0 || sh.idle.get() > 0) && Instant::now() < give_up {
            hoop::time::sleep(DRAIN_POLL).await;
        }
        // What is still answering is cut when the runtime drops its task: each says so then.
        sh.gave_up.set(sh.busy.get() > 0);
        sweeper.abort();
        if let Some(t) = trimmer {
            t.abort();
        }
        ServeStats {
            accepted: counts.accepted.get(),
            refused: counts.refused.get(),
            requests: sh.requests.get(),
            cut_off: sh.busy.get() as u64,
            tls_failed: sh.tls_failed.get(),
        }
    }

    /// [`serve`](Server::serve) until `token` is cancelled.
    pub async fn serve_until(
        &self,
        listener: TcpListener,
        token: &CancellationToken,
    ) -> ServeStats {
        self.serve(listener, token.cancelled()).await
    }

    /// Binds [`Config::threads`] listeners on `addr` (with `SO_REUSEPORT` when more than
    /// one; port 0 picks one free port for all; backlog [`Config::backlog`]), ready to [`run`](Bound::run). Binding
    /// first tells the caller the address before serving starts.
    pub fn bind(&self, addr: impl ToSocketAddrs) -> io::Result<Bound> {
        let threads = self.cfg.threads;
        let opts = hoop::net::ListenOptions::new()
            .backlog(self.cfg.backlog)
            .reuse_port(threads > 1);
        let first = opts.bind(addr)?;
        let local = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..threads {
            listeners.push(opts.reuse_port(true).bind(local)?);
        }
        Ok(Bound {
            server: self.clone(),
            listeners,
            local,
        })
    }

    /// Serves `addr` on [`Config::threads`] runtime threads until the shutdown the builder
    /// set ([`Builder::shutdown_on`](crate::Builder::shutdown_on), [`Builder::shutdown_on_signal`](crate::Builder::shutdown_on_signal); without either, until
    /// the process ends); see [`Bound::run`].
    pub fn run(&self, addr: impl ToSocketAddrs) -> io::Result<ServeStats> {
        self.bind(addr)?.run()
    }
}

/// A [`Server`] with its listeners bound ([`Server::bind`]), not serving yet.
#[derive(Debug)]
pub struct Bound {
    server: Server,
    listeners: Vec<TcpListener>,
    local: SocketAddr,
}

impl Bound {
    /// The address the listeners are bound to (the port chosen, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves on one runtime thread per listener, each pinned to a CPU
    /// ([`hoop::run_per_core`]; the driver is the default one: `HOOP_DRIVER`, else io_uring
    /// when it can be set up, else epoll), and returns once every thread finished its
    /// graceful stop, with the counts summed over the threads.
    ///
    /// It stops when the builder's token is cancelled ([`Builder::shutdown_on`](crate::Builder::shutdown_on)) or, with
    /// [`Builder::shutdown_on_signal`](crate::Builder::shutdown_on_signal), on SIGINT or SIGTERM. `run_per_core` blocks those
    /// signals in the calling thread while the threads run (a signal nobody listens for gets
    /// its usual disposition: Ctrl-C still ends a server without `shutdown_on_signal`).
    /// Errors: a runtime or a signal listener that cannot be set up.
    pub fn run(self) -> io::Result<ServeStats> {
        let Bound {
            server, listeners, ..
        } = self;
        let threads = listeners.len();
        let listeners: Mutex<Vec<Option<TcpListener>>> =
            Mutex::new(listeners.into_iter().map(Some).collect());
        // Cancelled by the first thread that sees the builder's token or a signal: every
        // thread then stops, even one whose signal listener came after the signal.
        let stop = CancellationToken::new();
        let outputs = hoop::run_per_core(threads, move |i| {
            let listener = listeners.lock().unwrap_or_else(|p| p.into_inner())[i].take();
            let server = server.clone();
            let stop = stop.clone();
            async move {
                let listener = listener.ok_or_else(|| io::Error::other("no listener"))?;
                let shutdown = stop_future(&server.stop, stop)?;
                Ok::<_, io::Error>(server.serve(listener, shutdown).await)
            }
        })?;
        let mut total = ServeStats::default();
        for out in outputs {
            total += out?;
        }
        Ok(total)
    }
}

/// Connections one thread accepted, and refused past the limit.
#[derive(Default)]
struct AcceptCounts {
    accepted: Cell<u64>,
    refused: Cell<u64>,
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
async fn accept_loop(
    listener: TcpListener,
    i: usize,
    ring: Option<BufRing>,
    sh: Rc<Shared>,
    counts: &AcceptCounts,
) {
    let mut pacing = AcceptPacing::new("http", i);
    // Direct descriptors cannot be set one by one: connections inherit it from the listener.
    let _ = listener.set_nodelay(true);
    // sendfile(2) needs an fd: connections are plain sockets when it is on.
    // TLS runs over the socket's poll traits, which need a plain socket too.
    let plain = sh.tls.is_some()
        || (sh.cfg.sendfile_min_bytes != u64::MAX
            && std::env::var_os("HOOP_HTTP_ACCEPT_DIRECT").is_none());
    let mut incoming = Incoming::new(&listener, plain);
    loop {
        match incoming.next().await {
            Some(Ok(stream)) => {
                pacing.accepted().await;
                if sh.open_conns.fetch_add(1, Ordering::AcqRel) >= sh.cfg.max_conns {
                    sh.open_conns.fetch_sub(1, Ordering::AcqRel);
                    counts.refused.set(counts.refused.get() + 1);
                    // Closed through the ring on this tick.
                    drop(stream);
                    continue;
                }
                // No TCP_NODELAY per connection: Linux copies it from the listener.
                counts.accepted.set(counts.accepted.get() + 1);
                match stream {
                    Accepted::Plain(tcp) if sh.tls.is_some() => {
                        drop(hoop::spawn(crate::tls::serve(tcp, sh.clone())));
                    }
                    stream => drop(hoop::spawn(conn::run::serve(
                        stream.into(),
                        ring.clone(),
                        sh.clone(),
                    ))),
                }
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

    async fn next(&mut self) -> Option<io::Result<Accepted>> {
        match self {
            Incoming::Direct(i) => Some(i.next().await?.map(Accepted::Direct)),
            Incoming::Plain(i) => Some(i.next().await?.map(Accepted::Plain)),
        }
    }
}

/// An accepted connection: a direct descriptor or a plain socket.
enum Accepted {
    Direct(DirectTcpStream),
    Plain(hoop::net::TcpStream),
}

impl From<Accepted> for DirectTcpStream {
    fn from(a: Accepted) -> DirectTcpStream {
        match a {
            Accepted::Direct(s) => s,
            Accepted::Plain(s) => DirectTcpStream::from(s),
        }
    }
}
