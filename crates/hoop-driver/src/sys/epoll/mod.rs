//! The readiness driver: epoll (edge-triggered) for sockets and pipes, a thread pool for files,
//! a timer heap for timeouts — the same operations and ownership rules as the io_uring driver,
//! for machines where io_uring is blocked (seccomp, `kernel.io_uring_disabled`, gVisor).
//!
//! An operation is described by a [`Call`] (its system call and raw arguments into memory the
//! operation owns) and handled by its [`Mode`]: run at once; tried at once and, on `EAGAIN`,
//! queued on its fd until epoll says the fd is ready; sent to the pool; or armed as a timer.
//! Completions go through the same slot table and lifecycle as io_uring's CQEs.

mod call;
mod op;
mod pool;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::call::{Call, Mode};
pub use self::op::EpollOp;
use self::pool::Pool;
use crate::config::Config;
use crate::error::cvt_libc;
use crate::fault::{Faults, Kind as Fault};
use crate::lifecycle::{Completion, Lifecycle};
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::setup::SetupError;
use crate::sys::uring::{drain_eventfd, PushError, ShutdownReport};
use crate::table::{Dropped, OpTable};

/// epoll `data` of the wake-up eventfd (fds are non-negative, so this is never an fd).
const WAKE_TOKEN: u64 = u64::MAX;

/// What the driver knows of one fd.
struct FdState {
    registered: bool,
    nonblocking: bool,
    /// A regular file or block device (always "ready": its I/O goes to the pool).
    regular: Option<bool>,
    readable: bool,
    writable: bool,
    /// The peer closed its side (or the socket failed): a condition that stays and is not
    /// signalled again, so a short read must not make the driver wait for another edge.
    read_closed: bool,
    /// The socket hung up or failed: likewise for writes.
    write_closed: bool,
    /// A message socket (datagram, seqpacket), learnt at its first short transfer (or its
    /// first send to an address that found no room): one call moves one message, so a short
    /// one says nothing of what is left.
    message: Option<bool>,
    /// Writes wait for this timer, not for an edge: a send to an address found the target's
    /// queue full (see `note`).
    write_retry_at: Option<Instant>,
    /// The last wait of `write_retry_at` (zero: none since the last write that went through).
    write_backoff: Duration,
    readers: VecDeque<u64>,
    writers: VecDeque<u64>,
}

impl Default for FdState {
    fn default() -> FdState {
        FdState {
            registered: false,
            nonblocking: false,
            regular: None,
            // Unknown readiness: try the call first.
            readable: true,
            writable: true,
            read_closed: false,
            write_closed: false,
            message: None,
            write_retry_at: None,
            write_backoff: Duration::ZERO,
            readers: VecDeque::new(),
            writers: VecDeque::new(),
        }
    }
}

impl FdState {
    /// Records what a call's result says of the fd's readiness: `EAGAIN`, or a short stream
    /// read/write of at least one byte, means "wait for the next edge".
    ///
    /// The readiness rule per kind of fd: on a stream (TCP, a Unix stream, a pipe) a transfer
    /// shorter than asked drained the socket (or filled its buffer), as tokio also assumes. On
    /// a message socket (UDP, a Unix datagram or seqpacket socket) a receive returns one
    /// message, whatever its length, and a send is whole or fails: a short result says nothing
    /// of what is left, and only `EAGAIN` means "wait" (waiting there for an edge that only
    /// new traffic brings would strand the datagrams already queued).
    ///
    /// A send to an address on a message socket that found no room waits on a timer instead
    /// (returned, for the caller to arm): its `EAGAIN` may come from the target's queue
    /// (a Unix datagram socket's, full of other senders' datagrams), which nothing signals to
    /// an unconnected sender, while the failed send's own buffer, freed, raises a write edge
    /// at once, every time (waiting for edges spun: 2,016 waits in 28 ms). The wait starts at
    /// 20 µs and doubles up to 2 ms until a write goes through.
    fn note(&mut self, fd: RawFd, write: bool, res: i32, call: &Call) -> Option<Instant> {
        let io_len = call.io_len;
        // A 0-byte read is end of stream, which stays readable (no new edge would come).
        let short = io_len > 0 && res > 0 && i64::from(res) < io_len;
        let closed = if write {
            self.write_closed
        } else {
            self.read_closed
        };
        let drained = res == -libc::EAGAIN || (short && !closed && !self.is_message(fd));
        if drained {
            if write {
                self.writable = false;
            } else {
                self.readable = false;
            }
        }
        if !write {
            return None;
        }
        if res >= 0 {
            self.write_backoff = Duration::ZERO;
        } else if res == -libc::EAGAIN && call.addressed && self.is_message(fd) {
            self.write_backoff = if self.write_backoff.is_zero() {
                Duration::from_micros(20)
            } else {
                (self.write_backoff * 2).min(Duration::from_millis(2))
            };
            let at = Instant::now() + self.write_backoff;
            self.write_retry_at = Some(at);
            return Some(at);
        }
        None
    }

    /// Whether `fd` is a message socket (asked once: its type never changes).
    fn is_message(&mut self, fd: RawFd) -> bool {
        *self
            .message
            .get_or_insert_with(|| crate::sys::is_message_socket(fd))
    }
}

/// Where a started, unfinished operation waits.
#[derive(Clone, Copy)]
enum Waiting {
    /// On fd readiness, running `nr` when ready (`connect_check`: read `SO_ERROR` instead).
    Fd {
        call: Call,
        nr: libc::c_long,
        fd: RawFd,
        write: bool,
        connect_check: bool,
    },
    Timer,
    Pool,
}

/// What the driver knows of each fd, indexed by fd number (fds are small integers).
#[derive(Default)]
struct FdTable {
    v: Vec<Option<FdState>>,
}

impl FdTable {
    fn get_mut(&mut self, fd: RawFd) -> Option<&mut FdState> {
        self.v.get_mut(usize::try_from(fd).ok()?)?.as_mut()
    }

    /// The state of `fd`, created if new. (Negative fds never reach here: the kernel rejects
    /// them before an operation can wait on one; they map to one shared dummy entry.)
    fn entry(&mut self, fd: RawFd) -> &mut FdState {
        let i = usize::try_from(fd).unwrap_or(0);
        if self.v.len() <= i {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i].get_or_insert_with(FdState::default)
    }

    fn remove(&mut self, fd: RawFd) -> Option<FdState> {
        self.v.get_mut(usize::try_from(fd).ok()?)?.take()
    }
}

/// Where each unfinished operation waits, indexed by its slot.
#[derive(Default)]
struct WaitTable {
    v: Vec<Option<(u64, Waiting)>>,
}

impl WaitTable {
    fn index(user_data: u64) -> usize {
        (user_data & 0xffff_ffff) as usize
    }

    fn insert(&mut self, user_data: u64, w: Waiting) {
        let i = Self::index(user_data);
        if self.v.len() <= i {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i] = Some((user_data, w));
    }

    fn get(&self, user_data: &u64) -> Option<&Waiting> {
        match self.v.get(Self::index(*user_data))? {
            Some((u, w)) if u == user_data => Some(w),
            _ => None,
        }
    }

    fn remove(&mut self, user_data: &u64) -> Option<Waiting> {
        let e = self.v.get_mut(Self::index(*user_data))?;
        match e {
            Some((u, _)) if u == user_data => e.take().map(|(_, w)| w),
            _ => None,
        }
    }
}

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
            pwait2: true,
            ready_fds: Vec::new(),
            retries: BinaryHeap::new(),
            faults: Faults::new(),
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
    /// reactor) that waited on it would wait for ever (issue 24: the seccomp child of
    /// `shared_fallback.rs` hung under `late`).
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

    /// Starts an operation: completes it at once if it can, else queues it where it waits.
    pub(crate) fn push(
        &mut self,
        call: Call,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.shut_down {
            return Err(PushError::ShutDown);
        }
        if !self.table.may_push(granted, state.counts_against_cap()) {
            return Err(PushError::NoRoom);
        }
        self.table.counters.sqes_submitted += 1;
        let mut call = call;
        if self.faults.active() {
            if let Some(res) = self.fault_at_push(&mut call) {
                self.table.counters.cqes_reaped += 1;
                return self.insert(completed(state, res));
            }
        }
        let user_data = self.start(call, state)?;
        if let Some(d) = call.deadline {
            if self.waiting.get(&user_data).is_some() {
                self.timers.push(Reverse((Instant::now() + d, user_data)));
            }
        }
        Ok(user_data)
    }

    /// Starts `call` in a new slot that begins in `state`.
    fn start(&mut self, call: Call, state: Lifecycle) -> Result<u64, PushError> {
        let initial = state;
        let res = match call.mode {
            Mode::Nop => 0,
            Mode::Fail(errno) => -errno,
            Mode::Inline => call.run(),
            Mode::Close(fd) => {
                self.forget_fd(fd);
                call.run()
            }
            Mode::Timer(d) => {
                let user_data = self.insert(initial)?;
                self.timers.push(Reverse((Instant::now() + d, user_data)));
                self.waiting.insert(user_data, Waiting::Timer);
                return Ok(user_data);
            }
            Mode::Blocking => return self.push_pool(call, initial),
            Mode::File {
                fd,
                write,
                stream_nr,
            } => {
                if self.is_regular(fd) {
                    return self.push_pool(call, initial);
                }
                return self.push_fd(call, stream_nr, fd, write, false, initial);
            }
            Mode::Readable(fd) => return self.push_fd(call, call.nr, fd, false, false, initial),
            Mode::Writable(fd) => return self.push_fd(call, call.nr, fd, true, false, initial),
            Mode::Accept(fd) => {
                self.set_nonblocking(fd);
                return self.push_fd(call, call.nr, fd, false, false, initial);
            }
            Mode::Connect(fd) => {
                self.set_nonblocking(fd);
                let res = call.run();
                if res == -libc::EINPROGRESS || res == -libc::EAGAIN {
                    return self.push_fd(call, call.nr, fd, true, true, initial);
                }
                res
            }
        };
        self.table.counters.cqes_reaped += 1;
        self.insert(completed(initial, res))
    }

    fn insert(&mut self, state: Lifecycle) -> Result<u64, PushError> {
        self.table.slots.insert(state).ok_or(PushError::NoRoom)
    }

    fn push_pool(&mut self, call: Call, state: Lifecycle) -> Result<u64, PushError> {
        let user_data = self.insert(state)?;
        match self.pool.submit(user_data, call) {
            Ok(()) => {
                self.waiting.insert(user_data, Waiting::Pool);
            }
            Err(e) => self.finish(user_data, -e.raw_os_error().unwrap_or(libc::EAGAIN)),
        }
        Ok(user_data)
    }

    /// A readiness operation: tried at once unless others wait on the same fd and direction
    /// (order is kept), queued on `EAGAIN`.
    fn push_fd(
        &mut self,
        call: Call,
        nr: libc::c_long,
        fd: RawFd,
        write: bool,
        connect_check: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.transient_fds && !connect_check {
            // Nothing is known of an fd nothing waits on: try the call first, and register
            // the fd only if it has to wait (an edge that comes before the registration is
            // reported by the registration itself).
            let idle = self.fds.get_mut(fd).is_none_or(|st| {
                if write {
                    st.writers.is_empty()
                } else {
                    st.readers.is_empty()
                }
            });
            if idle {
                // A wait for readiness alone learns it from the registration below.
                let mut tried = None;
                if !call.ready_only {
                    let res = call.run_nr(nr);
                    if res != -libc::EAGAIN || call.try_once {
                        self.release_if_idle(fd);
                        self.table.counters.cqes_reaped += 1;
                        return self.insert(completed(state, res));
                    }
                    tried = Some(res);
                }
                if !self.register(fd) {
                    return self.push_pool(call, state);
                }
                let st = self.fds.entry(fd);
                if write {
                    st.writable = false;
                } else {
                    st.readable = false;
                }
                if let Some(at) = tried.and_then(|res| st.note(fd, write, res, &call)) {
                    self.retries.push(Reverse((at, fd)));
                }
            }
        }
        if !self.register(fd) {
            // epoll refuses this fd (a regular file): run it on the pool instead.
            return self.push_pool(call, state);
        }
        let st = self.fds.entry(fd);
        let may_try = if write {
            st.writers.is_empty() && st.writable && st.write_retry_at.is_none()
        } else {
            st.readers.is_empty() && st.readable
        };
        if may_try && !connect_check {
            let res = call.run_nr(nr);
            if let Some(at) = st.note(fd, write, res, &call) {
                self.retries.push(Reverse((at, fd)));
            }
            if res != -libc::EAGAIN {
                self.table.counters.cqes_reaped += 1;
                return self.insert(completed(state, res));
            }
        }
        if call.try_once {
            // Not ready (or others wait first): the caller waits its own way.
            self.table.counters.cqes_reaped += 1;
            return self.insert(completed(state, -libc::EAGAIN));
        }
        let user_data = self.insert(state)?;
        self.waiting.insert(
            user_data,
            Waiting::Fd {
                call,
                nr,
                fd,
                write,
                connect_check,
            },
        );
        let st = self.fds.entry(fd);
        if write {
            st.writers.push_back(user_data);
        } else {
            st.readers.push_back(user_data);
        }
        // Already ready (the edge came before this op queued): run it on the next turn.
        let ready = if write { st.writable } else { st.readable };
        if ready && !connect_check {
            self.ready_fds.push(fd);
        }
        Ok(user_data)
    }

    fn is_regular(&mut self, fd: RawFd) -> bool {
        if self.transient_fds {
            // Nothing cached: the fd number may name another file next time.
            let r = fd_is_regular(fd);
            if !r {
                make_nonblocking(fd);
            }
            return r;
        }
        let st = self.fds.entry(fd);
        if let Some(r) = st.regular {
            return r;
        }
        let r = fd_is_regular(fd);
        st.regular = Some(r);
        if !r {
            self.set_nonblocking(fd);
        }
        r
    }

    fn set_nonblocking(&mut self, fd: RawFd) {
        if self.transient_fds {
            make_nonblocking(fd);
            return;
        }
        let st = self.fds.entry(fd);
        if st.nonblocking {
            return;
        }
        st.nonblocking = true;
        make_nonblocking(fd);
    }

    /// Registers `fd` (edge-triggered, both directions) once. False if epoll refuses it.
    fn register(&mut self, fd: RawFd) -> bool {
        let st = self.fds.entry(fd);
        if st.registered {
            return true;
        }
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        let epfd = self.epfd.as_raw_fd();
        // SAFETY: `ev` is a valid event; epoll_ctl only reads it.
        let mut r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
        }
        if r < 0 {
            return false;
        }
        st.registered = true;
        true
    }

    /// The fd is being closed: forget what we knew of it (its number will be reused). Anything
    /// still queued on it fails with `EBADF` instead of waiting forever.
    pub(crate) fn forget_fd(&mut self, fd: RawFd) {
        if let Some(st) = self.fds.remove(fd) {
            if st.registered {
                // SAFETY: removes a registration; a null event is allowed for DEL.
                unsafe {
                    libc::epoll_ctl(
                        self.epfd.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        fd,
                        std::ptr::null_mut(),
                    )
                };
            }
            for user_data in st.readers.into_iter().chain(st.writers) {
                if self.waiting.remove(&user_data).is_some() {
                    self.finish(user_data, -libc::EBADF);
                }
            }
        }
    }

    fn finish(&mut self, user_data: u64, res: i32) {
        if self.faults.active() && !self.shut_down && self.faults.fire(Fault::Late) {
            self.held.push((user_data, res));
            return;
        }
        self.table.counters.cqes_reaped += 1;
        self.table.complete(user_data, Completion { res, flags: 0 });
    }

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

    /// One turn: wait for readiness (if `block` and nothing is ready: until the next timer, or
    /// for ever), run what became ready, collect pool results and expired timers.
    /// One turn; a blocking wait lasts at most `wait` (the runtime's next timer).
    pub(crate) fn turn(&mut self, block: bool, wait: Option<Duration>) -> io::Result<()> {
        if !self.held.is_empty() {
            self.release_held();
        }
        let block = block
            && !self.table.has_ready()
            && self.ready_fds.is_empty()
            && wait.is_none_or(|w| !w.is_zero());
        self.busy_turns += 1;
        // While tasks are still ready, poll epoll only every 16th turn (as the io_uring driver
        // enters the ring): readiness is collected in one `epoll_wait` when the runtime idles.
        if !block && self.busy_turns < 16 {
            return Ok(());
        }
        self.busy_turns = 0;
        let timeout = if block {
            // The sooner of this driver's next timer and the runtime's; `None`: for ever.
            match (self.next_timeout(), wait) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            Some(Duration::ZERO)
        };
        self.wait(timeout)
    }

    /// Waits for readiness up to `timeout` (`None`: for ever), with `epoll_pwait2` (Linux
    /// 5.11), whose timeout is a `timespec`: a 50 µs sleep sleeps about 50 µs, not the whole
    /// millisecond `epoll_wait` would round it up to. Where the kernel lacks it (`ENOSYS`) or
    /// a seccomp filter refuses it (`EPERM`, which `epoll_pwait2` never says otherwise),
    /// `epoll_wait` from then on, its timeout rounded up to whole milliseconds so a timer has
    /// expired when the wait returns.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.events.clear();
        let cap = self.events.capacity() as i32;
        self.table.counters.enter_calls += 1;
        let n = if self.faults.active() && self.faults.fire(Fault::Eintr) {
            // Injected: the wait was interrupted by a signal before any event.
            // SAFETY: sets errno, a thread-local int, for the EINTR path below.
            unsafe { *libc::__errno_location() = libc::EINTR };
            -1
        } else {
            self.epoll_wait(cap, timeout)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        } else {
            // SAFETY: epoll_wait initialized `n` events.
            unsafe { self.events.set_len(n as usize) };
        }
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            let token = ev.u64;
            if token == WAKE_TOKEN {
                drain_eventfd(&self.wake_fd);
                continue;
            }
            let fd = token as RawFd;
            let bits = ev.events as i32;
            let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
            if let Some(st) = self.fds.get_mut(fd) {
                if err || bits & (libc::EPOLLIN | libc::EPOLLRDHUP) != 0 {
                    st.readable = true;
                }
                if err || bits & libc::EPOLLRDHUP != 0 {
                    st.read_closed = true;
                }
                if err || bits & libc::EPOLLOUT != 0 {
                    st.writable = true;
                }
                if err {
                    st.write_closed = true;
                }
            }
            self.run_ready(fd);
        }
        self.events = events;
        let ready = std::mem::take(&mut self.ready_fds);
        for &fd in &ready {
            self.run_ready(fd);
        }
        self.ready_fds = ready;
        self.ready_fds.clear();
        self.collect_pool();
        self.expire_timers();
        self.expire_retries();
        self.table.grant();
        Ok(())
    }

    /// One `epoll_pwait2` (or `epoll_wait`, see [`wait`](Self::wait)) into the spare capacity
    /// of `self.events`: the number of events, or -1 with `errno` set.
    fn epoll_wait(&mut self, cap: i32, timeout: Option<Duration>) -> i32 {
        let epfd = self.epfd.as_raw_fd();
        if self.pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: libc::c_long::from(t.subsec_nanos()),
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: the kernel writes at most `cap` events into the vector's spare capacity
            // and reads the timespec (a local, or null: no timeout); no signal mask.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    epfd,
                    self.events.as_mut_ptr(),
                    cap,
                    ts_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            let refused = n < 0
                && matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::ENOSYS) | Some(libc::EPERM)
                );
            if !refused {
                return n as i32;
            }
            self.pwait2 = false;
        }
        let ms = timeout.map_or(-1, |t| {
            t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
        });
        // SAFETY: the kernel writes at most `cap` events into the vector's spare capacity.
        unsafe { libc::epoll_wait(epfd, self.events.as_mut_ptr(), cap, ms) }
    }

    /// Runs the operations queued on `fd` while it stays ready.
    fn run_ready(&mut self, fd: RawFd) {
        self.run_ready_queues(fd);
        self.release_if_idle(fd);
    }

    /// A shared ring's engine forgets an fd once nothing waits on it (see `transient_fds`).
    fn release_if_idle(&mut self, fd: RawFd) {
        if !self.transient_fds {
            return;
        }
        let idle = self
            .fds
            .get_mut(fd)
            .is_some_and(|st| st.readers.is_empty() && st.writers.is_empty());
        if idle {
            self.forget_fd(fd);
        }
    }

    fn run_ready_queues(&mut self, fd: RawFd) {
        for write in [false, true] {
            loop {
                let Some(st) = self.fds.get_mut(fd) else {
                    return;
                };
                let (ready, q) = if write {
                    (st.writable, &mut st.writers)
                } else {
                    (st.readable, &mut st.readers)
                };
                if !ready || (write && st.write_retry_at.is_some()) {
                    break;
                }
                let Some(&user_data) = q.front() else {
                    break;
                };
                let Some(Waiting::Fd {
                    call,
                    nr,
                    connect_check,
                    ..
                }) = self.waiting.get(&user_data).copied()
                else {
                    q.pop_front();
                    continue;
                };
                let res = if connect_check {
                    socket_error(fd)
                } else {
                    call.run_nr(nr)
                };
                if let Some(at) = st.note(fd, write, res, &call) {
                    self.retries.push(Reverse((at, fd)));
                }
                if res == -libc::EAGAIN {
                    break;
                }
                if write {
                    st.writers.pop_front();
                } else {
                    st.readers.pop_front();
                }
                self.waiting.remove(&user_data);
                self.finish(user_data, res);
            }
        }
    }

    fn collect_pool(&mut self) {
        let mut done = std::mem::take(&mut self.done);
        self.pool.take_done(&mut done);
        for (user_data, res) in done.drain(..) {
            self.waiting.remove(&user_data);
            self.finish(user_data, res);
        }
        self.done = done;
    }

    /// Runs the writes of fds whose retry timer expired (see `FdState::note`).
    fn expire_retries(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, fd))) = self.retries.peek().copied() {
            if at > now {
                break;
            }
            self.retries.pop();
            // An entry for a timer since replaced, or an fd since forgotten, is stale.
            let Some(st) = self.fds.get_mut(fd) else {
                continue;
            };
            if st.write_retry_at != Some(at) {
                continue;
            }
            st.write_retry_at = None;
            st.writable = true;
            self.run_ready(fd);
        }
    }

    fn expire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, user_data))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            match self.waiting.get(&user_data).copied() {
                Some(Waiting::Timer) => {
                    self.waiting.remove(&user_data);
                    self.finish(user_data, -libc::ETIME);
                }
                // An operation's deadline: cancel it, as a linked timeout would.
                Some(_) => self.cancel(user_data),
                None => {}
            }
        }
    }

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

impl Epoll {
    /// Delivers the completions fault injection held back, in a random order.
    fn release_held(&mut self) {
        let mut held = std::mem::take(&mut self.held);
        for i in (1..held.len()).rev() {
            let j = self.faults.below(i as u64 + 1) as usize;
            held.swap(i, j);
        }
        for (user_data, res) in held {
            self.table.counters.cqes_reaped += 1;
            self.table.complete(user_data, Completion { res, flags: 0 });
        }
    }

    /// Fault injection at push: shortens a read or write, or makes the result up
    /// (`ECANCELED`, `ECONNRESET`) without running the call. Closes and pool jobs other than
    /// file reads and writes are never touched. (`ENOBUFS` is not injected here: this
    /// driver's buffer ring is hoop's own and says `ENOBUFS` only when it is empty.)
    fn fault_at_push(&mut self, call: &mut Call) -> Option<i32> {
        let socket_io = matches!(call.mode, Mode::Readable(_) | Mode::Writable(_))
            && [
                libc::SYS_recvfrom,
                libc::SYS_sendto,
                libc::SYS_recvmsg,
                libc::SYS_sendmsg,
            ]
            .contains(&call.nr);
        let may_cancel = socket_io
            || matches!(
                call.mode,
                Mode::File { .. }
                    | Mode::Readable(_)
                    | Mode::Writable(_)
                    | Mode::Accept(_)
                    | Mode::Connect(_)
            );
        if socket_io && self.faults.fire(Fault::Econnreset) {
            return Some(-libc::ECONNRESET);
        }
        // Not an operation with a deadline: its `ECANCELED` is the deadline passing, which an
        // operation that did not run must not look like.
        if may_cancel && call.deadline.is_none() && self.faults.fire(Fault::Ecanceled) {
            return Some(-libc::ECANCELED);
        }
        let plain_io = [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_pread64,
            libc::SYS_pwrite64,
            libc::SYS_recvfrom,
            libc::SYS_sendto,
        ]
        .contains(&call.nr)
            && !matches!(call.mode, Mode::Close(_) | Mode::Nop | Mode::Fail(_));
        // Reads of fewer than 512 bytes are left whole (eventfd and signalfd records); nor is a
        // datagram cut short (the kernel sends one whole or not at all, and a shorter receive
        // would truncate it).
        let len = u32::try_from(call.args[2]).unwrap_or(0);
        let message = || crate::sys::is_message_socket(call.args[0] as RawFd);
        if plain_io && len >= 512 && !message() && self.faults.fire(Fault::ShortIo) {
            if let Some(shorter) = self.faults.shorten(len) {
                call.args[2] = libc::c_long::from(shorter);
                if call.io_len > 0 {
                    call.io_len = i64::from(shorter);
                }
            }
        }
        None
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        let _ = self.shutdown();
        let _ = self.table.leak_ignored();
    }
}

/// Whether `fd` is a regular file, block device or directory (its I/O goes to the pool); an
/// fd that cannot be examined counts as one.
fn fd_is_regular(fd: RawFd) -> bool {
    // SAFETY: fstat writes a stat struct into a local.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `sb` is a live, writable stat struct.
    let ok = unsafe { libc::fstat(fd, &mut sb) } == 0;
    let fmt = sb.st_mode & libc::S_IFMT;
    !ok || fmt == libc::S_IFREG || fmt == libc::S_IFBLK || fmt == libc::S_IFDIR
}

/// Sets `O_NONBLOCK` on `fd` if it is not set.
fn make_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 && flags & libc::O_NONBLOCK == 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// The state of a slot whose operation completed at once with `res`.
fn completed(initial: Lifecycle, res: i32) -> Lifecycle {
    let c = Completion { res, flags: 0 };
    match initial {
        Lifecycle::Streaming(s) => Lifecycle::Streaming(s.ended_with(c)),
        _ => Lifecycle::Completed(c),
    }
}

/// The pending error of a socket (`SO_ERROR`), as a result: 0 or `-errno`.
fn socket_error(fd: RawFd) -> i32 {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `err`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else if err == libc::EINPROGRESS || err == libc::EALREADY {
        -libc::EAGAIN
    } else {
        -err
    }
}
