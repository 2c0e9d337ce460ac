//! Linked SQEs: an operation with a deadline (`IORING_OP_LINK_TIMEOUT`), and chains of
//! operations (`IOSQE_IO_LINK`: the next one starts only if the previous one succeeded).
//!
//! A link only holds between SQEs submitted in the same `io_uring_enter`, so every SQE of a
//! chain is pushed with room for all of them already in the SQ (no submission in between).

use io_uring::{opcode, squeue::Entry, squeue::Flags, types};

use super::{PushError, Uring};
use crate::lifecycle::Lifecycle;
use crate::slots::tag;

impl Uring {
    /// Room for `n` SQEs at once: submits what is queued if the SQ lacks it.
    fn reserve_sq(&mut self, n: usize) -> bool {
        let free = |u: &mut Uring| {
            let sq = u.ring.submission();
            sq.capacity() - sq.len()
        };
        if free(self) < n {
            let _ = self.enter(false);
        }
        free(self) >= n
    }

    fn check_push(&self, slots: usize, granted: bool) -> Result<(), PushError> {
        if self.poisoned {
            return Err(PushError::Poisoned);
        }
        if self.shut_down {
            return Err(PushError::ShutDown);
        }
        // A granted caller's own slot is among the promised ones.
        let free = self.table.free_slots() + usize::from(granted);
        if !self.table.may_push(granted) || free < slots {
            return Err(PushError::NoRoom);
        }
        Ok(())
    }

    /// Pushes `entry` linked to a `LINK_TIMEOUT` of `ts`: if the operation has not completed
    /// when the timeout fires, the kernel cancels it (its CQE says `-ECANCELED`). The
    /// timeout's own CQE is counted like a cancel's (`tag::CANCEL`).
    pub(crate) fn push_with_timeout(
        &mut self,
        entry: Entry,
        ts: *const types::Timespec,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        self.check_push(1, granted)?;
        if self.cancels_in_flight >= self.cancel_budget || !self.reserve_sq(2) {
            return Err(PushError::NoRoom);
        }
        let Some(user_data) = self.table.slots.insert(state) else {
            return Err(PushError::NoRoom);
        };
        let first = entry.user_data(user_data).flags(Flags::IO_LINK);
        let timeout = opcode::LinkTimeout::new(ts).build().user_data(tag::CANCEL);
        // Room for both was reserved above: neither push submits in between.
        let pushed = self.push_sqe(&first) && self.push_sqe(&timeout);
        debug_assert!(pushed, "SQ room was reserved");
        self.cancels_in_flight += 1;
        Ok(user_data)
    }

    /// Pushes two SQEs linked (`b` runs only if `a` succeeds; otherwise `b` completes with
    /// `-ECANCELED`). Returns both slots.
    pub(crate) fn push_linked(
        &mut self,
        a: Entry,
        b: Entry,
        granted: bool,
        states: (Lifecycle, Lifecycle),
    ) -> Result<(u64, u64), PushError> {
        self.check_push(2, granted)?;
        if !self.reserve_sq(2) {
            return Err(PushError::NoRoom);
        }
        let (sa, sb) = states;
        let Some(ua) = self.table.slots.insert(sa) else {
            return Err(PushError::NoRoom);
        };
        let Some(ub) = self.table.slots.insert(sb) else {
            let _ = self.table.slots.remove(ua);
            return Err(PushError::NoRoom);
        };
        let first = a.user_data(ua).flags(Flags::IO_LINK);
        let second = b.user_data(ub);
        let pushed = self.push_sqe(&first) && self.push_sqe(&second);
        debug_assert!(pushed, "SQ room was reserved");
        Ok((ua, ub))
    }
}
