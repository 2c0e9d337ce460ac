//! Socket addresses: what `connect` and `bind` take, resolved without blocking the ring's thread
//! for a host name, and conversions to and from the kernel's.

use std::io;

use hoop_driver::SockAddr;

/// Resolves `addr` (like std's `ToSocketAddrs`, synchronously).
pub(crate) fn resolve(addr: impl std::net::ToSocketAddrs) -> io::Result<Vec<std::net::SocketAddr>> {
    let v: Vec<_> = addr.to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(v)
}

pub(crate) fn domain_of(addr: &std::net::SocketAddr) -> i32 {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

pub(crate) fn ip_addr(addr: SockAddr) -> io::Result<std::net::SocketAddr> {
    addr.as_socket_addr().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not an IP address: {addr:?}"),
        )
    })
}

/// The addresses [`TcpStream::connect`](crate::net::TcpStream::connect) takes: what std's
/// `ToSocketAddrs` takes for sockets (`SocketAddr`, `SocketAddrV4`/`V6`, `(IpAddr, u16)`,
/// `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`, `&[SocketAddr]`, `&str`, `String`, `(&str, u16)`,
/// `(String, u16)`, and references to these). A literal address is parsed in place; a host
/// name (`"localhost:8080"`, `("example.com", 443)`) is resolved with the system resolver on
/// the runtime's blocking pool ([`spawn_blocking`](crate::spawn_blocking)), so the lookup
/// never stalls the ring's thread. Sealed: implemented for those types only.
pub trait ToSocketAddrs: sealed::Sealed {}

pub(crate) mod sealed {
    use std::io;
    use std::net::SocketAddr;

    /// What an address gives: its socket addresses now, or a host name to look up.
    pub enum Resolve {
        /// No lookup needed.
        Ready(io::Result<Vec<SocketAddr>>),
        /// `"host:port"`, for the system resolver.
        HostPort(String),
        /// A host name and a port, for the system resolver.
        Host(String, u16),
    }

    pub trait Sealed {
        fn resolve(&self) -> Resolve;
    }
}

use sealed::Resolve;

macro_rules! ready_addrs {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {
            fn resolve(&self) -> Resolve {
                Resolve::Ready(
                    std::net::ToSocketAddrs::to_socket_addrs(self).map(|i| i.collect()),
                )
            }
        }
        impl ToSocketAddrs for $t {}
    )*};
}

ready_addrs!(
    std::net::SocketAddr,
    std::net::SocketAddrV4,
    std::net::SocketAddrV6,
    (std::net::IpAddr, u16),
    (std::net::Ipv4Addr, u16),
    (std::net::Ipv6Addr, u16)
);

impl sealed::Sealed for [std::net::SocketAddr] {
    fn resolve(&self) -> Resolve {
        Resolve::Ready(Ok(self.to_vec()))
    }
}
impl ToSocketAddrs for [std::net::SocketAddr] {}

impl sealed::Sealed for str {
    fn resolve(&self) -> Resolve {
        match self.parse::<std::net::SocketAddr>() {
            Ok(a) => Resolve::Ready(Ok(vec![a])),
            Err(_) => Resolve::HostPort(self.to_owned()),
        }
    }
}
impl ToSocketAddrs for str {}

impl sealed::Sealed for String {
    fn resolve(&self) -> Resolve {
        self.as_str().resolve()
    }
}
impl ToSocketAddrs for String {}

impl sealed::Sealed for (&str, u16) {
    fn resolve(&self) -> Resolve {
        match self.0.parse::<std::net::IpAddr>() {
            Ok(ip) => Resolve::Ready(Ok(vec![std::net::SocketAddr::new(ip, self.1)])),
            Err(_) => Resolve::Host(self.0.to_owned(), self.1),
        }
    }
}
impl ToSocketAddrs for (&str, u16) {}

impl sealed::Sealed for (String, u16) {
    fn resolve(&self) -> Resolve {
        (self.0.as_str(), self.1).resolve()
    }
}
impl ToSocketAddrs for (String, u16) {}

impl<T: sealed::Sealed + ?Sized> sealed::Sealed for &T {
    fn resolve(&self) -> Resolve {
        (**self).resolve()
    }
}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}

/// Resolves `addr` for a connect: literal addresses at once, host names on the blocking pool
/// (std's resolver there, so the ring's thread never blocks on DNS).
pub(crate) async fn resolve_nonblocking(
    addr: &(impl ToSocketAddrs + ?Sized),
) -> io::Result<Vec<std::net::SocketAddr>> {
    lookup(addr.resolve()).await
}

/// Finishes what [`sealed::Sealed::resolve`] started: the addresses it found, or the system
/// resolver's lookup of its host name on the blocking pool. Owns everything it needs (a
/// `Send + 'static` future), so a caller can take the address by reference, call `resolve`
/// at once and return this.
pub(crate) async fn lookup(found: Resolve) -> io::Result<Vec<std::net::SocketAddr>> {
    let found = match found {
        Resolve::Ready(r) => r?,
        Resolve::HostPort(s) => {
            crate::spawn_blocking(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&s).map(|i| i.collect::<Vec<_>>())
            })
            .await??
        }
        Resolve::Host(h, port) => {
            crate::spawn_blocking(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&(h.as_str(), port))
                    .map(|i| i.collect::<Vec<_>>())
            })
            .await??
        }
    };
    if found.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(found)
}
