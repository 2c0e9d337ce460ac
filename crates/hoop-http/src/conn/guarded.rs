//! The socket under TLS, writing nothing more after its first failed write.
//!
//! hoop's socket writes behind (`PollIo`): `poll_write` takes the bytes and returns, and an
//! error of that send comes back from a later call, for bytes rustls has already handed over
//! (gone: a hole in the stream). rustls still holds the records written after them, and
//! h2 or a `close_notify` would flush those later: the client would get records it cannot
//! decrypt instead of a connection that ended. So after the first write error every write,
//! flush and shutdown fails at once, and the connection just closes (as after a reset).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hoop::net::TcpStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A socket that refuses writes once one failed.
pub(crate) struct Guarded {
    /// The socket.
    pub(crate) inner: TcpStream,
    broken: bool,
}

impl Guarded {
    pub(crate) fn new(inner: TcpStream) -> Guarded {
        Guarded {
            inner,
            broken: false,
        }
    }

    /// `f` on the socket, unless a write failed before; an error marks it broken.
    fn write_op<T>(
        &mut self,
        f: impl FnOnce(Pin<&mut TcpStream>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.broken {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an earlier write on this connection failed",
            )));
        }
        let r = f(Pin::new(&mut self.inner));
        if let Poll::Ready(Err(_)) = &r {
            self.broken = true;
        }
        r
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_op(|s| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_op(|s| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().write_op(|s| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().write_op(|s| s.poll_shutdown(cx))
    }
}
