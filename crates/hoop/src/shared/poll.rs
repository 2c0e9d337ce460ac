//! The operations under the poll-based traits of `hoop::shared`'s `TcpStream` and `File`
//! (the traits themselves: `io_traits`).
//!
//! The state machine is the thread-per-core types' (`crate::poll_io`: internal buffers, reused,
//! 16 KiB for sockets and up to 1 MiB for files; write-behind, so a dropped write future neither
//! loses nor duplicates accepted bytes), with operations on shared rings, which any thread may
//! poll. A value dropped with writes pending still writes them: a self-driven writer, polled by
//! whoever wakes it, finishes them and then lets the fd go (`poll_io::finish_shared`).
//! Each read or write is alone in its task's poll, so it is submitted on its first poll
//! (`SharedOp::eager`) rather than after a second poll of the whole task.

use std::future::Ready;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use hoop_driver::op;
use hoop_driver::shared::{Keep, Route, SharedOp};
use hoop_driver::{BufResult, IoBuf, Slice};

use crate::poll_io::{Kind, Ops, PollIo};
use hoop_driver::shared::Rings;

type Buf = Slice<Vec<u8>>;

/// Recv and send on a shared ring.
#[derive(Debug)]
pub(crate) struct SocketOps {
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) rings: Rings,
}

impl Ops for SocketOps {
    type Read = SharedOp<Keep<op::Recv<Buf>, Arc<OwnedFd>>>;
    type Write = SendFuture;
    type Shutdown = SharedOp<Keep<op::Shutdown, Arc<OwnedFd>>>;
    const THREAD_BOUND: bool = false;
    fn read(&self, fd: RawFd, _: Kind, buf: Buf, poll_first: bool) -> Self::Read {
        let recv = op::Recv::new(fd, buf, 0).poll_first(poll_first);
        self.rings
            .submit(Route::Plain, Keep::new(recv, self.fd.clone()))
            .eager()
    }
    fn write(&self, fd: RawFd, _: Kind, buf: Buf) -> Self::Write {
        #[cfg(feature = "tokio")]
        if DEFER_WRITE.with(|d| d.get()) {
            // tokio's write on a worker whose park submits (see `TcpStream::tokio_write`).
            let send = op::Send::new(fd, buf, 0);
            return SendFuture::Ring(
                self.rings
                    .submit(Route::Plain, Keep::new(send, self.fd.clone()))
                    .deferred(),
            );
        }
        // A send the socket buffer has room for completes in the system call itself: made
        // here, it costs one `send(2)`, where the ring would cost an SQE, an enter and a CQE
        // for the same copy. Only a send that would wait goes to the ring (whose kernel poll
        // then waits for room).
        // SAFETY: the pointer and length are the initialized bytes of `buf`, which this call
        // owns and which nothing else touches during it.
        let r = unsafe {
            libc::send(
                fd,
                buf.stable_ptr().cast(),
                buf.bytes_init(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r >= 0 {
            return SendFuture::Done(Some((Ok(r as usize), buf)));
        }
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return SendFuture::Done(Some((Err(e), buf)));
        }
        let send = op::Send::new(fd, buf, 0);
        SendFuture::Ring(
            self.rings
                .submit(Route::Plain, Keep::new(send, self.fd.clone()))
                .eager(),
        )
    }
    fn shutdown(&self, fd: RawFd) -> Self::Shutdown {
        let op = op::Shutdown::new(fd, libc::SHUT_WR);
        self.rings
            .submit(Route::Plain, Keep::new(op, self.fd.clone()))
    }
}

/// A poll-based send: done in the system call, or waiting on the ring.
#[derive(Debug)]
pub(crate) enum SendFuture {
    /// Sent (or failed) at once; taken by the first poll.
    Done(Option<BufResult<usize, Buf>>),
    /// The socket had no room: the ring sends when it has.
    Ring(SharedOp<Keep<op::Send<Buf>, Arc<OwnedFd>>>),
}

impl std::future::Future for SendFuture {
    type Output = BufResult<usize, Buf>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            SendFuture::Done(done) => match done.take() {
                Some(r) => std::task::Poll::Ready(r),
                // Polled after its result: nothing more will come.
                None => std::task::Poll::Pending,
            },
            SendFuture::Ring(op) => std::pin::Pin::new(op).poll(cx),
        }
    }
}

/// Reads and writes at the file's own position on a shared ring.
#[derive(Debug)]
pub(crate) struct FileOps {
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) rings: Rings,
    pub(crate) route: Route,
}

impl Ops for FileOps {
    type Read = crate::fs::cursor::AtCursor<SharedOp<Keep<op::Read<Buf>, Arc<OwnedFd>>>>;
    type Write = crate::fs::cursor::AtCursor<SharedOp<Keep<op::Write<Buf>, Arc<OwnedFd>>>>;
    /// Files have no write half to shut down (`poll_close` only flushes them).
    type Shutdown = Ready<io::Result<()>>;
    const THREAD_BOUND: bool = false;
    fn read(&self, fd: RawFd, _: Kind, buf: Buf, _poll_first: bool) -> Self::Read {
        // The cursor is fixed after a short read, as after a write (`fs::cursor`).
        let len = buf.bytes_total();
        let read = op::Read::new(fd, buf, op::CURRENT_POS);
        let read = self
            .rings
            .submit(self.route, Keep::new(read, self.fd.clone()))
            .eager();
        crate::fs::cursor::at_cursor(fd, op::CURRENT_POS, len, read)
    }
    fn write(&self, fd: RawFd, _: Kind, buf: Buf) -> Self::Write {
        // The cursor is fixed after a short write (`fs::cursor`: a kernel bug); the fd's `Arc`
        // in these ops keeps it open while the write is polled.
        let len = buf.bytes_init();
        let write = op::Write::new(fd, buf, op::CURRENT_POS);
        let write = self
            .rings
            .submit(self.route, Keep::new(write, self.fd.clone()))
            .eager();
        crate::fs::cursor::at_cursor(fd, op::CURRENT_POS, len, write)
    }
    fn shutdown(&self, _: RawFd) -> Self::Shutdown {
        std::future::ready(Ok(()))
    }
}

/// The poll state of a shared stream (made on first use).
pub(crate) fn socket_state(fd: &Arc<OwnedFd>, rings: &Rings) -> Box<PollIo<SocketOps>> {
    Box::new(PollIo::with_ops(
        Kind::Socket,
        SocketOps {
            fd: fd.clone(),
            rings: rings.clone(),
        },
    ))
}

/// The poll state of a shared file (made on first use).
pub(crate) fn file_state(fd: &Arc<OwnedFd>, rings: &Rings, route: Route) -> Box<PollIo<FileOps>> {
    Box::new(PollIo::with_ops(
        Kind::File,
        FileOps {
            fd: fd.clone(),
            rings: rings.clone(),
            route,
        },
    ))
}

#[cfg(feature = "tokio")]
thread_local! {
    /// Set while `tokio_write` hands bytes to the write-behind on a thread whose park submits:
    /// the send it makes is deferred to that park.
    pub(super) static DEFER_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lets shared rings hand their waiting to tokio's reactor (feature `tokio`).
pub(super) fn install_reactor() {
    #[cfg(feature = "tokio")]
    super::reactor::install();
}
