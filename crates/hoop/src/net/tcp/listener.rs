//! The TCP listener: bind, accept (one at a time or as a multishot stream), close.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use hoop_driver::{op, MultiOp, SockAddr};

use super::fd_impls::{fd_traits, into_std};
use super::incoming::Incoming;
use super::stream::TcpStream;
use crate::net::backlog::{listen_arg, ListenOptions};
use crate::net::socket::{deadline, domain_of, ip_addr, resolve, Socket};

/// A TCP socket listening for connections.
#[derive(Debug)]
pub struct TcpListener {
    socket: Socket,
}

impl TcpListener {
    /// Binds to `addr` (the first address it resolves to that binds) with `SO_REUSEADDR` and
    /// listens with a backlog of [`DEFAULT_BACKLOG`](crate::net::DEFAULT_BACKLOG) (the kernel
    /// caps it at `net.core.somaxconn`); [`ListenOptions`] sets another.
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
        Self::bind_options(addr, &ListenOptions::new().reuse_port(reuse_port))
    }

    /// Binds with `opts` (backlog, `SO_REUSEPORT`): what [`ListenOptions::bind`] does.
    /// Synchronous: usable outside a runtime.
    pub fn bind_options(addr: impl ToSocketAddrs, opts: &ListenOptions) -> io::Result<TcpListener> {
        let mut last = None;
        for a in resolve(addr)? {
            match Self::bind_one(a, opts) {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to bind")))
    }

    fn bind_one(addr: SocketAddr, opts: &ListenOptions) -> io::Result<TcpListener> {
        let socket = Socket::new_sync(domain_of(&addr), libc::SOCK_STREAM)?;
        socket.set_opt(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1i32)?;
        if opts.reuses_port() {
            socket.set_opt(libc::SOL_SOCKET, libc::SO_REUSEPORT, 1i32)?;
        }
        socket.bind(&SockAddr::from_std(addr))?;
        socket.listen(listen_arg(opts.requested_backlog()))?;
        Ok(TcpListener { socket })
    }

    /// Sets the listen backlog of this listening socket (`listen(2)` again, which Linux
    /// allows; connections already queued stay): for a listener made elsewhere
    /// ([`from_std`](Self::from_std)). 0 counts as 1; the kernel caps it at
    /// `net.core.somaxconn` ([`backlog_cap`](crate::net::backlog_cap)).
    pub fn set_backlog(&self, backlog: u32) -> io::Result<()> {
        self.socket.listen(listen_arg(backlog))
    }

    /// Wraps a std listener (blocking or not: io_uring does not care).
    pub fn from_std(listener: std::net::TcpListener) -> TcpListener {
        crate::net::refuse::keep_reserve();
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

fd_traits!(TcpListener);
into_std!(TcpListener, std::net::TcpListener);
