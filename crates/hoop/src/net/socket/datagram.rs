//! Sending datagrams: each whole or not at all, waiting for room in the target's queue.

use std::io;
use std::time::{Duration, Instant};

use hoop_driver::{op, BufResult, IoBuf, SockAddr};

use super::deadline::{run, Dl};
use super::owned::Socket;

impl Socket {
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
}
