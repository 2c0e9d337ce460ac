//! Sockets: TCP, UDP and Unix-domain, with operations on the ring.

mod accept_pacing;
mod backlog;
mod direct;
pub(crate) mod kept;
mod lost;
mod refuse;
mod reuseport;
pub(crate) mod socket;
pub(crate) mod split;
pub mod tcp;
mod udp;
pub mod unix;

pub use accept_pacing::{AcceptPacing, ACCEPT_BATCH};
pub use backlog::{
    backlog_cap, listen_limits, somaxconn, ListenLimits, ListenOptions, DEFAULT_BACKLOG,
    MAX_BACKLOG,
};
pub use direct::*;
pub use lost::connection_lost;
#[doc(hidden)]
pub use refuse::keep_reserve as keep_fd_reserve;
pub use refuse::refused_connections;
pub use reuseport::ReuseportGroup;
pub use socket::ToSocketAddrs;
pub use tcp::{Incoming, RecvStream, TcpListener, TcpStream};
pub use udp::*;
pub use unix::*;
