//! Deadlines linked to an operation.

use std::time::Duration;

use crate::lifecycle::Completion;
use crate::op::OpCode;

/// An operation with a deadline: on io_uring its SQE is linked to an `IORING_OP_LINK_TIMEOUT`
/// (no separate timer task); on epoll the driver's timer heap cancels it. An operation the
/// deadline cancelled fails with `ETIMEDOUT` (`io::ErrorKind::TimedOut`).
#[derive(Debug)]
pub struct Deadline<T> {
    pub(crate) inner: T,
    pub(crate) ts: Box<io_uring::types::Timespec>,
    pub(crate) duration: Duration,
}

impl<T: OpCode> Deadline<T> {
    /// `inner`, cancelled if it has not completed within `duration`.
    pub fn new(inner: T, duration: Duration) -> Self {
        Deadline {
            inner,
            ts: Box::new(io_uring::types::Timespec::from(duration)),
            duration,
        }
    }
}

impl<T: OpCode> OpCode for Deadline<T> {
    type Output = T::Output;
    fn complete(self, mut c: Completion) -> Self::Output {
        if c.res == -libc::ECANCELED {
            // The deadline cancelled it (a dropped future's output is dropped anyway).
            c.res = -libc::ETIMEDOUT;
        }
        self.inner.complete(c)
    }
}
