//! Linked SQEs: an operation with a deadline (`IORING_OP_LINK_TIMEOUT`), and chains of
//! operations (`IOSQE_IO_LINK`: the next one starts only if the previous one succeeded).
//!
//! A link only holds between SQEs the kernel takes in one go, so the SQEs of a chain are put
//! in the SQ together and its tail is published once, after the last (`Uring::push_sqes`):
//! neither an `io_uring_enter` nor an SQPOLL thread (which may consume a published tail at any
//! moment) can see the head without the rest.

use io_uring::{opcode, squeue::Entry, squeue::Flags, types};

use super::{PushError, Uring};
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::OpCode;

impl Uring {
    fn check_push(&self, slots: usize, granted: bool) -> Result<(), PushError> {
        if self.poisoned {
            return Err(PushError::Poisoned);
        }
        if self.shut_down {
            return Err(PushError::ShutDown);
        }
        // A granted caller's own slot is among the promised ones.
        let free = self.table.free_slots() + usize::from(granted);
        if !self.table.may_push(granted, true) || free < slots {
            return Err(PushError::NoRoom);
        }
        Ok(())
    }

    /// Pushes `entry` linked to a `LINK_TIMEOUT` of `ts`: if the operation has not completed
    /// when the timeout fires, the kernel cancels it (its CQE says `-ECANCELED`).
    ///
    /// The timeout's own CQE gets a slot of its own (an orphan that finishes with nothing), so
    /// it is counted against the in-flight budget like any operation, and the room reserved for
    /// cancels stays theirs (a cancel is never dropped for want of room). Both SQEs become
    /// visible to the kernel together (`push_sqes`).
    pub(crate) fn push_with_timeout(
        &mut self,
        entry: Entry,
        ts: *const types::Timespec,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        self.check_push(2, granted)?;
        let Some(user_data) = self.table.slots.insert(state) else {
            return Err(PushError::NoRoom);
        };
        let Some(timeout_slot) = self
            .table
            .slots
            .insert(Lifecycle::Ignored(Box::new(LinkTimeoutCqe)))
        else {
            let _ = self.table.slots.remove(user_data);
            return Err(PushError::NoRoom);
        };
        let first = entry.user_data(user_data).flags(Flags::IO_LINK);
        let timeout = opcode::LinkTimeout::new(ts).build().user_data(timeout_slot);
        if !self.push_sqes(&[first, timeout]) {
            let _ = self.table.slots.remove(timeout_slot);
            let _ = self.table.slots.remove(user_data);
            return Err(PushError::NoRoom);
        }
        Ok(user_data)
    }

    /// Pushes two SQEs linked (`b` runs only if `a` succeeds; otherwise `b` completes with
    /// `-ECANCELED`). Returns both slots. Both SQEs become visible to the kernel together.
    pub(crate) fn push_linked(
        &mut self,
        a: Entry,
        b: Entry,
        granted: bool,
        states: (Lifecycle, Lifecycle),
    ) -> Result<(u64, u64), PushError> {
        self.check_push(2, granted)?;
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
        if !self.push_sqes(&[first, second]) {
            let _ = self.table.slots.remove(ub);
            let _ = self.table.slots.remove(ua);
            return Err(PushError::NoRoom);
        }
        Ok((ua, ub))
    }
}

/// The slot of a `LINK_TIMEOUT` SQE: nobody waits for its CQE, which only frees the slot.
struct LinkTimeoutCqe;

impl OpCode for LinkTimeoutCqe {
    type Output = ();
    fn complete(self, _: Completion) {}
}
