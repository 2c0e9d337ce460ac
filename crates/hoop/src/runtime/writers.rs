//! The detached writers' register: which tasks finish a dropped value's write-behind, and what
//! they left unwritten.

use std::cell::RefCell;

use super::task::{TaskId, Tasks};

/// The detached writers of a runtime: tasks that finish the write-behind of a file, stream or
/// write half dropped with writes pending, then close it (DESIGN.md, "Writes accepted are
/// written"; see `crate::poll_io`).
#[derive(Debug, Default)]
pub(crate) struct Writers {
    /// The writer tasks' keys (`TaskId::key`; a key names one task, as slot generations
    /// move on), pruned of finished ones as it grows.
    pub(super) keys: RefCell<std::collections::HashSet<u64>>,
    /// The set's size after the last prune: the next prune comes at twice as many.
    pub(super) pruned_at: std::cell::Cell<usize>,
    /// Writers dropped unfinished (shutdown past its timeout), and their bytes not written.
    pub(super) unfinished: std::cell::Cell<usize>,
    pub(super) unfinished_bytes: std::cell::Cell<u64>,
    /// Writers whose writes ended in an error, and their bytes not written.
    pub(super) failed: std::cell::Cell<usize>,
    pub(super) failed_bytes: std::cell::Cell<u64>,
}

impl Writers {
    /// A writer dropped before its writes finished, with `bytes` not written.
    pub(crate) fn unfinished(&self, bytes: u64) {
        self.unfinished.set(self.unfinished.get() + 1);
        self.unfinished_bytes
            .set(self.unfinished_bytes.get().saturating_add(bytes));
    }

    /// A writer whose writes ended in an error, with `bytes` accepted and not written.
    pub(crate) fn failed(&self, bytes: u64) {
        self.failed.set(self.failed.get() + 1);
        self.failed_bytes
            .set(self.failed_bytes.get().saturating_add(bytes));
    }

    /// Forgets the keys of finished writers; returns how many remain.
    pub(super) fn prune(&self, tasks: &Tasks) -> usize {
        let mut keys = self.keys.borrow_mut();
        keys.retain(|k| tasks.header(TaskId::from_key(*k)).is_some());
        self.pruned_at.set(keys.len());
        keys.len()
    }

    pub(super) fn contains(&self, id: TaskId) -> bool {
        self.keys.borrow().contains(&id.key())
    }
}
