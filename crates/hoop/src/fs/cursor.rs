//! Writes at a file's cursor (`CURRENT_POS`) that leave the cursor after the bytes they wrote.
//!
//! Found by the full-disk tests (`tests/full_disk.rs`) on Linux 6.18: io_uring finishes a short
//! write to a regular file in an io-wq worker (`need_complete_io`), and when that second try
//! fails (`ENOSPC` on a full disk) the CQE reports the bytes the first try wrote, but the
//! file's position is not moved past them (`kiocb_done` updates `f_pos` only for a
//! non-negative result). The next write at the cursor then lands on top of them: a
//! `write_all` through the traits, or `write_all_at(buf, CURRENT_POS)`, overwrote the bytes
//! that had landed with the following ones and returned `Ok` on a full disk (256 KiB of a
//! 512 KiB `write_all` in the file, holding the second half). The epoll driver's `write(2)`
//! moves the cursor itself.
//!
//! So a write at the cursor reads the position first (`lseek(fd, 0, SEEK_CUR)`, one system
//! call), and after a short result (maybe after such an error) sets it to `start + n`: what
//! the kernel does for a write that is not short, and a no-op on a kernel that moved it. An
//! append-only file's cursor was at its end before the write, so `start + n` is its new end.
//! A file without a position (a pipe, `ESPIPE`) is left alone. The fd stays open while this
//! runs: the future is polled only by what owns or borrows the file (a dropped write does no
//! `lseek`).

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::{op, BufResult};

/// `write`, a write of `len` bytes at `pos` on `fd`; with `pos == CURRENT_POS` it fixes the
/// cursor after a short result (see the module docs).
pub(crate) fn at_cursor<F>(fd: RawFd, pos: u64, len: usize, write: F) -> AtCursor<F> {
    let start = if pos == op::CURRENT_POS && fd >= 0 {
        // SAFETY: lseek(2) has no memory-safety preconditions.
        let at = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
        u64::try_from(at).ok()
    } else {
        None
    };
    AtCursor {
        write,
        fd,
        start,
        len,
    }
}

/// See [`at_cursor`].
#[derive(Debug)]
pub(crate) struct AtCursor<F> {
    write: F,
    fd: RawFd,
    /// The cursor before the write; `None` when not at the cursor, or no position.
    start: Option<u64>,
    len: usize,
}

impl<F, B> Future for AtCursor<F>
where
    F: Future<Output = BufResult<usize, B>> + Unpin,
{
    type Output = BufResult<usize, B>;
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (res, buf) = std::task::ready!(Pin::new(&mut this.write).poll(cx));
        if let (Ok(n), Some(start)) = (&res, this.start) {
            if *n < this.len {
                let to = start.saturating_add(*n as u64);
                if let Ok(to) = libc::off_t::try_from(to) {
                    // SAFETY: lseek(2) has no memory-safety preconditions.
                    unsafe { libc::lseek(this.fd, to, libc::SEEK_SET) };
                }
            }
        }
        Poll::Ready((res, buf))
    }
}
