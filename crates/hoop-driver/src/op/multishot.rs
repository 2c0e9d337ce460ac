//! Multishot operations: one SQE, many CQEs.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::MultishotCode;

/// Accepts connections for as long as it is armed (`IORING_OP_ACCEPT` with
/// `IORING_ACCEPT_MULTISHOT`, 5.19). Each item owns its fd, so connections accepted after the
/// stream was dropped are closed (invariant 14).
#[derive(Debug)]
pub struct AcceptMulti {
    pub(crate) fd: RawFd,
}

impl AcceptMulti {
    /// Accepts on the listening socket `fd`.
    pub fn new(fd: RawFd) -> Self {
        AcceptMulti { fd }
    }
}

impl MultishotCode for AcceptMulti {
    type Item = io::Result<OwnedFd>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        if c.res == -libc::ECANCELED {
            return None;
        }
        // SAFETY: a non-negative result is a new fd nothing else owns.
        Some(cvt(c.res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    fn rearm(&self, last: &Completion) -> bool {
        // The kernel ends a multishot accept on an error it cannot go on after, or when it could
        // not post a CQE; the stream goes on unless the listener is gone or it was cancelled.
        !matches!(
            -last.res,
            libc::ECANCELED | libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EBADR | libc::ENXIO
        )
    }
}
