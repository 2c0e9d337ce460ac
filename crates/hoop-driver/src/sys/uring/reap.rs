//! Reaping: every CQE in the ring (and the kernel's overflow backlog behind it) handed to its
//! slot, its cancel, or the wake-up poll; and the queue depth sampled around it.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use io_uring::cqueue;

use super::abi::IORING_ENTER_GETEVENTS;
use super::fault::Held;
use super::{drain_eventfd, DepthClock, Uring};
use crate::fault::Kind as Fault;
use crate::lifecycle::Completion;
use crate::slots::tag;
use crate::table::OpTable;

impl Uring {
    /// Drains the CQ, and the kernel's overflow backlog behind it (the CQEs that did not fit,
    /// which the kernel keeps until an enter with GETEVENTS flushes them).
    pub(super) fn drain(&mut self) {
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
        self.maybe_grow();
        self.table.grant();
    }

    /// With depth sampling on: adds the depth since the last sample, times the time since then,
    /// to the counters, and starts a new interval at the current depth (operations submitted
    /// and not reaped, cancels left out), with the queued SQEs when `submitting` (an enter
    /// is about to submit them).
    pub(super) fn sample_depth(&mut self, submitting: bool) {
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
    pub(super) fn drain_once(&mut self) -> usize {
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
            finals: 0,
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
            if c.flags & crate::bufring::book::F_BUFFER != 0 && !buf_rings.is_empty() {
                c.flags = crate::bufring::book::on_cqe(buf_rings, c.res, c.flags);
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
        // The final CQEs, owed no more, counted once for the batch.
        *awaiting_cqes = awaiting_cqes.saturating_sub(reaper.finals);
        let table = reaper.table;
        table.counters.cqes_reaped += n;
        table.counters.max_cqe_batch = table.counters.max_cqe_batch.max(n);
        n as usize
    }
}

/// Where a drained completion goes: the borrowed parts of the driver that `drain_once` hands
/// each CQE to (the ring itself stays borrowed by the CQ iterator).
struct Reaper<'a> {
    table: &'a mut OpTable,
    cancels_in_flight: &'a mut usize,
    wake_armed: &'a mut bool,
    wake_fd: &'a Arc<OwnedFd>,
    /// Final CQEs from the kernel delivered so far (each was owed, `awaiting_cqes`).
    finals: usize,
}

impl Reaper<'_> {
    /// Hands one completion to its owner. `from_kernel` is false for a completion fault
    /// injection made up (no CQE was owed for it).
    #[inline(always)]
    pub(super) fn deliver(&mut self, user_data: u64, c: Completion, from_kernel: bool) {
        // The common case first: the final CQE of an operation's slot.
        if !tag::is_tag(user_data) && !cqueue::more(c.flags) {
            self.finals += usize::from(from_kernel);
            self.table.complete(user_data, c);
            return;
        }
        if user_data == tag::MSG_WAKE {
            // A wake-up posted from another thread (msg_ring.rs), for no SQE of this ring:
            // its arrival was the point.
            return;
        }
        if from_kernel && !cqueue::more(c.flags) {
            self.finals += 1;
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
