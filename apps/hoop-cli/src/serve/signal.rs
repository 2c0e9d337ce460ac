//! Shutdown plumbing for the servers: SIGINT/SIGTERM taken synchronously with `sigtimedwait` on
//! the main thread, and a stop flag that runtime threads can await.
//!
//! The signals are blocked in the main thread before any other thread exists, so every thread
//! inherits the mask and the signals stay pending until the main thread takes them: no handler
//! runs, and no worker is interrupted.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Poll, Waker};
use std::time::Duration;

/// How often [`Signals::wait`] checks whether the server stopped on its own.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// SIGINT and SIGTERM, blocked in the calling thread (and every thread it spawns afterwards).
pub struct Signals {
    set: libc::sigset_t,
}

impl Signals {
    /// Blocks SIGINT and SIGTERM in the calling thread and resets their disposition to the
    /// default: a signal ignored by the parent (a shell's background job ignores SIGINT) would
    /// otherwise be discarded before `sigtimedwait` could take it. Call this before spawning
    /// threads.
    pub fn block() -> io::Result<Signals> {
        // SAFETY: sigset_t is plain old data; sigemptyset initializes it below.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t owned by this frame; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
        }
        // SAFETY: `set` is initialized; a null old-set pointer is allowed.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::new(
                io::Error::from_raw_os_error(r).kind(),
                format!(
                    "cannot block SIGINT/SIGTERM: {}",
                    io::Error::from_raw_os_error(r)
                ),
            ));
        }
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: installs the default disposition (no handler code) for a valid signal.
            if unsafe { libc::signal(sig, libc::SIG_DFL) } == libc::SIG_ERR {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot reset the disposition of signal {sig}: {e}"),
                ));
            }
        }
        Ok(Signals { set })
    }

    /// Waits for SIGINT or SIGTERM and returns its number, or returns `None` as soon as
    /// `stopped()` is true (checked every 100 ms), whichever comes first.
    pub fn wait(&self, mut stopped: impl FnMut() -> bool) -> io::Result<Option<i32>> {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: POLL_INTERVAL.as_nanos() as libc::c_long,
        };
        loop {
            if stopped() {
                return Ok(None);
            }
            // SAFETY: `self.set` is an initialized sigset_t, `ts` a valid timespec; a null
            // siginfo pointer is allowed.
            let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
            if sig > 0 {
                return Ok(Some(sig));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => {}
                _ => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("waiting for SIGINT/SIGTERM failed: {e}"),
                    ))
                }
            }
        }
    }
}

/// A stop request that any thread can make and that tasks on any runtime can await.
///
/// Wakers are kept in a registry and woken from the stopping thread; hoop's wakers are `Send`
/// and a wake from another thread notifies the owning runtime's ring.
#[derive(Debug, Default)]
pub struct Stop {
    stopped: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Stop {
    /// A stop flag not yet raised.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Raises the flag and wakes every waiter.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|e| e.into_inner()));
        for w in wakers {
            w.wake();
        }
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Completes once [`stop`](Self::stop) was called.
    pub fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.is_stopped() {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            drop(wakers);
            // Checked again after registering: a stop in between took the old list.
            if self.is_stopped() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}
