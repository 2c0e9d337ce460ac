//! The stream of a listener's accepted connections, from one multishot accept.

use std::io;
use std::os::fd::RawFd;

use hoop_driver::{op, MultiOp};

use super::stream::TcpStream;
use crate::net::socket::Socket;

/// The stream of [`TcpListener::incoming`](crate::net::TcpListener::incoming).
#[must_use = "a stream does nothing unless polled"]
#[derive(Debug)]
pub struct Incoming<'a> {
    pub(crate) op: MultiOp<op::AcceptMulti>,
    /// The listener's kept state, where connections accepted for a dropped stream go.
    pub(super) kept: &'a crate::net::kept::Kept,
    /// The listener's descriptor (borrowed with `kept`), for refusing clients past the limit.
    pub(super) listener: RawFd,
}

impl Drop for Incoming<'_> {
    fn drop(&mut self) {
        // Connections the kernel accepted before the cancel ran go to the listener's next
        // `accept` (nothing accepted is closed while the listener lives).
        self.kept
            .park_stream(self.op.take(), crate::net::kept::keep_accepted);
    }
}

impl Incoming<'_> {
    /// The next connection (`None` only if the stream ended for good, e.g. the runtime shut
    /// down).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a connection accepted for a dropped call is returned by the next
    /// one. If the `Incoming` itself is dropped, connections the kernel accepted before its cancel
    /// ran go to the listener's next `accept` (or `incoming()`).
    pub async fn next(&mut self) -> Option<io::Result<TcpStream>> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// A connection kept for the listener (accepted for a dropped call or stream) first, then
    /// the stream's own.
    fn poll_accept(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<TcpStream>>> {
        use crate::net::kept::Outcome;
        use std::task::Poll;
        if !self.op.is_done() {
            match self.kept.poll_take(cx) {
                Poll::Ready(Some(Outcome::Accepted(fd, _))) => {
                    return Poll::Ready(Some(Ok(TcpStream::from_socket(Socket::from_fd(fd)))))
                }
                Poll::Ready(Some(Outcome::Failed(errno))) => {
                    return Poll::Ready(Some(Err(io::Error::from_raw_os_error(errno))))
                }
                Poll::Ready(Some(other)) => self.kept.put_back(other),
                Poll::Ready(None) => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        let item = std::task::ready!(self.op.poll_next(cx));
        if let Some(Err(e)) = &item {
            // Past the descriptor limit: the waiting clients are refused, not left unanswered.
            crate::net::refuse::refuse_waiting(self.listener, e);
        }
        Poll::Ready(item.map(|r| r.map(|fd| TcpStream::from_socket(Socket::from_fd(fd)))))
    }
}

impl futures::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<TcpStream>>> {
        self.poll_accept(cx)
    }
}
