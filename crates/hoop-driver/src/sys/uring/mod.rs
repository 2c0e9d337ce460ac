//! The io_uring driver: one ring per runtime thread.
//!
//! SQEs are queued without a syscall and submitted in one `io_uring_enter` when the runtime runs
//! out of ready tasks (or the SQ fills); every ready CQE is drained in one batch, and the wakers
//! and orphaned results collected in the drain are handed back to the caller, who runs them after
//! releasing the driver (invariant 11).

mod build;
mod chain;
mod op;
mod probe;
mod regring;
mod sqe;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue::Entry, types, IoUring};

use self::build::build_ring;
pub use self::op::UringOp;
use self::probe::probe_opcodes;
use self::regring::RegisteredRing;
use crate::config::Config;
use crate::fault::{Faults, Kind as Fault};
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::{Orphan, StreamOrphan};
use crate::setup::SetupError;
use crate::slots::tag;
use crate::table::{Dropped, OpTable};

/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h): wait for or collect completions, and run deferred
/// task work.
const IORING_ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_EXT_ARG` (linux/io_uring.h, 5.11): the argument is an `io_uring_getevents_arg`.
const IORING_ENTER_EXT_ARG: u32 = 8;

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `struct io_uring_getevents_arg` (linux/io_uring.h).
#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

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
    /// How long a blocking wait of this turn may last (the runtime's next timer).
    wait: Option<Duration>,
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
    /// SQEs pushed whose final CQE has not been drained yet (the wake-up poll and cancels
    /// included): whether a completion can still come, for a shared ring's reaper.
    awaiting_cqes: usize,
    /// The last enter left SQEs in the SQ (see `enter`).
    refused: bool,
    /// The provided buffer rings registered with this ring (their buffer id ranges, and the
    /// books of the incremental ones, whose CQEs are settled as they are reaped).
    pub(crate) buf_rings: Vec<crate::bufring::Tracked>,
    /// Fault injection (nothing without the `fault-injection` feature).
    faults: Faults,
    /// Completions held back by fault injection (and injected ones), delivered on the next
    /// drain, after the CQEs that came before it.
    held: Vec<Held>,
    /// A linked chain sits in the SQ: an injected short submit must not cut it (the kernel
    /// would run its head alone).
    chain_queued: bool,
    /// Depth sampling (`Config::sample_depth`): when the depth last changed, and to what.
    depth_clock: Option<Box<DepthClock>>,
    /// A file read or write was queued since the last `io_uring_enter`.
    storage_queued: bool,
    /// The last turn waited and left operations in the kernel: `flush_early` submits.
    early: bool,
}

/// The state of depth sampling: the depth since `since`.
#[derive(Default)]
struct DepthClock {
    since: Option<std::time::Instant>,
    depth: usize,
}

/// A completion held back (or made up) by fault injection.
struct Held {
    user_data: u64,
    c: Completion,
    /// Made up at push: no SQE went to the kernel, so no CQE is owed for it.
    injected: bool,
}

impl Uring {
    pub(crate) fn new(cfg: &Config) -> Result<Uring, SetupError> {
        let mut faults = Faults::new();
        let entries = cfg.entries.max(1);
        if faults.fire(Fault::Setup) {
            let errno =
                [libc::ENOSYS, libc::EPERM, libc::ENOMEM, libc::EINVAL][faults.below(4) as usize];
            return Err(SetupError::classify(
                io::Error::from_raw_os_error(errno),
                entries,
            ));
        }
        let cq = cfg
            .cq_entries
            .unwrap_or_else(|| crate::config::default_cq_entries(entries))
            .max(entries.saturating_mul(2));
        // Injected: a CQ of twice the SQ (at most 16 entries) while the in-flight cap stays
        // what the asked-for CQ allows, so the CQ overflows under load.
        let tiny_cq = faults.fire(Fault::CqOverflow);
        let (ring, setup_flags) = if tiny_cq {
            let sq = entries.min(8);
            build_ring(sq, sq * 2, cfg)?
        } else {
            build_ring(entries, cq, cfg)?
        };
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
        let cq_cap = if tiny_cq {
            cq.next_power_of_two() as usize
        } else {
            cq_real
        };
        let capacity = match cfg.max_in_flight {
            Some(n) => n as usize,
            None => crate::config::cap_for_cq(cq_cap),
        };
        // SAFETY: eventfd has no memory-safety preconditions.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let efd = crate::error::cvt_libc(efd).map_err(|e| SetupError::classify(e, entries))?;
        Ok(Uring {
            ring,
            probe,
            table: OpTable::new(capacity, crate::config::uncapped_slots()),
            cancels: VecDeque::new(),
            cancels_in_flight: 0,
            cancel_budget,
            // SAFETY: eventfd returned a new fd that nothing else owns.
            wake_fd: Arc::new(unsafe { OwnedFd::from_raw_fd(efd) }),
            wake_armed: false,
            wait: None,
            turns_since_enter: 0,
            urgent: false,
            poisoned: false,
            shut_down: false,
            shutdown_timeout: cfg.shutdown_timeout,
            setup_flags,
            registered,
            fixed_files: None,
            awaiting_cqes: 0,
            refused: false,
            buf_rings: Vec::new(),
            faults,
            held: Vec::new(),
            chain_queued: false,
            depth_clock: cfg.sample_depth.then(Box::default),
            storage_queued: false,
            early: false,
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
        self.table.has_ready() || !self.held.is_empty()
    }

    // ----- pushing --------------------------------------------------------------------------

    /// Pushes an operation's SQE into a new slot. `granted` says the caller holds a grant from
    /// the room FIFO (it may then pass waiters that came before others).
    #[inline]
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
        if !self.table.may_push(granted, state.counts_against_cap()) {
            return Err(PushError::NoRoom);
        }
        let Some(user_data) = self.table.slots.insert(state) else {
            return Err(PushError::NoRoom);
        };
        let mut entry = entry.user_data(user_data);
        if self.faults.active() && self.fault_injected_at_push(&mut entry, user_data) {
            return Ok(user_data);
        }
        if !self.push_sqe(&entry) {
            let _ = self.table.slots.remove(user_data);
            return Err(PushError::NoRoom);
        }
        self.storage_queued |= is_storage_io(entry.get_opcode() as u8);
        Ok(user_data)
    }

    /// Fault injection at push (out of line: never on a plain build's path): whether a made-up
    /// completion replaced the SQE.
    #[cold]
    #[inline(never)]
    fn fault_injected_at_push(&mut self, entry: &mut Entry, user_data: u64) -> bool {
        match self.fault_at_push(entry) {
            Some(res) => {
                self.held.push(Held {
                    user_data,
                    c: Completion { res, flags: 0 },
                    injected: true,
                });
                true
            }
            None => false,
        }
    }

    /// Puts one SQE in the SQ, submitting what is queued first if the SQ is full.
    #[inline(always)]
    fn push_sqe(&mut self, entry: &Entry) -> bool {
        let mut sq = self.ring.submission();
        if sq.is_full() {
            drop(sq);
            self.submit_full_sq();
            sq = self.ring.submission();
        }
        // SAFETY: every pointer in the entry points into memory owned by the operation's data,
        // which the slot or the future keeps alive until the final CQE (UringOp's contract).
        let pushed = unsafe { sq.push(entry).is_ok() };
        drop(sq);
        self.awaiting_cqes += usize::from(pushed);
        pushed
    }

    /// The SQ filled up: submit now rather than wait for the end of the tick.
    #[cold]
    #[inline(never)]
    fn submit_full_sq(&mut self) {
        let _ = self.enter(false);
    }

    /// Puts `entries` in the SQ together, submitting what is queued first if the SQ lacks room
    /// for all of them. The SQ tail is published once, after the last entry (when the
    /// `SubmissionQueue` handle drops), so the kernel — an SQPOLL thread included — sees all
    /// of them or none: a chain is never split (rule 16). One borrow of the SQ when there is
    /// room (each borrow reads the kernel's head).
    #[inline]
    pub(crate) fn push_sqes(&mut self, entries: &[Entry]) -> bool {
        let mut sq = self.ring.submission();
        if sq.capacity() - sq.len() < entries.len() {
            drop(sq);
            // The SQ filled up: submit now rather than wait for the end of the tick.
            let _ = self.enter(false);
            sq = self.ring.submission();
        }
        // SAFETY: every pointer in the entries points into memory owned by the operations'
        // data, which the slots or the futures keep alive until the final CQE (UringOp's
        // contract).
        let pushed = unsafe { sq.push_multiple(entries).is_ok() };
        drop(sq);
        if pushed {
            self.awaiting_cqes += entries.len();
            self.chain_queued |= entries.len() > 1;
        }
        pushed
    }

    /// The ring's fd (for a shared ring's reaper, which waits outside the ring's lock).
    pub(crate) fn ring_fd(&self) -> std::os::fd::RawFd {
        self.ring.as_raw_fd()
    }

    /// Submitted operations (and cancels) the kernel still owes a final CQE, not counting the
    /// wake-up poll nor SQEs still queued in the SQ (unless an SQPOLL thread takes those by
    /// itself): 0 means no completion can come until more is submitted.
    pub(crate) fn owed_cqes(&mut self) -> usize {
        // With SQPOLL the kernel's SQ thread takes queued SQEs by itself: they are owed too.
        let queued = if self.ring.params().is_setup_sqpoll() {
            0
        } else {
            self.ring.submission().len()
        };
        let injected = self.held.iter().filter(|h| h.injected).count();
        self.awaiting_cqes
            .saturating_sub(usize::from(self.wake_armed))
            .saturating_sub(queued)
            + injected
    }

    /// Whether a shared ring's reaper has work it must not sleep on: completions fault
    /// injection held back, or SQEs left in the SQ by a submit that took fewer than queued
    /// (`EAGAIN`/`EBUSY` from the kernel, a short submit) which no future may come back to
    /// submit.
    pub(crate) fn has_unsent(&mut self) -> bool {
        !self.held.is_empty() || (self.refused && !self.ring.submission().is_empty())
    }

    /// Submits what is queued (cancels included) if anything is, and drains every CQE; wakers
    /// and orphans land in the table's lists. A shared ring's callers use this instead of
    /// `turn`: they never block inside the ring's lock. A shared ring has no registered file
    /// table and no wake-up poll (its reaper is woken through a condvar and its own CQ wait), so
    /// neither is touched here.
    pub(crate) fn submit_and_reap(&mut self) -> io::Result<()> {
        self.flush_cancels();
        if self.urgent || !self.ring.submission().is_empty() || self.ring.submission().cq_overflow()
        {
            self.enter(false)?;
        }
        self.drain();
        Ok(())
    }

    /// Submits what is queued (cancels included) without draining the CQ: for a caller that
    /// must not wake tasks where it stands (tokio's park hook, whose wakes would go to another
    /// worker); what completes is reaped by whoever waits on the ring fd.
    pub(crate) fn submit_only(&mut self) -> io::Result<()> {
        self.flush_cancels();
        if self.urgent || !self.ring.submission().is_empty() {
            self.enter(false)?;
        }
        Ok(())
    }

    /// Submits every queued SQE; with SQPOLL, waits (yielding, bounded) until the SQ thread
    /// took them all. Used before an fd or a fixed slot leaves hoop (rule 17).
    pub(crate) fn submit_queued(&mut self) {
        if self.ring.submission().is_empty() {
            return;
        }
        let _ = self.enter(false);
        // A submit may take fewer SQEs than queued (the kernel short of memory, or an injected
        // fault): enter again until the SQ is empty (bounded: a kernel that keeps refusing
        // leaves the rest for the next turn).
        for _ in 0..64 {
            if self.ring.params().is_setup_sqpoll() || self.ring.submission().is_empty() {
                break;
            }
            let _ = self.enter(false);
        }
        if self.ring.params().is_setup_sqpoll() {
            for _ in 0..100_000 {
                if self.ring.submission().is_empty() {
                    break;
                }
                if self.ring.submission().need_wakeup() {
                    let _ = self.enter(false);
                }
                std::thread::yield_now();
            }
        }
    }

    /// Submits the queued SQEs now, before the tasks still ready in this batch run, when that
    /// gets file I/O to its device sooner at a cost nobody feels: a file read or write is
    /// queued, the last `io_uring_enter` had to wait for a completion, and operations are still
    /// in the kernel (a device at work; the thread idles between its completions). A device
    /// kept at depth then gets each resubmission at once, as fio's one-at-a-time submits do,
    /// rather than after every woken task ran: on a virtio disk at QD 32 that was the
    /// difference between 0.8x and 1.0x of fio's IOPS. A busy loop (completions already there
    /// when it turned), buffered reads that completed inside the submit (nothing left in the
    /// kernel), sockets and no-ops keep one submit per batch.
    #[inline]
    pub(crate) fn flush_early(&mut self) {
        if self.early && self.storage_queued {
            let _ = self.enter(false);
        }
    }

    /// Whether the last turn left the ring waiting on a device (see [`Uring::flush_early`]).
    #[inline]
    pub(crate) fn early_armed(&self) -> bool {
        self.early
    }

    /// SQEs in the SQ not yet taken by the kernel.
    #[cfg(test)]
    pub(crate) fn queued_sqes(&mut self) -> usize {
        self.ring.submission().len()
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

    /// Asks the kernel to end the operation of slot `user_data`, whose future or stream still
    /// waits for what it brings (a stream that takes the items already on their way and then
    /// ends).
    pub(crate) fn request_cancel(&mut self, user_data: u64) {
        if !self.shut_down {
            self.cancels.push_back(user_data);
            self.urgent = true;
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
    /// ready already) for at most `wait` (the runtime's next timer), drain every CQE. Wakers and
    /// orphans land in `wakeups` and `orphans`.
    pub(crate) fn turn(&mut self, block: bool, wait: Option<Duration>) -> io::Result<()> {
        crate::fixedfile::flush_slot_closes(self);
        self.flush_cancels();
        self.arm_wake();
        // (`has_ready` includes completions held back by fault injection: never sleep on them.)
        let mut block = block && !self.has_ready();
        if let Some(w) = wait {
            // The wait is bounded by `IORING_ENTER_EXT_ARG` (5.11, as old as the SHUTDOWN
            // opcode hoop requires). An IOPOLL ring polls rather than waits.
            if w.is_zero() || !self.ring.params().is_feature_ext_arg() || self.is_iopoll() {
                block = false;
            }
        }
        self.wait = wait;
        self.turns_since_enter += 1;
        // Queued SQEs wait until the runtime runs out of ready tasks (`block`), so one enter
        // submits them all; every 16th busy turn enters anyway, so a task that keeps yielding
        // cannot hold back submissions and completions. (A full SQ is submitted at once by
        // `push_sqe`.)
        let waited = if block
            || self.urgent
            || self.turns_since_enter >= 16
            || self.ring.submission().taskrun()
        {
            self.enter(block)?
        } else {
            false
        };
        self.drain();
        // This turn waited and left operations in the kernel: a ring waiting on a device, so
        // file I/O queued in the coming batch goes early (`flush_early`).
        self.early = waited && self.owed_cqes().saturating_sub(self.cancels_in_flight) > 0;
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
    /// Returns whether it was asked to wait (no completion was there when it began).
    fn enter(&mut self, block: bool) -> io::Result<bool> {
        let r = self.enter_inner(block);
        // SQEs still queued after an enter were refused (EAGAIN/EBUSY, a short submit, an
        // error): a shared ring's reaper must submit them (`has_unsent`).
        self.refused = !self.ring.params().is_setup_sqpoll() && !self.ring.submission().is_empty();
        r
    }

    fn enter_inner(&mut self, block: bool) -> io::Result<bool> {
        self.turns_since_enter = 0;
        self.urgent = false;
        self.storage_queued = false;
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
                    return Ok(block);
                }
                (len as u32, flags)
            } else {
                (self.ring.submission().len() as u32, IORING_ENTER_GETEVENTS)
            };
            self.table.counters.enter_calls += 1;
            let wait = if block { self.wait } else { None };
            // The SQEs of this call are in the kernel from here on (SQPOLL's already were).
            self.sample_depth(true);
            let r = match self.fault_at_enter(sqpoll, to_submit) {
                Some(Err(e)) => Err(e),
                // A short submit: the kernel does not wait after taking fewer SQEs than asked.
                Some(Ok(fewer)) => self.raw_enter(fewer, 0, flags, None),
                None => self.raw_enter(to_submit, want, flags, wait),
            };
            match r {
                Ok(n) => {
                    if !sqpoll {
                        self.table.counters.sqes_submitted += n as u64;
                    }
                    if self.chain_queued && self.ring.submission().is_empty() {
                        self.chain_queued = false;
                    }
                    return Ok(block);
                }
                Err(e) => match e.raw_os_error() {
                    // A signal: nothing was lost; the caller's loop comes back.
                    Some(libc::EINTR) => {
                        if block {
                            return Ok(block);
                        }
                    }
                    // The CQ backlog is full (-EBUSY) or the kernel is short of memory (-EAGAIN):
                    // reap first, then submit again; unsubmitted SQEs stay queued.
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                        self.table.counters.overflow_events += 1;
                        if self.drain_once() == 0 {
                            // Nothing to reap: let the caller retry on its next turn.
                            return Ok(false);
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
        self.sample_depth(false);
        self.table.grant();
    }

    /// With depth sampling on: adds the depth since the last sample, times the time since then,
    /// to the counters, and starts a new interval at the current depth (operations submitted
    /// and not reaped, cancels left out), with the queued SQEs when `submitting` (an enter
    /// is about to submit them).
    fn sample_depth(&mut self, submitting: bool) {
        if self.depth_clock.is_none() {
            return;
        }
        let depth = if submitting {
            // Everything pushed and not reaped, the queued SQEs included (the wake-up poll's
            // may be one of them: it is left out once, not once as armed and once as queued).
            let injected = self.held.iter().filter(|h| h.injected).count();
            (self.awaiting_cqes + injected)
                .saturating_sub(usize::from(self.wake_armed) + self.cancels_in_flight)
        } else {
            self.owed_cqes().saturating_sub(self.cancels_in_flight)
        };
        let now = std::time::Instant::now();
        let counters = &mut self.table.counters;
        if let Some(clock) = self.depth_clock.as_mut() {
            if let Some(since) = clock.since {
                let ns = now.saturating_duration_since(since).as_nanos();
                counters.depth_ns += clock.depth as u128 * ns;
                counters.depth_sampled_ns += u64::try_from(ns).unwrap_or(u64::MAX);
            }
            **clock = DepthClock {
                since: Some(now),
                depth,
            };
        }
    }

    /// Reaps every CQE now in the ring; returns how many. Completions fault injection held
    /// back on the previous drain come first (they are older), then the ring's, of which
    /// injection may hold some back until the next drain.
    fn drain_once(&mut self) -> usize {
        let released = if self.held.is_empty() {
            Vec::new()
        } else {
            self.release_held()
        };
        let may_hold = self.faults.active() && !self.poisoned && !self.shut_down;
        let Uring {
            ring,
            table,
            cancels_in_flight,
            wake_armed,
            wake_fd,
            awaiting_cqes,
            faults,
            held,
            buf_rings,
            ..
        } = self;
        let mut reaper = Reaper {
            table,
            cancels_in_flight,
            wake_armed,
            wake_fd,
            awaiting_cqes,
        };
        let mut n = 0u64;
        for h in released {
            n += 1;
            reaper.deliver(h.user_data, h.c, !h.injected);
        }
        for cqe in ring.completion() {
            n += 1;
            let user_data = cqe.user_data();
            let mut c = Completion {
                res: cqe.result(),
                flags: cqe.flags(),
            };
            // An incremental ring's CQE is settled now, in the order the kernel consumed its
            // buffers (before any fault holds it back: tasks see CQEs in another order).
            if c.flags & crate::bufring::F_BUFFER != 0 && !buf_rings.is_empty() {
                c.flags = crate::bufring::on_cqe(buf_rings, c.res, c.flags);
            }
            if may_hold && !tag::is_tag(user_data) {
                // Hold it back (and every later CQE of the same operation, to keep their
                // order): delivered on the next drain, after CQEs that came after it.
                if held.iter().any(|h| h.user_data == user_data) || faults.fire(Fault::Late) {
                    n -= 1;
                    held.push(Held {
                        user_data,
                        c,
                        injected: false,
                    });
                    continue;
                }
            }
            reaper.deliver(user_data, c, true);
        }
        table.counters.cqes_reaped += n;
        table.counters.max_cqe_batch = table.counters.max_cqe_batch.max(n);
        n as usize
    }

    /// Takes the held completions in a random order of operations, each operation's own in
    /// the order they came.
    fn release_held(&mut self) -> Vec<Held> {
        let mut held = std::mem::take(&mut self.held);
        let mut keys: Vec<(u64, u64)> = Vec::new();
        for h in &held {
            if !keys.iter().any(|k| k.0 == h.user_data) {
                keys.push((h.user_data, self.faults.below(u64::MAX)));
            }
        }
        let key = |ud: u64| keys.iter().find(|k| k.0 == ud).map_or(0, |k| k.1);
        // A stable sort: one operation's completions keep their order.
        held.sort_by_key(|h| key(h.user_data));
        held
    }

    /// Fault injection at push: shortens a read or write (the SQE's `len`), or makes the
    /// operation's result up (`ECANCELED`, `ENOBUFS`, `ECONNRESET`) without submitting it.
    /// Closes, cancels and anything that frees a resource are never touched.
    fn fault_at_push(&mut self, entry: &mut Entry) -> Option<i32> {
        let op = entry.get_opcode() as u8;
        let (flags, len) = sqe::flags_and_len(entry);
        let buffer_select = flags & sqe::IOSQE_BUFFER_SELECT != 0;
        let socket_io = [
            opcode::Recv::CODE,
            opcode::Send::CODE,
            opcode::RecvMsg::CODE,
            opcode::SendMsg::CODE,
        ]
        .contains(&op);
        let plain_io = [
            opcode::Read::CODE,
            opcode::Write::CODE,
            opcode::ReadFixed::CODE,
            opcode::WriteFixed::CODE,
            opcode::Recv::CODE,
            opcode::Send::CODE,
        ]
        .contains(&op);
        let may_cancel = socket_io
            || plain_io
            || [
                opcode::Readv::CODE,
                opcode::Writev::CODE,
                opcode::Accept::CODE,
                opcode::Connect::CODE,
                opcode::OpenAt::CODE,
                opcode::Statx::CODE,
            ]
            .contains(&op);
        if buffer_select && self.faults.fire(Fault::Enobufs) {
            return Some(-libc::ENOBUFS);
        }
        if socket_io && self.faults.fire(Fault::Econnreset) {
            return Some(-libc::ECONNRESET);
        }
        if may_cancel && self.faults.fire(Fault::Ecanceled) {
            return Some(-libc::ECANCELED);
        }
        // Reads of fewer than 512 bytes are left whole: an eventfd or signalfd read must ask
        // for whole records. Nor is a datagram cut short: the kernel sends one whole or not
        // at all, and a shorter receive would truncate it (a registered file's type is not
        // known here, and it counts as a stream).
        let message =
            || flags & sqe::IOSQE_FIXED_FILE == 0 && crate::sys::is_message_socket(sqe::fd(entry));
        if plain_io
            && !buffer_select
            && len >= 512
            && !message()
            && self.faults.fire(Fault::ShortIo)
        {
            if let Some(shorter) = self.faults.shorten(len) {
                sqe::set_len(entry, shorter);
            }
        }
        // A multishot receive from a buffer ring (len 0: as much as a buffer, or a bundle,
        // holds) is capped per receive instead, where the kernel takes a cap (6.17: before, a
        // length on it is refused): its receives, and its bundles, end mid-message more often.
        // The kernel enforces the cap, so the bytes stay whole.
        if op == opcode::Recv::CODE
            && buffer_select
            && len == 0
            && crate::setup::kernel_at_least(6, 17)
            && (flags & sqe::IOSQE_FIXED_FILE != 0
                || !crate::sys::is_message_socket(sqe::fd(entry)))
            && self.faults.fire(Fault::ShortIo)
        {
            sqe::set_len(entry, 1 + self.faults.below(3000) as u32);
        }
        None
    }

    /// Fault injection at a send made inline, outside the ring (`Driver::try_send`), drawn as
    /// for a ring send: `Err(errno)` instead of the call (`EAGAIN`: no room, `ECONNRESET`),
    /// or the most bytes the call may send (`len`, or fewer for a short send).
    pub(crate) fn fault_at_inline_send(&mut self, len: usize) -> Result<usize, i32> {
        if !self.faults.active() {
            return Ok(len);
        }
        if self.faults.fire(Fault::Eagain) {
            return Err(libc::EAGAIN);
        }
        if self.faults.fire(Fault::Econnreset) {
            return Err(libc::ECONNRESET);
        }
        if len >= 512 && self.faults.fire(Fault::ShortIo) {
            let len32 = u32::try_from(len).unwrap_or(u32::MAX);
            if let Some(shorter) = self.faults.shorten(len32) {
                return Ok(shorter as usize);
            }
        }
        Ok(len)
    }

    /// Fault injection at `io_uring_enter`: an error instead of the call (`EAGAIN`, `EBUSY`,
    /// `EINTR`: nothing submitted), or a smaller `to_submit` (a short submit).
    fn fault_at_enter(&mut self, sqpoll: bool, to_submit: u32) -> Option<io::Result<u32>> {
        if !self.faults.active() {
            return None;
        }
        for (kind, errno) in [
            (Fault::Eagain, libc::EAGAIN),
            (Fault::Ebusy, libc::EBUSY),
            (Fault::Eintr, libc::EINTR),
        ] {
            if self.faults.fire(kind) {
                return Some(Err(io::Error::from_raw_os_error(errno)));
            }
        }
        if !sqpoll && !self.chain_queued && to_submit > 1 && self.faults.fire(Fault::ShortSubmit) {
            return Some(Ok(self.faults.below(u64::from(to_submit)) as u32));
        }
        None
    }

    /// After `-EBADR` (completions lost): the driver takes no new operation, and no memory
    /// the kernel may still use is handed back (rules 1, 19).
    ///
    /// First a synchronous cancel of every request (`IORING_REGISTER_SYNC_CANCEL` with
    /// `IORING_ASYNC_CANCEL_ANY`, 6.0): once it returns, the kernel holds no request, so an
    /// operation without its final CQE lost it, and its memory is free. Every waiting future
    /// then completes with `EBADR` and gets its buffer back, and dropped operations are
    /// finished as orphans (their fds closed, buffers freed). Where that cancel is missing or
    /// fails, a cancel is queued for every operation instead and the futures keep waiting for
    /// their final CQE (which gives their buffer back); one whose CQE was lost waits until
    /// dropped, and its memory is then leaked, never freed.
    pub(crate) fn poison(&mut self) {
        if self.poisoned {
            return;
        }
        self.poisoned = true;
        // SQEs still queued in the SQ would reach the kernel at the next `io_uring_enter`,
        // after their operations' memory was handed back below: submit them first, so that
        // the synchronous cancel covers them too. If any stay queued, the quiet path is not
        // safe (found by tests/teardown.rs: heap corruption under ASan and glibc).
        self.submit_queued();
        let ts = types::Timespec::new().sec(1);
        let barrier = self
            .ring
            .submitter()
            .register_sync_cancel(Some(ts), types::CancelBuilder::any());
        let queued = !self.ring.params().is_setup_sqpoll() && !self.ring.submission().is_empty();
        let quiet = !queued
            && match barrier {
                Ok(()) => true,
                Err(e) => e.raw_os_error() == Some(libc::ENOENT),
            };
        self.drain_once();
        self.table.release_all_waiters();
        if quiet {
            self.cancels.clear();
            // The kernel holds no request any more: no CQE can come.
            self.awaiting_cqes = 0;
            self.wake_armed = false;
            self.table.fail_all(-libc::EBADR);
        } else {
            let _ = self.table.leak_ignored();
            for user_data in self.table.unfinished() {
                if !self.cancels.contains(&user_data) {
                    self.cancels.push_back(user_data);
                }
            }
            self.urgent = true;
        }
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

/// Where a drained completion goes: the borrowed parts of the driver that `drain_once` hands
/// each CQE to (the ring itself stays borrowed by the CQ iterator).
struct Reaper<'a> {
    table: &'a mut OpTable,
    cancels_in_flight: &'a mut usize,
    wake_armed: &'a mut bool,
    wake_fd: &'a Arc<OwnedFd>,
    awaiting_cqes: &'a mut usize,
}

impl Reaper<'_> {
    /// Hands one completion to its owner. `from_kernel` is false for a completion fault
    /// injection made up (no CQE was owed for it).
    #[inline(always)]
    fn deliver(&mut self, user_data: u64, c: Completion, from_kernel: bool) {
        // The common case first: the final CQE of an operation's slot.
        if !tag::is_tag(user_data) && !cqueue::more(c.flags) {
            if from_kernel {
                *self.awaiting_cqes = self.awaiting_cqes.saturating_sub(1);
            }
            self.table.complete(user_data, c);
            return;
        }
        if user_data == tag::MSG_WAKE {
            // A wake-up posted from another thread (msg_ring.rs), for no SQE of this ring:
            // its arrival was the point.
            return;
        }
        if from_kernel && !cqueue::more(c.flags) {
            *self.awaiting_cqes = self.awaiting_cqes.saturating_sub(1);
        }
        if user_data == tag::CANCEL {
            *self.cancels_in_flight -= 1;
            return;
        }
        if user_data == tag::WAKE {
            *self.wake_armed = false;
            drain_eventfd(self.wake_fd);
            return;
        }
        if cqueue::more(c.flags) {
            // Not the final CQE of this operation (multishot, zero-copy send).
            self.table.item(user_data, c);
        } else {
            self.table.complete(user_data, c);
        }
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
    /// Files, streams and write halves dropped with write-behind pending (bytes their
    /// `AsyncWrite` had accepted) whose writes did not finish within the shutdown timeout: the
    /// runtime waited for them, then cancelled the rest and closed them (filled in by `hoop`'s
    /// runtime; the driver alone leaves it 0).
    pub unfinished_writes: usize,
    /// The bytes those writes had accepted and not written (or not known to be written).
    pub unfinished_write_bytes: u64,
}

impl Uring {
    /// `io_uring_enter(2)`: on the registered ring index (with `IORING_ENTER_REGISTERED_RING`)
    /// when the ring fd is registered, else on the ring fd. With `wait` (a blocking wait, on a
    /// kernel with `IORING_FEAT_EXT_ARG`), the wait ends after that long at the latest
    /// (`IORING_ENTER_EXT_ARG`); it then returns `Ok` as if a completion had come.
    fn raw_enter(
        &self,
        to_submit: u32,
        want: u32,
        mut flags: u32,
        wait: Option<Duration>,
    ) -> io::Result<usize> {
        let fd = match &self.registered {
            Some(reg) => {
                flags |= io_uring::EnterFlags::REGISTERED_RING.bits();
                reg.index as libc::c_long
            }
            None => self.ring.as_raw_fd() as libc::c_long,
        };
        // SAFETY: a registered index names this ring in this thread's table (the driver never
        // leaves the thread that built it, and a shared ring registers none); the SQEs pushed
        // point to memory their operations own until the final CQE (UringOp's contract).
        unsafe { sys_enter(fd, to_submit, want, flags, wait) }
    }
}

/// Waits (without submitting) until the CQ of the ring `ring_fd` holds a CQE, or `timeout`
/// passed, or a signal came: a shared ring's reaper, outside the ring's lock.
pub(crate) fn wait_for_cqe(ring_fd: std::os::fd::RawFd, timeout: Duration) -> io::Result<()> {
    // SAFETY: nothing is submitted (`to_submit` 0), so no SQE memory is handed over; a wrong
    // fd only makes the call fail.
    unsafe {
        sys_enter(
            libc::c_long::from(ring_fd),
            0,
            1,
            IORING_ENTER_GETEVENTS,
            Some(timeout),
        )
    }
    .map(drop)
}

/// `io_uring_enter(2)` on `fd` (a ring fd, or a registered index with
/// `IORING_ENTER_REGISTERED_RING` in `flags`). With `wait` the call passes an
/// `io_uring_getevents_arg` whose timeout bounds a blocking wait (`IORING_ENTER_EXT_ARG`); a
/// wait that timed out returns `Ok(to_submit)`.
///
/// # Safety
/// `fd` must name a ring the caller keeps open, and every SQE among the `to_submit` queued ones
/// must point to memory its operation owns until the final CQE.
unsafe fn sys_enter(
    fd: libc::c_long,
    to_submit: u32,
    want: u32,
    mut flags: u32,
    wait: Option<Duration>,
) -> io::Result<usize> {
    {
        let ts = wait.map(|d| KernelTimespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let arg = ts.as_ref().map(|ts| GeteventsArg {
            sigmask: 0,
            sigmask_sz: 8,
            min_wait_usec: 0,
            ts: ts as *const KernelTimespec as u64,
        });
        let (argp, argsz) = match &arg {
            Some(a) => {
                flags |= IORING_ENTER_EXT_ARG;
                (
                    a as *const GeteventsArg as *const libc::c_void,
                    std::mem::size_of::<GeteventsArg>() as libc::c_long,
                )
            }
            None => (std::ptr::null(), 0),
        };
        // SAFETY: the argument is null (size 0) or an io_uring_getevents_arg on this stack
        // frame pointing to a timespec on this stack frame, both alive for the call; `fd` names
        // a ring the caller keeps open, and every SQE it submits points to memory its operation
        // owns until the final CQE (the callers' contracts).
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                fd,
                libc::c_long::from(to_submit),
                libc::c_long::from(want),
                libc::c_long::from(flags),
                argp,
                argsz,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if wait.is_some() && e.raw_os_error() == Some(libc::ETIME) {
            // The wait timed out: the SQEs were submitted all the same.
            return Ok(to_submit as usize);
        }
        Err(e)
    }
}

impl Uring {
    /// SQPOLL: whether the SQ thread went to sleep (`IORING_SQ_NEED_WAKEUP`), so the next
    /// submission must wake it with a system call. False without SQPOLL.
    pub(crate) fn sq_thread_asleep(&mut self) -> bool {
        self.ring.params().is_setup_sqpoll() && self.ring.submission().need_wakeup()
    }

    /// Whether `io_uring_enter` goes through a registered ring fd.
    pub(crate) fn ring_fd_registered(&self) -> bool {
        self.registered.is_some()
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

/// The opcodes that read or write a file's data (what a storage device serves), as bits.
const STORAGE_OPS: u64 = 1 << opcode::Read::CODE
    | 1 << opcode::Write::CODE
    | 1 << opcode::ReadFixed::CODE
    | 1 << opcode::WriteFixed::CODE
    | 1 << opcode::Readv::CODE
    | 1 << opcode::Writev::CODE;

/// Whether `op` reads or writes a file's data.
#[inline]
fn is_storage_io(op: u8) -> bool {
    op < 64 && STORAGE_OPS & (1 << op) != 0
}
