//! The driver handle, the thread's current driver, and the future of one operation.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::config::{Config, DriverKind};
use crate::counters::Counters;
use crate::home::Home;
use crate::lifecycle::{Completion, Lifecycle};
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::op::{Close, OpCode};
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
                None => u.push(data.create_entry(), granted, state),
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
        let (engine, kind) = match cfg.driver {
            DriverKind::Uring => (Engine::Uring(Uring::new(cfg)?), DriverKind::Uring),
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

    /// The driver on this thread whose home `home` is (the current one, or one built here
    /// whose runtime is not running now), if any.
    pub(crate) fn local_with_home(home: &Home) -> Option<Driver> {
        if let Some(d) = Driver::current().filter(|d| d.home_ref().same(home)) {
            return Some(d);
        }
        LOCAL.with(|l| {
            l.borrow()
                .iter()
                .filter_map(|w| w.upgrade())
                .find(|s| s.home.same(home))
                .map(|shared| Driver { shared })
        })
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
            for fd in self.shared.home.take() {
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

    /// This driver's [`Home`]: where fds owned here are sent to be closed from other threads.
    pub fn home(&self) -> Home {
        self.shared.home.clone()
    }

    pub(crate) fn home_ref(&self) -> &Home {
        &self.shared.home
    }

    /// Submits every SQE queued so far (with SQPOLL: until the SQ thread took them all), so
    /// that an fd or slot they name may leave hoop (rule 17). Nothing to do on epoll.
    pub fn submit_queued(&self) {
        if let Ok(mut d) = self.shared.engine.try_borrow_mut() {
            if let Engine::Uring(u) = &mut *d {
                u.submit_queued();
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

    /// The io_uring setup flags the kernel accepted, e.g.
    /// `"SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE"`, or `"epoll"`.
    pub fn setup_flags(&self) -> &'static str {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.setup_flags(),
            Engine::Epoll(_) => "epoll",
        }
    }

    /// Whether this is an io_uring ring set up with `IORING_SETUP_IOPOLL` (`Config::iopoll`),
    /// which refuses close, poll, timeout and cancel operations; false for epoll.
    pub fn is_iopoll(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.is_iopoll(),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether the io_uring driver's kernel supports `opcode` (`IORING_OP_*`, from the probe
    /// taken at setup); always false for epoll.
    pub fn supports_opcode(&self, opcode: u8) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.supports(opcode),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether provided buffer rings and multishot recv can be used (io_uring on 6.0+).
    pub fn supports_buf_ring(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(_) => crate::setup::kernel_at_least(6, 0),
            Engine::Epoll(_) => false,
        }
    }

    /// The kernel's io_uring feature bits (`IORING_FEAT_*`, by kernel name without the prefix,
    /// e.g. `("FAST_POLL", true)`), in bit order; empty for epoll.
    pub fn uring_features(&self) -> Vec<(&'static str, bool)> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.features(),
            Engine::Epoll(_) => Vec::new(),
        }
    }

    /// The `IORING_OP_*` opcodes this kernel supports (from the probe taken at setup), by
    /// kernel name without the prefix (e.g. `"SEND_ZC"`), in opcode order; empty for epoll.
    pub fn supported_opcodes(&self) -> Vec<&'static str> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.opcodes(),
            Engine::Epoll(_) => Vec::new(),
        }
    }

    /// With SQPOLL (`Config::sqpoll_idle`): whether the kernel's SQ thread is asleep after its
    /// idle time, so the next submission wakes it with a system call. False without SQPOLL and
    /// for epoll.
    pub fn sq_thread_asleep(&self) -> bool {
        match &mut *self.shared.engine.borrow_mut() {
            Engine::Uring(u) => u.sq_thread_asleep(),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether `io_uring_enter` goes through a registered ring fd (`Config::register_ring_fd`
    /// and a kernel that took it); false for epoll.
    pub fn ring_fd_registered(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.ring_fd_registered(),
            Engine::Epoll(_) => false,
        }
    }

    /// The io-wq worker limits in force for this ring, `(bounded, unbounded)` (see
    /// `Config::iowq_max_workers`); `Unsupported` for epoll.
    pub fn iowq_max_workers(&self) -> io::Result<(u32, u32)> {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.iowq_max_workers(),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// Whether receives may use bundles (`IORING_RECVSEND_BUNDLE`, 6.10: one CQE for several
    /// provided buffers); false for epoll.
    pub fn supports_recv_bundle(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.params().is_feature_recvsend_bundle(),
            Engine::Epoll(_) => false,
        }
    }

    /// Whether the kernel takes incrementally consumed buffer rings (`IOU_PBUF_RING_INC`,
    /// 6.12): probed once, by registering a one-entry ring with the flag; false for epoll.
    pub fn buf_ring_inc_supported(&self) -> bool {
        if let Some(known) = self.shared.buf_ring_inc.get() {
            return known;
        }
        let ok = self.supports_buf_ring() && crate::bufring::probe_inc(self);
        self.shared.buf_ring_inc.set(Some(ok));
        ok
    }

    /// The first buffer id of a range of `entries` ids no other kernel ring of this driver
    /// uses (a CQE's buffer id then names its ring), if one is left.
    pub(crate) fn free_bid_base(&self, entries: u16) -> Option<u16> {
        let d = self.shared.engine.try_borrow().ok()?;
        let Engine::Uring(u) = &*d else {
            return None;
        };
        crate::bufring::free_base(&u.buf_rings, entries)
    }

    /// Registers the provided buffer ring `book` describes at `ring_addr` (incrementally
    /// consumed if the book says so), buffer ids from `base`; returns its group id. The driver
    /// keeps the book until the ring is unregistered: it settles an incremental ring's CQEs.
    pub(crate) fn register_buf_ring(
        &self,
        ring_addr: u64,
        entries: u16,
        book: std::rc::Rc<crate::bufring::Book>,
        base: u16,
    ) -> io::Result<u16> {
        let bgid = self.shared.next_bgid.get();
        self.with_uring_mut(|u| {
            let flags = crate::bufring::Tracked::flags(&book);
            // SAFETY: the caller keeps the ring memory (page-aligned, `entries` entries) alive
            // and in place until it unregisters the group.
            unsafe {
                u.submitter()
                    .register_buf_ring_with_flags(ring_addr, entries, bgid, flags)?
            };
            u.buf_rings.push(crate::bufring::Tracked {
                bgid,
                base,
                entries,
                book,
            });
            Ok(())
        })?;
        self.shared.next_bgid.set(bgid.wrapping_add(1));
        Ok(bgid)
    }

    /// Registers a ring of `entries` at `ring_addr` under `bgid` with `flags`, untracked (a
    /// probe).
    pub(crate) fn register_buf_ring_raw(
        &self,
        ring_addr: u64,
        entries: u16,
        bgid: u16,
        flags: u16,
    ) -> io::Result<()> {
        self.with_uring(|u| {
            // SAFETY: the caller keeps the ring memory alive and in place until it unregisters
            // it.
            unsafe {
                u.submitter()
                    .register_buf_ring_with_flags(ring_addr, entries, bgid, flags)
            }
        })
    }

    /// Unregisters a ring registered with [`register_buf_ring_raw`](Self::register_buf_ring_raw).
    pub(crate) fn unregister_buf_ring_raw(&self, bgid: u16) -> io::Result<()> {
        self.with_uring(|u| u.submitter().unregister_buf_ring(bgid))
    }

    /// Unregisters buffer group `bgid` (and forgets its book).
    pub(crate) fn unregister_buf_ring(&self, bgid: u16) -> io::Result<()> {
        self.with_uring_mut(|u| {
            u.submitter().unregister_buf_ring(bgid)?;
            u.buf_rings.retain(|t| t.bgid != bgid);
            Ok(())
        })
    }

    /// Registers `iovecs` as the ring's fixed-buffer table (`IORING_REGISTER_BUFFERS`); buffer
    /// `i` of `READ_FIXED`/`WRITE_FIXED` is `iovecs[i]`. A ring has one table: `EBUSY` if one
    /// is registered already. `Unsupported` on the epoll driver.
    ///
    /// # Safety
    /// The memory the iovecs describe must stay allocated, at the same addresses, until
    /// [`unregister_buffers`](Self::unregister_buffers) succeeded (or the ring is gone).
    pub(crate) unsafe fn register_buffers(&self, iovecs: &[libc::iovec]) -> io::Result<()> {
        let d = self
            .shared
            .engine
            .try_borrow()
            .map_err(|_| io::Error::other("driver busy"))?;
        let Engine::Uring(u) = &*d else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the epoll driver has no registered buffers",
            ));
        };
        // SAFETY: the caller keeps the memory alive and in place until it unregisters it.
        unsafe { u.submitter().register_buffers(iovecs) }
    }

    /// Unregisters the ring's fixed-buffer table (`IORING_UNREGISTER_BUFFERS`).
    pub(crate) fn unregister_buffers(&self) -> io::Result<()> {
        self.with_uring(|u| u.submitter().unregister_buffers())
    }

    /// Runs `f` on the io_uring engine: `Unsupported` on the epoll driver, "driver busy" while
    /// the engine is borrowed mutably (a registration from inside the drain).
    fn with_uring<T>(&self, f: impl FnOnce(&Uring) -> io::Result<T>) -> io::Result<T> {
        let d = self
            .shared
            .engine
            .try_borrow()
            .map_err(|_| io::Error::other("driver busy"))?;
        match &*d {
            Engine::Uring(u) => f(u),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// [`with_uring`](Self::with_uring) for what changes the engine's own bookkeeping.
    fn with_uring_mut<T>(&self, f: impl FnOnce(&mut Uring) -> io::Result<T>) -> io::Result<T> {
        let mut d = self
            .shared
            .engine
            .try_borrow_mut()
            .map_err(|_| io::Error::other("driver busy"))?;
        match &mut *d {
            Engine::Uring(u) => f(u),
            Engine::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// Whether connections can be accepted straight into a registered file table (direct
    /// descriptors): the io_uring driver on Linux 5.19 or later, not an IOPOLL ring.
    pub fn supports_direct_accept(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => {
                direct_table_usable(u) && u.supports(io_uring::opcode::Accept::CODE)
            }
            Engine::Epoll(_) => false,
        }
    }

    /// Whether an open file can be put into a slot of the registered file table
    /// ([`op::FilesUpdateAlloc`](crate::op::FilesUpdateAlloc): `IORING_OP_FILES_UPDATE` with
    /// `IORING_FILE_INDEX_ALLOC`): the io_uring driver on Linux 5.19 or later, not an IOPOLL
    /// ring (which refuses `IORING_OP_CLOSE`, so a slot could only be closed synchronously).
    pub fn supports_registered_files(&self) -> bool {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => {
                direct_table_usable(u) && u.supports(io_uring::opcode::FilesUpdate::CODE)
            }
            Engine::Epoll(_) => false,
        }
    }

    /// Occupied slots of the ring's registered file table: direct descriptors handed out by an
    /// accept stream (or orphaned by a dropped one) or by a files update (registered files,
    /// `hoop::fs::FixedFile`) whose close has not completed yet. A connection whose accept
    /// completion still waits unread in a stream is not counted until the stream yields it or
    /// is dropped. 0 when no table was registered, and on epoll.
    pub fn fixed_files_in_use(&self) -> usize {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.fixed_files.as_ref().map_or(0, |f| f.in_use()),
            Engine::Epoll(_) => 0,
        }
    }

    /// Slots of the ring's registered file table (0 until a direct accept or a registered
    /// file registered it).
    pub fn fixed_files_size(&self) -> u32 {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => u.fixed_files.as_ref().map_or(0, |f| f.size),
            Engine::Epoll(_) => 0,
        }
    }

    /// The ring's registered file table, registered (sparse) on first use. `Unsupported` on
    /// the epoll driver, an IOPOLL ring, or a kernel before 5.19 (the callers check what else
    /// they need: the accept or files-update opcode).
    pub(crate) fn direct_files(&self) -> io::Result<Rc<crate::fixedfile::FixedFiles>> {
        let mut d = self
            .shared
            .engine
            .try_borrow_mut()
            .map_err(|_| io::Error::other("driver busy"))?;
        let Engine::Uring(u) = &mut *d else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the epoll driver has no registered file table",
            ));
        };
        if !direct_table_usable(u) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "direct descriptors need the io_uring driver (not IOPOLL) on Linux 5.19 or later",
            ));
        }
        if let Some(files) = &u.fixed_files {
            return Ok(files.clone());
        }
        let size = crate::fixedfile::table_size();
        u.submitter().register_files_sparse(size).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot register a fixed-file table of {size} slots: {e}"),
            )
        })?;
        let files = crate::fixedfile::FixedFiles::new(size);
        u.fixed_files = Some(files.clone());
        Ok(files)
    }

    /// Whether this is the current thread's driver (see [`Driver::current`]).
    pub(crate) fn is_current(&self) -> bool {
        CURRENT.with(|c| std::ptr::eq(c.get(), Rc::as_ptr(&self.shared)))
    }

    /// SQ and CQ sizes the kernel gave (`(0, 0)` for epoll).
    pub fn ring_sizes(&self) -> (u32, u32) {
        match &*self.shared.engine.borrow() {
            Engine::Uring(u) => (u.params().sq_entries(), u.params().cq_entries()),
            Engine::Epoll(_) => (0, 0),
        }
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

    /// Closes `fd` through the driver, without waiting (used by `Drop` of fd owners). With
    /// io_uring the close is queued in the SQ, behind any operation already queued on the fd,
    /// and submitted on this tick; if the ring has no room, the fd is closed at once with
    /// `close(2)` after the queued SQEs are submitted (invariant 6). The epoll driver forgets
    /// the fd's registration and closes it at once.
    pub fn close_detached(&self, fd: OwnedFd) {
        let mut op = Close::new(fd);
        let closed = match self.shared.engine.try_borrow_mut() {
            Ok(mut d) => match &mut *d {
                // IOPOLL rings refuse IORING_OP_CLOSE: close(2) at once.
                Engine::Uring(u) if u.is_iopoll() => false,
                Engine::Uring(u) => match u.push(op.create_entry(), false, Lifecycle::Submitted) {
                    Ok(user_data) => {
                        // Nobody waits for this result: the slot owns the op from the start,
                        // and it is submitted on this tick, even if tasks are still ready.
                        u.detach(user_data, Box::new(op));
                        return;
                    }
                    Err(_) => {
                        let _ = u.turn(false, None);
                        false
                    }
                },
                Engine::Epoll(e) => {
                    e.forget_fd(op.fd);
                    false
                }
            },
            Err(_) => false,
        };
        if !closed {
            // The op owns the fd and no kernel took it: dropping it closes it with close(2).
            drop(op);
        }
    }
}

/// Whether ring `u` can have a registered file table whose slots the kernel allocates
/// (`IORING_FILE_INDEX_ALLOC`, 5.19) and closes through the ring (`IORING_OP_CLOSE` on a slot,
/// which an IOPOLL ring refuses).
fn direct_table_usable(u: &Uring) -> bool {
    !u.is_iopoll()
        && crate::setup::kernel_at_least(5, 19)
        && u.supports(io_uring::opcode::Close::CODE)
}

/// Wakes a driver from another thread (writes its eventfd, which the ring polls).
#[derive(Debug, Clone)]
pub struct Notifier {
    pub(crate) fd: Arc<OwnedFd>,
}

impl Notifier {
    /// Wakes the driver if it is waiting.
    pub fn notify(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a local u64 to an eventfd this handle keeps open.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// Where an [`Op`] stands. The operation's data stays in `Op::data` whatever the phase (no
/// move per transition); the phase says who else knows of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not yet in the ring.
    Idle,
    /// Waiting in the driver's room FIFO with this ticket.
    Room(u64),
    /// In the ring; the slot `Op::user_data` will hold the result.
    InFlight,
    /// Completed: the data was handed to `OpCode::complete`.
    Done,
}

/// The future of one operation: pushes it on first poll (or waits for room), resolves to its
/// output, and on drop hands its data to the driver until the final CQE.
///
/// The fast path: the first poll pushes the SQE and stores the task's waker in the
/// slot; the CQE handler moves the waker out and leaves the result in the slot; the second poll
/// takes the result and frees the slot in one lookup. The data is never moved between phases.
#[must_use = "an operation does nothing unless awaited"]
pub struct Op<T: OpCode> {
    /// The operation's data: `Some` until `complete` took it (or the driver did, on drop).
    data: Option<T>,
    /// The driver the operation is pushed on (or waits for room on).
    driver: Option<Driver>,
    /// The slot's `user_data` while `InFlight`.
    user_data: u64,
    phase: Phase,
    /// Times the operation ended with an `ECANCELED` nobody asked for and went in again.
    resubmits: u8,
}

impl<T: OpCode> std::fmt::Debug for Op<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Op")
    }
}

impl<T: OpCode> Op<T> {
    /// Whether the operation is in the kernel's hands (pushed, final completion not yet
    /// taken): dropping it then cancels it, and whatever it completes with is lost to the
    /// caller. A caller that must not lose that result (a receive whose future was dropped)
    /// keeps the `Op` alive instead and polls it later.
    #[inline]
    pub fn is_in_flight(&self) -> bool {
        matches!(self.phase, Phase::InFlight)
    }

    /// An operation, started when first polled inside a runtime.
    #[inline]
    pub fn new(data: T) -> Op<T> {
        Op {
            data: Some(data),
            driver: None,
            user_data: 0,
            phase: Phase::Idle,
            resubmits: 0,
        }
    }

    /// Hands the data and `c` to the operation's completion handler.
    #[inline]
    fn finish(&mut self, c: Completion) -> Poll<T::Output> {
        self.phase = Phase::Done;
        match self.data.take() {
            Some(data) => Poll::Ready(data.complete(c)),
            // Unreachable: the data leaves only in `finish` (phase `Done`) or in `drop`.
            None => Poll::Pending,
        }
    }
}

impl<T: OpCode + UringOp + EpollOp> Op<T> {
    /// The final completion `c` of the operation in flight: its output, or, for an
    /// `ECANCELED` nobody asked for, the operation again ([`crate::op::resubmit_after`]).
    #[inline]
    fn settle(&mut self, c: Completion, cx: &mut Context<'_>) -> Poll<T::Output> {
        let deadline = self
            .data
            .as_ref()
            .is_some_and(|d| d.link_timeout().is_some());
        if crate::op::resubmit_after(&c, deadline, &mut self.resubmits) {
            self.phase = Phase::Idle;
            return self.start(cx);
        }
        self.finish(c)
    }
}

// Op never hands out pinned references to its data: the data's kernel-visible memory is on the
// heap (UringOp's contract), so moving the Op is harmless.
impl<T: OpCode> Unpin for Op<T> {}

impl<T: OpCode + UringOp + EpollOp> Op<T> {
    /// First poll (or a poll while waiting for room): push the SQE, or queue for room.
    #[inline]
    fn start(&mut self, cx: &mut Context<'_>) -> Poll<T::Output> {
        if self.driver.is_none() {
            match Driver::current() {
                Some(d) => self.driver = Some(d),
                None => {
                    return self.finish(Completion {
                        res: -libc::ENXIO,
                        flags: 0,
                    })
                }
            }
        }
        let Some(driver) = self.driver.as_ref() else {
            return Poll::Pending;
        };
        let Some(data) = self.data.as_mut() else {
            return Poll::Pending;
        };
        let pushed = {
            let mut d = driver.shared.engine.borrow_mut();
            let held = match self.phase {
                Phase::Room(t) => Some(t),
                _ => None,
            };
            let Ok(granted) = d.table_mut().check_ticket(held, cx.waker()) else {
                return Poll::Pending;
            };
            self.phase = Phase::Idle;
            // A task of this driver's runtime is woken by its key, with no waker kept.
            let state =
                match crate::task_key::key_for(Rc::as_ptr(&driver.shared).cast(), cx.waker()) {
                    Some(key) => Lifecycle::WaitingTask(key),
                    None => Lifecycle::Waiting(cx.waker().clone()),
                };
            match d.push(data, granted, state) {
                Ok(user_data) => Ok(user_data),
                Err(PushError::NoRoom) => {
                    self.phase = Phase::Room(d.table_mut().wait_room(cx.waker()));
                    return Poll::Pending;
                }
                Err(PushError::Poisoned) => Err(-libc::EBADR),
                Err(PushError::ShutDown) => Err(-libc::ECANCELED),
            }
        };
        match pushed {
            Ok(user_data) => {
                self.user_data = user_data;
                self.phase = Phase::InFlight;
                if driver.shared.kind == DriverKind::Epoll {
                    // The epoll driver may have completed the operation inline.
                    let ready = driver
                        .shared
                        .engine
                        .borrow_mut()
                        .table_mut()
                        .poll_slot(user_data, cx.waker());
                    if let Poll::Ready(c) = ready {
                        return self.settle(c, cx);
                    }
                }
                // The slot holds the waker.
                Poll::Pending
            }
            Err(res) => self.finish(Completion { res, flags: 0 }),
        }
    }
}

impl<T: OpCode + UringOp + EpollOp> Future for Op<T> {
    type Output = T::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.get_mut();
        match this.phase {
            Phase::InFlight => {
                let c = match &this.driver {
                    Some(driver) => {
                        let mut d = driver.shared.engine.borrow_mut();
                        match d.table_mut().poll_slot(this.user_data, cx.waker()) {
                            Poll::Ready(c) => c,
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    // Unreachable: an operation in flight keeps its driver.
                    None => Completion {
                        res: -libc::EBADR,
                        flags: 0,
                    },
                };
                this.settle(c, cx)
            }
            Phase::Idle | Phase::Room(_) => this.start(cx),
            Phase::Done => panic!("hoop Op polled after completion"),
        }
    }
}

impl<T: OpCode> Drop for Op<T> {
    fn drop(&mut self) {
        match self.phase {
            Phase::Room(ticket) => {
                if let Some(driver) = &self.driver {
                    if let Ok(mut d) = driver.shared.engine.try_borrow_mut() {
                        d.table_mut().leave_room(ticket);
                    }
                }
            }
            Phase::InFlight => {
                let (Some(driver), Some(data)) = (self.driver.as_ref(), self.data.take()) else {
                    return;
                };
                let finished = match driver.shared.engine.try_borrow_mut() {
                    Ok(mut d) => d.drop_slot(self.user_data, Box::new(data)),
                    Err(_) => {
                        // Dropped from inside the driver (cannot happen by construction): the
                        // kernel may still own the memory, so leak it rather than free it.
                        std::mem::forget(data);
                        None
                    }
                };
                if let Some((data, c)) = finished {
                    data.finish(c);
                }
            }
            Phase::Idle | Phase::Done => {}
        }
    }
}
