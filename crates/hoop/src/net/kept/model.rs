//! loom model check of the kept state of a shared socket (`Kept::shared`), built only with
//! `RUSTFLAGS="--cfg loom"` (scripts/model-check): a receive dropped in flight parks its
//! operation on one thread while the next receive polls on another and the kernel completes
//! the operation on a third. Whatever the interleaving, what the operation brought is served
//! exactly once, to the waiting call or to the next one, and a call that waits is woken (loom
//! reports a lost wake-up as a deadlock). The flag that lets an empty socket skip the lock is
//! what this checks most: raised too early, or not at all, a parked operation goes unseen.

use std::task::{Context, Poll, Wake, Waker};

use loom::sync::{Arc, Mutex};
use loom::thread;

use super::{Kept, Outcome, Parked};

/// The kernel's side of one receive: its result, once it completed, and the waker of whoever
/// polled it before.
#[derive(Default)]
struct Kernel {
    done: bool,
    waker: Option<Waker>,
}

/// A receive in flight whose future was dropped.
struct FakeRecv {
    kernel: Arc<Mutex<Kernel>>,
    ended: bool,
}

impl Parked for FakeRecv {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let mut k = self.kernel.lock().unwrap();
        if k.done {
            self.ended = true;
            Poll::Ready(Some(Outcome::Received(vec![7], None)))
        } else {
            k.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// Wakes a loom thread parked in `take_waiting`.
struct Unpark(loom::thread::Thread);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// A receive call: polls until what is kept is served, or nothing is parked (then the call
/// would start its own operation), parking its thread while it waits.
fn take_waiting(kept: &Kept) -> Option<Outcome> {
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match kept.poll_take(&mut cx) {
            Poll::Ready(got) => return got,
            Poll::Pending => thread::park(),
        }
    }
}

/// Takes what is kept without waiting: `Some` if an outcome was there.
fn take_now(kept: &Kept) -> Option<Outcome> {
    let mut cx = Context::from_waker(Waker::noop());
    match kept.poll_take(&mut cx) {
        Poll::Ready(got) => got,
        Poll::Pending => None,
    }
}

#[test]
fn a_parked_receive_is_served_exactly_once() {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    loom::model(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let kept = Arc::new(Kept::shared());
        let kernel = Arc::new(Mutex::new(Kernel::default()));
        // The dropped receive parks its operation.
        let parker = {
            let (kept, kernel) = (kept.clone(), kernel.clone());
            thread::spawn(move || {
                kept.park(Box::new(FakeRecv {
                    kernel,
                    ended: false,
                }))
            })
        };
        // The kernel completes it and wakes whoever polled it.
        let completer = {
            let kernel = kernel.clone();
            thread::spawn(move || {
                let waker = {
                    let mut k = kernel.lock().unwrap();
                    k.done = true;
                    k.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            })
        };
        // The next receive: served what is kept, or (nothing parked yet) its own operation.
        let got = take_waiting(&kept);
        parker.join().unwrap();
        completer.join().unwrap();
        // What the call did not get is still kept for the call after.
        let later = take_now(&kept);
        let served = usize::from(got.is_some()) + usize::from(later.is_some());
        assert_eq!(
            served, 1,
            "the parked receive's bytes are served exactly once"
        );
        assert!(take_now(&kept).is_none(), "and then nothing is left");
    });
    let n = runs.load(std::sync::atomic::Ordering::Relaxed);
    println!("model-check: kept receives: {n} interleavings");
}
