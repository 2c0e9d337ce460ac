//! A reuseport group: one address, one listener per thread (`SO_REUSEPORT`).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};

use super::{ListenOptions, TcpListener};

/// One TCP address shared by a listener on every thread of a
/// [`run_per_core`](crate::run_per_core), with `SO_REUSEPORT`: the kernel spreads incoming
/// connections over the group's listeners.
///
/// [`bind_n`](Self::bind_n)`(addr, threads)` binds, on the calling thread, one listening socket
/// per thread at once (a port 0 becomes a real port before any thread starts);
/// [`listener`](Self::listener), on each thread, takes one of them. As every socket of the
/// group listens from the start, the kernel spreads connections over all of them from the
/// first SYN, including the connections that arrive before a thread took its listener (each
/// waits in its socket's queue for that thread). The group is `Clone + Send + Sync`: clone it
/// into the closure of `run_per_core`.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// const THREADS: usize = 2;
/// let group = hoop::net::ReuseportGroup::bind_n("127.0.0.1:0", THREADS)?;
/// println!("listening on {}", group.local_addr());
/// hoop::run_per_core(THREADS, move |_core| {
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
/// Make as many sockets as threads take one: the kernel's pick is a hash of the connection's
/// addresses over the sockets that listen, so a socket that no thread takes holds its share of
/// the connections unaccepted until the group is dropped (they are then reset). With
/// [`bind`](Self::bind) (one socket) the group grows as threads call `listener`, and
/// connections that arrive before the second thread's call all go to the first socket: fine
/// for short connections under steady load, lopsided for long-lived ones that connect early.
/// As with any reuseport group, connections waiting in the queue of a listener that is closed
/// are reset.
#[derive(Debug, Clone)]
pub struct ReuseportGroup {
    addr: SocketAddr,
    /// How the group's sockets are bound (`SO_REUSEPORT` always; the backlog).
    opts: ListenOptions,
    /// The sockets `bind_n` made, until threads take them.
    spare: Arc<Mutex<Vec<std::net::TcpListener>>>,
}

impl ReuseportGroup {
    /// A group of one socket, bound to `addr`: [`bind_n`](Self::bind_n)`(addr, 1)`. Each
    /// [`listener`](Self::listener) call after the first adds a socket to the group.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<ReuseportGroup> {
        Self::bind_n(addr, 1)
    }

    /// Binds `n` listening sockets (at least one) to `addr` (its first resolved address that
    /// binds) with `SO_REUSEADDR` and `SO_REUSEPORT`, for `n` threads to take one each with
    /// [`listener`](Self::listener); port 0 picks the port every socket of the group then
    /// shares. All `n` listen when this returns, so the kernel spreads connections over all of
    /// them from the first. Synchronous: usable before any runtime exists.
    pub fn bind_n(addr: impl ToSocketAddrs, n: usize) -> io::Result<ReuseportGroup> {
        Self::bind_n_with(addr, n, &ListenOptions::new())
    }

    /// [`bind_n`](Self::bind_n) with `opts` (their backlog, for every socket of the group,
    /// including those [`listener`](Self::listener) adds later; `SO_REUSEPORT` is always set).
    pub fn bind_n_with(
        addr: impl ToSocketAddrs,
        n: usize,
        opts: &ListenOptions,
    ) -> io::Result<ReuseportGroup> {
        let opts = opts.reuse_port(true);
        let first = opts.bind(addr)?;
        let addr = first.local_addr()?;
        let to_std = |l: TcpListener| std::net::TcpListener::from(std::os::fd::OwnedFd::from(l));
        let mut spare = Vec::with_capacity(n.max(1));
        spare.push(to_std(first));
        for _ in 1..n {
            spare.push(to_std(opts.bind(addr)?));
        }
        // Taken from the end by `listener`: the first socket goes to the first caller.
        spare.reverse();
        Ok(ReuseportGroup {
            addr,
            opts,
            spare: Arc::new(Mutex::new(spare)),
        })
    }

    /// The address every listener of the group is bound to (with the real port).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A listener of the group for the calling thread: one of the sockets `bind`/`bind_n`
    /// made while any is left, else a new `SO_REUSEPORT` socket bound to
    /// [`local_addr`](Self::local_addr).
    pub fn listener(&self) -> io::Result<TcpListener> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match spare {
            Some(l) => Ok(TcpListener::from_std(l)),
            None => self.opts.bind(self.addr),
        }
    }

    /// How many of the sockets `bind`/`bind_n` made no thread has taken yet.
    pub fn spare(&self) -> usize {
        self.spare.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
