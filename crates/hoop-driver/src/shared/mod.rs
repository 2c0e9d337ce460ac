//! Rings shared by every thread: io_uring from any executor (tokio's multi-thread scheduler
//! included), as `Send + 'static` futures.
//!
//! [`Rings`] is a set of rings, each with a preallocated table of op slots, a lock, and a reaper
//! thread that waits only when nothing else does. Any thread submits; an operation goes to the
//! thread's own ring (rings are given to threads in turn) while that ring has at most 32 more
//! operations in flight than the least-loaded one, else to the least-loaded ring (kbio's rule),
//! unless the handle is [pinned](Rings::pinned): one thread's batch takes one lock and one
//! `io_uring_enter` instead of bouncing between rings. With [`RingsBuilder::iopoll`], the rings
//! are `IORING_SETUP_IOPOLL` rings and one plain ring is added: O_DIRECT reads and writes (and
//! no-ops) go to the polled rings, everything an IOPOLL ring refuses to the plain one. Where
//! io_uring is refused, the set runs on hoop's epoll engine instead ([`RingsBuilder::driver`]).
//!
//! The operations are the driver's own ([`crate::op`]), with the same ownership rules as on a
//! per-thread ring: the future owns its buffer, dropping it cancels the operation in the kernel,
//! a late accept or open result is closed, and memory is freed only after the final CQE.
//!
//! Submission: an operation's first poll pushes its SQE and comes back after the executor's
//! other ready tasks pushed theirs, so one `io_uring_enter` takes them all; an operation alone
//! in its task's poll submits at once ([`SharedOp::eager`]).
//!
//! Completions: a thread that polls an operation submits the queued SQEs and drains the CQ
//! itself, so operations that complete inline (no-ops, hot-cache reads) never leave the thread.
//! What completes later is waited for by the executor's reactor when one takes the ring (hoop's
//! tokio integration registers the ring fd with tokio's reactor through [`set_reactor_hook`]:
//! a completion wakes a tokio worker directly), else by the ring's reaper, which waits in the
//! kernel only while something is owed (an idle set of rings uses no CPU). Wakers are called
//! outside every lock. No room (slots or SQ): the future waits in the ring's FIFO, woken when a
//! slot frees; nothing spins and nothing blocks.

mod handoff;
#[cfg(all(loom, test))]
mod model;
mod op;
mod ring;
mod sync;

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use self::op::{Keep, SharedOp};
use self::ring::Ring;
pub use self::ring::{
    deferred_pushes, deferring_here, set_reactor_hook, submit_deferred, ReactorGuard, ReactorRing,
};
use crate::config::{Config, DriverKind};
use crate::op::{Nop, OpCode};
use crate::sys::epoll::EpollOp;
use crate::sys::uring::{ShutdownReport, UringOp};

/// Where an operation may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Any ring that can run every opcode (not an IOPOLL ring).
    Plain,
    /// A read or write of an `O_DIRECT` file: an IOPOLL ring if the set has one, else a plain one.
    Direct,
    /// Any ring (a no-op runs everywhere).
    Any,
}

/// Called once with the shutdown report when the last handle of a set is dropped.
type OnShutdown = Arc<Mutex<Option<Box<dyn FnOnce(ShutdownReport) + Send>>>>;

/// How a [`Rings`] set is built.
#[derive(Clone)]
pub struct RingsBuilder {
    rings: usize,
    entries: u32,
    sqpoll: bool,
    iopoll: bool,
    shutdown_timeout: Duration,
    max_in_flight: Option<u32>,
    driver: DriverKind,
    on_shutdown: OnShutdown,
}

impl fmt::Debug for RingsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingsBuilder")
            .field("rings", &self.rings)
            .field("entries", &self.entries)
            .field("sqpoll", &self.sqpoll)
            .field("iopoll", &self.iopoll)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .field("driver", &self.driver)
            .finish_non_exhaustive()
    }
}

impl Default for RingsBuilder {
    fn default() -> Self {
        RingsBuilder {
            rings: std::thread::available_parallelism().map_or(1, |n| n.get()),
            entries: 256,
            sqpoll: false,
            iopoll: false,
            shutdown_timeout: Duration::from_secs(5),
            max_in_flight: None,
            // As `Runtime::new()`: `HOOP_DRIVER` chooses, else auto.
            driver: DriverKind::from_env()
                .ok()
                .flatten()
                .unwrap_or(DriverKind::Auto),
            on_shutdown: Arc::new(Mutex::new(None)),
        }
    }
}

impl RingsBuilder {
    /// Number of rings (default: one per online CPU; at least 1).
    pub fn rings(mut self, n: usize) -> Self {
        self.rings = n.max(1);
        self
    }

    /// SQ entries of each ring (default 256). Each ring's CQ is `hoop_driver::default_cq_entries`
    /// (at least 16384 and 4 x entries, more under a high descriptor limit); the slot table
    /// holds what the CQ can take.
    pub fn entries(mut self, entries: u32) -> Self {
        self.entries = entries.max(1);
        self
    }

    /// `IORING_SETUP_SQPOLL`: a kernel thread per ring takes SQEs without system calls (idle
    /// 10 ms). Default off; a kernel that refuses gets a plain ring.
    pub fn sqpoll(mut self, on: bool) -> Self {
        self.sqpoll = on;
        self
    }

    /// `IORING_SETUP_IOPOLL` for the rings, plus one plain ring for everything a polled ring
    /// refuses (sockets, opens, closes, syncs, cancels, buffered files). Default off.
    pub fn iopoll(mut self, on: bool) -> Self {
        self.iopoll = on;
        self
    }

    /// Op slots per ring: the most operations in flight on one ring (default: what its CQ can
    /// hold, less the room kept for cancels). More operations wait in the ring's FIFO.
    pub fn max_in_flight(mut self, slots: u32) -> Self {
        self.max_in_flight = Some(slots.max(1));
        self
    }

    /// How long shutdown waits for in-flight operations' final CQEs (default 5 s) before
    /// leaking their memory on purpose.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Which engine the rings use (default: `HOOP_DRIVER` if set, else `Auto`): `Auto` sets up
    /// io_uring and, where it is
    /// refused (seccomp, `kernel.io_uring_disabled`, an old kernel, memlock), falls back to
    /// hoop's epoll driver with the reason in one line on stderr (once per process) and in
    /// [`Rings::fallback_reason`]; `Uring` fails instead; `Epoll` never tries io_uring.
    pub fn driver(mut self, kind: DriverKind) -> Self {
        self.driver = kind;
        self
    }

    /// Called once, on the teardown thread, with the report of the shutdown that dropping the
    /// last handle starts (see [`Rings`]); without it the report is dropped.
    pub fn on_shutdown(mut self, f: impl FnOnce(ShutdownReport) + Send + 'static) -> Self {
        self.on_shutdown = Arc::new(Mutex::new(Some(Box::new(f))));
        self
    }

    /// Sets up the rings and starts their reapers. With the default `driver(Auto)`, a set
    /// io_uring refuses is built on epoll instead (see [`RingsBuilder::driver`]); a forced
    /// `Uring` returns why it cannot be set up (seccomp, `kernel.io_uring_disabled`, memlock,
    /// ...).
    pub fn build(self) -> io::Result<Rings> {
        // An invalid `HOOP_KERNEL_LEVEL` starts no ring (not even the epoll fallback).
        crate::level::check()?;
        let cfg = |iopoll: bool, driver: DriverKind| Config {
            entries: self.entries,
            // Several threads submit: no SINGLE_ISSUER / DEFER_TASKRUN, no per-thread
            // registered ring fd.
            taskrun_flags: false,
            // Completions run as task work of the thread that submitted: COOP_TASKRUN lets a
            // running thread take them at its next system call instead of an interrupt.
            coop_taskrun: true,
            register_ring_fd: false,
            driver,
            sqpoll_idle: self.sqpoll.then(|| Duration::from_millis(10)),
            iopoll,
            shutdown_timeout: self.shutdown_timeout,
            max_in_flight: self.max_in_flight,
            ..Config::default()
        };
        let mut fallback_reason = None;
        let mut driver = match self.driver {
            DriverKind::Epoll => DriverKind::Epoll,
            _ => DriverKind::Uring,
        };
        let mut rings = Vec::new();
        while rings.len() < self.rings {
            // A ring of an `Auto` set is told so: it is the one an injected setup failure may
            // hit (its fallback is what the injection tests).
            let asked = if self.driver == DriverKind::Auto && driver == DriverKind::Uring {
                DriverKind::Auto
            } else {
                driver
            };
            match Ring::new(&cfg(self.iopoll && driver == DriverKind::Uring, asked)) {
                Ok(r) => rings.push(Arc::new(r)),
                Err(e) if self.driver == DriverKind::Auto && driver == DriverKind::Uring => {
                    let reason = e.to_string();
                    note_fallback_once(&reason);
                    fallback_reason = Some(reason);
                    driver = DriverKind::Epoll;
                    rings.clear();
                }
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        if self.iopoll && driver == DriverKind::Uring {
            rings.push(Arc::new(
                Ring::new(&cfg(false, driver)).map_err(io::Error::from)?,
            ));
        }
        let mut reapers = Vec::new();
        for (i, ring) in rings.iter().enumerate() {
            let ring = ring.clone();
            let spawned = crate::thread::spawn(
                std::thread::Builder::new().name(format!("hoop-reaper-{i}")),
                move || ring.reap_until_stopped(),
            );
            match spawned {
                Ok(handle) => reapers.push(handle),
                Err(e) => {
                    // Stop the reapers already running before reporting.
                    let inner = RingsInner {
                        rings,
                        reapers: Mutex::new(reapers),
                        driver,
                        fallback_reason: None,
                        on_shutdown: Arc::new(Mutex::new(None)),
                    };
                    drop(inner);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot start a reaper thread: {e}"),
                    ));
                }
            }
        }
        Ok(Rings {
            inner: Arc::new(RingsInner {
                rings,
                reapers: Mutex::new(reapers),
                driver,
                fallback_reason,
                on_shutdown: self.on_shutdown,
            }),
            pin: None,
        })
    }
}

/// How many more operations in flight than the least-loaded ring a thread's own ring may have
/// and still be chosen.
const LOAD_SLACK: usize = 32;

/// The index (below `n`) of the calling thread's own ring: threads are given rings in turn.
fn home_ring(n: usize) -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    HOME.with(|h| {
        if h.get() == usize::MAX {
            h.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        h.get() % n
    })
}

/// Prints why a set of shared rings runs on epoll, once per process.
fn note_fallback_once(reason: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!("hoop: io_uring unavailable, shared rings use the epoll driver: {reason}");
    });
}

struct RingsInner {
    rings: Vec<Arc<Ring>>,
    reapers: Mutex<Vec<JoinHandle<()>>>,
    driver: DriverKind,
    fallback_reason: Option<String>,
    on_shutdown: OnShutdown,
}

impl RingsInner {
    fn shutdown(&self) -> ShutdownReport {
        shutdown_all(&self.rings)
    }
}

fn shutdown_all(rings: &[Arc<Ring>]) -> ShutdownReport {
    let mut total = ShutdownReport::default();
    for ring in rings {
        let r = ring.with(|e| e.shutdown());
        total.cancelled += r.cancelled;
        total.leaked += r.leaked;
        total.still_in_flight += r.still_in_flight;
    }
    total
}

/// What the last handle's drop hands to the teardown thread.
struct Teardown {
    rings: Vec<Arc<Ring>>,
    reapers: Vec<JoinHandle<()>>,
    on_shutdown: OnShutdown,
}

/// Sets whose teardown has not finished yet.
static TEARDOWNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Teardown {
    /// Cancels what is in flight, reaps every final CQE (or leaks its memory after the
    /// timeout), stops the reapers and the reactor pollers, joins the reapers, and hands the
    /// report to the `on_shutdown` callback.
    fn run(self) {
        let Teardown {
            rings,
            reapers,
            on_shutdown,
        } = self;
        let report = shutdown_all(&rings);
        for ring in &rings {
            ring.stop_reaper();
        }
        let me = std::thread::current().id();
        for handle in reapers {
            // Run by a reaper itself (it cannot be here, but a join on oneself would hang).
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
        // The rings' fds close here (unless a future or a reactor poller still holds one).
        drop(rings);
        let f = on_shutdown.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = f {
            f(report);
        }
        TEARDOWNS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Drop for RingsInner {
    /// The last handle: the teardown (cancel, reap every final CQE or leak after the timeout,
    /// stop and join the reapers) runs on a thread of its own, so the thread that dropped the
    /// handle (a tokio worker, say) never blocks; the report goes to
    /// [`RingsBuilder::on_shutdown`]. Only if no thread can be started does it run here.
    fn drop(&mut self) {
        let teardown = Teardown {
            rings: std::mem::take(&mut self.rings),
            reapers: std::mem::take(&mut *self.reapers.lock().unwrap_or_else(|e| e.into_inner())),
            on_shutdown: self.on_shutdown.clone(),
        };
        TEARDOWNS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let (tx, rx) = std::sync::mpsc::channel::<Teardown>();
        let spawned = crate::thread::spawn(
            std::thread::Builder::new().name("hoop-rings-teardown".into()),
            move || {
                if let Ok(t) = rx.recv() {
                    t.run();
                }
            },
        );
        match spawned {
            Ok(_) => {
                if let Err(std::sync::mpsc::SendError(t)) = tx.send(teardown) {
                    t.run();
                }
            }
            Err(_) => teardown.run(),
        }
    }
}

/// A set of io_uring rings (or epoll engines, where io_uring is refused) any thread submits
/// to. `Clone + Send + Sync`: every clone is a handle to the same rings; dropping the last one
/// (from any thread) starts the teardown on a thread of its own, so the dropping thread never
/// blocks: it cancels what is in flight, reaps every final CQE, stops the reapers, and gives
/// its report to [`RingsBuilder::on_shutdown`]. [`Rings::shutdown`] does the same at once.
#[derive(Clone)]
pub struct Rings {
    inner: Arc<RingsInner>,
    pin: Option<usize>,
}

impl fmt::Debug for Rings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rings")
            .field("rings", &self.inner.rings.len())
            .field("pin", &self.pin)
            .finish_non_exhaustive()
    }
}

impl Rings {
    /// A builder (defaults: one ring per online CPU, 256 entries, no SQPOLL, no IOPOLL).
    pub fn builder() -> RingsBuilder {
        RingsBuilder::default()
    }

    /// Rings with the builder's defaults.
    pub fn new() -> io::Result<Rings> {
        Rings::builder().build()
    }

    /// Number of rings in the set.
    pub fn ring_count(&self) -> usize {
        self.inner.rings.len()
    }

    /// A handle to the same rings whose operations all go to ring `index` (modulo the number of
    /// rings), except those that ring cannot run (a socket operation on an IOPOLL ring goes to
    /// the plain ring).
    pub fn pinned(&self, index: usize) -> Rings {
        Rings {
            inner: self.inner.clone(),
            pin: Some(index % self.inner.rings.len()),
        }
    }

    /// The setup flags the kernel accepted for ring `index`, e.g. `"SUBMIT_ALL|CQSIZE"`.
    pub fn setup_flags(&self, index: usize) -> Option<&'static str> {
        self.inner.rings.get(index).map(|r| r.setup_flags())
    }

    fn pick(&self, route: Route) -> Arc<Ring> {
        let rings = &self.inner.rings;
        let fits = |r: &Ring| match route {
            Route::Plain => !r.iopoll,
            Route::Direct | Route::Any => true,
        };
        if let Some(i) = self.pin {
            if fits(&rings[i]) {
                return rings[i].clone();
            }
        }
        // The thread's own ring when it has few operations in flight: no other ring can then
        // be LOAD_SLACK emptier, so the scan below would choose it anyway.
        let own = &rings[home_ring(rings.len())];
        if fits(own) && (route != Route::Direct || own.iopoll) && own.load() <= LOAD_SLACK {
            return own.clone();
        }
        let prefer_iopoll = route == Route::Direct;
        let mut best: Option<&Arc<Ring>> = None;
        for r in rings.iter().filter(|r| fits(r)) {
            best = match best {
                None => Some(r),
                Some(b) => {
                    let better_kind = prefer_iopoll && r.iopoll && !b.iopoll;
                    let same_kind = !prefer_iopoll || r.iopoll == b.iopoll;
                    if better_kind || (same_kind && r.load() < b.load()) {
                        Some(r)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        // A set always has a plain ring (IOPOLL sets get one more), so `best` is found; the
        // first ring is a harmless fallback.
        let best = best.unwrap_or(&rings[0]);
        // The thread's own ring, unless it is clearly busier than the least-loaded one: the
        // operations of one thread then share a ring (one lock, one enter per batch) instead
        // of bouncing every ring's lock between CPUs.
        if fits(own) && own.iopoll == best.iopoll && own.load() <= best.load() + LOAD_SLACK {
            return own.clone();
        }
        best.clone()
    }

    /// Starts `op` (when first polled) on a ring `route` allows. The building block of
    /// `hoop::shared`'s files and sockets.
    pub fn submit<T: OpCode + UringOp + EpollOp + Send>(&self, route: Route, op: T) -> SharedOp<T> {
        SharedOp::new(op, self.pick(route))
    }

    /// An `IORING_OP_NOP` through the whole submission and completion path.
    pub fn nop(&self) -> SharedOp<Nop> {
        self.submit(Route::Any, Nop)
    }

    /// Operations in flight on all rings (slots in use).
    pub fn in_flight(&self) -> usize {
        self.inner
            .rings
            .iter()
            .map(|r| r.with(|e| e.in_use()))
            .sum()
    }

    /// How many dropped sets are still being torn down (their last handle's drop hands the
    /// teardown to a thread of its own): a program that wants every ring closed before it goes
    /// on (or exits) waits for 0, or calls [`Rings::shutdown`] before dropping its last handle.
    pub fn teardowns_in_progress() -> usize {
        TEARDOWNS.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The engine the rings run on: `Uring`, or `Epoll` where io_uring was refused (see
    /// [`RingsBuilder::driver`]).
    pub fn driver_kind(&self) -> DriverKind {
        self.inner.driver
    }

    /// Why the set runs on epoll although io_uring was asked for (`driver(Auto)`): the setup
    /// error, e.g. EPERM from a seccomp filter. `None` on io_uring.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.inner.fallback_reason.as_deref()
    }

    /// Cancels every operation in flight on every ring and reaps their final CQEs (or leaks
    /// their memory after the shutdown timeout); operations started afterwards fail with
    /// `ECANCELED`. Blocks until done (up to the shutdown timeout): from an async task, call
    /// it through `spawn_blocking`. Dropping the last handle does the same on a thread of its
    /// own.
    pub fn shutdown(&self) -> ShutdownReport {
        self.inner.shutdown()
    }
}
