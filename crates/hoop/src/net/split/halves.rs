//! Splitting a stream into a read half and a write half, owned (`into_split`) or borrowed
//! (`split`), and reuniting them.

/// The halves of stream type `$stream` (whose fields are `io: PollSlots, socket: Socket`),
/// with addresses of type `$addr` made by `$conv(SockAddr)`.
///
/// A stream splits two ways, as tokio's do:
/// * [`into_split`](crate::net::TcpStream::into_split) gives two owned halves that share the
///   socket (an `Arc`): each can move to its own task or thread, and
///   [`reunite`](crate::net::tcp::OwnedReadHalf::reunite) makes the stream again;
/// * [`split`](crate::net::TcpStream::split) borrows the stream for two halves that live no
///   longer than the borrow.
///
/// Either way there is no lock: the owned-buffer methods take `&self` and go straight to the
/// ring, and each half keeps its own state for the poll-based traits (the read half the bytes
/// read ahead, the write half the write-behind). Bytes the stream had read ahead or accepted
/// for writing before the split go with the half of their direction and come back when the
/// halves are reunited (or, for `split`, when the stream is used whole again).
///
/// Dropping an [`OwnedWriteHalf`](crate::net::tcp::OwnedWriteHalf) writes what its
/// `AsyncWrite` accepted and did not write yet, then shuts down the write direction
/// (`shutdown(SHUT_WR)`, as tokio's does) so the peer reads every byte, then end of stream,
/// while the read half still reads; its `forget` skips the shutdown. The pending writes are
/// finished by a detached task of the runtime (see the crate docs, "Poll-based I/O"), whose
/// errors are dropped: `flush` (or `shutdown().await`) a write half to see them.
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
