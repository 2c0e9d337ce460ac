//! The poll-based traits of `hoop::shared`'s `TcpStream` and `File`: `futures::io`'s
//! `AsyncRead`/`AsyncWrite` (and `AsyncSeek` for files), and with feature `tokio` tokio's, on
//! the poll state machine and the shared-ring operations of `poll`.

#[cfg(feature = "tokio")]
use std::io;
#[cfg(feature = "tokio")]
use std::os::fd::RawFd;

#[cfg(feature = "tokio")]
use super::poll::{SocketOps, DEFER_WRITE};
#[cfg(feature = "tokio")]
use crate::poll_io::PollIo;

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
        if deferring {
            match io.poll_write_idle(fd, cx) {
                // The send before is still queued for this thread's park (or in the kernel):
                // a second write in one turn (a large body) would wait a whole turn of the
                // loop, so what is queued goes now, and the write goes on if that finished it.
                std::task::Poll::Pending => hoop_driver::shared::submit_deferred(),
                // The send before failed: `poll_write_idle` took its error out of the
                // write-behind, so it is reported here or never (dropped, the next look would
                // find the write-behind idle, and `write_all` and `flush` return `Ok` for a
                // message missing that send's bytes). The io_uring engine shows a deferred
                // send's result at a reap (the reaper's, another thread's) that may come
                // between two writes, so the next write is often the first to see it fail.
                std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                std::task::Poll::Ready(Ok(())) => {}
            }
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
