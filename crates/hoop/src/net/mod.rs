//! Sockets: TCP, UDP and Unix-domain, with operations on the ring.

mod direct;
pub(crate) mod socket;
mod tcp;
mod udp;
mod unix;

pub use direct::*;
pub use socket::ToSocketAddrs;
pub use tcp::{Incoming, RecvStream, TcpListener, TcpStream};
pub use udp::*;
pub use unix::*;
