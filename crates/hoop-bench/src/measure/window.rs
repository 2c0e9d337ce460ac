//! The counting window of a load generator running on one thread: connections connect first,
//! wait at the gate, and what completes while the window is open is what counts. A reply that
//! arrives after the deadline, or after the generator stopped, counts for nothing.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// When results count: from [`Window::open`] to its deadline, or to [`Window::stop`].
#[derive(Debug, Default)]
pub struct Window {
    /// Set when the window opens.
    deadline: Cell<Option<Instant>>,
    /// Set when the generator stopped: nothing more counts.
    stopped: Cell<bool>,
    gate: Gate,
}

impl Window {
    /// A window not yet open.
    pub fn new() -> Window {
        Window::default()
    }

    /// Opens the window for `secs` from now and lets the waiting connections go; returns the
    /// deadline.
    pub fn open(&self, secs: Duration) -> Instant {
        let deadline = Instant::now() + secs;
        self.deadline.set(Some(deadline));
        self.gate.open();
        deadline
    }

    /// Whether the window has opened (a connection established before it counts as connected
    /// at the start).
    pub fn opened(&self) -> bool {
        self.deadline.get().is_some()
    }

    /// Stops counting.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// Whether [`Window::stop`] was called (a run may still judge what it saw between the
    /// deadline and the stop).
    pub fn stopped(&self) -> bool {
        self.stopped.get()
    }

    /// Whether something finished at `t` counts: the generator has not stopped and `t` is not
    /// past the deadline (before the window opens, there is no deadline yet).
    pub fn counts_at(&self, t: Instant) -> bool {
        !self.stopped.get() && self.deadline.get().is_none_or(|d| t <= d)
    }

    /// Whether the window closed (nothing more will count).
    pub fn over(&self) -> bool {
        !self.counts_at(Instant::now())
    }

    /// Waits for `deadline`, or until `running` says every connection gave up (checked every
    /// `tick`), then stops counting.
    pub async fn wait_out(&self, deadline: Instant, tick: Duration, running: impl Fn() -> bool) {
        while Instant::now() < deadline && running() {
            hoop::time::sleep_until((Instant::now() + tick).min(deadline)).await;
        }
        self.stop();
    }

    /// Waits until the window opens.
    pub async fn wait_open(&self) {
        self.gate.wait().await
    }
}

/// Opens once; the tasks waiting on it are woken then.
#[derive(Debug, Default)]
pub struct Gate {
    open: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl Gate {
    /// Waits until the gate opens (at once if it is open).
    pub async fn wait(&self) {
        poll_fn(|cx| {
            if self.open.get() {
                Poll::Ready(())
            } else {
                self.waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Opens the gate and wakes every waiter.
    pub fn open(&self) {
        self.open.set(true);
        let waiters = self.waiters.take();
        for w in waiters {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_inside_the_window() {
        let w = Window::new();
        let before = Instant::now();
        assert!(!w.opened() && w.counts_at(before), "no deadline yet");
        let deadline = w.open(Duration::from_secs(60));
        assert!(w.opened());
        assert!(w.counts_at(deadline) && !w.counts_at(deadline + Duration::from_nanos(1)));
        assert!(!w.over());
        w.stop();
        assert!(w.over() && !w.counts_at(before));
    }

    #[test]
    fn the_gate_releases_its_waiters() {
        use std::future::Future;
        let w = std::rc::Rc::new(Window::new());
        let w2 = w.clone();
        let mut fut = Box::pin(async move { w2.wait_open().await });
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        w.open(Duration::from_secs(1));
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }
}
