//! Tasks and their wakers.
//!
//! A task's future lives in its runtime's slab and is only touched on the runtime's thread. Its
//! waker is an `Arc<Header>`, which is `Send + Sync`: woken on the owning thread it pushes the
//! task on the local run queue; woken from any other thread it pushes the task on the runtime's
//! remote queue and wakes the runtime's thread (a MSG_RING message into its ring, or the
//! driver's eventfd), so a waker sent to another thread is sound (the fault monoio#120
//! describes).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Wake, Waker};

use hoop_driver::{Notifier, RingWaker};

use super::blocking::BlockingPool;

/// Identifies a task: its slab index and the generation of that slot.
#[derive(Debug, Clone, Copy, Eq)]
pub(crate) struct TaskId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl PartialEq for TaskId {
    /// One comparison of the key rather than one per field (the run loop compares every id it
    /// runs with the main future's).
    #[inline]
    fn eq(&self, other: &TaskId) -> bool {
        self.key() == other.key()
    }
}

impl TaskId {
    /// The key the driver wakes this task by (`hoop_driver::task_key`).
    #[inline]
    pub(crate) fn key(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    /// The id a key names.
    #[inline]
    pub(crate) fn from_key(key: u64) -> TaskId {
        TaskId {
            index: key as u32,
            generation: (key >> 32) as u32,
        }
    }
}

/// The block_on future's id.
pub(crate) const MAIN: TaskId = TaskId {
    index: u32::MAX,
    generation: 0,
};

/// A future spawned from another thread (see `Handle::spawn`), waiting for the runtime's
/// thread to make it a task.
pub(crate) type RemoteFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How other threads wake the runtime's thread out of a blocking wait.
pub(crate) struct WakeBy {
    /// A MSG_RING message into the ring (io_uring, Linux 6.13+, unless turned off).
    ring: Option<RingWaker>,
    /// The driver's eventfd (the epoll driver, older kernels, and when a message fails).
    eventfd: Notifier,
}

impl WakeBy {
    pub(crate) fn new(ring: Option<RingWaker>, eventfd: Notifier) -> WakeBy {
        WakeBy { ring, eventfd }
    }

    pub(crate) fn uses_msg_ring(&self) -> bool {
        self.ring.is_some()
    }

    fn wake(&self) {
        if let Some(r) = &self.ring {
            if r.wake().is_ok() {
                return;
            }
        }
        self.eventfd.notify();
    }
}

struct Spawns {
    /// Set when the runtime shuts down: later spawns are refused.
    closed: bool,
    futures: Vec<RemoteFuture>,
}

/// What other threads can reach of a runtime.
pub(crate) struct Remote {
    /// Unique per runtime; compared with the thread's current runtime to pick the wake path.
    pub(crate) runtime_id: u64,
    queue: Mutex<Vec<TaskId>>,
    spawns: Mutex<Spawns>,
    pending: AtomicBool,
    /// `None` once the runtime shut down (nothing left to wake; the ring fd is released).
    wake: RwLock<Option<WakeBy>>,
    /// Whether `wake` sends MSG_RING messages (fixed at build).
    msg_ring: bool,
    /// The runtime's `spawn_blocking` pool.
    pub(crate) blocking: Arc<BlockingPool>,
}

impl Remote {
    pub(crate) fn new(runtime_id: u64, wake: WakeBy, blocking: Arc<BlockingPool>) -> Remote {
        Remote {
            runtime_id,
            queue: Mutex::new(Vec::new()),
            spawns: Mutex::new(Spawns {
                closed: false,
                futures: Vec::new(),
            }),
            pending: AtomicBool::new(false),
            msg_ring: wake.uses_msg_ring(),
            wake: RwLock::new(Some(wake)),
            blocking,
        }
    }

    /// Whether cross-thread wakes go by MSG_RING (else by the eventfd).
    pub(crate) fn uses_msg_ring(&self) -> bool {
        self.msg_ring
    }

    fn notify(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let w = self.wake.read().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = w.as_ref() {
                w.wake();
            }
        }
    }

    fn push(&self, id: TaskId) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push(id);
        drop(q);
        self.notify();
    }

    /// Queues a future spawned from another thread; gives it back if the runtime shut down.
    pub(crate) fn push_spawn(&self, f: RemoteFuture) -> Result<(), RemoteFuture> {
        let mut s = self.spawns.lock().unwrap_or_else(|e| e.into_inner());
        if s.closed {
            return Err(f);
        }
        s.futures.push(f);
        drop(s);
        self.notify();
        Ok(())
    }

    /// Moves remotely woken tasks to `out` and futures spawned from other threads to `spawns`.
    pub(crate) fn take(&self, out: &mut VecDeque<TaskId>, spawns: &mut Vec<RemoteFuture>) {
        if !self.pending.load(Ordering::Acquire) {
            return;
        }
        self.pending.store(false, Ordering::Release);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        out.extend(q.drain(..));
        drop(q);
        let mut s = self.spawns.lock().unwrap_or_else(|e| e.into_inner());
        spawns.append(&mut s.futures);
    }

    /// Shutdown: refuses later spawns, stops waking the ring (releasing its fd), and returns
    /// the spawned futures that never ran (the caller drops them: their handles then resolve
    /// to a cancelled `JoinError`).
    pub(crate) fn close(&self) -> Vec<RemoteFuture> {
        let futures = {
            let mut s = self.spawns.lock().unwrap_or_else(|e| e.into_inner());
            s.closed = true;
            std::mem::take(&mut s.futures)
        };
        let wake = self.wake.write().unwrap_or_else(|e| e.into_inner()).take();
        drop(wake);
        futures
    }
}

/// The run queue of a runtime while it runs on this thread.
pub(crate) struct RunQueue {
    /// The runtime whose tasks go here.
    pub(crate) runtime_id: u64,
    pub(crate) queue: RefCell<VecDeque<TaskId>>,
}

impl RunQueue {
    pub(crate) fn new(runtime_id: u64) -> Box<RunQueue> {
        Box::new(RunQueue {
            runtime_id,
            queue: RefCell::new(VecDeque::with_capacity(64)),
        })
    }
}

thread_local! {
    /// The run queue of the runtime currently running on this thread (null: none). Set and
    /// reset only by `LocalQueueGuard`, which owns the queue; a plain `Cell` of a pointer has
    /// no destructor, so a wake reads it with one load.
    static LOCAL_QUEUE: Cell<*const RunQueue> = const { Cell::new(std::ptr::null()) };
}

/// Makes a run queue the thread's local one until dropped (then the previous one again).
pub(crate) struct LocalQueueGuard {
    queue: Box<RunQueue>,
    prev: *const RunQueue,
}

impl LocalQueueGuard {
    pub(crate) fn enter(runtime_id: u64) -> LocalQueueGuard {
        let queue = RunQueue::new(runtime_id);
        let prev = LOCAL_QUEUE.with(|l| l.replace(&*queue as *const RunQueue));
        LocalQueueGuard { queue, prev }
    }

    /// The queue this guard installed.
    pub(crate) fn queue(&self) -> &RunQueue {
        &self.queue
    }
}

impl Drop for LocalQueueGuard {
    fn drop(&mut self) {
        // Reset before `queue` is freed (fields drop after this body).
        LOCAL_QUEUE.with(|l| l.set(self.prev));
    }
}

/// Runs `f` on the thread's local run queue, if a runtime runs here.
#[inline]
pub(crate) fn with_local_queue<R>(f: impl FnOnce(&RunQueue) -> R) -> Option<R> {
    let p = LOCAL_QUEUE.with(|l| l.get());
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer was set by a live `LocalQueueGuard` to the boxed queue it
    // owns, and is reset (on this thread, the only one that reads it) before that box is freed.
    Some(f(unsafe { &*p }))
}

/// A task's waker.
pub(crate) struct Header {
    id: TaskId,
    /// Set while the task sits in a run queue, so a burst of wakes queues it once.
    scheduled: AtomicBool,
    remote: Arc<Remote>,
}

impl Header {
    pub(crate) fn waker(id: TaskId, remote: Arc<Remote>) -> (Arc<Header>, Waker) {
        let h = Arc::new(Header {
            id,
            scheduled: AtomicBool::new(false),
            remote,
        });
        (h.clone(), Waker::from(h))
    }

    /// Queues the task on `local` (this runtime's queue, on its thread) unless it is queued:
    /// a completion drained here for a task that waits by its key.
    #[inline]
    pub(crate) fn schedule_local(&self, local: &RunQueue) {
        if self.scheduled.load(Ordering::Acquire) {
            return;
        }
        self.scheduled.store(true, Ordering::Release);
        local.queue.borrow_mut().push_back(self.id);
    }

    /// Called right before the task is polled: wakes from now on queue it again.
    pub(crate) fn unschedule(&self) {
        self.scheduled.store(false, Ordering::Release);
    }

    /// Marks the task queued (used when it is put on the run queue directly).
    pub(crate) fn mark_scheduled(&self) {
        self.scheduled.store(true, Ordering::Release);
    }
}

impl Wake for Header {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// A wake on the runtime's own thread (the common case: a completion drained by the
    /// loop) costs no atomic read-modify-write: a load of `scheduled`, a store, a push on the
    /// local queue. Only a wake from another thread swaps the flag. The two can race (a remote
    /// swap between the local load and store): the task is then queued twice and polled once
    /// more than needed, which a future allows; it is never lost, since whoever saw the flag
    /// clear queues it.
    #[inline]
    fn wake_by_ref(self: &Arc<Self>) {
        if self.scheduled.load(Ordering::Acquire) {
            return;
        }
        let queued_locally = with_local_queue(|l| {
            if l.runtime_id != self.remote.runtime_id {
                return false;
            }
            match l.queue.try_borrow_mut() {
                Ok(mut queue) => {
                    self.scheduled.store(true, Ordering::Release);
                    queue.push_back(self.id);
                    true
                }
                Err(_) => false,
            }
        })
        .unwrap_or(false);
        if !queued_locally && !self.scheduled.swap(true, Ordering::AcqRel) {
            self.remote.push(self.id);
        }
    }
}

/// A spawned task: its future and its waker.
pub(crate) struct Task {
    /// Borrowed while the task is polled, in place (the slab keeps its `Rc`).
    pub(crate) future: RefCell<Pin<Box<dyn Future<Output = ()>>>>,
    pub(crate) header: Arc<Header>,
    pub(crate) waker: Waker,
}

struct Slot {
    generation: u32,
    task: Option<Rc<Task>>,
}

/// The runtime's tasks.
#[derive(Default)]
pub(crate) struct Tasks {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Tasks {
    /// Reserves an id for a new task.
    pub(crate) fn vacant(&mut self) -> TaskId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    task: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        TaskId {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    /// Stores the task for `id` (from `vacant`).
    pub(crate) fn fill(&mut self, id: TaskId, task: Task) {
        self.slots[id.index as usize].task = Some(Rc::new(task));
    }

    /// The header of live task `id` (`None` for a stale id).
    #[inline]
    pub(crate) fn header(&self, id: TaskId) -> Option<&Arc<Header>> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.task.as_ref().map(|t| &t.header)
    }

    /// The task to poll (polled in place, through its own `Rc`). `None` for a stale id.
    #[inline]
    pub(crate) fn get(&self, id: TaskId) -> Option<Rc<Task>> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.task.clone()
    }

    /// Frees the id of a finished task.
    pub(crate) fn release(&mut self, id: TaskId) {
        let slot = &mut self.slots[id.index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.task = None;
        self.free.push(id.index);
        self.live -= 1;
    }

    /// Number of live tasks.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Takes every stored task out (shutdown).
    pub(crate) fn drain(&mut self) -> Vec<(TaskId, Rc<Task>)> {
        self.drain_where(|_| true)
    }

    /// Takes out the stored tasks whose id `take` accepts (shutdown).
    pub(crate) fn drain_where(
        &mut self,
        mut take: impl FnMut(TaskId) -> bool,
    ) -> Vec<(TaskId, Rc<Task>)> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let id = TaskId {
                index: i as u32,
                generation: slot.generation,
            };
            if slot.task.is_some() && take(id) {
                if let Some(t) = slot.task.take() {
                    out.push((id, t));
                }
            }
        }
        out
    }
}
