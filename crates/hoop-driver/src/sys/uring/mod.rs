//! The io_uring driver: one ring per runtime thread.
//!
//! SQEs are queued without a syscall and submitted in one `io_uring_enter` when the runtime runs
//! out of ready tasks (or the SQ fills); every ready CQE is drained in one batch, and the wakers
//! and orphaned results collected in the drain are handed back to the caller, who runs them after
//! releasing the driver (invariant 11).

mod chain;
mod op;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue::Entry, types, IoUring};

pub use self::op::UringOp;
use crate::config::Config;
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::{Orphan, StreamOrphan};
use crate::setup::SetupError;
use crate::slots::tag;
use crate::table::{Dropped, OpTable};

/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h): wait for or collect completions, and run deferred
/// task work.
const IORING_ENTER_GETEVENTS: u32 = 1;

/// Why an operation could not be pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// No slot or SQ room: wait in the FIFO.
    NoRoom,
    /// The driver lost completions (`-EBADR`).
    Poisoned,
    /// The runtime shut down.
    ShutDown,
}

/// The io_uring driver of one thread.
pub(crate) struct Uring {
    ring: IoUring,
    /// `IORING_REGISTER_PROBE`: which opcodes this kernel supports.
    probe: Box<io_uring::Probe>,
    pub(crate) table: OpTable,
    /// Targets (user_data) of cancels not yet pushed.
    cancels: VecDeque<u64>,
    cancels_in_flight: usize,
    cancel_budget: usize,
    wake_fd: Arc<OwnedFd>,
    wake_armed: bool,
    /// Driver turns since the last `io_uring_enter`.
    turns_since_enter: u32,
    /// An SQE that must reach the kernel on this tick is queued (a close from `Drop`, a
    /// cancel): the next turn enters even if tasks are still ready.
    urgent: bool,
    poisoned: bool,
    shut_down: bool,
    shutdown_timeout: Duration,
    setup_flags: &'static str,
    /// The ring fd registered with `IORING_REGISTER_RING_FDS`: `enter` passes its index.
    registered: Option<RegisteredRing>,
    /// The registered file table (direct descriptors), once a direct accept registered it.
    pub(crate) fixed_files: Option<std::rc::Rc<crate::fixedfile::FixedFiles>>,
}

impl Uring {
    pub(crate) fn new(cfg: &Config) -> Result<Uring, SetupError> {
        let entries = cfg.entries.max(1);
        let cq = cfg
            .cq_entries
            .unwrap_or_else(|| (entries.saturating_mul(4)).max(16384))
            .max(entries.saturating_mul(2));
        let (ring, setup_flags) = build_ring(entries, cq, cfg)?;
        let probe = probe_opcodes(&ring)?;
        // Both registrations are optimisations: a kernel that refuses them is ignored.
        let registered = if cfg.register_ring_fd {
            RegisteredRing::register(&ring).ok()
        } else {
            None
        };
        if let Some((bounded, unbounded)) = cfg.iowq_max_workers {
            let mut max = [bounded, unbounded];
            let _ = ring.submitter().register_iowq_max_workers(&mut max);
        }
        let cq_real = ring.params().cq_entries() as usize;
        let cancel_budget = (cq_real / 16).max(1);
        let capacity = match cfg.max_in_flight {
            Some(n) => n as usize,
            None => cq_real.saturating_sub(cancel_budget + 1).max(1),
        };
        // SAFETY: eventfd has no memory-safety preconditions.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let efd = crate::error::cvt_libc(efd).map_err(|e| SetupError::classify(e, entries))?;
        Ok(Uring {
            ring,
            probe,
            table: OpTable::new(capacity),
            cancels: VecDeque::new(),
            cancels_in_flight: 0,
            cancel_budget,
            // SAFETY: eventfd returned a new fd that nothing else owns.
            wake_fd: Arc::new(unsafe { OwnedFd::from_raw_fd(efd) }),
            wake_armed: false,
            turns_since_enter: 0,
            urgent: false,
            poisoned: false,
            shut_down: false,
            shutdown_timeout: cfg.shutdown_timeout,
            setup_flags,
            registered,
            fixed_files: None,
        })
    }

    pub(crate) fn setup_flags(&self) -> &'static str {
        self.setup_flags
    }

    /// The ring's submitter (for registrations).
    pub(crate) fn submitter(&self) -> io_uring::Submitter<'_> {
        self.ring.submitter()
    }

    /// Whether this is an IOPOLL ring (O_DIRECT files only; no poll, timeout, close or cancel
    /// operations).
    pub(crate) fn is_iopoll(&self) -> bool {
        self.ring.params().is_setup_iopoll()
    }

    /// Whether the kernel supports `opcode` (from the probe taken at setup).
    pub(crate) fn supports(&self, opcode: u8) -> bool {
        self.probe.is_supported(opcode)
    }

    pub(crate) fn params(&self) -> &io_uring::Parameters {
        self.ring.params()
    }

    pub(crate) fn wake_fd(&self) -> Arc<OwnedFd> {
        self.wake_fd.clone()
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down
    }

    /// Whether the driver has work the next turn should not sleep through.
    pub(crate) fn has_ready(&self) -> bool {
        self.table.has_ready()
    }

    // ----- pushing --------------------------------------------------------------------------

    /// Pushes an operation's SQE into a new slot. `granted` says the caller holds a grant from
    /// the room FIFO (it may then pass waiters that came before others).
    pub(crate) fn push(
        &mut self,
        entry: Entry,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        if self.poisoned {
            return Err(PushError::Poisoned);
        }
        if self.shut_down {
            return Err(PushError::ShutDown);
        }
        if !self.table.may_push(granted) {
            return Err(PushError::NoRoom);
        }
        let Some(user_data) = self.table.slots.insert(state) else {
            return Err(PushError::NoRoom);
        };
        if !self.push_sqe(&entry.user_data(user_data)) {
            let _ = self.table.slots.remove(user_data);
            return Err(PushError::NoRoom);
        }
        Ok(user_data)
    }

    /// Puts one SQE in the SQ, submitting what is queued first if the SQ is full.
    fn push_sqe(&mut self, entry: &Entry) -> bool {
        {
            let mut sq = self.ring.submission();
            // SAFETY: every pointer in the entry points into memory owned by the operation's
            // data, which the slot or the future keeps alive until the final CQE (UringOp's
            // contract).
            if unsafe { sq.push(entry) }.is_ok() {
                return true;
            }
        }
        // The SQ filled up: submit now rather than wait for the end of the tick.
        let _ = self.enter(false);
        let mut sq = self.ring.submission();
        // SAFETY: as above.
        unsafe { sq.push(entry).is_ok() }
    }

    // ----- completions ------------------------------------------------------------------------

    /// The future of slot `user_data` was dropped with its data. Returns the data and its result
    /// if the operation already completed (the caller finishes it after releasing the driver).
    pub(crate) fn drop_slot(
        &mut self,
        user_data: u64,
        data: Box<dyn Orphan>,
    ) -> Option<(Box<dyn Orphan>, Completion)> {
        match self.table.drop_slot(user_data, data) {
            Dropped::Finished(data, c) => Some((data, c)),
            Dropped::Gone => None,
            Dropped::Cancel => {
                if self.shut_down {
                    // Shutdown already gave up on this operation: leak its memory on purpose.
                    let _ = self.table.leak_slot(user_data);
                } else {
                    self.cancels.push_back(user_data);
                    self.urgent = true;
                }
                None
            }
        }
    }

    /// The stream of slot `user_data` was dropped with its data: cancel it if still armed.
    pub(crate) fn drop_stream(&mut self, user_data: u64, data: Box<dyn StreamOrphan>) {
        if self.table.drop_stream(user_data, data) {
            if self.shut_down {
                let _ = self.table.leak_slot(user_data);
            } else {
                self.cancels.push_back(user_data);
                self.urgent = true;
            }
        }
    }

    /// Hands a just-pushed operation's data to its slot: nobody will wait for the result, and
    /// nothing is cancelled (used for closes from `Drop`).
    pub(crate) fn detach(&mut self, user_data: u64, data: Box<dyn Orphan>) {
        self.table.detach(user_data, data);
        self.urgent = true;
    }

    /// Pushes queued cancels while the SQ and the cancel budget allow (invariant 7: a cancel
    /// that does not fit stays queued and is retried on the next turn).
    fn flush_cancels(&mut self) {
        while let Some(&target) = self.cancels.front() {
            let live = self
                .table
                .slots
                .get_mut(target)
                .is_some_and(|s| !s.is_completed());
            if !live {
                self.cancels.pop_front();
                continue;
            }
            if self.cancels_in_flight >= self.cancel_budget {
                break;
            }
            let entry = opcode::AsyncCancel::new(target)
                .build()
                .user_data(tag::CANCEL);
            if !self.push_sqe(&entry) {
                break;
            }
            self.cancels.pop_front();
            self.cancels_in_flight += 1;
            self.table.counters.cancels_submitted += 1;
        }
    }

    fn arm_wake(&mut self) {
        // An IOPOLL ring refuses POLL_ADD (and TIMEOUT, CLOSE, ASYNC_CANCEL): no wake-up poll
        // there; cross-thread wakes are then seen on the next turn.
        if self.wake_armed || self.shut_down || self.is_iopoll() {
            return;
        }
        let entry = opcode::PollAdd::new(types::Fd(self.wake_fd.as_raw_fd()), libc::POLLIN as u32)
            .build()
            .user_data(tag::WAKE);
        if self.push_sqe(&entry) {
            self.wake_armed = true;
        }
    }

    /// One turn: push queued cancels, submit, wait for a completion if `block` (and nothing is
    /// ready already), drain every CQE. Wakers and orphans land in `wakeups` and `orphans`.
    pub(crate) fn turn(&mut self, block: bool) -> io::Result<()> {
        crate::fixedfile::flush_slot_closes(self);
        self.flush_cancels();
        self.arm_wake();
        let block = block && !self.has_ready();
        self.turns_since_enter += 1;
        // Queued SQEs wait until the runtime runs out of ready tasks (`block`), so one enter
        // submits them all; every 16th busy turn enters anyway, so a task that keeps yielding
        // cannot hold back submissions and completions. (A full SQ is submitted at once by
        // `push_sqe`.)
        if block || self.urgent || self.turns_since_enter >= 16 || self.ring.submission().taskrun()
        {
            self.enter(block)?;
        }
        self.drain();
        Ok(())
    }

    /// `io_uring_enter`: submit everything queued, with GETEVENTS so that deferred task work
    /// runs, and wait for one completion if `block`.
    ///
    /// With SQPOLL the SQ thread takes SQEs by itself as soon as they are pushed, so the call is
    /// made only when it is needed (liburing's rules, as in `Submitter::submit_and_wait`): to
    /// wake the SQ thread after it went to sleep (`SQ_WAKEUP`), to wait for a completion or
    /// flush the CQ overflow backlog (`GETEVENTS`), or to wait for SQ room when the SQ is full
    /// (`SQ_WAIT`). While the SQ thread is awake and nothing needs waiting: no system call.
    fn enter(&mut self, block: bool) -> io::Result<()> {
        self.turns_since_enter = 0;
        self.urgent = false;
        let sqpoll = self.ring.params().is_setup_sqpoll();
        // Completions already posted: reap them rather than wait in the kernel.
        let block = block && self.ring.completion().is_empty();
        loop {
            let want = u32::from(block);
            let (to_submit, flags) = if sqpoll {
                let sq = self.ring.submission();
                let len = sq.len();
                let mut flags = 0;
                // `need_wakeup` orders our tail store before its load of the flags (SeqCst
                // fence), so a thread that went to sleep after missing our SQEs is seen asleep.
                if sq.need_wakeup() {
                    flags |= io_uring::EnterFlags::SQ_WAKEUP.bits();
                }
                if block || sq.cq_overflow() || sq.taskrun() {
                    flags |= IORING_ENTER_GETEVENTS;
                }
                if sq.is_full() {
                    flags |= io_uring::EnterFlags::SQ_WAIT.bits();
                }
                drop(sq);
                // `sqes_submitted` is not counted here: the SQ thread takes SQEs on its own,
                // and the io-uring crate does not expose the SQ head, so what it consumed is
                // not known (it would be: SQEs pushed so far minus `len`).
                if flags == 0 {
                    return Ok(());
                }
                (len as u32, flags)
            } else {
                (self.ring.submission().len() as u32, IORING_ENTER_GETEVENTS)
            };
            self.table.counters.enter_calls += 1;
            let r = self.raw_enter(to_submit, want, flags);
            match r {
                Ok(n) => {
                    if !sqpoll {
                        self.table.counters.sqes_submitted += n as u64;
                    }
                    return Ok(());
                }
                Err(e) => match e.raw_os_error() {
                    // A signal: nothing was lost; the caller's loop comes back.
                    Some(libc::EINTR) => {
                        if block {
                            return Ok(());
                        }
                    }
                    // The CQ backlog is full (-EBUSY) or the kernel is short of memory (-EAGAIN):
                    // reap first, then submit again; unsubmitted SQEs stay queued.
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                        self.table.counters.overflow_events += 1;
                        if self.drain_once() == 0 {
                            // Nothing to reap: let the caller retry on its next turn.
                            return Ok(());
                        }
                    }
                    // Completions were really lost: a hard error for everyone, never a hang.
                    Some(libc::EBADR) => {
                        self.poison();
                        return Err(crate::error::completions_lost());
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// Drains the CQ, and the kernel's overflow backlog behind it (invariant 9).
    fn drain(&mut self) {
        self.drain_once();
        let mut rounds = 0;
        while self.ring.submission().cq_overflow() && rounds < 64 {
            rounds += 1;
            self.table.counters.overflow_events += 1;
            // SAFETY: as in `enter`; this call only flushes the backlog into the CQ.
            let r = unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(0, 0, IORING_ENTER_GETEVENTS, None)
            };
            self.table.counters.enter_calls += 1;
            if let Err(e) = r {
                if e.raw_os_error() == Some(libc::EBADR) {
                    self.poison();
                    return;
                }
            }
            self.drain_once();
        }
        self.table.grant();
    }

    /// Reaps every CQE now in the ring; returns how many.
    fn drain_once(&mut self) -> usize {
        let Uring {
            ring,
            table,
            cancels_in_flight,
            wake_armed,
            wake_fd,
            ..
        } = self;
        let mut n = 0u64;
        for cqe in ring.completion() {
            n += 1;
            let user_data = cqe.user_data();
            let c = Completion {
                res: cqe.result(),
                flags: cqe.flags(),
            };
            if user_data == tag::CANCEL {
                *cancels_in_flight -= 1;
                continue;
            }
            if user_data == tag::WAKE {
                *wake_armed = false;
                drain_eventfd(wake_fd);
                continue;
            }
            if cqueue::more(c.flags) {
                // Not the final CQE of this operation (multishot, zero-copy send).
                table.item(user_data, c);
            } else {
                table.complete(user_data, c);
            }
        }
        table.counters.cqes_reaped += n;
        table.counters.max_cqe_batch = table.counters.max_cqe_batch.max(n);
        n as usize
    }

    /// After `-EBADR`: every waiting operation completes with an error; memory of operations
    /// nobody waits for is leaked (the kernel's view of it is unknown).
    fn poison(&mut self) {
        self.poisoned = true;
        let _ = self.table.fail_all(-libc::EBADR);
        self.cancels.clear();
    }

    // ----- shutdown ---------------------------------------------------------------------------

    /// Cancels everything in flight and reaps until every final CQE arrived, or until the
    /// shutdown timeout, after which the remaining operations' memory is leaked on purpose
    /// (invariant 4). The ring itself is closed when the driver is dropped, after this.
    pub(crate) fn shutdown(&mut self) -> ShutdownReport {
        if self.shut_down {
            return ShutdownReport::default();
        }
        let mut report = ShutdownReport::default();
        let live = self.table.unfinished();
        report.cancelled = live.len();
        for user_data in live {
            if !self.cancels.contains(&user_data) {
                self.cancels.push_back(user_data);
            }
        }
        if self.wake_armed {
            let entry = opcode::PollRemove::new(tag::WAKE)
                .build()
                .user_data(tag::CANCEL);
            if self.push_sqe(&entry) {
                self.cancels_in_flight += 1;
            }
        }
        self.shut_down = true;
        let deadline = Instant::now() + self.shutdown_timeout;
        while !self.poisoned && Instant::now() < deadline {
            let busy = self.table.any_unfinished();
            if !busy && self.cancels_in_flight == 0 && !self.wake_armed {
                break;
            }
            self.flush_cancels();
            let ts = types::Timespec::new().nsec(20_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            self.table.counters.enter_calls += 1;
            let r = if self.ring.params().is_feature_ext_arg() {
                self.ring.submitter().submit_with_args(1, &args).map(drop)
            } else {
                let r = self.ring.submitter().submit().map(drop);
                std::thread::sleep(Duration::from_millis(1));
                r
            };
            if let Err(e) = r {
                if e.raw_os_error() == Some(libc::EBADR) {
                    self.poison();
                }
            }
            self.drain();
        }
        // Whatever did not come back: the kernel may still write it, so it is never freed.
        report.leaked = self.table.leak_ignored();
        report.still_in_flight = self.table.unfinished().len();
        report
    }
}

impl Drop for Uring {
    /// The ring is never closed with operations' memory still owned by the kernel: shut down
    /// (cancel, reap, or leak on purpose) first if the owner did not.
    fn drop(&mut self) {
        let _ = self.shutdown();
        let _ = self.table.leak_ignored();
    }
}

/// What a shutdown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Operations that were in flight and got a cancel.
    pub cancelled: usize,
    /// Operations whose final CQE never came within the timeout: their memory was leaked on
    /// purpose, because the kernel may still write it.
    pub leaked: usize,
    /// Operations whose futures are still alive and whose final CQE did not come (their memory
    /// will be leaked when the futures are dropped).
    pub still_in_flight: usize,
}

/// The opcodes every hoop operation needs, by name.
const NEEDED: &[(u8, &str)] = &[
    (opcode::Nop::CODE, "NOP"),
    (opcode::Read::CODE, "READ"),
    (opcode::Write::CODE, "WRITE"),
    (opcode::Readv::CODE, "READV"),
    (opcode::Writev::CODE, "WRITEV"),
    (opcode::OpenAt::CODE, "OPENAT"),
    (opcode::Close::CODE, "CLOSE"),
    (opcode::Fsync::CODE, "FSYNC"),
    (opcode::Statx::CODE, "STATX"),
    (opcode::Fallocate::CODE, "FALLOCATE"),
    (opcode::UnlinkAt::CODE, "UNLINKAT"),
    (opcode::RenameAt::CODE, "RENAMEAT"),
    (opcode::MkDirAt::CODE, "MKDIRAT"),
    (opcode::Socket::CODE, "SOCKET"),
    (opcode::Connect::CODE, "CONNECT"),
    (opcode::Accept::CODE, "ACCEPT"),
    (opcode::Recv::CODE, "RECV"),
    (opcode::Send::CODE, "SEND"),
    (opcode::SendMsg::CODE, "SENDMSG"),
    (opcode::RecvMsg::CODE, "RECVMSG"),
    (opcode::Shutdown::CODE, "SHUTDOWN"),
    (opcode::Timeout::CODE, "TIMEOUT"),
    (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (opcode::PollAdd::CODE, "POLL_ADD"),
    (opcode::PollRemove::CODE, "POLL_REMOVE"),
];

/// Probes the kernel's opcodes; a ring that lacks one hoop needs (an old kernel, gVisor's
/// partial io_uring) is refused with the missing names, so `Auto` falls back to epoll.
fn probe_opcodes(ring: &IoUring) -> Result<Box<io_uring::Probe>, SetupError> {
    let mut probe = Box::new(io_uring::Probe::new());
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| SetupError::classify(e, 0))?;
    let missing: Vec<&str> = NEEDED
        .iter()
        .filter(|(code, _)| !probe.is_supported(*code))
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        Ok(probe)
    } else {
        Err(SetupError::missing_opcodes(&missing))
    }
}

impl Uring {
    /// `io_uring_enter(2)`: on the registered ring index (with `IORING_ENTER_REGISTERED_RING`)
    /// when the ring fd is registered, else on the ring fd.
    fn raw_enter(&self, to_submit: u32, want: u32, flags: u32) -> io::Result<usize> {
        match &self.registered {
            Some(reg) => {
                let flags = flags | io_uring::EnterFlags::REGISTERED_RING.bits();
                // SAFETY: no argument struct is passed (null, size 0); the index names this
                // ring in this thread's registered-ring table (the driver never leaves the
                // thread that built it); the SQEs pushed point to memory their operations own
                // until the final CQE.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_io_uring_enter,
                        libc::c_long::from(reg.index),
                        libc::c_long::from(to_submit),
                        libc::c_long::from(want),
                        libc::c_long::from(flags),
                        std::ptr::null::<libc::c_void>(),
                        0 as libc::c_long,
                    )
                };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(r as usize)
                }
            }
            // SAFETY: no argument struct is passed; the SQEs pushed point to memory their
            // operations own until the final CQE.
            None => unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(to_submit, want, flags, None)
            },
        }
    }

    /// SQPOLL: whether the SQ thread went to sleep (`IORING_SQ_NEED_WAKEUP`), so the next
    /// submission must wake it with a system call. False without SQPOLL.
    pub(crate) fn sq_thread_asleep(&mut self) -> bool {
        self.ring.params().is_setup_sqpoll() && self.ring.submission().need_wakeup()
    }

    /// Whether `io_uring_enter` goes through a registered ring fd.
    pub(crate) fn ring_fd_registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Every `IORING_FEAT_*` bit hoop knows, by kernel name, and whether this kernel set it.
    pub(crate) fn features(&self) -> Vec<(&'static str, bool)> {
        let bits = feature_bits(self.ring.params());
        FEATURES
            .iter()
            .map(|&(bit, name)| (name, bits & bit != 0))
            .collect()
    }

    /// The names of the opcodes the probe says this kernel supports, in opcode order; opcodes
    /// newer than hoop's table are named `OP_<number>`.
    pub(crate) fn opcodes(&self) -> Vec<&'static str> {
        (0..=u8::MAX)
            .filter(|&op| self.probe.is_supported(op))
            .map(|op| match OPCODES.get(usize::from(op)) {
                Some(name) => *name,
                None => intern(format!("OP_{op}")),
            })
            .collect()
    }

    /// The io-wq worker limits now in force (bounded, unbounded), read with
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS` and zeros (which change nothing).
    pub(crate) fn iowq_max_workers(&self) -> io::Result<(u32, u32)> {
        let mut max = [0u32; 2];
        self.ring.submitter().register_iowq_max_workers(&mut max)?;
        Ok((max[0], max[1]))
    }
}

/// `IORING_FEAT_*` (linux/io_uring.h) by kernel name.
const FEATURES: &[(u32, &str)] = &[
    (1 << 0, "SINGLE_MMAP"),
    (1 << 1, "NODROP"),
    (1 << 2, "SUBMIT_STABLE"),
    (1 << 3, "RW_CUR_POS"),
    (1 << 4, "CUR_PERSONALITY"),
    (1 << 5, "FAST_POLL"),
    (1 << 6, "POLL_32BITS"),
    (1 << 7, "SQPOLL_NONFIXED"),
    (1 << 8, "EXT_ARG"),
    (1 << 9, "NATIVE_WORKERS"),
    (1 << 10, "RSRC_TAGS"),
    (1 << 11, "CQE_SKIP"),
    (1 << 12, "LINKED_FILE"),
    (1 << 13, "REG_REG_RING"),
    (1 << 14, "RECVSEND_BUNDLE"),
    (1 << 15, "MIN_TIMEOUT"),
    (1 << 16, "RW_ATTR"),
    (1 << 17, "NO_IOWAIT"),
];

// `feature_bits` reads inside this size.
const _: () = assert!(std::mem::size_of::<io_uring::Parameters>() == 120);

/// The `features` word the kernel returned from `io_uring_setup`. (`Parameters` has a method
/// per bit, but not a public one for every bit: `REG_REG_RING` and `RW_ATTR` have none.)
fn feature_bits(params: &io_uring::Parameters) -> u32 {
    // SAFETY: `Parameters` is `#[repr(transparent)]` over the kernel's `struct io_uring_params`
    // (documented as such by the io-uring crate; its size is checked above), whose uapi layout
    // starts with six u32s: sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle,
    // features. So `features` is the u32 at offset 20, aligned and initialized.
    unsafe {
        (params as *const io_uring::Parameters)
            .cast::<u32>()
            .add(5)
            .read()
    }
}

/// `IORING_OP_*` (linux/io_uring.h) by number, without the prefix: 0 (`NOP`) to 62 (`PIPE`).
const OPCODES: &[&str] = &[
    "NOP",
    "READV",
    "WRITEV",
    "FSYNC",
    "READ_FIXED",
    "WRITE_FIXED",
    "POLL_ADD",
    "POLL_REMOVE",
    "SYNC_FILE_RANGE",
    "SENDMSG",
    "RECVMSG",
    "TIMEOUT",
    "TIMEOUT_REMOVE",
    "ACCEPT",
    "ASYNC_CANCEL",
    "LINK_TIMEOUT",
    "CONNECT",
    "FALLOCATE",
    "OPENAT",
    "CLOSE",
    "FILES_UPDATE",
    "STATX",
    "READ",
    "WRITE",
    "FADVISE",
    "MADVISE",
    "SEND",
    "RECV",
    "OPENAT2",
    "EPOLL_CTL",
    "SPLICE",
    "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS",
    "TEE",
    "SHUTDOWN",
    "RENAMEAT",
    "UNLINKAT",
    "MKDIRAT",
    "SYMLINKAT",
    "LINKAT",
    "MSG_RING",
    "FSETXATTR",
    "SETXATTR",
    "FGETXATTR",
    "GETXATTR",
    "SOCKET",
    "URING_CMD",
    "SEND_ZC",
    "SENDMSG_ZC",
    "READ_MULTISHOT",
    "WAITID",
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_WAITV",
    "FIXED_FD_INSTALL",
    "FTRUNCATE",
    "BIND",
    "LISTEN",
    "RECV_ZC",
    "EPOLL_WAIT",
    "READV_FIXED",
    "WRITEV_FIXED",
    "PIPE",
];

#[cfg(test)]
mod probe_tests {
    use super::*;

    /// The raw `features` word agrees with every public `Parameters::is_feature_*` method
    /// (which checks the layout `feature_bits` relies on).
    #[test]
    fn feature_bits_match_the_crate() {
        let Ok(ring) = IoUring::new(4) else {
            eprintln!("skip: no io_uring here");
            return;
        };
        let p = ring.params();
        let bits = feature_bits(p);
        let has = |name: &str| {
            let bit = FEATURES.iter().find(|f| f.1 == name).map(|f| f.0).unwrap();
            bits & bit != 0
        };
        assert_eq!(has("SINGLE_MMAP"), p.is_feature_single_mmap());
        assert_eq!(has("NODROP"), p.is_feature_nodrop());
        assert_eq!(has("SUBMIT_STABLE"), p.is_feature_submit_stable());
        assert_eq!(has("RW_CUR_POS"), p.is_feature_rw_cur_pos());
        assert_eq!(has("CUR_PERSONALITY"), p.is_feature_cur_personality());
        assert_eq!(has("FAST_POLL"), p.is_feature_fast_poll());
        assert_eq!(has("POLL_32BITS"), p.is_feature_poll_32bits());
        assert_eq!(has("SQPOLL_NONFIXED"), p.is_feature_sqpoll_nonfixed());
        assert_eq!(has("EXT_ARG"), p.is_feature_ext_arg());
        assert_eq!(has("NATIVE_WORKERS"), p.is_feature_native_workers());
        assert_eq!(has("RSRC_TAGS"), p.is_feature_resource_tagging());
        assert_eq!(has("CQE_SKIP"), p.is_feature_skip_cqe_on_success());
        assert_eq!(has("LINKED_FILE"), p.is_feature_linked_file());
        assert_eq!(has("RECVSEND_BUNDLE"), p.is_feature_recvsend_bundle());
        assert_eq!(has("MIN_TIMEOUT"), p.is_feature_min_timeout());
        assert_eq!(has("NO_IOWAIT"), p.is_feature_no_iowait());
        // The other fields around it are where the layout says.
        // SAFETY: as in `feature_bits`: u32s 0 and 1 are sq_entries and cq_entries.
        let (sq, cqn) = unsafe {
            let base = (p as *const io_uring::Parameters).cast::<u32>();
            (base.read(), base.add(1).read())
        };
        assert_eq!((sq, cqn), (p.sq_entries(), p.cq_entries()));
        // Every kernel with io_uring sets SINGLE_MMAP since 5.4; the word is not all zero.
        assert_ne!(bits, 0);
    }

    #[test]
    fn opcode_names_match_the_crate() {
        assert_eq!(OPCODES.len(), 63);
        assert_eq!(OPCODES[usize::from(opcode::Nop::CODE)], "NOP");
        assert_eq!(OPCODES[usize::from(opcode::Read::CODE)], "READ");
        assert_eq!(
            OPCODES[usize::from(opcode::LinkTimeout::CODE)],
            "LINK_TIMEOUT"
        );
        assert_eq!(OPCODES[usize::from(opcode::SendZc::CODE)], "SEND_ZC");
        assert_eq!(OPCODES[usize::from(opcode::RecvMulti::CODE)], "RECV");
        assert_eq!(OPCODES[usize::from(opcode::Pipe::CODE)], "PIPE");
        assert_eq!(
            OPCODES[usize::from(opcode::ReadMulti::CODE)],
            "READ_MULTISHOT"
        );
        assert_eq!(
            OPCODES[usize::from(opcode::FixedFdInstall::CODE)],
            "FIXED_FD_INSTALL"
        );
        assert_eq!(OPCODES[usize::from(opcode::EpollWait::CODE)], "EPOLL_WAIT");
    }
}

/// One setup attempt: the flags, by kernel name, that `build_ring` asks for.
#[derive(Debug, Clone, Copy, Default)]
struct Attempt {
    sqpoll: bool,
    sq_aff: bool,
    iopoll: bool,
    single_issuer_defer: bool,
    coop_taskrun: bool,
    submit_all: bool,
}

impl Attempt {
    /// The accepted flags as `Driver::setup_flags` names them, e.g. `"SQPOLL|SUBMIT_ALL|CQSIZE"`.
    fn name(&self) -> &'static str {
        let mut names = Vec::new();
        let flags = [
            (self.sqpoll, "SQPOLL"),
            (self.sq_aff, "SQ_AFF"),
            (self.iopoll, "IOPOLL"),
            (self.single_issuer_defer, "SINGLE_ISSUER|DEFER_TASKRUN"),
            (self.coop_taskrun, "COOP_TASKRUN|TASKRUN_FLAG"),
            (self.submit_all, "SUBMIT_ALL"),
            (true, "CQSIZE"),
        ];
        for (on, name) in flags {
            if on {
                names.push(name);
            }
        }
        intern(names.join("|"))
    }
}

/// Sets up a ring, retrying with fewer flags on EINVAL.
///
/// Without SQPOLL: `SINGLE_ISSUER | DEFER_TASKRUN` (not with IOPOLL), then `COOP_TASKRUN |
/// TASKRUN_FLAG`, then plain (the taskrun flags only if `cfg.taskrun_flags`). With SQPOLL
/// (`cfg.sqpoll_idle`): `SQPOLL [| SQ_AFF]` first, without the taskrun flags (the kernel refuses
/// DEFER_TASKRUN, COOP_TASKRUN and TASKRUN_FLAG with SQPOLL), then without `SQ_AFF` (a CPU it
/// refuses), then without SQPOLL, also when SQPOLL is refused with EPERM (kernels before 5.13
/// reserve it to privileged users). Always `SUBMIT_ALL` where the kernel takes it, a CQ of `cq`
/// entries, and `IOPOLL` in every attempt if `cfg.iopoll`.
fn build_ring(entries: u32, cq: u32, cfg: &Config) -> Result<(IoUring, &'static str), SetupError> {
    let base = Attempt {
        iopoll: cfg.iopoll,
        ..Attempt::default()
    };
    let mut attempts = Vec::new();
    if cfg.sqpoll_idle.is_some() {
        let sqpoll = Attempt {
            sqpoll: true,
            ..base
        };
        let mut with = vec![sqpoll];
        if cfg.sqpoll_cpu.is_some() {
            with.insert(
                0,
                Attempt {
                    sq_aff: true,
                    ..sqpoll
                },
            );
        }
        for a in with {
            attempts.push(Attempt {
                submit_all: true,
                ..a
            });
            attempts.push(a);
        }
    }
    if cfg.taskrun_flags {
        // Not with IOPOLL: on Linux 6.18 an IOPOLL ring with DEFER_TASKRUN never completed a
        // polled O_DIRECT read while another request failed on every enter (the runtime's
        // wake-up poll, which IOPOLL rings refuse with EINVAL); with COOP_TASKRUN it does.
        if !cfg.iopoll {
            attempts.push(Attempt {
                single_issuer_defer: true,
                submit_all: true,
                ..base
            });
        }
        attempts.push(Attempt {
            coop_taskrun: true,
            submit_all: true,
            ..base
        });
    }
    attempts.push(Attempt {
        submit_all: true,
        ..base
    });
    attempts.push(base);

    let idle_ms = cfg.sqpoll_idle.map_or(0, |d| {
        u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1)
    });
    let mut last = None;
    for a in attempts {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq).setup_clamp();
        if a.sqpoll {
            b.setup_sqpoll(idle_ms);
        }
        if let (true, Some(cpu)) = (a.sq_aff, cfg.sqpoll_cpu) {
            b.setup_sqpoll_cpu(cpu);
        }
        if a.iopoll {
            b.setup_iopoll();
        }
        if a.single_issuer_defer {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        if a.coop_taskrun {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }
        if a.submit_all {
            b.setup_submit_all();
        }
        match b.build(entries) {
            Ok(ring) => return Ok((ring, a.name())),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) if a.sqpoll && e.raw_os_error() == Some(libc::EPERM) => last = Some(e),
            Err(e) => return Err(SetupError::classify(e, entries)),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL));
    Err(SetupError::classify(e, entries))
}

/// A `&'static str` equal to `s`, leaked once per distinct value (setup flag combinations and
/// opcode numbers: a few dozen at most).
fn intern(s: String) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(name) = names.iter().find(|n| **n == s) {
        return name;
    }
    let name: &'static str = Box::leak(s.into_boxed_str());
    names.push(name);
    name
}

/// `IORING_REGISTER_RING_FDS` and `IORING_UNREGISTER_RING_FDS` (linux/io_uring.h).
const IORING_REGISTER_RING_FDS: libc::c_long = 20;
const IORING_UNREGISTER_RING_FDS: libc::c_long = 21;

/// `struct io_uring_rsrc_update` (linux/io_uring.h).
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// The ring's fd in this thread's table of registered rings (`IORING_REGISTER_RING_FDS`, 5.18):
/// `io_uring_enter` on the index with `IORING_ENTER_REGISTERED_RING` skips the fd lookup.
///
/// The registration holds a reference to the ring, so it must be undone for the ring to be
/// freed: `Drop` unregisters it through a duplicate of the ring fd (the ring's own fd may
/// already be closed by then, as `Uring` drops its fields in order).
struct RegisteredRing {
    index: u32,
    /// A duplicate of the ring fd, to unregister with.
    fd: OwnedFd,
    /// The table is per thread: only this thread may use or unregister the index.
    thread: std::thread::ThreadId,
}

impl RegisteredRing {
    fn register(ring: &IoUring) -> io::Result<RegisteredRing> {
        // SAFETY: the ring's fd is open for as long as `ring` is borrowed, which covers the
        // borrow (it only lives for the `dup`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(ring.as_raw_fd()) }
            .try_clone_to_owned()?;
        let mut up = RsrcUpdate {
            offset: u32::MAX,
            resv: 0,
            data: ring.as_raw_fd() as u64,
        };
        // SAFETY: io_uring_register(2) reads and writes one io_uring_rsrc_update, a local of
        // that layout that outlives the call; offset u32::MAX asks the kernel to pick the index.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd() as libc::c_long,
                IORING_REGISTER_RING_FDS,
                &mut up as *mut RsrcUpdate,
                1 as libc::c_long,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RegisteredRing {
            index: up.offset,
            fd,
            thread: std::thread::current().id(),
        })
    }
}

impl Drop for RegisteredRing {
    fn drop(&mut self) {
        if std::thread::current().id() != self.thread {
            // Another thread's table: the index is not ours there. (The Driver is not Send,
            // so this does not happen; the thread's exit releases the registration.)
            return;
        }
        let mut up = RsrcUpdate {
            offset: self.index,
            resv: 0,
            data: 0,
        };
        // SAFETY: as in `register`: one io_uring_rsrc_update, a local that outlives the call.
        let _ = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                self.fd.as_raw_fd() as libc::c_long,
                IORING_UNREGISTER_RING_FDS,
                &mut up as *mut RsrcUpdate,
                1 as libc::c_long,
            )
        };
    }
}

/// Reads (and so resets) an eventfd's counter.
pub(crate) fn drain_eventfd(fd: &OwnedFd) {
    let mut buf = 0u64;
    // SAFETY: reads 8 bytes into a local u64 from an eventfd we own.
    let _ = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut buf as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
}
