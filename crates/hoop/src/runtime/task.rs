//! Tasks and their wakers.
//!
//! A task's future lives in its runtime's slab and is only touched on the runtime's thread. Its
//! waker is an `Arc<Header>`, which is `Send + Sync`: woken on the owning thread it pushes the
//! task on the local run queue; woken from any other thread it pushes the task on the runtime's
//! remote queue and writes the driver's eventfd, so a waker sent to another thread is sound
//! (the fault monoio#120 describes).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use hoop_driver::Notifier;

/// Identifies a task: its slab index and the generation of that slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// The block_on future's id.
pub(crate) const MAIN: TaskId = TaskId {
    index: u32::MAX,
    generation: 0,
};

/// What other threads can reach of a runtime.
pub(crate) struct Remote {
    /// Unique per runtime; compared with the thread's current runtime to pick the wake path.
    pub(crate) runtime_id: u64,
    queue: Mutex<Vec<TaskId>>,
    pending: AtomicBool,
    notifier: Notifier,
}

impl Remote {
    pub(crate) fn new(runtime_id: u64, notifier: Notifier) -> Remote {
        Remote {
            runtime_id,
            queue: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            notifier,
        }
    }

    fn push(&self, id: TaskId) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push(id);
        drop(q);
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.notifier.notify();
        }
    }

    /// Moves remotely woken tasks to `out`.
    pub(crate) fn take(&self, out: &mut VecDeque<TaskId>) {
        if !self.pending.load(Ordering::Acquire) {
            return;
        }
        self.pending.store(false, Ordering::Release);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        out.extend(q.drain(..));
    }
}

thread_local! {
    /// The run queue of the runtime currently running on this thread, with its id.
    pub(crate) static LOCAL_QUEUE: RefCell<Option<(u64, VecDeque<TaskId>)>> =
        const { RefCell::new(None) };
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

    fn wake_by_ref(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let queued_locally = LOCAL_QUEUE.with(|q| match q.try_borrow_mut() {
            Ok(mut q) => match q.as_mut() {
                Some((id, queue)) if *id == self.remote.runtime_id => {
                    queue.push_back(self.id);
                    true
                }
                _ => false,
            },
            Err(_) => false,
        });
        if !queued_locally {
            self.remote.push(self.id);
        }
    }
}

/// A spawned task: its future and its waker.
pub(crate) struct Task {
    pub(crate) future: Pin<Box<dyn Future<Output = ()>>>,
    pub(crate) header: Arc<Header>,
    pub(crate) waker: Waker,
}

struct Slot {
    generation: u32,
    task: Option<Task>,
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
        self.slots[id.index as usize].task = Some(task);
    }

    /// Takes the task out to poll it. `None` for a stale id or a task being polled.
    pub(crate) fn take(&mut self, id: TaskId) -> Option<Task> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.task.take()
    }

    /// Puts a polled, still pending task back.
    pub(crate) fn put_back(&mut self, id: TaskId, task: Task) {
        self.slots[id.index as usize].task = Some(task);
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
    pub(crate) fn drain(&mut self) -> Vec<(TaskId, Task)> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(t) = slot.task.take() {
                out.push((
                    TaskId {
                        index: i as u32,
                        generation: slot.generation,
                    },
                    t,
                ));
            }
        }
        out
    }
}
