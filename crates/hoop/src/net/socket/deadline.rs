//! Deadlines of socket operations, linked to them in the kernel.

use std::time::{Duration, Instant};

use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, Op};

/// A deadline for an operation (or for every step of a longer one): when it passes, and the
/// whole timeout (which the error names).
pub(crate) type Dl = Option<(Instant, Duration)>;

/// The deadline `timeout` from now.
pub(crate) fn deadline(timeout: Duration) -> Dl {
    Some((Instant::now() + timeout, timeout))
}

/// Runs `op`; with a deadline, linked to it in the kernel (`IORING_OP_LINK_TIMEOUT`; the timer
/// heap on epoll): if it passes first the operation is cancelled, its buffer comes back, and it
/// fails with `TimedOut` ("deadline of 200 ms passed").
pub(crate) async fn run<T>(op: T, dl: Dl) -> T::Output
where
    T: op::OpCode + UringOp + EpollOp,
    T::Output: op::TimedOut,
{
    match dl {
        None => Op::new(op).await,
        Some((at, total)) => {
            let left = at.saturating_duration_since(Instant::now());
            Op::new(op::Deadline::new(op, left).reporting(total)).await
        }
    }
}
