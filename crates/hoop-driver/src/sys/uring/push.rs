//! Pushing: an operation's SQE into a new slot and the SQ (submitting first when the SQ is
//! full), and linked chains together.

use io_uring::opcode;
use io_uring::squeue::Entry;

use super::{PushError, Uring};
use crate::lifecycle::Lifecycle;

impl Uring {
    /// Pushes an operation's SQE into a new slot. `granted` says the caller holds a grant from
    /// the room FIFO (it may then pass waiters that came before others).
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        entry: Entry,
        granted: bool,
        state: Lifecycle,
    ) -> Result<u64, PushError> {
        self.push_with(move |user_data| entry.user_data(user_data), granted, state)
    }

    /// [`Uring::push`] with the SQE made by `entry` once its slot is known (given the slot's
    /// `user_data`): the SQE is built in place, not built, moved and copied.
    #[inline(always)]
    pub(crate) fn push_with(
        &mut self,
        entry: impl FnOnce(u64) -> Entry,
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
        let mut entry = entry(user_data);
        if self.faults.active() && self.fault_injected_at_push(&mut entry, user_data) {
            return Ok(user_data);
        }
        if !self.push_sqe(&entry) {
            let _ = self.table.slots.remove(user_data);
            return Err(PushError::NoRoom);
        }
        // Only a ring waiting on a device submits file I/O early (`flush_early`).
        self.storage_queued |= self.early && is_storage_io(entry.get_opcode() as u8);
        Ok(user_data)
    }

    /// Puts one SQE in the SQ, submitting what is queued first if the SQ is full.
    #[inline(always)]
    pub(super) fn push_sqe(&mut self, entry: &Entry) -> bool {
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
    /// of them or none: a chain is never split (a link holds only between SQEs the kernel takes
    /// in one go). One borrow of the SQ when there is room (each borrow reads the kernel's
    /// head).
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
