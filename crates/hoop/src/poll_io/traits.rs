//! The trait impls (`futures::io`'s, and tokio's with feature `tokio`) over a [`PollIo`], for
//! every type that has a `poll_io(&mut self) -> (RawFd, &mut PollIo)` method (and, to read,
//! `poll_read_io(&mut self) -> (RawFd, Option<&Kept>, &mut PollIo)`: the socket's kept
//! receives come before the state's next read).
//!
//! [`PollIo`]: super::PollIo

/// Implements `futures::io::AsyncRead`/`AsyncWrite` (and tokio's with feature `tokio`) for a
/// type with a `poll_io(&mut self) -> (RawFd, &mut PollIo)` method.
macro_rules! poll_io_traits {
    (@futures_read $t:ty) => {
        impl futures::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, kept, io) = self.get_mut().poll_read_io();
                io.poll_read(fd, kept, cx, buf)
            }
        }
    };
    (@futures_write $t:ty) => {
        impl futures::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_write(fd, cx, buf)
            }
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_write_vectored(fd, cx, bufs)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_flush(fd, cx)
            }
            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_close(fd, cx)
            }
        }
    };
    (@tokio_write $t:ty) => {
        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
                let (fd, io) = self.get_mut().poll_io();
                let r = io.poll_write(fd, cx, buf);
                if r.is_ready() {
                    coop.made_progress();
                }
                r
            }
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
                let (fd, io) = self.get_mut().poll_io();
                let r = io.poll_write_vectored(fd, cx, bufs);
                if r.is_ready() {
                    coop.made_progress();
                }
                r
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_flush(fd, cx)
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_close(fd, cx)
            }
        }
    };
    // `AsyncSeek` (futures', and tokio's with feature `tokio`) for a file.
    (@seek $t:ty) => {
        impl futures::io::AsyncSeek for $t {
            fn poll_seek(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                pos: std::io::SeekFrom,
            ) -> std::task::Poll<std::io::Result<u64>> {
                let (fd, io) = self.get_mut().poll_io();
                // Polled again with the same position until ready; a seek left half done by a
                // dropped future is replaced by this one (nothing moved before it completes).
                let _ = io.take_seek();
                io.start_seek(pos)?;
                io.poll_seek(fd, cx)
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncSeek for $t {
            fn start_seek(
                self: std::pin::Pin<&mut Self>,
                pos: std::io::SeekFrom,
            ) -> std::io::Result<()> {
                let (_, io) = self.get_mut().poll_io();
                io.start_seek(pos)
            }
            fn poll_complete(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<u64>> {
                let (fd, io) = self.get_mut().poll_io();
                io.poll_seek(fd, cx)
            }
        }
    };
    (@tokio_read $t:ty) => {
        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                // tokio's cooperative budget, as tokio's own I/O types take it: a stream that is
                // always ready (inline completions) still lets its worker's other tasks run.
                let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
                let (fd, kept, io) = self.get_mut().poll_read_io();
                let want = buf.remaining();
                std::task::ready!(io.poll_read_with(fd, kept, cx, want, |bytes| buf
                    .put_slice(bytes)))?;
                coop.made_progress();
                std::task::Poll::Ready(Ok(()))
            }
        }
    };
    // The read half of a split stream.
    ($t:ty, read) => {
        $crate::poll_io::poll_io_traits!(@futures_read $t);
        $crate::poll_io::poll_io_traits!(@tokio_read $t);
    };
    // The write half of a split stream.
    ($t:ty, write) => {
        $crate::poll_io::poll_io_traits!(@futures_write $t);
        $crate::poll_io::poll_io_traits!(@tokio_write $t);
    };
    // The type writes its own tokio `AsyncRead` and `AsyncWrite` (hoop::shared::TcpStream: by
    // readiness and system calls inside a tokio runtime).
    ($t:ty, own_tokio_io) => {
        $crate::poll_io::poll_io_traits!(@futures_read $t);
        $crate::poll_io::poll_io_traits!(@futures_write $t);
    };
    ($t:ty) => {
        $crate::poll_io::poll_io_traits!(@futures_read $t);
        $crate::poll_io::poll_io_traits!(@futures_write $t);
        $crate::poll_io::poll_io_traits!(@tokio_read $t);
        $crate::poll_io::poll_io_traits!(@tokio_write $t);
    };
}
pub(crate) use poll_io_traits;
