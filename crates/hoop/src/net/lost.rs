//! [`connection_lost`]: which errors mean "the connection is gone, make a new one".

use std::io;

/// Whether `e` is what a client sees when its connection was reset or closed under it:
/// `ECONNRESET`, `EPIPE`, `ECONNABORTED`, `ENOTCONN` (what `shutdown` says on a connection
/// the peer reset), or an end of stream before the whole answer (`UnexpectedEof`, as
/// `read_exact` returns it when the peer closed early).
///
/// Such an error ends that connection, not the program: a client asks again on a new one
/// (if the request may be repeated), and an accept loop takes the next connection. Any other
/// error (a refused connect, a timeout, wrong bytes) is not one of these.
///
/// ```
/// use std::io::{Error, ErrorKind};
///
/// assert!(hoop::net::connection_lost(&Error::from(ErrorKind::ConnectionReset)));
/// assert!(hoop::net::connection_lost(&Error::from_raw_os_error(libc::EPIPE)));
/// assert!(hoop::net::connection_lost(&Error::from_raw_os_error(libc::ENOTCONN)));
/// assert!(!hoop::net::connection_lost(&Error::from(ErrorKind::TimedOut)));
/// ```
pub fn connection_lost(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::UnexpectedEof
    ) || matches!(
        e.raw_os_error(),
        Some(libc::ECONNRESET)
            | Some(libc::EPIPE)
            | Some(libc::ECONNABORTED)
            | Some(libc::ENOTCONN)
    )
}
