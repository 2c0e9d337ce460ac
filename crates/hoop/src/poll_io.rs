//! `futures::io::{AsyncRead, AsyncWrite}` (and, with feature `tokio`, tokio's traits) for
//! [`TcpStream`](crate::net::TcpStream), [`UnixStream`](crate::net::UnixStream) and
//! [`File`](crate::fs::File), on top of completion operations.
//!
//! Poll-based traits hand in borrowed slices, but the kernel needs memory the operation owns.
//! Each value therefore keeps two internal buffers (made on first use, 16 KiB each, then
//! reused: no allocation per call):
//! * reads go into the read buffer (at most the caller's slice length, at most 16 KiB) and are
//!   copied out; a read still in flight when the caller gives up is kept and its bytes are
//!   handed to the next `poll_read`, so nothing is lost;
//! * `poll_write` copies the caller's bytes into the write buffer, submits the write and
//!   returns `Ready(n)` at once (write-behind): the bytes are then the value's responsibility,
//!   written in order, the rest of a short write resubmitted. A `poll_write` that returns
//!   `Pending` (the previous write still in flight) has taken nothing, so a write future
//!   dropped at any point neither loses accepted bytes nor duplicates them. An error of a
//!   write-behind is reported by the next `poll_write`/`poll_flush`/`poll_close`.
//!   `poll_flush` waits for every accepted byte; `poll_close` flushes, then shuts down the
//!   write half of a socket. `poll_read` also pushes a write-behind on (the rest of a short
//!   write), so a request written and not flushed still goes out while its reply is awaited. Dropping the value with a write in flight cancels it: flush first.
//!
//! Files use the file's own position (`read(2)`/`write(2)`, `CURRENT_POS`), like `std::fs::File`.

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop_driver::{op, BufResult, IoBuf, Op, Slice};

/// Size of each internal buffer.
const BUF_BYTES: usize = 16 * 1024;

/// Sockets use recv/send (`MSG_NOSIGNAL`), files read/write at their position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Socket,
    File,
}

#[derive(Debug)]
enum ReadOp {
    Socket(Op<op::Recv<Slice<Vec<u8>>>>),
    File(Op<op::Read<Slice<Vec<u8>>>>),
}

impl ReadOp {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<BufResult<usize, Slice<Vec<u8>>>> {
        match self {
            ReadOp::Socket(op) => Pin::new(op).poll(cx),
            ReadOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}

#[derive(Debug)]
enum WriteOp {
    Socket(Op<op::Send<Slice<Vec<u8>>>>),
    File(Op<op::Write<Slice<Vec<u8>>>>),
}

impl WriteOp {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<BufResult<usize, Slice<Vec<u8>>>> {
        match self {
            WriteOp::Socket(op) => Pin::new(op).poll(cx),
            WriteOp::File(op) => Pin::new(op).poll(cx),
        }
    }
}

use std::future::Future as _;

/// The state behind the poll-based traits of one fd.
///
/// It is `Send` and `Sync` so that the types holding it stay so, although an operation in
/// flight belongs to the runtime of the thread that started it (`owner`): polled on another
/// thread while one is in flight it fails with an error instead of touching the operation, and
/// dropped on another thread it leaks the operation (its buffer stays with it) rather than
/// drop it there. With nothing in flight the state moves freely.
pub(crate) struct PollIo {
    /// The thread whose runtime runs the operations in flight.
    owner: std::thread::ThreadId,
    kind: Kind,
    /// The read buffer when no read is in flight; bytes `read_pos..len` are not handed out yet.
    read_buf: Option<Vec<u8>>,
    read_pos: usize,
    read_op: Option<ReadOp>,
    /// The write buffer when no write is in flight (empty: nothing pending).
    write_buf: Option<Vec<u8>>,
    /// Bytes of the write buffer already written.
    write_done: usize,
    write_op: Option<WriteOp>,
    /// The error of a write-behind, for the next call.
    write_err: Option<io::Error>,
    shutdown: Option<Op<op::Shutdown>>,
}

// SAFETY: the only fields that are not `Send`/`Sync` are the operations, which hold the
// runtime's `Rc`s. They are touched only through `&mut self`, and only on `owner`'s thread
// (`check_thread`); `Drop` on another thread forgets them without touching them; `Debug` only
// looks at whether they exist. So no `Rc` is ever used on a thread other than its own.
unsafe impl Send for PollIo {}
// SAFETY: as above: `&PollIo` gives no access to the operations.
unsafe impl Sync for PollIo {}

impl std::fmt::Debug for PollIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollIo")
            .field("kind", &self.kind)
            .field("read_in_flight", &self.read_op.is_some())
            .field("write_in_flight", &self.write_op.is_some())
            .finish()
    }
}

impl Drop for PollIo {
    fn drop(&mut self) {
        if std::thread::current().id() != self.owner {
            // Not the owner's thread: the operations' `Rc`s must not be touched here.
            std::mem::forget(self.read_op.take());
            std::mem::forget(self.write_op.take());
            std::mem::forget(self.shutdown.take());
        }
    }
}

impl PollIo {
    /// `Err` if an operation is in flight on another thread's runtime; with none, the state
    /// moves to this thread.
    fn check_thread(&mut self) -> io::Result<()> {
        let here = std::thread::current().id();
        if here == self.owner {
            return Ok(());
        }
        if self.read_op.is_some() || self.write_op.is_some() || self.shutdown.is_some() {
            return Err(io::Error::other(
                "an AsyncRead/AsyncWrite operation of this value is in flight on another \
                 thread's runtime: poll it on that thread",
            ));
        }
        self.owner = here;
        Ok(())
    }

    pub(crate) fn new(kind: Kind) -> PollIo {
        PollIo {
            owner: std::thread::current().id(),
            kind,
            read_buf: None,
            read_pos: 0,
            read_op: None,
            write_buf: None,
            write_done: 0,
            write_op: None,
            write_err: None,
            shutdown: None,
        }
    }

    pub(crate) fn poll_read(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
        dst: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.check_thread()?;
        // A reader waiting for a reply must not wait on a request whose tail is still ours
        // to send: push the write-behind on (its error stays for the next write or flush).
        if self.write_op.is_some() {
            let _ = self.drive_write(fd, cx);
        }
        if dst.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            // Bytes of an earlier read first.
            if let Some(buf) = &self.read_buf {
                if self.read_pos < buf.len() {
                    let n = (buf.len() - self.read_pos).min(dst.len());
                    dst[..n].copy_from_slice(&buf[self.read_pos..self.read_pos + n]);
                    self.read_pos += n;
                    return Poll::Ready(Ok(n));
                }
            }
            if let Some(op) = &mut self.read_op {
                let (res, slice) = std::task::ready!(op.poll(cx));
                self.read_op = None;
                self.read_buf = Some(slice.into_inner());
                self.read_pos = 0;
                match res {
                    // The buffer's length is exactly what arrived (the read rule).
                    Ok(0) => return Poll::Ready(Ok(0)),
                    Ok(_) => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            let buf = self
                .read_buf
                .take()
                .unwrap_or_else(|| Vec::with_capacity(BUF_BYTES));
            let want = dst.len().min(buf.capacity());
            let slice = buf.slice(..want);
            self.read_op = Some(match self.kind {
                Kind::Socket => ReadOp::Socket(Op::new(op::Recv::new(fd, slice, 0))),
                Kind::File => ReadOp::File(Op::new(op::Read::new(fd, slice, op::CURRENT_POS))),
            });
        }
    }

    /// Drives the write in flight (and the rest of a short write) as far as it goes without
    /// waiting; an error is kept in `write_err`. `Ready` once nothing is in flight.
    fn drive_write(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(op) = &mut self.write_op {
                let (res, slice) = std::task::ready!(op.poll(cx));
                self.write_op = None;
                let mut buf = slice.into_inner();
                match res {
                    Ok(0) => {
                        buf.clear();
                        self.write_err = Some(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "failed to write the whole buffer",
                        ));
                    }
                    Ok(n) => self.write_done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        buf.clear();
                        self.write_err = Some(e);
                    }
                }
                if self.write_done >= buf.len() {
                    buf.clear();
                    self.write_done = 0;
                }
                self.write_buf = Some(buf);
            }
            if self.write_err.is_some() {
                self.write_done = 0;
                return Poll::Ready(());
            }
            match self.write_buf.take() {
                Some(buf) if !buf.is_empty() => self.submit_write(fd, buf, cx),
                other => {
                    self.write_buf = other;
                    return Poll::Ready(());
                }
            }
        }
    }

    /// Drives the write in flight to its end, then reports its error if it had one.
    fn poll_write_done(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drive_write(fd, cx));
        match self.write_err.take() {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Submits `buf[write_done..]` (the first poll pushes the operation).
    fn submit_write(&mut self, fd: RawFd, buf: Vec<u8>, _cx: &mut Context<'_>) {
        let len = buf.len();
        let slice = buf.slice(self.write_done..len);
        self.write_op = Some(match self.kind {
            Kind::Socket => WriteOp::Socket(Op::new(op::Send::new(fd, slice, 0))),
            Kind::File => WriteOp::File(Op::new(op::Write::new(fd, slice, op::CURRENT_POS))),
        });
    }

    pub(crate) fn poll_write(
        &mut self,
        fd: RawFd,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check_thread()?;
        std::task::ready!(self.poll_write_done(fd, cx))?;
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut buf = self
            .write_buf
            .take()
            .unwrap_or_else(|| Vec::with_capacity(BUF_BYTES));
        let n = src.len().min(buf.capacity());
        buf.extend_from_slice(&src[..n]);
        self.write_done = 0;
        self.submit_write(fd, buf, cx);
        // Push it now; its completion is collected by the next call.
        if let Poll::Ready(Err(e)) = self.poll_write_done(fd, cx) {
            // The bytes were accepted, then failed at once: report it now (nothing of them
            // was written, the caller may retry).
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    pub(crate) fn poll_flush(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_thread()?;
        self.poll_write_done(fd, cx)
    }

    pub(crate) fn poll_close(&mut self, fd: RawFd, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_thread()?;
        std::task::ready!(self.poll_write_done(fd, cx))?;
        if self.kind == Kind::File {
            return Poll::Ready(Ok(()));
        }
        let op = self
            .shutdown
            .get_or_insert_with(|| Op::new(op::Shutdown::new(fd, libc::SHUT_WR)));
        let res = std::task::ready!(Pin::new(op).poll(cx));
        self.shutdown = None;
        // Shutting down twice (or a peer already gone) is not an error worth reporting.
        match res {
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Poll::Ready(Ok(())),
            r => Poll::Ready(r),
        }
    }
}

/// Implements `futures::io::AsyncRead`/`AsyncWrite` (and tokio's with feature `tokio`) for a
/// type with a `poll_io(&mut self) -> (RawFd, &mut PollIo)` method.
macro_rules! poll_io_traits {
    ($t:ty) => {
        impl futures::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_read(fd, cx, buf)
            }
        }

        impl futures::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_write(fd, cx, buf)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_flush(fd, cx)
            }
            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_close(fd, cx)
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                let dst = buf.initialize_unfilled();
                let n = std::task::ready!(io.poll_read(fd, cx, dst))?;
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_write(fd, cx, buf)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_flush(fd, cx)
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_close(fd, cx)
            }
        }
    };
}
pub(crate) use poll_io_traits;
