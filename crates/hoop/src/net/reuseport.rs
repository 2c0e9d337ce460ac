//! A reuseport group: one address, one listener per thread (`SO_REUSEPORT`).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};

use super::TcpListener;

/// One TCP address shared by a listener on every thread of a
/// [`run_per_core`](crate::run_per_core), with `SO_REUSEPORT`: the kernel spreads incoming
/// connections over the group's listeners.
///
/// [`bind`](Self::bind) binds once, on the calling thread, so a port 0 becomes a real port
/// before any thread starts; [`listener`](Self::listener), on each thread, gives that thread
/// its own listener on the same address (the first call takes the socket `bind` made; the
/// others bind new sockets into the group). The group is `Clone + Send + Sync`: clone it into
/// the closure of `run_per_core`.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let group = hoop::net::ReuseportGroup::bind("127.0.0.1:0")?;
/// println!("listening on {}", group.local_addr());
/// hoop::run_per_core(2, move |_core| {
///     let group = group.clone();
///     async move {
///         let listener = group.listener()?;
///         loop {
///             let (stream, _) = listener.accept().await?;
///             hoop::spawn(async move { drop(stream) });
///         }
///         #[allow(unreachable_code)]
///         Ok::<(), std::io::Error>(())
///     }
/// })?;
/// # Ok(())
/// # }
/// ```
///
/// As with any reuseport group, connections waiting in the queue of a listener that is closed
/// are reset, and a thread that never takes its listener gets no connections.
#[derive(Debug, Clone)]
pub struct ReuseportGroup {
    addr: SocketAddr,
    /// The socket `bind` made, until a thread takes it.
    first: Arc<Mutex<Option<std::net::TcpListener>>>,
}

impl ReuseportGroup {
    /// Binds the group's first listener to `addr` (its first resolved address that binds) with
    /// `SO_REUSEADDR` and `SO_REUSEPORT`; port 0 picks the port every listener of the group
    /// then shares. Synchronous: usable before any runtime exists.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<ReuseportGroup> {
        let listener = TcpListener::bind_with(addr, true)?;
        let addr = listener.local_addr()?;
        let std_listener = std::net::TcpListener::from(std::os::fd::OwnedFd::from(listener));
        Ok(ReuseportGroup {
            addr,
            first: Arc::new(Mutex::new(Some(std_listener))),
        })
    }

    /// The address every listener of the group is bound to (with the real port).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A listener of the group for the calling thread: the socket `bind` made, for the first
    /// call, else a new `SO_REUSEPORT` socket bound to [`local_addr`](Self::local_addr).
    pub fn listener(&self) -> io::Result<TcpListener> {
        let first = self.first.lock().unwrap_or_else(|e| e.into_inner()).take();
        match first {
            Some(l) => Ok(TcpListener::from_std(l)),
            None => TcpListener::bind_with(self.addr, true),
        }
    }
}
