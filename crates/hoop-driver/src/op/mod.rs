//! Operations, each defined once: its data, and what its completion means.
//!
//! An operation is a struct that owns everything the kernel will touch (buffer, path, sockaddr,
//! timespec) with stable addresses (heap memory), plus [`OpCode::complete`], which turns the raw
//! [`Completion`] into the typed output and takes ownership of the result. How a driver starts the
//! operation is implemented per driver (`sys::uring` builds an SQE; a readiness driver performs
//! the syscall), so the semantics live here once.
//!
//! `complete` also runs when nobody waits any more (the future was dropped): its output is then
//! dropped, which is how an accepted or opened fd gets closed and a buffer freed.

use std::io;
use std::os::fd::RawFd;

use crate::buf::IoBufMut;
use crate::error::cvt;
use crate::lifecycle::{Completion, Orphan, StreamOrphan};

pub mod direct;
pub mod epoll;
pub mod fixed;
pub mod fs;
pub mod link;
pub mod multishot;
pub mod net;
pub mod nop;
pub mod time;
pub mod zc;

pub use direct::*;
pub use epoll::EpollWait;
pub use fixed::*;
pub use fs::*;
pub use link::{deadline_passed, Deadline, Elapsed, TimedOut};
pub use multishot::*;
pub use net::*;
pub use nop::Nop;
pub use time::Timeout;
pub use zc::*;

/// The file an operation works on: an fd, or a slot of the ring's registered file table (a
/// direct descriptor, named with `IOSQE_FIXED_FILE`).
///
/// Only the io_uring driver has a registered file table: on the epoll driver an operation on a
/// `Fixed` target completes with `EOPNOTSUPP` (an `io::Error`, never a panic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A file descriptor.
    Fd(RawFd),
    /// A slot of the ring's registered file table.
    Fixed(u32),
}

impl From<RawFd> for Target {
    fn from(fd: RawFd) -> Target {
        Target::Fd(fd)
    }
}

impl From<&DirectFd> for Target {
    fn from(fd: &DirectFd) -> Target {
        Target::Fixed(fd.slot())
    }
}

/// How many times in a row an operation that ended with an `ECANCELED` nobody asked for is
/// submitted again before that `ECANCELED` is its result.
pub(crate) const MAX_RESUBMITS: u8 = 16;

/// Whether an operation whose final completion is `c` goes in again: `c` is an `ECANCELED`
/// its owner did not ask for (a dropped future or stream is never polled again, and a shut
/// down driver refuses the push, so shutdown still ends it with `ECANCELED`), the operation
/// has no linked deadline (whose `ECANCELED` is the deadline), and it was resubmitted fewer
/// than [`MAX_RESUBMITS`] times (counted in `resubmits`). Such a request never ran: the kernel
/// cancels the requests a thread submitted when that thread exits, and every driver's
/// `ecanceled` fault makes one up. One rule for the per-thread `Op`, `MultiOp` and the shared
/// rings' `SharedOp` (DESIGN.md, "Fault injection").
#[inline]
pub(crate) fn resubmit_after(c: &Completion, deadline: bool, resubmits: &mut u8) -> bool {
    if c.res != -libc::ECANCELED || deadline || *resubmits >= MAX_RESUBMITS {
        return false;
    }
    *resubmits += 1;
    true
}

/// The buffer id a CQE carries (`IORING_CQE_F_BUFFER`), if any.
pub(crate) fn buffer_id(flags: u32) -> Option<u16> {
    io_uring::cqueue::buffer_select(flags)
}

/// One operation's data and the meaning of its completion.
pub trait OpCode: 'static {
    /// What the operation's future resolves to.
    type Output;

    /// Takes ownership of the operation's data and result. Called exactly once, with the final
    /// CQE, whether or not a future still waits for the output.
    fn complete(self, c: Completion) -> Self::Output;
}

impl<T: OpCode> Orphan for T {
    fn finish(self: Box<Self>, c: Completion) {
        drop((*self).complete(c));
    }
}

/// An operation that completes with several CQEs: multishot (accept, recv), or a zero-copy send
/// (its result, then the notification that the buffer is free).
pub trait MultishotCode: 'static {
    /// What the stream yields.
    type Item: 'static;

    /// Turns one CQE (an intermediate one or the final one) into an item; `None` when it
    /// carries nothing for the user (the final `-ECANCELED` of a cancelled stream, say). Also
    /// called, and its output dropped, for CQEs that arrive after the stream was dropped.
    fn item(&mut self, c: Completion) -> Option<Self::Item>;

    /// After the final CQE `last`: whether the stream should be armed again because the user
    /// still wants data (a multishot recv ended by `ENOBUFS`, a multishot accept the kernel
    /// ended), or end.
    fn rearm(&self, last: &Completion) -> bool;

    /// An item the last CQE brought beyond its first (the next buffers of a receive bundle),
    /// yielded, in order, before the stream looks at its next CQE. The default has none.
    fn queued_item(&mut self) -> Option<Self::Item> {
        None
    }

    /// Whether [`queued_item`](Self::queued_item) has an item.
    fn has_queued(&self) -> bool {
        false
    }

    /// Polled before each (re)arm: `Pending` until arming makes sense (a buffer ring with no
    /// free buffer waits until one is returned). The default is always ready.
    fn poll_ready_to_arm(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Ready(())
    }

    /// Whether the armed stream waits for something that may never come (a multishot receive
    /// or accept), so that it takes a slot outside the in-flight cap: idle connections then
    /// never hold the room new operations need. An operation that ends by itself (a zero-copy
    /// send) keeps the default, counted.
    fn waits_for_peer(&self) -> bool {
        false
    }
}

impl<T: MultishotCode> StreamOrphan for T {
    fn orphan_item(&mut self, c: Completion) {
        if let Some(item) = self.item(c) {
            crate::deferred::drop_later(Box::new(item));
        }
    }
}

/// The completion of an operation that read into `buf` from its start (read, recv, recvmsg,
/// READ_FIXED, direct recv): the one place the read rule is applied (see
/// [`IoBufMut`](crate::IoBufMut)). On success the kernel wrote `res` bytes there and the buffer's
/// length becomes exactly that; on error it becomes 0, so no byte of an earlier use is ever
/// inside the length of a buffer a read gave back.
pub(crate) fn read_into<B: IoBufMut>(buf: &mut B, res: i32) -> io::Result<usize> {
    match cvt(res) {
        Ok(n) => {
            // A recv with MSG_TRUNC reports a datagram's real length, which may exceed the
            // buffer: only what fits was written.
            let filled = (n as usize).min(buf.bytes_total());
            // SAFETY: a non-negative result of a read into `buf` is the number of bytes the
            // kernel wrote at its start; `filled` is capped by `bytes_total()`.
            unsafe { buf.set_filled(filled) };
            Ok(n as usize)
        }
        Err(e) => {
            // SAFETY: declares no byte initialized.
            unsafe { buf.set_filled(0) };
            Err(e)
        }
    }
}
