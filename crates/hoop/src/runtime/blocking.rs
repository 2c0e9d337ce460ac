//! `spawn_blocking`: a bounded pool of threads for blocking calls (DNS lookups, blocking
//! libraries), so they never stall a ring's thread.
//!
//! Each runtime has its own pool (size from `Builder::max_blocking_threads`, default
//! [`DEFAULT_MAX_BLOCKING_THREADS`]). Threads start on demand up to that bound; calls beyond
//! it wait in a FIFO queue. A thread idle for the keep-alive (`Builder::blocking_keep_alive`,
//! default [`DEFAULT_BLOCKING_KEEP_ALIVE`]) exits. When the runtime shuts down, the pool takes
//! no new call (its handle resolves cancelled); calls already queued still run, then the
//! threads exit. `spawn_blocking` outside any runtime uses a process-wide pool with the
//! defaults.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::join::JoinError;
use super::send_join::{CancelOnDrop, JoinCell, SendJoinHandle};

/// Default bound on a runtime's blocking threads.
pub const DEFAULT_MAX_BLOCKING_THREADS: usize = 64;
/// Default time an idle blocking thread waits for work before it exits.
pub const DEFAULT_BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    shut: bool,
}

/// A bounded blocking pool.
pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    cond: Condvar,
    max_threads: usize,
    keep_alive: Duration,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, keep_alive: Duration) -> Arc<BlockingPool> {
        Arc::new(BlockingPool {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                shut: false,
            }),
            cond: Condvar::new(),
            max_threads: max_threads.max(1),
            keep_alive,
        })
    }

    /// The process-wide pool (`spawn_blocking` outside a runtime).
    pub(crate) fn global() -> Arc<BlockingPool> {
        static GLOBAL: OnceLock<Arc<BlockingPool>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                BlockingPool::new(DEFAULT_MAX_BLOCKING_THREADS, DEFAULT_BLOCKING_KEEP_ALIVE)
            })
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on a pool thread; its handle gives the output, or a `JoinError` if `f`
    /// panicked or the pool refused it (shut down, or no thread could be started).
    pub(crate) fn spawn<F, R>(self: &Arc<Self>, f: F) -> SendJoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let cell = JoinCell::new();
        let guard = CancelOnDrop(cell.clone());
        let job: Job = Box::new(move || {
            if guard.0.aborted() {
                return; // the guard reports the cancellation
            }
            let r = catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::panicked);
            guard.0.complete(r);
        });
        self.submit(job);
        SendJoinHandle::new(cell)
    }

    fn submit(self: &Arc<Self>, job: Job) {
        let mut s = self.lock();
        if s.shut {
            drop(s);
            drop(job); // resolves the handle: cancelled
            return;
        }
        s.queue.push_back(job);
        if s.idle > s.queue.len() - 1 {
            drop(s);
            self.cond.notify_one();
            return;
        }
        if s.threads >= self.max_threads {
            return; // a busy thread takes it when done
        }
        s.threads += 1;
        drop(s);
        let pool = self.clone();
        let started = hoop_driver::thread::spawn(
            std::thread::Builder::new().name("hoop-blocking".into()),
            move || pool.work(),
        );
        if started.is_err() {
            let orphan = {
                let mut s = self.lock();
                s.threads -= 1;
                // No thread at all would ever take the queue: refuse what waits in it.
                if s.threads == 0 {
                    std::mem::take(&mut s.queue)
                } else {
                    VecDeque::new()
                }
            };
            drop(orphan);
        }
    }

    fn work(&self) {
        let mut s = self.lock();
        loop {
            if let Some(job) = s.queue.pop_front() {
                drop(s);
                job();
                s = self.lock();
                continue;
            }
            if s.shut {
                break;
            }
            s.idle += 1;
            let (next, timeout) = self
                .cond
                .wait_timeout(s, self.keep_alive)
                .unwrap_or_else(|e| e.into_inner());
            s = next;
            s.idle -= 1;
            if timeout.timed_out() && s.queue.is_empty() {
                break;
            }
        }
        s.threads -= 1;
    }

    /// Runtime shutdown: no new calls; queued ones still run, then the threads exit.
    pub(crate) fn shut(&self) {
        self.lock().shut = true;
        self.cond.notify_all();
    }

    /// Threads alive now (tests, diagnostics).
    pub(crate) fn threads(&self) -> usize {
        self.lock().threads
    }
}
