//! The owned-buffer read and write methods of a stream and its halves, with their deadlines.

/// The owned-buffer read methods of a stream or its read half (`self.sock()` is the socket).
macro_rules! read_methods {
    () => {
        /// Reads into `buf` (from its start, up to its capacity); `Ok(0)` is end of stream. The
        /// buffer's length becomes exactly the bytes read (see the crate docs' read rule).
        ///
        /// # Cancel safety
        ///
        /// This method is cancel safe. If it is the event of a `select!` branch and another branch
        /// completes first, no data is lost: the read stays in flight on the stream, and the next
        /// read returns its bytes, in order (only the buffer given to the dropped call is not
        /// returned).
        pub async fn read<B: hoop_driver::IoBufMut>(
            &self,
            buf: B,
        ) -> hoop_driver::BufResult<usize, B> {
            self.sock().recv(buf).await
        }

        /// Reads exactly `buf.len()` bytes (the whole view of a `buf.slice(..n)`);
        /// `UnexpectedEof` if the peer closes first, the buffer's length then being the bytes
        /// that arrived. `vec![0u8; n]` or `buf.slice(..n)` ask for `n` bytes.
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes already
        /// placed in its buffer are lost with the buffer (the read in flight is kept for the next
        /// read). In `select!`, use [`read`](Self::read) and gather the bytes yourself.
        pub async fn read_exact<B: hoop_driver::IoBufMut>(
            &self,
            buf: B,
        ) -> hoop_driver::BufResult<(), B> {
            self.sock().recv_exact(buf).await
        }

        /// [`read`](Self::read) with a deadline linked to it in the kernel
        /// (`IORING_OP_LINK_TIMEOUT`; the timer heap on epoll): if `timeout` passes first, the
        /// read is cancelled and fails with `TimedOut` ("deadline of 200 ms passed", an
        /// [`Elapsed`](crate::time::Elapsed) inside), and the buffer comes back as with any
        /// result.
        ///
        /// # Cancel safety
        ///
        /// This method is cancel safe. If it is the event of a `select!` branch and another branch
        /// completes first, no data is lost: the read stays in flight on the stream, and the next
        /// read returns its bytes, in order (only the buffer given to the dropped call is not
        /// returned).
        pub async fn read_timeout<B: hoop_driver::IoBufMut>(
            &self,
            buf: B,
            timeout: std::time::Duration,
        ) -> hoop_driver::BufResult<usize, B> {
            self.sock()
                .recv_until(buf, $crate::net::socket::deadline(timeout))
                .await
        }

        /// [`read_exact`](Self::read_exact) within `timeout` for the whole buffer (each read
        /// has the deadline linked to it in the kernel); on `TimedOut` the buffer's length is
        /// the bytes that arrived.
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes already
        /// placed in its buffer are lost with the buffer (the read in flight is kept for the next
        /// read). In `select!`, use [`read`](Self::read) and gather the bytes yourself.
        pub async fn read_exact_timeout<B: hoop_driver::IoBufMut>(
            &self,
            buf: B,
            timeout: std::time::Duration,
        ) -> hoop_driver::BufResult<(), B> {
            self.sock()
                .recv_exact_until(buf, $crate::net::socket::deadline(timeout))
                .await
        }
    };
}
pub(crate) use read_methods;

/// The owned-buffer write methods of a stream or its write half (`self.sock()` is the socket).
macro_rules! write_methods {
    () => {
        /// Writes the initialized bytes of `buf` once; returns how many were sent.
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
        /// been sent in part or in whole, and how many is lost. In `select!`, write through
        /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
        /// which takes bytes only when it returns them as written and then sends them even if the
        /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
        /// dropping it.
        pub async fn write<B: hoop_driver::IoBuf>(
            &self,
            buf: B,
        ) -> hoop_driver::BufResult<usize, B> {
            self.sock().send(buf).await
        }

        /// Writes every initialized byte of `buf`.
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
        /// been sent in part or in whole, and how many is lost. In `select!`, write through
        /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
        /// which takes bytes only when it returns them as written and then sends them even if the
        /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
        /// dropping it.
        pub fn write_all<B: hoop_driver::IoBuf>(
            &self,
            buf: B,
        ) -> impl std::future::Future<Output = hoop_driver::BufResult<(), B>> + '_ {
            // Not an `async fn`: the future is the socket's own, with no second copy of the
            // arguments around it (a task parked elsewhere still holds room for it).
            self.sock().send_all(buf)
        }

        /// [`write`](Self::write) with a deadline linked to it in the kernel
        /// (`IORING_OP_LINK_TIMEOUT`; the timer heap on epoll): if `timeout` passes first, the
        /// write is cancelled and fails with `TimedOut` ("deadline of 200 ms passed"), and the
        /// buffer comes back as with any result.
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
        /// been sent in part or in whole, and how many is lost. In `select!`, write through
        /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
        /// which takes bytes only when it returns them as written and then sends them even if the
        /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
        /// dropping it.
        pub async fn write_timeout<B: hoop_driver::IoBuf>(
            &self,
            buf: B,
            timeout: std::time::Duration,
        ) -> hoop_driver::BufResult<usize, B> {
            self.sock()
                .send_until(buf, $crate::net::socket::deadline(timeout))
                .await
        }

        /// [`write_all`](Self::write_all) within `timeout` for the whole buffer (each send has
        /// the deadline linked to it in the kernel).
        ///
        /// # Cancel safety
        ///
        /// This method is not cancel safe: if it is dropped before it completes, the bytes may have
        /// been sent in part or in whole, and how many is lost. In `select!`, write through
        /// `AsyncWrite` instead (`AsyncWriteExt::write(&mut stream, &bytes)`, futures' or tokio's),
        /// which takes bytes only when it returns them as written and then sends them even if the
        /// stream is dropped; or keep this future across the loop's rounds (pinned) rather than
        /// dropping it.
        pub async fn write_all_timeout<B: hoop_driver::IoBuf>(
            &self,
            buf: B,
            timeout: std::time::Duration,
        ) -> hoop_driver::BufResult<(), B> {
            self.sock()
                .send_all_until(buf, $crate::net::socket::deadline(timeout))
                .await
        }

        /// Shuts down the write direction as tokio's `AsyncWriteExt::shutdown` does: flushes
        /// what the poll-based `AsyncWrite` accepted, then `shutdown(SHUT_WR)`; the peer reads
        /// end of stream. (std's `shutdown(how)` is [`shutdown_with`](Self::shutdown_with).)
        ///
        /// # Cancel safety
        ///
        /// This method is cancel safe in the sense that calling it again after a dropped call
        /// resumes where that one stopped: bytes `AsyncWrite` accepted are neither lost nor sent
        /// twice.
        pub async fn shutdown(&mut self) -> std::io::Result<()> {
            std::future::poll_fn(|cx| {
                let (fd, io) = self.poll_io();
                io.poll_close(fd, cx)
            })
            .await
        }

        /// Shuts down the read, write or both directions at once, as std's
        /// `TcpStream::shutdown(how)` does (nothing accepted by `AsyncWrite` is flushed first:
        /// see [`shutdown`](Self::shutdown)).
        ///
        /// # Cancel safety
        ///
        /// If it is dropped before it completes, the shutdown may or may not have happened; calling
        /// it again is harmless.
        pub async fn shutdown_with(&self, how: std::net::Shutdown) -> std::io::Result<()> {
            self.sock().shutdown(how).await
        }
    };
}
pub(crate) use write_methods;
