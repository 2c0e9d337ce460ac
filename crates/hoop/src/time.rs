//! Timers on the ring (`IORING_OP_TIMEOUT`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use std::time::Instant;

mod interval;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};

use hoop_driver::op::OpCode;
use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, Op};

/// A future that completes at a deadline. Dropping it cancels its timer.
#[must_use = "a sleep does nothing unless awaited"]
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    op: Option<Op<op::Timeout>>,
}

/// Completes after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Completes at `deadline` (at once if it passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep { deadline, op: None }
}

impl Sleep {
    /// When the sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.op.is_none() {
            let left = this.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Poll::Ready(());
            }
            this.op = Some(Op::new(op::Timeout::new(left)));
        }
        let Some(op) = this.op.as_mut() else {
            return Poll::Ready(());
        };
        match Pin::new(op).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(res) => {
                this.op = None;
                if res.is_err() && Instant::now() < this.deadline {
                    // No runtime, or the runtime shut down: the timer cannot fire. Do not
                    // pretend it did; complete only once the deadline really passed.
                    std::thread::sleep(this.deadline.saturating_duration_since(Instant::now()));
                }
                Poll::Ready(())
            }
        }
    }
}

/// The error of [`timeout`]: the deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(e: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

/// Runs `future` with a time limit: its output, or [`Elapsed`] if `duration` passed first (the
/// future is then dropped, which cancels its operations).
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    let mut sleep = sleep(duration);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Runs operation `op` with a deadline linked to it in the kernel (`IORING_OP_LINK_TIMEOUT`): no
/// separate timer and no second wake-up, unlike [`timeout`]. If the deadline passes first, the
/// kernel cancels the operation and it fails with `io::ErrorKind::TimedOut` (its buffer is given
/// back as usual). On the epoll driver the driver's timer heap does the same.
pub fn op_timeout<T>(duration: Duration, op: T) -> Op<op::Deadline<T>>
where
    T: OpCode + UringOp + EpollOp,
{
    Op::new(op::Deadline::new(op, duration))
}
