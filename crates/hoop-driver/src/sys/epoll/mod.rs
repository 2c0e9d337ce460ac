//! The readiness driver: epoll (edge-triggered) for sockets and pipes, a thread pool for files,
//! a timer heap for timeouts — the same operations and ownership rules as the io_uring driver,
//! for machines where io_uring is blocked (seccomp, `kernel.io_uring_disabled`, gVisor).
//!
//! An operation is described by a [`Call`] (its system call and raw arguments into memory the
//! operation owns) and handled by its [`Mode`]: run at once; tried at once and, on `EAGAIN`,
//! queued on its fd until epoll says the fd is ready; sent to the pool; or armed as a timer.
//! Completions go through the same slot table and lifecycle as io_uring's CQEs.

mod call;
mod fault;
mod fd;
mod op;
mod pool;
mod start;
mod try_io;
mod wait;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::call::{Call, Mode};
use self::fd::{FdTable, WaitTable, Waiting};
pub use self::op::EpollOp;
use self::pool::Pool;
use crate::config::Config;
use crate::error::cvt_libc;
use crate::fault::Faults;
use crate::lifecycle::{Completion, Orphan, StreamOrphan};
use crate::setup::SetupError;
use crate::sys::uring::ShutdownReport;
use crate::table::{Dropped, OpTable};

/// epoll `data` of the wake-up eventfd (fds are non-negative, so this is never an fd).
const WAKE_TOKEN: u64 = u64::MAX;

/// The readiness driver of one thread.
pub(crate) struct Epoll {
    epfd: OwnedFd,
    pub(crate) table: OpTable,
    wake_fd: Arc<OwnedFd>,
    fds: FdTable,
    waiting: WaitTable,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    pool: Pool,
    done: Vec<(u64, i32)>,
    events: Vec<libc::epoll_event>,
    shut_down: bool,
    shutdown_timeout: Duration,
    /// Turns since the last `epoll_wait`.
    busy_turns: u32,
    /// Whether `epoll_pwait2` is there (until it says `ENOSYS` or `EPERM`).
    pwait2: bool,
    /// Fds with queued operations that were already ready when queued (no edge will come).
    ready_fds: Vec<RawFd>,
    /// When fds whose writes wait on a timer try again (`FdState::write_retry_at`).
    retries: BinaryHeap<Reverse<(Instant, RawFd)>>,
    /// Fault injection (nothing without the `fault-injection` feature).
    faults: Faults,
    /// Completions held back by fault injection, delivered at the start of the next turn.
    held: Vec<(u64, i32)>,
    /// A shared ring's engine (`shared::Rings` on epoll): fds are closed by whichever thread
    /// drops the last handle, without telling the engine, so it keeps no state for an fd
    /// nothing waits on (tried first, registered on `EAGAIN`, deregistered once its queues are
    /// empty) and a reused fd number never meets a stale registration.
    transient_fds: bool,
}

fn setup_err(e: io::Error) -> SetupError {
    SetupError::classify(e, 0)
}

impl Epoll {
    pub(crate) fn new(cfg: &Config) -> Result<Epoll, SetupError> {
        crate::level::check().map_err(SetupError::invalid_level)?;
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let epfd =
            cvt_libc(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map_err(setup_err)?;
        // SAFETY: epoll_create1 returned a new fd nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(epfd) };
        // SAFETY: eventfd has no memory-safety preconditions.
        let efd = cvt_libc(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
            .map_err(setup_err)?;
        // SAFETY: eventfd returned a new fd nothing else owns.
        let wake_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: WAKE_TOKEN,
        };
        // SAFETY: registers a live eventfd with a live epoll fd; `ev` is a valid event.
        cvt_libc(unsafe { libc::epoll_ctl(epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, efd, &mut ev) })
            .map_err(setup_err)?;
        // The same in-flight cap as the io_uring driver would have, so backpressure behaves
        // alike on both (epoll itself has no completion queue to overflow).
        let capacity = match (cfg.max_in_flight, cfg.cq_entries) {
            (Some(n), _) => n as usize,
            (None, cq) => {
                let cq = cq.unwrap_or_else(|| crate::config::default_cq_entries(cfg.entries));
                let cq = cq.max(cfg.entries.saturating_mul(2)).next_power_of_two();
                crate::config::cap_for_cq(cq as usize)
            }
        }
        .max(1);
        Ok(Epoll {
            epfd,
            table: OpTable::new(capacity, crate::config::uncapped_slots()),
            pool: Pool::new(cfg.pool_threads, wake_fd.clone()),
            wake_fd,
            fds: FdTable::default(),
            waiting: WaitTable::default(),
            timers: BinaryHeap::new(),
            done: Vec::new(),
            events: Vec::with_capacity(256),
            shut_down: false,
            shutdown_timeout: cfg.shutdown_timeout,
            busy_turns: 0,
            // At a kernel level before 5.11 (`HOOP_KERNEL_LEVEL`), `epoll_wait` from the start.
            pwait2: crate::level::has(crate::level::since::EPOLL_PWAIT2),
            ready_fds: Vec::new(),
            retries: BinaryHeap::new(),
            faults: Faults::new(Faults::EPOLL),
            held: Vec::new(),
            transient_fds: false,
        })
    }

    pub(crate) fn wake_fd(&self) -> Arc<OwnedFd> {
        self.wake_fd.clone()
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down
    }

    /// Makes this engine a shared ring's: no state kept for fds nothing waits on (see the
    /// field).
    pub(crate) fn set_transient_fds(&mut self) {
        self.transient_fds = true;
    }

    /// The epoll fd: readable when an fd an operation waits on, or the pool's eventfd, is.
    pub(crate) fn epoll_fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }

    /// Whether any operation waits (on an fd, a timer or the pool).
    pub(crate) fn has_pending(&self) -> bool {
        !self.held.is_empty() || self.table.any_unfinished()
    }

    /// Whether a shared ring's reaper has work it must not sleep on: completions fault
    /// injection held back. Nothing makes the epoll fd readable for them, so a reaper (or a
    /// reactor) that waited on it would wait for ever (the seccomp child of
    /// `shared_fallback.rs` hung so under `late`).
    pub(crate) fn has_unsent(&self) -> bool {
        !self.held.is_empty()
    }

    /// How long until the next timer (an operation's deadline) expires, if any.
    pub(crate) fn next_timeout(&self) -> Option<Duration> {
        let timer = self.timers.peek().map(|Reverse((at, _))| *at);
        let retry = self.retries.peek().map(|Reverse((at, _))| *at);
        let at = match (timer, retry) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(at.saturating_duration_since(Instant::now()))
    }

    /// A shared ring's non-blocking turn: collects readiness, pool results and expired timers
    /// now (no every-16th-turn batching: the caller polls only when it has a reason to).
    pub(crate) fn poll_now(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            self.release_held();
        }
        self.busy_turns = 0;
        self.wait(Some(Duration::ZERO))
    }

    // ----- starting operations ----------------------------------------------------------------

    // ----- cancellation -----------------------------------------------------------------------

    /// The future of slot `user_data` was dropped with its data.
    pub(crate) fn drop_slot(
        &mut self,
        user_data: u64,
        data: Box<dyn Orphan>,
    ) -> Option<(Box<dyn Orphan>, Completion)> {
        match self.table.drop_slot(user_data, data) {
            Dropped::Finished(data, c) => Some((data, c)),
            Dropped::Gone => None,
            Dropped::Cancel => {
                self.table.counters.cancels_submitted += 1;
                self.cancel(user_data);
                None
            }
        }
    }

    /// The stream of slot `user_data` was dropped with its data: cancel it if still armed.
    pub(crate) fn drop_stream(&mut self, user_data: u64, data: Box<dyn StreamOrphan>) {
        if self.table.drop_stream(user_data, data) {
            self.table.counters.cancels_submitted += 1;
            self.cancel(user_data);
        }
    }

    /// Ends the operation of slot `user_data`, whose future or stream still waits for its
    /// result (see the io_uring driver's `request_cancel`).
    pub(crate) fn request_cancel(&mut self, user_data: u64) {
        self.table.counters.cancels_submitted += 1;
        self.cancel(user_data);
    }

    /// Cancels a waiting operation: readiness waits and timers end at once with `ECANCELED`, a
    /// queued pool job is withdrawn; a pool job already running cannot be stopped, and its
    /// result arrives when the system call returns.
    fn cancel(&mut self, user_data: u64) {
        match self.waiting.get(&user_data).copied() {
            Some(Waiting::Fd { fd, write, .. }) => {
                self.waiting.remove(&user_data);
                if let Some(st) = self.fds.get_mut(fd) {
                    let q = if write {
                        &mut st.writers
                    } else {
                        &mut st.readers
                    };
                    q.retain(|u| *u != user_data);
                }
                self.release_if_idle(fd);
                self.finish(user_data, -libc::ECANCELED);
            }
            Some(Waiting::Timer) => {
                self.waiting.remove(&user_data);
                self.finish(user_data, -libc::ECANCELED);
            }
            Some(Waiting::Pool) if self.pool.cancel_queued(user_data) => {
                self.waiting.remove(&user_data);
                self.finish(user_data, -libc::ECANCELED);
            }
            Some(Waiting::Pool) | None => {}
        }
    }

    // ----- the loop ---------------------------------------------------------------------------

    // ----- shutdown ---------------------------------------------------------------------------

    /// Cancels everything; waits (up to the shutdown timeout) for pool jobs already running;
    /// leaks the memory of those that do not return.
    pub(crate) fn shutdown(&mut self) -> ShutdownReport {
        if self.shut_down {
            return ShutdownReport::default();
        }
        let mut report = ShutdownReport::default();
        let live = self.table.unfinished();
        report.cancelled = live.len();
        for user_data in live {
            self.cancel(user_data);
        }
        self.shut_down = true;
        self.release_held();
        let deadline = Instant::now() + self.shutdown_timeout;
        while self.table.any_unfinished() && Instant::now() < deadline {
            let _ = self.wait(Some(Duration::from_millis(20)));
        }
        report.leaked = self.table.leak_ignored();
        report.still_in_flight = self.table.unfinished().len();
        report
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        let _ = self.shutdown();
        let _ = self.table.leak_ignored();
    }
}
