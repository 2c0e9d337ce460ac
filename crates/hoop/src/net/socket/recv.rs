//! What a socket receives (connections, bytes, datagrams), through its kept state: what a
//! dropped call received comes first.

use std::io;
use std::time::Instant;

use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, BufResult, IoBufMut, Op, SockAddr};

use super::deadline::Dl;
use super::owned::Socket;
use crate::io_util::fill_exact;
use crate::net::kept::{Keep, Keepable, Local};

impl Socket {
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
                crate::net::refuse::refuse_waiting(self.raw(), e);
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
    pub(super) async fn keep<T>(&self, op: T, dl: Dl, stream: bool) -> T::Output
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

    pub(crate) async fn recv_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SockAddr), B> {
        self.recv_from_until(buf, None).await
    }

    /// Peeks at the next datagram and its source (`MSG_PEEK`): it stays queued, and one a
    /// dropped receive already took (kept) is the one shown.
    pub(crate) async fn peek_from<B: IoBufMut>(&self, buf: B) -> BufResult<(usize, SockAddr), B> {
        let peer = || self.peer_addr().ok();
        let peek = op::RecvMsg::new(self.raw(), buf).flags(libc::MSG_PEEK);
        match crate::net::kept::peek_kept(&self.kept, peek, peer).await {
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
}
