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
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
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
    // Registered here, on the calling thread, so that a runtime without I/O is found out once:
    // tokio has no way to ask, and panics in the registration; the panic is caught (and kept
    // quiet: see `quiet_panics`) and the reapers keep the rings from then on.
    let registered = {
        let _enter = handle.enter();
        let _quiet = QuietPanics::on();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the fd is the ring's (or its epoll engine's), owned by the ring that
            // `WaitFd` holds, so it stays open and names the same file for as long as the
            // `AsyncFd` owning that `WaitFd` lives, and `as_raw_fd` always returns it.
            unsafe { AsyncFd::register_with_interest(WaitFd(ring), Interest::READABLE) }
        }))
    };
    let afd = match registered {
        Ok(Ok(afd)) => afd,
        Ok(Err(_)) => return,
        Err(_) => {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            return;
        }
    };
    // A runtime shutting down drops the task unpolled: the guard goes with it.
    drop(handle.spawn(poll_ring(afd, guard)));
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
