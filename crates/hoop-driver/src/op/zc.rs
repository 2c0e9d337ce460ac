//! Zero-copy send (`IORING_OP_SEND_ZC`, 6.0).
//!
//! A zero-copy send completes twice: first with its result (bytes sent, or `-errno`) and
//! `IORING_CQE_F_MORE`, then, once the network stack no longer references the pages (the data
//! was acknowledged, or copied), with a notification (`IORING_CQE_F_NOTIF`, no `F_MORE`). The
//! buffer belongs to the kernel until that notification, so [`SendZc`] is a
//! multi-CQE operation driven by [`MultiOp`](crate::MultiOp): the stream yields the result,
//! and only after the final CQE does [`MultiOp::into_data`](crate::MultiOp::into_data) hand the
//! buffer back. A stream dropped in flight leaves the buffer with the driver, which drops it
//! after the notification.
//!
//! Fallbacks: where the kernel lacks `SEND_ZC` (probe), on the epoll driver, or when the socket
//! cannot do zero copy (`EOPNOTSUPP`, e.g. a Unix socket), it is a plain send: one completion,
//! no notification.

use std::io;
use std::os::fd::RawFd;

use crate::buf::{BufResult, IoBuf};
use crate::driver::Driver;
use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::MultishotCode;

/// Sends the initialized bytes of `buf` with zero copy (`IORING_OP_SEND_ZC`, with
/// `MSG_NOSIGNAL`), or with a plain send where zero copy is unavailable (see the module docs).
///
/// Drive it with [`MultiOp`](crate::MultiOp): it yields one item, the send's result, and ends
/// after the notification CQE; then `into_data()` gives the operation back, and
/// [`SendZc::into_result`] the result and the buffer.
#[derive(Debug)]
pub struct SendZc<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) flags: i32,
    /// Whether the next arm is a `SEND_ZC` (otherwise a plain `SEND`).
    pub(crate) zero_copy: bool,
    /// The send's result (`res` of its first CQE), once it arrived.
    result: Option<i32>,
    /// Whether the notification CQE arrived.
    notified: bool,
    /// The socket refused zero copy (`EOPNOTSUPP`): arm again with a plain send.
    retry_plain: bool,
}

impl<B: IoBuf> SendZc<B> {
    /// Sends `buf` on `fd`: zero copy when the current driver is io_uring and its kernel
    /// supports `IORING_OP_SEND_ZC` (the probe taken at setup), else a plain send.
    pub fn new(fd: RawFd, buf: B) -> Self {
        let zero_copy =
            Driver::current().is_some_and(|d| d.supports_opcode(io_uring::opcode::SendZc::CODE));
        Self::with_mode(fd, buf, zero_copy)
    }

    /// Sends `buf` on `fd` with a plain send, always (the fallback, forced).
    pub fn copying(fd: RawFd, buf: B) -> Self {
        Self::with_mode(fd, buf, false)
    }

    fn with_mode(fd: RawFd, buf: B, zero_copy: bool) -> Self {
        SendZc {
            fd,
            buf,
            flags: libc::MSG_NOSIGNAL,
            zero_copy,
            result: None,
            notified: false,
            retry_plain: false,
        }
    }

    /// Whether the operation sends (or sent) with `SEND_ZC`: false for the fallback, including
    /// after the socket refused zero copy.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the notification CQE (`IORING_CQE_F_NOTIF`) arrived: the kernel released the
    /// buffer. Never true for the plain-send fallback.
    pub fn notified(&self) -> bool {
        self.notified
    }

    /// The send's result, once its completion arrived: bytes sent, or the error.
    pub fn result(&self) -> Option<io::Result<usize>> {
        self.result.map(|r| cvt(r).map(|n| n as usize))
    }

    /// The result and the buffer. Call it on the data [`MultiOp::into_data`](crate::MultiOp::into_data)
    /// gave back (after the final CQE); an operation that never completed is an error.
    pub fn into_result(self) -> BufResult<usize, B> {
        let res = match self.result() {
            Some(r) => r,
            None => Err(io::Error::other("zero-copy send did not complete")),
        };
        (res, self.buf)
    }

    /// The buffer, whether or not the send ran.
    pub fn into_inner(self) -> B {
        self.buf
    }
}

impl<B: IoBuf> MultishotCode for SendZc<B> {
    type Item = io::Result<usize>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        if io_uring::cqueue::notif(c.flags) {
            // The kernel is done with the buffer; the final CQE of a zero-copy send.
            self.notified = true;
            return None;
        }
        // The send's own completion: with F_MORE when a notification follows (zero copy), alone
        // when it is the last (plain send, or a zero-copy send that failed before it started).
        if self.zero_copy && c.res == -libc::EOPNOTSUPP {
            // The socket cannot do zero copy: send again, copying (`rearm`).
            self.zero_copy = false;
            self.retry_plain = true;
            return None;
        }
        self.retry_plain = false;
        self.result = Some(c.res);
        Some(cvt(c.res).map(|n| n as usize))
    }

    fn rearm(&self, _last: &Completion) -> bool {
        self.retry_plain
    }
}
