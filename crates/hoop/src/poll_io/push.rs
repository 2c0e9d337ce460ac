//! A socket's write direction that pushes itself (DESIGN.md, "The send path").
//!
//! Bytes a socket's `poll_write` staged behind a send in flight (and the rest of a short send)
//! used to go out only when the value was next polled: a split write half that wrote without
//! flushing and then awaited its read half left them unsent, maybe while the peer waited for
//! them to reply. Now, once a socket write is in flight, the write direction ([`WriteDir`]: the
//! send in flight, the bytes staged behind it, an error) moves into a small task of the
//! runtime, the pusher, shared with the value through an `Rc<RefCell<..>>`: the pusher alone
//! polls the send; when it completes the pusher sends what was staged meanwhile (inline first
//! where the path says so), and so on until nothing is in flight or staged, then ends. The
//! value's `poll_write` stages into the shared state (or, staging full, registers its waker and
//! returns `Pending`, having taken nothing); `poll_flush`/`poll_close` drive the shared state
//! themselves while the pusher runs ([`drive_in_place`]: the send polled with a waker of both
//! tasks, so its completion ends the wait without a hop through the pusher, and the pusher
//! still sees it if the wait is given up), then take the state back (and report its error).
//! The pusher wakes a value's task waiting on it (only one whose call returned `Pending`)
//! when it moves staged bytes into flight (room) and when it ends.
//! A later write in flight spawns a new pusher. No borrow is held across an await or a wake.
//!
//! The pusher is one of hoop's own tasks (`runtime::spawn_pusher`: left out of `task_count`,
//! and not waited for by `block_on`'s end: a value that is still alive holds its writes as
//! before). A value dropped while its pusher runs takes its write direction back, the send in
//! flight included ([`take_back`]), and finishes it in its detached writer (`finish_then`) as
//! before, which never spawns a pusher: the detached writers alone run at `block_on`'s end and
//! at shutdown. A pusher dropped unfinished (the shutdown drops tasks) hands the write
//! direction back to the value the same way, whose drop then finishes it.
//! `hoop::shared`'s types have no pusher (`Ops::pushes` is false for them).

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::ops::{Handle, Kind, Ops, Shared, WriteDir};
/// The value is dropped without waiting for its pusher: the write in flight is cancelled, the
/// staged bytes dropped, and the pusher woken to end.
pub(super) fn abandon<O: Ops>(shared: &Shared<O>) {
    let pusher = {
        let Ok(mut st) = shared.try_borrow_mut() else {
            return;
        };
        st.running = false;
        let w = std::mem::replace(&mut st.w, WriteDir::new());
        st.waiter = None;
        let pusher = st.pusher.take();
        drop(st);
        // The cancel (the operation's drop) happens outside the borrow.
        drop(w);
        pusher
    };
    if let Some(p) = pusher {
        p.wake();
    }
}

/// The task that drives a socket's writes until nothing is in flight or staged.
pub(crate) struct Pusher<O: Ops> {
    shared: Shared<O>,
    gone: Arc<AtomicBool>,
    fd: RawFd,
    /// How it sends (the runtime's operations, `Local`: the only ones that push).
    ops: O,
}

impl<O: Ops> Pusher<O> {
    pub(super) fn new(handle: &Handle<O>, fd: RawFd, ops: O) -> Pusher<O> {
        Pusher {
            shared: handle.shared.clone(),
            gone: handle.gone.clone(),
            fd,
            ops,
        }
    }
}

impl<O: Ops + Unpin> Future for Pusher<O> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut st = this.shared.borrow_mut();
        if !st.running {
            return Poll::Ready(());
        }
        if this.gone.load(Ordering::Acquire) {
            // The value was dropped on another thread (or its half reunited there): nothing
            // more goes to this fd; the write in flight is cancelled, the staged bytes dropped.
            st.running = false;
            st.pusher = None;
            st.waiter = None;
            let w = std::mem::replace(&mut st.w, WriteDir::new());
            drop(st);
            drop(w);
            return Poll::Ready(());
        }
        match &st.pusher {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.pusher = Some(cx.waker().clone()),
        }
        let staged = st.w.write_staging.len();
        // A value's task waiting for the end (a flush) is woken by the send's completion too,
        // and drives the state itself (`drive_in_place`): no hop through this task.
        let waker = both(cx.waker(), st.waiter.as_ref());
        let mut cx2 = Context::from_waker(&waker);
        let r = st.w.drive(&this.ops, this.fd, Kind::Socket, &mut cx2);
        // Room made (staged bytes moved into flight) or the end: the value's waiter goes on.
        let progress = r.is_ready() || st.w.write_staging.len() < staged;
        if r.is_ready() {
            st.running = false;
            st.pusher = None;
        }
        let waiter = if progress { st.waiter.take() } else { None };
        drop(st);
        if let Some(w) = waiter {
            w.wake();
        }
        r
    }
}

impl<O: Ops> Drop for Pusher<O> {
    fn drop(&mut self) {
        // Dropped unfinished (the runtime shuts down, or went away): the write direction,
        // its write in flight included, goes back to the value, whose next poll drives it and
        // whose drop finishes it (`finish_then`) as before pushers existed.
        let waiter = {
            let Ok(mut st) = self.shared.try_borrow_mut() else {
                return;
            };
            if !st.running {
                return;
            }
            st.running = false;
            st.pusher = None;
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

/// Wakes two tasks: a send's completion reaches the pusher and a value's task waiting for it.
struct Both(Waker, Waker);

impl std::task::Wake for Both {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_by_ref();
        self.1.wake_by_ref();
    }
}

/// `a`, or a waker of both `a` and `b`.
fn both(a: &Waker, b: Option<&Waker>) -> Waker {
    match b {
        Some(b) if !b.will_wake(a) => Waker::from(Arc::new(Both(a.clone(), b.clone()))),
        _ => a.clone(),
    }
}

/// A value's task waiting for its pusher to end (a flush, a close) drives the shared state
/// itself, with a waker of both tasks, so that the send's completion ends the wait without a
/// hop through the pusher (and the pusher still sees it if the wait is given up). `Ready` once
/// nothing is in flight: the pusher is then ended (woken to finish) and `w` (empty) gets the
/// state back; `Pending` with `cx` registered as the waiter.
pub(super) fn drive_in_place<O: Ops>(
    shared: &Shared<O>,
    w: &mut WriteDir<O>,
    ops: &O,
    fd: RawFd,
    kind: Kind,
    cx: &mut Context<'_>,
) -> Poll<()> {
    let pusher = {
        let mut st = shared.borrow_mut();
        if st.running {
            let waker = match &st.pusher {
                Some(p) => both(cx.waker(), Some(p)),
                // Not polled yet: it will be, and will then wake this waiter too.
                None => cx.waker().clone(),
            };
            let mut cx2 = Context::from_waker(&waker);
            if st.w.drive(ops, fd, kind, &mut cx2).is_pending() {
                st.set_waiter(cx);
                return Poll::Pending;
            }
            st.running = false;
        }
        std::mem::swap(w, &mut st.w);
        st.waiter = None;
        st.pusher.take()
    };
    if let Some(p) = pusher {
        p.wake();
    }
    Poll::Ready(())
}

/// Takes the write direction of `shared` back into `w` (empty) at once, the write in flight
/// included, and ends the pusher: the value's detached writer (`finish_then`) drives it from
/// now on.
pub(super) fn take_back<O: Ops>(shared: &Shared<O>, w: &mut WriteDir<O>) {
    let pusher = {
        let mut st = shared.borrow_mut();
        std::mem::swap(w, &mut st.w);
        st.running = false;
        st.waiter = None;
        st.pusher.take()
    };
    if let Some(p) = pusher {
        p.wake();
    }
}
