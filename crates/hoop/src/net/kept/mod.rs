//! What a receive whose future was dropped leaves for the next call: cancel safety as tokio
//! documents it for `accept`, stream reads and datagram receives.
//!
//! A completion runtime cannot take back a receive it gave the kernel: a cancel races with the
//! completion, and what the kernel completed first is lost unless somebody keeps it. So a
//! receive future dropped while its operation is in flight does not cancel it: the operation
//! is *parked* on its socket, still in flight, and the next receive on that socket adopts it
//! (polls it before starting an operation of its own). What it brings (an accepted
//! connection, bytes, a datagram and its source, or an error) is served to that call as if the
//! call's own operation had received it, copied into the call's buffer; bytes of a stream that
//! do not fit stay for the call after. No call starts an operation while a parked one is in
//! flight, so a stream's bytes arrive in order, and adopting costs no system call (no cancel,
//! no new submission). Parked operations are cancelled only when the socket is dropped, when
//! nobody is left to receive.
//!
//! The poll-based `AsyncRead` of a stream serves what is kept here before its own next read
//! (its bytes read ahead first: they came before). The other way round holds only within each
//! kind: an `AsyncRead` read abandoned in flight keeps its bytes for the next `AsyncRead`
//! read, and an owned-buffer `read` started meanwhile does not wait for it (the two may then
//! interleave): on one stream, do not drop reads of both kinds in flight.
//!
//! Parked operations belong to the runtime of the thread that started them. A socket moved to
//! another thread with operations parked does not touch them there: calls on the new thread
//! start their own operations (the parked ones are cancelled when the socket is dropped on
//! their thread; dropped elsewhere, they are sent home and that runtime's driver cancels and
//! frees them on its thread, as it does the `AsyncRead` state's operations).

mod keep;
#[cfg(all(loom, test))]
mod model;
mod outcome;
mod sync;

pub(crate) use keep::{peek_kept, Keep, Local, Shared};
pub(crate) use outcome::{keep_accepted, Keepable, Outcome};

use self::sync::{AtomicBool, Mutex, MutexGuard, Ordering};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;

use hoop_driver::op::MultishotCode;
use hoop_driver::sys::{epoll::EpollOp, uring::UringOp};
use hoop_driver::{MultiOp, Op};

/// A parked operation or multishot stream, its output type erased.
pub(super) trait Parked {
    /// `Ready` with what the operation brought (`None`: nothing worth keeping): its result, or
    /// a stream's next item.
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>>;

    /// Whether it brings nothing more (an operation after its result, a stream after its
    /// end).
    fn ended(&self) -> bool;
}

pub(super) struct ParkedOp<T: Keepable>(pub(super) Op<T>, pub(super) bool);

impl<T: Keepable> Parked for ParkedOp<T> {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let out = std::task::ready!(Pin::new(&mut self.0).poll(cx));
        self.1 = true;
        Poll::Ready(T::keep(out))
    }

    fn ended(&self) -> bool {
        self.1
    }
}

/// A multishot stream dropped while armed: cancelled, it yields what the kernel delivered
/// before the cancel ran, each item kept as `keep` says.
struct ParkedStream<T: MultishotCode> {
    stream: MultiOp<T>,
    keep: fn(T::Item) -> Option<Outcome>,
}

impl<T: MultishotCode + UringOp + EpollOp> Parked for ParkedStream<T> {
    fn poll_parked(&mut self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        match std::task::ready!(self.stream.poll_next(cx)) {
            Some(item) => Poll::Ready((self.keep)(item)),
            None => Poll::Ready(None),
        }
    }

    fn ended(&self) -> bool {
        self.stream.is_done()
    }
}

/// What a socket keeps for its next receive: operations parked in flight and outcomes they
/// brought that no call took yet.
struct Inner {
    /// The thread whose runtime runs the parked operations.
    owner: ThreadId,
    /// That runtime's driver's home: a clear on another thread sends the parked operations
    /// there to be dropped (`None` outside a runtime).
    home: Option<hoop_driver::Home>,
    parked: Vec<Box<dyn Parked>>,
    ready: VecDeque<Outcome>,
    /// Calls waiting for a parked operation: woken when an outcome is taken or a parked
    /// operation added, so that each looks again (an operation wakes only its last poller).
    waiters: Vec<Waker>,
}

// SAFETY: in a thread-bound `Kept`, the parked operations (`Op`s holding the runtime's `Rc`s)
// are polled only on `owner` (`poll_take` checks the thread) and dropped only there (`clear`
// sends them home from any other thread, where `owner`'s driver drops them); a `Kept::shared` holds only `Send` operations (`Shared`
// parks `SharedOp`s). Everything else in `Inner` is `Send`.
unsafe impl Send for Inner {}

impl Inner {
    fn is_empty(&self) -> bool {
        self.parked.is_empty() && self.ready.is_empty()
    }

    fn wake_waiters(&mut self) {
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }
}

/// The kept state of one socket (see the module docs). Empty, it is a flag and an empty lock:
/// a receive checks the flag and takes no lock.
pub(crate) struct Kept {
    any: AtomicBool,
    /// Whether parked operations belong to one thread's runtime (`Op`s), or may be polled and
    /// dropped anywhere (the shared rings' `Send` operations).
    thread_bound: bool,
    inner: Mutex<Option<Box<Inner>>>,
}

impl Default for Kept {
    /// The kept state of a socket of the thread-per-core runtime.
    fn default() -> Kept {
        Kept {
            any: AtomicBool::new(false),
            thread_bound: true,
            inner: Mutex::new(None),
        }
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("any", &self.any.load(Ordering::Relaxed))
            .finish()
    }
}

impl Kept {
    /// The kept state of a socket on shared rings, whose operations are `Send`.
    pub(crate) fn shared() -> Kept {
        Kept {
            any: AtomicBool::new(false),
            thread_bound: false,
            inner: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Box<Inner>>> {
        // A panic while the lock was held (none of this code panics) leaves consistent data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ready(Some(_))`: an outcome for this call; `Ready(None)`: nothing kept here, the call
    /// starts its own operation; `Pending`: a parked operation is in flight and will bring
    /// this call's result (the call is woken then).
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        if !self.any.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        let mut guard = self.lock();
        let Some(inner) = guard.as_mut() else {
            self.any.store(false, Ordering::Release);
            return Poll::Ready(None);
        };
        let here = !self.thread_bound || crate::poll_io::this_thread() == inner.owner;
        if here {
            // Every parked operation that ended brings its outcome, in the order they were
            // parked.
            let mut i = 0;
            while i < inner.parked.len() {
                match inner.parked[i].poll_parked(cx) {
                    Poll::Ready(got) => {
                        inner.ready.extend(got);
                        if inner.parked[i].ended() {
                            inner.parked.remove(i);
                        }
                    }
                    Poll::Pending if inner.parked[i].ended() => {
                        inner.parked.remove(i);
                    }
                    Poll::Pending => i += 1,
                }
            }
        }
        let taken = inner.ready.pop_front();
        let result = match taken {
            Some(got) => {
                // Others waiting may find another outcome, or nothing parked left to wait for.
                inner.wake_waiters();
                Poll::Ready(Some(got))
            }
            None if here && !inner.parked.is_empty() => {
                if !inner.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    inner.waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
            // Nothing ready; parked operations of another thread's runtime are not this
            // call's to wait for.
            None => Poll::Ready(None),
        };
        if inner.is_empty() && inner.waiters.is_empty() {
            *guard = None;
            self.any.store(false, Ordering::Release);
        }
        result
    }

    /// Puts back what did not fit a call's buffer, to be served first.
    pub(crate) fn put_back(&self, rest: Outcome) {
        let mut guard = self.lock();
        let inner = guard.get_or_insert_with(|| new_inner(crate::poll_io::this_thread()));
        inner.ready.push_front(rest);
        self.any.store(true, Ordering::Release);
    }

    /// Parks `op` (in flight, its future dropped). Parked operations of another thread's
    /// runtime already here: `op` is dropped (cancelled) instead, as before hoop kept results,
    /// since one socket's parked operations must belong to one runtime.
    pub(super) fn park(&self, op: Box<dyn Parked>) {
        let here = crate::poll_io::this_thread();
        let mut guard = self.lock();
        let inner = guard.get_or_insert_with(|| new_inner(here));
        if self.thread_bound && inner.owner != here {
            if !inner.parked.is_empty() {
                drop(guard);
                drop(op);
                return;
            }
            inner.owner = here;
            inner.home = home_here();
        }
        inner.parked.push(op);
        // A call already waiting polls the new operation too.
        inner.wake_waiters();
        self.any.store(true, Ordering::Release);
    }

    /// Parks a multishot stream dropped while armed (see [`ParkedStream`]), after asking the
    /// kernel to end it; a stream not armed is dropped.
    pub(crate) fn park_stream<T: MultishotCode + UringOp + EpollOp>(
        &self,
        mut stream: MultiOp<T>,
        keep: fn(T::Item) -> Option<Outcome>,
    ) {
        // A stream whose cancel did not reach the driver is dropped (cancelled as before)
        // rather than parked: it would never end, and the next accept would wait on it.
        if stream.cancel() && !stream.is_done() {
            self.park(Box::new(ParkedStream { stream, keep }));
        }
    }

    /// Whether nothing is kept (no parked operation, no outcome waiting): one atomic load.
    #[cfg(feature = "tokio")]
    pub(crate) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// A call that waited is gone: the others look again (the one a parked operation would
    /// have woken may have been this one).
    pub(super) fn leave(&self) {
        if let Some(inner) = self.lock().as_mut() {
            inner.wake_waiters();
        }
    }
}

fn new_inner(owner: ThreadId) -> Box<Inner> {
    Box::new(Inner {
        owner,
        home: home_here(),
        parked: Vec::new(),
        ready: VecDeque::new(),
        waiters: Vec::new(),
    })
}

/// The home of this thread's driver, if a runtime runs here.
fn home_here() -> Option<hoop_driver::Home> {
    hoop_driver::Driver::current().map(|d| d.home())
}

impl Kept {
    /// Drops everything kept: parked operations are cancelled (on their runtime's thread; from
    /// another they are sent home, where that runtime's driver drops them), kept connections
    /// closed. The
    /// socket calls it before queueing its close, so the cancels go ahead of the close.
    pub(crate) fn clear(&self) {
        let taken = self.lock().take();
        self.any.store(false, Ordering::Release);
        if let Some(mut inner) = taken {
            if self.thread_bound && crate::poll_io::this_thread() != inner.owner {
                // Not the runtime's thread: its `Rc`s must not be touched here. They go home,
                // to be dropped (cancelled) by that runtime's driver on its thread.
                let parked = std::mem::take(&mut inner.parked);
                crate::poll_io::send_home(inner.home.as_ref(), parked);
            }
            inner.wake_waiters();
        }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.clear();
    }
}
