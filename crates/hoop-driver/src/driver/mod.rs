//! The driver handle: one thread's io_uring or epoll engine, the thread's current driver, and
//! a turn of the driver.
//!
//! Beside it: `future` (the future of one operation), `caps` (what the driver can do),
//! `register` (buffer rings and tables registered with the ring), `closing` (how an fd leaves
//! hoop through its home driver).

mod caps;
mod closing;
pub(crate) mod future;
mod register;

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::Waker;
use std::time::Duration;

use crate::config::{Config, DriverKind};
use crate::counters::Counters;
use crate::home::Home;
use crate::lifecycle::{Completion, Lifecycle, Orphan, StreamOrphan};
use crate::notifier::Notifier;
use crate::setup::SetupError;
use crate::sys::epoll::{Epoll, EpollOp};
use crate::sys::uring::{PushError, ShutdownReport, Uring, UringOp};
use crate::table::OpTable;

type Finished = Vec<(Box<dyn Orphan>, Completion)>;

/// The driver behind a handle.
// One per thread, reached on every operation: boxing the larger variant would add a pointer
// chase to the hot path to save a few hundred bytes once per thread.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine {
    Uring(Uring),
    Epoll(Epoll),
}

impl Engine {
    pub(crate) fn table(&self) -> &OpTable {
        match self {
            Engine::Uring(u) => &u.table,
            Engine::Epoll(e) => &e.table,
        }
    }

    pub(crate) fn table_mut(&mut self) -> &mut OpTable {
        match self {
            Engine::Uring(u) => &mut u.table,
            Engine::Epoll(e) => &mut e.table,
        }
    }

    #[inline(always)]
    pub(crate) fn push<T: UringOp + EpollOp>(
        &mut self,
        data: &mut T,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        match self {
            Engine::Uring(u) => match data.link_timeout() {
                Some(ts) => u.push_with_timeout(data.create_entry(), ts, granted, state),
                None => u.push_with(
                    |user_data| data.create_entry().user_data(user_data),
                    granted,
                    state,
                ),
            },
            Engine::Epoll(e) => e.push(data.create_call(), granted, state),
        }
    }

    pub(crate) fn drop_stream(&mut self, user_data: u64, data: Box<dyn StreamOrphan>) {
        match self {
            Engine::Uring(u) => u.drop_stream(user_data, data),
            Engine::Epoll(e) => e.drop_stream(user_data, data),
        }
    }

    pub(crate) fn request_cancel(&mut self, user_data: u64) {
        match self {
            Engine::Uring(u) => u.request_cancel(user_data),
            Engine::Epoll(e) => e.request_cancel(user_data),
        }
    }

    pub(crate) fn drop_slot(
        &mut self,
        user_data: u64,
        data: Box<dyn Orphan>,
    ) -> Option<(Box<dyn Orphan>, Completion)> {
        match self {
            Engine::Uring(u) => u.drop_slot(user_data, data),
            Engine::Epoll(e) => e.drop_slot(user_data, data),
        }
    }
}

struct Shared {
    engine: RefCell<Engine>,
    kind: DriverKind,
    /// Next buffer group id for a provided buffer ring.
    next_bgid: Cell<u16>,
    /// Whether the kernel takes incrementally consumed buffer rings, once probed.
    buf_ring_inc: Cell<Option<bool>>,
    /// Scratch lists swapped with the driver's in `turn`, so no allocation per turn.
    scratch_wakeups: Cell<Vec<Waker>>,
    /// Keys of the runtime's tasks whose operations completed (`task_key`), for the runtime
    /// to take after a turn.
    ready_tasks: RefCell<Vec<u64>>,
    scratch_orphans: Cell<Finished>,
    /// The last turn left the ring waiting on a device (`Driver::flush_early` then looks).
    flush_armed: Cell<bool>,
    /// Where fds owned on this driver are sent to be closed from other threads.
    home: Home,
}

impl Drop for Shared {
    /// The ring shuts down (every queued SQE submitted, everything reaped) before fds sent
    /// home from other threads are closed: none of them can then be named by a stale SQE.
    fn drop(&mut self) {
        let section = crate::deferred::Section::enter();
        if let Ok(mut d) = self.engine.try_borrow_mut() {
            let _ = match &mut *d {
                Engine::Uring(u) => u.shutdown(),
                Engine::Epoll(e) => e.shutdown(),
            };
        }
        drop(section);
        self.home.shut();
    }
}

/// A handle to one thread's driver (io_uring or epoll). Cheap to clone (a reference count); not
/// `Send`.
#[derive(Clone)]
pub struct Driver {
    shared: Rc<Shared>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("kind", &self.shared.kind)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The current driver: a pointer from `Rc::into_raw` that owns one strong reference (null:
    /// none). A plain `Cell` of a pointer has no destructor, so reading it is one load (the
    /// first thing every operation's first poll does).
    static CURRENT: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
    /// Every live driver built on this thread (to find an fd's home driver outside its
    /// runtime's `block_on`).
    static LOCAL: RefCell<Vec<std::rc::Weak<Shared>>> = const { RefCell::new(Vec::new()) };
}

/// Restores the previous current driver when dropped.
#[derive(Debug)]
pub struct EnterGuard {
    prev: Option<Driver>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        set_current(prev);
    }
}

/// Makes `driver` the thread's current driver; returns the previous one (its strong reference
/// moves to the caller).
fn set_current(driver: Option<Driver>) -> Option<Driver> {
    let new = driver.map_or(std::ptr::null(), |d| Rc::into_raw(d.shared));
    let old = CURRENT.with(|c| c.replace(new));
    if old.is_null() {
        None
    } else {
        // SAFETY: a non-null `CURRENT` came from `Rc::into_raw` above and owned one strong
        // reference, which moves back into this `Rc` (taken out of the cell, so once).
        let shared = unsafe { Rc::from_raw(old) };
        Some(Driver { shared })
    }
}

impl Driver {
    /// Sets up the driver `cfg.driver` names. `Auto` tries io_uring and falls back to epoll,
    /// saying why in one line on stderr; a forced `Uring` that cannot run returns the reason.
    pub fn new(cfg: &Config) -> Result<Driver, SetupError> {
        // An invalid `HOOP_KERNEL_LEVEL` starts no driver (not even `Auto`'s fallback).
        crate::level::check().map_err(SetupError::invalid_level)?;
        let (engine, kind) = match cfg.driver {
            DriverKind::Uring => {
                // A driver named by its caller gets no injected setup failure from a plan of
                // every kind: it would only fail the caller (`Auto` is where it is tested).
                let _named = crate::fault::spare_named_setup();
                (Engine::Uring(Uring::new(cfg)?), DriverKind::Uring)
            }
            DriverKind::Epoll => (Engine::Epoll(Epoll::new(cfg)?), DriverKind::Epoll),
            DriverKind::Auto => match Uring::new(cfg) {
                Ok(u) => (Engine::Uring(u), DriverKind::Uring),
                Err(e) => {
                    eprintln!("hoop: io_uring unavailable, using the epoll driver: {e}");
                    (Engine::Epoll(Epoll::new(cfg)?), DriverKind::Epoll)
                }
            },
        };
        let wake_fd = match &engine {
            Engine::Uring(u) => u.wake_fd(),
            Engine::Epoll(e) => e.wake_fd(),
        };
        let driver = Driver {
            shared: Rc::new(Shared {
                home: Home::new(&wake_fd),
                engine: RefCell::new(engine),
                kind,
                next_bgid: Cell::new(0),
                buf_ring_inc: Cell::new(None),
                scratch_wakeups: Cell::new(Vec::with_capacity(256)),
                ready_tasks: RefCell::new(Vec::with_capacity(256)),
                scratch_orphans: Cell::new(Vec::new()),
                flush_armed: Cell::new(false),
            }),
        };
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            l.retain(|w| w.strong_count() > 0);
            l.push(Rc::downgrade(&driver.shared));
        });
        Ok(driver)
    }

    pub(crate) fn engine(&self) -> &RefCell<Engine> {
        &self.shared.engine
    }

    /// Which driver this is (`Uring` or `Epoll`; never `Auto`).
    pub fn kind(&self) -> DriverKind {
        self.shared.kind
    }

    /// The driver of the runtime running on this thread, if any.
    #[inline]
    pub fn current() -> Option<Driver> {
        let p = CURRENT.with(|c| c.get());
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null `CURRENT` came from `Rc::into_raw` and owns a strong reference
        // until `set_current` replaces it (on this thread only), so the `Shared` is alive;
        // the count is raised for the `Rc` made here.
        unsafe {
            Rc::increment_strong_count(p);
            Some(Driver {
                shared: Rc::from_raw(p),
            })
        }
    }

    /// Makes this the thread's current driver until the guard is dropped.
    pub fn enter(&self) -> EnterGuard {
        let prev = set_current(Some(self.clone()));
        EnterGuard { prev }
    }

    /// One turn of the driver: submit queued work, wait for a completion if `block` (and nothing
    /// is ready), collect every completion, then — with the driver released — wake the woken
    /// tasks and finish the results nobody waits for.
    pub fn turn(&self, block: bool) -> io::Result<()> {
        self.turn_with_wait(block, None)
    }

    /// [`turn`](Self::turn), with a blocking wait that lasts at most `wait` (the runtime's
    /// next timer; `None`: until a completion or a wake-up).
    pub fn turn_with_wait(&self, block: bool, wait: Option<Duration>) -> io::Result<()> {
        if self.shared.home.has_pending() {
            let (fds, drops) = self.shared.home.take();
            // Values dropped on other threads, dropped here, on theirs: their operations'
            // cancels queue first, and the closes of their fds behind them.
            drop(drops);
            for fd in fds {
                self.close_detached(fd);
            }
        }
        let mut wakeups = self.shared.scratch_wakeups.take();
        let mut orphans = self.shared.scratch_orphans.take();
        // Declared before the borrow, so it ends after it: orphaned stream items are dropped
        // and their wakes run once the driver is released.
        let section = crate::deferred::Section::enter();
        let res = {
            let mut d = self.shared.engine.borrow_mut();
            let res = match &mut *d {
                Engine::Uring(u) => {
                    let res = u.turn(block, wait);
                    self.shared.flush_armed.set(u.early_armed());
                    res
                }
                Engine::Epoll(e) => e.turn(block, wait),
            };
            let t = d.table_mut();
            std::mem::swap(&mut wakeups, &mut t.wakeups);
            if !t.ready_tasks.is_empty() {
                self.shared
                    .ready_tasks
                    .borrow_mut()
                    .append(&mut t.ready_tasks);
            }
            if !t.orphans.is_empty() {
                std::mem::swap(&mut orphans, &mut t.orphans);
            }
            res
        };
        drop(section);
        // Woken in the order the completions came (one task waiting on many operations is
        // in the list once).
        if !wakeups.is_empty() {
            for w in wakeups.drain(..) {
                w.wake();
            }
        }
        if !orphans.is_empty() {
            for (data, c) in orphans.drain(..) {
                data.finish(c);
            }
        }
        self.shared.scratch_wakeups.set(wakeups);
        self.shared.scratch_orphans.set(orphans);
        res
    }

    /// Moves the keys of the tasks whose operations completed (see [`crate::task_key`]) into
    /// `out`, in completion order; the runtime queues those tasks. Collected by every turn.
    #[inline]
    pub fn take_ready_tasks(&self, out: &mut Vec<u64>) {
        let mut r = self.shared.ready_tasks.borrow_mut();
        if r.is_empty() {
        } else if out.is_empty() {
            std::mem::swap(&mut *r, out);
        } else {
            out.append(&mut r);
        }
    }

    /// This driver's identity for [`crate::task_key::TaskGuard::enter`] (stable while it lives).
    pub fn id(&self) -> *const () {
        Rc::as_ptr(&self.shared).cast()
    }

    /// Submits every SQE queued so far (with SQPOLL: until the SQ thread took them all), so
    /// that an fd or slot they name may leave hoop (a reused number must never get stale I/O).
    /// Nothing to do on epoll.
    pub fn submit_queued(&self) {
        if let Ok(mut d) = self.shared.engine.try_borrow_mut() {
            if let Engine::Uring(u) = &mut *d {
                u.submit_queued();
            }
        }
    }

    /// Before an fd leaves hoop (`into_std`, `into_raw_fd`): ends every operation a dropped
    /// future or stream left to be cancelled (io_uring: synchronously, see
    /// `Uring::cancel_queued_now`; epoll cancels at the drop already), then submits every queued
    /// SQE as [`Driver::submit_queued`] does.
    pub fn cancel_queued_now(&self) {
        if let Ok(mut d) = self.shared.engine.try_borrow_mut() {
            if let Engine::Uring(u) = &mut *d {
                u.cancel_queued_now();
            }
        }
    }

    /// Called by a runtime between two ready tasks: submits what is queued now if the ring
    /// waits on a storage device (file I/O queued and the last turn waited for a completion),
    /// so a woken task's next read reaches the device before the other woken tasks have run.
    /// Otherwise (and on epoll) nothing: one submit per batch.
    #[inline]
    pub fn flush_early(&self) {
        if !self.shared.flush_armed.get() {
            return;
        }
        if let Ok(mut d) = self.shared.engine.try_borrow_mut() {
            if let Engine::Uring(u) = &mut *d {
                u.flush_early();
            }
        }
    }

    /// Sends from `bufs` on the stream socket `fd` now, on this thread, with one `send(2)`
    /// (`sendmsg(2)` for several slices) and `MSG_DONTWAIT | MSG_NOSIGNAL`: on io_uring, a send
    /// that does not wait for a ring turn while the socket has room. The caller keeps the
    /// order: no send of its own on `fd` may be queued or in flight on the ring.
    ///
    /// `None` on the epoll driver (its send operation already sends inside the submit, on the
    /// same rules: nothing changes there) and when the driver is in use right now; otherwise
    /// the call's result, as the ring's send would report it: the bytes sent (maybe fewer
    /// than asked), `WouldBlock` when the socket has no room, or the send's error (`EPIPE`,
    /// `ECONNRESET`, ...). At most 64 slices are sent; the rest count as not sent.
    ///
    /// Fault injection (`HOOP_FAULTS`) reaches it as it reaches a ring send: kind `eagain`
    /// answers `WouldBlock` without sending, `econnreset` fails with `ECONNRESET`, `short_io`
    /// sends fewer bytes (the kernel really sends fewer).
    pub fn try_send(&self, fd: RawFd, bufs: &[io::IoSlice<'_>]) -> Option<io::Result<usize>> {
        const MAX_IOV: usize = 64;
        let mut limit = {
            let mut d = self.shared.engine.try_borrow_mut().ok()?;
            let Engine::Uring(u) = &mut *d else {
                return None;
            };
            let total = bufs.iter().take(MAX_IOV).map(|b| b.len()).sum::<usize>();
            match u.fault_at_inline_send(total) {
                Ok(limit) => limit,
                Err(errno) => return Some(Err(io::Error::from_raw_os_error(errno))),
            }
        };
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        let r = if bufs.len() == 1 {
            let b = &bufs[0];
            // SAFETY: send(2) reads at most `limit` (<= b.len()) bytes of the live slice `b`.
            unsafe { libc::send(fd, b.as_ptr().cast(), limit.min(b.len()), flags) }
        } else {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; MAX_IOV];
            let mut n = 0;
            for b in bufs.iter().take(MAX_IOV) {
                if limit == 0 {
                    break;
                }
                let len = b.len().min(limit);
                limit -= len;
                iov[n] = libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: len,
                };
                n += 1;
            }
            // SAFETY: msghdr is plain old data; all-zero is valid (no address, no control).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = n as _;
            // SAFETY: the header points at `n` iovecs on this stack frame, each naming a part
            // of a live slice of `bufs`; sendmsg(2) only reads them during the call.
            unsafe { libc::sendmsg(fd, &msg, flags) }
        };
        if r < 0 {
            return Some(Err(io::Error::last_os_error()));
        }
        Some(Ok(r as usize))
    }

    /// Receives into `buf` from the stream socket `fd` now, on this thread, with one `recv(2)`
    /// and `MSG_DONTWAIT`: the bytes received (0 at end of stream), `WouldBlock` when nothing
    /// is there, or the receive's error. For a reader that holds no buffer while it waits
    /// (thousands of idle connections reading into one scratch buffer): on `WouldBlock` it
    /// waits with [`op::PollOnce::ready`](crate::op::PollOnce::ready), then calls this again.
    ///
    /// On the epoll driver the result also keeps the driver's readiness record true, as its
    /// own receives do: `WouldBlock` or a short read means drained, so the wait that follows
    /// costs no system call (the next edge completes it), and a call while the driver knows
    /// the socket drained answers `WouldBlock` without one. On io_uring it is a plain
    /// `recv(2)`. The caller keeps the order: no receive of its own may be queued on `fd`.
    pub fn try_recv(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let recorded = match self.shared.engine.try_borrow_mut() {
            Ok(mut d) => match &mut *d {
                Engine::Epoll(e) => Some(e.try_recv(fd, buf)),
                Engine::Uring(_) => None,
            },
            // The driver is in use right now: a plain receive, as on io_uring.
            Err(_) => None,
        };
        match recorded {
            Some(res) if res < 0 => Err(io::Error::from_raw_os_error(-res)),
            Some(res) => Ok(res as usize),
            None => {
                // SAFETY: recv(2) writes at most `buf.len()` bytes into the live slice `buf`.
                let r = unsafe {
                    libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT)
                };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(r as usize)
                }
            }
        }
    }

    /// Whether wakers or orphans wait to be run (the next turn must not block).
    pub fn has_ready(&self) -> bool {
        self.shared.engine.borrow().table().has_ready()
            || !self.shared.ready_tasks.borrow().is_empty()
    }

    /// The driver's counters (for epoll, `enter_calls` counts `epoll_wait` calls).
    pub fn counters(&self) -> Counters {
        self.shared.engine.borrow().table().counters
    }

    /// Operations in flight (slots in use).
    pub fn in_flight(&self) -> usize {
        self.shared.engine.borrow().table().slots.in_use()
    }

    /// Whether this is the current thread's driver (see [`Driver::current`]).
    pub(crate) fn is_current(&self) -> bool {
        CURRENT.with(|c| std::ptr::eq(c.get(), Rc::as_ptr(&self.shared)))
    }

    /// A handle other threads use to wake this driver out of a blocking wait.
    pub fn notifier(&self) -> Notifier {
        let fd = match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.wake_fd(),
            Engine::Epoll(e) => e.wake_fd(),
        };
        Notifier { fd }
    }

    /// Cancels every operation in flight and reaps their final completions (or leaks their
    /// memory after the shutdown timeout). Operations started afterwards fail.
    pub fn shutdown(&self) -> ShutdownReport {
        // Values sent home from other threads go first: their operations are cancelled and
        // reaped with the rest.
        if self.shared.home.has_pending() {
            let (fds, drops) = self.shared.home.take();
            drop(drops);
            for fd in fds {
                self.close_detached(fd);
            }
        }
        let section = crate::deferred::Section::enter();
        let (report, wakeups, orphans) = {
            let mut d = self.shared.engine.borrow_mut();
            let report = match &mut *d {
                Engine::Uring(u) => u.shutdown(),
                Engine::Epoll(e) => e.shutdown(),
            };
            let t = d.table_mut();
            (
                report,
                std::mem::take(&mut t.wakeups),
                std::mem::take(&mut t.orphans),
            )
        };
        self.shared.home.shut();
        drop(section);
        for w in wakeups {
            w.wake();
        }
        for (data, c) in orphans {
            data.finish(c);
        }
        report
    }

    /// Test hook: poisons the io_uring driver as an `-EBADR` from `io_uring_enter` would
    /// (completions lost). Does nothing on epoll.
    #[doc(hidden)]
    pub fn poison_for_test(&self) {
        let _section = crate::deferred::Section::enter();
        if let Engine::Uring(u) = &mut *self.shared.engine.borrow_mut() {
            u.poison();
        }
    }

    /// Whether `shutdown` ran.
    pub fn is_shut_down(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.is_shut_down(),
            Engine::Epoll(e) => e.is_shut_down(),
        }
    }
}
