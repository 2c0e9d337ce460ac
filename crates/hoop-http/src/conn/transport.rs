//! What a connection's bytes travel over: the socket itself (a direct descriptor or a plain
//! socket: the ring's multishot receive, `sendfile(2)` and splice apply), TLS records over a
//! plain socket, or one HTTP/2 stream (`crate::http2`). The request loop sees one API; only the
//! socket has an fd, so the zero-copy senders and the readiness reader pass TLS and HTTP/2 by
//! and those take the copying paths (a file read through the ring, then written).
//!
//! TLS is rustls driven through tokio's I/O traits over hoop's socket (`tokio-rustls`): the
//! handshake and every record are read and written by the ring's operations on this thread,
//! with no thread hop. The stream sits in a `RefCell` borrowed only inside one `poll` call,
//! never across an await, so a read and a write of one connection may interleave (a request
//! body streamed while its response goes out) and rustls orders their records.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::task::Poll;

use hoop::net::{DirectRecvStream, DirectTcpStream, TcpStream};
use hoop::{BufResult, BufRing, IoBuf};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A TLS connection on hoop's socket (which writes nothing after a write that lost bytes).
pub(crate) type TlsStream = tokio_rustls::server::TlsStream<hoop::net::TcpStream>;

/// A connection's transport (see the module's text).
pub(crate) enum Transport {
    /// The socket, bytes as they are.
    Tcp(DirectTcpStream),
    /// TLS records over the socket (boxed: rustls' state is over a kilobyte, which a plain
    /// connection's task should not carry).
    Tls(Box<RefCell<TlsStream>>),
    /// One HTTP/2 stream.
    H2(Box<crate::http2::StreamIo>),
}

impl Transport {
    /// The plain socket, where bytes go to it as they are (`sendfile(2)`, splice, readiness).
    pub(crate) fn as_tcp_stream(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => s.as_tcp_stream(),
            Transport::Tls(_) | Transport::H2(_) => None,
        }
    }

    /// The socket, where bytes go to it as they are (splice names its slot or fd).
    pub(crate) fn as_direct(&self) -> Option<&DirectTcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Tls(_) | Transport::H2(_) => None,
        }
    }

    /// The HTTP/2 stream, which takes owned bytes without a copy.
    pub(crate) fn as_h2(&self) -> Option<&crate::http2::StreamIo> {
        match self {
            Transport::H2(s) => Some(s),
            Transport::Tcp(_) | Transport::Tls(_) => None,
        }
    }

    /// The socket, where the multishot receive can read it.
    pub(crate) fn recv_stream<'a>(&'a self, ring: &BufRing) -> Option<DirectRecvStream<'a>> {
        match self {
            Transport::Tcp(s) => Some(s.recv_stream(ring)),
            Transport::Tls(_) | Transport::H2(_) => None,
        }
    }

    /// Whether the transport delimits a body itself (an HTTP/2 stream ends with it), so a
    /// body of unknown length needs no chunked coding.
    pub(crate) fn frames_bodies(&self) -> bool {
        matches!(self, Transport::H2(_))
    }

    /// The client's address.
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Transport::Tcp(s) => s.peer_addr(),
            Transport::Tls(s) => s.borrow().get_ref().0.peer_addr(),
            Transport::H2(s) => s.peer_addr(),
        }
    }

    /// Writes every initialized byte of `buf`.
    ///
    /// Not cancel safe (as [`DirectTcpStream::write_all`]): dropped early, some bytes may
    /// have gone out; the caller then closes the connection.
    pub(crate) async fn write_all<B: IoBuf>(&self, buf: B) -> BufResult<(), B> {
        match self {
            Transport::Tcp(s) => s.write_all(buf).await,
            Transport::Tls(s) => {
                let res = {
                    // SAFETY: `IoBuf` (an unsafe trait) promises `bytes_init` initialized
                    // bytes at `stable_ptr` for as long as `buf` lives unmoved and unchanged;
                    // `buf` is neither moved nor changed until the slice's last use below.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) };
                    write_tls(s, bytes).await
                };
                (res, buf)
            }
            Transport::H2(s) => {
                let res = {
                    // SAFETY: as above: `buf` outlives the slice, unmoved and unchanged.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) };
                    s.write_all(bytes).await
                };
                (res, buf)
            }
        }
    }

    /// Reads into `buf` (its length set to what is filled: at most its capacity, which must
    /// not be 0); `Ok(0)` is end of stream.
    pub(crate) async fn read(&self, mut buf: Vec<u8>) -> BufResult<usize, Vec<u8>> {
        match self {
            Transport::Tcp(s) => s.read(buf).await,
            Transport::Tls(s) => {
                buf.clear();
                let res = poll_fn(|cx| {
                    let mut s = s.borrow_mut();
                    let mut rb = ReadBuf::uninit(buf.spare_capacity_mut());
                    match Pin::new(&mut *s).poll_read(cx, &mut rb) {
                        Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
                        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await;
                if let Ok(n) = res {
                    // SAFETY: `poll_read` filled (initialized) the first `n` bytes of the
                    // spare capacity, which starts at index 0 of the cleared vector.
                    unsafe { buf.set_len(n) };
                }
                (res, buf)
            }
            Transport::H2(s) => {
                let res = s.read_into(&mut buf).await;
                (res, buf)
            }
        }
    }

    /// Shuts down a direction of the socket. TLS has no half-closed read: any direction
    /// sends `close_notify` and shuts down the socket's writing; an HTTP/2 stream ends.
    pub(crate) async fn shutdown_with(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => s.shutdown_with(how).await,
            Transport::Tls(s) => {
                poll_fn(|cx| Pin::new(&mut *s.borrow_mut()).poll_shutdown(cx)).await
            }
            Transport::H2(s) => s.finish(),
        }
    }
}

/// Writes `bytes` into the TLS stream and flushes its records to the socket.
async fn write_tls(s: &RefCell<TlsStream>, bytes: &[u8]) -> io::Result<()> {
    let mut pos = 0;
    poll_fn(|cx| {
        let mut s = s.borrow_mut();
        while pos < bytes.len() {
            match Pin::new(&mut *s).poll_write(cx, &bytes[pos..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => pos += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut *s).poll_flush(cx)
    })
    .await
}
