//! Operations whose owner let go: a dropped future or stream hands its data to its slot and
//! its operation is cancelled; the cancels wait in a queue and go into the SQ as room and the
//! cancel budget allow.

use io_uring::opcode;

use super::Uring;
use crate::lifecycle::Completion;
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::slots::tag;
use crate::table::Dropped;

impl Uring {
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

    /// Ends now every operation whose cancel waits in the queue, so that none of them can
    /// still act on its fd after this returns (a receive parked on a socket that leaves hoop
    /// through `into_std` would otherwise take bytes its new owner expects, until the next
    /// turn submits the cancel). From 6.0, `IORING_REGISTER_SYNC_CANCEL` per target: it
    /// returns once the target has ended (its CQE, data or `-ECANCELED`, is reaped by the
    /// next turn as usual, and its orphan handler frees what it held). Before 6.0, or where the
    /// registration is refused, the cancels are submitted now: the kernel runs a cancel of a
    /// request parked on a socket's poll within the submitting call.
    pub(crate) fn cancel_queued_now(&mut self) {
        if crate::level::has(crate::level::since::SYNC_CANCEL) {
            let mut refused = std::collections::VecDeque::new();
            while let Some(target) = self.cancels.pop_front() {
                let live = self
                    .table
                    .slots
                    .get_mut(target)
                    .is_some_and(|s| !s.is_completed());
                if !live {
                    continue;
                }
                let cancel = io_uring::types::CancelBuilder::user_data(target);
                match self.submitter().register_sync_cancel(None, cancel) {
                    Ok(()) => self.table.counters.cancels_submitted += 1,
                    // Ended before the cancel found it: nothing left to stop.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EALREADY)) => {}
                    Err(_) => refused.push_back(target),
                }
            }
            self.cancels = refused;
        }
        self.flush_cancels();
        self.submit_queued();
    }

    /// Pushes queued cancels while the SQ and the cancel budget allow (a cancel is never
    /// dropped: one that does not fit stays queued and is retried on the next turn).
    pub(super) fn flush_cancels(&mut self) {
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
}
