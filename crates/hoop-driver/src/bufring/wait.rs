//! Receives waiting for a free buffer: a FIFO queue of waiters (one woken per returned
//! buffer, O(1) per poll), and the few waiters that are all woken by every returned buffer.

use std::task::{Context, Poll};

use super::{BufRing, Inner, WaitTicket};

impl BufRing {
    /// `Ready` when a buffer is free; otherwise registers the waker, woken when one returns.
    /// Every waiter registered so is woken by every returned buffer, and registering scans
    /// them: for a few waiters. Receives use [`poll_available_queued`](Self::poll_available_queued),
    /// O(1) per poll and one wake-up per returned buffer.
    pub fn poll_available(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.available() > 0 {
            return Poll::Ready(());
        }
        let mut w = self.inner.waiters.borrow_mut();
        if !w.iter().any(|x| x.will_wake(cx.waker())) {
            w.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// `Ready` when a buffer is free (the waiter leaves the queue if it was in it); otherwise
    /// the waiter keeps (or takes) its place in a FIFO queue, woken when a buffer returns: one
    /// waiter per returned buffer, oldest first, O(1) per poll however many wait. `ticket` is
    /// the waiter's place, kept across polls; a waiter that stops waiting before it took a
    /// buffer must call [`leave_queue`](Self::leave_queue) (or the buffer it was woken for
    /// would wake nobody else).
    pub fn poll_available_queued(&self, cx: &mut Context<'_>, ticket: &mut WaitTicket) -> Poll<()> {
        self.inner.work.set(self.inner.work.get() + 1);
        if self.available() > 0 || self.kernel_has_room() {
            if let Some(t) = ticket.take() {
                self.inner.forget(t);
            }
            return Poll::Ready(());
        }
        let mut q = self.inner.queue.borrow_mut();
        let head = self.inner.queue_head.get();
        if let Some(t) = *ticket {
            if let Some(Some(w)) = t
                .checked_sub(head)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| q.get_mut(i))
            {
                // Still queued: refresh the waker in place.
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
                return Poll::Pending;
            }
        }
        // Not queued (new, or woken for a buffer someone else took first): to the back.
        *ticket = Some(head + q.len() as u64);
        q.push_back(Some(cx.waker().clone()));
        Poll::Pending
    }

    /// An incremental ring whose every buffer is out may still have room in the one the
    /// kernel is filling: a receive may arm (at worst it ends with `ENOBUFS` and waits).
    fn kernel_has_room(&self) -> bool {
        self.inner.book.partial.get() > 0
    }

    /// The waiter holding `ticket` stops waiting: its place is freed, and if it was woken for
    /// a buffer that is still free, the next waiter is woken instead.
    pub fn leave_queue(&self, ticket: &mut WaitTicket) {
        let Some(t) = ticket.take() else {
            return;
        };
        if !self.inner.forget(t) && self.available() > 0 {
            self.inner.wake_queued(1);
        }
    }

    /// Waiters queued for a buffer right now (places of waiters that left not counted).
    pub fn queued(&self) -> usize {
        self.inner.queue.borrow().iter().flatten().count()
    }

    /// Test hook: queue polls plus wake-ups so far (the work waiting for buffers cost).
    #[doc(hidden)]
    pub fn wait_work(&self) -> u64 {
        self.inner.work.get()
    }
}

impl Inner {
    /// Wakes up to `n` queued waiters, oldest first (their places are freed: a woken waiter
    /// that finds no buffer queues again at the back).
    pub(super) fn wake_queued(&self, n: usize) {
        for _ in 0..n {
            let next = {
                let mut q = self.queue.borrow_mut();
                let mut found = None;
                while let Some(slot) = q.pop_front() {
                    self.queue_head.set(self.queue_head.get() + 1);
                    if let Some(w) = slot {
                        found = Some(w);
                        break;
                    }
                }
                found
            };
            match next {
                Some(w) => {
                    self.work.set(self.work.get() + 1);
                    crate::deferred::wake(w);
                }
                None => return,
            }
        }
    }

    /// Frees the place of `ticket` if it is still queued; false if it was not (already woken).
    pub(super) fn forget(&self, ticket: u64) -> bool {
        let mut q = self.queue.borrow_mut();
        let Some(i) = ticket
            .checked_sub(self.queue_head.get())
            .and_then(|i| usize::try_from(i).ok())
        else {
            return false;
        };
        match q.get_mut(i) {
            Some(slot) if slot.is_some() => {
                *slot = None;
                // Trailing empty places go at once (the front ones when reached).
                while matches!(q.back(), Some(None)) {
                    q.pop_back();
                }
                true
            }
            _ => false,
        }
    }
}
