//! What a stream socket sends: inline or on the ring in order, whole buffers, files with
//! `sendfile(2)`, and the write-behind a dropped write half leaves.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use hoop_driver::error::cvt_libc;
use hoop_driver::{op, BufResult, IoBuf, Op};

use super::deadline::{run, Dl};
use super::owned::Socket;
use crate::io_util::until_done;

/// One of a socket's sends on the ring, counted in `ring_sends` while it lives.
struct RingSend<'a>(&'a std::sync::atomic::AtomicU32);

impl<'a> RingSend<'a> {
    fn new(count: &'a std::sync::atomic::AtomicU32) -> RingSend<'a> {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RingSend(count)
    }
}

impl Drop for RingSend<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Sets `O_NONBLOCK` on `fd`.
fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd the caller keeps open; no pointers.
    let flags = cvt_libc(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: as above.
        cvt_libc(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    }
    Ok(())
}

impl Socket {
    /// One send (without a deadline, so the future has no room for one: see `recv`).
    pub(crate) async fn send<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        Op::new(op::Send::new(self.raw(), buf, 0)).await
    }

    pub(crate) async fn send_until<B: IoBuf>(&self, buf: B, dl: Dl) -> BufResult<usize, B> {
        self.send_first(buf, dl, true).await.0
    }

    /// A stream send of `buf`: inline first when `inline` and none of this socket's sends is
    /// on the ring (`crate::send_path`), else (or if the socket has no room) a send on the
    /// ring. Also says whether the bytes went inline and fewer than asked (the socket is
    /// full then: the next send had better go to the ring at once).
    async fn send_first<B: IoBuf>(
        &self,
        buf: B,
        dl: Dl,
        inline: bool,
    ) -> (BufResult<usize, B>, bool) {
        use std::sync::atomic::Ordering::Relaxed;
        if inline && self.ring_sends.load(Relaxed) == 0 {
            let len = buf.bytes_init();
            // SAFETY: an IoBuf's first `bytes_init()` bytes are initialized and stay put while
            // `buf` lives; the slice is dropped before `buf` moves.
            let bytes = unsafe { std::slice::from_raw_parts(buf.stable_ptr(), len) };
            let enabled = crate::send_path::send_path().owned_inline;
            match crate::send_path::try_send(self.raw(), &[io::IoSlice::new(bytes)], enabled) {
                crate::send_path::Inline::Sent(n) => return ((Ok(n), buf), n < len),
                crate::send_path::Inline::Failed(e) => return ((Err(e), buf), false),
                crate::send_path::Inline::Ring => {}
            }
        }
        let _on_ring = RingSend::new(&self.ring_sends);
        (run(op::Send::new(self.raw(), buf, 0), dl).await, false)
    }

    /// Sends every initialized byte of `buf`, in as many sends as it takes.
    ///
    /// Not `send_all_until(buf, None)`: without the deadline's branch the future is less than
    /// half the size (`TcpStream::write_all` of a `RingBuf`: 296 bytes against 648), and a task
    /// parked in its receive (an idle connection's) holds room for it all the while.
    /// Not an `async fn` either: one that only awaits another keeps a second copy of its
    /// arguments beside the inner future's.
    pub(crate) fn send_all<B: IoBuf>(
        &self,
        buf: B,
    ) -> impl std::future::Future<Output = BufResult<(), B>> {
        let total = buf.bytes_init();
        let msg = "failed to write whole buffer";
        let fd = self.raw();
        until_done(buf, total, io::ErrorKind::WriteZero, msg, move |s, _| {
            Op::new(op::Send::new(fd, s, 0))
        })
    }

    /// [`send_all`](Self::send_all) within one deadline for the whole buffer. After an inline
    /// send that was short (the socket is full) the rest goes to the ring at once.
    pub(crate) async fn send_all_until<B: IoBuf>(&self, buf: B, dl: Dl) -> BufResult<(), B> {
        let total = buf.bytes_init();
        let msg = "failed to write whole buffer";
        let full = std::cell::Cell::new(false);
        until_done(buf, total, io::ErrorKind::WriteZero, msg, |s, _| {
            let full = &full;
            async move {
                let (out, short) = self.send_first(s, dl, !full.get()).await;
                full.set(short);
                out
            }
        })
        .await
    }

    /// Sends up to `len` bytes of `file` from `offset` with `sendfile(2)` (the kernel reads the
    /// page cache straight into the socket, no copy through user memory), waiting through the
    /// driver (`IORING_OP_POLL_ADD`, or the epoll driver's readiness) while the socket has no
    /// room. The socket is made non-blocking on first use (`O_NONBLOCK`: io_uring's socket
    /// operations wait by polling either way). Returns the bytes sent; 0 at end of file.
    pub(crate) async fn send_file(
        &self,
        file: BorrowedFd<'_>,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        let fd = self.raw();
        if !self.nonblocking.load(std::sync::atomic::Ordering::Relaxed) {
            set_nonblocking(fd)?;
            self.nonblocking
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let mut off = i64::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        loop {
            // SAFETY: both fds are open for the call (the socket is owned by `self`, the file
            // borrowed); `off` is a valid i64 the kernel reads and updates.
            let r = unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, len) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => {
                    Op::new(op::PollOnce::writable(fd)).await?;
                }
                Some(libc::EINTR) => {}
                _ => return Err(e),
            }
        }
    }

    /// The write direction's `shutdown(2)` once the write-behind `io` is written (a dropped
    /// write half's), then the drop of `this` (the close when it holds the last reference).
    /// See [`finish_then`](crate::poll_io::finish_then).
    pub(crate) fn finish_then_shutdown(
        io: Option<Box<crate::poll_io::PollIo>>,
        this: std::sync::Arc<Socket>,
        shutdown: bool,
    ) {
        let fd = this.raw();
        crate::poll_io::finish_then(io, fd, move || {
            if shutdown {
                this.shutdown_now(libc::SHUT_WR);
            }
            drop(this);
        });
    }
}
