//! Unix signals as streams of arrivals, read from a `signalfd` through the ring.
//!
//! ```no_run
//! #[hoop::main]
//! async fn main() -> std::io::Result<()> {
//!     use hoop::signal::{signal, SignalKind};
//!     let mut term = signal(SignalKind::terminate())?;
//!     let ctrl_c = hoop::signal::ctrl_c();
//!     hoop::select! {
//!         r = ctrl_c => r?,
//!         _ = term.recv() => {}
//!     }
//!     println!("stopping");
//!     Ok(())
//! }
//! ```
//!
//! **How it works.** Listening for a signal blocks it in the calling thread (so no handler and
//! no default action runs for it there) and adds it to the mask of the signalfds hoop reads:
//! each runtime thread on which a listener is polled runs one small reader task with one read
//! on its own signalfd in flight (`IORING_OP_READ` on io_uring; on the epoll driver the
//! signalfd is pollable like a socket). A reader that takes an arrival counts it in a
//! process-wide table and wakes every listener of that signal, on every thread: several
//! listeners of one signal all see each arrival; arrivals that come faster than a listener
//! polls are merged into one, as in tokio.
//!
//! **Which threads block the signal.** A process-directed signal goes to any thread that does
//! not block it, and there its default action (for SIGINT/SIGTERM: exit) runs. So:
//! * [`run_per_core`](crate::run_per_core) blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
//!   SIGUSR2 and SIGWINCH in the calling thread *before* it spawns its threads, which inherit the
//!   mask; while they run, the calling thread takes each of those signals: one that somebody
//!   listens for is delivered to the listeners, any other gets its usual disposition (default
//!   action, handler or ignore) exactly as without hoop. Listen for other signals (or any
//!   signal, if you spawn threads of your own) by calling [`signal`] on the main thread before
//!   any thread is spawned.
//! * A single runtime on the main thread (`#[hoop::main]`) blocks the signal when the listener
//!   is made.
//! * Every thread hoop starts for itself (the blocking pool of `spawn_blocking`, the epoll
//!   driver's file pool, the timer thread, the shared rings' reapers and teardown thread) blocks
//!   every asynchronous signal from its first instruction (its mask is set before it starts,
//!   `hoop_driver::thread`), so it never takes a signal meant for a listener, whether it started
//!   before or after the listener was made. io_uring's io-wq workers are kernel threads that
//!   take no signals. The threads that may take a signal are the program's own: the main thread
//!   and any thread it spawns itself.
//! * **A program's own threads**: a thread spawned *before* [`signal`] is called does not block
//!   the signal, so a process-directed signal may go to it and its default action runs there
//!   (SIGTERM ends the process) before any listener reads it. Call [`signal`] (or block the
//!   signals with `pthread_sigmask`) before spawning threads, or spawn them from inside
//!   [`run_per_core`](crate::run_per_core), whose threads inherit the blocked set.
//!
//! SIGKILL and SIGSTOP cannot be caught; SIGSEGV, SIGBUS, SIGILL and SIGFPE are refused (a
//! blocked synchronous fault signal kills the process anyway).
//!
//! **tokio's path.** [`unix`] names the same items where tokio has them
//! (`tokio::signal::unix::{signal, Signal, SignalKind}`), so code written for tokio compiles
//! with the crate name changed.

mod registry;

pub mod unix {
    //! The Unix signal API at tokio's path: `hoop::signal::unix::signal(SignalKind::terminate())`
    //! as `tokio::signal::unix::signal(SignalKind::terminate())`. These are the very items of
    //! [`hoop::signal`](super) (re-exports, one implementation): a [`Signal`] made here is
    //! the same listener, with tokio's `async fn recv(&mut self) -> Option<()>`.
    //!
    //! ```no_run
    //! #[hoop::main]
    //! async fn main() -> std::io::Result<()> {
    //!     use hoop::signal::unix::{signal, SignalKind};
    //!     let mut term = signal(SignalKind::terminate())?;
    //!     term.recv().await;
    //!     println!("stopping");
    //!     Ok(())
    //! }
    //! ```

    pub use super::{signal, Signal, SignalKind};
}

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

pub use crate::sync::CancellationToken;

pub(crate) use registry::PerCoreSignals;

/// A kind of signal: one of the common ones, or any number with [`SignalKind::from_raw`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(i32);

impl SignalKind {
    /// SIGINT: Ctrl-C in a terminal.
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }
    /// SIGTERM: the polite request to stop (`kill`, systemd, Docker).
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }
    /// SIGHUP: the terminal went away, or (by convention) "reload the configuration".
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }
    /// SIGQUIT: Ctrl-\ in a terminal.
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }
    /// SIGUSR1.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }
    /// SIGUSR2.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }
    /// SIGWINCH: the terminal's size changed.
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }
    /// SIGALRM.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }
    /// SIGCHLD: a child process ended or stopped.
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }
    /// SIGPIPE (Rust programs ignore it by default; hoop's sends use `MSG_NOSIGNAL`).
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }
    /// Any signal by number (validated when a listener is made).
    pub const fn from_raw(signum: i32) -> SignalKind {
        SignalKind(signum)
    }
    /// The signal's number.
    pub const fn as_raw_value(&self) -> i32 {
        self.0
    }
}

impl From<i32> for SignalKind {
    fn from(signum: i32) -> SignalKind {
        SignalKind(signum)
    }
}

impl fmt::Debug for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignalKind({})", registry::name(self.0))
    }
}

/// A listener: a stream of the arrivals of one signal after it was made (a
/// [`futures::Stream`][Stream] of `()`, and [`recv`](Self::recv)). Arrivals
/// between two polls are merged into one.
///
/// [Stream]: https://docs.rs/futures/0.3/futures/stream/trait.Stream.html
///
/// It may be polled on any hoop runtime thread (it starts that runtime's signal reader) and
/// moved between threads (`Send + Sync`). Dropping it stops the listening; the signal stays
/// blocked in the threads that blocked it.
pub struct Signal {
    signo: i32,
    /// Arrivals already reported.
    seen: u64,
    key: Option<usize>,
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("signal", &registry::name(self.signo))
            .finish()
    }
}

/// Listens for `kind`: blocks it in the calling thread and returns the stream of its arrivals
/// from now on. Errors: `InvalidInput` for SIGKILL, SIGSTOP, the fault signals and numbers
/// that are not signals; the OS error if the signalfd cannot be made.
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let signo = kind.0;
    let seen = registry::listen(signo)?;
    Ok(Signal {
        signo,
        seen,
        key: None,
    })
}

impl Signal {
    /// Waits for the next arrival. Returns `Some(())` for each (merged) arrival; `None` is
    /// never returned today (the stream does not end), but is kept for tokio's shape.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: an arrival a dropped call would have reported is reported by the
    /// next call.
    pub async fn recv(&mut self) -> Option<()> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next arrival (for hand-written futures).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        if registry::take_arrival(self.signo, &mut self.seen) {
            return Poll::Ready(Some(()));
        }
        registry::ensure_reader();
        registry::register_waker(self.signo, &mut self.key, cx.waker());
        // Checked again after registering: an arrival in between woke the old set.
        if registry::take_arrival(self.signo, &mut self.seen) {
            return Poll::Ready(Some(()));
        }
        Poll::Pending
    }

    /// The signal this listener listens for.
    pub fn kind(&self) -> SignalKind {
        SignalKind(self.signo)
    }
}

impl futures::Stream for Signal {
    type Item = ();
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<()>> {
        self.get_mut().poll_recv(cx)
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        registry::unlisten(self.signo, &mut self.key);
    }
}

/// Completes at the next Ctrl-C (SIGINT) after this call. The listener is made (and SIGINT
/// blocked in the calling thread) when `ctrl_c` is called, not when the future is first
/// polled, so a Ctrl-C in between is not missed.
pub fn ctrl_c() -> CtrlC {
    CtrlC {
        inner: signal(SignalKind::interrupt()),
    }
}

/// The future of [`ctrl_c`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct CtrlC {
    inner: io::Result<Signal>,
}

impl Future for CtrlC {
    type Output = io::Result<()>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.inner {
            Ok(sig) => sig.poll_recv(cx).map(|_| Ok(())),
            Err(e) => {
                let e = io::Error::new(e.kind(), e.to_string());
                Poll::Ready(Err(e))
            }
        }
    }
}
