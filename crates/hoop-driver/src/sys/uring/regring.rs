//! The registered ring fd (`IORING_REGISTER_RING_FDS`, 5.18).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::IoUring;

/// `IORING_REGISTER_RING_FDS` and `IORING_UNREGISTER_RING_FDS` (linux/io_uring.h).
const IORING_REGISTER_RING_FDS: libc::c_long = 20;
const IORING_UNREGISTER_RING_FDS: libc::c_long = 21;

/// `struct io_uring_rsrc_update` (linux/io_uring.h).
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// The ring's fd in this thread's table of registered rings (`IORING_REGISTER_RING_FDS`, 5.18):
/// `io_uring_enter` on the index with `IORING_ENTER_REGISTERED_RING` skips the fd lookup.
///
/// The registration holds a reference to the ring, so it must be undone for the ring to be
/// freed: `Drop` unregisters it through a duplicate of the ring fd (the ring's own fd may
/// already be closed by then, as `Uring` drops its fields in order).
pub(super) struct RegisteredRing {
    pub(super) index: u32,
    /// A duplicate of the ring fd, to unregister with.
    fd: OwnedFd,
    /// The table is per thread: only this thread may use or unregister the index.
    thread: std::thread::ThreadId,
}

impl RegisteredRing {
    pub(super) fn register(ring: &IoUring) -> io::Result<RegisteredRing> {
        // SAFETY: the ring's fd is open for as long as `ring` is borrowed, which covers the
        // borrow (it only lives for the `dup`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(ring.as_raw_fd()) }
            .try_clone_to_owned()?;
        let mut up = RsrcUpdate {
            offset: u32::MAX,
            resv: 0,
            data: ring.as_raw_fd() as u64,
        };
        // SAFETY: io_uring_register(2) reads and writes one io_uring_rsrc_update, a local of
        // that layout that outlives the call; offset u32::MAX asks the kernel to pick the index.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd() as libc::c_long,
                IORING_REGISTER_RING_FDS,
                &mut up as *mut RsrcUpdate,
                1 as libc::c_long,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RegisteredRing {
            index: up.offset,
            fd,
            thread: std::thread::current().id(),
        })
    }
}

impl Drop for RegisteredRing {
    fn drop(&mut self) {
        if std::thread::current().id() != self.thread {
            // Another thread's table: the index is not ours there. (The Driver is not Send,
            // so this does not happen; the thread's exit releases the registration.)
            return;
        }
        let mut up = RsrcUpdate {
            offset: self.index,
            resv: 0,
            data: 0,
        };
        // SAFETY: as in `register`: one io_uring_rsrc_update, a local that outlives the call.
        let _ = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                self.fd.as_raw_fd() as libc::c_long,
                IORING_UNREGISTER_RING_FDS,
                &mut up as *mut RsrcUpdate,
                1 as libc::c_long,
            )
        };
    }
}
