//! The future of one operation: pushed on its first poll (or queued for room), resolved by the
//! final completion, and handed to the driver with its data when dropped in flight.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::Driver;
use crate::config::DriverKind;
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::OpCode;
use crate::sys::epoll::EpollOp;
use crate::sys::uring::{PushError, UringOp};

/// Where an [`Op`] stands. The operation's data stays in `Op::data` whatever the phase (no
/// move per transition); the phase says who else knows of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not yet in the ring.
    Idle,
    /// Waiting in the driver's room FIFO with this ticket.
    Room(u64),
    /// In the ring; the slot `Op::user_data` will hold the result.
    InFlight,
    /// Completed: the data was handed to `OpCode::complete`.
    Done,
}

/// The future of one operation: pushes it on first poll (or waits for room), resolves to its
/// output, and on drop hands its data to the driver until the final CQE.
///
/// The fast path: the first poll pushes the SQE and stores the task's waker in the
/// slot; the CQE handler moves the waker out and leaves the result in the slot; the second poll
/// takes the result and frees the slot in one lookup. The data is never moved between phases.
#[must_use = "an operation does nothing unless awaited"]
pub struct Op<T: OpCode> {
    /// The operation's data: `Some` until `complete` took it (or the driver did, on drop).
    data: Option<T>,
    /// The driver the operation is pushed on (or waits for room on).
    driver: Option<Driver>,
    /// The slot's `user_data` while `InFlight`.
    user_data: u64,
    phase: Phase,
    /// Times the operation ended with an `ECANCELED` nobody asked for and went in again.
    resubmits: u8,
}

impl<T: OpCode> std::fmt::Debug for Op<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Op")
    }
}

impl<T: OpCode> Op<T> {
    /// Whether the operation is in the kernel's hands (pushed, final completion not yet
    /// taken): dropping it then cancels it, and whatever it completes with is lost to the
    /// caller. A caller that must not lose that result (a receive whose future was dropped)
    /// keeps the `Op` alive instead and polls it later.
    #[inline]
    pub fn is_in_flight(&self) -> bool {
        matches!(self.phase, Phase::InFlight)
    }

    /// An operation, started when first polled inside a runtime.
    #[inline]
    pub fn new(data: T) -> Op<T> {
        Op {
            data: Some(data),
            driver: None,
            user_data: 0,
            phase: Phase::Idle,
            resubmits: 0,
        }
    }

    /// Hands the data and `c` to the operation's completion handler.
    #[inline]
    fn finish(&mut self, c: Completion) -> Poll<T::Output> {
        self.phase = Phase::Done;
        match self.data.take() {
            Some(data) => Poll::Ready(data.complete(c)),
            // Unreachable: the data leaves only in `finish` (phase `Done`) or in `drop`.
            None => Poll::Pending,
        }
    }
}

impl<T: OpCode + UringOp + EpollOp> Op<T> {
    /// The final completion `c` of the operation in flight: its output, or, for an
    /// `ECANCELED` nobody asked for, the operation again ([`crate::op::resubmit_after`]).
    #[inline]
    fn settle(&mut self, c: Completion, cx: &mut Context<'_>) -> Poll<T::Output> {
        if c.res != -libc::ECANCELED {
            return self.finish(c);
        }
        let deadline = self
            .data
            .as_ref()
            .is_some_and(|d| d.link_timeout().is_some());
        if crate::op::resubmit_after(&c, deadline, &mut self.resubmits) {
            self.phase = Phase::Idle;
            return self.start(cx);
        }
        self.finish(c)
    }
}

// Op never hands out pinned references to its data: the data's kernel-visible memory is on the
// heap (UringOp's contract), so moving the Op is harmless.
impl<T: OpCode> Unpin for Op<T> {}

impl<T: OpCode + UringOp + EpollOp> Op<T> {
    /// First poll (or a poll while waiting for room): push the SQE, or queue for room.
    #[inline]
    fn start(&mut self, cx: &mut Context<'_>) -> Poll<T::Output> {
        if self.driver.is_none() {
            match Driver::current() {
                Some(d) => self.driver = Some(d),
                None => {
                    return self.finish(Completion {
                        res: -libc::ENXIO,
                        flags: 0,
                    })
                }
            }
        }
        let Some(driver) = self.driver.as_ref() else {
            return Poll::Pending;
        };
        let Some(data) = self.data.as_mut() else {
            return Poll::Pending;
        };
        // An operation this ring has no opcode for, made here (`UringOp::without_sqe`).
        if let Some(res) = data.without_sqe(driver) {
            return self.finish(Completion { res, flags: 0 });
        }
        let pushed = {
            let mut d = driver.shared.engine.borrow_mut();
            let held = match self.phase {
                Phase::Room(t) => Some(t),
                _ => None,
            };
            let Ok(granted) = d.table_mut().check_ticket(held, cx.waker()) else {
                return Poll::Pending;
            };
            self.phase = Phase::Idle;
            // A task of this driver's runtime is woken by its key, with no waker kept.
            let state =
                match crate::task_key::key_for(Rc::as_ptr(&driver.shared).cast(), cx.waker()) {
                    Some(key) => Lifecycle::WaitingTask(key),
                    None => Lifecycle::Waiting(cx.waker().clone()),
                };
            match d.push(data, granted, state) {
                Ok(user_data) => Ok(user_data),
                Err(PushError::NoRoom) => {
                    self.phase = Phase::Room(d.table_mut().wait_room(cx.waker()));
                    return Poll::Pending;
                }
                Err(PushError::Poisoned) => Err(-libc::EBADR),
                Err(PushError::ShutDown) => Err(-libc::ECANCELED),
            }
        };
        match pushed {
            Ok(user_data) => {
                self.user_data = user_data;
                self.phase = Phase::InFlight;
                if driver.shared.kind == DriverKind::Epoll {
                    // The epoll driver may have completed the operation inline.
                    let ready = driver
                        .shared
                        .engine
                        .borrow_mut()
                        .table_mut()
                        .poll_slot(user_data, cx.waker());
                    if let Poll::Ready(c) = ready {
                        return self.settle(c, cx);
                    }
                }
                // The slot holds the waker.
                Poll::Pending
            }
            Err(res) => self.finish(Completion { res, flags: 0 }),
        }
    }
}

impl<T: OpCode + UringOp + EpollOp> Future for Op<T> {
    type Output = T::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self.get_mut();
        match this.phase {
            Phase::InFlight => {
                let c = match &this.driver {
                    Some(driver) => {
                        let mut d = driver.shared.engine.borrow_mut();
                        match d.table_mut().poll_slot(this.user_data, cx.waker()) {
                            Poll::Ready(c) => c,
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    // Unreachable: an operation in flight keeps its driver.
                    None => Completion {
                        res: -libc::EBADR,
                        flags: 0,
                    },
                };
                this.settle(c, cx)
            }
            Phase::Idle | Phase::Room(_) => this.start(cx),
            Phase::Done => panic!("hoop Op polled after completion"),
        }
    }
}

impl<T: OpCode> Drop for Op<T> {
    #[inline]
    fn drop(&mut self) {
        // The common case, a finished operation, costs one comparison where the future is
        // dropped; the others are out of line.
        if matches!(self.phase, Phase::Idle | Phase::Done) {
            return;
        }
        self.drop_unfinished();
    }
}

impl<T: OpCode> Op<T> {
    #[cold]
    #[inline(never)]
    fn drop_unfinished(&mut self) {
        match self.phase {
            Phase::Room(ticket) => {
                if let Some(driver) = &self.driver {
                    if let Ok(mut d) = driver.shared.engine.try_borrow_mut() {
                        d.table_mut().leave_room(ticket);
                    }
                }
            }
            Phase::InFlight => {
                let (Some(driver), Some(data)) = (self.driver.as_ref(), self.data.take()) else {
                    return;
                };
                let finished = match driver.shared.engine.try_borrow_mut() {
                    Ok(mut d) => d.drop_slot(self.user_data, Box::new(data)),
                    Err(_) => {
                        // Dropped from inside the driver (cannot happen by construction): the
                        // kernel may still own the memory, so leak it rather than free it.
                        std::mem::forget(data);
                        None
                    }
                };
                if let Some((data, c)) = finished {
                    data.finish(c);
                }
            }
            Phase::Idle | Phase::Done => {}
        }
    }
}
