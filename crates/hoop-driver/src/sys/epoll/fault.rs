//! Fault injection in the readiness driver (nothing without the `fault-injection` feature):
//! made-up and shortened results at push, completions held back to a later turn.

use std::os::fd::RawFd;

use super::call::{Call, Mode};
use super::Epoll;
use crate::fault::Kind as Fault;
use crate::lifecycle::Completion;

impl Epoll {
    /// Delivers the completions fault injection held back, in a random order.
    pub(super) fn release_held(&mut self) {
        let mut held = std::mem::take(&mut self.held);
        for i in (1..held.len()).rev() {
            let j = self.faults.below(i as u64 + 1) as usize;
            held.swap(i, j);
        }
        for (user_data, res) in held {
            self.table.counters.cqes_reaped += 1;
            self.table.complete(user_data, Completion { res, flags: 0 });
        }
    }

    /// Fault injection at push: shortens a read or write, or makes the result up
    /// (`ECANCELED`, `ECONNRESET`) without running the call. Closes and pool jobs other than
    /// file reads and writes are never touched. (`ENOBUFS` is not injected here: this
    /// driver's buffer ring is hoop's own and says `ENOBUFS` only when it is empty.)
    pub(super) fn fault_at_push(&mut self, call: &mut Call) -> Option<i32> {
        let socket_io = matches!(call.mode, Mode::Readable(_) | Mode::Writable(_))
            && [
                libc::SYS_recvfrom,
                libc::SYS_sendto,
                libc::SYS_recvmsg,
                libc::SYS_sendmsg,
            ]
            .contains(&call.nr);
        let may_cancel = socket_io
            || matches!(
                call.mode,
                Mode::File { .. }
                    | Mode::Readable(_)
                    | Mode::Writable(_)
                    | Mode::Accept(_)
                    | Mode::AcceptMulti(_)
                    | Mode::Connect(_)
            );
        // Not on a datagram socket, which a kernel never resets; nor an operation with a
        // deadline (made-up results never touch one: on io_uring it is a linked chain).
        if socket_io
            && call.deadline.is_none()
            && crate::sys::may_be_reset(call.args[0] as RawFd)
            && self.faults.fire(Fault::Econnreset)
        {
            return Some(-libc::ECONNRESET);
        }
        // Not an operation with a deadline: its `ECANCELED` is the deadline passing, which an
        // operation that did not run must not look like.
        if may_cancel && call.deadline.is_none() && self.faults.fire(Fault::Ecanceled) {
            return Some(-libc::ECANCELED);
        }
        let plain_io = [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_pread64,
            libc::SYS_pwrite64,
            libc::SYS_recvfrom,
            libc::SYS_sendto,
        ]
        .contains(&call.nr)
            && !matches!(call.mode, Mode::Close(_) | Mode::Nop | Mode::Fail(_));
        // Reads of fewer than 512 bytes are left whole (eventfd and signalfd records); nor is a
        // datagram cut short (the kernel sends one whole or not at all, and a shorter receive
        // would truncate it).
        let len = u32::try_from(call.args[2]).unwrap_or(0);
        let message = || crate::sys::is_message_socket(call.args[0] as RawFd);
        if plain_io && len >= 512 && !message() && self.faults.fire(Fault::ShortIo) {
            if let Some(shorter) = self.faults.shorten(len) {
                call.args[2] = libc::c_long::from(shorter);
                if call.io_len > 0 {
                    call.io_len = i64::from(shorter);
                }
            }
        }
        None
    }
}
