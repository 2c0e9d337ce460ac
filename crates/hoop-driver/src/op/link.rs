//! Deadlines linked to an operation.

use std::io;
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
    /// The deadline the error names (the whole operation's, for one step of a longer one).
    reported: Duration,
}

impl<T: OpCode> Deadline<T> {
    /// `inner`, cancelled if it has not completed within `duration`.
    pub fn new(inner: T, duration: Duration) -> Self {
        Deadline {
            inner,
            ts: Box::new(io_uring::types::Timespec::from(duration)),
            duration,
            reported: duration,
        }
    }

    /// The operation without its deadline (for a result that was not produced by it: the
    /// operation was never started).
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// Names `total` in the error when the deadline passes (for one step of a longer
    /// operation, whose own time is what is left of `total`).
    pub fn reporting(mut self, total: Duration) -> Self {
        self.reported = total;
        self
    }
}

impl<T: OpCode> OpCode for Deadline<T>
where
    T::Output: TimedOut,
{
    type Output = T::Output;
    fn complete(self, mut c: Completion) -> Self::Output {
        if c.res != -libc::ECANCELED {
            return self.inner.complete(c);
        }
        // The deadline cancelled it (a dropped future's output is dropped anyway).
        c.res = -libc::ETIMEDOUT;
        let after = self.reported;
        self.inner.complete(c).timed_out(after)
    }
}

/// A deadline passed: the one error of every deadline in hoop, whether linked to an operation
/// in the kernel (`read_timeout`, [`Deadline`]) or kept by a timer (`hoop::time::timeout`). It
/// names the deadline: "deadline of 200 ms passed". As an `io::Error` (what the `*_timeout`
/// methods return) its kind is `TimedOut` and `get_ref()` downcasts to `Elapsed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    after: Duration,
}

impl Elapsed {
    /// The error of a deadline of `after`.
    pub fn new(after: Duration) -> Elapsed {
        Elapsed { after }
    }

    /// The deadline that passed (the whole timeout asked for).
    pub fn duration(&self) -> Duration {
        self.after
    }
}

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.after.as_millis() > 0 || self.after.is_zero() {
            write!(f, "deadline of {} ms passed", self.after.as_millis())
        } else {
            write!(f, "deadline of {} µs passed", self.after.as_micros())
        }
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for io::Error {
    fn from(e: Elapsed) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, e)
    }
}

/// The error of an operation whose deadline passed: `io::ErrorKind::TimedOut` carrying an
/// [`Elapsed`], saying "deadline of 200 ms passed" (not the `ETIMEDOUT` text, which reads like
/// TCP's).
pub fn deadline_passed(after: Duration) -> io::Error {
    Elapsed::new(after).into()
}

/// An operation's output whose `ETIMEDOUT` error can be replaced by [`deadline_passed`]: the
/// shapes every operation returns (`io::Result<T>`, and a result with what the operation gives
/// back, such as its buffer).
pub trait TimedOut {
    /// The output with its `ETIMEDOUT` error (the deadline's) replaced.
    fn timed_out(self, after: Duration) -> Self;
}

impl<T> TimedOut for io::Result<T> {
    fn timed_out(self, after: Duration) -> Self {
        match self {
            Err(e) if e.raw_os_error() == Some(libc::ETIMEDOUT) => Err(deadline_passed(after)),
            r => r,
        }
    }
}

impl<T, B> TimedOut for (io::Result<T>, B) {
    fn timed_out(self, after: Duration) -> Self {
        (self.0.timed_out(after), self.1)
    }
}
