//! The `Send` future of one operation on a shared ring, and [`Keep`], which ties a value (the
//! fd an operation names) to the operation until its final CQE.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::ring::Ring;
use crate::driver::Engine;
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::OpCode;
use crate::sys::epoll::EpollOp;
use crate::sys::uring::{PushError, UringOp};

/// An operation that keeps `keep` alive until its final CQE: an `Arc` of the fd the SQE names,
/// so that the fd is closed only after the kernel is done with every SQE naming it (a reused
/// fd number never gets stale I/O), whichever thread drops the last handle.
#[derive(Debug)]
pub struct Keep<T, K> {
    op: T,
    keep: K,
}

impl<T, K> Keep<T, K> {
    /// `op`, holding `keep` until its completion has been handled.
    pub fn new(op: T, keep: K) -> Keep<T, K> {
        Keep { op, keep }
    }
}

impl<T: OpCode, K: 'static> OpCode for Keep<T, K> {
    type Output = T::Output;
    fn complete(self, c: Completion) -> T::Output {
        let out = self.op.complete(c);
        drop(self.keep);
        out
    }
}

// SAFETY: the SQE is the inner operation's, whose pointers are its own (its contract); `keep`
// is never named by the SQE.
unsafe impl<T: UringOp, K: 'static> UringOp for Keep<T, K> {
    fn create_entry(&mut self) -> io_uring::squeue::Entry {
        self.op.create_entry()
    }
    fn link_timeout(&self) -> Option<*const io_uring::types::Timespec> {
        self.op.link_timeout()
    }
}

// SAFETY: the call is the inner operation's, whose pointers are its own (its contract); `keep`
// is never named by the call.
unsafe impl<T: EpollOp, K: 'static> EpollOp for Keep<T, K> {
    fn create_call(&mut self) -> crate::sys::epoll::Call {
        self.op.create_call()
    }
}

enum State<T> {
    /// Not in the ring yet (optionally holding a ticket of the ring's room FIFO).
    Idle {
        data: T,
        ring: Arc<Ring>,
        ticket: Option<u64>,
    },
    /// In the ring: slot `user_data` will hold the result.
    InFlight {
        data: T,
        user_data: u64,
        ring: Arc<Ring>,
    },
    Done,
}

/// The future of one operation on a shared ring: `Send + 'static`, awaited from any executor.
///
/// The first poll puts the SQE in the ring's SQ and wakes the task at once instead of
/// submitting: every task that is ready runs first, so SQEs pushed by many tasks (or by the
/// futures of one `join_all`) go to the kernel in one `io_uring_enter`, made by the next poll
/// that finds SQEs queued. Each poll also drains the CQ, so a thread that submits reaps its own
/// completions without waiting for the reaper. Dropping the future before its result cancels
/// the operation in the kernel; its data (buffer, fd) is kept until the final CQE.
#[must_use = "an operation does nothing unless awaited"]
pub struct SharedOp<T: OpCode> {
    state: State<T>,
    /// Submit on the first poll instead of after the other ready tasks ran.
    eager: bool,
    /// Pushed without submitting and without waking the task: the thread's next park submits
    /// (see [`submit_deferred`](super::submit_deferred)).
    deferred: bool,
    /// Times the kernel cancelled the operation without its owner asking (see `poll`).
    resubmits: u8,
}

impl<T: OpCode> std::fmt::Debug for SharedOp<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedOp")
    }
}

impl<T: OpCode> SharedOp<T> {
    pub(crate) fn new(data: T, ring: Arc<Ring>) -> SharedOp<T> {
        SharedOp {
            resubmits: 0,
            eager: false,
            deferred: false,
            state: State::Idle {
                data,
                ring,
                ticket: None,
            },
        }
    }
}

impl<T: OpCode> SharedOp<T> {
    /// Whether the operation is in the kernel's hands (see [`Op::is_in_flight`]).
    ///
    /// [`Op::is_in_flight`]: crate::Op::is_in_flight
    pub fn is_in_flight(&self) -> bool {
        matches!(self.state, State::InFlight { .. })
    }

    /// Submits on the first poll (one `io_uring_enter` for this operation alone) instead of
    /// pushing the SQE and coming back after the executor's other ready tasks pushed theirs.
    /// For an operation that is alone in its task's poll, as a poll-based read or write is
    /// (`AsyncRead`/`AsyncWrite`): there, waiting for a batch costs a second poll of the
    /// whole task (hyper's connection, say) and batches nothing.
    pub fn eager(mut self) -> Self {
        self.eager = true;
        self
    }

    /// Pushes the SQE on the first poll and leaves the submitting to this thread's next park
    /// ([`submit_deferred`](super::submit_deferred), which an executor calls before its
    /// worker sleeps: tokio's `on_thread_park`), so that every operation the thread's tasks
    /// pushed in one turn of its loop goes to the kernel in one `io_uring_enter`, with no
    /// second poll of any task. Until then a poll only looks at the slot. Only for threads
    /// whose park calls it ([`deferring_here`](super::deferring_here)).
    pub fn deferred(mut self) -> Self {
        self.deferred = true;
        self
    }
}

// The data's kernel-visible memory is on the heap (UringOp's contract): moving is harmless.
impl<T: OpCode> Unpin for SharedOp<T> {}

enum Pushed {
    /// In slot `.0`; with `eager`, already submitted, and `.1` is the slot's state.
    Slot(u64, Option<Poll<Completion>>),
    Wait,
    Fail(i32),
}

impl<T: OpCode + UringOp + EpollOp + Send> Future for SharedOp<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.get_mut();
        match &mut this.state {
            State::Idle { data, ring, ticket } => {
                let ring = ring.clone();
                let eager = this.eager;
                let deferred = this.deferred && super::ring::deferring_here();
                let pushed = ring.with(|e: &mut Engine| {
                    let Ok(granted) = e.table_mut().check_ticket(*ticket, cx.waker()) else {
                        return Pushed::Wait;
                    };
                    *ticket = None;
                    match e.push(data, granted, Lifecycle::Waiting(cx.waker().clone())) {
                        Ok(user_data) if eager => {
                            // Submitted and looked at under the same lock.
                            let _ = e.submit_and_reap();
                            let ready = e.table_mut().poll_slot(user_data, cx.waker());
                            Pushed::Slot(user_data, Some(ready))
                        }
                        Ok(user_data) if deferred => {
                            // Not submitted; but an engine may finish an operation in its push
                            // (the epoll engine tries a socket call at once): look.
                            let ready = e.table_mut().poll_slot(user_data, cx.waker());
                            Pushed::Slot(user_data, Some(ready))
                        }
                        Ok(user_data) => Pushed::Slot(user_data, None),
                        Err(PushError::NoRoom) => {
                            *ticket = Some(e.table_mut().wait_room(cx.waker()));
                            Pushed::Wait
                        }
                        Err(PushError::Poisoned) => Pushed::Fail(-libc::EBADR),
                        Err(PushError::ShutDown) => Pushed::Fail(-libc::ECANCELED),
                    }
                });
                match pushed {
                    Pushed::Slot(user_data, ready) => {
                        if deferred && matches!(ready, Some(Poll::Pending)) {
                            super::ring::defer_submit(&ring);
                            super::ring::count_deferred_push();
                        }
                        if let State::Idle { data, .. } =
                            std::mem::replace(&mut this.state, State::Done)
                        {
                            this.state = State::InFlight {
                                data,
                                user_data,
                                ring,
                            };
                        }
                        match ready {
                            Some(Poll::Pending) if deferred => Poll::Pending,
                            Some(ready) => this.settle(ready, cx),
                            None => {
                                // Come back to submit, after the other ready tasks pushed
                                // theirs.
                                cx.waker().wake_by_ref();
                                Poll::Pending
                            }
                        }
                    }
                    Pushed::Wait => Poll::Pending,
                    Pushed::Fail(res) => Poll::Ready(
                        take_done(&mut this.state).complete(Completion { res, flags: 0 }),
                    ),
                }
            }
            State::InFlight {
                user_data, ring, ..
            } => {
                // A deferred operation polled on a thread whose park submits leaves the
                // submitting to that park (the thread that pushed it may be another, or may
                // not park soon); anywhere else it submits now.
                let defer = this.deferred && super::ring::deferring_here();
                if defer {
                    super::ring::defer_submit(ring);
                }
                let ready = ring.with(|e: &mut Engine| {
                    // An enter error other than those `enter` handles leaves the SQEs queued:
                    // the next poll, or the reaper, tries again.
                    if !defer {
                        let _ = e.submit_and_reap();
                    }
                    e.table_mut().poll_slot(*user_data, cx.waker())
                });
                this.settle(ready, cx)
            }
            State::Done => Poll::Pending,
        }
    }
}

impl<T: OpCode + UringOp + EpollOp + Send> SharedOp<T> {
    /// What a poll of the slot found, for an operation in flight.
    fn settle(&mut self, ready: Poll<Completion>, cx: &mut Context<'_>) -> Poll<T::Output> {
        match ready {
            // `ECANCELED` while the owner still polls: nobody here cancelled it (a dropped
            // future is never polled; a shutdown refuses the push). The kernel cancels the
            // requests a thread submitted when that thread exits, and a submit takes every SQE
            // queued on the ring, other threads' too: the request never ran, so it goes in
            // again (found under fault injection, by
            // `shared.rs::tcp_echo_across_threads`). (An operation with a linked deadline is
            // cancelled by its deadline: that `ECANCELED` is its result.)
            Poll::Ready(c)
                if crate::op::resubmit_after(
                    &c,
                    matches!(&self.state, State::InFlight { data, .. }
                        if data.link_timeout().is_some()),
                    &mut self.resubmits,
                ) =>
            {
                if let State::InFlight { data, ring, .. } =
                    std::mem::replace(&mut self.state, State::Done)
                {
                    self.state = State::Idle {
                        data,
                        ring,
                        ticket: None,
                    };
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Ready(c) => Poll::Ready(take_done(&mut self.state).complete(c)),
            Poll::Pending => {
                // Left in the kernel: let the executor's reactor wait for it if it can.
                if let State::InFlight { ring, .. } = &self.state {
                    ring.offer_to_reactor();
                }
                Poll::Pending
            }
        }
    }
}

fn take_done<T>(state: &mut State<T>) -> T {
    match std::mem::replace(state, State::Done) {
        State::Idle { data, .. } | State::InFlight { data, .. } => data,
        State::Done => unreachable!("take_done on a finished op"),
    }
}

impl<T: OpCode> Drop for SharedOp<T> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Idle {
                ticket: Some(ticket),
                ring,
                ..
            } => ring.with(|e| e.table_mut().leave_room(ticket)),
            State::InFlight {
                data,
                user_data,
                ring,
            } => {
                let finished = ring.with(|e| {
                    let finished = e.drop_slot(user_data, Box::new(data));
                    // The cancel (and the SQE itself, if it was still queued) go to the
                    // kernel now: drop = cancel in the kernel.
                    let _ = e.submit_and_reap();
                    finished
                });
                if let Some((data, c)) = finished {
                    data.finish(c);
                }
            }
            _ => {}
        }
    }
}
