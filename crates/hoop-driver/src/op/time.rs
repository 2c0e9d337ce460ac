//! Timers.

use std::io;
use std::time::Duration;

use crate::lifecycle::Completion;
use crate::op::OpCode;

/// Completes after a duration (`IORING_OP_TIMEOUT`, relative).
#[derive(Debug)]
pub struct Timeout {
    /// The duration, boxed so its address survives moves of the op (the kernel reads it).
    pub(crate) ts: Box<io_uring::types::Timespec>,
    duration: Duration,
}

impl Timeout {
    /// A timer firing after `d`.
    pub fn new(d: Duration) -> Timeout {
        Timeout {
            ts: Box::new(io_uring::types::Timespec::from(d)),
            duration: d,
        }
    }
}

impl Timeout {
    pub(crate) fn ts_secs(&self) -> u64 {
        self.duration.as_secs()
    }
    pub(crate) fn ts_nanos(&self) -> u32 {
        self.duration.subsec_nanos()
    }
}

impl OpCode for Timeout {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        // -ETIME is the timer firing, not an error.
        match c.res {
            r if r == -libc::ETIME || r >= 0 => Ok(()),
            r => crate::error::cvt(r).map(drop),
        }
    }
}
