//! Chains: two operations where the second runs only if the first succeeded (write then fsync,
//! send then close), linked in the kernel with `IOSQE_IO_LINK`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::driver::{Driver, Engine};
use crate::lifecycle::{Completion, Lifecycle};
use crate::op::OpCode;
use crate::sys::epoll::EpollOp;
use crate::sys::uring::{PushError, UringOp};

enum Part<T: OpCode> {
    /// Not started (or, on epoll, waiting for the first part).
    Ready(T),
    /// In the driver, slot `user_data`.
    InFlight(T, u64),
    /// Completed.
    Done(T::Output),
    Gone,
}

impl<T: OpCode> Part<T> {
    fn take_output(&mut self) -> Option<T::Output> {
        match std::mem::replace(self, Part::Gone) {
            Part::Done(o) => Some(o),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// The future of [`link`].
#[must_use = "a chain does nothing unless awaited"]
pub struct Link<A: OpCode, B: OpCode> {
    a: Part<A>,
    b: Part<B>,
    driver: Option<Driver>,
    ticket: Option<u64>,
    /// The first part's raw result, to decide the second's fate on epoll.
    a_res: Option<i32>,
    /// Epoll: times the first part ended with an `ECANCELED` nobody asked for and went in
    /// again (`op::resubmit_after`; on io_uring both parts end together, as the kernel chains
    /// them).
    resubmits: u8,
}

impl<A: OpCode, B: OpCode> std::fmt::Debug for Link<A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Link")
    }
}

impl<A: OpCode, B: OpCode> Unpin for Link<A, B> {}

/// Runs `a`, then `b` only if `a` succeeded (a non-negative result); if `a` fails, `b`
/// completes with `ECANCELED` without running. On io_uring both SQEs are submitted together,
/// linked with `IOSQE_IO_LINK` (one `io_uring_enter`, no wake-up in between); on epoll they
/// run one after the other. Resolves to both outputs.
pub fn link<A, B>(a: A, b: B) -> Link<A, B>
where
    A: OpCode + UringOp + EpollOp,
    B: OpCode + UringOp + EpollOp,
{
    Link {
        a: Part::Ready(a),
        b: Part::Ready(b),
        driver: None,
        ticket: None,
        a_res: None,
        resubmits: 0,
    }
}

fn fail(res: i32) -> Completion {
    Completion { res, flags: 0 }
}

impl<A, B> Future for Link<A, B>
where
    A: OpCode + UringOp + EpollOp,
    B: OpCode + UringOp + EpollOp,
{
    type Output = (A::Output, B::Output);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let driver = match &this.driver {
            Some(d) => d.clone(),
            None => match Driver::current() {
                Some(d) => {
                    this.driver = Some(d.clone());
                    d
                }
                None => {
                    this.finish_unstarted(-libc::ENXIO);
                    return this.ready_or_pending();
                }
            },
        };
        let uring = matches!(&*driver.engine().borrow(), Engine::Uring(_));
        if let (Part::Ready(_), Part::Ready(_)) = (&this.a, &this.b) {
            let started = if uring {
                this.start_both(&driver, cx)
            } else {
                this.start_a(&driver, cx)
            };
            if let Err(res) = started {
                if res == 0 {
                    return Poll::Pending; // waiting for room
                }
                this.finish_unstarted(res);
                return this.ready_or_pending();
            }
        }
        // Poll what is in flight.
        let mut d = driver.engine().borrow_mut();
        if let Part::InFlight(_, ua) = &this.a {
            if let Poll::Ready(c) = d.table_mut().poll_slot(*ua, cx.waker()) {
                if let Part::InFlight(data, _) = std::mem::replace(&mut this.a, Part::Gone) {
                    let deadline = data.link_timeout().is_some();
                    if !uring && crate::op::resubmit_after(&c, deadline, &mut this.resubmits) {
                        // Not run: pushed again by the next poll (the second part waits).
                        this.a = Part::Ready(data);
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    this.a_res = Some(c.res);
                    this.a = Part::Done(data.complete(c));
                }
            }
        }
        if let Part::InFlight(_, ub) = &this.b {
            if let Poll::Ready(c) = d.table_mut().poll_slot(*ub, cx.waker()) {
                if let Part::InFlight(data, _) = std::mem::replace(&mut this.b, Part::Gone) {
                    this.b = Part::Done(data.complete(c));
                }
            }
        }
        drop(d);
        // Epoll: start the second part once the first succeeded.
        if let (Some(res), Part::Ready(_)) = (this.a_res, &this.b) {
            if res < 0 {
                if let Part::Ready(data) = std::mem::replace(&mut this.b, Part::Gone) {
                    this.b = Part::Done(data.complete(fail(-libc::ECANCELED)));
                }
            } else if let Part::Ready(mut data) = std::mem::replace(&mut this.b, Part::Gone) {
                let mut d = driver.engine().borrow_mut();
                let pushed = match this.room(&mut d, cx) {
                    Ok(granted) => {
                        let state = Lifecycle::Waiting(cx.waker().clone());
                        d.push(&mut data, granted, state)
                    }
                    Err(()) => Err(PushError::NoRoom),
                };
                this.b = match pushed {
                    Ok(ub) => Part::InFlight(data, ub),
                    Err(PushError::NoRoom) => {
                        if this.ticket.is_none() {
                            this.ticket = Some(d.table_mut().wait_room(cx.waker()));
                        }
                        Part::Ready(data)
                    }
                    Err(_) => Part::Done(data.complete(fail(-libc::ECANCELED))),
                };
                drop(d);
                if let Part::InFlight(_, ub) = &this.b {
                    let polled = driver
                        .engine()
                        .borrow_mut()
                        .table_mut()
                        .poll_slot(*ub, cx.waker());
                    if let Poll::Ready(c) = polled {
                        if let Part::InFlight(data, _) = std::mem::replace(&mut this.b, Part::Gone)
                        {
                            this.b = Part::Done(data.complete(c));
                        }
                    }
                }
            }
        }
        this.ready_or_pending()
    }
}

impl<A, B> Link<A, B>
where
    A: OpCode + UringOp + EpollOp,
    B: OpCode + UringOp + EpollOp,
{
    /// The room ticket's state: `Ok(granted)` to try a push now, `Err(())` to keep waiting.
    fn room(&mut self, d: &mut Engine, cx: &mut Context<'_>) -> Result<bool, ()> {
        let granted = d.table_mut().check_ticket(self.ticket, cx.waker())?;
        self.ticket = None;
        Ok(granted)
    }

    /// io_uring: both SQEs at once. `Err(0)` means "waiting for room".
    fn start_both(&mut self, driver: &Driver, cx: &mut Context<'_>) -> Result<(), i32> {
        let mut d = driver.engine().borrow_mut();
        let Ok(granted) = self.room(&mut d, cx) else {
            return Err(0);
        };
        let (Part::Ready(a), Part::Ready(b)) = (&mut self.a, &mut self.b) else {
            return Ok(());
        };
        let Engine::Uring(u) = &mut *d else {
            return Ok(());
        };
        let states = (
            Lifecycle::Waiting(cx.waker().clone()),
            Lifecycle::Waiting(cx.waker().clone()),
        );
        match u.push_linked(a.create_entry(), b.create_entry(), granted, states) {
            Ok((ua, ub)) => {
                if let Part::Ready(a) = std::mem::replace(&mut self.a, Part::Gone) {
                    self.a = Part::InFlight(a, ua);
                }
                if let Part::Ready(b) = std::mem::replace(&mut self.b, Part::Gone) {
                    self.b = Part::InFlight(b, ub);
                }
                Ok(())
            }
            Err(PushError::NoRoom) => {
                self.ticket = Some(d.table_mut().wait_room(cx.waker()));
                Err(0)
            }
            Err(PushError::Poisoned) => Err(-libc::EBADR),
            Err(PushError::ShutDown) => Err(-libc::ECANCELED),
        }
    }

    /// Epoll: the first part alone; the second starts when it succeeded.
    fn start_a(&mut self, driver: &Driver, cx: &mut Context<'_>) -> Result<(), i32> {
        let mut d = driver.engine().borrow_mut();
        let Ok(granted) = self.room(&mut d, cx) else {
            return Err(0);
        };
        let Part::Ready(mut a) = std::mem::replace(&mut self.a, Part::Gone) else {
            return Ok(());
        };
        let state = Lifecycle::Waiting(cx.waker().clone());
        let pushed = d.push(&mut a, granted, state);
        match pushed {
            Ok(ua) => {
                self.a = Part::InFlight(a, ua);
                Ok(())
            }
            Err(PushError::NoRoom) => {
                self.a = Part::Ready(a);
                self.ticket = Some(d.table_mut().wait_room(cx.waker()));
                Err(0)
            }
            Err(PushError::Poisoned) => {
                self.a = Part::Ready(a);
                Err(-libc::EBADR)
            }
            Err(PushError::ShutDown) => {
                self.a = Part::Ready(a);
                Err(-libc::ECANCELED)
            }
        }
    }

    /// Neither part could start: the first fails with `res`, the second is cancelled.
    fn finish_unstarted(&mut self, res: i32) {
        if let Part::Ready(a) = std::mem::replace(&mut self.a, Part::Gone) {
            self.a = Part::Done(a.complete(fail(res)));
        }
        if let Part::Ready(b) = std::mem::replace(&mut self.b, Part::Gone) {
            self.b = Part::Done(b.complete(fail(-libc::ECANCELED)));
        }
    }

    fn ready_or_pending(&mut self) -> Poll<(A::Output, B::Output)> {
        if matches!(self.a, Part::Done(_)) && matches!(self.b, Part::Done(_)) {
            if let (Some(a), Some(b)) = (self.a.take_output(), self.b.take_output()) {
                return Poll::Ready((a, b));
            }
        }
        Poll::Pending
    }
}

impl<A: OpCode, B: OpCode> Drop for Link<A, B> {
    fn drop(&mut self) {
        let Some(driver) = self.driver.take() else {
            return;
        };
        let Ok(mut d) = driver.engine().try_borrow_mut() else {
            // Cannot happen by construction; leak rather than free memory the kernel may own.
            std::mem::forget(std::mem::replace(&mut self.a, Part::Gone));
            std::mem::forget(std::mem::replace(&mut self.b, Part::Gone));
            return;
        };
        if let Some(t) = self.ticket.take() {
            d.table_mut().leave_room(t);
        }
        let mut finished = Vec::new();
        if let Part::InFlight(data, ua) = std::mem::replace(&mut self.a, Part::Gone) {
            finished.extend(d.drop_slot(ua, Box::new(data)));
        }
        if let Part::InFlight(data, ub) = std::mem::replace(&mut self.b, Part::Gone) {
            finished.extend(d.drop_slot(ub, Box::new(data)));
        }
        drop(d);
        for (data, c) in finished {
            data.finish(c);
        }
    }
}
