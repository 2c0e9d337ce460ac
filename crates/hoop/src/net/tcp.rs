//! TCP listeners and streams.

mod fd_impls;
mod incoming;
mod listener;
mod recv_stream;
#[cfg(test)]
mod ring_tests;
mod stream;
mod zero_copy;

pub(crate) use fd_impls::{fd_traits, into_std};
pub use incoming::Incoming;
pub use listener::TcpListener;
pub use recv_stream::RecvStream;
pub use stream::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, TcpStream, WriteHalf};
