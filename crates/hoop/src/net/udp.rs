//! UDP sockets.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use hoop_driver::{BufResult, IoBuf, IoBufMut, SockAddr};

use super::socket::{deadline, domain_of, ip_addr, resolve, Socket};
use super::tcp::{fd_traits, into_std};

/// A UDP socket. Sends and receives take buffers by value and give them back.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let socket = hoop::net::UdpSocket::bind("127.0.0.1:0").await?;
/// let (res, buf) = socket.recv_from(vec![0u8; 1500]).await;
/// let (n, peer) = res?;
/// let (res, _) = socket.send_to(buf[..n].to_vec(), peer).await;
/// res?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    socket: Socket,
}

impl UdpSocket {
    /// Binds to `addr` (the first address it resolves to that binds). Port 0 picks a free port.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it does not wait on the kernel, and a socket it made is closed
    /// if it is dropped.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let mut last = None;
        for a in resolve(addr)? {
            match Self::bind_one(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to bind")))
    }

    fn bind_one(addr: SocketAddr) -> io::Result<UdpSocket> {
        let socket = Socket::new_sync(domain_of(&addr), libc::SOCK_DGRAM)?;
        socket.bind(&SockAddr::from_std(addr))?;
        Ok(UdpSocket { socket })
    }

    /// Wraps a std UDP socket (blocking or not: io_uring does not care).
    pub fn from_std(socket: std::net::UdpSocket) -> UdpSocket {
        UdpSocket {
            socket: Socket::from_fd(OwnedFd::from(socket)),
        }
    }

    /// Sets the default peer (the first resolved address that connects): [`send`](Self::send)
    /// goes there and [`recv`](Self::recv) only takes datagrams from there.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the default peer may or may not be set; calling it
    /// again is harmless.
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let mut last = None;
        for a in resolve(addr)? {
            match self.socket.connect(SockAddr::from_std(a)).await {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no address to connect to")))
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

    /// Receives one datagram from the connected peer into `buf` (from its start, up to its
    /// capacity; the rest of a longer datagram is discarded).
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
    pub async fn send_timeout<B: IoBuf>(&self, buf: B, timeout: Duration) -> BufResult<usize, B> {
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
        timeout: Duration,
    ) -> BufResult<usize, B> {
        self.socket
            .recv_datagram_until(buf, deadline(timeout))
            .await
    }

    /// Sends the initialized bytes of `buf` as one datagram to `addr` (its first resolved
    /// address).
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send_to<B: IoBuf>(&self, buf: B, addr: impl ToSocketAddrs) -> BufResult<usize, B> {
        let target = match resolve(addr) {
            Ok(v) => v[0],
            Err(e) => return (Err(e), buf),
        };
        self.socket.send_to(buf, SockAddr::from_std(target)).await
    }

    /// Receives one datagram into `buf` (from its start, up to its capacity) and says who sent
    /// it.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SocketAddr), B> {
        let (res, buf) = self.socket.recv_from(buf).await;
        let res = res.and_then(|(n, addr)| Ok((n, ip_addr(addr)?)));
        (res, buf)
    }

    /// Receives the next datagram into `buf` (from its start, up to its capacity) and says who
    /// sent it, without taking it: the next receive gets it again (`MSG_PEEK`). As tokio's
    /// `peek_from`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a peek takes nothing, and one dropped in flight is simply
    /// cancelled. (A datagram a dropped receive already took is the one a peek shows.)
    pub async fn peek_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SocketAddr), B> {
        let (res, buf) = self.socket.peek_from(buf).await;
        let res = res.and_then(|(n, addr)| Ok((n, ip_addr(addr)?)));
        (res, buf)
    }

    /// [`send_to`](Self::send_to) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if it did not complete within `timeout`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the datagram may or
    /// may not have been sent. In `select!`, keep the future across the loop's rounds (pinned)
    /// rather than dropping it.
    pub async fn send_to_timeout<B: IoBuf>(
        &self,
        buf: B,
        addr: impl ToSocketAddrs,
        timeout: Duration,
    ) -> BufResult<usize, B> {
        let target = match resolve(addr) {
            Ok(v) => v[0],
            Err(e) => return (Err(e), buf),
        };
        let dl = deadline(timeout);
        self.socket
            .send_to_until(buf, SockAddr::from_std(target), dl)
            .await
    }

    /// [`recv_from`](Self::recv_from) with a deadline linked to it in the kernel: `TimedOut`
    /// ("deadline of 200 ms passed") if no datagram came within `timeout`; the buffer comes
    /// back either way.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is the event of a `select!` branch and another branch
    /// completes first, no datagram is lost: one received for it is returned, with its source, by
    /// the next receive on this socket.
    pub async fn recv_from_timeout<B: IoBufMut>(
        &self,
        buf: B,
        timeout: Duration,
    ) -> BufResult<(usize, SocketAddr), B> {
        let (res, buf) = self.socket.recv_from_until(buf, deadline(timeout)).await;
        let res = res.and_then(|(n, addr)| Ok((n, ip_addr(addr)?)));
        (res, buf)
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(self.socket.local_addr()?)
    }

    /// The connected peer's address (`NotConnected` if there is none).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        ip_addr(self.socket.peer_addr()?)
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.socket
            .set_opt(libc::SOL_SOCKET, libc::SO_BROADCAST, i32::from(on))
    }

    /// Whether `SO_BROADCAST` is set.
    pub fn broadcast(&self) -> io::Result<bool> {
        Ok(self
            .socket
            .get_opt::<i32>(libc::SOL_SOCKET, libc::SO_BROADCAST)?
            != 0)
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

fd_traits!(UdpSocket);
into_std!(UdpSocket, std::net::UdpSocket);
