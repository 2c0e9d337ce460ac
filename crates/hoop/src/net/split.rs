//! What every connected stream (TCP, Unix) and its halves share: the owned-buffer methods, the
//! state of the poll-based traits, and splitting into a read half and a write half.
//!
//! A stream splits two ways, as tokio's do:
//! * [`into_split`](crate::net::TcpStream::into_split) gives two owned halves that share the
//!   socket (an `Arc`): each can move to its own task or thread, and
//!   [`reunite`](crate::net::tcp::OwnedReadHalf::reunite) makes the stream again;
//! * [`split`](crate::net::TcpStream::split) borrows the stream for two halves that live no
//!   longer than the borrow.
//!
//! Either way there is no lock: the owned-buffer methods take `&self` and go straight to the
//! ring, and each half keeps its own state for the poll-based traits (the read half the bytes
//! read ahead, the write half the write-behind). Bytes the stream had read ahead or accepted
//! for writing before the split go with the half of their direction and come back when the
//! halves are reunited (or, for `split`, when the stream is used whole again).
//!
//! Dropping an [`OwnedWriteHalf`](crate::net::tcp::OwnedWriteHalf) writes what its
//! `AsyncWrite` accepted and did not write yet, then shuts down the write direction
//! (`shutdown(SHUT_WR)`, as tokio's does) so the peer reads every byte, then end of stream,
//! while the read half still reads; its `forget` skips the shutdown. The pending writes are
//! finished by a detached task of the runtime (see the crate docs, "Poll-based I/O"), whose
//! errors are dropped: `flush` (or `shutdown().await`) a write half to see them.

use crate::poll_io::{Kind, PollIo};

/// The poll-based traits' state of a stream, made on first use: one [`PollIo`] for both
/// directions, or, after a [`split`](crate::net::TcpStream::split), the write direction's
/// apart (merged back when the stream is used whole again).
#[derive(Debug, Default)]
pub(crate) struct PollSlots {
    io: Option<Box<PollIo>>,
    write: Option<Box<PollIo>>,
}

fn new_state() -> Box<PollIo> {
    Box::new(PollIo::new(Kind::Socket))
}

impl PollSlots {
    /// The state of both directions.
    pub(crate) fn whole(&mut self) -> &mut PollIo {
        let io = self.io.get_or_insert_with(new_state);
        if let Some(w) = self.write.take() {
            io.merge_write(*w);
        }
        io
    }

    /// The read direction's state and the write direction's, apart.
    pub(crate) fn halves(&mut self) -> (&mut PollIo, &mut PollIo) {
        let PollSlots { io, write } = self;
        let io = io.get_or_insert_with(new_state);
        let write = match write {
            Some(w) => w,
            None => write.insert(Box::new(io.split_write())),
        };
        (io, write)
    }

    /// The two directions' states for owned halves (`None`: never used).
    pub(crate) fn into_halves(mut self) -> (Option<Box<PollIo>>, Option<Box<PollIo>>) {
        match self.io.take() {
            Some(mut io) => {
                let write = match self.write.take() {
                    Some(w) => w,
                    None => Box::new(io.split_write()),
                };
                (Some(io), Some(write))
            }
            None => (None, self.write.take()),
        }
    }

    /// The state of both directions, merged (for a drop); `None`: never used.
    pub(crate) fn take_whole(&mut self) -> Option<Box<PollIo>> {
        let mut io = self.io.take();
        if let Some(w) = self.write.take() {
            io.get_or_insert_with(new_state).merge_write(*w);
        }
        io
    }

    /// The state of reunited halves.
    pub(crate) fn from_halves(read: Option<Box<PollIo>>, write: Option<Box<PollIo>>) -> PollSlots {
        PollSlots { io: read, write }
    }
}

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

/// The halves of stream type `$stream` (whose fields are `io: PollSlots, socket: Socket`),
/// with addresses of type `$addr` made by `$conv(SockAddr)`.
macro_rules! split_halves {
    ($stream:ident, $addr:ty, $conv:expr) => {
        impl $stream {
            /// Splits the stream into a read half and a write half that own it together (an
            /// `Arc`, no lock): each can go to its own task or thread. Both keep the
            /// owned-buffer methods, the deadlines and the I/O traits; bytes read ahead or
            /// accepted for writing go with their half. Dropping the write half shuts down the
            /// write direction (see [`OwnedWriteHalf`]); [`OwnedReadHalf::reunite`] makes the
            /// stream again. The socket closes when both halves are gone.
            pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
                let mut this = self;
                let (read_io, write_io) = std::mem::take(&mut this.io).into_halves();
                let socket = std::sync::Arc::new(this.socket.take());
                (
                    OwnedReadHalf {
                        io: read_io,
                        socket: socket.clone(),
                    },
                    OwnedWriteHalf {
                        io: write_io,
                        socket,
                        shutdown_on_drop: true,
                    },
                )
            }

            /// Splits the stream into a read half and a write half that borrow it (no lock,
            /// no `Arc`), to read and write at once in one task, e.g. with `select!` or
            /// `tokio::io::copy`. Unlike tokio's, the halves keep the owned-buffer methods and
            /// deadlines too. Bytes a half read ahead or accepted for writing stay with the
            /// stream when the halves are dropped.
            pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
                let (read_io, write_io) = self.io.halves();
                (
                    ReadHalf {
                        io: read_io,
                        socket: &self.socket,
                    },
                    WriteHalf {
                        io: write_io,
                        socket: &self.socket,
                    },
                )
            }

            fn poll_io(&mut self) -> (std::os::fd::RawFd, &mut $crate::poll_io::PollIo) {
                (self.socket.raw(), self.io.whole())
            }

            fn poll_read_io(
                &mut self,
            ) -> (
                std::os::fd::RawFd,
                Option<&$crate::net::kept::Kept>,
                &mut $crate::poll_io::PollIo,
            ) {
                (self.socket.raw(), Some(self.socket.kept()), self.io.whole())
            }

            fn sock(&self) -> &$crate::net::socket::Socket {
                &self.socket
            }
        }

        /// The read half of a stream split by `into_split`: reads with owned buffers, with
        /// deadlines, and through `AsyncRead`.
        #[derive(Debug)]
        pub struct OwnedReadHalf {
            // Declared first: operations of the traits are dropped before the socket.
            io: Option<Box<$crate::poll_io::PollIo>>,
            socket: std::sync::Arc<$crate::net::socket::Socket>,
        }

        /// The write half of a stream split by `into_split`: writes with owned buffers, with
        /// deadlines, and through `AsyncWrite`. Dropping it shuts down the write direction
        /// (`shutdown(SHUT_WR)`: the peer reads end of stream) unless it was
        /// [`forget`](Self::forget)-ten or reunited, after the bytes its `AsyncWrite` accepted
        /// are written (errors of those writes are dropped: flush to see them).
        #[derive(Debug)]
        pub struct OwnedWriteHalf {
            io: Option<Box<$crate::poll_io::PollIo>>,
            socket: std::sync::Arc<$crate::net::socket::Socket>,
            shutdown_on_drop: bool,
        }

        /// The read half of a stream split by `split`.
        #[derive(Debug)]
        pub struct ReadHalf<'a> {
            io: &'a mut $crate::poll_io::PollIo,
            socket: &'a $crate::net::socket::Socket,
        }

        /// The write half of a stream split by `split` (dropping it does not shut anything
        /// down).
        #[derive(Debug)]
        pub struct WriteHalf<'a> {
            io: &'a mut $crate::poll_io::PollIo,
            socket: &'a $crate::net::socket::Socket,
        }

        /// Two halves given to `reunite` that are not of the same stream; they are given back.
        #[derive(Debug)]
        pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

        impl std::fmt::Display for ReuniteError {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tried to reunite halves that are not from the same socket")
            }
        }

        impl std::error::Error for ReuniteError {}

        impl OwnedReadHalf {
            $crate::net::split::read_methods!();

            /// Makes the stream again from its two halves; `Err` (with both halves) if `other`
            /// is not this stream's write half.
            pub fn reunite(self, other: OwnedWriteHalf) -> Result<$stream, ReuniteError> {
                if !std::sync::Arc::ptr_eq(&self.socket, &other.socket) {
                    return Err(ReuniteError(self, other));
                }
                let mut other = other;
                other.shutdown_on_drop = false;
                let write_io = other.io.take();
                drop(other);
                let OwnedReadHalf { io, socket } = self;
                match std::sync::Arc::try_unwrap(socket) {
                    Ok(socket) => Ok($stream {
                        io: $crate::net::split::PollSlots::from_halves(io, write_io),
                        socket,
                    }),
                    // Not reachable: the two halves held the only references.
                    Err(socket) => Err(ReuniteError(
                        OwnedReadHalf {
                            io,
                            socket: socket.clone(),
                        },
                        OwnedWriteHalf {
                            io: write_io,
                            socket,
                            shutdown_on_drop: true,
                        },
                    )),
                }
            }

            /// The local address.
            pub fn local_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.local_addr()?)
            }

            /// The peer's address.
            pub fn peer_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.peer_addr()?)
            }

            fn poll_read_io(
                &mut self,
            ) -> (
                std::os::fd::RawFd,
                Option<&$crate::net::kept::Kept>,
                &mut $crate::poll_io::PollIo,
            ) {
                let io = self.io.get_or_insert_with(|| {
                    Box::new($crate::poll_io::PollIo::new($crate::poll_io::Kind::Socket))
                });
                (self.socket.raw(), Some(self.socket.kept()), io)
            }

            fn sock(&self) -> &$crate::net::socket::Socket {
                &self.socket
            }
        }

        impl OwnedWriteHalf {
            $crate::net::split::write_methods!();

            /// Makes the stream again from its two halves (see [`OwnedReadHalf::reunite`]).
            pub fn reunite(self, other: OwnedReadHalf) -> Result<$stream, ReuniteError> {
                other.reunite(self)
            }

            /// Drops the half without shutting down the write direction: the socket stays
            /// fully open until the read half is dropped too.
            pub fn forget(mut self) {
                self.shutdown_on_drop = false;
            }

            /// The local address.
            pub fn local_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.local_addr()?)
            }

            /// The peer's address.
            pub fn peer_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.peer_addr()?)
            }

            fn poll_io(&mut self) -> (std::os::fd::RawFd, &mut $crate::poll_io::PollIo) {
                let io = self.io.get_or_insert_with(|| {
                    Box::new($crate::poll_io::PollIo::new($crate::poll_io::Kind::Socket))
                });
                (self.socket.raw(), io)
            }

            fn sock(&self) -> &$crate::net::socket::Socket {
                &self.socket
            }
        }

        impl Drop for OwnedWriteHalf {
            fn drop(&mut self) {
                // The write-behind first (finished by a detached writer, or cancelled where
                // none can run), then the write direction: the peer reads every accepted byte,
                // then end of stream, while the read half reads on (DESIGN.md, "Writes
                // accepted are written").
                let io = self.io.take();
                if io.is_none() && !self.shutdown_on_drop {
                    return;
                }
                let socket = self.socket.clone();
                $crate::net::socket::Socket::finish_then_shutdown(
                    io,
                    socket,
                    self.shutdown_on_drop,
                );
            }
        }

        impl Drop for $stream {
            fn drop(&mut self) {
                // Accepted bytes are written before the close (DESIGN.md, "Writes accepted
                // are written"): see `poll_io::finish_then`.
                let io = self.io.take_whole();
                let socket = self.socket.take();
                let fd = socket.raw();
                $crate::poll_io::finish_then(io, fd, move || drop(socket));
            }
        }

        impl ReadHalf<'_> {
            $crate::net::split::read_methods!();

            /// The local address.
            pub fn local_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.local_addr()?)
            }

            /// The peer's address.
            pub fn peer_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.peer_addr()?)
            }

            fn poll_read_io(
                &mut self,
            ) -> (
                std::os::fd::RawFd,
                Option<&$crate::net::kept::Kept>,
                &mut $crate::poll_io::PollIo,
            ) {
                (self.socket.raw(), Some(self.socket.kept()), &mut *self.io)
            }

            fn sock(&self) -> &$crate::net::socket::Socket {
                self.socket
            }
        }

        impl WriteHalf<'_> {
            $crate::net::split::write_methods!();

            /// The local address.
            pub fn local_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.local_addr()?)
            }

            /// The peer's address.
            pub fn peer_addr(&self) -> std::io::Result<$addr> {
                ($conv)(self.socket.peer_addr()?)
            }

            fn poll_io(&mut self) -> (std::os::fd::RawFd, &mut $crate::poll_io::PollIo) {
                (self.socket.raw(), &mut *self.io)
            }

            fn sock(&self) -> &$crate::net::socket::Socket {
                self.socket
            }
        }

        impl std::os::fd::AsRawFd for OwnedReadHalf {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                self.socket.raw()
            }
        }
        impl std::os::fd::AsFd for OwnedReadHalf {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.socket.as_fd()
            }
        }
        impl std::os::fd::AsRawFd for OwnedWriteHalf {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                self.socket.raw()
            }
        }
        impl std::os::fd::AsFd for OwnedWriteHalf {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.socket.as_fd()
            }
        }

        $crate::poll_io::poll_io_traits!($stream);
        $crate::poll_io::poll_io_traits!(OwnedReadHalf, read);
        $crate::poll_io::poll_io_traits!(OwnedWriteHalf, write);
        $crate::poll_io::poll_io_traits!(ReadHalf<'_>, read);
        $crate::poll_io::poll_io_traits!(WriteHalf<'_>, write);
    };
}
pub(crate) use split_halves;
