//! The runtime running on this thread: its shared state, the thread-local that names it, and
//! what the rest of the crate asks of it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hoop_driver::{Counters, Driver, DriverKind, ShutdownReport};

use super::task::{LocalQueueGuard, Remote, Tasks};
use super::timers;
use super::writers::Writers;

/// A hook [`on_shutdown`](super::on_shutdown) registered.
pub(super) type ShutdownHook = Box<dyn FnOnce(ShutdownReport)>;

/// A runtime's state, shared by its [`Runtime`](super::Runtime) and the thread it runs on.
pub(super) struct Inner {
    pub(super) id: u64,
    pub(super) driver: Driver,
    pub(super) tasks: RefCell<Tasks>,
    pub(super) remote: Arc<Remote>,
    pub(super) timers: RefCell<timers::Timers>,
    /// hoop's own tasks alive (the signal reader), which [`task_count`] leaves out.
    pub(super) internal_tasks: Rc<std::cell::Cell<usize>>,
    /// What [`on_shutdown`](super::on_shutdown) registered, called with the report at shutdown.
    pub(super) on_shutdown: RefCell<Vec<ShutdownHook>>,
    /// Tasks finishing the write-behind of dropped files and streams (bytes a write accepted
    /// are written: DESIGN.md, "Writes accepted are written").
    pub(super) writers: Rc<Writers>,
    /// How long `block_on`'s end and the shutdown wait for `writers` (the builder's
    /// shutdown timeout).
    pub(super) writers_timeout: Duration,
}

thread_local! {
    pub(super) static CONTEXT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

/// While it lives, a runtime is this thread's (with its local run queue and driver); the one
/// before comes back when it drops.
pub(super) struct ContextGuard {
    prev: Option<Rc<Inner>>,
    pub(super) queue: LocalQueueGuard,
    _driver: hoop_driver::EnterGuard,
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CONTEXT.with(|c| *c.borrow_mut() = prev);
    }
}

/// Makes `inner`'s runtime this thread's until the guard drops.
pub(super) fn enter(inner: &Rc<Inner>) -> ContextGuard {
    let prev = CONTEXT.with(|c| c.borrow_mut().replace(inner.clone()));
    ContextGuard {
        prev,
        queue: LocalQueueGuard::enter(inner.id),
        _driver: inner.driver.enter(),
    }
}

/// Runs `f` on the timers of the runtime running on this thread, with its id; `None` outside
/// a runtime.
pub(crate) fn with_timers<R>(f: impl FnOnce(&mut timers::Timers, u64) -> R) -> Option<R> {
    CONTEXT.with(|c| {
        let c = c.borrow();
        let inner = c.as_ref()?;
        let mut t = inner.timers.borrow_mut();
        Some(f(&mut t, inner.id))
    })
}

/// The detached writers of the runtime running on this thread (`None` outside `block_on` and
/// shutdown, or once its driver shut down).
pub(crate) fn writers() -> Option<Rc<Writers>> {
    CONTEXT.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|i| !i.driver.is_shut_down())
            .map(|i| i.writers.clone())
    })
}

/// The id of the current thread's runtime, if there is one (ids are never reused).
pub(crate) fn current_id() -> Option<u64> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.id))
}

/// What other threads reach of the current thread's runtime, if there is one.
pub(super) fn current_remote() -> Option<Arc<Remote>> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.remote.clone()))
}

/// The driver of the current thread's runtime, if there is one.
pub fn current_driver() -> Option<DriverKind> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.driver.kind()))
}

/// The counters of the current thread's runtime, if there is one.
pub fn current_counters() -> Option<Counters> {
    CONTEXT.with(|c| c.borrow().as_ref().map(|i| i.driver.counters()))
}

/// Number of the program's tasks alive on the current thread's runtime (0 outside one). hoop's
/// own tasks (the reader of [`signal`](crate::signal) listeners) are not counted, so a
/// `while task_count() > 0` drain ends once the program's tasks have.
pub fn task_count() -> usize {
    CONTEXT.with(|c| {
        c.borrow().as_ref().map_or(0, |i| {
            i.tasks
                .borrow()
                .len()
                .saturating_sub(i.internal_tasks.get())
        })
    })
}
