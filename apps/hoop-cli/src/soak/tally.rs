//! What each load did, counted from every thread: operations, bytes verified, and the
//! disturbances it caused or met (cancellations, resets, half-closes, slow reads, errors).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The counters of one load (echo on one driver, HTTP on one driver, files on one driver).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub ops: AtomicU64,
    pub bytes_verified: AtomicU64,
    pub cancellations: AtomicU64,
    pub resets: AtomicU64,
    pub half_closes: AtomicU64,
    pub slow_reads: AtomicU64,
    /// Errors met and survived (a connection cut by a server-side cancel or an injected fault,
    /// a refused connect, a timed-out operation), not failures.
    pub errors: AtomicU64,
}

impl Tally {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one client action's outcome: done, a failure (a wrong byte: `InvalidData`; a
    /// reply that never came: a timeout), or an error met and survived.
    pub(crate) fn record(&self, res: io::Result<bool>, failures: &Failures, what: &str) {
        match res {
            Ok(_) => Tally::add(&self.ops, 1),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                failures.push(format!("{what}: {e}"));
            }
            Err(e)
                if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock =>
            {
                failures.push(format!(
                    "{what}: no reply within {IO_TIMEOUT:?} (hang): {e}"
                ));
            }
            Err(_) => Tally::add(&self.errors, 1),
        }
    }

    /// A client thread of this load, named `name` in the failures, until `until`.
    pub(crate) fn client<'a>(
        &'a self,
        until: Instant,
        failures: &'a Failures,
        name: &'a str,
    ) -> Client<'a> {
        Client {
            until,
            tally: self,
            failures,
            name,
        }
    }

    pub(crate) fn snapshot(&self, name: &str) -> LoadSummary {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LoadSummary {
            load: name.to_string(),
            ops: g(&self.ops),
            bytes_verified: g(&self.bytes_verified),
            cancellations: g(&self.cancellations),
            resets: g(&self.resets),
            half_closes: g(&self.half_closes),
            slow_reads: g(&self.slow_reads),
            errors: g(&self.errors),
        }
    }
}

/// How long a client waits on one read or write before calling the server hung.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A client connection with `IO_TIMEOUT` on every read and write.
pub(crate) fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Makes the close of `s` an RST (`SO_LINGER` 0).
pub(crate) fn linger_zero(s: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads a linger struct from our stack for a socket we own.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// One load's totals, for the table and the JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LoadSummary {
    pub load: String,
    pub ops: u64,
    pub bytes_verified: u64,
    pub cancellations: u64,
    pub resets: u64,
    pub half_closes: u64,
    pub slow_reads: u64,
    pub errors: u64,
}

/// Failures: a wrong byte, a leak, a hang. Any one fails the soak.
#[derive(Debug, Default)]
pub(crate) struct Failures(Mutex<Vec<String>>);

impl Failures {
    pub(crate) fn push(&self, what: String) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < 100 {
                v.push(what);
            }
        }
    }

    pub(crate) fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    pub(crate) fn any(&self) -> bool {
        self.0.lock().map(|v| !v.is_empty()).unwrap_or(true)
    }
}

/// Every load thread draws its actions from the soak's seed (the bench's SplitMix64).
pub(crate) use hoop_bench::load::file::content::Rng;

/// What a client thread runs under: when it stops, its load's tally, the soak's failures, and
/// its name in them.
#[derive(Clone, Copy)]
pub(crate) struct Client<'a> {
    pub until: Instant,
    pub tally: &'a Tally,
    pub failures: &'a Failures,
    pub name: &'a str,
}

impl Client<'_> {
    /// Runs `step` until `until` or the first failure anywhere: one action each time, given the
    /// connection the last one kept (it may keep one for the next); its outcome is recorded
    /// under what it says it did, or not at all when it says `None` (counted already).
    pub(crate) fn drive(
        &self,
        mut step: impl FnMut(&mut Option<TcpStream>) -> Option<(io::Result<bool>, String)>,
    ) {
        let mut conn: Option<TcpStream> = None;
        while Instant::now() < self.until && !self.failures.any() {
            if let Some((res, what)) = step(&mut conn) {
                self.tally.record(res, self.failures, &what);
            }
        }
    }
}
