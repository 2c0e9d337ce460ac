//! The TCP stream: connect, the owned-buffer methods, `sendfile`, options, close and its halves.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use hoop_driver::{op, BufRing, MultiOp, SockAddr};

use super::fd_impls::{fd_traits, into_std};
use super::recv_stream::RecvStream;
use crate::net::socket::{deadline, domain_of, ip_addr, resolve_nonblocking, Socket};
use crate::net::split::{read_methods, split_halves, write_methods, PollSlots};

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
    pub(super) io: PollSlots,
    pub(super) socket: Socket,
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
    /// the blocking pool (see [`ToSocketAddrs`](crate::net::ToSocketAddrs)); a literal address
    /// takes no pool trip.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the connection being
    /// made is closed (never leaked); call it again.
    pub async fn connect(addr: impl crate::net::socket::ToSocketAddrs) -> io::Result<TcpStream> {
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
        addr: impl crate::net::socket::ToSocketAddrs,
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

fd_traits!(TcpStream, stream);
into_std!(TcpStream, std::net::TcpStream);
split_halves!(TcpStream, SocketAddr, ip_addr);
