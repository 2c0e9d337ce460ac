//! The socket every net type wraps: an owned fd whose operations go through the ring.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use std::time::{Duration, Instant};

use hoop_driver::error::cvt_libc;
use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, BufResult, Home, IoBuf, IoBufMut, Op, SockAddr};

use super::kept::{Keep, Keepable, Local};
use crate::io_util::{fill_exact, until_done};

/// An owned socket. Dropping it closes the fd through the ring (`IORING_OP_CLOSE`, submitted on
/// this tick) or with `close(2)` outside a runtime.
#[derive(Debug)]
pub(crate) struct Socket {
    /// What receives whose futures were dropped left for the next one (`kept`).
    kept: super::kept::Kept,
    fd: Option<OwnedFd>,
    /// The driver whose SQ may hold SQEs naming the fd: the fd leaves hoop only once they
    /// are submitted, else a reused fd number would get them (see [`Home`]).
    home: Option<Home>,
    /// Whether [`send_file`](Self::send_file) made the fd non-blocking already.
    nonblocking: std::sync::atomic::AtomicBool,
    /// This socket's owned-buffer sends on the ring (queued or in flight): while there is one,
    /// the next send queues behind it rather than going inline, so bytes keep their order
    /// (`crate::send_path`).
    ring_sends: std::sync::atomic::AtomicU32,
}

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
    pub(crate) fn from_fd(fd: OwnedFd) -> Socket {
        Socket {
            kept: Default::default(),
            fd: Some(fd),
            home: Home::current(),
            nonblocking: std::sync::atomic::AtomicBool::new(false),
            ring_sends: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// A new socket through the ring (`IORING_OP_SOCKET`).
    pub(crate) async fn new(domain: i32, ty: i32) -> io::Result<Socket> {
        let fd = Op::new(op::Socket::new(domain, ty, 0)).await?;
        Ok(Socket::from_fd(fd))
    }

    /// A new socket with `socket(2)`, for the synchronous constructors (`bind`).
    pub(crate) fn new_sync(domain: i32, ty: i32) -> io::Result<Socket> {
        // SAFETY: socket(2) has no memory-safety preconditions.
        let fd = cvt_libc(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: socket returned a new fd nothing else owns.
        Ok(Socket::from_fd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// What dropped receives left for the next one.
    pub(crate) fn kept(&self) -> &super::kept::Kept {
        &self.kept
    }

    /// Moves the fd (and its home) out into a new `Socket`, leaving this one empty (its drop
    /// then closes nothing): for the drops and conversions of types that have a `Drop` of their
    /// own. Receives parked by dropped calls go with it (a split stream's halves adopt them;
    /// a detached writer cancels them when it drops the socket, ahead of the close).
    pub(crate) fn take(&mut self) -> Socket {
        Socket {
            kept: std::mem::take(&mut self.kept),
            fd: self.fd.take(),
            home: self.home.take(),
            nonblocking: std::sync::atomic::AtomicBool::new(
                self.nonblocking.load(std::sync::atomic::Ordering::Relaxed),
            ),
            // `&mut self`: no send future borrows this socket, none of its sends is counted.
            ring_sends: std::sync::atomic::AtomicU32::new(0),
        }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    pub(crate) fn set_opt<T>(&self, level: i32, name: i32, value: T) -> io::Result<()> {
        // SAFETY: passes a pointer to a live `T` and its exact size.
        let r = unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (&value as *const T).cast(),
                mem::size_of::<T>() as libc::socklen_t,
            )
        };
        cvt_libc(r).map(drop)
    }

    pub(crate) fn get_opt<T: Copy>(&self, level: i32, name: i32) -> io::Result<T> {
        let mut value = mem::MaybeUninit::<T>::zeroed();
        let mut len = mem::size_of::<T>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `value`.
        let r = unsafe {
            libc::getsockopt(self.raw(), level, name, value.as_mut_ptr().cast(), &mut len)
        };
        cvt_libc(r)?;
        // SAFETY: zero-initialised, then (partly) written by the kernel: a valid `T` for the
        // integer types this is used with.
        Ok(unsafe { value.assume_init() })
    }

    pub(crate) fn bind(&self, addr: &SockAddr) -> io::Result<()> {
        // SAFETY: the address pointer and length describe a live sockaddr.
        cvt_libc(unsafe { libc::bind(self.raw(), addr.as_ptr(), addr.len()) }).map(drop)
    }

    /// Listens; keeps a descriptor in reserve for refusing clients past the limit (`refuse`).
    pub(crate) fn listen(&self, backlog: i32) -> io::Result<()> {
        super::refuse::keep_reserve();
        // SAFETY: listen(2) has no memory-safety preconditions.
        cvt_libc(unsafe { libc::listen(self.raw(), backlog) }).map(drop)
    }

    pub(crate) fn local_addr(&self) -> io::Result<SockAddr> {
        self.name(libc::getsockname)
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SockAddr> {
        self.name(libc::getpeername)
    }

    fn name(
        &self,
        f: unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32,
    ) -> io::Result<SockAddr> {
        let mut addr = SockAddr::empty();
        let mut len = addr.len();
        // SAFETY: the kernel writes at most `len` bytes into the address storage.
        cvt_libc(unsafe { f(self.raw(), addr.as_mut_ptr(), &mut len) })?;
        Ok(addr.with_len(len))
    }

    pub(crate) async fn connect(&self, addr: SockAddr) -> io::Result<()> {
        self.connect_until(addr, None).await
    }

    pub(crate) async fn connect_until(&self, addr: SockAddr, dl: Dl) -> io::Result<()> {
        run(op::Connect::new(self.raw(), addr), dl).await
    }

    pub(crate) async fn accept(&self) -> io::Result<(Socket, SockAddr)> {
        self.accept_until(None).await
    }

    /// Accepts a connection; one accepted for a dropped call comes first (`kept`).
    /// Past the descriptor limit the waiting clients are refused (`refuse`), and the error
    /// returned.
    pub(crate) async fn accept_until(&self, dl: Dl) -> io::Result<(Socket, SockAddr)> {
        let (fd, addr) = self
            .keep(op::Accept::new(self.raw()), dl, false)
            .await
            .inspect_err(|e| {
                super::refuse::refuse_waiting(self.raw(), e);
            })?;
        Ok((Socket::from_fd(fd), addr))
    }

    /// Reads a stream: bytes a dropped read received come first, in order (`kept`).
    ///
    /// Not `recv_until(buf, None)`: a future holds room for every branch it may take, and the
    /// deadline's would make this one (and every task parked in it) larger for nothing.
    pub(crate) async fn recv<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        let peer = || self.peer_addr().ok();
        Keep::new(
            &self.kept,
            op::Recv::new(self.raw(), buf, 0),
            Local,
            true,
            peer,
        )
        .await
    }

    pub(crate) async fn recv_until<B: IoBufMut>(&self, buf: B, dl: Dl) -> BufResult<usize, B> {
        self.keep(op::Recv::new(self.raw(), buf, 0), dl, true).await
    }

    /// Receives one datagram: those a dropped receive got come first (`kept`).
    pub(crate) async fn recv_datagram_until<B: IoBufMut>(
        &self,
        buf: B,
        dl: Dl,
    ) -> BufResult<usize, B> {
        self.keep(op::Recv::new(self.raw(), buf, 0), dl, false)
            .await
    }

    /// Runs the receive `op` through the socket's kept state (see `kept`), with a deadline
    /// linked to it if `dl`.
    async fn keep<T>(&self, op: T, dl: Dl, stream: bool) -> T::Output
    where
        T: Keepable,
        T::Output: op::TimedOut,
        op::Deadline<T>: UringOp + EpollOp,
    {
        let peer = || self.peer_addr().ok();
        match dl {
            None => Keep::new(&self.kept, op, Local, stream, peer).await,
            Some((at, total)) => {
                let left = at.saturating_duration_since(Instant::now());
                let op = op::Deadline::new(op, left).reporting(total);
                Keep::new(&self.kept, op, Local, stream, peer).await
            }
        }
    }

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

    /// Receives exactly `buf.bytes_to_fill()` bytes (its length, or a slice's view), or fails
    /// with `UnexpectedEof` if the peer closes first.
    pub(crate) async fn recv_exact<B: IoBufMut>(&self, buf: B) -> BufResult<(), B> {
        self.recv_exact_until(buf, None).await
    }

    /// [`recv_exact`](Self::recv_exact) within one deadline for the whole buffer.
    pub(crate) async fn recv_exact_until<B: IoBufMut>(&self, buf: B, dl: Dl) -> BufResult<(), B> {
        let msg = "connection closed before the buffer was filled";
        fill_exact(buf, msg, |s, _| self.recv_until(s, dl)).await
    }

    pub(crate) async fn send_to<B: IoBuf>(&self, buf: B, addr: SockAddr) -> BufResult<usize, B> {
        self.send_to_until(buf, addr, None).await
    }

    pub(crate) async fn send_to_until<B: IoBuf>(
        &self,
        buf: B,
        addr: SockAddr,
        dl: Dl,
    ) -> BufResult<usize, B> {
        self.datagram_until(buf, Some(addr), dl).await
    }

    /// Sends one datagram to the connected peer.
    pub(crate) async fn send_datagram<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        self.datagram_until(buf, None, None).await
    }

    /// [`send_datagram`](Self::send_datagram) with a deadline.
    pub(crate) async fn send_datagram_until<B: IoBuf>(
        &self,
        buf: B,
        dl: Dl,
    ) -> BufResult<usize, B> {
        self.datagram_until(buf, None, dl).await
    }

    /// Sends the initialized bytes of `buf` as one datagram, to `addr` or the connected peer.
    ///
    /// Each send carries `MSG_DONTWAIT`, so io_uring never retries one itself: its retry after
    /// `EAGAIN` reuses an iterator a Unix datagram send has consumed already (the payload is
    /// copied before the peer's queue is found full), and sends an empty datagram (DESIGN.md,
    /// "Datagrams on both drivers"). On `EAGAIN` this waits for room (`POLLOUT`) and sends
    /// afresh. A socket not connected to its target is writable by `poll` even while the
    /// target's queue is full (the kernel wakes only connected senders when it drains), so a
    /// send that still finds no room after the poll backs off (a timer, from 20 µs doubling up
    /// to 2 ms) before the next try. The epoll driver waits for room inside the send (on a
    /// timer likewise, for a send to an address) and never says `EAGAIN`.
    ///
    /// A datagram goes whole or not at all: a send reporting fewer bytes (which the kernel
    /// never does) is an error here, never a short count.
    async fn datagram_until<B: IoBuf>(
        &self,
        buf: B,
        addr: Option<SockAddr>,
        dl: Dl,
    ) -> BufResult<usize, B> {
        const FIRST_BACKOFF: Duration = Duration::from_micros(20);
        const MAX_BACKOFF: Duration = Duration::from_millis(2);
        let len = buf.bytes_init();
        let fd = self.raw();
        let mut buf = buf;
        let mut backoff = Duration::ZERO;
        loop {
            let (res, b) = match addr {
                None => run(op::Send::new(fd, buf, libc::MSG_DONTWAIT), dl).await,
                Some(addr) => {
                    let send = op::SendMsg::new(fd, buf, addr).flags(libc::MSG_DONTWAIT);
                    run(send, dl).await
                }
            };
            buf = b;
            match res {
                Ok(n) if n == len => return (Ok(n), buf),
                Ok(n) => {
                    let e = io::Error::other(format!("datagram send reported {n} of {len} bytes"));
                    return (Err(e), buf);
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(e) => return (Err(e), buf),
            }
            if !backoff.is_zero() {
                // The poll said "room" and there was none: the target's queue is full.
                let wait = match dl {
                    Some((at, _)) => backoff.min(at.saturating_duration_since(Instant::now())),
                    None => backoff,
                };
                crate::time::sleep(wait).await;
            }
            if let Err(e) = run(op::PollOnce::writable(fd), dl).await {
                return (Err(e), buf);
            }
            backoff = if backoff.is_zero() {
                FIRST_BACKOFF
            } else {
                (backoff * 2).min(MAX_BACKOFF)
            };
        }
    }

    pub(crate) async fn recv_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SockAddr), B> {
        self.recv_from_until(buf, None).await
    }

    /// Peeks at the next datagram and its source (`MSG_PEEK`): it stays queued, and one a
    /// dropped receive already took (kept) is the one shown.
    pub(crate) async fn peek_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SockAddr), B> {
        let peer = || self.peer_addr().ok();
        let peek = op::RecvMsg::new(self.raw(), buf).flags(libc::MSG_PEEK);
        match super::kept::peek_kept(&self.kept, peek, peer).await {
            Ok(out) => out,
            Err(peek) => Op::new(peek).await,
        }
    }

    pub(crate) async fn recv_from_until<B: IoBufMut>(
        &self,
        buf: B,
        dl: Dl,
    ) -> BufResult<(usize, SockAddr), B> {
        self.keep(op::RecvMsg::new(self.raw(), buf), dl, false)
            .await
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        Op::new(op::Shutdown::new(self.raw(), how)).await
    }

    /// `shutdown(2)` now, with a system call (a dropped write half's, which cannot wait).
    /// Errors (a peer already gone) are of no use there and ignored.
    pub(crate) fn shutdown_now(&self, how: i32) {
        // SAFETY: shutdown(2) on an fd `self` keeps open; no pointers.
        let _ = unsafe { libc::shutdown(self.raw(), how) };
    }

    /// Closes the socket through the ring and waits for the result.
    pub(crate) async fn close(mut self) -> io::Result<()> {
        self.kept.clear();
        match self.fd.take() {
            Some(fd) if self.home.as_ref().is_some_and(|h| !h.is_here()) => {
                // Another thread's ring may hold SQEs naming the fd: it closes the fd behind
                // them.
                Home::close(self.home.as_ref(), fd);
                Ok(())
            }
            Some(fd) => Op::new(op::Close::new(fd)).await,
            None => Ok(()),
        }
    }

    /// Gives the fd up, after every SQE naming it was submitted (see [`Home::release`]).
    pub(crate) fn into_owned(mut self) -> OwnedFd {
        self.kept.clear();
        let fd = self.fd.take().expect("socket fd present until drop");
        Home::release(self.home.as_ref(), fd)
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

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd stays open as long as `self` (it is only taken by value).
        unsafe { BorrowedFd::borrow_raw(self.raw()) }
    }
}

impl IntoRawFd for Socket {
    fn into_raw_fd(self) -> RawFd {
        self.into_owned().into_raw_fd()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The poll-based traits' state went first (the stream types' drops: a write-behind
        // finished by a detached writer that drops this socket after it, or cancelled before
        // it), so the close queues behind their operations; so do the cancels of receives
        // parked by dropped calls.
        self.kept.clear();
        if let Some(fd) = self.fd.take() {
            Home::close(self.home.as_ref(), fd);
        }
    }
}

/// Resolves `addr` (like std's `ToSocketAddrs`, synchronously).
pub(crate) fn resolve(addr: impl std::net::ToSocketAddrs) -> io::Result<Vec<std::net::SocketAddr>> {
    let v: Vec<_> = addr.to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(v)
}

pub(crate) fn domain_of(addr: &std::net::SocketAddr) -> i32 {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

pub(crate) fn ip_addr(addr: SockAddr) -> io::Result<std::net::SocketAddr> {
    addr.as_socket_addr().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not an IP address: {addr:?}"),
        )
    })
}

/// A deadline for an operation (or for every step of a longer one): when it passes, and the
/// whole timeout (which the error names).
pub(crate) type Dl = Option<(Instant, Duration)>;

/// The deadline `timeout` from now.
pub(crate) fn deadline(timeout: Duration) -> Dl {
    Some((Instant::now() + timeout, timeout))
}

/// Runs `op`; with a deadline, linked to it in the kernel (`IORING_OP_LINK_TIMEOUT`; the timer
/// heap on epoll): if it passes first the operation is cancelled, its buffer comes back, and it
/// fails with `TimedOut` ("deadline of 200 ms passed").
pub(crate) async fn run<T>(op: T, dl: Dl) -> T::Output
where
    T: op::OpCode + UringOp + EpollOp,
    T::Output: op::TimedOut,
{
    match dl {
        None => Op::new(op).await,
        Some((at, total)) => {
            let left = at.saturating_duration_since(Instant::now());
            Op::new(op::Deadline::new(op, left).reporting(total)).await
        }
    }
}

/// The addresses [`TcpStream::connect`](super::TcpStream::connect) takes: what std's
/// `ToSocketAddrs` takes for sockets (`SocketAddr`, `SocketAddrV4`/`V6`, `(IpAddr, u16)`,
/// `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`, `&[SocketAddr]`, `&str`, `String`, `(&str, u16)`,
/// `(String, u16)`, and references to these). A literal address is parsed in place; a host
/// name (`"localhost:8080"`, `("example.com", 443)`) is resolved with the system resolver on
/// the runtime's blocking pool ([`spawn_blocking`](crate::spawn_blocking)), so the lookup
/// never stalls the ring's thread. Sealed: implemented for those types only.
pub trait ToSocketAddrs: sealed::Sealed {}

pub(crate) mod sealed {
    use std::io;
    use std::net::SocketAddr;

    /// What an address gives: its socket addresses now, or a host name to look up.
    pub enum Resolve {
        /// No lookup needed.
        Ready(io::Result<Vec<SocketAddr>>),
        /// `"host:port"`, for the system resolver.
        HostPort(String),
        /// A host name and a port, for the system resolver.
        Host(String, u16),
    }

    pub trait Sealed {
        fn resolve(&self) -> Resolve;
    }
}

use sealed::Resolve;

macro_rules! ready_addrs {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {
            fn resolve(&self) -> Resolve {
                Resolve::Ready(
                    std::net::ToSocketAddrs::to_socket_addrs(self).map(|i| i.collect()),
                )
            }
        }
        impl ToSocketAddrs for $t {}
    )*};
}

ready_addrs!(
    std::net::SocketAddr,
    std::net::SocketAddrV4,
    std::net::SocketAddrV6,
    (std::net::IpAddr, u16),
    (std::net::Ipv4Addr, u16),
    (std::net::Ipv6Addr, u16)
);

impl sealed::Sealed for [std::net::SocketAddr] {
    fn resolve(&self) -> Resolve {
        Resolve::Ready(Ok(self.to_vec()))
    }
}
impl ToSocketAddrs for [std::net::SocketAddr] {}

impl sealed::Sealed for str {
    fn resolve(&self) -> Resolve {
        match self.parse::<std::net::SocketAddr>() {
            Ok(a) => Resolve::Ready(Ok(vec![a])),
            Err(_) => Resolve::HostPort(self.to_owned()),
        }
    }
}
impl ToSocketAddrs for str {}

impl sealed::Sealed for String {
    fn resolve(&self) -> Resolve {
        self.as_str().resolve()
    }
}
impl ToSocketAddrs for String {}

impl sealed::Sealed for (&str, u16) {
    fn resolve(&self) -> Resolve {
        match self.0.parse::<std::net::IpAddr>() {
            Ok(ip) => Resolve::Ready(Ok(vec![std::net::SocketAddr::new(ip, self.1)])),
            Err(_) => Resolve::Host(self.0.to_owned(), self.1),
        }
    }
}
impl ToSocketAddrs for (&str, u16) {}

impl sealed::Sealed for (String, u16) {
    fn resolve(&self) -> Resolve {
        (self.0.as_str(), self.1).resolve()
    }
}
impl ToSocketAddrs for (String, u16) {}

impl<T: sealed::Sealed + ?Sized> sealed::Sealed for &T {
    fn resolve(&self) -> Resolve {
        (**self).resolve()
    }
}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}

/// Resolves `addr` for a connect: literal addresses at once, host names on the blocking pool
/// (std's resolver there, so the ring's thread never blocks on DNS).
pub(crate) async fn resolve_nonblocking(
    addr: &(impl ToSocketAddrs + ?Sized),
) -> io::Result<Vec<std::net::SocketAddr>> {
    lookup(addr.resolve()).await
}

/// Finishes what [`sealed::Sealed::resolve`] started: the addresses it found, or the system
/// resolver's lookup of its host name on the blocking pool. Owns everything it needs (a
/// `Send + 'static` future), so a caller can take the address by reference, call `resolve`
/// at once and return this.
pub(crate) async fn lookup(found: Resolve) -> io::Result<Vec<std::net::SocketAddr>> {
    let found = match found {
        Resolve::Ready(r) => r?,
        Resolve::HostPort(s) => {
            crate::spawn_blocking(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&s).map(|i| i.collect::<Vec<_>>())
            })
            .await??
        }
        Resolve::Host(h, port) => {
            crate::spawn_blocking(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&(h.as_str(), port))
                    .map(|i| i.collect::<Vec<_>>())
            })
            .await??
        }
    };
    if found.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(found)
}
