//! Closing the slots of the registered file table (direct descriptors) whose owner was dropped:
//! each gets an `IORING_OP_CLOSE` at the start of a turn, or, with no room for one, is emptied
//! with a files update once the SQEs that may name it are submitted.

use super::{Uring, UringOp};
use crate::lifecycle::Lifecycle;
use crate::op::CloseDirect;

impl Uring {
    /// Pushes a close (`IORING_OP_CLOSE` on the slot) for every queued slot of the ring's
    /// table; called at the start of each turn. A close that cannot be pushed empties the slot
    /// with a files update instead.
    pub(super) fn flush_slot_closes(&mut self) {
        let Some(files) = self.fixed_files.clone() else {
            return;
        };
        if !files.has_pending() {
            return;
        }
        let slots = files.take_pending();
        for slot in slots {
            let mut op = CloseDirect::owned(slot, files.clone());
            let pushed = if self.is_iopoll() {
                None
            } else {
                self.push(op.create_entry(), false, Lifecycle::Submitted)
                    .ok()
            };
            match pushed {
                // Nobody waits: the slot owns the op, whose completion releases the slot.
                Some(user_data) => self.detach(user_data, Box::new(op)),
                None => {
                    op.disarm();
                    // SQEs naming the slot may still be queued: they reach the kernel before the
                    // slot is emptied, so a later occupant never gets them.
                    self.submit_queued();
                    if self.submitter().register_files_update(slot, &[-1]).is_ok() {
                        files.released();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::fixedfile::FixedFiles;

    /// A slot leaves hoop only after every SQE naming it was submitted: when a slot's close gets
    /// no room and the slot is emptied synchronously, every SQE still queued (one naming the
    /// slot among them) is submitted first, so a later occupant of the slot can never receive
    /// it.
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
        u.flush_slot_closes();
        assert_eq!(
            u.queued_sqes(),
            0,
            "the slot was emptied with SQEs naming it queued"
        );
    }
}
