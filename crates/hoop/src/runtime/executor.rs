//! The runtime and its run loop: poll the tasks that were ready when the batch began, then turn
//! the driver (submit every SQE they queued in one `io_uring_enter`, waiting in that same call if
//! nothing is ready), drain the CQ in a batch and wake the tasks whose operations completed.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use hoop_driver::task_key::TaskGuard;
use hoop_driver::{Counters, DriverKind};

use super::context::{self, Inner, CONTEXT};
use super::handle::Handle;
use super::task::{Header, RemoteFuture, TaskId, MAIN};
use super::{poll, spawn};

/// A single-threaded io_uring runtime. Not `Send`: build one per thread (see [`run_per_core`]).
///
/// [`run_per_core`]: super::run_per_core
pub struct Runtime {
    pub(super) inner: Rc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Runs `future` to completion on this thread, with every task spawned meanwhile.
    ///
    /// Before it returns, files and streams dropped with write-behind pending finish their
    /// writes and close (up to the shutdown timeout; the program's other tasks do not run
    /// meanwhile), and what the ring has queued is submitted: a peer reads every accepted byte
    /// and the end of the stream while the runtime sits idle.
    ///
    /// # Panics
    /// When called from inside a runtime's `block_on` on the same thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        assert!(
            CONTEXT.with(|c| c.borrow().is_none()),
            "hoop: cannot start a runtime from within a runtime (block_on inside block_on)"
        );
        let guard = context::enter(&self.inner);
        let local = guard.queue.queue();
        let inner = &self.inner;
        let mut future = pin!(future);
        let (main_header, main_waker) = Header::waker(MAIN, inner.remote.clone());
        let mut batch: VecDeque<TaskId> = VecDeque::with_capacity(64);
        let mut spawned: Vec<RemoteFuture> = Vec::new();
        let mut reported = None;
        let mut due = Vec::new();
        let mut ready_keys: Vec<u64> = Vec::with_capacity(256);
        // The main future is polled first, then whenever its waker puts it in the run queue,
        // in its turn among the tasks.
        main_header.mark_scheduled();
        local.queue.borrow_mut().push_back(MAIN);
        loop {
            // The tasks woken locally since the last batch: the queue is swapped out whole
            // (`batch` is empty here), cheaper than moving its ids one by one.
            std::mem::swap(&mut batch, &mut *local.queue.borrow_mut());
            inner.remote.take(&mut batch, &mut spawned);
            // Futures spawned from other threads become tasks here (queued locally, so they
            // run in this batch).
            if !spawned.is_empty() {
                for f in spawned.drain(..) {
                    drop(spawn::spawn(f));
                }
            }
            {
                let mut q = local.queue.borrow_mut();
                if !q.is_empty() {
                    batch.append(&mut q);
                }
            }
            while let Some(id) = batch.pop_front() {
                if id == MAIN {
                    // In its turn among the tasks, not after one more driver turn.
                    main_header.unschedule();
                    let _mark = TaskGuard::enter(inner.driver.id(), &main_waker, MAIN.key());
                    let mut cx = Context::from_waker(&main_waker);
                    if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                        // Writes of values the program dropped go out before this returns,
                        // and so do their closes: a peer waiting for the end of a stream
                        // does not wait for the runtime's next run (bytes a write accepted
                        // are written, and a close is submitted on the tick of the drop).
                        poll::finish_writers(inner);
                        inner.driver.submit_queued();
                        return v;
                    }
                } else {
                    poll::run_task(inner, id);
                }
                if !batch.is_empty() {
                    // File I/O the task queued goes to its device now if the ring was waiting
                    // on one (see `Driver::flush_early`).
                    inner.driver.flush_early();
                }
            }
            let idle = local.queue.borrow().is_empty();
            let wait = {
                let t = inner.timers.borrow();
                (!t.is_empty())
                    .then(|| t.next_wait(std::time::Instant::now()))
                    .flatten()
            };
            let turned = inner.driver.turn_with_wait(idle, wait);
            // Tasks whose operations completed and that wait by their key: queued here,
            // without a waker (their wakers' wakes went to the queue during the turn).
            inner.driver.take_ready_tasks(&mut ready_keys);
            if !ready_keys.is_empty() {
                let tasks = inner.tasks.borrow();
                for key in ready_keys.drain(..) {
                    let id = TaskId::from_key(key);
                    if id == MAIN {
                        main_header.schedule_local(local);
                    } else if let Some(h) = tasks.header(id) {
                        h.schedule_local(local);
                    }
                }
            }
            if wait.is_some() {
                let now = std::time::Instant::now();
                inner.timers.borrow_mut().expire(now, &mut due);
                // Woken after the turn, outside every borrow: a waker may run code that
                // reaches the runtime again.
                if !due.is_empty() {
                    for w in due.drain(..) {
                        w.wake();
                    }
                }
            }
            if let Err(e) = turned {
                // The ops see the error themselves; say it once here so a stuck loop is visible.
                let msg = e.to_string();
                if reported.as_ref() != Some(&msg) {
                    eprintln!("hoop: driver error: {msg}");
                    reported = Some(msg);
                }
            }
        }
    }

    /// The driver this runtime runs on (`Uring` or `Epoll`).
    pub fn driver_kind(&self) -> DriverKind {
        self.inner.driver.kind()
    }

    /// A handle other threads use to spawn tasks on this runtime (see [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle::new(self.inner.remote.clone())
    }

    /// The ring's counters (SQEs submitted, `io_uring_enter` calls, CQEs, ...).
    pub fn counters(&self) -> Counters {
        self.inner.driver.counters()
    }

    /// The setup flags the kernel accepted for this runtime's ring.
    pub fn setup_flags(&self) -> &'static str {
        self.inner.driver.setup_flags()
    }

    /// The SQ and CQ sizes of this runtime's ring now (the CQ grows under load, see
    /// [`Builder::resize_rings`](crate::runtime::Builder::resize_rings)).
    pub fn ring_sizes(&self) -> (u32, u32) {
        self.inner.driver.ring_sizes()
    }

    /// The bytes of this runtime's rings mapped into the process (SQ ring, SQEs, CQ ring); 0
    /// on epoll.
    pub fn ring_bytes(&self) -> usize {
        self.inner.driver.ring_bytes()
    }
}
