//! The ring's table of registered files (direct descriptors): registration and bookkeeping.
//!
//! The table is registered lazily and sparse (`IORING_REGISTER_FILES2` with
//! `IORING_RSRC_REGISTER_SPARSE`) by the first direct accept or registered file
//! ([`FilesUpdateAlloc`](crate::op::FilesUpdateAlloc)) on a ring; the kernel then picks a free
//! slot for each connection or file (`IORING_FILE_INDEX_ALLOC`). Every occupied slot is owned by
//! one [`DirectFd`](crate::op::DirectFd), whose drop queues the slot here; the io_uring driver
//! pushes an `IORING_OP_CLOSE` on the slot at the start of its next turn (so a drop inside the
//! driver's completion drain, e.g. an orphaned accept, never borrows the driver). If no close
//! SQE can be pushed, the slot is emptied with `IORING_REGISTER_FILES_UPDATE` instead.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::lifecycle::Lifecycle;
use crate::op::CloseDirect;
use crate::sys::uring::{Uring, UringOp};

/// The bookkeeping of one ring's fixed-file table.
#[derive(Debug)]
pub(crate) struct FixedFiles {
    /// Slots in the table.
    pub(crate) size: u32,
    /// Occupied slots: incremented per filled slot (accept, files update), decremented when its
    /// close completes.
    in_use: Cell<usize>,
    /// Slots whose owner was dropped, to close on the next turn.
    pending: RefCell<Vec<u32>>,
}

impl FixedFiles {
    pub(crate) fn new(size: u32) -> Rc<FixedFiles> {
        Rc::new(FixedFiles {
            size,
            in_use: Cell::new(0),
            pending: RefCell::new(Vec::new()),
        })
    }

    /// A slot was filled (an accept or a files update completed into it).
    pub(crate) fn occupied(&self) {
        self.in_use.set(self.in_use.get() + 1);
    }

    /// A slot was emptied (its close completed).
    pub(crate) fn released(&self) {
        self.in_use.set(self.in_use.get().saturating_sub(1));
    }

    /// Occupied slots.
    pub(crate) fn in_use(&self) -> usize {
        self.in_use.get()
    }

    /// Queues `slot` to be closed on the next driver turn. Never borrows the driver.
    pub(crate) fn queue_close(&self, slot: u32) {
        self.pending.borrow_mut().push(slot);
    }

    /// Whether closes are queued.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.borrow().is_empty()
    }
}

/// Most slots a table has: 131,072, so one thread holds 100,000 direct connections where the
/// descriptor limit permits (the kernel allows up to 2^20; the table costs it 8 bytes a slot,
/// 1 MiB at this size, and only once a direct accept or registered file needs it).
pub(crate) const MAX_TABLE: u32 = 1 << 17;

/// The slot count for a new table: the `RLIMIT_NOFILE` soft limit (the kernel refuses more),
/// at most [`MAX_TABLE`].
pub(crate) fn table_size() -> u32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if r != 0 {
        return 1024;
    }
    lim.rlim_cur.clamp(1, u64::from(MAX_TABLE)) as u32
}

/// Pushes a close (`IORING_OP_CLOSE` on the slot) for every queued slot of `u`'s table; called
/// at the start of each turn. A close that cannot be pushed empties the slot with a files
/// update instead.
pub(crate) fn flush_slot_closes(u: &mut Uring) {
    let Some(files) = u.fixed_files.clone() else {
        return;
    };
    if !files.has_pending() {
        return;
    }
    let slots = std::mem::take(&mut *files.pending.borrow_mut());
    for slot in slots {
        let mut op = CloseDirect::owned(slot, files.clone());
        let pushed = if u.is_iopoll() {
            None
        } else {
            u.push(op.create_entry(), false, Lifecycle::Submitted).ok()
        };
        match pushed {
            // Nobody waits: the slot owns the op, whose completion releases the slot.
            Some(user_data) => u.detach(user_data, Box::new(op)),
            None => {
                op.disarm();
                // SQEs naming the slot may still be queued: they reach the kernel before the
                // slot is emptied, so a later occupant never gets them (rule 17).
                u.submit_queued();
                if u.submitter().register_files_update(slot, &[-1]).is_ok() {
                    files.released();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Rule 17: when a slot's close gets no room and the slot is emptied synchronously, every
    /// SQE still queued (one naming the slot among them) is submitted first, so a later
    /// occupant of the slot can never receive it.
    #[test]
    fn slot_emptied_synchronously_only_after_queued_sqes_are_submitted() {
        let cfg = Config {
            max_in_flight: Some(1),
            ..Config::default()
        };
        let Ok(mut u) = Uring::new(&cfg) else {
            eprintln!("skip: io_uring unavailable");
            return;
        };
        if !crate::setup::kernel_at_least(5, 19) || u.submitter().register_files_sparse(4).is_err()
        {
            eprintln!("skip: no sparse fixed-file table");
            return;
        }
        let files = FixedFiles::new(4);
        u.fixed_files = Some(files.clone());
        // The in-flight budget is used up, so the close SQE will get no slot.
        let nop = io_uring::opcode::Nop::new().build();
        assert!(u.push(nop, false, Lifecycle::Submitted).is_ok());
        // An SQE naming slot 0, queued and not submitted (its user_data names no live slot).
        let buf = [0u8; 1];
        let stale = io_uring::opcode::Write::new(io_uring::types::Fixed(0), buf.as_ptr(), 1)
            .build()
            .user_data(0xFFFF_0000_0000_0000);
        assert!(u.push_sqes(&[stale]));
        assert_eq!(u.queued_sqes(), 2);
        files.queue_close(0);
        flush_slot_closes(&mut u);
        assert_eq!(
            u.queued_sqes(),
            0,
            "the slot was emptied with SQEs naming it queued"
        );
    }
}
