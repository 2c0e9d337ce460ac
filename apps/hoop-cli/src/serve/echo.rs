//! `hoop serve echo`: a TCP echo server on hoop, or on a baseline runtime (tokio, monoio).
//!
//! On hoop: every runtime runs the same driver, chosen by `--driver` (`uring`, `epoll`, or
//! `auto`, which tries io_uring and falls back to epoll); without the flag, `HOOP_DRIVER` decides
//! (default `auto`). The driver is settled once on the main thread, before the listeners are
//! bound, and named in one line on stderr (`hoop serve echo: driver epoll (...)`); a forced
//! `uring` that cannot start fails there with the kernel's reason and what to do, before
//! anything is printed on stdout. `listening on IP:PORT` is printed once every runtime is up.
//!
//! One runtime per thread, thread `i` pinned to CPU `i % cpus` (counting only the CPUs the
//! process may use), each with its own listener on the same port (`SO_REUSEPORT` when there is
//! more than one thread, so the kernel balances connections). Every connection is its own task:
//! `TCP_NODELAY`, then read up to 64 KiB into one reused buffer and write all of it back, until
//! end of stream or an error, which closes only that connection.
//!
//! Shutdown: SIGINT and SIGTERM listeners (`hoop::signal`) are made before any thread starts,
//! which blocks the signals in every thread; the main thread waits on them and raises a [`Stop`] flag that every runtime thread awaits next
//! to its accept loop, so each `block_on` returns, and dropping the runtime cancels the
//! operations in flight and closes every socket. The main thread joins the threads and the
//! process exits 0.

use std::future::Future;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use hoop::net::{TcpListener, TcpStream};
use hoop::DriverKind;

use super::signal::{Signals, Stop};
use crate::baseline;

/// Per-connection buffer: one read returns at most this many bytes.
const BUF_SIZE: usize = 64 * 1024;

/// Most runtime threads `--threads` accepts.
const MAX_THREADS: usize = 1024;

/// Pause after `accept` failed for want of descriptors or memory.
const EXHAUSTED_BACKOFF: Duration = Duration::from_millis(1);

/// First and largest pause after any other `accept` failure (doubling in between).
const MIN_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Which runtime serves the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerKind {
    /// hoop: one runtime per thread, on the driver `--driver` picks.
    Hoop,
    /// Baseline: tokio's current-thread runtime (epoll).
    Tokio,
    /// Baseline: monoio on io_uring (epoll if io_uring is unusable).
    Monoio,
}

impl ServerKind {
    fn name(self) -> &'static str {
        match self {
            ServerKind::Hoop => "hoop",
            ServerKind::Tokio => "tokio",
            ServerKind::Monoio => "monoio",
        }
    }
}

/// The driver hoop's runtimes run on (`--driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverArg {
    /// io_uring if it can be set up, else epoll (saying why on stderr).
    Auto,
    /// io_uring, or fail with the reason it cannot run.
    Uring,
    /// The epoll readiness driver.
    Epoll,
}

impl From<DriverArg> for DriverKind {
    fn from(d: DriverArg) -> DriverKind {
        match d {
            DriverArg::Auto => DriverKind::Auto,
            DriverArg::Uring => DriverKind::Uring,
            DriverArg::Epoll => DriverKind::Epoll,
        }
    }
}

/// Arguments of `hoop serve echo`.
#[derive(Debug, clap::Args)]
pub struct EchoArgs {
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: String,
    /// Runtime threads, each pinned to a CPU with its own listener (hoop only; the baselines
    /// run on one thread).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Which runtime serves the connections.
    #[arg(long, value_enum, default_value_t = ServerKind::Hoop)]
    pub server: ServerKind,
    /// hoop's driver: uring, epoll, or auto (io_uring, else epoll). Default: $HOOP_DRIVER when
    /// set, else auto.
    #[arg(long, value_enum, value_name = "DRIVER")]
    pub driver: Option<DriverArg>,
    /// hoop only: the basic single-shot path (one accept and one recv SQE per call, a 64 KiB
    /// buffer per connection) instead of the default best path (multishot accept, multishot
    /// recv on a provided buffer ring, received buffers sent back as they are).
    #[arg(long)]
    pub basic: bool,
}

/// Runs the echo server until SIGINT or SIGTERM.
///
/// Prints `listening on IP:PORT` as the first and only line on stdout once the listeners are
/// bound. Returns `Ok` after a signal, once every socket is closed; an error if the arguments
/// are invalid, binding fails, or a runtime thread cannot start.
pub fn run(args: EchoArgs) -> io::Result<()> {
    if args.threads == 0 || args.threads > MAX_THREADS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--threads must be between 1 and {MAX_THREADS}, not {}",
                args.threads
            ),
        ));
    }
    if args.server != ServerKind::Hoop && args.threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the {} baseline runs on one thread: --threads must be 1, not {}",
                args.server.name(),
                args.threads
            ),
        ));
    }
    if args.server != ServerKind::Hoop && args.driver.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--driver applies to the hoop server only, not to the {} baseline",
                args.server.name()
            ),
        ));
    }
    // Before any thread exists, so that every thread inherits the mask.
    let signals = Signals::block()?;
    raise_nofile_limit();
    match args.server {
        ServerKind::Hoop => {
            let kind = settle_driver(args.driver)?;
            run_hoop(&args.addr, args.threads, kind, args.basic, &signals)
        }
        ServerKind::Tokio => run_baseline(&args.addr, "tokio", baseline::run_tokio_echo, &signals),
        ServerKind::Monoio => {
            run_baseline(&args.addr, "monoio", baseline::run_monoio_echo, &signals)
        }
    }
}

/// Settles which driver every runtime thread runs: `--driver`, else `HOOP_DRIVER`, else auto.
/// Sets up one runtime here, on the main thread, so that `auto` tries io_uring (and says why it
/// falls back) once rather than once per thread, and a forced `uring` that cannot run fails
/// before anything is bound or printed. Names the driver in one line on stderr and returns it
/// (`Uring` or `Epoll`, never `Auto`).
fn settle_driver(arg: Option<DriverArg>) -> io::Result<DriverKind> {
    let (requested, source) = match arg {
        Some(d) => {
            let k = DriverKind::from(d);
            (k, format!("--driver {k}"))
        }
        None => match DriverKind::from_env()
            .map_err(|e| with_context(e, "invalid HOOP_DRIVER".to_string()))?
        {
            Some(k) => (k, format!("HOOP_DRIVER={k}")),
            None => (DriverKind::Auto, "the default, auto".to_string()),
        },
    };
    let rt = hoop::Runtime::builder()
        .driver(requested)
        .build()
        .map_err(|e| {
            let hint = match requested {
                DriverKind::Uring => "; `--driver epoll` (or `auto`) runs without io_uring",
                _ => "",
            };
            let e = with_context(e, format!("cannot start the {requested} driver ({source})"));
            io::Error::new(e.kind(), format!("{e}{hint}"))
        })?;
    let kind = rt.driver_kind();
    let detail = match kind {
        DriverKind::Uring => {
            let (sq, cq) = rt.ring_sizes();
            format!("setup flags {}, SQ {sq}, CQ {cq}; ", rt.setup_flags())
        }
        _ => String::new(),
    };
    drop(rt);
    eprintln!("hoop serve echo: driver {kind} ({detail}from {source})");
    Ok(kind)
}

/// The hoop server: `threads` runtime threads until a signal (or until one of them fails).
fn run_hoop(
    addr: &str,
    threads: usize,
    kind: DriverKind,
    basic: bool,
    signals: &Signals,
) -> io::Result<()> {
    let first = TcpListener::bind_with(addr, threads > 1)
        .map_err(|e| with_context(e, format!("cannot listen on {addr}")))?;
    let local = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..threads {
        let l = TcpListener::bind_with(local, true)
            .map_err(|e| with_context(e, format!("cannot listen on {local} (SO_REUSEPORT)")))?;
        listeners.push(l);
    }

    let stop = Arc::new(Stop::new());
    let cpus = allowed_cpus();
    let mut workers: Vec<JoinHandle<io::Result<()>>> = Vec::with_capacity(threads);
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    for (i, listener) in listeners.into_iter().enumerate() {
        let stop_w = stop.clone();
        let ready = ready_tx.clone();
        let cpu = cpus[i % cpus.len()];
        let spawned = std::thread::Builder::new()
            .name(format!("hoop-echo-{i}"))
            .spawn(move || worker(i, cpu, kind, basic, listener, ready, &stop_w));
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                stop.stop();
                let _ = join_workers(workers);
                return Err(with_context(e, format!("cannot start thread {i}")));
            }
        }
    }
    drop(ready_tx);

    // Announce only once every runtime is up: a thread whose runtime cannot start ends (and
    // drops its sender) without a ready message, so the count falls short.
    let ready = ready_rx.iter().take(threads).count();
    if ready < threads {
        stop.stop();
        return join_workers(workers).and(Err(io::Error::other(
            "a server thread stopped before its runtime started",
        )));
    }

    let announced = announce(local);
    let waited = match announced {
        Ok(()) => signals.wait(|| workers.iter().any(|w| w.is_finished())),
        Err(e) => Err(e),
    };
    stop.stop();
    let joined = join_workers(workers);
    match waited {
        // A signal: the normal way out.
        Ok(Some(_)) => joined,
        // A thread ended on its own: its error, or say that it stopped.
        Ok(None) => joined.and(Err(io::Error::other(
            "a server thread stopped unexpectedly",
        ))),
        Err(e) => Err(e),
    }
}

/// One runtime thread on driver `kind`: says it is ready once its runtime is up, then serves
/// `listener` until `stop` is raised.
fn worker(
    i: usize,
    cpu: usize,
    kind: DriverKind,
    basic: bool,
    listener: TcpListener,
    ready: mpsc::Sender<()>,
    stop: &Stop,
) -> io::Result<()> {
    if let Err(e) = hoop::runtime::pin_to_cpu(cpu) {
        eprintln!("hoop echo: thread {i}: cannot pin to CPU {cpu}: {e}; running unpinned");
    }
    let rt = hoop::Runtime::builder()
        .driver(kind)
        .build()
        .map_err(|e| with_context(e, format!("thread {i}: cannot start the {kind} runtime")))?;
    // The main thread may have given up already; serving on is still right until `stop`.
    let _ = ready.send(());
    drop(ready);
    rt.block_on(async {
        let mut accept: Pin<Box<dyn Future<Output = ()>>> = if basic {
            Box::pin(accept_loop(listener, i))
        } else {
            Box::pin(accept_loop_best(listener, i))
        };
        let mut stopped = pin!(stop.wait());
        std::future::poll_fn(|cx| {
            if stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            accept.as_mut().poll(cx)
        })
        .await
    });
    // Cancels every connection's operations and closes every socket.
    drop(rt);
    Ok(())
}

/// Accepts forever, one echo task per connection. Failures never end the loop: running out of
/// descriptors or memory waits 1 ms, anything else is logged and retried with a backoff.
async fn accept_loop(listener: TcpListener, worker: usize) {
    let mut pacing = AcceptPacing::new(worker);
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                pacing.ok();
                // Detached: the task runs until its connection ends or the runtime drops.
                drop(hoop::spawn(echo_conn(stream)));
            }
            Err(e) => pacing.failed(e).await,
        }
    }
}

/// How an accept loop paces itself after failures: running out of descriptors or memory waits
/// 1 ms (logged once per episode), anything else is logged and retried with a doubling backoff.
struct AcceptPacing {
    worker: usize,
    backoff: Duration,
    exhausted_logged: bool,
}

impl AcceptPacing {
    fn new(worker: usize) -> AcceptPacing {
        AcceptPacing {
            worker,
            backoff: MIN_BACKOFF,
            exhausted_logged: false,
        }
    }

    /// An accept succeeded: the next failure starts afresh.
    fn ok(&mut self) {
        self.backoff = MIN_BACKOFF;
        self.exhausted_logged = false;
    }

    /// An accept failed with `e`: log and wait as the error says.
    async fn failed(&mut self, e: io::Error) {
        let worker = self.worker;
        match e.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                if !self.exhausted_logged {
                    eprintln!("hoop echo: thread {worker}: accept failed: {e}; retrying");
                    self.exhausted_logged = true;
                }
                hoop::time::sleep(EXHAUSTED_BACKOFF).await;
            }
            _ => {
                eprintln!("hoop echo: thread {worker}: accept failed: {e}; retrying");
                hoop::time::sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Buffers in each thread's provided buffer ring (best path), and their size.
const RING_ENTRIES: u16 = 4096;
const RING_BUF_BYTES: usize = 4096;

/// The best path: one multishot accept for all connections; each connection echoes from a
/// multishot recv on the thread's buffer ring. Accept failures are handled as in
/// [`accept_loop`].
async fn accept_loop_best(listener: TcpListener, worker: usize) {
    let ring = match hoop::BufRing::new(RING_ENTRIES, RING_BUF_BYTES) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hoop echo: thread {worker}: no buffer ring ({e}); using the basic path");
            return accept_loop(listener, worker).await;
        }
    };
    let mut pacing = AcceptPacing::new(worker);
    // Accepted sockets inherit TCP_NODELAY from the listener: direct descriptors (connections
    // accepted straight into the ring's fixed-file table, where supported) cannot be set one
    // by one. Best effort: without it only latency suffers.
    let _ = listener.set_nodelay(true);
    let mut incoming = listener.incoming_direct();
    loop {
        match incoming.next().await {
            Some(Ok(stream)) => {
                pacing.ok();
                drop(hoop::spawn(echo_conn_ring(stream, ring.clone())));
            }
            Some(Err(e)) => pacing.failed(e).await,
            // The stream ended for good (it is re-armed otherwise): start a new one.
            None => {
                hoop::time::sleep(pacing.backoff).await;
                incoming = listener.incoming_direct();
            }
        }
    }
}

/// Echoes one connection from its multishot recv: each received ring buffer is sent back as it
/// is, then returns to the ring. The connection is a direct descriptor where supported (its
/// slot is closed through the ring when it is dropped), else a plain socket.
async fn echo_conn_ring(stream: hoop::net::DirectTcpStream, ring: hoop::BufRing) {
    if !stream.is_direct() {
        let _ = stream.set_nodelay(true);
    }
    let mut rx = stream.recv_stream(&ring);
    while let Some(Ok(buf)) = rx.next().await {
        let (res, _) = stream.write_all(buf).await;
        if res.is_err() {
            break;
        }
    }
}

/// Echoes one connection until end of stream or the first error.
async fn echo_conn(stream: TcpStream) {
    // Best effort: without it only latency suffers.
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    loop {
        // A read fills from the start and sets the length to what arrived.
        buf.clear();
        let (res, b) = stream.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let (res, b) = stream.write_all(buf).await;
        buf = b;
        if res.is_err() {
            break;
        }
    }
}

/// A baseline server on its own thread; the main thread waits for a signal, then returns (the
/// process exits, which closes the baseline's sockets).
fn run_baseline(
    addr: &str,
    name: &'static str,
    serve: fn(std::net::TcpListener) -> io::Result<()>,
    signals: &Signals,
) -> io::Result<()> {
    // Bound like hoop's listener (SO_REUSEADDR, backlog 1024) so the comparison is fair.
    let listener = TcpListener::bind_with(addr, false)
        .map_err(|e| with_context(e, format!("cannot listen on {addr}")))?;
    let local = listener.local_addr()?;
    let listener = std::net::TcpListener::from(std::os::fd::OwnedFd::from(listener));
    let server = std::thread::Builder::new()
        .name(format!("{name}-echo"))
        .spawn(move || serve(listener))
        .map_err(|e| with_context(e, format!("cannot start the {name} thread")))?;
    announce(local)?;
    match signals.wait(|| server.is_finished())? {
        Some(_) => Ok(()),
        None => match server.join() {
            Ok(Ok(())) => Err(io::Error::other(format!(
                "the {name} server stopped unexpectedly"
            ))),
            Ok(Err(e)) => Err(with_context(e, format!("the {name} server failed"))),
            Err(_) => Err(io::Error::other(format!("the {name} server panicked"))),
        },
    }
}

/// The CPUs this process may run on, in order: thread `i` is pinned to the `i % len`-th, which
/// is CPU `i % cpus` on an unrestricted machine and stays inside a mask set from outside
/// (`taskset`, or the benchmark pinning its server). Never empty.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain old data; all-zero is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most the size given into the valid set above.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    let mut cpus = Vec::new();
    if r == 0 {
        for cpu in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, inside the set.
            if unsafe { libc::CPU_ISSET(cpu, &set) } {
                cpus.push(cpu);
            }
        }
    }
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus.extend(0..n);
    }
    cpus
}

/// Joins every worker; the first error (or panic) wins.
fn join_workers(workers: Vec<JoinHandle<io::Result<()>>>) -> io::Result<()> {
    let mut result = Ok(());
    for (i, w) in workers.into_iter().enumerate() {
        let r = match w.join() {
            Ok(r) => r,
            Err(_) => Err(io::Error::other(format!("server thread {i} panicked"))),
        };
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// Prints the one line the scripts and tests wait for, and flushes it.
fn announce(addr: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {addr}")
        .and_then(|()| out.flush())
        .map_err(|e| with_context(e, "cannot write to stdout".to_string()))
}

/// Raises the soft limit on open files to the hard limit (best effort): a server with more
/// than about a thousand connections needs it.
fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid rlimit above.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
        || lim.rlim_cur >= lim.rlim_max
    {
        return;
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit reads the valid rlimit above; failure leaves the limit as it was.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
}

/// `e` with `what` in front of its message, keeping its kind.
fn with_context(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
