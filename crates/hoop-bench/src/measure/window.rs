//! The counting window of a load generator running on one thread: connections connect first,
//! wait at the gate, and what completes while the window is open is what counts. A reply that
//! arrives after the deadline, or after the generator stopped, counts for nothing.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// How long past its deadline a window that verified nothing yet stays open for its first
/// verified success ([`Window::hold_for_first`]).
pub const FIRST_SUCCESS_GRACE: Duration = Duration::from_secs(2);

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

    /// At `deadline`: a window that verified nothing yet (`verified() == 0`) while its
    /// connections run stays open until the first verified success, [`FIRST_SUCCESS_GRACE`]
    /// past the deadline at most, and the deadline moves with it. On a loaded machine a short
    /// fan-out window with the CPU hog on the server's CPU can pass before a message made its
    /// round, and a run that measured nothing fails; the caller's wall time covers the whole
    /// window, so its rates stay per real second. (The echo and HTTP windows do not wait: a
    /// silent server there must fail as one, not turn into a server that closed on a client
    /// held open for it.) Returns the deadline the window closed at.
    pub async fn hold_for_first(
        &self,
        deadline: Instant,
        tick: Duration,
        running: impl Fn() -> bool,
        verified: impl Fn() -> u64,
    ) -> Instant {
        let last = deadline + FIRST_SUCCESS_GRACE;
        let mut closed = deadline;
        while verified() == 0 && running() && Instant::now() < last {
            closed = (Instant::now() + tick).min(last);
            self.deadline.set(Some(closed));
            hoop::time::sleep_until(closed).await;
        }
        closed
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
    fn a_window_that_verified_nothing_waits_for_its_first_success_bounded() {
        let rt = hoop::Runtime::new().unwrap();
        rt.block_on(async {
            // Something verified at the deadline: the window closes there.
            let w = Window::new();
            let deadline = w.open(Duration::from_millis(5));
            let closed = w.hold_for_first(deadline, TICK, || true, || 1).await;
            assert_eq!(closed, deadline);
            // Nothing yet: open until the first success (60 ms in), not a moment longer.
            let w = Window::new();
            let verified = std::rc::Rc::new(Cell::new(0u64));
            let v2 = verified.clone();
            let deadline = w.open(Duration::from_millis(5));
            drop(hoop::spawn(async move {
                hoop::time::sleep(Duration::from_millis(60)).await;
                v2.set(1);
            }));
            let closed = w
                .hold_for_first(deadline, TICK, || true, || verified.get())
                .await;
            assert!(closed > deadline + Duration::from_millis(40), "{closed:?}");
            assert!(closed < deadline + FIRST_SUCCESS_GRACE, "{closed:?}");
            // Nothing ever, or nobody left running: bounded, or at once.
            let w = Window::new();
            let deadline = w.open(Duration::from_millis(1));
            let closed = w.hold_for_first(deadline, TICK, || false, || 0).await;
            assert_eq!(
                closed, deadline,
                "no connection running: nothing to wait for"
            );
        });
    }

    /// A tick for the tests.
    const TICK: Duration = Duration::from_millis(5);

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
