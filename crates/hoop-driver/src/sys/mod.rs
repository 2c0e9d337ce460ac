//! Driver implementations. Each operation in [`crate::op`] is implemented once per driver.

pub mod epoll;
pub mod uring;

/// Whether `fd` is a message socket: a datagram (UDP, a Unix datagram socket), seqpacket or
/// reliable-datagram socket, where one call moves one whole message. Anything else (a stream
/// socket, a pipe, an fd `SO_TYPE` cannot be asked of) counts as a stream.
pub(crate) fn is_message_socket(fd: std::os::fd::RawFd) -> bool {
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
    r == 0 && matches!(ty, libc::SOCK_DGRAM | libc::SOCK_SEQPACKET | libc::SOCK_RDM)
}
