//! The thread-per-core runtime: one ring, one executor, one thread.
//!
//! [`Runtime::block_on`] runs a future and every task [`spawn`]ed from it on the current thread.
//! The loop: poll the ready tasks (up to what was ready when the batch began), then turn the
//! driver — submit every SQE the tasks queued in one `io_uring_enter`, and, if nothing is ready,
//! wait in that same call for a completion — drain the CQ in a batch and wake the tasks whose
//! operations completed.
//!
//! Other threads reach a runtime through its [`Handle`] (`Handle::spawn` of `Send` futures,
//! woken by a MSG_RING message or the driver's eventfd); blocking calls go to a bounded thread
//! pool with [`spawn_blocking`].

mod blocking;
mod handle;
mod join;
mod os;
mod send_join;
mod task;
pub(crate) mod timers;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hoop_driver::{Config, Counters, Driver, DriverKind, ShutdownReport};

pub use blocking::{DEFAULT_BLOCKING_KEEP_ALIVE, DEFAULT_MAX_BLOCKING_THREADS};
pub use handle::{spawn_blocking, Handle, WakePath};
use hoop_driver::task_key::TaskGuard;
pub use join::{AbortHandle, JoinError, JoinHandle};
pub use os::{pin_to_cpu, raise_nofile_limit};
pub use send_join::SendJoinHandle;
use task::{
    with_local_queue, Header, LocalQueueGuard, Remote, RemoteFuture, Task, TaskId, Tasks, WakeBy,
    MAIN,
};

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// A hook [`on_shutdown`] registered.
type ShutdownHook = Box<dyn FnOnce(ShutdownReport)>;

struct Inner {
    id: u64,
    driver: Driver,
    tasks: RefCell<Tasks>,
    remote: Arc<Remote>,
    timers: RefCell<timers::Timers>,
    /// hoop's own tasks alive (the signal reader), which [`task_count`] leaves out.
    internal_tasks: Rc<std::cell::Cell<usize>>,
    /// What [`on_shutdown`] registered, called with the report at shutdown.
    on_shutdown: RefCell<Vec<ShutdownHook>>,
    /// Tasks finishing the write-behind of dropped files and streams (bytes a write accepted
    /// are written: DESIGN.md, "Writes accepted are written").
    writers: Rc<Writers>,
    /// How long `block_on`'s end and the shutdown wait for `writers` (the builder's
    /// shutdown timeout).
    writers_timeout: Duration,
}

/// The detached writers of a runtime: tasks that finish the write-behind of a file, stream or
/// write half dropped with writes pending, then close it (DESIGN.md, "Writes accepted are
/// written"; see `crate::poll_io`).
#[derive(Debug, Default)]
pub(crate) struct Writers {
    /// The writer tasks' keys (`TaskId::key`; a key names one task, as slot generations
    /// move on), pruned of finished ones as it grows.
    keys: RefCell<std::collections::HashSet<u64>>,
    /// The set's size after the last prune: the next prune comes at twice as many.
    pruned_at: std::cell::Cell<usize>,
    /// Writers dropped unfinished (shutdown past its timeout), and their bytes not written.
    unfinished: std::cell::Cell<usize>,
    unfinished_bytes: std::cell::Cell<u64>,
}

impl Writers {
    /// A writer dropped before its writes finished, with `bytes` not written.
    pub(crate) fn unfinished(&self, bytes: u64) {
        self.unfinished.set(self.unfinished.get() + 1);
        self.unfinished_bytes
            .set(self.unfinished_bytes.get().saturating_add(bytes));
    }

    /// Forgets the keys of finished writers; returns how many remain.
    fn prune(&self, tasks: &Tasks) -> usize {
        let mut keys = self.keys.borrow_mut();
        keys.retain(|k| tasks.header(TaskId::from_key(*k)).is_some());
        self.pruned_at.set(keys.len());
        keys.len()
    }

    fn contains(&self, id: TaskId) -> bool {
        self.keys.borrow().contains(&id.key())
    }
}

/// Runs `f` on the timers of the runtime running on this thread, with its id; `None` outside
/// a runtime.
pub(crate) fn with_timers<R>(f: impl FnOnce(&mut timers::Timers, u64) -> R) -> Option<R> {
    CONTEXT.with(|c| {
        let c = c.borrow();
        let inner = c.as_ref()?;
        let mut t = inner.timers.borrow_mut();
        Some(f(&mut t, inner.id))
    })
}

thread_local! {
    static CONTEXT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

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
    /// them.
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
    /// (see [`ShutdownReport::unfinished_writes`]).
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

/// A single-threaded io_uring runtime. Not `Send`: build one per thread (see [`run_per_core`]).
pub struct Runtime {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

struct ContextGuard {
    prev: Option<Rc<Inner>>,
    queue: LocalQueueGuard,
    _driver: hoop_driver::EnterGuard,
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CONTEXT.with(|c| *c.borrow_mut() = prev);
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

    fn enter(&self) -> ContextGuard {
        let prev = CONTEXT.with(|c| c.borrow_mut().replace(self.inner.clone()));
        ContextGuard {
            prev,
            queue: LocalQueueGuard::enter(self.inner.id),
            _driver: self.inner.driver.enter(),
        }
    }

    /// Runs `future` to completion on this thread, with every task spawned meanwhile.
    ///
    /// Before it returns, files and streams dropped with write-behind pending finish their
    /// writes and close (up to the shutdown timeout; the program's other tasks do not run
    /// meanwhile), and what the ring has queued is submitted: a peer reads every accepted byte
    /// and the end of the stream while the runtime sits idle.
    ///
    /// # Panics
    /// When called from inside a runtime's `block_on` on the same thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        assert!(
            CONTEXT.with(|c| c.borrow().is_none()),
            "hoop: cannot start a runtime from within a runtime (block_on inside block_on)"
        );
        let guard = self.enter();
        let local = guard.queue.queue();
        let inner = &self.inner;
        let mut future = pin!(future);
        let (main_header, main_waker) = Header::waker(MAIN, inner.remote.clone());
        let mut batch: VecDeque<TaskId> = VecDeque::with_capacity(64);
        let mut spawned: Vec<RemoteFuture> = Vec::new();
        let mut reported = None;
        let mut due = Vec::new();
        let mut ready_keys: Vec<u64> = Vec::with_capacity(256);
        // The main future is polled first, then whenever its waker puts it in the run queue,
        // in its turn among the tasks.
        main_header.mark_scheduled();
        local.queue.borrow_mut().push_back(MAIN);
        loop {
            // The tasks woken locally since the last batch: the queue is swapped out whole
            // (`batch` is empty here), cheaper than moving its ids one by one.
            std::mem::swap(&mut batch, &mut *local.queue.borrow_mut());
            inner.remote.take(&mut batch, &mut spawned);
            // Futures spawned from other threads become tasks here (queued locally, so they
            // run in this batch).
            if !spawned.is_empty() {
                for f in spawned.drain(..) {
                    drop(spawn(f));
                }
            }
            {
                let mut q = local.queue.borrow_mut();
                if !q.is_empty() {
                    batch.append(&mut q);
                }
            }
            while let Some(id) = batch.pop_front() {
                if id == MAIN {
                    // In its turn among the tasks, not after one more driver turn.
                    main_header.unschedule();
                    let _mark = TaskGuard::enter(inner.driver.id(), &main_waker, MAIN.key());
                    let mut cx = Context::from_waker(&main_waker);
                    if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                        // Writes of values the program dropped go out before this returns,
                        // and so do their closes: a peer waiting for the end of a stream
                        // does not wait for the runtime's next run (bytes a write accepted
                        // are written, and a close is submitted on the tick of the drop).
                        self.finish_writers();
                        inner.driver.submit_queued();
                        return v;
                    }
                } else {
                    run_task(inner, id);
                }
                if !batch.is_empty() {
                    // File I/O the task queued goes to its device now if the ring was waiting
                    // on one (see `Driver::flush_early`).
                    inner.driver.flush_early();
                }
            }
            let idle = local.queue.borrow().is_empty();
            let wait = {
                let t = inner.timers.borrow();
                (!t.is_empty())
                    .then(|| t.next_wait(std::time::Instant::now()))
                    .flatten()
            };
            let turned = inner.driver.turn_with_wait(idle, wait);
            // Tasks whose operations completed and that wait by their key: queued here,
            // without a waker (their wakers' wakes went to the queue during the turn).
            inner.driver.take_ready_tasks(&mut ready_keys);
            if !ready_keys.is_empty() {
                let tasks = inner.tasks.borrow();
                for key in ready_keys.drain(..) {
                    let id = TaskId::from_key(key);
                    if id == MAIN {
                        main_header.schedule_local(local);
                    } else if let Some(h) = tasks.header(id) {
                        h.schedule_local(local);
                    }
                }
            }
            if wait.is_some() {
                let now = std::time::Instant::now();
                inner.timers.borrow_mut().expire(now, &mut due);
                // Woken after the turn, outside every borrow: a waker may run code that
                // reaches the runtime again.
                if !due.is_empty() {
                    for w in due.drain(..) {
                        w.wake();
                    }
                }
            }
            if let Err(e) = turned {
                // The ops see the error themselves; say it once here so a stuck loop is visible.
                let msg = e.to_string();
                if reported.as_ref() != Some(&msg) {
                    eprintln!("hoop: driver error: {msg}");
                    reported = Some(msg);
                }
            }
        }
    }

    /// The driver this runtime runs on (`Uring` or `Epoll`).
    pub fn driver_kind(&self) -> DriverKind {
        self.inner.driver.kind()
    }

    /// A handle other threads use to spawn tasks on this runtime (see [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle::new(self.inner.remote.clone())
    }

    /// The ring's counters (SQEs submitted, `io_uring_enter` calls, CQEs, ...).
    pub fn counters(&self) -> Counters {
        self.inner.driver.counters()
    }

    /// The setup flags the kernel accepted for this runtime's ring.
    pub fn setup_flags(&self) -> &'static str {
        self.inner.driver.setup_flags()
    }

    /// The SQ and CQ sizes the kernel gave this runtime's ring.
    pub fn ring_sizes(&self) -> (u32, u32) {
        self.inner.driver.ring_sizes()
    }
}

/// Polls task `id` in place: the slab keeps it, the poll holds its own `Rc` and borrows its
/// future (a task queued twice and found already borrowed is skipped: it is being polled).
fn run_task(inner: &Inner, id: TaskId) {
    let Some(task) = inner.tasks.borrow().get(id) else {
        return;
    };
    task.header.unschedule();
    let ready = {
        let Ok(mut future) = task.future.try_borrow_mut() else {
            return;
        };
        // Operations this poll starts wake the task by its key (`hoop_driver::task_key`).
        let _mark = TaskGuard::enter(inner.driver.id(), &task.waker, id.key());
        let mut cx = Context::from_waker(&task.waker);
        future.as_mut().poll(&mut cx).is_ready()
    };
    if ready {
        inner.tasks.borrow_mut().release(id);
    }
}

impl Runtime {
    /// Shuts the runtime down and says what that took: every task is dropped (their in-flight
    /// operations are cancelled and their data moves into the driver's slots); the writes of
    /// files and streams dropped with write-behind pending (by the program, or with the tasks)
    /// are waited for, up to the shutdown timeout, and those that did not finish are counted
    /// in [`ShutdownReport::unfinished_writes`] and cancelled; then everything still in flight
    /// is cancelled and reaped — or, after the shutdown timeout, its memory is leaked on
    /// purpose — then the ring is closed. Dropping the runtime does the same.
    pub fn shutdown(self) -> ShutdownReport {
        self.shutdown_inner()
    }

    /// Runs the detached writers (and nothing else) until they have finished or the shutdown
    /// timeout passed; `true` if they all finished.
    fn finish_writers(&self) -> bool {
        let inner = &self.inner;
        let writers = &inner.writers;
        if writers.keys.borrow().is_empty() {
            return true;
        }
        let deadline = std::time::Instant::now() + inner.writers_timeout;
        let mut ready_keys = Vec::new();
        loop {
            let keys: Vec<u64> = writers.keys.borrow().iter().copied().collect();
            // Each polled whether woken or not: there are few, and a poll of a write still in
            // flight only looks at its slot.
            for key in keys {
                run_task(inner, TaskId::from_key(key));
            }
            if writers.prune(&inner.tasks.borrow()) == 0 {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let turned = inner.driver.turn_with_wait(true, Some(deadline - now));
            // Other tasks woken meanwhile stay queued for the runtime's next run.
            inner.driver.take_ready_tasks(&mut ready_keys);
            if !ready_keys.is_empty() {
                let tasks = inner.tasks.borrow();
                with_local_queue(|local| {
                    for key in ready_keys.drain(..) {
                        if let Some(h) = tasks.header(TaskId::from_key(key)) {
                            h.schedule_local(local);
                        }
                    }
                });
                ready_keys.clear();
            }
            if turned.is_err() {
                // The writers see the driver's error in their operations' results.
                std::thread::yield_now();
            }
        }
    }

    fn shutdown_inner(&self) -> ShutdownReport {
        if self.inner.driver.is_shut_down() {
            return ShutdownReport::default();
        }
        let _guard = self.enter();
        // No more remote spawns; those queued never ran: dropping them resolves their handles
        // (cancelled). The blocking pool takes no new call.
        drop(self.inner.remote.close());
        self.inner.remote.blocking.shut();
        let writers = &self.inner.writers;
        // The program's tasks first: files and streams they hold with writes pending become
        // detached writers as they drop, which then run until done or the timeout (DESIGN.md,
        // "Writes accepted are written").
        for _ in 0..64 {
            let drained = self
                .inner
                .tasks
                .borrow_mut()
                .drain_where(|id| !writers.contains(id));
            if drained.is_empty() {
                break;
            }
            for (id, task) in drained {
                drop(task);
                self.inner.tasks.borrow_mut().release(id);
            }
        }
        self.finish_writers();
        // Then the writers that did not finish (each counts itself as unfinished and closes
        // its fd), and anything left.
        for _ in 0..64 {
            let drained = self.inner.tasks.borrow_mut().drain();
            if drained.is_empty() {
                break;
            }
            for (id, task) in drained {
                drop(task);
                self.inner.tasks.borrow_mut().release(id);
            }
        }
        writers.keys.borrow_mut().clear();
        let mut report = self.inner.driver.shutdown();
        report.unfinished_writes = writers.unfinished.get();
        report.unfinished_write_bytes = writers.unfinished_bytes.get();
        let hooks = std::mem::take(&mut *self.inner.on_shutdown.borrow_mut());
        for hook in hooks {
            hook(report);
        }
        report
    }
}

impl Drop for Runtime {
    /// See [`Runtime::shutdown`].
    fn drop(&mut self) {
        let _ = self.shutdown_inner();
    }
}

/// Spawns a task on the current thread's runtime. The future need not be `Send`.
///
/// # Panics
/// When called outside a hoop runtime.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let inner = CONTEXT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!("hoop::spawn must be called from inside a hoop runtime (Runtime::block_on)")
    });
    spawn_on(&inner, future).1
}

/// Spawns `future` on `inner`'s runtime (current on this thread); returns its id too.
fn spawn_on<F>(inner: &Inner, future: F) -> (TaskId, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: 'static,
{
    let (task_future, state) = join::pair(future);
    let id = inner.tasks.borrow_mut().vacant();
    let (header, waker) = Header::waker(id, inner.remote.clone());
    let abort_waker = waker.clone();
    inner.tasks.borrow_mut().fill(
        id,
        Task {
            future: RefCell::new(Box::pin(task_future)),
            header: header.clone(),
            waker,
        },
    );
    // Schedule the first poll.
    header.mark_scheduled();
    with_local_queue(|l| l.queue.borrow_mut().push_back(id));
    (
        id,
        join::handle(state, Box::new(move || abort_waker.wake_by_ref())),
    )
}

/// The detached writers of the runtime running on this thread (`None` outside `block_on` and
/// shutdown, or once its driver shut down).
pub(crate) fn writers() -> Option<Rc<Writers>> {
    CONTEXT.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|i| !i.driver.is_shut_down())
            .map(|i| i.writers.clone())
    })
}

/// Spawns a detached writer (a hoop task, left out of [`task_count`]) that finishes a dropped
/// value's write-behind; `block_on`'s end and the shutdown wait for it. `false` (the future
/// dropped unpolled) outside a runtime.
pub(crate) fn spawn_writer(future: impl Future<Output = ()> + 'static) -> bool {
    let Some(inner) = CONTEXT.with(|c| c.borrow().clone()) else {
        return false;
    };
    let counted = Counted::new(&inner);
    let (id, _detached) = spawn_on(&inner, async move {
        let _counted = counted;
        future.await
    });
    let w = &inner.writers;
    let len = {
        let mut keys = w.keys.borrow_mut();
        keys.insert(id.key());
        keys.len()
    };
    if len > 2 * w.pruned_at.get().max(32) {
        w.prune(&inner.tasks.borrow());
    }
    true
}

/// Spawns one of hoop's own tasks (left out of [`task_count`], not waited for by `block_on`'s
/// end): a socket's write pusher (`poll_io::push`). `false` (the future dropped unpolled)
/// outside a runtime or once it shut down.
pub(crate) fn spawn_pusher(future: impl Future<Output = ()> + 'static) -> bool {
    let Some(inner) = CONTEXT.with(|c| c.borrow().clone()) else {
        return false;
    };
    if inner.driver.is_shut_down() {
        return false;
    }
    let counted = Counted::new(&inner);
    let (_, _detached) = spawn_on(&inner, async move {
        let _counted = counted;
        future.await
    });
    true
}

/// Counts one of hoop's own tasks while its future exists (until it completes or is dropped):
/// [`task_count`] leaves them out.
struct Counted(Rc<std::cell::Cell<usize>>);

impl Counted {
    fn new(inner: &Inner) -> Counted {
        let c = inner.internal_tasks.clone();
        c.set(c.get() + 1);
        Counted(c)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// The id of the current thread's runtime, if there is one (ids are never reused).
pub(crate) fn current_id() -> Option<u64> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.id))
}

/// What other threads reach of the current thread's runtime, if there is one.
fn current_remote() -> Option<Arc<Remote>> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.remote.clone()))
}

/// The driver of the current thread's runtime, if there is one.
pub fn current_driver() -> Option<DriverKind> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.driver.kind()))
}

/// The counters of the current thread's runtime, if there is one.
pub fn current_counters() -> Option<Counters> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.driver.counters()))
}

/// Number of the program's tasks alive on the current thread's runtime (0 outside one). hoop's
/// own tasks (the reader of [`signal`](crate::signal) listeners) are not counted, so a
/// `while task_count() > 0` drain ends once the program's tasks have.
pub fn task_count() -> usize {
    CONTEXT.with(|c| {
        c.borrow().as_ref().map_or(0, |i| {
            i.tasks
                .borrow()
                .len()
                .saturating_sub(i.internal_tasks.get())
        })
    })
}

/// Spawns one of hoop's own tasks: like [`spawn`], but left out of [`task_count`].
pub(crate) fn spawn_internal<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let counted = CONTEXT.with(|c| c.borrow().as_ref().map(|i| Counted::new(i)));
    spawn(async move {
        let _counted = counted;
        future.await
    })
}

/// Registers `hook` to be called with the [`ShutdownReport`] when the current thread's runtime
/// shuts down (dropped, [`Runtime::shutdown`], the end of `#[hoop::main]` or of a
/// [`run_per_core`] thread): what was cancelled, and what was still in flight or leaked. Hooks
/// run in the order registered, on the runtime's thread, after the ring is closed.
///
/// ```
/// #[hoop::main]
/// async fn main() {
///     hoop::runtime::on_shutdown(|report| {
///         if report.leaked > 0 {
///             eprintln!("shutdown leaked {} operations", report.leaked);
///         }
///     });
/// }
/// ```
///
/// # Panics
/// Outside a hoop runtime.
pub fn on_shutdown(hook: impl FnOnce(ShutdownReport) + 'static) {
    let inner = CONTEXT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!("hoop::runtime::on_shutdown must be called from inside a hoop runtime")
    });
    inner.on_shutdown.borrow_mut().push(Box::new(hook));
}

/// Yields once to the runtime, letting other ready tasks run.
///
/// # Cancel safety
///
/// This function is cancel safe.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Runs `f(i)` on `threads` threads, each with its own runtime (its own ring) and pinned to CPU
/// `i % cpus`; returns every thread's output. For one port served by every thread, bind a
/// [`ReuseportGroup::bind_n`](crate::net::ReuseportGroup::bind_n)`(addr, threads)` before the
/// call and take a listener of it on each thread (`group.listener()`): its `threads` sockets
/// all listen from the start, so the kernel spreads connections over every thread from the
/// first one (`TcpListener::bind_reuseport` per thread works too, but connections that arrive
/// before a thread has bound go to the threads that have).
///
/// Signals: before spawning, the calling thread blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT,
/// SIGUSR1, SIGUSR2 and SIGWINCH, so every runtime thread inherits the mask and
/// [`hoop::signal`](crate::signal) listeners on any of them see those signals; while the
/// threads run, the calling thread takes them and gives any signal nobody listens for its
/// usual disposition (Ctrl-C still ends a program that does not listen for it). The mask is
/// restored on return. See [`signal`](crate::signal) for other signals.
pub fn run_per_core<F, Fut>(threads: usize, f: F) -> io::Result<Vec<Fut::Output>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let out = run_per_core_reports(threads, f)?;
    Ok(out.into_iter().map(|(output, _)| output).collect())
}

/// [`run_per_core`], also giving each thread's [`ShutdownReport`] (its runtime shut down after
/// `f(i)` returned): `(output, report)` per thread, in thread order. A report with `leaked` or
/// `still_in_flight` above 0 means operations outlived their thread's program.
pub fn run_per_core_reports<F, Fut>(
    threads: usize,
    f: F,
) -> io::Result<Vec<(Fut::Output, ShutdownReport)>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let f = Arc::new(f);
    let signals = crate::signal::PerCoreSignals::block()?;
    let handles: Vec<_> = (0..threads.max(1))
        .map(|i| {
            let f = f.clone();
            let exit = signals.exit_notice();
            // Fault opt-outs (test builds only) carry to the threads started here.
            let opted_out = crate::fault::opted_out();
            std::thread::Builder::new().name(format!("hoop-{i}")).spawn(
                move || -> io::Result<(Fut::Output, ShutdownReport)> {
                    let _exit = exit;
                    let _faults = crate::fault::opt_out_inherited(opted_out);
                    let _ = pin_to_cpu(i % cpus);
                    let rt = Runtime::new()?;
                    let output = rt.block_on(f(i));
                    Ok((output, rt.shutdown()))
                },
            )
        })
        .collect::<io::Result<_>>()?;
    signals.serve_until_exited(handles.len());
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        match h.join() {
            Ok(r) => out.push(r?),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    Ok(out)
}
