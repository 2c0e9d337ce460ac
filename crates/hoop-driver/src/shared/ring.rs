//! One ring of a shared set: the io_uring engine behind a lock, and its reaper thread.
//!
//! Any thread pushes SQEs and drains the CQ while it holds the lock (never blocking in the
//! kernel there); the reaper waits in `io_uring_enter` outside the lock, and only while the
//! kernel owes the ring a completion, so an idle ring costs no CPU. Wakers and orphaned results
//! collected under the lock run after it is released (rule 11).

use std::cell::Cell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use crate::config::Config;
use crate::setup::SetupError;
use crate::sys::uring::{wait_for_cqe, Uring};

/// How long the reaper waits in the kernel before it looks at its stop flag again.
const REAPER_WAIT: Duration = Duration::from_millis(100);

/// The io_uring engine of a shared ring.
pub(crate) struct SendUring(pub(crate) Uring);

// SAFETY: `Uring` is `!Send` only because its slots may hold any operation's data (a
// `Box<dyn Orphan>`, which need not be `Send`) and because a per-thread ring may keep an `Rc`
// of its registered file table and a ring fd registered in the thread's table. A shared ring
// only ever receives operations through `Rings`, whose entry points require `T: Send`; it never
// registers a file table (`fixed_files` stays `None`) nor its ring fd (`register_ring_fd` is
// off), and wakers are `Send`. Every access goes through the ring's mutex.
unsafe impl Send for SendUring {}

pub(crate) struct State {
    pub(crate) uring: SendUring,
    /// The reaper waits on the condvar (nothing was owed when it looked).
    reaper_parked: bool,
    /// The reaper must exit.
    stop: bool,
}

/// One ring of a [`Rings`](super::Rings) set.
pub(crate) struct Ring {
    state: Mutex<State>,
    reaper_cv: Condvar,
    ring_fd: RawFd,
    /// An `IORING_SETUP_IOPOLL` ring: O_DIRECT reads and writes (and no-ops) only.
    pub(crate) iopoll: bool,
    /// Slots in use, for picking the least-loaded ring (written under the lock).
    load: AtomicUsize,
    setup_flags: &'static str,
}

thread_local! {
    /// The list wakers are moved into out of a ring's table (no allocation per call).
    static SCRATCH: Cell<Vec<Waker>> = const { Cell::new(Vec::new()) };
}

impl Ring {
    pub(crate) fn new(cfg: &Config) -> Result<Ring, SetupError> {
        let uring = Uring::new(cfg)?;
        Ok(Ring {
            ring_fd: uring.ring_fd(),
            iopoll: uring.is_iopoll(),
            setup_flags: uring.setup_flags(),
            state: Mutex::new(State {
                uring: SendUring(uring),
                reaper_parked: false,
                stop: false,
            }),
            reaper_cv: Condvar::new(),
            load: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (a bug) must not stop every other thread's I/O: the
        // state is consistent between calls, so take it back.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn load(&self) -> usize {
        self.load.load(Ordering::Relaxed)
    }

    pub(crate) fn setup_flags(&self) -> &'static str {
        self.setup_flags
    }

    /// Runs `f` on the engine under the ring's lock. Then, with the lock released, wakes the
    /// tasks the call woke and finishes the results nobody waits for. Wakes the reaper when the
    /// kernel owes a completion and it is parked.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Uring) -> R) -> R {
        let section = crate::deferred::Section::enter();
        let mut wakeups = SCRATCH.with(|s| s.take());
        let (r, orphans) = {
            let mut g = self.lock();
            let r = f(&mut g.uring.0);
            let u = &mut g.uring.0;
            std::mem::swap(&mut wakeups, &mut u.table.wakeups);
            let orphans = if u.table.orphans.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut u.table.orphans)
            };
            self.load.store(u.table.slots.in_use(), Ordering::Relaxed);
            if g.reaper_parked && (g.uring.0.owed_cqes() > 0 || g.uring.0.has_unsent()) {
                g.reaper_parked = false;
                self.reaper_cv.notify_one();
            }
            (r, orphans)
        };
        drop(section);
        for w in wakeups.drain(..) {
            w.wake();
        }
        for (data, c) in orphans {
            data.finish(c);
        }
        SCRATCH.with(|s| s.set(wakeups));
        r
    }

    /// The reaper's loop: park while the kernel owes nothing; otherwise wait in the kernel for
    /// a CQE (outside the lock), then drain.
    pub(crate) fn reap_until_stopped(&self) {
        loop {
            let mut unsent;
            {
                let mut g = self.lock();
                loop {
                    if g.stop {
                        return;
                    }
                    unsent = g.uring.0.has_unsent();
                    if unsent || g.uring.0.owed_cqes() > 0 {
                        break;
                    }
                    g.reaper_parked = true;
                    g = self.reaper_cv.wait(g).unwrap_or_else(|e| e.into_inner());
                    g.reaper_parked = false;
                }
            }
            // A signal, a timeout or an error all lead back to the checks above; the drain
            // below finds whatever arrived.
            // Held-back completions and SQEs a refused submit left queued are handled by the
            // submit-and-drain below, not waited for; a kernel that keeps refusing is retried
            // after a millisecond, not in a spin.
            if !unsent {
                let _ = wait_for_cqe(self.ring_fd, REAPER_WAIT);
            }
            unsent = self.with(|u| {
                let _ = u.submit_and_reap();
                u.has_unsent()
            });
            if unsent {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Tells the reaper to exit.
    pub(crate) fn stop_reaper(&self) {
        let mut g = self.lock();
        g.stop = true;
        self.reaper_cv.notify_all();
    }
}
