//! Completions through tokio's own reactor (feature `tokio`): no hoop thread between the kernel
//! and the task.
//!
//! When an operation on a shared ring is left in the kernel and no reactor waits on that ring
//! yet, the driver calls [`attach`] on the polling thread. Inside a tokio runtime it spawns one
//! poller task per ring on that runtime: the task registers the ring fd (or, on the epoll
//! fallback, the epoll fd) with tokio's reactor through `AsyncFd`, and each time it turns
//! readable drains the ring's completions and wakes their tasks. So a completion wakes tokio's
//! I/O driver like any tokio socket would, the poller runs on that worker, and the tasks it
//! wakes go to that worker's own queue: no reaper thread, no extra context switch. While the
//! poller lives, the ring's reaper thread only parks; when the runtime goes away (the poller
//! task is dropped) the reaper takes the waiting back. Outside tokio nothing changes.

use std::cell::Cell;
use std::future::poll_fn;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Once;
use std::task::Poll;

use hoop_driver::shared::{set_reactor_hook, ReactorGuard, ReactorRing};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Set when tokio's reactor cannot take a ring fd (a runtime built without `enable_io`):
/// the reapers keep the waiting from then on, and no second attempt is made.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Installs [`attach`] as the shared rings' reactor hook (idempotent, cheap).
pub(crate) fn install() {
    set_reactor_hook(attach);
}

thread_local! {
    /// Set while this thread registers a ring fd with tokio (see [`QuietPanics`]).
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// While alive, a panic on this thread prints nothing: tokio's registration panics (with its
/// own message) in a runtime built without I/O, and that panic is expected and caught. The
/// process's panic hook is wrapped once (the previous hook runs for every other panic).
struct QuietPanics;

impl QuietPanics {
    fn on() -> QuietPanics {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !QUIET.with(|q| q.get()) {
                    previous(info);
                }
            }));
        });
        QUIET.with(|q| q.set(true));
        QuietPanics
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(false));
    }
}

/// A value whose fd stays open, naming the same file, while the value lives, and which
/// `as_raw_fd` always returns: what tokio's `AsyncFd` registration requires.
///
/// # Safety
/// Implementors must own what keeps the fd open and never return another fd.
pub(crate) unsafe trait OwnsFd: AsRawFd {}

// SAFETY: the ring owns its fd; `WaitFd` holds the ring.
unsafe impl OwnsFd for WaitFd {}

/// A socket's fd, held by its `Arc` (every handle and operation of the socket shares it).
#[derive(Debug)]
pub(crate) struct SockFd(pub(crate) Arc<OwnedFd>);

impl AsRawFd for SockFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

// SAFETY: the `Arc` keeps the `OwnedFd` (and so the fd) alive while this value lives.
unsafe impl OwnsFd for SockFd {}

/// A shared socket's readability on tokio's reactor, for the tokio `AsyncRead` path (made on
/// the first read inside a tokio runtime with I/O).
#[derive(Debug, Default)]
pub(crate) enum Readiness {
    /// Not looked at yet.
    #[default]
    Untried,
    /// Registered with the reactor of the runtime that first read.
    On(AsyncFd<SockFd>),
    /// No tokio reactor (or it went away): reads go through the ring.
    Off,
}

impl Readiness {
    /// The registration, made now if this is the first look.
    pub(crate) fn get(&mut self, fd: &Arc<OwnedFd>) -> Option<&AsyncFd<SockFd>> {
        if let Readiness::Untried = self {
            let handle = tokio::runtime::Handle::try_current().ok();
            *self = match handle.and_then(|h| register(&h, SockFd(fd.clone()))) {
                Some(afd) => Readiness::On(afd),
                None => Readiness::Off,
            };
        }
        match self {
            Readiness::On(afd) => Some(afd),
            _ => None,
        }
    }
}

/// The ring, as the fd tokio's reactor watches: the ring (and so its fd) lives as long as the
/// `AsyncFd` that owns this.
struct WaitFd(ReactorRing);

impl AsRawFd for WaitFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.fd()
    }
}

fn attach(ring: ReactorRing) {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Some(guard) = ring.try_attach() else {
        return;
    };
    let Some(afd) = register(&handle, WaitFd(ring)) else {
        return;
    };
    // A runtime shutting down drops the task unpolled: the guard goes with it.
    drop(handle.spawn(poll_ring(afd, guard)));
}

/// Registers `io` for readability with the reactor of `handle`'s runtime. `None` where tokio
/// refuses it or the runtime has no I/O: tokio has no way to ask, and panics in the
/// registration; the panic is caught once (and kept quiet: see [`QuietPanics`]), and no
/// registration is tried again in this process.
pub(crate) fn register<T: OwnsFd>(handle: &tokio::runtime::Handle, io: T) -> Option<AsyncFd<T>> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let registered = {
        let _enter = handle.enter();
        let _quiet = QuietPanics::on();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: `T: OwnsFd`: it owns what keeps its fd open (the ring that `WaitFd`
            // holds, the `Arc<OwnedFd>` of a socket), so the fd stays open and names the same
            // file for as long as the `AsyncFd` owning it lives, and `as_raw_fd` always returns
            // it.
            unsafe { AsyncFd::register_with_interest(io, Interest::READABLE) }
        }))
    };
    match registered {
        Ok(Ok(afd)) => Some(afd),
        Ok(Err(_)) => None,
        Err(_) => {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            None
        }
    }
}

/// The poller of one ring: drain whenever the ring fd turns readable, until the ring stops or
/// the runtime drops the task.
async fn poll_ring(afd: AsyncFd<WaitFd>, guard: ReactorGuard) {
    let ring = &afd.get_ref().0;
    // Whatever came in before the registration.
    ring.drain();
    poll_fn(|cx| loop {
        if ring.stopped() {
            return Poll::Ready(());
        }
        ring.set_waker(cx.waker());
        match afd.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(()),
            Poll::Ready(Ok(mut ready)) => {
                // Cleared before the drain: a completion that lands during it raises a new
                // edge, so none is missed.
                ready.clear_ready();
                ring.drain();
            }
        }
    })
    .await;
    drop(guard);
}
