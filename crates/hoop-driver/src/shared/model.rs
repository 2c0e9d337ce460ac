//! loom model checks of the shared rings' concurrent core (`handoff`), built only with
//! `RUSTFLAGS="--cfg loom"` (scripts/model-check): loom runs each test under every
//! interleaving of its threads (and every outcome the memory orderings allow), and fails on
//! a deadlock, a lost wake-up (a thread left waiting forever is a deadlock to loom) or a
//! failed assertion.
//!
//! The code under test is the real `Handoff`; around it, a fake engine stands in for the
//! kernel (a count of completions owed), and the op table is the real one.

use std::task::{Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar};
use loom::thread;

use super::handoff::{Handoff, HasTable};
use crate::lifecycle::{Completion, Lifecycle, Orphan};
use crate::table::{Dropped, OpTable};

/// Runs `f` under every interleaving loom explores, and prints how many it ran (the counter
/// is std's: it counts loom's executions, outside the model).
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    loom::model(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let n = runs.load(std::sync::atomic::Ordering::Relaxed);
    println!("model-check: {name}: {n} interleavings");
}

/// A ring's engine as the reaper sees it: completions the kernel owes, and those reaped.
#[derive(Default)]
struct FakeEngine {
    owed: usize,
    reaped: usize,
}

/// The reaper's check, as the ring's: work when something is owed and no reactor waits.
fn due(e: &mut FakeEngine, attached: bool) -> bool {
    !attached && e.owed > 0
}

/// The reaper's loop, as `Ring::reap_until_stopped` runs it: wait for work, "wait in the
/// kernel" (the completion is there at once), reap under the lock, tell whoever waits.
fn reaper(hub: &Handoff<FakeEngine>, reaped: &Condvar) {
    while let Some((g, ())) = hub.next_work(
        |e, attached| {
            if due(e, attached) {
                Ok(())
            } else {
                Err(None)
            }
        },
    ) {
        drop(g);
        let mut g = hub.lock();
        g.engine.reaped += std::mem::take(&mut g.engine.owed);
        drop(g);
        reaped.notify_all();
    }
}

/// Submits one operation, as `Ring::with` does: under the lock, then the reaper is woken if
/// it has become its turn.
fn submit(hub: &Handoff<FakeEngine>) {
    let mut g = hub.lock();
    g.engine.owed += 1;
    hub.unpark_if(&mut g, due);
}

/// Waits until `n` completions were reaped (loom reports a deadlock if the reaper sleeps
/// through them).
fn wait_reaped(hub: &Handoff<FakeEngine>, reaped: &Condvar, n: usize) {
    let mut g = hub.lock();
    while g.engine.reaped < n {
        // The reaper's lock is a loom mutex: loom's condvar waits on its guard.
        g = reaped.wait(g).unwrap();
    }
}

/// An operation submitted while the reaper parks (or is about to) is reaped: the reaper
/// never sleeps through a completion it owes.
#[test]
fn the_reaper_never_sleeps_through_an_owed_completion() {
    model("the_reaper_never_sleeps_through_an_owed_completion", || {
        let hub = Arc::new(Handoff::new(FakeEngine::default()));
        let reaped = Arc::new(Condvar::new());
        let r = {
            let (hub, reaped) = (hub.clone(), reaped.clone());
            thread::spawn(move || reaper(&hub, &reaped))
        };
        submit(&hub);
        wait_reaped(&hub, &reaped, 1);
        hub.stop();
        r.join().unwrap();
    });
}

/// A reactor waits for the completions (the reaper leaves them to it) and detaches while an
/// operation is owed: the reaper takes the waiting back and reaps it, whatever the order of
/// the detach, the submit and the reaper's check.
#[test]
fn a_detaching_reactor_hands_the_wait_back() {
    model("a_detaching_reactor_hands_the_wait_back", || {
        let hub = Arc::new(Handoff::new(FakeEngine::default()));
        assert!(hub.try_attach());
        assert!(!hub.try_attach(), "one reactor at a time");
        let reaped = Arc::new(Condvar::new());
        let r = {
            let (hub, reaped) = (hub.clone(), reaped.clone());
            thread::spawn(move || reaper(&hub, &reaped))
        };
        let reactor = {
            let hub = hub.clone();
            thread::spawn(move || hub.detach())
        };
        submit(&hub);
        wait_reaped(&hub, &reaped, 1);
        reactor.join().unwrap();
        hub.stop();
        r.join().unwrap();
    });
}

/// The op table of a shared ring, as the engine holds it.
struct SendTable(OpTable);

// SAFETY: the table is only reached through the hand-off's mutex, and every waker and orphan
// these tests put in it is `Send` (`Probe`, `Wake` impls over loom's `Arc`s), as a shared
// ring's are (its entry points require `T: Send`).
unsafe impl Send for SendTable {}

impl HasTable for SendTable {
    fn table_mut(&mut self) -> &mut OpTable {
        &mut self.0
    }
}

type Hub = Handoff<SendTable>;

/// The data of a dropped operation: counts its finishing, and reaches the ring from its
/// finish, as a buffer ring's last handle does.
struct Probe {
    hub: Arc<Hub>,
    finished: Arc<AtomicUsize>,
}

impl Orphan for Probe {
    fn finish(self: Box<Self>, c: Completion) {
        assert_eq!(c.res, 7, "the orphan gets its operation's CQE");
        drop(self.hub.lock());
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// The future's waker: counts wakes, and polls at once (it locks the ring), as an executor
/// that runs the task inline does.
struct Inline {
    hub: Arc<Hub>,
    woken: Arc<AtomicUsize>,
}

impl Wake for Inline {
    fn wake(self: std::sync::Arc<Self>) {
        drop(self.hub.lock());
        self.woken.fetch_add(1, Ordering::SeqCst);
    }
}

/// A future waiting on another thread's ring is dropped while the reaper drains its CQE: the
/// data is finished exactly once (by whichever side comes second) with that CQE, the slot is
/// freed exactly once, and wakers and orphans run with the ring unlocked (each of them locks
/// it: running them under the lock would deadlock).
#[test]
fn a_future_dropped_while_its_completion_arrives() {
    model("a_future_dropped_while_its_completion_arrives", || {
        let hub = Arc::new(Handoff::new(SendTable(OpTable::new(1, 0))));
        let finished = Arc::new(AtomicUsize::new(0));
        let woken = Arc::new(AtomicUsize::new(0));
        let waker = Waker::from(std::sync::Arc::new(Inline {
            hub: hub.clone(),
            woken: woken.clone(),
        }));
        // The future's first poll pushed the operation, waiting with its waker.
        let user_data = hub.with(
            (),
            |t| t.0.slots.insert(Lifecycle::Waiting(waker)).unwrap(),
            |_| {},
        );
        let reaper = {
            let hub = hub.clone();
            thread::spawn(move || {
                hub.with(
                    (),
                    |t| t.0.complete(user_data, Completion { res: 7, flags: 0 }),
                    |_| {},
                )
            })
        };
        // The future is dropped (`SharedOp::drop`).
        let data = Box::new(Probe {
            hub: hub.clone(),
            finished: finished.clone(),
        });
        match hub.with((), |t| t.0.drop_slot(user_data, data), |_| {}) {
            Dropped::Finished(data, c) => data.finish(c),
            Dropped::Cancel => {}
            Dropped::Gone => panic!("the slot vanished under a live future"),
        }
        reaper.join().unwrap();
        assert_eq!(finished.load(Ordering::SeqCst), 1, "finished exactly once");
        assert!(woken.load(Ordering::SeqCst) <= 1, "woken at most once");
        let g = hub.lock();
        assert_eq!(g.engine.0.slots.in_use(), 0, "the slot is freed");
        assert_eq!(
            g.engine.0.counters.stale_cqes, 0,
            "no CQE found its slot gone"
        );
    });
}
