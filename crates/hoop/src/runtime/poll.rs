//! Polling tasks in place: one task by its id, or the detached writers until they are done.

use std::task::Context;

use hoop_driver::task_key::TaskGuard;

use super::context::Inner;
use super::task::{with_local_queue, TaskId};

/// Polls task `id` in place: the slab keeps it, the poll holds its own `Rc` and borrows its
/// future (a task queued twice and found already borrowed is skipped: it is being polled).
pub(super) fn run_task(inner: &Inner, id: TaskId) {
    let Some(task) = inner.tasks.borrow().get(id) else {
        return;
    };
    task.header.unschedule();
    let ready = {
        let Ok(mut future) = task.future.try_borrow_mut() else {
            return;
        };
        // Operations this poll starts wake the task by its key (`hoop_driver::task_key`).
        let _mark = TaskGuard::enter(inner.driver.id(), &task.waker, id.key());
        let mut cx = Context::from_waker(&task.waker);
        future.as_mut().poll(&mut cx).is_ready()
    };
    if ready {
        inner.tasks.borrow_mut().release(id);
    }
}

/// Runs the detached writers (and nothing else) until they have finished or the shutdown
/// timeout passed; `true` if they all finished.
pub(super) fn finish_writers(inner: &Inner) -> bool {
    let writers = &inner.writers;
    if writers.keys.borrow().is_empty() {
        return true;
    }
    let deadline = std::time::Instant::now() + inner.writers_timeout;
    let mut ready_keys = Vec::new();
    loop {
        let keys: Vec<u64> = writers.keys.borrow().iter().copied().collect();
        // Each polled whether woken or not: there are few, and a poll of a write still in
        // flight only looks at its slot.
        for key in keys {
            run_task(inner, TaskId::from_key(key));
        }
        if writers.prune(&inner.tasks.borrow()) == 0 {
            return true;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return false;
        }
        let turned = inner.driver.turn_with_wait(true, Some(deadline - now));
        // Other tasks woken meanwhile stay queued for the runtime's next run.
        inner.driver.take_ready_tasks(&mut ready_keys);
        if !ready_keys.is_empty() {
            let tasks = inner.tasks.borrow();
            with_local_queue(|local| {
                for key in ready_keys.drain(..) {
                    if let Some(h) = tasks.header(TaskId::from_key(key)) {
                        h.schedule_local(local);
                    }
                }
            });
            ready_keys.clear();
        }
        if turned.is_err() {
            // The writers see the driver's error in their operations' results.
            std::thread::yield_now();
        }
    }
}
