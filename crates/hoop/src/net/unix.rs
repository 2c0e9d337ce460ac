//! Unix-domain sockets: listeners, streams and datagram sockets.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use hoop_driver::{BufResult, IoBuf, IoBufMut, SockAddr};

use super::socket::{deadline, Socket};
use super::split::{read_methods, split_halves, write_methods, PollSlots};
use super::tcp::{fd_traits, into_std};

/// The address of a Unix-domain socket: a path, unnamed, or in the abstract namespace.
#[derive(Clone, PartialEq, Eq)]
pub struct UnixSocketAddr {
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    Unnamed,
    Pathname(PathBuf),
    Abstract,
}

impl UnixSocketAddr {
    fn from_sockaddr(addr: SockAddr) -> io::Result<UnixSocketAddr> {
        let path = addr.as_unix_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a Unix-domain address: {addr:?}"),
            )
        })?;
        let family_len = std::mem::size_of::<libc::sa_family_t>() as libc::socklen_t;
        let kind = if addr.len() <= family_len {
            Kind::Unnamed
        } else if path.as_os_str().is_empty() {
            // A name that starts with a NUL byte.
            Kind::Abstract
        } else {
            Kind::Pathname(path)
        };
        Ok(UnixSocketAddr { kind })
    }

    /// The path the socket is bound to, if it is bound to one.
    pub fn as_pathname(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Pathname(p) => Some(p),
            _ => None,
        }
    }

    /// Whether the socket is unnamed (not bound: a `pair()` or a connecting client).
    pub fn is_unnamed(&self) -> bool {
        matches!(self.kind, Kind::Unnamed)
    }
}

impl fmt::Debug for UnixSocketAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Unnamed => write!(f, "(unnamed)"),
            Kind::Pathname(p) => write!(f, "{p:?} (pathname)"),
            Kind::Abstract => write!(f, "(abstract)"),
        }
    }
}

fn unix_addr(path: &Path) -> io::Result<SockAddr> {
    SockAddr::unix(path).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path too long for a Unix-domain socket: {}", path.display()),
        )
    })
}

/// A Unix-domain socket listening for connections.
#[derive(Debug)]
pub struct UnixListener {
    socket: Socket,
}

impl UnixListener {
    /// Creates a socket file at `path` and listens on it (backlog
    /// [`DEFAULT_BACKLOG`](crate::net::DEFAULT_BACKLOG), capped by the kernel at
    /// `net.core.somaxconn`; [`set_backlog`](Self::set_backlog) sets another). Like std, fails with
    /// `AddrInUse` if the file exists: nothing is unlinked. Async like `TcpListener::bind`
    /// and `UdpSocket::bind`; [`bind_sync`](Self::bind_sync) works outside a runtime.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it does not wait on the kernel, and a socket it made is closed
    /// if it is dropped.
    pub async fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        Self::bind_sync(path)
    }

    /// The synchronous form of [`bind`](Self::bind), usable outside a runtime.
    pub fn bind_sync(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let addr = unix_addr(path.as_ref())?;
        let socket = Socket::new_sync(libc::AF_UNIX, libc::SOCK_STREAM)?;
        socket.bind(&addr)?;
        socket.listen(crate::net::backlog::listen_arg(crate::net::DEFAULT_BACKLOG))?;
        Ok(UnixListener { socket })
    }

    /// Sets the listen backlog (`listen(2)` again; connections already queued stay). 0
    /// counts as 1; the kernel caps it at `net.core.somaxconn`.
    pub fn set_backlog(&self, backlog: u32) -> io::Result<()> {
        self.socket.listen(crate::net::backlog::listen_arg(backlog))
    }

    /// Wraps a std listener (blocking or not: io_uring does not care).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> UnixListener {
        UnixListener {
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
    pub async fn accept(&self) -> io::Result<(UnixStream, UnixSocketAddr)> {
        let (socket, addr) = self.socket.accept().await?;
        Ok((
            UnixStream::from_socket(socket),
            UnixSocketAddr::from_sockaddr(addr)?,
        ))
    }

    /// [`accept`](Self::accept) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if no connection came within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no connection is lost: one the kernel accepted for it is returned by the
    /// next `accept` (or `incoming()`) on this listener, on both drivers.
    pub async fn accept_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> io::Result<(UnixStream, UnixSocketAddr)> {
        let (socket, addr) = self.socket.accept_until(deadline(timeout)).await?;
        Ok((
            UnixStream::from_socket(socket),
            UnixSocketAddr::from_sockaddr(addr)?,
        ))
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<UnixSocketAddr> {
        UnixSocketAddr::from_sockaddr(self.socket.local_addr()?)
    }

    /// Closes the listener through the ring and waits for the result. The socket file stays.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(self) -> io::Result<()> {
        self.socket.close().await
    }
}

/// A Unix-domain stream connection. Reads and writes take buffers by value and give them back.
///
/// Its `AsyncRead`/`AsyncWrite` work as [`TcpStream`](crate::net::TcpStream)'s: write-behind,
/// and dropped with writes pending it still writes every accepted byte, in order, then closes;
/// only `flush` and `close` report the errors of those writes.
#[derive(Debug)]
pub struct UnixStream {
    // Declared first: operations of the traits are dropped before the socket closes.
    io: PollSlots,
    socket: Socket,
}

impl UnixStream {
    pub(crate) fn from_socket(socket: Socket) -> UnixStream {
        UnixStream {
            io: PollSlots::default(),
            socket,
        }
    }

    read_methods!();
    write_methods!();

    /// Connects to the socket at `path` (socket and connect both on the ring).
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the connection being
    /// made is closed (never leaked); call it again.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let addr = unix_addr(path.as_ref())?;
        let socket = Socket::new(libc::AF_UNIX, libc::SOCK_STREAM).await?;
        socket.connect(addr).await?;
        Ok(UnixStream::from_socket(socket))
    }

    /// A pair of connected, unnamed streams (`socketpair`).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream::from_std(a), UnixStream::from_std(b)))
    }

    /// Wraps a connected std stream.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> UnixStream {
        UnixStream::from_socket(Socket::from_fd(OwnedFd::from(stream)))
    }

    /// The local address (unnamed for a connecting client or a `pair()`).
    pub fn local_addr(&self) -> io::Result<UnixSocketAddr> {
        UnixSocketAddr::from_sockaddr(self.socket.local_addr()?)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<UnixSocketAddr> {
        UnixSocketAddr::from_sockaddr(self.socket.peer_addr()?)
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

/// A Unix-domain datagram socket.
#[derive(Debug)]
pub struct UnixDatagram {
    socket: Socket,
}

impl UnixDatagram {
    /// Creates a socket file at `path` and binds to it. Fails with `AddrInUse` if the file
    /// exists.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        let addr = unix_addr(path.as_ref())?;
        let socket = Socket::new_sync(libc::AF_UNIX, libc::SOCK_DGRAM)?;
        socket.bind(&addr)?;
        Ok(UnixDatagram { socket })
    }

    /// A socket bound to no address (it can send, and receive replies only if connected).
    pub fn unbound() -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            socket: Socket::new_sync(libc::AF_UNIX, libc::SOCK_DGRAM)?,
        })
    }

    /// A pair of connected, unnamed datagram sockets (`socketpair`).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = std::os::unix::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::from_std(a), UnixDatagram::from_std(b)))
    }

    /// Wraps a std datagram socket.
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> UnixDatagram {
        UnixDatagram {
            socket: Socket::from_fd(OwnedFd::from(socket)),
        }
    }

    /// Sets the default peer: [`send`](Self::send) goes there and [`recv`](Self::recv) only
    /// takes datagrams from there.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the default peer may or may not be set; calling it
    /// again is harmless.
    pub async fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let addr = unix_addr(path.as_ref())?;
        self.socket.connect(addr).await
    }

    /// Sends the initialized bytes of `buf` as one datagram to the connected peer.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        self.socket.send_datagram(buf).await
    }

    /// Receives one datagram into `buf` (from its start, up to its capacity).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        self.socket.recv_datagram_until(buf, None).await
    }

    /// [`send`](Self::send) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if it did not complete within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send_timeout<B: IoBuf>(
        &self,
        buf: B,
        timeout: std::time::Duration,
    ) -> BufResult<usize, B> {
        self.socket
            .send_datagram_until(buf, deadline(timeout))
            .await
    }

    /// [`recv`](Self::recv) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if no datagram came within `timeout`; the buffer comes
    /// back either way.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv_timeout<B: IoBufMut>(
        &self,
        buf: B,
        timeout: std::time::Duration,
    ) -> BufResult<usize, B> {
        self.socket
            .recv_datagram_until(buf, deadline(timeout))
            .await
    }

    /// [`send_to`](Self::send_to) with a deadline linked to it in the kernel.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send_to_timeout<B: IoBuf>(
        &self,
        buf: B,
        path: impl AsRef<Path>,
        timeout: std::time::Duration,
    ) -> BufResult<usize, B> {
        match unix_addr(path.as_ref()) {
            Ok(addr) => {
                self.socket
                    .send_to_until(buf, addr, deadline(timeout))
                    .await
            }
            Err(e) => (Err(e), buf),
        }
    }

    /// [`recv_from`](Self::recv_from) with a deadline linked to it in the kernel.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv_from_timeout<B: IoBufMut>(
        &self,
        buf: B,
        timeout: std::time::Duration,
    ) -> BufResult<(usize, UnixSocketAddr), B> {
        let (res, buf) = self.socket.recv_from_until(buf, deadline(timeout)).await;
        (
            res.and_then(|(n, addr)| Ok((n, datagram_sender(addr)?))),
            buf,
        )
    }

    /// Sends the initialized bytes of `buf` as one datagram to the socket at `path`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send_to<B: IoBuf>(&self, buf: B, path: impl AsRef<Path>) -> BufResult<usize, B> {
        match unix_addr(path.as_ref()) {
            Ok(addr) => self.socket.send_to(buf, addr).await,
            Err(e) => (Err(e), buf),
        }
    }

    /// Receives one datagram into `buf` and says who sent it.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, UnixSocketAddr), B> {
        let (res, buf) = self.socket.recv_from(buf).await;
        (
            res.and_then(|(n, addr)| Ok((n, datagram_sender(addr)?))),
            buf,
        )
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<UnixSocketAddr> {
        UnixSocketAddr::from_sockaddr(self.socket.local_addr()?)
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<UnixSocketAddr> {
        UnixSocketAddr::from_sockaddr(self.socket.peer_addr()?)
    }

    /// Shuts down the read, write or both halves.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the shutdown may or may not have happened; calling it
    /// again is harmless.
    pub async fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.socket.shutdown(how).await
    }

    /// Closes the socket through the ring and waits for the result.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(self) -> io::Result<()> {
        self.socket.close().await
    }
}

fd_traits!(UnixListener);
fd_traits!(UnixStream, stream);
split_halves!(UnixStream, UnixSocketAddr, UnixSocketAddr::from_sockaddr);
fd_traits!(UnixDatagram);
into_std!(UnixListener, std::os::unix::net::UnixListener);
into_std!(UnixStream, std::os::unix::net::UnixStream);
into_std!(UnixDatagram, std::os::unix::net::UnixDatagram);

/// The sender of a datagram: an unbound sender leaves the name empty (length 0), which is
/// "unnamed".
fn datagram_sender(addr: SockAddr) -> io::Result<UnixSocketAddr> {
    if addr.is_empty() {
        return Ok(UnixSocketAddr {
            kind: Kind::Unnamed,
        });
    }
    UnixSocketAddr::from_sockaddr(addr)
}
