//! The poll-based traits of `hoop::shared`'s `TcpStream` and `File`: `futures::io`'s
//! `AsyncRead`/`AsyncWrite` (and `AsyncSeek` for files), and with feature `tokio` tokio's.
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

use super::Rings;
use crate::poll_io::{Kind, Ops, PollIo};

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
    fn read(&self, fd: RawFd, _: Kind, buf: Buf) -> Self::Read {
        let recv = op::Recv::new(fd, buf, 0);
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
    type Read = SharedOp<Keep<op::Read<Buf>, Arc<OwnedFd>>>;
    type Write = SharedOp<Keep<op::Write<Buf>, Arc<OwnedFd>>>;
    /// Files have no write half to shut down (`poll_close` only flushes them).
    type Shutdown = Ready<io::Result<()>>;
    const THREAD_BOUND: bool = false;
    fn read(&self, fd: RawFd, _: Kind, buf: Buf) -> Self::Read {
        let read = op::Read::new(fd, buf, op::CURRENT_POS);
        self.rings
            .submit(self.route, Keep::new(read, self.fd.clone()))
            .eager()
    }
    fn write(&self, fd: RawFd, _: Kind, buf: Buf) -> Self::Write {
        let write = op::Write::new(fd, buf, op::CURRENT_POS);
        self.rings
            .submit(self.route, Keep::new(write, self.fd.clone()))
            .eager()
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

crate::poll_io::poll_io_traits!(super::TcpStream, own_tokio_io);

#[cfg(feature = "tokio")]
impl tokio::io::AsyncRead for super::TcpStream {
    /// By readiness on tokio's reactor inside a tokio runtime (`poll_read_by_readiness`), else
    /// through the ring with the internal buffer.
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        let this = self.get_mut();
        if let Some(r) = this.poll_read_by_readiness(cx, buf) {
            if r.is_ready() {
                coop.made_progress();
            }
            return r;
        }
        let (fd, kept, io) = this.poll_read_io();
        let want = buf.remaining();
        std::task::ready!(io.poll_read_with(fd, kept, cx, want, |bytes| buf.put_slice(bytes)))?;
        coop.made_progress();
        std::task::Poll::Ready(Ok(()))
    }
}

/// Most sends a worker defers before it submits them without waiting for its park: a burst
/// of many connections in one turn neither fills the ring's SQ nor holds the first replies
/// back for the whole turn.
#[cfg(feature = "tokio")]
const DEFER_BATCH: usize = 64;

#[cfg(feature = "tokio")]
thread_local! {
    /// Where a vectored write is gathered into one slice for the write-behind.
    static GATHER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    /// Set while `tokio_write` hands bytes to the write-behind on a thread whose park submits:
    /// the send it makes is deferred to that park.
    static DEFER_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `sendmsg(2)` of `bufs` without waiting: `None` if the socket has no room (`EAGAIN`).
#[cfg(feature = "tokio")]
fn send_now(fd: RawFd, bufs: &[std::io::IoSlice<'_>]) -> Option<io::Result<usize>> {
    // SAFETY: a zeroed msghdr is a valid empty one; the fields set below point into `bufs`
    // (`IoSlice` is ABI-compatible with `iovec`), alive for the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    // SAFETY: `msg` names only memory borrowed for the call; the kernel only reads it.
    let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if r >= 0 {
        return Some(Ok(r as usize));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => None,
        _ => Some(Err(e)),
    }
}

#[cfg(feature = "tokio")]
impl super::TcpStream {
    /// tokio's writes: when nothing of the write-behind is pending, straight from the caller's
    /// buffers with `sendmsg(2)` (no copy; what the socket takes now is the result, as with
    /// tokio's own `TcpStream`); when the socket has no room, the first buffer goes through the
    /// internal buffer and the ring, which sends when there is room.
    fn tokio_write(
        &mut self,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        let deferring = hoop_driver::shared::deferring_here();
        let (fd, io) = self.poll_io();
        if deferring && io.poll_write_idle(fd, cx).is_pending() {
            // The send before is still queued for this thread's park (or in the kernel): a
            // second write in one turn (a large body) would wait a whole turn of the loop, so
            // what is queued goes now, and the write goes on if that finished it.
            hoop_driver::shared::submit_deferred();
        }
        std::task::ready!(io.poll_write_idle(fd, cx))?;
        if deferring && hoop_driver::shared::deferred_pushes() >= DEFER_BATCH {
            hoop_driver::shared::submit_deferred();
        }
        if deferring {
            // The ring sends, submitted with every other deferred send of this thread when it
            // parks: gather the caller's buffers into the write-behind.
            let r = GATHER.with(|g| {
                let mut gather = g.take();
                gather.clear();
                for b in bufs {
                    let room = io.max_buf() - gather.len();
                    if room == 0 {
                        break;
                    }
                    gather.extend_from_slice(&b[..b.len().min(room)]);
                }
                DEFER_WRITE.with(|d| d.set(true));
                let r = io.poll_write(fd, cx, &gather);
                DEFER_WRITE.with(|d| d.set(false));
                g.set(gather);
                r
            });
            if r.is_ready() {
                self.write_deferred = true;
                coop.made_progress();
            }
            return r;
        }
        let r = match send_now(fd, bufs) {
            Some(r) => std::task::Poll::Ready(r),
            None => {
                let first = bufs
                    .iter()
                    .find(|b| !b.is_empty())
                    .map_or(&[][..], |b| &b[..]);
                io.poll_write(fd, cx, first)
            }
        };
        if r.is_ready() {
            coop.made_progress();
        }
        r
    }
}

#[cfg(feature = "tokio")]
impl super::TcpStream {
    /// A flush or close of the write-behind (`f`). On a thread whose park submits deferred
    /// sends, the first flush after a deferred write waits for that park (hyper flushes after
    /// every write: the park then sends the whole turn's writes in one `io_uring_enter`, and
    /// the send's completion wakes the task); any other flush that would wait submits this
    /// thread's deferred sends now and looks again, so that a caller who polls without
    /// letting the worker park (`now_or_never` in a `yield_now` loop) never waits forever.
    fn poll_sent(
        &mut self,
        cx: &mut std::task::Context<'_>,
        f: fn(
            &mut PollIo<SocketOps>,
            RawFd,
            &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>>,
    ) -> std::task::Poll<io::Result<()>> {
        let first = std::mem::take(&mut self.write_deferred);
        let deferring = hoop_driver::shared::deferring_here();
        let (fd, io) = self.poll_io();
        let r = f(io, fd, cx);
        if r.is_ready() || !deferring || first {
            return r;
        }
        hoop_driver::shared::submit_deferred();
        f(io, fd, cx)
    }
}

#[cfg(feature = "tokio")]
impl tokio::io::AsyncWrite for super::TcpStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if buf.is_empty() {
            return std::task::Poll::Ready(Ok(0));
        }
        self.get_mut()
            .tokio_write(cx, &[std::io::IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        if bufs.iter().all(|b| b.is_empty()) {
            return std::task::Poll::Ready(Ok(0));
        }
        self.get_mut().tokio_write(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.get_mut().poll_sent(cx, PollIo::poll_flush)
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        // A shutdown is no turn's batch: what is deferred goes now.
        this.write_deferred = false;
        this.poll_sent(cx, PollIo::poll_close)
    }
}
crate::poll_io::poll_io_traits!(super::File);
crate::poll_io::poll_io_traits!(@seek super::File);
