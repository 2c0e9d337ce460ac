//! Timers: each runtime's own ordered map of deadlines, and one process-wide timer thread for
//! sleeps polled where no hoop runtime runs.
//!
//! A sleep costs no SQE: the runtime's loop bounds its blocking wait in the driver by the next
//! deadline (`io_uring_enter` with `IORING_ENTER_EXT_ARG`, `epoll_wait`'s timeout) and wakes
//! the expired timers after each turn, outside every borrow. So timers work on every ring,
//! IOPOLL rings (which refuse timeout operations) and poisoned rings included, and never block
//! the thread: nothing on a runtime thread may block it, or every task on it stalls.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Where a sleep is registered: `(deadline, id)`, unique within its map.
pub(crate) type TimerKey = (Instant, u64);

/// Deadlines in order, each with the waker to wake when it passes.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    map: BTreeMap<TimerKey, Waker>,
    next_id: u64,
}

impl Timers {
    /// Registers `waker` to be woken at `at`.
    pub(crate) fn insert(&mut self, at: Instant, waker: &Waker) -> TimerKey {
        let key = (at, self.next_id);
        self.next_id += 1;
        self.map.insert(key, waker.clone());
        key
    }

    /// Refreshes the waker of a registered timer; false if it already fired (or never was).
    pub(crate) fn update(&mut self, key: TimerKey, waker: &Waker) -> bool {
        match self.map.get_mut(&key) {
            Some(w) => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                true
            }
            None => false,
        }
    }

    /// Forgets a timer (its sleep was dropped).
    pub(crate) fn remove(&mut self, key: TimerKey) {
        self.map.remove(&key);
    }

    /// How long until the next deadline (zero if one passed), if any.
    pub(crate) fn next_wait(&self, now: Instant) -> Option<Duration> {
        self.map
            .first_key_value()
            .map(|((at, _), _)| at.saturating_duration_since(now))
    }

    /// Moves the wakers of every deadline at or before `now` into `out`.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Vec<Waker>) {
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
        }
    }

    /// Whether no timer is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The timer thread for sleeps polled outside any hoop runtime (from another executor, say).
/// Started on first use; it waits on a condition variable until the next deadline.
pub(crate) struct GlobalTimers {
    timers: Mutex<Timers>,
    changed: Condvar,
}

impl GlobalTimers {
    /// The process's timer thread, started on first use; `None` if the thread cannot start.
    pub(crate) fn get() -> Option<&'static GlobalTimers> {
        static GLOBAL: OnceLock<Option<&'static GlobalTimers>> = OnceLock::new();
        *GLOBAL.get_or_init(|| {
            let g: &'static GlobalTimers = Box::leak(Box::new(GlobalTimers {
                timers: Mutex::new(Timers::default()),
                changed: Condvar::new(),
            }));
            hoop_driver::thread::spawn(
                std::thread::Builder::new().name("hoop-timer".into()),
                move || g.run(),
            )
            .ok()
            .map(|_| g)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timers> {
        self.timers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn insert(&self, at: Instant, waker: &Waker) -> TimerKey {
        let key = self.lock().insert(at, waker);
        self.changed.notify_one();
        key
    }

    pub(crate) fn update(&self, key: TimerKey, waker: &Waker) -> bool {
        self.lock().update(key, waker)
    }

    pub(crate) fn remove(&self, key: TimerKey) {
        self.lock().remove(key);
    }

    fn run(&self) {
        let mut due = Vec::new();
        let mut timers = self.lock();
        loop {
            let now = Instant::now();
            timers.expire(now, &mut due);
            if !due.is_empty() {
                drop(timers);
                // Woken outside the lock: a waker may register another sleep.
                for w in due.drain(..) {
                    w.wake();
                }
                timers = self.lock();
                continue;
            }
            timers = match timers.next_wait(now) {
                Some(wait) => {
                    self.changed
                        .wait_timeout(timers, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.changed.wait(timers).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Count(AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn expire_in_deadline_order_and_forget_removed() {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w: Waker = c.clone().into();
        let mut t = Timers::default();
        let now = Instant::now();
        let a = t.insert(now + Duration::from_millis(5), &w);
        let _b = t.insert(now + Duration::from_millis(1), &w);
        let d = t.insert(now + Duration::from_millis(9), &w);
        t.remove(d);
        assert_eq!(t.next_wait(now), Some(Duration::from_millis(1)));
        let mut out = Vec::new();
        t.expire(now + Duration::from_millis(5), &mut out);
        assert_eq!(out.len(), 2);
        assert!(!t.update(a, &w), "fired timers are gone");
        assert!(t.is_empty());
    }
}
