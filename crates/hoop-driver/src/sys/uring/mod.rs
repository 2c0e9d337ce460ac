//! The io_uring driver: one ring per runtime thread.
//!
//! SQEs are queued without a syscall and submitted in one `io_uring_enter` when the runtime runs
//! out of ready tasks (or the SQ fills); every ready CQE is drained in one batch, and the wakers
//! and orphaned results collected in the drain are handed back to the caller, who runs them after
//! releasing the driver (a waker that runs at once must not find the driver borrowed).
//!
//! This file holds the ring and submitting; beside it: `push` (SQEs into the SQ), `enter` (the
//! `io_uring_enter` call and its errors), `reap` (draining the CQ), `cancel` (operations
//! whose owner let go), `teardown` (poison and shutdown), `fault` (fault injection), and
//! `abi` (the raw system call and its argument structs), `resize` (growing the CQ under load),
//! `regwait` (wait arguments in a registered page).

mod abi;
mod build;
mod cancel;
mod chain;
mod enter;
mod fault;
mod files;
mod op;
mod probe;
mod push;
mod reap;
mod regring;
mod regwait;
mod resize;
mod sqe;
mod teardown;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

pub(crate) use self::abi::wait_for_cqe;
pub(crate) use self::abi::{FEAT_EXT_ARG, FEAT_MIN_TIMEOUT, FEAT_NO_IOWAIT, FEAT_RECVSEND_BUNDLE};
use self::build::build_ring;
pub use self::op::UringOp;
use self::probe::{feature_bits, feature_names, opcode_names, probe_opcodes};
use self::regring::RegisteredRing;
pub use self::teardown::ShutdownReport;
use crate::config::Config;
use crate::fault::{Faults, Kind as Fault};
use crate::setup::SetupError;
use crate::slots::tag;
use crate::table::OpTable;

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
    /// `IORING_REGISTER_PROBE`: which opcodes this kernel supports (at the kernel level).
    probe: self::probe::Opcodes,
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
    pub(crate) buf_rings: Vec<crate::bufring::book::Tracked>,
    /// Fault injection (nothing without the `fault-injection` feature).
    faults: Faults,
    /// Completions held back by fault injection (and injected ones), delivered on the next
    /// drain, after the CQEs that came before it.
    held: Vec<fault::Held>,
    /// A linked chain sits in the SQ: an injected short submit must not cut it (the kernel
    /// would run its head alone).
    chain_queued: bool,
    /// Depth sampling (`Config::sample_depth`): when the depth last changed, and to what.
    depth_clock: Option<Box<DepthClock>>,
    /// A file read or write was queued since the last `io_uring_enter`.
    storage_queued: bool,
    /// The last turn waited and left operations in the kernel: `flush_early` submits.
    early: bool,
    /// How the CQ grows (`resize`); `None` for a ring set up at its full size.
    grow: Option<resize::Grow>,
    /// `Config::min_wait` in microseconds (0: off).
    min_wait_usec: u32,
    /// The registered wait arguments (`Config::reg_wait`); after `ring`, so dropped after it.
    wait_region: Option<regwait::WaitRegion>,
}

/// The state of depth sampling: the depth since `since`.
#[derive(Default)]
struct DepthClock {
    since: Option<std::time::Instant>,
    depth: usize,
}

impl Uring {
    pub(crate) fn new(cfg: &Config) -> Result<Uring, SetupError> {
        crate::level::check().map_err(SetupError::invalid_level)?;
        let mut faults = Faults::new(Faults::URING);
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
        // A ring that may grow starts small (`resize`); its in-flight cap follows its CQ.
        let growable = cfg.resize_rings
            && cfg.taskrun_flags
            && !cfg.iopoll
            && cfg.sqpoll_idle.is_none()
            && cfg.cq_entries.is_none()
            && cfg.max_in_flight.is_none()
            && crate::level::has(crate::level::since::RESIZE_RINGS);
        let start_cq = if growable {
            resize::START_CQ_ENTRIES
                .max(entries.saturating_mul(4))
                .min(cq)
        } else {
            cq
        };
        // Injected: a CQ of twice the SQ (at most 16 entries) while the in-flight cap stays
        // what the asked-for CQ allows, so the CQ overflows under load.
        let tiny_cq = faults.fire(Fault::CqOverflow);
        let built = if tiny_cq {
            let sq = entries.min(8);
            build_ring(sq, sq * 2, cfg, false)?
        } else {
            build_ring(entries, start_cq, cfg, start_cq < cq)?
        };
        let ((ring, setup_flags, wait_region), grow) = if !tiny_cq && start_cq < cq {
            resize::start(built, entries, cq, cfg)?
        } else {
            (built, None)
        };
        let probe = probe_opcodes(&ring)?;
        // Both registrations are optimisations: a kernel that refuses them is ignored.
        let registered = if cfg.register_ring_fd && crate::level::has(crate::level::since::RING_FDS)
        {
            RegisteredRing::register(&ring).ok()
        } else {
            None
        };
        if let (Some((bounded, unbounded)), true) = (
            cfg.iowq_max_workers,
            crate::level::has(crate::level::since::IOWQ_MAX_WORKERS),
        ) {
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
            // A growable ring has the slots of its largest cap from the start.
            table: OpTable::growable(
                capacity,
                match grow {
                    Some(_) => crate::config::cap_for_cq(cq as usize),
                    None => capacity,
                },
                crate::config::uncapped_slots(),
            ),
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
            grow,
            wait_region,
            min_wait_usec: cfg
                .min_wait
                .map_or(0, |d| u32::try_from(d.as_micros()).unwrap_or(u32::MAX)),
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

    /// Whether the kernel supports `opcode` (from the probe taken at setup, at the kernel
    /// level).
    pub(crate) fn supports(&self, opcode: u8) -> bool {
        self.probe.supports(opcode)
    }

    /// Whether the kernel set `IORING_FEAT_*` bit `bit` (and the kernel level has it): every
    /// feature test goes through here, not `Parameters::is_feature_*`, which do not know the
    /// level.
    pub(crate) fn has_feature(&self, bit: u32) -> bool {
        feature_bits(self.ring.params()) & bit != 0
    }

    pub(crate) fn params(&self) -> &io_uring::Parameters {
        self.ring.params()
    }

    /// Every `IORING_FEAT_*` bit hoop knows, by kernel name, and whether this kernel set it.
    pub(crate) fn features(&self) -> Vec<(&'static str, bool)> {
        feature_names(self.ring.params())
    }

    /// The names of the opcodes the probe says this kernel supports, in opcode order; opcodes
    /// newer than hoop's table are named `OP_<number>`.
    pub(crate) fn opcodes(&self) -> Vec<&'static str> {
        opcode_names(&self.probe)
    }

    /// The io-wq worker limits now in force (bounded, unbounded), read with
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS` and zeros (which change nothing).
    pub(crate) fn iowq_max_workers(&self) -> io::Result<(u32, u32)> {
        let mut max = [0u32; 2];
        self.ring.submitter().register_iowq_max_workers(&mut max)?;
        Ok((max[0], max[1]))
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
    /// took them all. Used before an fd or a fixed slot leaves hoop, so that a reused number
    /// never gets stale I/O.
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
        self.flush_slot_closes();
        self.flush_cancels();
        self.arm_wake();
        // (`has_ready` includes completions held back by fault injection: never sleep on them.)
        let mut block = block && !self.has_ready();
        if let Some(w) = wait {
            // The wait is bounded by `IORING_ENTER_EXT_ARG` (5.11, as old as the SHUTDOWN
            // opcode hoop requires). An IOPOLL ring polls rather than waits.
            if w.is_zero() || !self.has_feature(FEAT_EXT_ARG) || self.is_iopoll() {
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
