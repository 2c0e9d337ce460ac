//! What every hoop server shares: the driver choice, one runtime thread per listener pinned
//! to a CPU, the `listening on` line, accept pacing, and the way out on SIGINT/SIGTERM.

use std::future::Future;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread::JoinHandle;

use hoop::net::TcpListener;
use hoop::DriverKind;

pub(crate) use hoop::net::AcceptPacing;

use super::driver::DriverArg;
use hoop_flags::signal::{Signals, Stop};

/// Settles which driver every runtime thread runs: `--driver`, else `HOOP_DRIVER`, else auto.
/// Sets up one runtime here, on the main thread, so that `auto` tries io_uring (and says why it
/// falls back) once rather than once per thread, and a forced `uring` that cannot run fails
/// before anything is bound or printed. Names the driver in one line on stderr and returns it
/// (`Uring` or `Epoll`, never `Auto`).
pub(crate) fn settle_driver(server: &str, arg: Option<DriverArg>) -> io::Result<DriverKind> {
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
    eprintln!("hoop serve {server}: driver {kind} ({detail}from {source})");
    Ok(kind)
}

/// What one runtime thread runs: given its index, its listener and the stop flag, a future
/// that serves until the flag is raised (and then finishes what it must).
pub(crate) type Serve =
    Arc<dyn Fn(usize, TcpListener, Arc<Stop>) -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync>;

/// Runs `threads` runtime threads on driver `kind`, each pinned to a CPU with its own listener
/// on `addr` with listen backlog `backlog` (`SO_REUSEPORT` when more than one), each running
/// `serve`; prints `listening on
/// IP:PORT` once every runtime is up, and returns after SIGINT/SIGTERM once every thread ended
/// (or with an error if one stopped on its own).
pub(crate) fn run_threads(
    server: &'static str,
    (addr, backlog): (&str, u32),
    threads: usize,
    kind: DriverKind,
    signals: &Signals,
    serve: Serve,
) -> io::Result<()> {
    let first = hoop_flags::backlog::bind(addr, backlog, threads > 1)
        .map_err(|e| with_context(e, format!("cannot listen on {addr}")))?;
    let local = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..threads {
        let l = hoop_flags::backlog::bind(local, backlog, true)
            .map_err(|e| with_context(e, format!("cannot listen on {local} (SO_REUSEPORT)")))?;
        listeners.push(l);
    }
    hoop_flags::backlog::say_limits(backlog);

    let stop = Arc::new(Stop::new());
    let cpus = allowed_cpus();
    let mut workers: Vec<JoinHandle<io::Result<()>>> = Vec::with_capacity(threads);
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    for (i, listener) in listeners.into_iter().enumerate() {
        let stop_w = stop.clone();
        let ready = ready_tx.clone();
        let cpu = cpus[i % cpus.len()];
        let serve = serve.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("hoop-{server}-{i}"))
            .spawn(move || worker(server, i, cpu, kind, listener, ready, stop_w, serve));
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

/// One runtime thread on driver `kind`: says it is ready once its runtime is up, then runs
/// `serve` until it returns (after `stop` is raised).
#[allow(clippy::too_many_arguments)]
fn worker(
    server: &str,
    i: usize,
    cpu: usize,
    kind: DriverKind,
    listener: TcpListener,
    ready: mpsc::Sender<()>,
    stop: Arc<Stop>,
    serve: Serve,
) -> io::Result<()> {
    if let Err(e) = hoop::runtime::pin_to_cpu(cpu) {
        eprintln!("hoop {server}: thread {i}: cannot pin to CPU {cpu}: {e}; running unpinned");
    }
    let rt = hoop::Runtime::builder()
        .driver(kind)
        .build()
        .map_err(|e| with_context(e, format!("thread {i}: cannot start the {kind} runtime")))?;
    // The main thread may have given up already; serving on is still right until `stop`.
    let _ = ready.send(());
    drop(ready);
    rt.block_on(serve(i, listener, stop));
    // Cancels every connection's operations and closes every socket.
    drop(rt);
    Ok(())
}

/// Runs `fut` until it completes or `stop` is raised, whichever comes first.
pub(crate) async fn until_stopped<F: Future<Output = ()>>(stop: &Stop, fut: F) {
    let mut fut = pin!(fut);
    let mut stopped = pin!(stop.wait());
    std::future::poll_fn(|cx| {
        if stopped.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        fut.as_mut().poll(cx)
    })
    .await
}

/// The CPUs this process may run on, in order: thread `i` is pinned to the `i % len`-th, which
/// is CPU `i % cpus` on an unrestricted machine and stays inside a mask set from outside
/// (`taskset`, or the benchmark pinning its server). Never empty.
pub(crate) fn allowed_cpus() -> Vec<usize> {
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
pub(crate) fn join_workers(workers: Vec<JoinHandle<io::Result<()>>>) -> io::Result<()> {
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
pub(crate) fn announce(addr: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "listening on {addr}")
        .and_then(|()| out.flush())
        .map_err(|e| with_context(e, "cannot write to stdout".to_string()))
}

/// Raises the soft limit on open files to the hard limit (best effort): a server with more
/// than about a thousand connections needs it.
pub(crate) fn raise_nofile_limit() {
    let _ = hoop::runtime::raise_nofile_limit();
}

/// `e` with `what` in front of its message, keeping its kind.
pub(crate) fn with_context(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
