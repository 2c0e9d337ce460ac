//! Driver implementations. Each operation in [`crate::op`] is implemented once per driver.

pub mod epoll;
pub mod uring;

/// `fd`'s socket type (`SO_TYPE`), or `None` for an fd that is not a socket.
fn socket_type(fd: std::os::fd::RawFd) -> Option<libc::c_int> {
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `ty`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(ty)
}

/// Whether `fd` is a message socket: a datagram (UDP, a Unix datagram socket), seqpacket or
/// reliable-datagram socket, where one call moves one whole message. Anything else (a stream
/// socket, a pipe, an fd `SO_TYPE` cannot be asked of) counts as a stream.
pub(crate) fn is_message_socket(fd: std::os::fd::RawFd) -> bool {
    matches!(
        socket_type(fd),
        Some(libc::SOCK_DGRAM | libc::SOCK_SEQPACKET | libc::SOCK_RDM)
    )
}

/// Whether a send or receive on `fd` may fail with `ECONNRESET` on Linux, for fault
/// injection, which makes the error up only where a kernel could return it. A
/// connection-oriented socket (TCP, a Unix stream or seqpacket socket) may be reset. A
/// datagram socket is not: UDP's errors come from ICMP (`ECONNREFUSED` for a port
/// unreachable, `EHOSTUNREACH`, `EMSGSIZE`, ...; the kernel's ICMP-to-errno tables have no
/// `ECONNRESET`), and a Unix datagram socket sees `ECONNRESET` only when its connected peer,
/// alive, connects elsewhere with messages unread (a closed peer gives `ECONNREFUSED` on a
/// send, nothing on a receive). Anything else (an fd `SO_TYPE` cannot be asked of) may be.
pub(crate) fn may_be_reset(fd: std::os::fd::RawFd) -> bool {
    !matches!(socket_type(fd), Some(libc::SOCK_DGRAM | libc::SOCK_RDM))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    #[test]
    fn only_connection_sockets_may_be_reset() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (stream, _) = std::os::unix::net::UnixStream::pair().unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (dgram, _) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert!(super::may_be_reset(tcp.as_raw_fd()));
        assert!(super::may_be_reset(stream.as_raw_fd()));
        assert!(!super::may_be_reset(udp.as_raw_fd()));
        assert!(!super::may_be_reset(dgram.as_raw_fd()));
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two new fds into the array; they are closed below.
        let r =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0);
        assert!(super::may_be_reset(fds[0]), "a seqpacket socket is reset");
        assert!(super::is_message_socket(fds[0]));
        for fd in fds {
            // SAFETY: the fds were made above and nothing else owns them.
            unsafe { libc::close(fd) };
        }
    }
}
