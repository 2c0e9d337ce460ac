//! The concurrent core of a shared ring: the lock around its engine, the calls that run under
//! it (wakers and orphaned results run after it is released), and the hand-off of the waiting
//! between the reaper thread and an executor's reactor.
//!
//! Generic over what the lock guards, so that the loom model checks (`model`) run this very
//! code with a table and a fake engine in place of a ring; its synchronisation comes from
//! `sync` (loom's under `--cfg loom`).

use std::cell::Cell;
use std::task::Waker;
use std::time::Instant;

use super::sync::{AtomicUsize, Condvar, Mutex, MutexGuard, Ordering};
use crate::lifecycle::{Completion, Orphan};
use crate::table::OpTable;

/// What a ring's lock guards and its callers drain: the op table's wakers and orphans.
pub(crate) trait HasTable {
    /// The op table, whose wakeups and orphans each call hands out after the lock.
    fn table_mut(&mut self) -> &mut OpTable;
}

impl HasTable for OpTable {
    fn table_mut(&mut self) -> &mut OpTable {
        self
    }
}

/// The state under the lock: the engine and the reaper's flags.
pub(crate) struct Locked<S> {
    pub(crate) engine: S,
    /// The reaper waits on the condvar (nothing was owed when it looked, or a reactor waits).
    parked: bool,
    /// Until when the reaper sleeps (parked or in the kernel); `None`: until woken.
    pub(crate) until: Option<Instant>,
    /// The reaper must exit.
    stop: bool,
}

/// The lock, the reaper's condvar and the count of attached reactors.
pub(crate) struct Handoff<S> {
    state: Mutex<Locked<S>>,
    cv: Condvar,
    /// Reactor pollers attached (0 or 1): while one is, the reaper leaves the waiting to it.
    pollers: AtomicUsize,
}

thread_local! {
    /// The list wakers are moved into out of a ring's table (no allocation per call).
    static SCRATCH: Cell<Vec<Waker>> = const { Cell::new(Vec::new()) };
}

impl<S> Handoff<S> {
    pub(crate) fn new(engine: S) -> Handoff<S> {
        Handoff {
            state: Mutex::new(Locked {
                engine,
                parked: false,
                until: None,
                stop: false,
            }),
            cv: Condvar::new(),
            pollers: AtomicUsize::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked<S>> {
        // A panic while the lock was held (a bug) must not stop every other thread's I/O: the
        // state is consistent between calls, so take it back.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a reactor waits for the completions.
    pub(crate) fn attached(&self) -> bool {
        self.pollers.load(Ordering::Acquire) > 0
    }

    /// Claims the waiting for one reactor: false if one has it already.
    pub(crate) fn try_attach(&self) -> bool {
        self.pollers
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The reactor is gone: the reaper waits again. The count drops before the lock is
    /// taken, so a reaper that looks after this sees no reactor, and one that looked before
    /// is parked by the time the lock is ours and is woken here.
    pub(crate) fn detach(&self) {
        self.pollers.fetch_sub(1, Ordering::AcqRel);
        let mut g = self.lock();
        self.unpark(&mut g);
    }

    /// Wakes the parked reaper (the caller holds the lock); false if it was not parked.
    pub(crate) fn unpark(&self, g: &mut Locked<S>) -> bool {
        if g.parked {
            g.parked = false;
            self.cv.notify_one();
            true
        } else {
            false
        }
    }

    /// Wakes the parked reaper if `due(engine, attached)` says it has work; false if not.
    pub(crate) fn unpark_if(
        &self,
        g: &mut Locked<S>,
        due: impl FnOnce(&mut S, bool) -> bool,
    ) -> bool {
        g.parked && due(&mut g.engine, self.attached()) && self.unpark(g)
    }

    /// Tells the reaper to exit.
    pub(crate) fn stop(&self) {
        let mut g = self.lock();
        g.stop = true;
        self.cv.notify_all();
    }

    /// The reaper's wait for work: under the lock, `check(engine, attached)` says what to do
    /// now (`Ok`) or how long to park (`Err(deadline)`, `None` for until woken). `None` when
    /// the reaper must exit.
    pub(crate) fn next_work<R>(
        &self,
        mut check: impl FnMut(&mut S, bool) -> Result<R, Option<Instant>>,
    ) -> Option<(MutexGuard<'_, Locked<S>>, R)> {
        let mut g = self.lock();
        loop {
            if g.stop {
                return None;
            }
            let deadline = match check(&mut g.engine, self.attached()) {
                Ok(r) => return Some((g, r)),
                Err(deadline) => deadline,
            };
            g.parked = true;
            g.until = deadline;
            g = match deadline {
                None => self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    self.cv
                        .wait_timeout(g, left)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0)
                }
            };
            g.parked = false;
            g.until = None;
        }
    }
}

impl<S: HasTable> Handoff<S> {
    /// Runs `f` on the engine under the lock, then `after` (still under it); then, with the
    /// lock released, drops `section` (the caller's marker of the time the lock is held),
    /// wakes the tasks the call woke and finishes the results nobody waits for, so that a
    /// waker that runs at once, or an orphan whose drop reaches the ring, never finds it
    /// locked.
    pub(crate) fn with<R, G>(
        &self,
        section: G,
        f: impl FnOnce(&mut S) -> R,
        after: impl FnOnce(&mut Locked<S>),
    ) -> R {
        let (r, mut wakeups, orphans) = {
            let mut g = self.lock();
            let r = f(&mut g.engine);
            let table = g.engine.table_mut();
            // Most calls wake nothing: the scratch list is only fetched when there are wakers.
            let wakeups = if table.wakeups.is_empty() {
                Vec::new()
            } else {
                let mut w = SCRATCH.with(|s| s.take());
                std::mem::swap(&mut w, &mut table.wakeups);
                w
            };
            let orphans: Vec<(Box<dyn Orphan>, Completion)> = if table.orphans.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut table.orphans)
            };
            after(&mut g);
            (r, wakeups, orphans)
        };
        drop(section);
        if !wakeups.is_empty() {
            for w in wakeups.drain(..) {
                w.wake();
            }
            SCRATCH.with(|s| s.set(wakeups));
        }
        for (data, c) in orphans {
            data.finish(c);
        }
        r
    }
}
