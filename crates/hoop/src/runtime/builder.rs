//! The runtime's builder: ring settings, the driver, the blocking pool and the wake path.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoop_driver::{Config, Driver, DriverKind};

use super::blocking::{self, DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS};
use super::context::Inner;
use super::executor::Runtime;
use super::task::{Remote, Tasks, WakeBy};
use super::timers;

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// Builds a [`Runtime`] with non-default ring settings.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    cfg: Config,
    /// Set by [`Builder::driver`]; otherwise `HOOP_DRIVER` decides (default `auto`).
    driver_set: bool,
    max_blocking_threads: Option<usize>,
    blocking_keep_alive: Option<Duration>,
    /// `None`: on (see [`Builder::msg_ring_wake`]).
    msg_ring_wake: Option<bool>,
}

impl Builder {
    /// Default settings: 256 SQ entries, a CQ of max(16384, 4 x SQ) grown to hold one operation
    /// per descriptor of the `RLIMIT_NOFILE` soft limit (at most 65536 entries, see
    /// `hoop_driver::default_cq_entries`), `SINGLE_ISSUER | DEFER_TASKRUN` when the kernel has
    /// them. From Linux 6.13 the CQ starts at 1,024 entries and grows to that size under load
    /// ([`Builder::resize_rings`]).
    pub fn new() -> Builder {
        Builder::default()
    }

    /// SQ entries (a power of two; the kernel rounds up).
    pub fn entries(mut self, entries: u32) -> Builder {
        self.cfg.entries = entries;
        self
    }

    /// CQ entries (at least twice the SQ). In-flight operations are capped by what the CQ can
    /// hold; more wait for room, in FIFO order.
    pub fn cq_entries(mut self, entries: u32) -> Builder {
        self.cfg.cq_entries = Some(entries);
        self
    }

    /// Overrides the in-flight cap. A value above the CQ size lets completions overflow into the
    /// kernel's backlog, which the driver then flushes: only useful to test that path. Multishot
    /// receives and accepts (which wait for a peer) are not counted against it.
    pub fn max_in_flight(mut self, ops: u32) -> Builder {
        self.cfg.max_in_flight = Some(ops);
        self
    }

    /// Whether the CQ starts small and grows under load (`IORING_REGISTER_RESIZE_RINGS`, Linux
    /// 6.13; default true): see `hoop_driver::Config::resize_rings`. Off, or with
    /// [`Builder::cq_entries`] or [`Builder::max_in_flight`] set, the CQ has its full size from
    /// the start.
    pub fn resize_rings(mut self, on: bool) -> Builder {
        self.cfg.resize_rings = on;
        self
    }

    /// A blocking wait returns after `min_wait` once a completion has come, asking the kernel
    /// for a batch (Linux 6.12; see `hoop_driver::Config::min_wait`). Default: off (the
    /// `HOOP_MIN_WAIT_US` environment variable sets it for a whole process).
    pub fn min_wait(mut self, min_wait: Option<Duration>) -> Builder {
        self.cfg.min_wait = min_wait;
        self
    }

    /// Whether bounded waits pass their arguments in a page registered with the ring (Linux
    /// 6.13; see `hoop_driver::Config::reg_wait`). Default: on (the `HOOP_REG_WAIT=0`
    /// environment variable turns it off for a whole process).
    pub fn reg_wait(mut self, on: bool) -> Builder {
        self.cfg.reg_wait = on;
        self
    }

    /// Whether to try `SINGLE_ISSUER | DEFER_TASKRUN` and `COOP_TASKRUN` (default true).
    pub fn taskrun_flags(mut self, on: bool) -> Builder {
        self.cfg.taskrun_flags = on;
        self
    }

    /// Which driver to run: `Auto` (default: io_uring, or epoll with a one-line reason when
    /// io_uring is unavailable), `Uring` (fail with the reason instead) or `Epoll`. Without this
    /// call the `HOOP_DRIVER` environment variable (`uring`, `epoll`, `auto`) decides.
    pub fn driver(mut self, kind: DriverKind) -> Builder {
        self.cfg.driver = kind;
        self.driver_set = true;
        self
    }

    /// Threads of the epoll driver's blocking pool for file operations (default 4).
    pub fn pool_threads(mut self, threads: usize) -> Builder {
        self.cfg.pool_threads = threads;
        self
    }

    /// How long dropping the runtime waits for cancelled operations' completions before leaking
    /// their memory (default 5 s). It also bounds how long the end of `block_on`, and the
    /// shutdown, wait for the writes of files and streams dropped with write-behind pending
    /// (see [`ShutdownReport::unfinished_writes`](crate::ShutdownReport::unfinished_writes)).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Builder {
        self.cfg.shutdown_timeout = timeout;
        self
    }

    /// Runs the ring with an SQ polling thread (`IORING_SETUP_SQPOLL`): a kernel thread takes
    /// SQEs as soon as they are queued, so submitting needs no system call while it is awake;
    /// it sleeps after `idle` without work (whole milliseconds, at least 1 ms) and the driver
    /// wakes it when it next submits. The thread busy-polls a CPU while awake. The taskrun
    /// flags do not apply (the kernel refuses them with SQPOLL); if the kernel refuses SQPOLL
    /// itself the ring is set up without it. [`Runtime::setup_flags`] names what was accepted.
    /// With SQPOLL, `Counters::sqes_submitted` stays 0 (the SQ thread takes SQEs unseen).
    pub fn sqpoll(mut self, idle: Duration) -> Builder {
        self.cfg.sqpoll_idle = Some(idle);
        self
    }

    /// Binds the SQ polling thread to CPU `cpu` (`IORING_SETUP_SQ_AFF`; only with
    /// [`Builder::sqpoll`]). A CPU the kernel refuses is dropped.
    pub fn sqpoll_cpu(mut self, cpu: u32) -> Builder {
        self.cfg.sqpoll_cpu = Some(cpu);
        self
    }

    /// Busy-polls the device for completions (`IORING_SETUP_IOPOLL`) instead of waiting for
    /// interrupts: lower latency for `O_DIRECT` file I/O, at the cost of a spinning thread.
    ///
    /// Such a ring only takes reads and writes of files opened with `O_DIRECT` (and NOPs):
    /// sockets, timers (so `hoop::time`), polls, cancels, opens and closes fail with `EINVAL`,
    /// so open and close the files without the runtime (e.g. `std::fs` with `O_DIRECT`). A read
    /// on a device without poll queues fails with `EOPNOTSUPP`. Default false.
    pub fn iopoll(mut self, on: bool) -> Builder {
        self.cfg.iopoll = on;
        self
    }

    /// Registers the ring's fd with the kernel so that `io_uring_enter` skips the fd lookup
    /// (`IORING_REGISTER_RING_FDS`, 5.18). Default true; a kernel that refuses is ignored.
    pub fn register_ring_fd(mut self, on: bool) -> Builder {
        self.cfg.register_ring_fd = on;
        self
    }

    /// Caps the kernel's io-wq worker threads for this ring
    /// (`IORING_REGISTER_IOWQ_MAX_WORKERS`, 5.15): `bounded` for regular files and block
    /// devices, `unbounded` for sockets and pipes; 0 keeps the kernel's limit. The kernel keeps
    /// these limits per thread (its io-wq serves every ring of the thread; with SQPOLL, the SQ
    /// thread's), so they apply to the thread's other rings too and outlast the runtime. A
    /// kernel that refuses is ignored.
    pub fn iowq_max_workers(mut self, bounded: u32, unbounded: u32) -> Builder {
        self.cfg.iowq_max_workers = Some((bounded, unbounded));
        self
    }

    /// Keeps a time-weighted count of the operations in the kernel, read as
    /// `Counters::mean_depth` (one clock read per `io_uring_enter` and per drain; default
    /// off). The epoll driver keeps none.
    pub fn sample_depth(mut self, on: bool) -> Builder {
        self.cfg.sample_depth = on;
        self
    }

    /// Bound on the threads of this runtime's [`spawn_blocking`] pool (default
    /// [`DEFAULT_MAX_BLOCKING_THREADS`], at least 1). Calls beyond it wait in a FIFO queue.
    ///
    /// [`spawn_blocking`]: super::spawn_blocking
    pub fn max_blocking_threads(mut self, threads: usize) -> Builder {
        self.max_blocking_threads = Some(threads.max(1));
        self
    }

    /// How long an idle blocking-pool thread waits for work before it exits (default
    /// [`DEFAULT_BLOCKING_KEEP_ALIVE`]).
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Builder {
        self.blocking_keep_alive = Some(keep_alive);
        self
    }

    /// Whether other threads ([`Handle::spawn`], wakers of tasks woken elsewhere) wake this
    /// runtime's thread with an `IORING_OP_MSG_RING` message posted into its ring
    /// (`IORING_REGISTER_SEND_MSG_RING`, Linux 6.13+) rather than with the driver's eventfd.
    /// Default true; the epoll driver and older kernels always use the eventfd, and a message
    /// the kernel refuses falls back to it. [`Handle::wake_path`] says which one runs.
    ///
    /// [`Handle::spawn`]: super::Handle::spawn
    /// [`Handle::wake_path`]: super::Handle::wake_path
    pub fn msg_ring_wake(mut self, on: bool) -> Builder {
        self.msg_ring_wake = Some(on);
        self
    }

    /// Sets up the ring. A refused setup says why (ENOSYS, EPERM with the
    /// `kernel.io_uring_disabled` value, ENOMEM with the memlock limit, EINVAL) and what to do.
    pub fn build(mut self) -> io::Result<Runtime> {
        if !self.driver_set {
            if let Some(kind) = DriverKind::from_env()? {
                self.cfg.driver = kind;
            }
        }
        let driver = Driver::new(&self.cfg)?;
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let ring = if self.msg_ring_wake.unwrap_or(true) {
            driver.ring_waker()
        } else {
            None
        };
        let pool = blocking::BlockingPool::new(
            self.max_blocking_threads
                .unwrap_or(DEFAULT_MAX_BLOCKING_THREADS),
            self.blocking_keep_alive
                .unwrap_or(DEFAULT_BLOCKING_KEEP_ALIVE),
        );
        let remote = Arc::new(Remote::new(id, WakeBy::new(ring, driver.notifier()), pool));
        Ok(Runtime {
            inner: Rc::new(Inner {
                id,
                driver,
                tasks: RefCell::new(Tasks::default()),
                remote,
                timers: RefCell::new(timers::Timers::default()),
                internal_tasks: Rc::default(),
                on_shutdown: RefCell::default(),
                writers: Rc::default(),
                writers_timeout: self.cfg.shutdown_timeout,
            }),
        })
    }
}

impl Runtime {
    /// A runtime with default settings.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// A builder for non-default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }
}
