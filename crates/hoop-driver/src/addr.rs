//! Socket addresses in the kernel's layout.

use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A `sockaddr_storage` and its length: any address the kernel can take or give.
#[derive(Clone, Copy)]
pub struct SockAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl std::fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.as_socket_addr(), self.as_unix_path()) {
            (Some(a), _) => write!(f, "{a}"),
            (_, Some(p)) => write!(f, "unix:{}", p.display()),
            _ => write!(f, "SockAddr(family {})", self.family()),
        }
    }
}

impl SockAddr {
    /// An empty address, for the kernel to fill (accept, recvmsg).
    pub fn empty() -> SockAddr {
        SockAddr {
            // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
            storage: unsafe { mem::zeroed() },
            len: mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    /// The address family (`AF_INET`, `AF_INET6`, `AF_UNIX`).
    pub fn family(&self) -> libc::sa_family_t {
        self.storage.ss_family
    }

    /// Length in bytes of the meaningful part.
    pub fn len(&self) -> libc::socklen_t {
        self.len
    }

    /// Whether the address is empty (length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pointer for the kernel.
    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }

    /// Mutable pointer for the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }

    /// The same storage with the length the kernel reported.
    pub fn with_len(mut self, len: libc::socklen_t) -> SockAddr {
        self.len = len;
        self
    }

    /// An IPv4 or IPv6 address.
    pub fn from_std(addr: SocketAddr) -> SockAddr {
        let mut s = SockAddr::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe { std::ptr::write(s.as_mut_ptr().cast(), sin) };
                s.len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe { std::ptr::write(s.as_mut_ptr().cast(), sin6) };
                s.len = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        s
    }

    /// A Unix-domain address for `path`, or `None` if the path is too long.
    pub fn unix(path: &Path) -> Option<SockAddr> {
        let bytes = path.as_os_str().as_bytes();
        let mut s = SockAddr::empty();
        // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_un.
        let sun = unsafe { &mut *(s.as_mut_ptr() as *mut libc::sockaddr_un) };
        if bytes.len() >= sun.sun_path.len() {
            return None;
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, &b) in sun.sun_path.iter_mut().zip(bytes) {
            *d = b as libc::c_char;
        }
        let base = mem::size_of::<libc::sa_family_t>();
        s.len = (base + bytes.len() + 1) as libc::socklen_t;
        Some(s)
    }

    /// The IP address, if this is one.
    pub fn as_socket_addr(&self) -> Option<SocketAddr> {
        match i32::from(self.family()) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin = unsafe { &*(self.as_ptr() as *const libc::sockaddr_in) };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6 = unsafe { &*(self.as_ptr() as *const libc::sockaddr_in6) };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// The path of a Unix-domain address (empty for an unnamed socket), if this is one.
    pub fn as_unix_path(&self) -> Option<PathBuf> {
        if i32::from(self.family()) != libc::AF_UNIX {
            return None;
        }
        // SAFETY: the family says the storage holds a sockaddr_un.
        let sun = unsafe { &*(self.as_ptr() as *const libc::sockaddr_un) };
        let base = mem::size_of::<libc::sa_family_t>();
        let n = (self.len as usize)
            .saturating_sub(base)
            .min(sun.sun_path.len());
        let bytes: Vec<u8> = sun.sun_path[..n]
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_round_trip() {
        for a in ["127.0.0.1:7000", "[::1]:80", "[fe80::1%2]:9"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(SockAddr::from_std(a).as_socket_addr(), Some(a));
        }
    }

    #[test]
    fn unix_round_trip() {
        let p = Path::new("/tmp/hoop.sock");
        let s = SockAddr::unix(p).unwrap();
        assert_eq!(s.as_unix_path().unwrap(), p);
        assert!(SockAddr::unix(Path::new(&"x".repeat(200))).is_none());
    }
}
