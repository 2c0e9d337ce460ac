//! Local task keys: a completion for a task of the runtime on this thread wakes it without a
//! waker.
//!
//! A runtime that polls its own tasks says, around each poll, which task runs and which waker
//! it gave it ([`TaskGuard`]). An operation first polled with exactly that waker, on that
//! runtime's own driver, stores the task's key (a `u64` the runtime chose) in its slot instead
//! of a clone of the waker: no reference count taken at the push nor dropped at the
//! completion, no waker call. The drain collects the keys of completed operations
//! ([`Driver::take_ready_tasks`](crate::Driver::take_ready_tasks)) and the runtime queues those
//! tasks itself. Any other waker (a combinator's, another executor's, a task of a runtime on
//! another driver) is cloned into the slot as before, so the key path is an optimisation the
//! semantics never depend on. A key whose task has gone is the runtime's to ignore (its keys
//! carry a generation).

use std::cell::Cell;
use std::task::Waker;

/// The task being polled on this thread, as its runtime described it.
#[derive(Clone, Copy)]
struct Current {
    /// The driver the runtime runs on (`Driver::id`), so a key reaches only its own runtime.
    driver: *const (),
    /// The waker the runtime gave the task: its data and vtable pointers.
    data: *const (),
    vtable: *const std::task::RawWakerVTable,
    key: u64,
}

const NONE: Current = Current {
    driver: std::ptr::null(),
    data: std::ptr::null(),
    vtable: std::ptr::null(),
    key: 0,
};

thread_local! {
    /// Plain pointers and integers, no destructor: one load to read.
    static CURRENT_TASK: Cell<Current> = const { Cell::new(NONE) };
}

/// Marks the task a runtime is about to poll; the previous mark comes back when dropped.
#[must_use = "the mark lasts as long as the guard"]
pub struct TaskGuard {
    prev: Current,
}

impl TaskGuard {
    /// The runtime on driver `driver` (its [`Driver::id`](crate::Driver::id)) polls the task
    /// it knows as `key` with `waker`.
    #[inline]
    pub fn enter(driver: *const (), waker: &Waker, key: u64) -> TaskGuard {
        let now = Current {
            driver,
            data: waker.data(),
            vtable: waker.vtable(),
            key,
        };
        TaskGuard {
            prev: CURRENT_TASK.with(|c| c.replace(now)),
        }
    }
}

impl Drop for TaskGuard {
    #[inline]
    fn drop(&mut self) {
        CURRENT_TASK.with(|c| c.set(self.prev));
    }
}

/// The key of the task being polled, if `waker` is the very waker its runtime gave it and that
/// runtime runs on `driver`.
#[inline]
pub(crate) fn key_for(driver: *const (), waker: &Waker) -> Option<u64> {
    let c = CURRENT_TASK.with(|c| c.get());
    (c.driver == driver
        && !driver.is_null()
        && c.data == waker.data()
        && std::ptr::eq(c.vtable, waker.vtable()))
    .then_some(c.key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Nothing;
    impl Wake for Nothing {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn only_the_marked_waker_on_the_marked_driver_has_a_key() {
        let a = Waker::from(Arc::new(Nothing));
        let b = Waker::from(Arc::new(Nothing));
        let (x, y) = (1u8, 2u8);
        let d1 = (&x as *const u8).cast::<()>();
        let d2 = (&y as *const u8).cast::<()>();
        assert_eq!(key_for(d1, &a), None, "no task marked");
        {
            let _g = TaskGuard::enter(d1, &a, 7);
            assert_eq!(key_for(d1, &a), Some(7));
            assert_eq!(
                key_for(d1, &a.clone()),
                Some(7),
                "a clone is the same waker"
            );
            assert_eq!(key_for(d1, &b), None, "another waker");
            assert_eq!(key_for(d2, &a), None, "another driver");
            {
                let _inner = TaskGuard::enter(d1, &b, 9);
                assert_eq!(key_for(d1, &b), Some(9));
                assert_eq!(key_for(d1, &a), None);
            }
            assert_eq!(key_for(d1, &a), Some(7), "the outer mark is back");
        }
        assert_eq!(key_for(d1, &a), None, "unmarked after the guard");
    }
}
