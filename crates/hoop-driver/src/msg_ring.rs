//! Waking a ring from any thread with a CQE: `IORING_REGISTER_SEND_MSG_RING` (Linux 6.13)
//! posts an `IORING_OP_MSG_RING` data message into a target ring without a source ring
//! (liburing's `io_uring_register_sync_msg`). The CQE carries `tag::MSG_WAKE`, which the
//! driver reaps and ignores: its arrival alone ends a blocking `io_uring_enter`.
//!
//! The alternative, [`Notifier`](crate::Notifier), writes the driver's eventfd, which the ring
//! watches with a poll request re-armed on every turn it fires.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::driver::{Driver, Engine};
use crate::slots::tag;

/// `IORING_REGISTER_SEND_MSG_RING` (not in the io-uring crate's constants).
const IORING_REGISTER_SEND_MSG_RING: libc::c_long = 31;

/// Posts a wake-up CQE into one io_uring driver's ring, from any thread. Holds its own
/// duplicate of the ring fd, so the fd number can never name another file while it lives (the
/// ring's kernel memory lives as long as the last clone).
#[derive(Debug, Clone)]
pub struct RingWaker {
    fd: Arc<OwnedFd>,
}

impl RingWaker {
    /// Posts the wake-up CQE. Fails with the kernel's error (e.g. `EOWNERDEAD` once the
    /// ring's `SINGLE_ISSUER` thread exited).
    pub fn wake(&self) -> io::Result<()> {
        send_msg(self.fd.as_raw_fd())
    }
}

impl Driver {
    /// A [`RingWaker`] for this driver, if it runs on io_uring and the kernel posts a message
    /// without a source ring (tried once here: the probe's own CQE is a harmless wake-up).
    /// `None` on the epoll driver and on kernels before 6.13.
    pub fn ring_waker(&self) -> Option<RingWaker> {
        if !crate::level::has(crate::level::since::SEND_MSG_RING) {
            return None;
        }
        let ring_fd = match &*self.engine().borrow() {
            Engine::Uring(u) => u.ring_fd(),
            Engine::Epoll(_) => return None,
        };
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on an fd the driver keeps open; no memory involved.
        let dup = unsafe { libc::fcntl(ring_fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return None;
        }
        // SAFETY: fcntl returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        send_msg(fd.as_raw_fd()).ok()?;
        Some(RingWaker { fd: Arc::new(fd) })
    }
}

/// One synchronous MSG_RING data message to `ring_fd`: a CQE with `user_data =
/// tag::MSG_WAKE`, `res = 0`.
fn send_msg(ring_fd: RawFd) -> io::Result<()> {
    let entry =
        io_uring::opcode::MsgRingData::new(io_uring::types::Fd(ring_fd), 0, tag::MSG_WAKE, None)
            .build();
    // SAFETY: `Entry` is `#[repr(C)]` around one `io_uring_sqe`, so the pointer is a valid,
    // initialised 64-byte SQE for the length of the call; the kernel only reads it (nr_args 1).
    // The target fd is owned by the caller for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            -1 as libc::c_long,
            IORING_REGISTER_SEND_MSG_RING,
            (&entry as *const io_uring::squeue::Entry).cast::<libc::c_void>(),
            1 as libc::c_long,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
