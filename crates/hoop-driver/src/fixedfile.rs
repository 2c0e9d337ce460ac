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

    /// The slots queued to close, taken (the driver closes them).
    pub(crate) fn take_pending(&self) -> Vec<u32> {
        std::mem::take(&mut *self.pending.borrow_mut())
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
