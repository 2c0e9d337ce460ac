//! The stream of a connection's received bytes in buffers of a buffer ring, from one multishot
//! receive.

use std::io;

use hoop_driver::{op, MultiOp, RingBuf};

/// The stream of [`TcpStream::recv_stream`](crate::net::TcpStream::recv_stream).
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct RecvStream<'a> {
    pub(crate) op: MultiOp<op::RecvMulti>,
    /// The stream's kept state: bytes of dropped reads, which come before this stream's.
    pub(super) kept: &'a crate::net::kept::Kept,
}

impl RecvStream<'_> {
    /// The next received buffer; `None` at end of stream.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a buffer received for a dropped call is returned by the next
    /// one. If the stream itself is dropped, the bytes it received before its cancel ran go to the
    /// stream's next [`TcpStream::read`](crate::net::TcpStream::read), in order.
    pub async fn next(&mut self) -> Option<io::Result<RingBuf>> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Bytes kept from a dropped read or receive stream come first, in order: they cannot be
    /// yielded as ring buffers, so while there are any the stream fails with `InvalidInput`
    /// (read them with [`TcpStream::read`](crate::net::TcpStream::read)); while a dropped
    /// stream's receive is still ending, it waits.
    fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<RingBuf>>> {
        use std::task::Poll;
        if !self.op.is_done() {
            match self.kept.poll_take(cx) {
                Poll::Ready(Some(got)) => {
                    self.kept.put_back(got);
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "bytes received for a dropped read or recv_stream are kept: read them \
                         with TcpStream::read before starting a recv_stream",
                    ))));
                }
                Poll::Ready(None) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        self.op.poll_next(cx)
    }
}

impl futures::Stream for RecvStream<'_> {
    type Item = io::Result<RingBuf>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<RingBuf>>> {
        self.poll_recv(cx)
    }
}
