//! TCP connections on direct descriptors: slots of the ring's registered file table.
//!
//! [`TcpListener::incoming_direct`] accepts with one multishot accept straight into the ring's
//! fixed-file table (io_uring, Linux 5.19+): a connection has no fd in the process, each
//! operation on it skips the fd lookup, and its close is an `IORING_OP_CLOSE` on the slot,
//! submitted on the tick the stream is dropped. Elsewhere (the epoll driver, older kernels) it
//! is [`TcpListener::incoming`] and the items are plain sockets; [`DirectTcpStream`] covers both
//! ([`is_direct`](DirectTcpStream::is_direct) tells which).
//!
//! A direct descriptor is not an fd: operations that need one (the peer address, socket
//! options) fail with [`io::ErrorKind::Unsupported`]. Linux accepted sockets inherit options
//! such as `TCP_NODELAY` from the listener, so set them there
//! ([`TcpListener::set_nodelay`]).

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

use hoop_driver::op::{self, DirectFd};
use hoop_driver::{BufResult, BufRing, Driver, IoBuf, IoBufMut, MultiOp, Op, RingBuf};

use super::tcp::{Incoming, RecvStream, TcpListener, TcpStream};
use crate::io_util::until_done;

impl TcpListener {
    /// A stream of accepted connections on direct descriptors: one multishot accept straight
    /// into the ring's registered file table (io_uring, Linux 5.19+), so connections have no
    /// fd; on the epoll driver or older kernels it is [`incoming`](Self::incoming) and the
    /// connections are plain sockets. See [`DirectTcpStream`].
    /// Connections accepted after the stream is dropped are closed, and their slots freed.
    pub fn incoming_direct(&self) -> IncomingDirect<'_> {
        IncomingDirect::new(self)
    }

    /// Sets `TCP_NODELAY` on the listening socket; Linux copies it to every connection
    /// accepted afterwards (including direct descriptors, which cannot be set one by one).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        set_nodelay_fd(self.as_raw_fd(), on)
    }
}

fn set_nodelay_fd(fd: RawFd, on: bool) -> io::Result<()> {
    let v: libc::c_int = on.into();
    // SAFETY: `fd` is an open socket borrowed for the call; the option value is a c_int on
    // the stack, passed with its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    hoop_driver::error::cvt_libc(r).map(drop)
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} needs an fd, and this connection is a direct descriptor"),
    )
}

/// The stream of [`TcpListener::incoming_direct`].
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct IncomingDirect<'a> {
    inner: IncomingInner<'a>,
}

#[derive(Debug)]
enum IncomingInner<'a> {
    Direct(
        MultiOp<op::AcceptMultiDirect>,
        std::marker::PhantomData<&'a TcpListener>,
    ),
    Plain(Incoming<'a>),
}

impl<'a> IncomingDirect<'a> {
    pub(crate) fn new(listener: &'a TcpListener) -> IncomingDirect<'a> {
        let direct = Driver::current()
            .filter(|d| d.supports_direct_accept())
            .and_then(|_| op::AcceptMultiDirect::new(listener.as_raw_fd()).ok());
        let inner = match direct {
            Some(op) => IncomingInner::Direct(MultiOp::new(op), std::marker::PhantomData),
            None => IncomingInner::Plain(listener.incoming()),
        };
        IncomingDirect { inner }
    }

    /// Whether connections arrive as direct descriptors (else as plain sockets).
    pub fn is_direct(&self) -> bool {
        matches!(self.inner, IncomingInner::Direct(..))
    }

    /// The next connection (`None` only if the stream ended for good). With direct
    /// descriptors, a full fixed-file table ends the stream after an `ENFILE` error.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a connection accepted for a dropped call is returned by the next
    /// one (on direct descriptors, connections accepted after the stream itself is dropped are
    /// closed).
    pub async fn next(&mut self) -> Option<io::Result<DirectTcpStream>> {
        match &mut self.inner {
            IncomingInner::Direct(op, _) => {
                let item = op.next().await?;
                Some(
                    item.inspect_err(super::refuse::count_direct_failure)
                        .map(|fd| DirectTcpStream {
                            inner: StreamInner::Direct(fd),
                        }),
                )
            }
            IncomingInner::Plain(inc) => {
                let item = inc.next().await?;
                Some(item.map(DirectTcpStream::from))
            }
        }
    }
}

impl IncomingDirect<'_> {
    /// Polls for the next connection (`futures::Stream`, in `crate::select`).
    pub(crate) fn poll_next_conn(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<DirectTcpStream>>> {
        match &mut self.inner {
            IncomingInner::Direct(op, _) => op.poll_next(cx).map(|item| {
                item.map(|r| {
                    r.inspect_err(super::refuse::count_direct_failure)
                        .map(|fd| DirectTcpStream {
                            inner: StreamInner::Direct(fd),
                        })
                })
            }),
            IncomingInner::Plain(inc) => futures::Stream::poll_next(std::pin::Pin::new(inc), cx)
                .map(|item| item.map(|r| r.map(DirectTcpStream::from))),
        }
    }

    /// Whether the stream ended for good (`futures::stream::FusedStream`).
    pub(crate) fn is_done(&self) -> bool {
        match &self.inner {
            IncomingInner::Direct(op, _) => op.is_done(),
            IncomingInner::Plain(inc) => inc.op.is_done(),
        }
    }
}

/// A TCP connection accepted by [`TcpListener::incoming_direct`]: a direct descriptor (a slot
/// of the ring's registered file table) where supported, else a plain [`TcpStream`]. Dropping
/// it closes the connection through the ring.
#[derive(Debug)]
pub struct DirectTcpStream {
    inner: StreamInner,
}

#[derive(Debug)]
enum StreamInner {
    Direct(DirectFd),
    Plain(TcpStream),
}

impl From<TcpStream> for DirectTcpStream {
    fn from(s: TcpStream) -> Self {
        DirectTcpStream {
            inner: StreamInner::Plain(s),
        }
    }
}

impl DirectTcpStream {
    /// Whether this is a direct descriptor (else a plain socket).
    pub fn is_direct(&self) -> bool {
        matches!(self.inner, StreamInner::Direct(_))
    }

    /// The slot in the ring's registered file table, for a direct descriptor.
    pub fn slot(&self) -> Option<u32> {
        match &self.inner {
            StreamInner::Direct(fd) => Some(fd.slot()),
            StreamInner::Plain(_) => None,
        }
    }

    /// The plain stream, if this is not a direct descriptor.
    pub fn as_tcp_stream(&self) -> Option<&TcpStream> {
        match &self.inner {
            StreamInner::Direct(_) => None,
            StreamInner::Plain(s) => Some(s),
        }
    }

    /// Reads into `buf` (from its start, up to its capacity); `Ok(0)` is end of stream.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: bytes received for a dropped call are lost with its buffer
    /// (a direct descriptor has no kept state). In `select!`, use the multishot `recv_stream`'s
    /// `next`, which is.
    pub async fn read<B: IoBufMut>(&self, buf: B) -> BufResult<usize, B> {
        match &self.inner {
            StreamInner::Direct(fd) => Op::new(op::RecvDirect::new(fd, buf)).await,
            StreamInner::Plain(s) => s.read(buf).await,
        }
    }

    /// Writes the initialized bytes of `buf` once; returns how many were sent.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, keep the future across
    /// the loop's rounds (pinned) rather than dropping it.
    pub async fn write<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        match &self.inner {
            StreamInner::Direct(fd) => Op::new(op::SendDirect::new(fd, buf)).await,
            StreamInner::Plain(s) => s.write(buf).await,
        }
    }

    /// Writes every initialized byte of `buf`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
    /// been sent in part or in whole, and how many is lost. In `select!`, keep the future across
    /// the loop's rounds (pinned) rather than dropping it.
    pub fn write_all<B: IoBuf>(
        &self,
        buf: B,
    ) -> impl std::future::Future<Output = BufResult<(), B>> + '_ {
        // Not an `async fn`: either branch's future as it is, with no second copy of the
        // arguments around them (an idle connection's task holds room for this one).
        match &self.inner {
            StreamInner::Direct(fd) => {
                let total = buf.bytes_init();
                let msg = "failed to write whole buffer";
                futures::future::Either::Left(until_done(
                    buf,
                    total,
                    io::ErrorKind::WriteZero,
                    msg,
                    |s, _| Op::new(op::SendDirect::new(fd, s)),
                ))
            }
            StreamInner::Plain(s) => futures::future::Either::Right(s.write_all(buf)),
        }
    }

    /// `sendfile(2)` (see [`TcpStream::send_file`]); `Unsupported` on a direct descriptor,
    /// which has no fd to name.
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
        match &self.inner {
            StreamInner::Direct(_) => Err(unsupported("sendfile")),
            StreamInner::Plain(s) => s.send_file(file, offset, len).await,
        }
    }

    /// A stream of received data in buffers of `ring` (see [`TcpStream::recv_stream`]).
    pub fn recv_stream(&self, ring: &BufRing) -> DirectRecvStream<'_> {
        let inner = match &self.inner {
            StreamInner::Direct(fd) => {
                RecvInner::Direct(MultiOp::new(op::RecvMultiDirect::new(fd, ring.clone())))
            }
            StreamInner::Plain(s) => RecvInner::Plain(s.recv_stream(ring)),
        };
        DirectRecvStream {
            inner,
            _stream: std::marker::PhantomData,
        }
    }

    /// Shuts down the write direction (`shutdown(SHUT_WR)`): the peer reads end of stream, as
    /// tokio's `AsyncWriteExt::shutdown` does.
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the shutdown may or may not have happened; calling it
    /// again is harmless.
    pub async fn shutdown(&self) -> io::Result<()> {
        self.shutdown_with(Shutdown::Write).await
    }

    /// Shuts down the read, write, or both directions (std's `shutdown(how)`).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the shutdown may or may not have happened; calling it
    /// again is harmless.
    pub async fn shutdown_with(&self, how: Shutdown) -> io::Result<()> {
        match &self.inner {
            StreamInner::Direct(fd) => {
                let how = match how {
                    Shutdown::Read => libc::SHUT_RD,
                    Shutdown::Write => libc::SHUT_WR,
                    Shutdown::Both => libc::SHUT_RDWR,
                };
                Op::new(op::ShutdownDirect::new(fd, how)).await
            }
            StreamInner::Plain(s) => s.shutdown_with(how).await,
        }
    }

    /// Closes the connection through the ring and waits for the result (for a direct
    /// descriptor, `IORING_OP_CLOSE` on its slot).
    ///
    /// # Cancel safety
    ///
    /// If it is dropped before it completes, the close still happens (the fd is never leaked), but
    /// its result is lost.
    pub async fn close(self) -> io::Result<()> {
        match self.inner {
            StreamInner::Direct(fd) => Op::new(op::CloseDirect::new(fd)).await,
            StreamInner::Plain(s) => s.close().await,
        }
    }

    /// The peer's address; `Unsupported` on a direct descriptor.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            StreamInner::Direct(_) => Err(unsupported("peer_addr")),
            StreamInner::Plain(s) => s.peer_addr(),
        }
    }

    /// Sets `TCP_NODELAY`; `Unsupported` on a direct descriptor (set it on the listener, see
    /// [`TcpListener::set_nodelay`]).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match &self.inner {
            StreamInner::Direct(_) => Err(unsupported("set_nodelay")),
            StreamInner::Plain(s) => set_nodelay_fd(s.as_raw_fd(), on),
        }
    }
}

/// The stream of [`DirectTcpStream::recv_stream`].
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct DirectRecvStream<'a> {
    inner: RecvInner<'a>,
    _stream: std::marker::PhantomData<&'a DirectTcpStream>,
}

#[derive(Debug)]
enum RecvInner<'a> {
    Direct(MultiOp<op::RecvMultiDirect>),
    Plain(RecvStream<'a>),
}

impl DirectRecvStream<'_> {
    /// The next received buffer; `None` at end of stream.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a buffer received for a dropped call is returned by the next one
    /// (bytes received after the stream itself is dropped go back to the ring).
    pub async fn next(&mut self) -> Option<io::Result<RingBuf>> {
        match &mut self.inner {
            RecvInner::Direct(op) => op.next().await,
            RecvInner::Plain(s) => s.next().await,
        }
    }
}
