//! What a dropped receive brought ([`Outcome`]) and how each receive operation keeps it and
//! serves it to a later call ([`Keepable`]).

use std::io;
use std::os::fd::OwnedFd;

use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{op, IoBuf, IoBufMut, SockAddr};

/// What a receive brought for a call that no longer waited for it.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// An accepted connection and the peer's address (`None` from a multishot accept, which
    /// reports none: asked of the connection when served).
    Accepted(OwnedFd, Option<SockAddr>),
    /// Bytes of a stream, or one datagram (with its source when the receive asked for it).
    /// Empty bytes from a stream are its end.
    Received(Vec<u8>, Option<SockAddr>),
    /// The receive failed with this errno.
    Failed(i32),
}

/// The error of a kept outcome served to a call of another kind (a datagram socket's
/// accept, say): not reachable through hoop's types, whose sockets receive one kind.
fn mismatch() -> io::Error {
    io::Error::other("a result kept from a dropped call is not of this call's kind")
}

/// An error worth keeping for the next call, as its errno: `None` for what carries nothing
/// for a later call (a cancel, an interrupted or would-block receive, a deadline that passed).
fn kept_error(e: &io::Error) -> Option<Outcome> {
    match e.raw_os_error() {
        None | Some(libc::ECANCELED | libc::EINTR | libc::EAGAIN) => None,
        Some(errno) => Some(Outcome::Failed(errno)),
    }
}

/// The peer address of a connection (`getpeername(2)`).
fn peer_of(fd: &OwnedFd) -> io::Result<SockAddr> {
    use std::os::fd::AsRawFd;
    let mut addr = SockAddr::empty();
    let mut len = addr.len();
    // SAFETY: the kernel writes at most `len` bytes into the address storage, which `addr`
    // owns; the fd is open (borrowed from `fd`).
    let r = unsafe { libc::getpeername(fd.as_raw_fd(), addr.as_mut_ptr(), &mut len) };
    hoop_driver::error::cvt_libc(r)?;
    Ok(addr.with_len(len))
}

/// The bytes a receive delivered into `buf` (its length, by the read rule), copied out.
fn received<B: IoBuf>(buf: &B) -> Vec<u8> {
    // SAFETY: `IoBuf`'s contract: `stable_ptr()` is valid for `bytes_init()` initialized bytes,
    // and `buf` is borrowed (not written) for the copy.
    unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) }.to_vec()
}

/// Copies as much of `bytes` as fits into `buf` from its start and sets its length to that (the
/// read rule); returns the count.
fn fill<B: IoBufMut>(buf: &mut B, bytes: &[u8]) -> usize {
    let n = bytes.len().min(buf.bytes_total());
    // SAFETY: `stable_mut_ptr()` is valid for writes of `bytes_total() >= n` bytes (IoBufMut's
    // contract) and cannot overlap `bytes`, a Vec of our own; those `n` bytes are then
    // initialized, as `set_filled` requires.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.stable_mut_ptr(), n);
        buf.set_filled(n);
    }
    n
}

/// A receive whose result can be kept for a later call.
pub(crate) trait Keepable: op::OpCode + UringOp + EpollOp + Sized {
    /// The output of this operation, run for a future that was dropped, as kept (`None`: it
    /// carries nothing for a later call).
    fn keep(out: Self::Output) -> Option<Outcome>;

    /// The output of a call whose operation never started, served `got`; `stream`: bytes that
    /// do not fit the call's buffer come back (to be served next) rather than being dropped as
    /// a datagram's excess is. `peer` gives the source of a datagram received without one.
    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>);
}

impl Keepable for op::Accept {
    fn keep(out: io::Result<(OwnedFd, SockAddr)>) -> Option<Outcome> {
        match out {
            Ok((fd, addr)) => Some(Outcome::Accepted(fd, Some(addr))),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        _stream: bool,
        _peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        match got {
            Outcome::Accepted(fd, addr) => match addr.map_or_else(|| peer_of(&fd), Ok) {
                Ok(addr) => (Ok((fd, addr)), None),
                Err(e) => (Err(e), None),
            },
            Outcome::Failed(errno) => (Err(io::Error::from_raw_os_error(errno)), None),
            Outcome::Received(..) => (Err(mismatch()), None),
        }
    }
}

/// Serves `got` into `buf`: the count and the source, and what did not fit of a stream.
fn serve_bytes<B: IoBufMut>(
    buf: &mut B,
    got: Outcome,
    stream: bool,
) -> (io::Result<(usize, Option<SockAddr>)>, Option<Outcome>) {
    match got {
        Outcome::Received(mut bytes, from) => {
            let n = fill(buf, &bytes);
            let rest = if stream && n < bytes.len() {
                bytes.drain(..n);
                Some(Outcome::Received(bytes, from))
            } else {
                None
            };
            (Ok((n, from)), rest)
        }
        Outcome::Failed(errno) => {
            fill(buf, &[]);
            (Err(io::Error::from_raw_os_error(errno)), None)
        }
        Outcome::Accepted(..) => {
            fill(buf, &[]);
            (Err(mismatch()), None)
        }
    }
}

impl<B: IoBufMut> Keepable for op::Recv<B> {
    fn keep((res, buf): (io::Result<usize>, B)) -> Option<Outcome> {
        match res {
            Ok(_) => Some(Outcome::Received(received(&buf), None)),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        _peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        let mut buf = self.into_buf();
        let (res, rest) = serve_bytes(&mut buf, got, stream);
        ((res.map(|(n, _)| n), buf), rest)
    }
}

impl<B: IoBufMut> Keepable for op::RecvMsg<B> {
    fn keep((res, buf): (io::Result<(usize, SockAddr)>, B)) -> Option<Outcome> {
        match res {
            Ok((_, from)) => Some(Outcome::Received(received(&buf), Some(from))),
            Err(e) => kept_error(&e),
        }
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        let mut buf = self.into_buf();
        let (res, rest) = serve_bytes(&mut buf, got, stream);
        // A datagram kept from a `recv` (a connected socket's) came from the peer.
        let res = res.and_then(|(n, from)| match from.or_else(peer) {
            Some(from) => Ok((n, from)),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "a datagram kept from a dropped recv has no known source",
            )),
        });
        ((res, buf), rest)
    }
}

impl<T> Keepable for op::Deadline<T>
where
    T: Keepable,
    T::Output: op::TimedOut,
    op::Deadline<T>: UringOp + EpollOp,
{
    fn keep(out: T::Output) -> Option<Outcome> {
        // A deadline that passed is an error without an errno: nothing to keep.
        T::keep(out)
    }

    fn serve(
        self,
        got: Outcome,
        stream: bool,
        peer: &dyn Fn() -> Option<SockAddr>,
    ) -> (Self::Output, Option<Outcome>) {
        self.into_inner().serve(got, stream, peer)
    }
}

/// A multishot accept's connection, as kept.
pub(crate) fn keep_accepted(item: io::Result<OwnedFd>) -> Option<Outcome> {
    match item {
        Ok(fd) => Some(Outcome::Accepted(fd, None)),
        Err(e) => kept_error(&e),
    }
}
