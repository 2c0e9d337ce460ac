//! `Handle`: reaching a thread-per-core runtime from other threads.
//!
//! [`Handle::spawn`] queues a `Send` future on the runtime's remote queue and wakes its thread
//! (a MSG_RING message into its ring where the kernel has `IORING_REGISTER_SEND_MSG_RING`,
//! 6.13+; the driver's eventfd otherwise); the runtime's thread makes it a task on its next
//! turn. The task then lives on that thread like any other task.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::blocking::BlockingPool;
use super::send_join::{JoinCell, RemoteTask, SendJoinHandle};
use super::task::Remote;

/// A handle to a [`Runtime`](super::Runtime) that other threads use to spawn tasks on it.
/// `Clone + Send + Sync`; get one with [`Runtime::handle`](super::Runtime::handle) or, from
/// inside a runtime, [`Handle::current`].
///
/// What happens to a spawn depends on the runtime's state:
/// - running (`block_on` on its thread): the task starts on the runtime's next turn;
/// - built but not running: the task waits in the queue and starts at the next `block_on`;
/// - shut down or dropped: the future is dropped at once, on the calling thread, and the
///   handle resolves to a cancelled [`JoinError`](super::JoinError). Tasks queued or running
///   when the runtime shuts down are dropped with it and resolve the same way.
#[derive(Clone)]
pub struct Handle {
    remote: Arc<Remote>,
}

/// How other threads wake a runtime's thread (see [`Handle::wake_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakePath {
    /// A CQE posted into its ring with `IORING_OP_MSG_RING` (`IORING_REGISTER_SEND_MSG_RING`,
    /// Linux 6.13+).
    MsgRing,
    /// A write to the driver's eventfd (which the ring or epoll watches).
    EventFd,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("runtime", &self.remote.runtime_id)
            .field("wake_path", &self.wake_path())
            .finish()
    }
}

impl Handle {
    pub(crate) fn new(remote: Arc<Remote>) -> Handle {
        Handle { remote }
    }

    /// The handle of the runtime running on this thread.
    ///
    /// # Panics
    /// Outside a hoop runtime (see [`Handle::try_current`]).
    pub fn current() -> Handle {
        Handle::try_current().unwrap_or_else(|| {
            panic!("hoop::Handle::current must be called from inside a hoop runtime")
        })
    }

    /// The handle of the runtime running on this thread, if any.
    pub fn try_current() -> Option<Handle> {
        super::context::current_remote().map(Handle::new)
    }

    /// Spawns `future` on the runtime's thread, from any thread. See the type's docs for what
    /// happens when the runtime is not running or gone.
    pub fn spawn<F>(&self, future: F) -> SendJoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let cell = JoinCell::new();
        let task = RemoteTask::new(future, cell.clone());
        if super::context::current_id() == Some(self.remote.runtime_id) {
            // On the runtime's own thread: a plain local spawn, no queue, no wake-up.
            drop(super::spawn::spawn(task));
        } else if let Err(task) = self.remote.push_spawn(Box::pin(task)) {
            drop(task); // the runtime is gone: the handle resolves cancelled
        }
        SendJoinHandle::new(cell)
    }

    /// Runs `f` on the runtime's blocking pool (see [`spawn_blocking`](super::spawn_blocking)).
    /// After the runtime shut down, `f` is dropped unrun and the handle resolves cancelled.
    pub fn spawn_blocking<F, R>(&self, f: F) -> SendJoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.remote.blocking.spawn(f)
    }

    /// How this runtime's thread is woken from other threads: [`WakePath::MsgRing`] on
    /// io_uring where the kernel posts a message without a source ring (6.13+) and
    /// `Builder::msg_ring_wake` is on (the default), else [`WakePath::EventFd`].
    pub fn wake_path(&self) -> WakePath {
        if self.remote.uses_msg_ring() {
            WakePath::MsgRing
        } else {
            WakePath::EventFd
        }
    }

    /// Threads the runtime's blocking pool runs now (idle ones included).
    pub fn blocking_threads(&self) -> usize {
        self.remote.blocking.threads()
    }
}

/// Runs the blocking call `f` on a pool thread and returns a handle to await its output
/// without blocking the caller's thread: inside a hoop runtime, on that runtime's pool
/// (`Builder::max_blocking_threads`); elsewhere, on a process-wide pool with the default
/// bound. A panic in `f` becomes a [`JoinError`](super::JoinError) (`is_panic()`); the runtime
/// goes on.
///
/// ```no_run
/// # hoop::Runtime::new().unwrap().block_on(async {
/// let n = hoop::spawn_blocking(|| std::fs::read_dir(".").map(|d| d.count())).await??;
/// # Ok::<_, std::io::Error>(())
/// # });
/// ```
pub fn spawn_blocking<F, R>(f: F) -> SendJoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match super::context::current_remote() {
        Some(remote) => remote.blocking.spawn(f),
        None => BlockingPool::global().spawn(f),
    }
}
