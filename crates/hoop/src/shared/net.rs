//! TCP on shared rings: `hoop::shared::TcpListener` and `hoop::shared::TcpStream`.

use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use hoop_driver::error::cvt_libc;
use hoop_driver::op;
use hoop_driver::shared::{Keep, Route};
use hoop_driver::{BufResult, IoBuf, IoBufMut, SockAddr};

use super::poll::{socket_state, SocketOps};
use crate::io_util::{fill_exact, until_done};
use crate::net::kept::{Keep as KeepRecv, Kept, Shared};
use crate::net::socket::{domain_of, ip_addr, lookup};
use crate::poll_io::PollIo;
use hoop_driver::shared::Rings;

/// A TCP listener whose accepts run on shared [`Rings`] (`Send + Sync`; `accept` is a
/// `Send + 'static` future). A connection the kernel accepted for a dropped `accept` future
/// goes to the next `accept` (of this listener or a clone), as with tokio's.
#[derive(Debug, Clone)]
pub struct TcpListener {
    fd: Arc<OwnedFd>,
    rings: Rings,
    /// Accepts whose futures were dropped, for the next one (shared by clones).
    kept: Arc<Kept>,
}

impl TcpListener {
    /// Binds to `addr` (`SO_REUSEADDR`, as std does) and listens, trying each address it
    /// resolves to in turn. `addr` is resolved before this returns, with std's resolver: a
    /// host name blocks the calling thread for the lookup (a literal address does not); the
    /// bind itself happens when the future is first polled. The future borrows neither
    /// `rings` nor `addr`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it does not wait on the kernel, and a socket it made is closed
    /// if it is dropped.
    pub fn bind(
        rings: &Rings,
        addr: impl ToSocketAddrs,
    ) -> impl Future<Output = io::Result<TcpListener>> + Send + 'static {
        let addrs = addr.to_socket_addrs().map(Vec::from_iter);
        let rings = rings.clone();
        async move {
            let listener = std::net::TcpListener::bind(&addrs?[..])?;
            Ok(TcpListener::from_std(&rings, listener))
        }
    }

    /// Wraps a std listener (blocking or not: io_uring does not care).
    pub fn from_std(rings: &Rings, listener: std::net::TcpListener) -> TcpListener {
        super::poll::install_reactor();
        TcpListener {
            fd: Arc::new(OwnedFd::from(listener)),
            rings: rings.clone(),
            kept: Arc::new(Kept::shared()),
        }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_name(self.fd.as_raw_fd(), libc::getsockname)
    }

    /// Accepts a connection (`IORING_OP_ACCEPT`); one accepted for an earlier call that was
    /// dropped comes first.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is the event of a `select!` branch and another branch
    /// completes first, a connection the kernel accepted for it is returned by the next
    /// `accept`.
    pub fn accept(
        &self,
    ) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send + 'static {
        let start = Shared {
            rings: self.rings.clone(),
            fd: self.fd.clone(),
        };
        let accept = KeepRecv::new(
            self.kept.clone(),
            op::Accept::new(self.fd.as_raw_fd()),
            start,
            false,
            || None,
        );
        let rings = self.rings.clone();
        async move {
            let (fd, addr) = accept.await?;
            let stream = TcpStream::from_owned(&rings, fd);
            Ok((stream, ip_addr(addr)?))
        }
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A TCP connection whose reads and writes run on shared [`Rings`]. `Send + Sync`; every
/// operation is a `Send + 'static` future with an owned buffer (the read rule of the crate docs
/// holds). Clones share the connection; the fd is closed when the last clone and the last
/// operation naming it are gone, after that operation's final CQE.
///
/// It implements `futures::io::{AsyncRead, AsyncWrite}`, and with the `tokio` feature tokio's
/// `AsyncRead` and `AsyncWrite` (for hyper through `hyper_util::rt::TokioIo`): each handle
/// keeps one internal 16 KiB buffer per direction, reused, so a call allocates nothing; a
/// `poll_write` that returns `Ready(n)` has taken the bytes (write-behind: `poll_flush` waits
/// for them), and one that returns `Pending` has taken nothing, so a dropped write future
/// neither loses nor duplicates bytes. The owned-buffer methods `read`, `read_exact`, `write`
/// and `write_all` take precedence over the traits' extension methods of the same name: spell
/// those `AsyncWriteExt::write_all(&mut stream, b"..")` (see the module docs, "Owned-buffer
/// methods and the I/O traits"). `shutdown()` is tokio's (flush, then the write direction).
/// Dropped with writes pending, the handle still writes every byte it accepted, in order (its
/// operations, woken by the rings, finish them on whatever thread wakes them); errors of those
/// writes are dropped, so flush where they matter. A write that cannot finish (a peer that
/// never reads) stays in flight until the rings shut down, which cancels it.
///
/// On a tokio worker whose park calls [`submit_deferred`](super::submit_deferred)
/// (`Builder::on_thread_park`), tokio's `poll_write` takes the bytes the same way (all of a
/// vectored write's buffers, up to 16 KiB) into a ring send that the worker's next park
/// submits together with the turn's other sends; the first `poll_flush` after it waits for
/// that park, any later one that would wait submits at once. Elsewhere tokio's `poll_write`
/// is one `sendmsg(2)` straight from the caller's buffers, and the ring only sends what the
/// socket had no room for.
#[derive(Debug)]
pub struct TcpStream {
    fd: Arc<OwnedFd>,
    rings: Rings,
    /// Reads whose futures were dropped, for the next one (shared by clones: one socket).
    kept: Arc<Kept>,
    /// The poll-based traits' state (made on first use; a clone starts without one).
    io: Option<Box<PollIo<SocketOps>>>,
    /// Readability on tokio's reactor, for tokio's `AsyncRead` (a clone starts without one).
    #[cfg(feature = "tokio")]
    ready: super::reactor::Readiness,
    /// A tokio write was deferred to the thread's park and no flush has looked since.
    #[cfg(feature = "tokio")]
    pub(crate) write_deferred: bool,
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // Bytes `AsyncWrite` accepted are written, even by a dropped value (DESIGN.md,
        // "Writes accepted are written"): a self-driven writer finishes them, holding the
        // fd's `Arc` (see `poll_io::finish_shared`).
        let fd = self.raw();
        crate::poll_io::finish_shared(self.io.take(), fd);
    }
}

impl Clone for TcpStream {
    fn clone(&self) -> TcpStream {
        TcpStream {
            fd: self.fd.clone(),
            rings: self.rings.clone(),
            kept: self.kept.clone(),
            io: None,
            #[cfg(feature = "tokio")]
            ready: Default::default(),
            #[cfg(feature = "tokio")]
            write_deferred: false,
        }
    }
}

impl TcpStream {
    /// Connects to `addr`, trying each address it resolves to in turn. A literal address is
    /// parsed before this returns; a host name (`"localhost:8080"`) is copied and resolved,
    /// when the future runs, on hoop's blocking pool (`hoop::spawn_blocking`), never on the
    /// calling executor's thread. The future borrows neither `rings` nor `addr`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the connection being
    /// made is closed (never leaked); call it again.
    pub fn connect(
        rings: &Rings,
        addr: impl crate::net::ToSocketAddrs,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send + 'static {
        let found = addr.resolve();
        let rings = rings.clone();
        async move {
            let mut last = None;
            for addr in lookup(found).await? {
                match TcpStream::connect_one(&rings, addr).await {
                    Ok(s) => return Ok(s),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no address to connect to")))
        }
    }

    async fn connect_one(rings: &Rings, addr: SocketAddr) -> io::Result<TcpStream> {
        // SAFETY: socket(2) has no memory-safety preconditions.
        let fd = cvt_libc(unsafe {
            libc::socket(domain_of(&addr), libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: socket returned a new fd that nothing else owns.
        let stream = TcpStream::from_owned(rings, unsafe { OwnedFd::from_raw_fd(fd) });
        let connect = op::Connect::new(stream.raw(), SockAddr::from_std(addr));
        rings
            .submit(Route::Plain, Keep::new(connect, stream.fd.clone()))
            .await?;
        Ok(stream)
    }

    pub(crate) fn from_owned(rings: &Rings, fd: OwnedFd) -> TcpStream {
        super::poll::install_reactor();
        TcpStream {
            fd: Arc::new(fd),
            rings: rings.clone(),
            kept: Arc::new(Kept::shared()),
            io: None,
            #[cfg(feature = "tokio")]
            ready: Default::default(),
            #[cfg(feature = "tokio")]
            write_deferred: false,
        }
    }

    /// Wraps a connected std stream.
    pub fn from_std(rings: &Rings, stream: std::net::TcpStream) -> TcpStream {
        TcpStream::from_owned(rings, OwnedFd::from(stream))
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// tokio's `poll_read` inside a tokio runtime: wait for readability on tokio's reactor and
    /// `recv(2)` straight into the caller's buffer, as tokio's own `TcpStream` does (a recv
    /// through the ring that has to wait completes as task work of the thread that submitted
    /// it, which costs a wake-up of that worker; see DESIGN.md "Shared rings"). `None`: no
    /// reactor here, or a read through the ring is pending: the caller reads through the ring.
    #[cfg(feature = "tokio")]
    pub(crate) fn poll_read_by_readiness(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Option<std::task::Poll<io::Result<()>>> {
        use std::task::Poll;
        if !self.kept.is_empty() {
            // What a dropped owned-buffer read received comes first: through the ring path,
            // which serves it.
            return None;
        }
        let fd = self.raw();
        {
            let (_, io) = self.poll_io();
            match io.read_idle(fd, cx) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Poll::Ready(Err(e))),
            }
        }
        if buf.remaining() == 0 {
            return Some(Poll::Ready(Ok(())));
        }
        let afd = self.ready.get(&self.fd)?;
        let gone = loop {
            let mut guard = match afd.poll_read_ready(cx) {
                Poll::Pending => return Some(Poll::Pending),
                Poll::Ready(Ok(g)) => g,
                // The runtime that registered it is gone: back to the ring.
                Poll::Ready(Err(_)) => break true,
            };
            // SAFETY: recv writes at most `unfilled.len()` bytes into the unfilled part of
            // `buf`, memory it owns; nothing reads it before `assume_init` below, which covers
            // exactly the bytes recv wrote.
            let unfilled = unsafe { buf.unfilled_mut() };
            let want = unfilled.len();
            // SAFETY: a pointer and length within `unfilled`, alive for the call.
            let r =
                unsafe { libc::recv(fd, unfilled.as_mut_ptr().cast(), want, libc::MSG_DONTWAIT) };
            if r >= 0 {
                let n = r as usize;
                if n > 0 && n < want {
                    // Fewer bytes than asked for: the receive queue is empty now (tokio's own
                    // rule for edge-triggered readiness). Clearing the readiness seen here
                    // spares the next read a `recv(2)` that would only say `EAGAIN`; bytes
                    // that arrive later raise a new edge, which this does not clear.
                    guard.clear_ready();
                }
                // SAFETY: recv initialized the first `n` unfilled bytes.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                return Some(Poll::Ready(Ok(())));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                // Not readable after all: wait for the next edge.
                Some(libc::EAGAIN) => guard.clear_ready(),
                _ => return Some(Poll::Ready(Err(e))),
            }
        };
        if gone {
            self.ready = super::reactor::Readiness::Off;
        }
        None
    }

    /// The fd and the poll-based traits' state.
    pub(crate) fn poll_io(&mut self) -> (RawFd, &mut PollIo<SocketOps>) {
        let fd = self.raw();
        let (sfd, rings) = (&self.fd, &self.rings);
        (fd, self.io.get_or_insert_with(|| socket_state(sfd, rings)))
    }

    /// [`poll_io`](Self::poll_io) with the stream's kept receives, for reads.
    pub(crate) fn poll_read_io(&mut self) -> (RawFd, Option<&Kept>, &mut PollIo<SocketOps>) {
        let fd = self.raw();
        let (sfd, rings) = (&self.fd, &self.rings);
        let io = self.io.get_or_insert_with(|| socket_state(sfd, rings));
        (fd, Some(&*self.kept), io)
    }

    /// The rings this stream's operations run on.
    pub fn rings(&self) -> &Rings {
        &self.rings
    }

    /// Reads into `buf` (from its start, up to its capacity); returns the number of bytes
    /// read, 0 when the peer closed. The buffer's length becomes exactly that. Bytes a dropped
    /// read received come first, in order.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is the event of a `select!` branch and another branch
    /// completes first, the read stays in flight on the stream (and its clones), and the next
    /// read returns its bytes, in order (only the buffer given to the dropped call is lost).
    pub fn read<B: IoBufMut + Send>(
        &self,
        buf: B,
    ) -> impl Future<Output = BufResult<usize, B>> + Send + 'static {
        let recv = op::Recv::new(self.raw(), buf, 0);
        let start = Shared {
            rings: self.rings.clone(),
            fd: self.fd.clone(),
        };
        KeepRecv::new(self.kept.clone(), recv, start, true, || None)
    }

    /// Reads exactly `buf.len()` bytes (the whole view of a `buf.slice(..n)`); `UnexpectedEof`
    /// if the peer closes first.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes already
    /// placed in its buffer are lost with the buffer (the read in flight is kept for the next
    /// read). In `select!`, use [`read`](Self::read) and gather the bytes yourself.
    pub fn read_exact<B: IoBufMut + Send>(
        &self,
        buf: B,
    ) -> impl Future<Output = BufResult<(), B>> + Send + 'static {
        let stream = self.clone();
        async move {
            let msg = "connection closed before the buffer was filled";
            fill_exact(buf, msg, |s, _| stream.read(s)).await
        }
    }

    /// Sends the initialized bytes of `buf` once; returns how many were sent: maybe fewer.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub fn write<B: IoBuf + Send>(
        &self,
        buf: B,
    ) -> impl Future<Output = BufResult<usize, B>> + Send + 'static {
        let send = op::Send::new(self.raw(), buf, 0);
        self.rings
            .submit(Route::Plain, Keep::new(send, self.fd.clone()))
    }

    /// Sends every initialized byte of `buf`, in as many sends as it takes.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub fn write_all<B: IoBuf + Send>(
        &self,
        buf: B,
    ) -> impl Future<Output = BufResult<(), B>> + Send + 'static {
        let stream = self.clone();
        async move {
            let total = buf.bytes_init();
            let msg = "failed to write the whole buffer";
            until_done(buf, total, io::ErrorKind::WriteZero, msg, |s, _| {
                stream.write(s)
            })
            .await
        }
    }

    /// Shuts down the write direction as tokio's `AsyncWriteExt::shutdown` does: flushes what
    /// the poll-based `AsyncWrite` accepted, then `shutdown(SHUT_WR)`; the peer reads end of
    /// stream. (std's `shutdown(how)` is [`shutdown_with`](Self::shutdown_with).)
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe in the sense that calling it again after a dropped call resumes
    /// where that one stopped: bytes `AsyncWrite` accepted are neither lost nor sent twice.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            let (fd, io) = self.poll_io();
            io.poll_close(fd, cx)
        })
        .await
    }

    /// Shuts down the read side, the write side, or both (`IORING_OP_SHUTDOWN`), as std's
    /// `shutdown(how)` does (nothing accepted by `AsyncWrite` is flushed first).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the shutdown may or may not have happened; calling it
    /// again is harmless.
    pub fn shutdown_with(
        &self,
        how: Shutdown,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let how = match how {
            Shutdown::Read => libc::SHUT_RD,
            Shutdown::Write => libc::SHUT_WR,
            Shutdown::Both => libc::SHUT_RDWR,
        };
        let op = op::Shutdown::new(self.raw(), how);
        self.rings
            .submit(Route::Plain, Keep::new(op, self.fd.clone()))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_name(self.raw(), libc::getsockname)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sock_name(self.raw(), libc::getpeername)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        let v = i32::from(on);
        // SAFETY: setsockopt reads `size_of::<i32>()` bytes from a live local.
        cvt_libc(unsafe {
            libc::setsockopt(
                self.raw(),
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&v as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        })
        .map(drop)
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

/// `getsockname` or `getpeername` of `fd`, as an IP address.
fn sock_name(
    fd: RawFd,
    f: unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32,
) -> io::Result<SocketAddr> {
    let mut addr = SockAddr::empty();
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the call writes at most `len` bytes into the sockaddr_storage `addr` owns.
    cvt_libc(unsafe { f(fd, addr.as_mut_ptr(), &mut len) })?;
    ip_addr(addr.with_len(len))
}
