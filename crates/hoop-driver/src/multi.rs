//! The stream of a multi-CQE operation (multishot accept and recv; zero-copy send).

use std::task::{Context, Poll};

use crate::driver::Driver;
use crate::lifecycle::{Completion, Lifecycle, Stream};
use crate::op::MultishotCode;
use crate::sys::epoll::EpollOp;
use crate::sys::uring::{PushError, UringOp};

enum State {
    /// Not armed (optionally waiting for room with a ticket).
    Idle { ticket: Option<(u64, Driver)> },
    /// Armed: CQEs queue in slot `user_data`.
    Armed { user_data: u64, driver: Driver },
    /// Ended for good.
    Done,
}

/// A multishot operation as a stream: each CQE becomes an item; when the kernel ends the
/// operation (a CQE without `IORING_CQE_F_MORE`) it is armed again if the operation says the
/// user still wants data. On the epoll driver each arm is one single-shot call
/// (the fallback of a multishot op is a loop of single-shot ops). Dropping the stream cancels
/// the operation; CQEs that arrive afterwards go to the operation's orphan handler (accepted fds
/// closed, buffers returned to their ring).
#[must_use = "a stream does nothing unless polled"]
pub struct MultiOp<T: MultishotCode> {
    data: Option<T>,
    state: State,
    /// Arms in a row that ended with an `ECANCELED` nobody asked for and were armed again.
    resubmits: u8,
    /// [`cancel`](MultiOp::cancel) was called: the stream ends at its final CQE.
    cancelled: bool,
}

impl<T: MultishotCode> std::fmt::Debug for MultiOp<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MultiOp")
    }
}

// The data's kernel-visible memory is on the heap (UringOp's contract), so moving is harmless.
impl<T: MultishotCode> Unpin for MultiOp<T> {}

fn failed(res: i32) -> Completion {
    Completion { res, flags: 0 }
}

impl<T: MultishotCode + UringOp + EpollOp> MultiOp<T> {
    /// A stream, armed when first polled inside a runtime.
    pub fn new(data: T) -> MultiOp<T> {
        MultiOp {
            data: Some(data),
            state: State::Idle { ticket: None },
            resubmits: 0,
            cancelled: false,
        }
    }

    /// Moves the stream out, leaving `self` ended and inert (for an owner that keeps an armed
    /// stream alive past its own drop).
    pub fn take(&mut self) -> MultiOp<T> {
        MultiOp {
            data: self.data.take(),
            state: std::mem::replace(&mut self.state, State::Done),
            resubmits: self.resubmits,
            cancelled: self.cancelled,
        }
    }

    /// Asks the kernel to end the operation while the stream still takes what it brings: the
    /// items already on their way (connections the kernel accepted, data it received before
    /// the cancel ran) are still yielded, then the stream ends; it is never armed again. A
    /// stream not armed ends at once. Unlike dropping the stream, nothing delivered is lost.
    /// Returns whether the stream will end; `false` (the driver could not take the cancel
    /// now) leaves it armed, to be dropped instead.
    pub fn cancel(&mut self) -> bool {
        match &self.state {
            State::Armed { user_data, driver } => {
                // Only a cancel that reached the driver ends the stream; one that could not
                // (the driver busy: not reachable from a task) leaves it as it was, so that the
                // caller drops it instead of waiting on a stream that would never end.
                let Ok(mut d) = driver.engine().try_borrow_mut() else {
                    return false;
                };
                d.request_cancel(*user_data);
                self.cancelled = true;
                true
            }
            State::Idle { .. } => {
                // Leaves any room queue (as a drop would) and ends.
                if let State::Idle {
                    ticket: Some((ticket, driver)),
                } = std::mem::replace(&mut self.state, State::Done)
                {
                    if let Ok(mut d) = driver.engine().try_borrow_mut() {
                        d.table_mut().leave_room(ticket);
                    }
                }
                self.state = State::Done;
                self.cancelled = true;
                true
            }
            State::Done => true,
        }
    }

    /// The operation's data (for example, to read its configuration).
    pub fn get_ref(&self) -> Option<&T> {
        self.data.as_ref()
    }

    /// Whether the stream ended for good (the last `poll_next` returned `None` or it can never
    /// yield again).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done) && !self.data.as_ref().is_some_and(|d| d.has_queued())
    }

    /// Gives the operation's data back once the stream is done (its final CQE reaped), for
    /// operations that own a buffer the caller wants back (zero-copy send). `Err(self)` while
    /// the operation may still be in the kernel.
    pub fn into_data(mut self) -> Result<T, Self> {
        if matches!(self.state, State::Done | State::Idle { ticket: None }) {
            if let Some(data) = self.data.take() {
                return Ok(data);
            }
        }
        Err(self)
    }

    /// The next item, or `None` once the stream ended.
    pub async fn next(&mut self) -> Option<T::Item> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next item.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T::Item>> {
        loop {
            let Some(data) = self.data.as_mut() else {
                return Poll::Ready(None);
            };
            // The rest of what the last CQE brought comes first.
            if let Some(item) = data.queued_item() {
                return Poll::Ready(Some(item));
            }
            match &mut self.state {
                State::Done => return Poll::Ready(None),
                State::Idle { ticket } => {
                    if data.poll_ready_to_arm(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let driver = match ticket {
                        Some((_, d)) => Some(d.clone()),
                        None => Driver::current(),
                    };
                    let Some(driver) = driver else {
                        self.state = State::Done;
                        return Poll::Ready(data.item(failed(-libc::ENXIO)));
                    };
                    let pushed = {
                        let mut d = driver.engine().borrow_mut();
                        let held = ticket.as_ref().map(|(t, _)| *t);
                        let Ok(granted) = d.table_mut().check_ticket(held, cx.waker()) else {
                            return Poll::Pending;
                        };
                        *ticket = None;
                        let stream = Stream::new(Some(cx.waker())).uncapped(data.waits_for_peer());
                        let state = Lifecycle::Streaming(stream);
                        match d.push(data, granted, state) {
                            Ok(user_data) => Ok(user_data),
                            Err(PushError::NoRoom) => {
                                *ticket =
                                    Some((d.table_mut().wait_room(cx.waker()), driver.clone()));
                                return Poll::Pending;
                            }
                            Err(PushError::Poisoned) => Err(-libc::EBADR),
                            Err(PushError::ShutDown) => Err(-libc::ECANCELED),
                        }
                    };
                    match pushed {
                        Ok(user_data) => self.state = State::Armed { user_data, driver },
                        Err(res) => {
                            self.state = State::Done;
                            return Poll::Ready(data.item(failed(res)));
                        }
                    }
                }
                State::Armed { user_data, driver } => {
                    let polled = driver
                        .engine()
                        .borrow_mut()
                        .table_mut()
                        .poll_item(*user_data, cx.waker());
                    let (c, last) = match polled {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(x) => x,
                    };
                    if c.res >= 0 {
                        self.resubmits = 0;
                    }
                    let item = data.item(c);
                    // An arm cancelled by nobody here ran nothing: armed again, its error item
                    // (which gave any buffer back) dropped (`op::resubmit_after`).
                    if last
                        && !self.cancelled
                        && crate::op::resubmit_after(&c, false, &mut self.resubmits)
                    {
                        self.state = State::Idle { ticket: None };
                        continue;
                    }
                    if last {
                        self.state = if !self.cancelled && data.rearm(&c) {
                            State::Idle { ticket: None }
                        } else {
                            State::Done
                        };
                    }
                    if let Some(item) = item {
                        return Poll::Ready(Some(item));
                    }
                }
            }
        }
    }
}

impl<T: MultishotCode> Drop for MultiOp<T> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Idle {
                ticket: Some((ticket, driver)),
            } => {
                if let Ok(mut d) = driver.engine().try_borrow_mut() {
                    d.table_mut().leave_room(ticket);
                }
            }
            State::Armed { user_data, driver } => {
                let Some(data) = self.data.take() else {
                    return;
                };
                // Queued items go to the orphan handler; what they own is released once the
                // borrow below is over (the section ends after it).
                let _section = crate::deferred::Section::enter();
                match driver.engine().try_borrow_mut() {
                    Ok(mut d) => d.drop_stream(user_data, Box::new(data)),
                    // Dropped from inside the driver (cannot happen by construction): the kernel
                    // may still own memory, so leak rather than free.
                    Err(_) => std::mem::forget(data),
                }
            }
            _ => {}
        }
    }
}
