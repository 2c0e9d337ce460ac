//! `JoinHandle`: the output of a spawned task.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Why a task produced no output. `Send + Sync`, and converts into an `io::Error` (kind
/// `Other`, the panic message or "task was cancelled"), so `handle.await?` works in a function
/// returning `io::Result`.
pub struct JoinError {
    /// `None`: cancelled. The payload sits behind a mutex only to make the error `Sync`.
    panic: Option<(
        String,
        std::sync::Mutex<Box<dyn std::any::Any + Send + 'static>>,
    )>,
}

impl JoinError {
    pub(crate) fn cancelled() -> JoinError {
        JoinError { panic: None }
    }

    pub(crate) fn panicked(payload: Box<dyn std::any::Any + Send + 'static>) -> JoinError {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(non-string payload)".into());
        JoinError {
            panic: Some((msg, std::sync::Mutex::new(payload))),
        }
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        self.panic.is_some()
    }

    /// Whether the task was aborted (or its runtime shut down first).
    pub fn is_cancelled(&self) -> bool {
        self.panic.is_none()
    }

    /// The panic payload, to resume the panic with `std::panic::resume_unwind`.
    pub fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        match self.panic {
            Some((_, payload)) => payload.into_inner().unwrap_or_else(|e| e.into_inner()),
            None => Box::new("task was cancelled, not panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.panic {
            None => f.write_str("task was cancelled"),
            Some((msg, _)) => write!(f, "task panicked: {msg}"),
        }
    }
}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> std::io::Error {
        std::io::Error::other(e)
    }
}

impl std::error::Error for JoinError {}

/// The state a task and its handle share.
pub(crate) type Shared<T> = Rc<RefCell<JoinState<T>>>;

pub(crate) struct JoinState<T> {
    result: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
    pub(crate) abort: bool,
    /// The task finished (its result may have been taken since).
    done: bool,
}

/// Owned permission to wait for a spawned task's output. Dropping it detaches the task.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
    abort: Option<Rc<dyn Fn()>>,
}

/// Permission to abort a spawned task without awaiting it (from
/// [`JoinHandle::abort_handle`] or `JoinSet::spawn`). Not `Send`: use it on the task's thread.
#[derive(Clone)]
pub struct AbortHandle {
    abort: Rc<dyn Fn()>,
    finished: Rc<dyn Fn() -> bool>,
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("finished", &(self.finished)())
            .finish()
    }
}

impl AbortHandle {
    /// Cancels the task, as [`JoinHandle::abort`].
    pub fn abort(&self) {
        (self.abort)()
    }

    /// Whether the task finished (with output, panic or abort).
    pub fn is_finished(&self) -> bool {
        (self.finished)()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Whether the task finished (with output, panic or abort).
    pub fn is_finished(&self) -> bool {
        self.state.borrow().done
    }

    /// Whether this handle returned the task's output (`futures::future::FusedFuture`): it
    /// can never be ready again.
    pub(crate) fn returned(&self) -> bool {
        let s = self.state.borrow();
        s.done && s.result.is_none()
    }

    /// Cancels the task: its future is dropped on the runtime's next tick (which cancels its
    /// operations), and awaiting the handle gives a cancelled `JoinError`.
    pub fn abort(&self) {
        if let Some(f) = &self.abort {
            f();
        }
    }

    /// A handle that can abort the task without awaiting it.
    pub fn abort_handle(&self) -> AbortHandle
    where
        T: 'static,
    {
        let state = self.state.clone();
        AbortHandle {
            abort: self.abort.clone().unwrap_or_else(|| Rc::new(|| {})),
            finished: Rc::new(move || state.borrow().done),
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.state.borrow_mut();
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                match &mut s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// The future the executor polls for a spawned task: runs the user's future, catches a panic,
/// and stores the result for the handle.
pub(crate) struct TaskFuture<F: Future> {
    future: Option<Pin<Box<F>>>,
    state: Rc<RefCell<JoinState<F::Output>>>,
}

pub(crate) fn pair<F: Future>(future: F) -> (TaskFuture<F>, Shared<F::Output>) {
    let state = Rc::new(RefCell::new(JoinState {
        result: None,
        waker: None,
        abort: false,
        done: false,
    }));
    (
        TaskFuture {
            future: Some(Box::pin(future)),
            state: state.clone(),
        },
        state,
    )
}

pub(crate) fn handle<T: 'static>(
    state: Rc<RefCell<JoinState<T>>>,
    wake: Box<dyn Fn()>,
) -> JoinHandle<T> {
    let st = state.clone();
    // Marks the task aborted (unless it finished) and wakes it so the executor drops it.
    let abort: Rc<dyn Fn()> = Rc::new(move || {
        if st.borrow().done {
            return;
        }
        st.borrow_mut().abort = true;
        wake();
    });
    JoinHandle {
        state,
        abort: Some(abort),
    }
}

impl<F: Future> TaskFuture<F> {
    fn finish(&mut self, r: Result<F::Output, JoinError>) {
        self.future = None;
        let waker = {
            let mut s = self.state.borrow_mut();
            s.result = Some(r);
            s.done = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<F: Future> Future for TaskFuture<F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // TaskFuture is Unpin (its future is boxed).
        let this = self.get_mut();
        if this.state.borrow().abort {
            // Drop the future first (its operations get cancelled), then report.
            this.future = None;
            this.finish(Err(JoinError::cancelled()));
            return Poll::Ready(());
        }
        let Some(fut) = this.future.as_mut() else {
            return Poll::Ready(());
        };
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.finish(Ok(v));
                Poll::Ready(())
            }
            Err(panic) => {
                this.finish(Err(JoinError::panicked(panic)));
                Poll::Ready(())
            }
        }
    }
}

impl<F: Future> Drop for TaskFuture<F> {
    fn drop(&mut self) {
        if self.future.is_some() {
            // Dropped unfinished (runtime shutdown): drop the future, tell the handle.
            self.future = None;
            let waker = {
                let mut s = self.state.borrow_mut();
                if s.result.is_none() && !s.done {
                    s.result = Some(Err(JoinError::cancelled()));
                }
                s.done = true;
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}
