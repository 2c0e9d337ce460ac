//! The socket every net type wraps: an owned fd whose operations go through the ring, with the
//! addresses and deadlines those operations take.

mod addr;
mod datagram;
mod deadline;
mod owned;
mod recv;
mod send;

pub use addr::ToSocketAddrs;
pub(crate) use addr::{domain_of, ip_addr, lookup, resolve, resolve_nonblocking};
pub(crate) use deadline::deadline;
pub(crate) use owned::Socket;
