//! Spawning on the current thread's runtime: the program's tasks, and hoop's own (detached
//! writers, write pushers, the signal reader), which `task_count` leaves out.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::task::Poll;

use super::context::{Inner, CONTEXT};
use super::join::{self, JoinHandle};
use super::task::{with_local_queue, Header, Task, TaskId};

/// Spawns a task on the current thread's runtime. The future need not be `Send`.
///
/// # Panics
/// When called outside a hoop runtime.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let inner = CONTEXT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!("hoop::spawn must be called from inside a hoop runtime (Runtime::block_on)")
    });
    spawn_on(&inner, future).1
}

/// Spawns `future` on `inner`'s runtime (current on this thread); returns its id too.
fn spawn_on<F>(inner: &Inner, future: F) -> (TaskId, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: 'static,
{
    let (task_future, state) = join::pair(future);
    let id = inner.tasks.borrow_mut().vacant();
    let (header, waker) = Header::waker(id, inner.remote.clone());
    let abort_waker = waker.clone();
    inner.tasks.borrow_mut().fill(
        id,
        Task {
            future: RefCell::new(Box::pin(task_future)),
            header: header.clone(),
            waker,
        },
    );
    // Schedule the first poll.
    header.mark_scheduled();
    with_local_queue(|l| l.queue.borrow_mut().push_back(id));
    (
        id,
        join::handle(state, Box::new(move || abort_waker.wake_by_ref())),
    )
}

/// Spawns a detached writer (a hoop task, left out of [`task_count`]) that finishes a dropped
/// value's write-behind; `block_on`'s end and the shutdown wait for it. `false` (the future
/// dropped unpolled) outside a runtime.
pub(crate) fn spawn_writer(future: impl Future<Output = ()> + 'static) -> bool {
    let Some(inner) = CONTEXT.with(|c| c.borrow().clone()) else {
        return false;
    };
    let counted = Counted::new(&inner);
    let (id, _detached) = spawn_on(&inner, async move {
        let _counted = counted;
        future.await
    });
    let w = &inner.writers;
    let len = {
        let mut keys = w.keys.borrow_mut();
        keys.insert(id.key());
        keys.len()
    };
    if len > 2 * w.pruned_at.get().max(32) {
        w.prune(&inner.tasks.borrow());
    }
    true
}

/// Spawns one of hoop's own tasks (left out of [`task_count`], not waited for by `block_on`'s
/// end): a socket's write pusher (`poll_io::push`). `false` (the future dropped unpolled)
/// outside a runtime or once it shut down.
pub(crate) fn spawn_pusher(future: impl Future<Output = ()> + 'static) -> bool {
    let Some(inner) = CONTEXT.with(|c| c.borrow().clone()) else {
        return false;
    };
    if inner.driver.is_shut_down() {
        return false;
    }
    let counted = Counted::new(&inner);
    let (_, _detached) = spawn_on(&inner, async move {
        let _counted = counted;
        future.await
    });
    true
}

/// Counts one of hoop's own tasks while its future exists (until it completes or is dropped):
/// [`task_count`] leaves them out.
struct Counted(Rc<std::cell::Cell<usize>>);

impl Counted {
    fn new(inner: &Inner) -> Counted {
        let c = inner.internal_tasks.clone();
        c.set(c.get() + 1);
        Counted(c)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Spawns one of hoop's own tasks: like [`spawn`], but left out of [`task_count`].
pub(crate) fn spawn_internal<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let counted = CONTEXT.with(|c| c.borrow().as_ref().map(|i| Counted::new(i)));
    spawn(async move {
        let _counted = counted;
        future.await
    })
}

/// Yields once to the runtime, letting other ready tasks run.
///
/// # Cancel safety
///
/// This function is cancel safe.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}
