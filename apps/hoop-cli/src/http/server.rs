//! Running the HTTP server: flags, the root, one runtime per thread, accept with the
//! connection limit, and the graceful stop.
//!
//! Accept takes hoop's best path: one multishot accept into direct descriptors, and each
//! connection reads from a multishot recv on the thread's provided buffer ring (single accepts
//! and reads where the kernel or the epoll driver lack them). Past `--max-conns` open
//! connections a new one is accepted and closed at once, so it never waits in the backlog.
//! On SIGINT/SIGTERM each thread stops accepting, lets the responses in flight finish (at most
//! [`Config::shutdown_grace`]), then closes every connection.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hoop::net::TcpListener;
use hoop::BufRing;

use super::cache::Cache;
use super::config::Config;
use super::conn::{self, Shared};
use super::date::DateCache;
use super::deadline::Deadlines;
use super::resolve::Root;
use crate::serve::echo::{DriverArg, MAX_THREADS};
use crate::serve::signal::{Signals, Stop};
use crate::serve::threads::{
    raise_nofile_limit, run_threads, settle_driver, until_stopped, AcceptPacing, Serve,
};

/// Arguments of `hoop serve http`.
#[derive(Debug, clap::Args)]
pub struct HttpArgs {
    /// The directory to serve.
    #[arg(long)]
    pub root: PathBuf,
    /// Address to listen on; port 0 picks a free port (the first line printed says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Runtime threads, each pinned to a CPU with its own listener (SO_REUSEPORT).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// hoop's driver: uring, epoll, or auto (io_uring, else epoll). Default: $HOOP_DRIVER when
    /// set, else auto.
    #[arg(long, value_enum, value_name = "DRIVER")]
    pub driver: Option<DriverArg>,
    /// In-memory file cache over every thread, in bytes (suffixes k, M, G: binary).
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = "BYTES")]
    pub cache_bytes: u64,
    /// Most open connections; past it new connections are accepted and closed at once.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_conns: usize,
    /// Close a connection whose request head is not complete after this long.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub header_timeout_ms: u64,
    /// Close a keep-alive connection idle this long (also bounds a stalled send).
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub idle_timeout_ms: u64,
    /// One line per request on stdout, after the `listening on` line.
    #[arg(long)]
    pub access_log: bool,
    /// The file served for a directory (`GET /` or `/docs/`), as nginx's `index`: one file
    /// name, no `/`, not starting with `.`.
    #[arg(long, default_value = "index.html", value_parser = parse_index, value_name = "NAME")]
    pub index: String,
    /// Which server: hoop, or a baseline of `hoop bench http`: hyper (tokio current-thread,
    /// whole files read per request), hyper-shared / hyper-tokio (hyper in tokio's
    /// multi-thread runtime, one worker per allowed CPU, on hoop::shared sockets / on tokio's
    /// TcpStream, the files under --root held in memory).
    #[arg(long, value_enum, default_value_t = HttpServerKind::Hoop)]
    pub server: HttpServerKind,
}

/// Which server `hoop serve http` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpServerKind {
    /// hoop's server.
    Hoop,
    /// The tokio + hyper baseline (benchmarks only).
    Hyper,
    /// hyper on `hoop::shared` sockets in tokio's multi-thread runtime (benchmarks only).
    HyperShared,
    /// The same hyper service on tokio's own `TcpStream` (benchmarks only).
    HyperTokio,
}

/// Buffers in each thread's provided buffer ring, and their size.
const RING_ENTRIES: u16 = 4096;
const RING_BUF_BYTES: usize = 4096;

/// How often the graceful stop checks whether responses are still in flight.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// `64M`, `4096`, `1G`, `512k`: bytes (binary multiples).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a byte count: {s:?} (examples: 0, 4096, 512k, 64M)"))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(args: HttpArgs) -> io::Result<()> {
    if args.threads == 0 || args.threads > MAX_THREADS {
        return Err(invalid(format!(
            "--threads must be between 1 and {MAX_THREADS}, not {}",
            args.threads
        )));
    }
    if args.max_conns == 0 {
        return Err(invalid("--max-conns must be at least 1".into()));
    }
    if args.header_timeout_ms == 0 || args.idle_timeout_ms == 0 {
        return Err(invalid(
            "--header-timeout-ms and --idle-timeout-ms must be at least 1".into(),
        ));
    }
    let root = Arc::new(Root::open(&args.root)?);
    if args.server != HttpServerKind::Hoop {
        if args.threads != 1 || args.driver.is_some() {
            return Err(invalid(
                "the hyper baselines choose their own threads (one, or one tokio worker per \
                 allowed CPU): no --threads or --driver"
                    .into(),
            ));
        }
        let signals = Signals::block()?;
        raise_nofile_limit();
        let dir = args.root.clone();
        use crate::bench::http::hyper_sockets::{self, Net};
        let (name, serve): (&'static str, crate::serve::echo::BaselineServe) = match args.server {
            HttpServerKind::HyperShared => (
                "hyper-shared",
                Box::new(move |l| hyper_sockets::run(l, &dir, Net::Shared)),
            ),
            HttpServerKind::HyperTokio => (
                "hyper-tokio",
                Box::new(move |l| hyper_sockets::run(l, &dir, Net::Tokio)),
            ),
            _ => (
                "hyper",
                Box::new(move |l| crate::bench::http::hyper_server::run(l, dir)),
            ),
        };
        return crate::serve::echo::run_baseline(&args.addr, name, serve, &signals);
    }
    let cfg = Arc::new(Config {
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        idle_timeout: Duration::from_millis(args.idle_timeout_ms),
        max_conns: args.max_conns,
        cache_bytes: args.cache_bytes,
        access_log: args.access_log,
        index: args.index.clone(),
        ..Config::default()
    });
    // Before any thread exists, so that every thread inherits the mask.
    let signals = Signals::block()?;
    raise_nofile_limit();
    let kind = settle_driver("http", args.driver)?;
    let open_conns = Arc::new(AtomicUsize::new(0));
    let threads = args.threads as u64;
    let serve: Serve = Arc::new(move |i, listener, stop| {
        let sh = Rc::new(Shared {
            cfg: cfg.clone(),
            root: root.clone(),
            cache: RefCell::new(Cache::new(cfg.cache_bytes / threads)),
            deadlines: Rc::new(Deadlines::default()),
            date: RefCell::new(DateCache::default()),
            busy: Cell::new(0),
            stopping: Cell::new(false),
            open_conns: open_conns.clone(),
            pipes: None,
        });
        Box::pin(serve_thread(i, listener, stop, sh))
    });
    run_threads("http", &args.addr, args.threads, kind, &signals, serve)
}

/// One thread: accept until stopped, then let the responses in flight finish.
async fn serve_thread(i: usize, listener: TcpListener, stop: Arc<Stop>, mut sh: Rc<Shared>) {
    // io_uring needs IORING_OP_SPLICE (5.7); the epoll driver runs splice(2).
    let splice = hoop::driver::Driver::current().is_some_and(|d| {
        d.kind() == hoop::DriverKind::Epoll || d.supports_opcode(io_uring::opcode::Splice::CODE)
    }) && std::env::var_os("HOOP_HTTP_NO_SPLICE").is_none();
    if splice {
        if let Some(s) = Rc::get_mut(&mut sh) {
            s.pipes = Some(super::splice::PipePool::default());
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
    let ring = match BufRing::new(RING_ENTRIES, RING_BUF_BYTES) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("hoop http: thread {i}: no buffer ring ({e}); single reads");
            None
        }
    };
    let sweeper = hoop::spawn(sh.deadlines.clone().sweep_forever(sh.cfg.sweep_interval()));
    until_stopped(&stop, accept_loop(listener, i, ring, sh.clone())).await;
    // The listener is closed: no new connection. Answer what is in hand, within the grace.
    sh.stopping.set(true);
    let give_up = Instant::now() + sh.cfg.shutdown_grace;
    while sh.busy.get() > 0 && Instant::now() < give_up {
        hoop::time::sleep(DRAIN_POLL).await;
    }
    sweeper.abort();
    // Returning ends `block_on`; dropping the runtime closes every connection.
}

/// Accepts forever, one task per connection, closing at once those past `--max-conns`.
async fn accept_loop(listener: TcpListener, i: usize, ring: Option<BufRing>, sh: Rc<Shared>) {
    let mut pacing = AcceptPacing::new("http", i);
    // Direct descriptors cannot be set one by one: connections inherit it from the listener.
    let _ = listener.set_nodelay(true);
    let mut incoming = listener.incoming_direct();
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
                if !stream.is_direct() {
                    let _ = stream.set_nodelay(true);
                }
                drop(hoop::spawn(conn::serve(stream, ring.clone(), sh.clone())));
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

/// `--index NAME`: one file name inside the directory (no `/`, no NUL, not `.`-first, which the
/// server would refuse to serve anyway).
fn parse_index(s: &str) -> Result<String, String> {
    if s.is_empty() || s.starts_with('.') || s.contains('/') || s.contains('\0') {
        return Err(format!(
            "{s:?}: an index is one file name (not empty, no '/', not starting with '.')"
        ));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert!(parse_bytes("12x").is_err());
        assert!(parse_bytes("").is_err());
    }
}
