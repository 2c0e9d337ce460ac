//! `hoop serve echo`: a TCP echo server on hoop (one pinned runtime per thread, a listener
//! each, every connection a task that writes back what it reads), or on a baseline runtime.
//! Shutdown on SIGINT/SIGTERM: every runtime's accept loop stops, dropping the runtime cancels
//! what is in flight and closes every socket, the process exits 0.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use hoop::net::{TcpListener, TcpStream};

use super::baseline;
use super::driver::{DriverArg, MAX_THREADS};
use super::threads::{
    announce, raise_nofile_limit, run_threads, settle_driver, until_stopped, with_context,
    AcceptPacing,
};
use hoop_flags::signal::Signals;

/// Per-connection buffer: one read returns at most this many bytes.
const BUF_SIZE: usize = 64 * 1024;

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

/// Arguments of `hoop serve echo`.
#[derive(Debug, clap::Args)]
pub struct EchoArgs {
    #[command(flatten)]
    pub config: hoop_flags::config_file::ConfigArg,
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: String,
    #[command(flatten)]
    pub backlog: hoop_flags::backlog::BacklogArg,
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
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, value_name = "BOOL")]
    pub basic: bool,
    /// hoop best path: the receive buffer ring (for measurements): `inc` (default: 256
    /// incrementally consumed buffers of 64 KiB where the kernel has them, 6.12+, else 4096
    /// of 4 KiB), `fixed` (4096 buffers of 4 KiB: the path before), `bundles` (`fixed` with
    /// receive bundles, 6.10+), `inc-bundles` (`inc` with bundles).
    #[arg(long, value_enum, default_value_t = RecvRing::Inc, hide = true)]
    pub recv_ring: RecvRing,
    /// hoop basic path (for measurements): replies of at least this many bytes go out with
    /// `IORING_OP_SEND_ZC` (`TcpStream::send_zc_all`) instead of a send.
    #[arg(long, value_name = "BYTES", hide = true, requires = "basic")]
    pub send_zc_min: Option<usize>,
}

/// The best path's receive buffer ring (`--recv-ring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecvRing {
    /// Large incrementally consumed buffers where the kernel has them (else `fixed`).
    Inc,
    /// Fixed-size buffers, one per receive.
    Fixed,
    /// Fixed-size buffers with receive bundles.
    Bundles,
    /// Incrementally consumed buffers with receive bundles.
    IncBundles,
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
            let kind = settle_driver("echo", args.driver)?;
            let basic = args.basic;
            let recv_ring = args.recv_ring;
            let zc_min = args.send_zc_min.unwrap_or(usize::MAX);
            let serve: super::threads::Serve = Arc::new(move |i, listener, stop| {
                let accept: Pin<Box<dyn Future<Output = ()>>> = if basic {
                    Box::pin(accept_loop(listener, i, zc_min))
                } else {
                    Box::pin(accept_loop_best(listener, i, recv_ring))
                };
                Box::pin(async move { until_stopped(&stop, accept).await })
            });
            run_threads(
                "echo",
                (&args.addr, args.backlog.backlog),
                args.threads,
                kind,
                &signals,
                serve,
            )
        }
        ServerKind::Tokio => run_baseline(
            (&args.addr, args.backlog.backlog),
            "tokio",
            Box::new(baseline::run_tokio_echo),
            &signals,
        ),
        ServerKind::Monoio => run_baseline(
            (&args.addr, args.backlog.backlog),
            "monoio",
            Box::new(baseline::run_monoio_echo),
            &signals,
        ),
    }
}

/// Accepts forever, one echo task per connection. Failures never end the loop: running out of
/// descriptors or memory waits 1 ms, anything else is logged and retried with a backoff.
async fn accept_loop(listener: TcpListener, worker: usize, zc_min: usize) {
    let mut pacing = AcceptPacing::new("echo", worker);
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                pacing.accepted().await;
                // Detached: the task runs until its connection ends or the runtime drops.
                drop(hoop::spawn(echo_conn(stream, zc_min)));
            }
            Err(e) => pacing.failed(e).await,
        }
    }
}

/// Buffers in each thread's provided buffer ring (best path), and their size: a fixed-size
/// buffer per receive.
const RING_ENTRIES: u16 = 4096;
const RING_BUF_BYTES: usize = 4096;
/// The same memory (16 MiB) as an incrementally consumed ring: large buffers, each filled by
/// many receives (of any connection) one after the other. The buffers stay out while an echo
/// of their bytes is in flight, so they must cover what all connections have in flight.
const INC_ENTRIES: u16 = 256;
const INC_BUF_BYTES: usize = 64 * 1024;

/// The thread's receive ring for `kind`: an incremental ring falls back to the fixed-size one
/// where the kernel does not consume buffers incrementally (before 6.12).
fn recv_ring(kind: RecvRing) -> io::Result<hoop::BufRing> {
    let inc = matches!(kind, RecvRing::Inc | RecvRing::IncBundles);
    let ring = if inc && hoop::BufRing::incremental_supported() {
        hoop::BufRing::new_incremental(INC_ENTRIES, INC_BUF_BYTES)?
    } else {
        hoop::BufRing::new(RING_ENTRIES, RING_BUF_BYTES)?
    };
    ring.set_bundles(matches!(kind, RecvRing::Bundles | RecvRing::IncBundles));
    Ok(ring)
}

/// The best path: one multishot accept for all connections; each connection echoes from a
/// multishot recv on the thread's buffer ring (by default one of large incrementally consumed
/// buffers: an idle connection holds no buffer, and a burst fills one buffer with many
/// messages). Accept failures are handled as in [`accept_loop`].
async fn accept_loop_best(listener: TcpListener, worker: usize, kind: RecvRing) {
    let ring = match recv_ring(kind) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hoop echo: thread {worker}: no buffer ring ({e}); using the basic path");
            return accept_loop(listener, worker, usize::MAX).await;
        }
    };
    let mut pacing = AcceptPacing::new("echo", worker);
    // Accepted sockets inherit TCP_NODELAY from the listener: direct descriptors (connections
    // accepted straight into the ring's fixed-file table, where supported) cannot be set one
    // by one. Best effort: without it only latency suffers.
    let _ = listener.set_nodelay(true);
    let mut incoming = listener.incoming_direct();
    loop {
        match incoming.next().await {
            Some(Ok(stream)) => {
                pacing.accepted().await;
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

/// Echoes one connection until end of stream or the first error; replies of `zc_min` bytes or
/// more with zero-copy sends.
async fn echo_conn(stream: TcpStream, zc_min: usize) {
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
        let (res, b) = if buf.len() >= zc_min {
            stream.send_zc_all(buf).await
        } else {
            stream.write_all(buf).await
        };
        buf = b;
        if res.is_err() {
            break;
        }
    }
}

/// What a baseline server runs on its thread, given its listener.
pub(crate) type BaselineServe = Box<dyn FnOnce(std::net::TcpListener) -> io::Result<()> + Send>;

/// A baseline server on its own thread; the main thread waits for a signal, then returns (the
/// process exits, which closes the baseline's sockets).
pub(crate) fn run_baseline(
    (addr, backlog): (&str, u32),
    name: &'static str,
    serve: BaselineServe,
    signals: &Signals,
) -> io::Result<()> {
    // Bound like hoop's listener (SO_REUSEADDR, the same backlog) so the comparison is fair.
    let listener = hoop_flags::backlog::bind(addr, backlog, false)
        .map_err(|e| with_context(e, format!("cannot listen on {addr}")))?;
    hoop_flags::backlog::say_limits(backlog);
    let local = listener.local_addr()?;
    let listener = std::net::TcpListener::from(std::os::fd::OwnedFd::from(listener));
    let server = std::thread::Builder::new()
        .name(format!("{name}-server"))
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
