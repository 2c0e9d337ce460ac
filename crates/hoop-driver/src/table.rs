//! What every driver shares: the slot table, the room FIFO (backpressure), and the lists of
//! wakers and orphans a drain produces.

use std::collections::VecDeque;
use std::task::{Poll, Waker};

use crate::counters::Counters;
use crate::lifecycle::{Completion, Lifecycle, OnCqe, OnDrop, OnDropStream, OnItem};
use crate::lifecycle::{Orphan, StreamOrphan};
use crate::slots::Slots;

/// What became of an operation whose future was dropped.
#[must_use]
pub(crate) enum Dropped {
    /// Still in flight: the slot owns the data; the driver must cancel the operation.
    Cancel,
    /// It had completed: finish the data with this result (after releasing the driver).
    Finished(Box<dyn Orphan>, Completion),
    /// The slot is gone (poisoned driver): the data was leaked on purpose.
    Gone,
}

/// Slots, room FIFO, and the results of the last drain.
pub(crate) struct OpTable {
    /// `cap` slots for the operations the in-flight cap counts, and more for those it does
    /// not (multishots that wait for a peer, `Lifecycle::counts_against_cap`).
    pub(crate) slots: Slots,
    /// The in-flight cap: most counted operations at once (what the CQ can hold).
    cap: usize,
    /// Slots promised to room waiters that have not used them yet.
    granted: usize,
    /// Room waiters in FIFO order: (ticket, waker). Tickets only grow, so the deque is sorted.
    room: VecDeque<(u64, Waker)>,
    next_ticket: u64,
    /// Every ticket below this was granted (or withdrawn).
    granted_through: u64,
    pub(crate) counters: Counters,
    pub(crate) wakeups: Vec<Waker>,
    /// Keys of the runtime's tasks to queue (`task_key`), in completion order.
    pub(crate) ready_tasks: Vec<u64>,
    pub(crate) orphans: Vec<(Box<dyn Orphan>, Completion)>,
}

impl OpTable {
    /// A table of `cap` counted operations plus `uncapped` slots for operations outside the
    /// cap.
    pub(crate) fn new(cap: usize, uncapped: usize) -> OpTable {
        OpTable::growable(cap, cap, uncapped)
    }

    /// A table whose cap starts at `cap` and may be raised to `max_cap` ([`OpTable::set_cap`]):
    /// the slots for `max_cap` are there from the start.
    pub(crate) fn growable(cap: usize, max_cap: usize, uncapped: usize) -> OpTable {
        let cap = cap.max(1);
        OpTable {
            slots: Slots::new(cap.max(max_cap).saturating_add(uncapped)),
            cap,
            granted: 0,
            room: VecDeque::new(),
            next_ticket: 0,
            granted_through: 0,
            counters: Counters::default(),
            wakeups: Vec::with_capacity(256),
            ready_tasks: Vec::with_capacity(256),
            orphans: Vec::new(),
        }
    }

    /// Whether wakers or orphans wait to be run.
    pub(crate) fn has_ready(&self) -> bool {
        !self.wakeups.is_empty() || !self.ready_tasks.is_empty() || !self.orphans.is_empty()
    }

    /// Whether an operation may take a slot now. `granted` says the caller holds a grant from
    /// the room FIFO; others queue behind the waiters (FIFO fairness). `counted`: the
    /// operation counts against the in-flight cap; one that does not needs only a free slot
    /// not promised to a waiter (it takes no CQ room from those queued for it).
    #[inline]
    pub(crate) fn may_push(&self, granted: bool, counted: bool) -> bool {
        if !counted {
            let free = self.slots.capacity() - self.slots.in_use();
            return if granted {
                free > 0
            } else {
                free > self.granted
            };
        }
        let room = self.room();
        if granted {
            room > 0
        } else {
            self.room.is_empty() && room > self.granted
        }
    }

    /// Room for counted operations: free slots, at most what the cap leaves.
    #[inline]
    fn room(&self) -> usize {
        let free = self.slots.capacity() - self.slots.in_use();
        free.min(self.cap.saturating_sub(self.slots.counted_in_use()))
    }

    /// Room for counted operations not promised to room waiters.
    pub(crate) fn free_slots(&self) -> usize {
        self.room().saturating_sub(self.granted)
    }

    /// Raises the in-flight cap (the CQ grew) and grants the room it makes.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = self.cap.max(cap);
        self.grant();
    }

    /// Operations waiting for room.
    #[inline]
    pub(crate) fn room_waiters(&self) -> usize {
        self.room.len()
    }

    /// Queues a waiter for room; returns its ticket.
    pub(crate) fn wait_room(&mut self, waker: &Waker) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.room.push_back((ticket, waker.clone()));
        self.counters.room_waits += 1;
        ticket
    }

    /// Where a pusher holding `ticket` (if any) stands in the room FIFO: `Ok(granted)` to try
    /// a push now (a granted ticket is used up), `Err(())` to keep waiting (its waker is
    /// refreshed).
    #[inline]
    pub(crate) fn check_ticket(&mut self, ticket: Option<u64>, waker: &Waker) -> Result<bool, ()> {
        match ticket {
            Some(t) if !self.is_granted(t) => {
                self.update_room_waker(t, waker);
                Err(())
            }
            Some(_) => {
                self.use_grant();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Whether `ticket` was granted room.
    pub(crate) fn is_granted(&self, ticket: u64) -> bool {
        ticket < self.granted_through
    }

    /// Refreshes the waker of a still-queued ticket.
    pub(crate) fn update_room_waker(&mut self, ticket: u64, waker: &Waker) {
        if let Ok(i) = self.room.binary_search_by_key(&ticket, |(t, _)| *t) {
            let w = &mut self.room[i].1;
            if !w.will_wake(waker) {
                w.clone_from(waker);
            }
        }
    }

    /// A granted waiter used (or gave up) its grant.
    pub(crate) fn use_grant(&mut self) {
        self.granted = self.granted.saturating_sub(1);
    }

    /// A waiter went away: withdraw its ticket, or pass its grant on.
    pub(crate) fn leave_room(&mut self, ticket: u64) {
        if self.is_granted(ticket) {
            self.use_grant();
            self.grant();
        } else if let Ok(i) = self.room.binary_search_by_key(&ticket, |(t, _)| *t) {
            let _ = self.room.remove(i);
        }
    }

    /// Wakes as many waiters as there are free slots not yet promised.
    #[inline]
    pub(crate) fn grant(&mut self) {
        if !self.room.is_empty() {
            self.grant_waiters();
        }
    }

    fn grant_waiters(&mut self) {
        let free = self.room();
        while self.granted < free {
            let Some((ticket, waker)) = self.room.pop_front() else {
                break;
            };
            self.granted_through = ticket + 1;
            self.granted += 1;
            self.wakeups.push(waker);
        }
    }

    /// Wakes every room waiter (the driver is poisoned or shut down: their pushes will fail).
    pub(crate) fn release_all_waiters(&mut self) {
        for (_, w) in self.room.drain(..) {
            self.wakeups.push(w);
        }
        self.granted_through = self.next_ticket;
    }

    /// Polls the slot `user_data`; on `Ready` the slot is freed.
    #[inline(always)]
    pub(crate) fn poll_slot(&mut self, user_data: u64, waker: &Waker) -> Poll<Completion> {
        match self.slots.poll(user_data, waker) {
            Some(Poll::Ready(c)) => {
                self.grant();
                Poll::Ready(c)
            }
            Some(Poll::Pending) => Poll::Pending,
            // Only reachable after a poisoned driver removed the slot.
            None => Poll::Ready(Completion {
                res: -libc::EBADR,
                flags: 0,
            }),
        }
    }

    /// The future of slot `user_data` was dropped with its data.
    pub(crate) fn drop_slot(&mut self, user_data: u64, data: Box<dyn Orphan>) -> Dropped {
        let Some(state) = self.slots.get_mut(user_data) else {
            // The kernel (or a pool thread) may still own the memory.
            std::mem::forget(data);
            return Dropped::Gone;
        };
        match state.on_drop(data) {
            OnDrop::Finished(data, c) => {
                let _ = self.slots.remove(user_data);
                self.grant();
                Dropped::Finished(data, c)
            }
            OnDrop::Cancel => Dropped::Cancel,
        }
    }

    /// Hands a just-pushed operation's data to its slot: nobody will wait for the result.
    pub(crate) fn detach(&mut self, user_data: u64, data: Box<dyn Orphan>) {
        match self.slots.get_mut(user_data) {
            Some(state) => *state = Lifecycle::Ignored(data),
            None => std::mem::forget(data),
        }
    }

    /// The final completion of slot `user_data` arrived.
    #[inline(always)]
    pub(crate) fn complete(&mut self, user_data: u64, c: Completion) {
        match self.slots.get_mut(user_data) {
            None => self.counters.stale_cqes += 1,
            // The common case first: a task of the runtime waits by its key. The key goes to
            // the ready list (once per task in a row) and the result takes its place.
            Some(state @ Lifecycle::WaitingTask(_)) => {
                let old = std::mem::replace(state, Lifecycle::Completed(c));
                if let Lifecycle::WaitingTask(k) = old {
                    if self.ready_tasks.last() != Some(&k) {
                        self.ready_tasks.push(k);
                    }
                }
                // `WaitingTask` owns nothing: forgetting it skips a call to the drop glue.
                std::mem::forget(old);
            }
            // Next: a future waits with its waker. The waker moves to the wake list and the
            // result takes its place, with no drop glue on this path.
            Some(state @ Lifecycle::Waiting(_)) => {
                if let Lifecycle::Waiting(w) = std::mem::replace(state, Lifecycle::Completed(c)) {
                    if !self.wakeups.last().is_some_and(|last| last.will_wake(&w)) {
                        self.wakeups.push(w);
                    }
                }
            }
            Some(state) => match state.on_cqe(c) {
                // One task waiting on many operations is woken once per drain.
                OnCqe::Wake(w) => {
                    if !self.wakeups.last().is_some_and(|last| last.will_wake(&w)) {
                        self.wakeups.push(w);
                    }
                }
                OnCqe::WakeTask(k) => {
                    if self.ready_tasks.last() != Some(&k) {
                        self.ready_tasks.push(k);
                    }
                }
                OnCqe::Stored => {}
                OnCqe::Orphaned(data, c) => {
                    let _ = self.slots.remove(user_data);
                    self.orphans.push((data, c));
                }
                OnCqe::Freed => self.free_stream_slot(user_data),
            },
        }
    }

    /// Frees the slot of a dropped stream after its final CQE. Its data (a multishot recv's
    /// `BufRing` handle, say) is dropped after the drain, not inside it: dropping the last
    /// handle of a buffer ring unregisters it from the driver, which the drain has borrowed
    /// (it used to fail there, and the ring and its buffers were leaked).
    fn free_stream_slot(&mut self, user_data: u64) {
        if let Some(state) = self.slots.remove(user_data) {
            crate::deferred::drop_later(Box::new(state));
        }
    }

    /// A CQE with `IORING_CQE_F_MORE`: an item of a multi-CQE operation.
    pub(crate) fn item(&mut self, user_data: u64, c: Completion) {
        match self.slots.get_mut(user_data) {
            None => self.counters.stale_cqes += 1,
            Some(state) => match state.on_item(c, false) {
                OnItem::Wake(w) => self.wakeups.push(w),
                OnItem::Nothing => {}
                OnItem::Free => self.free_stream_slot(user_data),
            },
        }
    }

    /// Polls the stream of slot `user_data`: its next CQE, and whether it was the final one
    /// (the slot is then freed).
    pub(crate) fn poll_item(&mut self, user_data: u64, waker: &Waker) -> Poll<(Completion, bool)> {
        let Some(state) = self.slots.get_mut(user_data) else {
            return Poll::Ready((
                Completion {
                    res: -libc::EBADR,
                    flags: 0,
                },
                true,
            ));
        };
        match state.poll_item(waker) {
            Poll::Ready((c, last)) => {
                if last {
                    let _ = self.slots.remove(user_data);
                    self.grant();
                }
                Poll::Ready((c, last))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The stream of slot `user_data` was dropped with its data; true if it must be cancelled.
    pub(crate) fn drop_stream(&mut self, user_data: u64, data: Box<dyn StreamOrphan>) -> bool {
        let Some(state) = self.slots.get_mut(user_data) else {
            std::mem::forget(data);
            return false;
        };
        match state.on_drop_stream(data) {
            OnDropStream::Cancel => true,
            OnDropStream::Free => {
                let _ = self.slots.remove(user_data);
                self.grant();
                false
            }
        }
    }

    /// `user_data` of every slot whose final completion has not arrived.
    pub(crate) fn unfinished(&self) -> Vec<u64> {
        self.slots
            .live()
            .filter(|(_, s)| !s.is_completed())
            .map(|(u, _)| u)
            .collect()
    }

    /// Whether any slot still waits for its final completion.
    pub(crate) fn any_unfinished(&self) -> bool {
        self.slots.live().any(|(_, s)| !s.is_completed())
    }

    /// Leaks the data of every slot the futures left (`Ignored`): the kernel or a pool thread
    /// may still write it. Returns how many.
    pub(crate) fn leak_ignored(&mut self) -> usize {
        let ignored: Vec<u64> = self
            .slots
            .live()
            .filter(|(_, s)| s.is_ignored())
            .map(|(u, _)| u)
            .collect();
        let n = ignored.len();
        for user_data in ignored {
            match self.slots.remove(user_data) {
                Some(Lifecycle::Ignored(data)) => std::mem::forget(data),
                Some(Lifecycle::IgnoredStream(data)) => std::mem::forget(data),
                _ => {}
            }
        }
        n
    }

    /// Frees one slot whose data the kernel may still own: its data is leaked on purpose.
    pub(crate) fn leak_slot(&mut self, user_data: u64) -> bool {
        match self.slots.remove(user_data) {
            Some(Lifecycle::Ignored(data)) => {
                std::mem::forget(data);
                true
            }
            Some(Lifecycle::IgnoredStream(data)) => {
                std::mem::forget(data);
                true
            }
            _ => false,
        }
    }

    /// Completes every unfinished slot with `res`, once the kernel holds no request any more
    /// (a poisoned driver after a synchronous cancel of everything): waiting futures get the
    /// error and their data; data of dropped futures is finished as an orphan.
    pub(crate) fn fail_all(&mut self, res: i32) {
        for user_data in self.unfinished() {
            self.complete(user_data, Completion { res, flags: 0 });
        }
        self.release_all_waiters();
    }
}
