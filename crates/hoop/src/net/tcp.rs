//! TCP listeners and streams.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use hoop_driver::{op, BufResult, BufRing, IoBuf, IoBufMut, MultiOp, RingBuf, SockAddr};

use super::socket::{deadline, domain_of, ip_addr, resolve, resolve_nonblocking, Socket};
use super::split::{read_methods, split_halves, write_methods, PollSlots};

/// A TCP socket listening for connections.
#[derive(Debug)]
pub struct TcpListener {
    socket: Socket,
}

impl TcpListener {
    /// Binds to `addr` (the first address it resolves to that binds) with `SO_REUSEADDR` and
    /// listens with a backlog of 1024.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it does not wait on the kernel, and a socket it made is closed
    /// if it is dropped.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Self::bind_with(addr, false)
    }

    /// Like [`bind`](Self::bind), with `SO_REUSEPORT` too, so that one listener per thread
    /// (see [`crate::run_per_core`]) can share the port and the kernel balances connections.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it does not wait on the kernel, and a socket it made is closed
    /// if it is dropped.
    pub async fn bind_reuseport(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Self::bind_with(addr, true)
    }

    /// The synchronous form of [`bind`](Self::bind)/[`bind_reuseport`](Self::bind_reuseport),
    /// usable outside a runtime.
    pub fn bind_with(addr: impl ToSocketAddrs, reuse_port: bool) -> io::Result<TcpListener> {
        let mut last = None;
        for a in resolve(addr)? {
            match Self::bind_one(a, reuse_port) {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to bind")))
    }

    fn bind_one(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
        let socket = Socket::new_sync(domain_of(&addr), libc::SOCK_STREAM)?;
        socket.set_opt(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1i32)?;
        if reuse_port {
            socket.set_opt(libc::SOL_SOCKET, libc::SO_REUSEPORT, 1i32)?;
        }
        socket.bind(&SockAddr::from_std(addr))?;
        socket.listen(1024)?;
        Ok(TcpListener { socket })
    }

    /// Wraps a std listener (blocking or not: io_uring does not care).
    pub fn from_std(listener: std::net::TcpListener) -> TcpListener {
        super::refuse::keep_reserve();
        TcpListener {
            socket: Socket::from_fd(OwnedFd::from(listener)),
        }
    }

    /// Accepts a connection (one accepted for an earlier call that was dropped comes first).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no connection is lost: one the kernel accepted for it is returned by the
    /// next `accept` (or `incoming()`) on this listener, on both drivers.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (socket, addr) = self.socket.accept().await?;
        Ok((TcpStream::from_socket(socket), ip_addr(addr)?))
    }

    /// [`accept`](Self::accept) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if no connection came within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no connection is lost: one the kernel accepted for it is returned by the
    /// next `accept` (or `incoming()`) on this listener, on both drivers.
    pub async fn accept_timeout(&self, timeout: Duration) -> io::Result<(TcpStream, SocketAddr)> {
        let (socket, addr) = self.socket.accept_until(deadline(timeout)).await?;
        Ok((TcpStream::from_socket(socket), ip_addr(addr)?))
    }

    /// A stream of accepted connections from one multishot accept (`IORING_ACCEPT_MULTISHOT`):
    /// one SQE for many connections, re-armed when the kernel ends it. On the epoll driver it
    /// is a loop of single accepts. Connections the kernel accepted for the stream after it
    /// was dropped go to the listener's next `accept` (or `incoming()`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming {
            op: MultiOp::new(op::AcceptMulti::new(self.socket.as_raw_fd())),
            kept: self.socket.kept(),
            listener: self.socket.as_raw_fd(),
        }
    }

    /// The address the listener is bound to (with the real port when 0 was asked).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(self.socket.local_addr()?)
    }

    /// Closes the listener through the ring and waits for the result.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(self) -> io::Result<()> {
        self.socket.close().await
    }
}

/// The stream of [`TcpListener::incoming`].
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct Incoming<'a> {
    pub(crate) op: MultiOp<op::AcceptMulti>,
    /// The listener's kept state, where connections accepted for a dropped stream go.
    kept: &'a super::kept::Kept,
    /// The listener's descriptor (borrowed with `kept`), for refusing clients past the limit.
    listener: RawFd,
}

impl Drop for Incoming<'_> {
    fn drop(&mut self) {
        // Connections the kernel accepted before the cancel ran go to the listener's next
        // `accept` (nothing accepted is closed while the listener lives).
        self.kept
            .park_stream(self.op.take(), super::kept::keep_accepted);
    }
}

impl Incoming<'_> {
    /// The next connection (`None` only if the stream ended for good, e.g. the runtime shut
    /// down).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a connection accepted for a dropped call is returned by the next
    /// one. If the `Incoming` itself is dropped, connections the kernel accepted before its cancel
    /// ran go to the listener's next `accept` (or `incoming()`).
    pub async fn next(&mut self) -> Option<io::Result<TcpStream>> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// A connection kept for the listener (accepted for a dropped call or stream) first, then
    /// the stream's own.
    fn poll_accept(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<TcpStream>>> {
        use super::kept::Outcome;
        use std::task::Poll;
        if !self.op.is_done() {
            match self.kept.poll_take(cx) {
                Poll::Ready(Some(Outcome::Accepted(fd, _))) => {
                    return Poll::Ready(Some(Ok(TcpStream::from_socket(Socket::from_fd(fd)))))
                }
                Poll::Ready(Some(Outcome::Failed(errno))) => {
                    return Poll::Ready(Some(Err(io::Error::from_raw_os_error(errno))))
                }
                Poll::Ready(Some(other)) => self.kept.put_back(other),
                Poll::Ready(None) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        let item = std::task::ready!(self.op.poll_next(cx));
        if let Some(Err(e)) = &item {
            // Past the descriptor limit: the waiting clients are refused, not left unanswered.
            super::refuse::refuse_waiting(self.listener, e);
        }
        Poll::Ready(item.map(|r| r.map(|fd| TcpStream::from_socket(Socket::from_fd(fd)))))
    }
}

impl futures::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<TcpStream>>> {
        self.poll_accept(cx)
    }
}

impl futures::Stream for RecvStream<'_> {
    type Item = io::Result<RingBuf>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<RingBuf>>> {
        self.poll_recv(cx)
    }
}

/// The stream of [`TcpStream::recv_stream`].
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct RecvStream<'a> {
    pub(crate) op: MultiOp<op::RecvMulti>,
    /// The stream's kept state: bytes of dropped reads, which come before this stream's.
    kept: &'a super::kept::Kept,
}

impl RecvStream<'_> {
    /// The next received buffer; `None` at end of stream.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a buffer received for a dropped call is returned by the next
    /// one. If the stream itself is dropped, the bytes it received before its cancel ran go to the
    /// stream's next [`TcpStream::read`](crate::net::TcpStream::read), in order.
    pub async fn next(&mut self) -> Option<io::Result<RingBuf>> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Bytes kept from a dropped read or receive stream come first, in order: they cannot be
    /// yielded as ring buffers, so while there are any the stream fails with `InvalidInput`
    /// (read them with [`TcpStream::read`]); while a dropped stream's receive is still ending,
    /// it waits.
    fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<RingBuf>>> {
        use std::task::Poll;
        if !self.op.is_done() {
            match self.kept.poll_take(cx) {
                Poll::Ready(Some(got)) => {
                    self.kept.put_back(got);
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "bytes received for a dropped read or recv_stream are kept: read them \
                         with TcpStream::read before starting a recv_stream",
                    ))));
                }
                Poll::Ready(None) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        self.op.poll_next(cx)
    }
}

/// A TCP connection. Reads and writes take buffers by value and give them back.
///
/// It also implements `futures::io::{AsyncRead, AsyncWrite}` (tokio's too, with feature
/// `tokio`) through two internal 16 KiB buffers made on first use: a read copies out of the
/// read buffer (a read abandoned while in flight keeps its bytes for the next call); a write
/// copies into the write buffer and returns at once while the kernel writes it (write-behind),
/// so a write future dropped at any point loses or duplicates nothing; `flush` waits for every
/// accepted byte, `close` flushes and shuts down the write half. Errors of a write-behind come
/// back from the next write, flush or close. Dropped with writes pending, the stream still
/// writes every accepted byte, in order, then closes (see the crate docs, "Poll-based I/O");
/// only `flush` and `close` report the errors of those writes.
#[derive(Debug)]
pub struct TcpStream {
    // Declared first: operations of the traits are dropped before the socket closes.
    io: PollSlots,
    socket: Socket,
}

impl TcpStream {
    pub(crate) fn from_socket(socket: Socket) -> TcpStream {
        TcpStream {
            io: PollSlots::default(),
            socket,
        }
    }

    read_methods!();
    write_methods!();

    /// Connects to `addr` (trying each resolved address in turn). A host name is resolved on
    /// the blocking pool (see [`ToSocketAddrs`](super::ToSocketAddrs)); a literal address
    /// takes no pool trip.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the connection being
    /// made is closed (never leaked); call it again.
    pub async fn connect(addr: impl super::ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for a in resolve_nonblocking(&addr).await? {
            let socket = Socket::new(domain_of(&a), libc::SOCK_STREAM).await?;
            match socket.connect(SockAddr::from_std(a)).await {
                Ok(()) => return Ok(TcpStream::from_socket(socket)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to connect to")))
    }

    /// [`connect`](Self::connect) within `timeout` for the host name lookup (if any) and all
    /// the addresses tried (as std's `connect_timeout`); each connect has the deadline linked
    /// to it in the kernel.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the connection being
    /// made is closed (never leaked); call it again.
    pub async fn connect_timeout(
        addr: impl super::ToSocketAddrs,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        let dl = deadline(timeout);
        // A host name lookup counts against the deadline too.
        let addrs = crate::time::timeout(timeout, resolve_nonblocking(&addr))
            .await
            .map_err(|_| hoop_driver::op::deadline_passed(timeout))??;
        let mut last = None;
        for a in addrs {
            let socket = Socket::new(domain_of(&a), libc::SOCK_STREAM).await?;
            match socket.connect_until(SockAddr::from_std(a), dl).await {
                Ok(()) => return Ok(TcpStream::from_socket(socket)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to connect to")))
    }

    /// Wraps a connected std stream.
    pub fn from_std(stream: std::net::TcpStream) -> TcpStream {
        TcpStream::from_socket(Socket::from_fd(OwnedFd::from(stream)))
    }

    /// A stream of received data in buffers of `ring`: one multishot recv (6.0) picks a ring
    /// buffer per arrival, so an idle connection holds no buffer. The stream ends at end of
    /// stream; running out of buffers pauses it (no data is lost) until a buffer is returned.
    /// On the epoll driver, or without kernel buffer rings, it is a loop of receives into
    /// buffers from the ring's free list.
    ///
    /// On an incrementally consumed ring ([`BufRing::new_incremental`], 6.12) each item is the
    /// part of a large buffer one receive filled; with bundles ([`BufRing::set_bundles`],
    /// 6.10) one receive may fill several buffers, yielded one by one. Either way the items
    /// are the stream's bytes in order, and an item may end mid-message.
    pub fn recv_stream(&self, ring: &BufRing) -> RecvStream<'_> {
        RecvStream {
            op: MultiOp::new(op::RecvMulti::new(self.socket.as_raw_fd(), ring.clone())),
            kept: self.socket.kept(),
        }
    }

    /// Sends up to `len` bytes of `file` from `offset` with `sendfile(2)`: the kernel moves
    /// them from the page cache into the socket with no copy through user memory (io_uring has
    /// no sendfile opcode). While the socket has no room the task waits through the driver
    /// (`IORING_OP_POLL_ADD` on io_uring); the call itself runs on this thread, so a file not
    /// in the page cache is read from disk here, as in nginx with `sendfile on` and no `aio`.
    /// Makes the socket non-blocking on first use. Returns the bytes sent (0 at end of file);
    /// call again for the rest.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, some bytes may have
    /// been sent, and how many is lost. In `select!`, keep the future across rounds.
    pub async fn send_file(
        &self,
        file: &impl std::os::fd::AsFd,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        self.socket.send_file(file.as_fd(), offset, len).await
    }

    /// Sends the initialized bytes of `buf` once with zero-copy send (`IORING_OP_SEND_ZC`);
    /// returns how many were sent, like [`write`](Self::write). The buffer comes back only
    /// after the kernel's notification that it no longer references the pages (for TCP, once
    /// the data was acknowledged), not merely after the send's result. Dropping the future in
    /// flight cancels the send; the driver then keeps the buffer until that notification.
    ///
    /// Without `SEND_ZC` (kernels before 6.0, the epoll driver) it is a plain send. Zero copy
    /// pays off for large buffers; for small ones a plain [`write`](Self::write) is cheaper.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn send_zc<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        let mut op = MultiOp::new(op::SendZc::new(self.socket.as_raw_fd(), buf));
        loop {
            // One item (the send's result), then the end: the notification CQE.
            while op.next().await.is_some() {}
            match op.into_data() {
                Ok(data) => return data.into_result(),
                // Not reachable once the stream ended; if it were, wait for the end again.
                Err(again) => op = again,
            }
        }
    }

    /// Sends every initialized byte of `buf` with [`send_zc`](Self::send_zc), in as many sends
    /// as it takes.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn send_zc_all<B: IoBuf>(&self, buf: B) -> BufResult<(), B> {
        let total = buf.bytes_init();
        let mut sent = 0;
        let mut buf = buf;
        while sent < total {
            let (res, slice) = self.send_zc(buf.slice(sent..total)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    return (
                        Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "failed to write whole buffer",
                        )),
                        buf,
                    )
                }
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.socket
            .set_opt(libc::IPPROTO_TCP, libc::TCP_NODELAY, i32::from(on))
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(self
            .socket
            .get_opt::<i32>(libc::IPPROTO_TCP, libc::TCP_NODELAY)?
            != 0)
    }

    /// Sets `SO_LINGER` (`Some(0)` makes close send a reset).
    pub fn set_linger(&self, linger: Option<std::time::Duration>) -> io::Result<()> {
        let l = libc::linger {
            l_onoff: i32::from(linger.is_some()),
            l_linger: linger.map_or(0, |d| d.as_secs() as i32),
        };
        self.socket.set_opt(libc::SOL_SOCKET, libc::SO_LINGER, l)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(self.socket.local_addr()?)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(self.socket.peer_addr()?)
    }

    /// Flushes what `AsyncWrite` accepted, then closes the connection through the ring and
    /// waits for the result: the first error of the two.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(mut self) -> io::Result<()> {
        let flushed = std::future::poll_fn(|cx| {
            let (fd, io) = self.poll_io();
            io.poll_flush(fd, cx)
        })
        .await;
        let closed = self.socket.take().close().await;
        flushed.and(closed)
    }
}

macro_rules! fd_traits {
    ($t:ident, stream) => {
        $crate::net::tcp::fd_traits!(@common $t);
        impl FromRawFd for $t {
            /// # Safety
            /// `fd` must be an open socket of the right kind that the caller owns.
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                // SAFETY: the caller gives up ownership of an open fd.
                Self::from_socket(Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }))
            }
        }
    };
    ($t:ident) => {
        $crate::net::tcp::fd_traits!(@common $t);
        impl FromRawFd for $t {
            /// # Safety
            /// `fd` must be an open socket of the right kind that the caller owns.
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                Self {
                    // SAFETY: the caller gives up ownership of an open fd.
                    socket: Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }),
                }
            }
        }
    };
    (@common $t:ident) => {
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.socket.as_raw_fd()
            }
        }
        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.socket.as_fd()
            }
        }
        impl IntoRawFd for $t {
            fn into_raw_fd(mut self) -> RawFd {
                self.socket.take().into_raw_fd()
            }
        }
        impl From<$t> for OwnedFd {
            fn from(mut s: $t) -> OwnedFd {
                s.socket.take().into_owned()
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use fd_traits;

fd_traits!(TcpListener);
fd_traits!(TcpStream, stream);
split_halves!(TcpStream, SocketAddr, ip_addr);

impl TcpStream {
    /// Reads into a buffer of a [`FixedBufPool`](crate::FixedBufPool) (a
    /// [`FixedBuf`](crate::FixedBuf) or a slice of one), from its start up to its capacity;
    /// `Ok(0)` is end of stream. `READ_FIXED` when the pool is registered with this thread's
    /// ring, else a plain read into the same memory.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: bytes received for a dropped call are lost with its
    /// registered buffer. In `select!`, use [`read`](Self::read).
    pub async fn read_fixed<B>(&self, buf: B) -> BufResult<usize, B>
    where
        B: hoop_driver::FixedIoBuf + IoBufMut,
    {
        let fd = self.socket.as_raw_fd();
        hoop_driver::Op::new(op::ReadFixed::new(fd, buf, op::CURRENT_POS)).await
    }

    /// Writes the initialized bytes of a buffer of a [`FixedBufPool`](crate::FixedBufPool)
    /// once; returns how many were sent (maybe fewer: write the rest from
    /// `buf.slice(n..len)`). `WRITE_FIXED` when the pool is registered with this thread's ring,
    /// else a plain write. Like `write(2)`, a write to a connection the peer closed raises
    /// `SIGPIPE` unless the process ignores it (Rust programs do by default) and fails with
    /// `BrokenPipe`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, write through
    /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
    /// which takes bytes only when it returns them as written and then sends them even if the
    /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
    /// dropping it.
    pub async fn write_fixed<B>(&self, buf: B) -> BufResult<usize, B>
    where
        B: hoop_driver::FixedIoBuf,
    {
        let fd = self.socket.as_raw_fd();
        hoop_driver::Op::new(op::WriteFixed::new(fd, buf, op::CURRENT_POS)).await
    }
}

#[cfg(test)]
mod ring_tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use super::{TcpListener, TcpStream};
    use crate::{BufRing, DriverKind};

    /// What each connection received: (its index, the bytes).
    type Received = Rc<RefCell<Vec<(usize, Vec<u8>)>>>;

    /// Receives waiting on idle connections hold no buffer of the ring (on epoll too,
    /// where the ring is a free list in user memory and each arm used to take its buffer when
    /// armed), so a connection that has data is served however many idle ones outnumber the
    /// ring's buffers. Before, the first four idle streams held all four buffers and the
    /// fifth connection's data was never received.
    #[test]
    fn idle_receives_hold_no_buffer_and_starve_no_one() {
        for kind in [DriverKind::Epoll, DriverKind::Uring] {
            let Ok(rt) = crate::Runtime::builder().driver(kind).build() else {
                eprintln!("skipped on {kind}: no such driver here");
                continue;
            };
            rt.block_on(async {
                let ring = BufRing::new(4, 256).expect("ring");
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let addr = listener.local_addr().expect("addr");
                let got: Received = Rc::default();
                let mut clients = Vec::new();
                let mut tasks = Vec::new();
                const CONNS: usize = 16;
                for i in 0..CONNS {
                    clients.push(TcpStream::connect(addr).await.expect("connect"));
                    let (s, _) = listener.accept().await.expect("accept");
                    let (ring, got) = (ring.clone(), got.clone());
                    tasks.push(crate::spawn(async move {
                        let mut rx = s.recv_stream(&ring);
                        // Bounded: the test sends one message per connection.
                        for _ in 0..4 {
                            match rx.next().await {
                                Some(Ok(buf)) => got.borrow_mut().push((i, buf.to_vec())),
                                _ => break,
                            }
                        }
                    }));
                }
                // Every stream armed and waiting.
                crate::time::sleep(Duration::from_millis(50)).await;
                assert_eq!(ring.available(), 4, "{kind}: idle receives hold no buffer");
                let last = &clients[CONNS - 1];
                let (res, _) = last.write_all(b"hello".to_vec()).await;
                res.expect("write");
                let until = Instant::now() + Duration::from_secs(5);
                while got.borrow().is_empty() && Instant::now() < until {
                    crate::time::sleep(Duration::from_millis(5)).await;
                }
                assert_eq!(
                    got.borrow().as_slice(),
                    &[(CONNS - 1, b"hello".to_vec())],
                    "{kind}: the data of the last connection was received"
                );
                assert_eq!(ring.available(), 4, "{kind}: the buffer went back");
                for t in tasks {
                    t.abort();
                }
            });
        }
    }
}
