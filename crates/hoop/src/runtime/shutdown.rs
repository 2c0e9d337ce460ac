//! The runtime's end: the program's tasks dropped, the detached writers finished, the ring
//! closed, and the hooks that hear how it went.

use hoop_driver::ShutdownReport;

use super::context::{self, CONTEXT};
use super::executor::Runtime;
use super::poll;

impl Runtime {
    /// Shuts the runtime down and says what that took: every task is dropped (their in-flight
    /// operations are cancelled and their data moves into the driver's slots); the writes of
    /// files and streams dropped with write-behind pending (by the program, or with the tasks)
    /// are waited for, up to the shutdown timeout, and those that did not finish are counted
    /// in [`ShutdownReport::unfinished_writes`] and cancelled; then everything still in flight
    /// is cancelled and reaped — or, after the shutdown timeout, its memory is leaked on
    /// purpose — then the ring is closed. Dropping the runtime does the same.
    pub fn shutdown(self) -> ShutdownReport {
        self.shutdown_inner()
    }

    fn shutdown_inner(&self) -> ShutdownReport {
        if self.inner.driver.is_shut_down() {
            return ShutdownReport::default();
        }
        let _guard = context::enter(&self.inner);
        // No more remote spawns; those queued never ran: dropping them resolves their handles
        // (cancelled). The blocking pool takes no new call.
        drop(self.inner.remote.close());
        self.inner.remote.blocking.shut();
        let writers = &self.inner.writers;
        // The program's tasks first: files and streams they hold with writes pending become
        // detached writers as they drop, which then run until done or the timeout (DESIGN.md,
        // "Writes accepted are written").
        for _ in 0..64 {
            let drained = self
                .inner
                .tasks
                .borrow_mut()
                .drain_where(|id| !writers.contains(id));
            if drained.is_empty() {
                break;
            }
            for (id, task) in drained {
                drop(task);
                self.inner.tasks.borrow_mut().release(id);
            }
        }
        poll::finish_writers(&self.inner);
        // Then the writers that did not finish (each counts itself as unfinished and closes
        // its fd), and anything left.
        for _ in 0..64 {
            let drained = self.inner.tasks.borrow_mut().drain();
            if drained.is_empty() {
                break;
            }
            for (id, task) in drained {
                drop(task);
                self.inner.tasks.borrow_mut().release(id);
            }
        }
        writers.keys.borrow_mut().clear();
        let mut report = self.inner.driver.shutdown();
        report.unfinished_writes = writers.unfinished.get();
        report.unfinished_write_bytes = writers.unfinished_bytes.get();
        report.failed_writes = writers.failed.get();
        report.failed_write_bytes = writers.failed_bytes.get();
        let hooks = std::mem::take(&mut *self.inner.on_shutdown.borrow_mut());
        for hook in hooks {
            hook(report);
        }
        report
    }
}

impl Drop for Runtime {
    /// See [`Runtime::shutdown`].
    fn drop(&mut self) {
        let _ = self.shutdown_inner();
    }
}

/// Registers `hook` to be called with the [`ShutdownReport`] when the current thread's runtime
/// shuts down (dropped, [`Runtime::shutdown`], the end of `#[hoop::main]` or of a
/// [`run_per_core`] thread): what was cancelled, and what was still in flight or leaked. Hooks
/// run in the order registered, on the runtime's thread, after the ring is closed.
///
/// ```
/// #[hoop::main]
/// async fn main() {
///     hoop::runtime::on_shutdown(|report| {
///         if report.leaked > 0 {
///             eprintln!("shutdown leaked {} operations", report.leaked);
///         }
///     });
/// }
/// ```
///
/// # Panics
/// Outside a hoop runtime.
///
/// [`run_per_core`]: super::run_per_core
pub fn on_shutdown(hook: impl FnOnce(ShutdownReport) + 'static) {
    let inner = CONTEXT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!("hoop::runtime::on_shutdown must be called from inside a hoop runtime")
    });
    inner.on_shutdown.borrow_mut().push(Box::new(hook));
}
