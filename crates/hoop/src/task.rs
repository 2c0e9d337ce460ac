//! Tasks: [`spawn`], [`JoinHandle`], [`spawn_blocking`] with its [`SendJoinHandle`], and
//! [`JoinSet`], a set of tasks whose outputs come back in the order they finish.

use std::fmt;
use std::future::Future;
use std::task::{Context, Poll};

use futures::stream::{FuturesUnordered, StreamExt};

pub use crate::runtime::{
    spawn, spawn_blocking, yield_now, AbortHandle, JoinError, JoinHandle, SendJoinHandle,
};

/// A set of tasks spawned on the current thread's runtime, awaited in the order they finish
/// (tokio's `JoinSet`). Dropping the set aborts the tasks still in it.
///
/// ```no_run
/// # hoop::Runtime::new().unwrap().block_on(async {
/// let mut set = hoop::task::JoinSet::new();
/// for i in 0..10u64 {
///     set.spawn(async move {
///         hoop::time::sleep(std::time::Duration::from_millis(10 - i)).await;
///         i
///     });
/// }
/// let mut sum = 0;
/// while let Some(res) = set.join_next().await {
///     sum += res?;
/// }
/// assert_eq!(sum, 45);
/// # Ok::<(), hoop::task::JoinError>(())
/// # });
/// ```
pub struct JoinSet<T> {
    tasks: FuturesUnordered<JoinHandle<T>>,
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

impl<T: 'static> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

impl<T: 'static> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            tasks: FuturesUnordered::new(),
        }
    }

    /// Spawns `task` on the current thread's runtime (see [`spawn`]) and adds it to the set;
    /// the returned handle aborts it without taking it out of the set.
    ///
    /// # Panics
    /// Outside a hoop runtime, as [`spawn`] does.
    pub fn spawn<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
    {
        let handle = spawn(task);
        let abort = handle.abort_handle();
        self.tasks.push(handle);
        abort
    }

    /// The output of the next task to finish (`Err` if it panicked or was aborted), or `None`
    /// when the set is empty. Cancel-safe: dropping the future loses no output.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a task that finished while a dropped call waited stays in the
    /// set, and the next call returns its result.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.tasks.next().await
    }

    /// The output of a task that already finished, if any, without waiting.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match self.tasks.poll_next_unpin(&mut cx) {
            Poll::Ready(r) => r,
            Poll::Pending => None,
        }
    }

    /// Polls for the next finished task (for hand-written futures); `Ready(None)` when empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.tasks.poll_next_unpin(cx)
    }

    /// Waits for every task and returns their outputs in the order they finished.
    ///
    /// # Panics
    /// If a task panicked, the panic is resumed here (as tokio does); an aborted task is
    /// skipped.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe: it takes the set, so dropping it drops the set and the
    /// results not yet collected.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(res) = self.join_next().await {
            match res {
                Ok(v) => out.push(v),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => {}
            }
        }
        out
    }

    /// Aborts every task in the set (their outputs become cancelled `JoinError`s unless they
    /// had finished); they stay in the set until joined.
    pub fn abort_all(&mut self) {
        for h in self.tasks.iter() {
            h.abort();
        }
    }

    /// Aborts every task and waits until all of them are gone; the set is then empty.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: calling it again after a dropped call aborts and waits for what
    /// is left.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }
}

impl<T> JoinSet<T> {
    /// Number of tasks in the set (finished ones not yet joined included).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        for h in self.tasks.iter() {
            h.abort();
        }
    }
}
