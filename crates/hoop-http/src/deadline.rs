//! Connection deadlines (header, idle, send) without a kernel timer per request: each
//! connection keeps its deadline in a per-thread table, and one task per thread sweeps the
//! table a few times per timeout, waking the connections whose deadline passed. A deadline is
//! therefore enforced up to one sweep interval late ([`Config::sweep_interval`]).
//!
//! [`Config::sweep_interval`]: super::config::Config::sweep_interval

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Slot {
    deadline: Option<Instant>,
    expired: bool,
    /// The connection waits for a next request, holding none: the shutdown ends the wait.
    idle: bool,
    waker: Option<Waker>,
}

/// The deadlines of one thread's connections.
#[derive(Debug, Default)]
pub struct Deadlines {
    slots: RefCell<Vec<Option<Slot>>>,
    free: RefCell<Vec<usize>>,
}

/// A connection's entry in [`Deadlines`], released on drop.
#[derive(Debug)]
pub struct Timer {
    table: Rc<Deadlines>,
    id: usize,
}

impl Deadlines {
    /// A new entry, with no deadline yet.
    pub fn register(self: &Rc<Self>) -> Timer {
        let mut slots = self.slots.borrow_mut();
        let id = match self.free.borrow_mut().pop() {
            Some(id) => id,
            None => {
                slots.push(None);
                slots.len() - 1
            }
        };
        slots[id] = Some(Slot::default());
        Timer {
            table: self.clone(),
            id,
        }
    }

    /// Wakes every connection whose deadline passed; returns how many.
    pub fn sweep(&self, now: Instant) -> usize {
        let mut woken = Vec::new();
        for slot in self.slots.borrow_mut().iter_mut().flatten() {
            if !slot.expired && slot.deadline.is_some_and(|d| d <= now) {
                slot.expired = true;
                woken.extend(slot.waker.take());
            }
        }
        let n = woken.len();
        // Outside the borrow: a wake may run code that touches the table.
        for w in woken {
            w.wake();
        }
        n
    }

    /// Ends now the wait of every connection waiting idle ([`Timer::set_idle`]) as if its
    /// deadline had passed: the shutdown's close of idle keep-alive connections. Returns how
    /// many were woken.
    pub fn expire_idle(&self) -> usize {
        let mut woken = Vec::new();
        for slot in self.slots.borrow_mut().iter_mut().flatten() {
            if slot.idle && !slot.expired {
                slot.expired = true;
                woken.extend(slot.waker.take());
            }
        }
        let n = woken.len();
        // Outside the borrow, as in `sweep`.
        for w in woken {
            w.wake();
        }
        n
    }

    /// Sweeps every `interval`, forever.
    pub async fn sweep_forever(self: Rc<Self>, interval: Duration) {
        loop {
            hoop::time::sleep(interval).await;
            self.sweep(Instant::now());
        }
    }
}

impl Timer {
    /// Sets the deadline (and clears an earlier expiry) for a wait that is not idle.
    pub fn set(&self, deadline: Instant) {
        self.set_with(deadline, false);
    }

    /// Sets the deadline (and clears an earlier expiry) for an idle wait: one that
    /// [`Deadlines::expire_idle`] ends early. Every wait is preceded by a `set` or a
    /// `set_idle`, so the mark never outlives the wait it was made for.
    pub fn set_idle(&self, deadline: Instant) {
        self.set_with(deadline, true);
    }

    fn set_with(&self, deadline: Instant, idle: bool) {
        if let Some(slot) = self.table.slots.borrow_mut()[self.id].as_mut() {
            slot.deadline = Some(deadline);
            slot.expired = false;
            slot.idle = idle;
        }
    }

    /// Runs `fut` until it completes (`Some`) or the deadline passes (`None`; `fut` is dropped,
    /// which cancels its operation).
    pub async fn run<F: Future>(&self, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            let mut slots = self.table.slots.borrow_mut();
            let Some(slot) = slots[self.id].as_mut() else {
                return Poll::Ready(None);
            };
            if slot.expired {
                return Poll::Ready(None);
            }
            match &mut slot.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(slot) = self.table.slots.borrow_mut().get_mut(self.id) {
            *slot = None;
        }
        self.table.free.borrow_mut().push(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_entries_are_woken_once_and_slots_reused() {
        let table = Rc::new(Deadlines::default());
        let a = table.register();
        let b = table.register();
        let now = Instant::now();
        a.set(now);
        b.set(now + Duration::from_secs(60));
        assert_eq!(
            table.sweep(now),
            0,
            "no waker registered yet, but a is marked"
        );
        assert_eq!(table.sweep(now), 0, "marked once");
        drop(a);
        let c = table.register();
        assert_eq!(c.id, 0, "a's slot reused");
        c.set(now + Duration::from_secs(1));
        assert_eq!(table.sweep(now), 0);
    }

    #[test]
    fn expire_idle_ends_only_idle_waits() {
        let table = Rc::new(Deadlines::default());
        let idle = table.register();
        let busy = table.register();
        let later = Instant::now() + Duration::from_secs(60);
        idle.set_idle(later);
        busy.set(later);
        table.expire_idle();
        let slots = table.slots.borrow();
        assert!(slots[idle.id].as_ref().unwrap().expired);
        assert!(!slots[busy.id].as_ref().unwrap().expired);
        drop(slots);
        // A new wait clears the mark.
        idle.set(later);
        assert!(!table.slots.borrow()[idle.id].as_ref().unwrap().expired);
    }
}
