//! A receive run now, outside any operation, that keeps the driver's readiness record true:
//! the other half of a wait for readiness with no buffer (`PollOnce::ready`).

use std::os::fd::RawFd;

use super::call::{Call, Mode};
use super::Epoll;

impl Epoll {
    /// `recv(2)` on `fd` now, `MSG_DONTWAIT`: the bytes received or `-errno`, as a CQE's
    /// `res`. The driver learns from it what its own receives teach it: `EAGAIN`, or a short
    /// read of a stream, means the socket is drained, so a `PollOnce::ready` that follows
    /// waits for the next edge; and while the driver knows the socket drained (no edge came
    /// since), it answers `EAGAIN` without a system call.
    ///
    /// The caller keeps the order: no receive of its own may be queued on `fd`.
    pub(crate) fn try_recv(&mut self, fd: RawFd, buf: &mut [u8]) -> i32 {
        // A shared ring's engine keeps no state for an fd nothing waits on.
        let known = !self.transient_fds;
        if known {
            if let Some(st) = self.fds.get_mut(fd) {
                if st.registered && !st.readable && st.readers.is_empty() {
                    return -libc::EAGAIN;
                }
            }
        }
        let call = Call::new(
            libc::SYS_recvfrom,
            &[
                fd as _,
                buf.as_mut_ptr() as _,
                buf.len() as _,
                libc::MSG_DONTWAIT as _,
                0,
                0,
            ],
            Mode::Readable(fd),
        )
        .with_io_len(buf.len());
        // `buf` is borrowed for this call only, which runs here and now.
        let res = call.run();
        if !known {
            return res;
        }
        if res == -libc::EAGAIN && !self.register(fd) {
            // epoll refuses the fd: nothing to record.
            return res;
        }
        if let Some(st) = self.fds.get_mut(fd) {
            if st.registered {
                // Registered before this call or just now: an edge after the call is seen,
                // so "drained" cannot strand bytes that arrive later.
                let _ = st.note(fd, false, res, &call);
            }
        }
        res
    }
}
