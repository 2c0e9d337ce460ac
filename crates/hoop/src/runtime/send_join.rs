//! `SendJoinHandle`: the output of a task spawned from another thread ([`Handle::spawn`]) or
//! of a blocking call ([`spawn_blocking`]), awaitable from any thread and any executor.
//!
//! [`Handle::spawn`]: super::Handle::spawn
//! [`spawn_blocking`]: super::spawn_blocking

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::join::JoinError;

struct CellState<T> {
    result: Option<Result<T, JoinError>>,
    done: bool,
    /// Who awaits the handle.
    waiter: Option<Waker>,
    /// The task's own waker (remote tasks), so that `abort` can get it polled.
    task: Option<Waker>,
}

/// The state a task (or blocking call) and its `SendJoinHandle` share.
pub(crate) struct JoinCell<T> {
    state: Mutex<CellState<T>>,
    abort: AtomicBool,
}

impl<T> JoinCell<T> {
    pub(crate) fn new() -> Arc<JoinCell<T>> {
        Arc::new(JoinCell {
            state: Mutex::new(CellState {
                result: None,
                done: false,
                waiter: None,
                task: None,
            }),
            abort: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CellState<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the result (the first one wins) and wakes whoever awaits it.
    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        let waiter = {
            let mut s = self.lock();
            if s.done {
                return;
            }
            s.result = Some(r);
            s.done = true;
            s.task = None;
            s.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }

    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst)
    }
}

/// Completes the cell with a cancelled `JoinError` when dropped before it completed: a task
/// or blocking call dropped unrun (runtime shut down, pool refused it) never leaves its handle
/// waiting.
pub(crate) struct CancelOnDrop<T>(pub(crate) Arc<JoinCell<T>>);

impl<T> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        self.0.complete(Err(JoinError::cancelled()));
    }
}

/// Owned permission to wait for the output of a task spawned with [`Handle::spawn`] or a call
/// run by [`spawn_blocking`]. Unlike [`JoinHandle`](super::JoinHandle) (which stays on its
/// runtime's thread), it is `Send + Sync`: await it from any thread, in any executor (another
/// hoop runtime, tokio, `futures::executor::block_on`); its waker is woken from the thread that
/// finishes the work. Dropping it detaches the task.
///
/// It resolves to `Err(JoinError)` if the task panicked, was aborted, or never ran because its
/// runtime shut down first.
///
/// [`Handle::spawn`]: super::Handle::spawn
/// [`spawn_blocking`]: super::spawn_blocking
pub struct SendJoinHandle<T> {
    cell: Arc<JoinCell<T>>,
}

impl<T> SendJoinHandle<T> {
    pub(crate) fn new(cell: Arc<JoinCell<T>>) -> SendJoinHandle<T> {
        SendJoinHandle { cell }
    }

    /// Whether the task finished (with output, panic, abort or shutdown).
    pub fn is_finished(&self) -> bool {
        self.cell.lock().done
    }

    /// Cancels the task: a remote task's future is dropped on its runtime's next tick (which
    /// cancels its operations) and the handle gives a cancelled `JoinError`. A blocking call
    /// that has not started yet is skipped; one already running cannot be interrupted and
    /// runs to its end (its output is then dropped and the handle still says cancelled).
    pub fn abort(&self) {
        self.cell.abort.store(true, Ordering::SeqCst);
        let task = self.cell.lock().task.clone();
        match task {
            Some(w) => w.wake(),
            // A blocking call (no task waker), or a remote task not polled yet (its first poll
            // sees the flag and drops the future): report the cancellation now.
            None => self.cell.complete(Err(JoinError::cancelled())),
        }
    }
}

impl<T> fmt::Debug for SendJoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendJoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> Future for SendJoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.cell.lock();
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                match &mut s.waiter {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// The task a remote spawn becomes on the runtime's thread: runs the user's future, catches a
/// panic, stores the result in the cell; dropped unfinished, it reports cancellation.
pub(crate) struct RemoteTask<F: Future> {
    future: Option<Pin<Box<F>>>,
    cell: Arc<JoinCell<F::Output>>,
    registered: bool,
}

impl<F: Future> RemoteTask<F> {
    pub(crate) fn new(future: F, cell: Arc<JoinCell<F::Output>>) -> RemoteTask<F> {
        RemoteTask {
            future: Some(Box::pin(future)),
            cell,
            registered: false,
        }
    }
}

impl<F: Future> Future for RemoteTask<F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // RemoteTask is Unpin (its future is boxed).
        let this = self.get_mut();
        if !this.registered {
            // A task's waker never changes: register it once, before the abort check below,
            // so an `abort` either sees the waker or is seen by this poll.
            this.registered = true;
            this.cell.lock().task = Some(cx.waker().clone());
        }
        if this.cell.aborted() {
            this.future = None;
            this.cell.complete(Err(JoinError::cancelled()));
            return Poll::Ready(());
        }
        let Some(fut) = this.future.as_mut() else {
            return Poll::Ready(());
        };
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.future = None;
                this.cell.complete(Ok(v));
                Poll::Ready(())
            }
            Err(panic) => {
                this.future = None;
                this.cell.complete(Err(JoinError::panicked(panic)));
                Poll::Ready(())
            }
        }
    }
}

impl<F: Future> Drop for RemoteTask<F> {
    fn drop(&mut self) {
        if self.future.take().is_some() {
            // Dropped unfinished (runtime shutdown, or never started): the future is gone now.
            self.cell.complete(Err(JoinError::cancelled()));
        }
    }
}
