//! Fault injection in the io_uring driver (nothing happens without the `fault-injection`
//! feature, and nothing of it is on a plain build's path): made-up and shortened results at
//! push, completions held back to arrive late and out of order, refused and short submits at
//! `io_uring_enter`, and the same draws for a send made inline.

use io_uring::{opcode, squeue::Entry};
use std::io;

use super::{sqe, Uring};
use crate::fault::Kind as Fault;
use crate::lifecycle::Completion;

/// A completion held back (or made up) by fault injection.
pub(super) struct Held {
    pub(super) user_data: u64,
    pub(super) c: Completion,
    /// Made up at push: no SQE went to the kernel, so no CQE is owed for it.
    pub(super) injected: bool,
}

impl Uring {
    /// Fault injection at push (out of line: never on a plain build's path): whether a made-up
    /// completion replaced the SQE.
    #[cold]
    #[inline(never)]
    pub(super) fn fault_injected_at_push(&mut self, entry: &mut Entry, user_data: u64) -> bool {
        match self.fault_at_push(entry) {
            Some(res) => {
                self.held.push(Held {
                    user_data,
                    c: Completion { res, flags: 0 },
                    injected: true,
                });
                true
            }
            None => false,
        }
    }

    /// Takes the held completions in a random order of operations, each operation's own in
    /// the order they came.
    pub(super) fn release_held(&mut self) -> Vec<Held> {
        let mut held = std::mem::take(&mut self.held);
        let mut keys: Vec<(u64, u64)> = Vec::new();
        for h in &held {
            if !keys.iter().any(|k| k.0 == h.user_data) {
                keys.push((h.user_data, self.faults.below(u64::MAX)));
            }
        }
        let key = |ud: u64| keys.iter().find(|k| k.0 == ud).map_or(0, |k| k.1);
        // A stable sort: one operation's completions keep their order.
        held.sort_by_key(|h| key(h.user_data));
        held
    }

    /// Fault injection at push: shortens a read or write (the SQE's `len`), or makes the
    /// operation's result up (`ECANCELED`, `ENOBUFS`, `ECONNRESET`) without submitting it.
    /// Closes, cancels and anything that frees a resource are never touched.
    pub(super) fn fault_at_push(&mut self, entry: &mut Entry) -> Option<i32> {
        let op = entry.get_opcode() as u8;
        let (flags, len) = sqe::flags_and_len(entry);
        let buffer_select = flags & sqe::IOSQE_BUFFER_SELECT != 0;
        let socket_io = [
            opcode::Recv::CODE,
            opcode::Send::CODE,
            opcode::RecvMsg::CODE,
            opcode::SendMsg::CODE,
        ]
        .contains(&op);
        let plain_io = [
            opcode::Read::CODE,
            opcode::Write::CODE,
            opcode::ReadFixed::CODE,
            opcode::WriteFixed::CODE,
            opcode::Recv::CODE,
            opcode::Send::CODE,
        ]
        .contains(&op);
        let may_cancel = socket_io
            || plain_io
            || [
                opcode::Readv::CODE,
                opcode::Writev::CODE,
                opcode::Accept::CODE,
                opcode::Connect::CODE,
                opcode::OpenAt::CODE,
                opcode::Statx::CODE,
            ]
            .contains(&op);
        if buffer_select && self.faults.fire(Fault::Enobufs) {
            return Some(-libc::ENOBUFS);
        }
        // Not on a datagram socket, which a kernel never resets (a registered file's type is
        // not known here: it counts as a stream).
        let may_reset =
            || flags & sqe::IOSQE_FIXED_FILE != 0 || crate::sys::may_be_reset(sqe::fd(entry));
        if socket_io && may_reset() && self.faults.fire(Fault::Econnreset) {
            return Some(-libc::ECONNRESET);
        }
        if may_cancel && self.faults.fire(Fault::Ecanceled) {
            return Some(-libc::ECANCELED);
        }
        // Reads of fewer than 512 bytes are left whole: an eventfd or signalfd read must ask
        // for whole records. Nor is a datagram cut short: the kernel sends one whole or not
        // at all, and a shorter receive would truncate it (a registered file's type is not
        // known here, and it counts as a stream).
        let message =
            || flags & sqe::IOSQE_FIXED_FILE == 0 && crate::sys::is_message_socket(sqe::fd(entry));
        if plain_io
            && !buffer_select
            && len >= 512
            && !message()
            && self.faults.fire(Fault::ShortIo)
        {
            if let Some(shorter) = self.faults.shorten(len) {
                sqe::set_len(entry, shorter);
            }
        }
        // A multishot receive from a buffer ring (len 0: as much as a buffer, or a bundle,
        // holds) is capped per receive instead, where the kernel takes a cap (6.17: before, a
        // length on it is refused): its receives, and its bundles, end mid-message more often.
        // The kernel enforces the cap, so the bytes stay whole.
        if op == opcode::Recv::CODE
            && buffer_select
            && len == 0
            && crate::setup::kernel_at_least(6, 17)
            && (flags & sqe::IOSQE_FIXED_FILE != 0
                || !crate::sys::is_message_socket(sqe::fd(entry)))
            && self.faults.fire(Fault::ShortIo)
        {
            sqe::set_len(entry, 1 + self.faults.below(3000) as u32);
        }
        None
    }

    /// Fault injection at a send made inline, outside the ring (`Driver::try_send`), drawn as
    /// for a ring send: `Err(errno)` instead of the call (`EAGAIN`: no room, `ECONNRESET`),
    /// or the most bytes the call may send (`len`, or fewer for a short send).
    pub(crate) fn fault_at_inline_send(&mut self, len: usize) -> Result<usize, i32> {
        if !self.faults.active() {
            return Ok(len);
        }
        if self.faults.fire(Fault::Eagain) {
            return Err(libc::EAGAIN);
        }
        if self.faults.fire(Fault::Econnreset) {
            return Err(libc::ECONNRESET);
        }
        if len >= 512 && self.faults.fire(Fault::ShortIo) {
            let len32 = u32::try_from(len).unwrap_or(u32::MAX);
            if let Some(shorter) = self.faults.shorten(len32) {
                return Ok(shorter as usize);
            }
        }
        Ok(len)
    }

    /// Fault injection at `io_uring_enter`: an error instead of the call (`EAGAIN`, `EBUSY`,
    /// `EINTR`: nothing submitted), or a smaller `to_submit` (a short submit).
    pub(super) fn fault_at_enter(
        &mut self,
        sqpoll: bool,
        to_submit: u32,
    ) -> Option<io::Result<u32>> {
        if !self.faults.active() {
            return None;
        }
        for (kind, errno) in [
            (Fault::Eagain, libc::EAGAIN),
            (Fault::Ebusy, libc::EBUSY),
            (Fault::Eintr, libc::EINTR),
        ] {
            if self.faults.fire(kind) {
                return Some(Err(io::Error::from_raw_os_error(errno)));
            }
        }
        if !sqpoll && !self.chain_queued && to_submit > 1 && self.faults.fire(Fault::ShortSubmit) {
            return Some(Ok(self.faults.below(u64::from(to_submit)) as u32));
        }
        None
    }
}
