//! `IORING_OP_EPOLL_WAIT` (Linux 6.15): a wait on an epoll set as one operation, for
//! descriptors a program watches through an epoll set of its own (a library that hands out
//! fds, thousands of them watched at once).

use std::io;
use std::os::fd::RawFd;

use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::OpCode;

/// Waits until the epoll set `epfd` has events and takes up to `max_events` of them.
///
/// On io_uring with `IORING_OP_EPOLL_WAIT` (6.15) the ring waits on the set; on an older ring
/// the operation is a non-blocking `epoll_wait(2)` made with no SQE (`UringOp::without_sqe`),
/// which may find none (`Ok` and no events: wait for the set's fd to be readable, then ask
/// again, as `hoop::epoll::Epoll::wait` does); on the epoll driver the set's fd is watched
/// and `epoll_wait(2)` runs once it is readable. The events come back in a `Vec` of the size
/// the kernel filled.
#[derive(Debug)]
pub struct EpollWait {
    pub(crate) epfd: RawFd,
    /// Where the kernel writes the events: a heap buffer that never grows while in flight.
    pub(crate) events: Vec<libc::epoll_event>,
}

impl EpollWait {
    /// `IORING_OP_EPOLL_WAIT`, for `Driver::supports_opcode`.
    pub const OPCODE: u8 = io_uring::opcode::EpollWait::CODE;

    /// A wait on `epfd` for at most `max_events` events (at least 1).
    pub fn new(epfd: RawFd, max_events: usize) -> EpollWait {
        EpollWait {
            epfd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)],
        }
    }

    /// The largest number of events one wait takes.
    pub(crate) fn max_events(&self) -> u32 {
        u32::try_from(self.events.len()).unwrap_or(u32::MAX)
    }
}

impl OpCode for EpollWait {
    type Output = io::Result<Vec<libc::epoll_event>>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let n = cvt(c.res)? as usize;
        self.events.truncate(n);
        Ok(self.events)
    }
}
