//! Shutdown plumbing for the servers, on `hoop::signal`: SIGINT/SIGTERM listeners made on the
//! main thread before any other thread exists (so every thread inherits the blocked mask and
//! the signals reach the listeners, never a default action), and a stop flag
//! ([`hoop::sync::CancellationToken`]) that runtime threads await.
//!
//! `Signals::wait` runs a small epoll-driver runtime on the main thread that reads the
//! signalfd (epoll: no ring to set up, no fallback message; the servers' own threads use the
//! driver chosen on the command line).

use std::future::Future;
use std::io;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hoop::signal::{signal, Signal, SignalKind};
use hoop::sync::CancellationToken;

/// How often [`Signals::wait`] checks whether the server stopped on its own.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Listeners of SIGINT and SIGTERM, which are blocked in the calling thread (and every thread
/// it spawns afterwards). Arrivals from `block()` on are kept until `wait` reports them.
pub struct Signals {
    // Mutexes keep `Signals` `Send + Sync` (as it was); only `wait` locks them.
    int: Mutex<Signal>,
    term: Mutex<Signal>,
    /// SIGHUP's listener and what it does (`on_hangup`), if asked for.
    hup: Option<Mutex<(Signal, Reload)>>,
}

/// What SIGHUP runs.
type Reload = Box<dyn FnMut() + Send>;

impl Signals {
    /// Listens for SIGINT and SIGTERM, blocking them in the calling thread. Call this before
    /// spawning threads.
    pub fn block() -> io::Result<Signals> {
        let with = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        let int =
            signal(SignalKind::interrupt()).map_err(|e| with("cannot listen for SIGINT", e))?;
        let term =
            signal(SignalKind::terminate()).map_err(|e| with("cannot listen for SIGTERM", e))?;
        Ok(Signals {
            int: Mutex::new(int),
            term: Mutex::new(term),
            hup: None,
        })
    }

    /// Also listens for SIGHUP (blocked like the others: call it before spawning threads)
    /// and runs `reload` on the thread of [`wait`](Signals::wait) at each one, as nginx
    /// reloads on SIGHUP. Without it SIGHUP keeps its default action.
    pub fn on_hangup(mut self, reload: impl FnMut() + Send + 'static) -> io::Result<Signals> {
        let hup = signal(SignalKind::hangup())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot listen for SIGHUP: {e}")))?;
        self.hup = Some(Mutex::new((hup, Box::new(reload))));
        Ok(self)
    }

    /// Waits for SIGINT or SIGTERM and returns its number, or returns `None` as soon as
    /// `stopped()` is true (checked every 100 ms), whichever comes first.
    pub fn wait(&self, mut stopped: impl FnMut() -> bool) -> io::Result<Option<i32>> {
        let rt = hoop::Runtime::builder()
            .driver(hoop::DriverKind::Epoll)
            .build()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot wait for signals: {e}")))?;
        let (mut int, mut term) = (lock(&self.int), lock(&self.term));
        let mut hup = self
            .hup
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(|e| e.into_inner()));
        rt.block_on(async {
            loop {
                if stopped() {
                    return Ok(None);
                }
                let hangup = async {
                    match hup.as_deref_mut() {
                        Some((signal, _)) => signal.recv().await,
                        None => std::future::pending().await,
                    }
                };
                hoop::select! {
                    _ = int.recv() => return Ok(Some(libc::SIGINT)),
                    _ = term.recv() => return Ok(Some(libc::SIGTERM)),
                    _ = hangup => {
                        if let Some((_, reload)) = hup.as_deref_mut() {
                            reload();
                        }
                    }
                    _ = hoop::time::sleep(POLL_INTERVAL) => {}
                }
            }
        })
    }
}

/// Locks a listener; a panic while it was held leaves a listener that is still valid.
fn lock(m: &Mutex<Signal>) -> MutexGuard<'_, Signal> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stop request that any thread can make and that tasks on any runtime can await: a
/// [`CancellationToken`].
#[derive(Debug, Default)]
pub struct Stop {
    token: CancellationToken,
}

impl Stop {
    /// A stop flag not yet raised.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Raises the flag and wakes every waiter.
    pub fn stop(&self) {
        self.token.cancel();
    }

    /// Whether [`stop`](Self::stop) was called.
    #[allow(dead_code)] // part of the module's API for the servers; the echo server awaits
    pub fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Completes once [`stop`](Self::stop) was called.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        self.token.cancelled()
    }
}
