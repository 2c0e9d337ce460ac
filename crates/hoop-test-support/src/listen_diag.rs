//! A TCP listener's accept queue as the kernel reports it (`ss -ltn`'s Recv-Q and Send-Q):
//! connections waiting to be accepted, and the listen backlog in effect. Read through
//! `NETLINK_SOCK_DIAG` (`inet_diag`), so a test can check that a backlog reached `listen(2)`
//! without a tool installed.

use std::io;
use std::net::{IpAddr, SocketAddr};

/// A listening socket's queue: `queued` connections completed and not yet accepted, and
/// `backlog`, the most it holds (the listen backlog after the `net.core.somaxconn` cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenQueue {
    /// Connections waiting in the accept queue (`sk_ack_backlog`).
    pub queued: u32,
    /// The listen backlog in effect (`sk_max_ack_backlog`).
    pub backlog: u32,
}

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u32 = 10;
const HDR: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then a 48-byte sockid.
const REQ: usize = 8 + 48;

/// The queue of the TCP socket listening on `addr` (its IP and port, as `local_addr` says);
/// `Ok(None)` if no such listener is found.
pub fn tcp_listen_queue(addr: SocketAddr) -> io::Result<Option<ListenQueue>> {
    // SAFETY: socket(2) has no memory-safety preconditions.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let mut req = [0u8; HDR + REQ];
    req[0..4].copy_from_slice(&((HDR + REQ) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[HDR] = family as u8;
    req[HDR + 1] = libc::IPPROTO_TCP as u8;
    req[HDR + 4..HDR + 8].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    // SAFETY: sockaddr_nl is plain old data; all-zero is valid (the kernel, no groups).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the request and the address are live locals of the lengths given.
    let sent = unsafe {
        libc::sendto(
            raw,
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut buf = vec![0u8; 64 * 1024];
    // A dump of every listener ends with NLMSG_DONE; bounded in case it never comes.
    for _ in 0..10_000 {
        // SAFETY: recv(2) writes at most `buf.len()` bytes into the live buffer.
        let n = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let data = &buf[..n as usize];
        let mut o = 0;
        while o + HDR <= data.len() {
            let len = u32::from_ne_bytes(data[o..o + 4].try_into().unwrap_or_default()) as usize;
            let ty = u16::from_ne_bytes(data[o + 4..o + 6].try_into().unwrap_or_default());
            if len < HDR || o + len > data.len() {
                return Err(io::Error::other("a truncated sock_diag message"));
            }
            match ty {
                NLMSG_DONE => return Ok(found),
                NLMSG_ERROR => {
                    let errno = i32::from_ne_bytes(
                        data[o + HDR..o + HDR + 4].try_into().unwrap_or_default(),
                    );
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                _ => {
                    if let Some(q) = parse_msg(&data[o + HDR..o + len], addr) {
                        found = Some(q);
                    }
                }
            }
            o += (len + 3) & !3;
        }
    }
    Err(io::Error::other("the sock_diag dump did not end"))
}

/// One `struct inet_diag_msg`: the queue, if its socket is the one listening on `addr`.
fn parse_msg(m: &[u8], addr: SocketAddr) -> Option<ListenQueue> {
    // family, state, timer, retrans; sockid (sport, dport big-endian, src 16 bytes, dst 16,
    // if, cookie 8); expires, rqueue, wqueue, uid, inode.
    if m.len() < 72 {
        return None;
    }
    let port = u16::from_be_bytes([m[4], m[5]]);
    let src = &m[8..24];
    let ip_matches = match addr.ip() {
        IpAddr::V4(ip) => src[..4] == ip.octets(),
        IpAddr::V6(ip) => src == ip.octets(),
    };
    if port != addr.port() || !ip_matches {
        return None;
    }
    let word = |at: usize| u32::from_ne_bytes(m[at..at + 4].try_into().unwrap_or_default());
    Some(ListenQueue {
        queued: word(56),
        backlog: word(60),
    })
}
