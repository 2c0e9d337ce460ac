//! Socket operations.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::addr::SockAddr;
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::OpCode;

/// Creates a socket (`IORING_OP_SOCKET`). The fd is owned by the result.
#[derive(Debug)]
pub struct Socket {
    pub(crate) domain: i32,
    pub(crate) ty: i32,
    pub(crate) protocol: i32,
}

impl Socket {
    /// `socket(domain, ty | SOCK_CLOEXEC, protocol)`.
    pub fn new(domain: i32, ty: i32, protocol: i32) -> Self {
        Socket {
            domain,
            ty: ty | libc::SOCK_CLOEXEC,
            protocol,
        }
    }
}

impl OpCode for Socket {
    type Output = io::Result<OwnedFd>;
    fn complete(self, c: Completion) -> Self::Output {
        // SAFETY: a non-negative result is a new fd nothing else owns.
        cvt(c.res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// Connects a socket (`connect`).
#[derive(Debug)]
pub struct Connect {
    pub(crate) fd: RawFd,
    pub(crate) addr: Box<SockAddr>,
}

impl Connect {
    /// Connects `fd` to `addr`.
    pub fn new(fd: RawFd, addr: SockAddr) -> Self {
        Connect {
            fd,
            addr: Box::new(addr),
        }
    }
}

impl OpCode for Connect {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Accepts a connection (`accept4` with `SOCK_CLOEXEC`). The new fd is owned by the result, so
/// an accept whose future was dropped closes the connection it accepted.
#[derive(Debug)]
pub struct Accept {
    pub(crate) fd: RawFd,
    pub(crate) addr: Box<SockAddr>,
}

impl Accept {
    /// Accepts on the listening socket `fd`.
    pub fn new(fd: RawFd) -> Self {
        Accept {
            fd,
            addr: Box::new(SockAddr::empty()),
        }
    }
}

impl OpCode for Accept {
    type Output = io::Result<(OwnedFd, SockAddr)>;
    fn complete(self, c: Completion) -> Self::Output {
        // SAFETY: a non-negative result is a new fd nothing else owns.
        cvt(c.res).map(|fd| (unsafe { OwnedFd::from_raw_fd(fd as RawFd) }, *self.addr))
    }
}

/// Receives into `buf` (`recv`).
#[derive(Debug)]
pub struct Recv<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) flags: i32,
    pub(crate) poll_first: bool,
}

impl<B: IoBufMut> Recv<B> {
    /// Receives from `fd` into `buf`, from its start up to its capacity.
    pub fn new(fd: RawFd, buf: B, flags: i32) -> Self {
        Recv {
            fd,
            buf,
            flags,
            poll_first: false,
        }
    }

    /// With `yes`, the kernel waits for data before its first try (`IORING_RECVSEND_POLL_FIRST`,
    /// 5.19): for a socket the caller believes empty (its last receive took less than it
    /// asked, so it drained the socket), the try that would fail with `EAGAIN` before the
    /// receive waits is skipped. Data that is there already is received at once all the same.
    /// Ignored before 5.19 and by the epoll driver.
    pub fn poll_first(mut self, yes: bool) -> Self {
        self.poll_first = yes;
        self
    }
}

impl<B> Recv<B> {
    /// The buffer, for a result that was not received by this operation (one kept from an
    /// earlier receive whose future was dropped): the operation was never started.
    pub fn into_buf(self) -> B {
        self.buf
    }
}

impl<B: IoBufMut> OpCode for Recv<B> {
    type Output = BufResult<usize, B>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let res = super::read_into(&mut self.buf, c.res);
        (res, self.buf)
    }
}

/// Sends the initialized bytes of `buf` (`send`, with `MSG_NOSIGNAL`).
///
/// A datagram send on io_uring should carry `MSG_DONTWAIT` and wait for room itself
/// ([`PollOnce::writable`], then a new send): the kernel's own retry of a send that found no
/// room reuses the message's iterator, which a Unix datagram send has already consumed when
/// the peer's queue is full, so the retry sends (and reports) an empty datagram (DESIGN.md,
/// "Datagrams on both drivers"; `scripts/uring-dgram-eagain.c`). With `MSG_DONTWAIT` the
/// kernel never retries: a full socket completes the send with `EAGAIN`. The epoll driver
/// waits for room either way.
#[derive(Debug)]
pub struct Send<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) flags: i32,
}

impl<B: IoBuf> Send<B> {
    /// Sends `buf` on `fd`. `MSG_NOSIGNAL` is always added: a closed peer is an `EPIPE` error,
    /// never a `SIGPIPE`.
    pub fn new(fd: RawFd, buf: B, flags: i32) -> Self {
        Send {
            fd,
            buf,
            flags: flags | libc::MSG_NOSIGNAL,
        }
    }
}

impl<B: IoBuf> OpCode for Send<B> {
    type Output = BufResult<usize, B>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.buf)
    }
}

/// A `msghdr` with its one iovec and its address, boxed so the kernel's pointers stay valid.
pub(crate) struct MsgHeader {
    pub(crate) msg: libc::msghdr,
    pub(crate) iov: libc::iovec,
    pub(crate) addr: SockAddr,
}

impl std::fmt::Debug for MsgHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgHeader")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MsgHeader {
    fn new(ptr: *mut u8, len: usize, addr: SockAddr) -> Box<MsgHeader> {
        let mut h = Box::new(MsgHeader {
            // SAFETY: msghdr is plain old data; all-zero is valid.
            msg: unsafe { std::mem::zeroed() },
            iov: libc::iovec {
                iov_base: ptr.cast(),
                iov_len: len,
            },
            addr,
        });
        // The box's fields do not move from here on: point the header at them.
        h.msg.msg_iov = &mut h.iov;
        h.msg.msg_iovlen = 1;
        h.msg.msg_name = h.addr.as_mut_ptr().cast();
        h.msg.msg_namelen = h.addr.len;
        h
    }
}

/// Sends a datagram to an address (`sendmsg`, with `MSG_NOSIGNAL`).
#[derive(Debug)]
pub struct SendMsg<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) hdr: Box<MsgHeader>,
    pub(crate) flags: i32,
}

impl<B: IoBuf> SendMsg<B> {
    /// Sends the initialized bytes of `buf` on `fd` to `addr`.
    pub fn new(fd: RawFd, buf: B, addr: SockAddr) -> Self {
        let hdr = MsgHeader::new(buf.stable_ptr() as *mut u8, buf.bytes_init(), addr);
        SendMsg {
            fd,
            buf,
            hdr,
            flags: libc::MSG_NOSIGNAL,
        }
    }

    /// Adds `flags` (`MSG_*`) to the send's. With `MSG_DONTWAIT`, io_uring does not wait for
    /// room and retry: a full socket completes the send with `EAGAIN` (what a datagram send
    /// needs; see [`Send`]). The epoll driver waits for room either way.
    pub fn flags(mut self, flags: i32) -> Self {
        self.flags |= flags;
        self
    }
}

impl<B: IoBuf> OpCode for SendMsg<B> {
    type Output = BufResult<usize, B>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.buf)
    }
}

/// Receives a datagram and its source address (`recvmsg`).
#[derive(Debug)]
pub struct RecvMsg<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) hdr: Box<MsgHeader>,
    /// `recvmsg` flags (`MSG_PEEK`).
    pub(crate) flags: i32,
}

impl<B: IoBufMut> RecvMsg<B> {
    /// Receives on `fd` into `buf`.
    pub fn new(fd: RawFd, mut buf: B) -> Self {
        let hdr = MsgHeader::new(buf.stable_mut_ptr(), buf.bytes_total(), SockAddr::empty());
        RecvMsg {
            fd,
            buf,
            hdr,
            flags: 0,
        }
    }

    /// With `recvmsg` flags, e.g. `libc::MSG_PEEK` (the datagram stays queued).
    pub fn flags(mut self, flags: i32) -> Self {
        self.flags = flags;
        self
    }
}

impl<B> RecvMsg<B> {
    /// The buffer, for a result that was not received by this operation (see
    /// [`Recv::into_buf`]): the operation was never started.
    pub fn into_buf(self) -> B {
        self.buf
    }
}

impl<B: IoBufMut> OpCode for RecvMsg<B> {
    type Output = BufResult<(usize, SockAddr), B>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let mut addr = self.hdr.addr;
        addr.len = self.hdr.msg.msg_namelen;
        let res = super::read_into(&mut self.buf, c.res).map(|n| (n, addr));
        (res, self.buf)
    }
}

/// Waits once until `fd` is ready for `events` (`libc::POLLIN`, `libc::POLLOUT`), for a system
/// call the ring has no opcode for (`sendfile(2)` when a socket has room): `IORING_OP_POLL_ADD`
/// on io_uring; on the epoll driver, a `poll(2)` of the fd with a zero timeout run once the
/// driver sees the fd ready (so `fd` must be non-blocking there, as the driver's sockets are).
/// Completes with the ready events (`POLLERR`/`POLLHUP` included: the caller's next call then
/// says what went wrong).
#[derive(Debug)]
pub struct PollOnce {
    pub(crate) fd: RawFd,
    pub(crate) events: u32,
    /// The epoll driver's `poll(2)` argument, boxed so its address survives moves.
    pub(crate) pfd: Box<libc::pollfd>,
    /// On the epoll driver: the driver's readiness record answers, no `poll(2)` ([`ready`](Self::ready)).
    pub(crate) recorded: bool,
}

impl PollOnce {
    /// Waits for `events` on `fd`.
    pub fn new(fd: RawFd, events: u32) -> Self {
        PollOnce {
            fd,
            events,
            pfd: Box::new(libc::pollfd {
                fd,
                events: events as i16,
                revents: 0,
            }),
            recorded: false,
        }
    }

    /// Waits until `fd` is readable (`POLLIN`) after [`Driver::try_recv`](crate::Driver::try_recv)
    /// said `WouldBlock`: on io_uring as [`new`](Self::new); on the epoll driver from the
    /// driver's own readiness record, which `try_recv` keeps, so the wait makes no system call
    /// (the next edge completes it, with a nonzero value). After a receive the driver did not
    /// see (a `recv(2)` of the caller's own) the record may still say readable and the wait
    /// then completes at once: the caller's next `try_recv` sets it right.
    pub fn ready(fd: RawFd) -> Self {
        PollOnce {
            recorded: true,
            ..PollOnce::new(fd, libc::POLLIN as u32)
        }
    }

    /// Waits until `fd` can take more bytes (`POLLOUT`).
    pub fn writable(fd: RawFd) -> Self {
        PollOnce::new(fd, libc::POLLOUT as u32)
    }
}

impl OpCode for PollOnce {
    type Output = io::Result<u32>;
    fn complete(self, c: Completion) -> Self::Output {
        let n = cvt(c.res)?;
        // io_uring's result is the mask; poll(2)'s is the count, the mask is in `revents`.
        Ok(if self.pfd.revents != 0 {
            self.pfd.revents as u16 as u32
        } else {
            n as u32
        })
    }
}

/// Shuts down one or both directions of a connection (`shutdown`).
#[derive(Debug)]
pub struct Shutdown {
    pub(crate) fd: RawFd,
    pub(crate) how: i32,
}

impl Shutdown {
    /// `shutdown(fd, how)` with `libc::SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
    pub fn new(fd: RawFd, how: i32) -> Self {
        Shutdown { fd, how }
    }
}

impl OpCode for Shutdown {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}
