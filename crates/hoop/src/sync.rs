//! Synchronization that crosses runtimes: a [`CancellationToken`] that any thread can cancel and
//! tasks on any runtime (every thread of a [`run_per_core`](crate::run_per_core)) can await.
//!
//! For channels, mutexes and notifications use `tokio::sync` or `futures::channel`: they need
//! no tokio runtime and work on hoop's (tests in `tests/sync.rs` cover mpsc, oneshot, `Notify`
//! and `Mutex`, across tasks and across `run_per_core` threads).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Wakers registered from any thread, each under a key its future keeps (and removes on drop,
/// so the set never grows with futures that were dropped).
#[derive(Debug, Default)]
pub(crate) struct WakerSet {
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    /// Keys not in use (their slot is `None` and belongs to no future).
    free: Vec<usize>,
}

impl WakerSet {
    pub(crate) const fn new() -> WakerSet {
        WakerSet {
            slots: Mutex::new(Slots {
                wakers: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding the lock cannot leave the slots inconsistent: every update is
        // a single assignment or push.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `waker` under `key` (allocating a key on first use).
    pub(crate) fn register(&self, key: &mut Option<usize>, waker: &Waker) {
        let mut s = self.lock();
        match *key {
            Some(k) => match &mut s.wakers[k] {
                Some(w) if w.will_wake(waker) => {}
                slot => *slot = Some(waker.clone()),
            },
            None => {
                let k = match s.free.pop() {
                    Some(k) => {
                        s.wakers[k] = Some(waker.clone());
                        k
                    }
                    None => {
                        s.wakers.push(Some(waker.clone()));
                        s.wakers.len() - 1
                    }
                };
                *key = Some(k);
            }
        }
    }

    /// Forgets `key`'s waker and frees the key.
    pub(crate) fn remove(&self, key: &mut Option<usize>) {
        if let Some(k) = key.take() {
            let mut s = self.lock();
            s.wakers[k] = None;
            s.free.push(k);
        }
    }

    /// Wakes every registered waker once (outside the lock). The keys stay allocated: a future
    /// polled again registers anew under its key.
    pub(crate) fn wake_all(&self) {
        let wakers: Vec<Waker> = self
            .lock()
            .wakers
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
    }
}

/// A token that any thread can cancel and that tasks on any hoop runtime can await: the stop
/// signal of a multi-runtime program (each [`run_per_core`](crate::run_per_core) thread awaits
/// [`cancelled`](Self::cancelled), the thread that sees Ctrl-C calls [`cancel`](Self::cancel)).
///
/// `Clone` gives another handle to the same token; `Send + Sync`. A wake from another thread
/// notifies the owning runtime's ring, so a task waiting on a sleeping runtime is woken at once.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let stop = hoop::sync::CancellationToken::new();
/// let for_threads = stop.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_millis(100));
///     stop.cancel();
/// });
/// hoop::run_per_core(2, move |_| {
///     let stop = for_threads.clone();
///     async move { stop.cancelled().await }
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancellationToken {
    inner: Arc<TokenInner>,
}

#[derive(Debug, Default)]
struct TokenInner {
    cancelled: AtomicBool,
    wakers: WakerSet,
}

impl CancellationToken {
    /// A token not yet cancelled.
    pub fn new() -> CancellationToken {
        CancellationToken::default()
    }

    /// Cancels the token and wakes every task awaiting it, on every runtime. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
        self.inner.wakers.wake_all();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Completes once the token is cancelled (at once if it is). Cancel-safe: dropping it
    /// unregisters it.
    pub fn cancelled(&self) -> WaitForCancellation<'_> {
        WaitForCancellation {
            token: self,
            key: None,
            done: false,
        }
    }

    /// Like [`cancelled`](Self::cancelled), owning a handle to the token (for `'static`
    /// futures).
    pub fn cancelled_owned(self) -> WaitForCancellationOwned {
        WaitForCancellationOwned {
            token: self,
            key: None,
            done: false,
        }
    }

    fn poll_cancelled(&self, key: &mut Option<usize>, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_cancelled() {
            self.inner.wakers.remove(key);
            return Poll::Ready(());
        }
        self.inner.wakers.register(key, cx.waker());
        // Checked again after registering: a cancel in between woke the old set.
        if self.is_cancelled() {
            self.inner.wakers.remove(key);
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The future of [`CancellationToken::cancelled`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct WaitForCancellation<'a> {
    token: &'a CancellationToken,
    key: Option<usize>,
    /// It returned `Ready` (`FusedFuture::is_terminated`, in `crate::select`).
    pub(crate) done: bool,
}

impl Future for WaitForCancellation<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let poll = this.token.poll_cancelled(&mut this.key, cx);
        this.done = poll.is_ready();
        poll
    }
}

impl Drop for WaitForCancellation<'_> {
    fn drop(&mut self) {
        self.token.inner.wakers.remove(&mut self.key);
    }
}

/// The future of [`CancellationToken::cancelled_owned`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct WaitForCancellationOwned {
    token: CancellationToken,
    key: Option<usize>,
    /// It returned `Ready` (`FusedFuture::is_terminated`, in `crate::select`).
    pub(crate) done: bool,
}

impl Future for WaitForCancellationOwned {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let poll = this.token.poll_cancelled(&mut this.key, cx);
        this.done = poll.is_ready();
        poll
    }
}

impl Drop for WaitForCancellationOwned {
    fn drop(&mut self) {
        self.token.inner.wakers.remove(&mut self.key);
    }
}
