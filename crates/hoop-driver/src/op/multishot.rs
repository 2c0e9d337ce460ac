//! Multishot operations: one SQE, many CQEs.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::bufring::{BufRing, RingBuf, WaitTicket};
use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::MultishotCode;

/// Accepts connections for as long as it is armed (`IORING_OP_ACCEPT` with
/// `IORING_ACCEPT_MULTISHOT`, 5.19). Each item owns its fd, so connections accepted after the
/// stream was dropped are closed. The epoll driver keeps it armed the same way: every turn
/// that finds the listener readable accepts until `EAGAIN`, each connection an item, whether
/// or not the stream is being polled (a shared ring's engine runs one accept per arm).
#[derive(Debug)]
pub struct AcceptMulti {
    pub(crate) fd: RawFd,
    /// Whether the kernel has multishot accept (5.19); without it each arm is one accept.
    pub(crate) multishot: bool,
}

impl AcceptMulti {
    /// Accepts on the listening socket `fd`: multishot where the kernel has it (5.19+), else a
    /// loop of single accepts.
    pub fn new(fd: RawFd) -> Self {
        AcceptMulti {
            fd,
            multishot: crate::setup::kernel_at_least(5, 19),
        }
    }

    /// The fallback forced: a loop of single-shot accepts, one SQE per connection.
    pub fn single_shot(fd: RawFd) -> Self {
        AcceptMulti {
            fd,
            multishot: false,
        }
    }

    /// Whether the kernel accepts for this op with one multishot SQE.
    pub fn is_multishot(&self) -> bool {
        self.multishot
    }
}

impl MultishotCode for AcceptMulti {
    fn waits_for_peer(&self) -> bool {
        true
    }

    type Item = io::Result<OwnedFd>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        // Every result is yielded, `ECANCELED` included: a cancel the stream's owner did not ask
        // for (the owner's own drop never gets here) is armed again by `MultiOp` (up to
        // `op::MAX_RESUBMITS` in a row), then yielded and the stream ends (`rearm`): it must not
        // look like a quiet end.
        // SAFETY: a non-negative result is a new fd nothing else owns.
        Some(cvt(c.res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    fn rearm(&self, last: &Completion) -> bool {
        // A single-shot arm ends after every connection; the kernel ends a multishot accept on an error it cannot go on after, or when it could
        // not post a CQE; the stream goes on unless the listener is gone or it was cancelled.
        !matches!(
            -last.res,
            libc::ECANCELED
                | libc::EBADF
                | libc::EINVAL
                | libc::ENOTSOCK
                | libc::EBADR
                | libc::ENXIO
        )
    }
}

/// Receives into buffers of a [`BufRing`] for as long as it is armed: multishot recv with
/// buffer select (6.0) when the ring is registered with the kernel; otherwise one receive per
/// arm into a buffer taken from the ring's free list (the fallback). Running out of buffers
/// (`ENOBUFS`) ends one arm and loses no data: the stream re-arms once a buffer is returned.
/// Data received after the stream was dropped goes back to the ring.
///
/// With bundles ([`BufRing::set_bundles`]) a CQE covers several buffers; on an incrementally
/// consumed ring ([`BufRing::new_incremental`]) an item is the part of a buffer one receive
/// filled. Either way the items are the stream's bytes in order.
///
/// On the epoll driver a waiting receive holds no buffer, as with the kernel's buffer select:
/// an arm either tries one receive into a free buffer at once (never queued: `EAGAIN` gives
/// the buffer back), or waits for readability with no buffer (`ReadyArm`). So thousands of
/// idle connections never drain the ring, and one that has data is not starved by them.
#[derive(Debug)]
pub struct RecvMulti {
    pub(crate) fd: RawFd,
    pub(crate) ring: BufRing,
    /// The free-list buffer this arm receives into (fallback mode).
    pub(crate) user_buf: Option<(u16, *mut u8)>,
    /// The place in the ring's queue of waiters for a buffer.
    pub(crate) wait: WaitTicket,
    /// The epoll driver: what the next arm does.
    pub(crate) next_arm: ReadyArm,
    /// The epoll driver: what the arm in flight does (`None` on io_uring).
    pub(crate) armed: Option<ReadyArm>,
    /// The last completion carried no data but the stream goes on (epoll: readable, or a
    /// receive tried too early).
    pub(crate) again: bool,
    /// Buffers the last CQE brought after its first (a bundle), yielded next.
    pub(crate) queued: VecDeque<RingBuf>,
}

/// A receive whose bytes the buffer ring's bookkeeping cannot locate (a CQE that does not fit
/// the buffers provided): never expected; its buffers stay out, never reused.
fn out_of_step() -> io::Error {
    io::Error::other("a buffer-ring receive does not fit the buffers provided (bytes lost)")
}

/// What an arm of a [`RecvMulti`] does on the epoll driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadyArm {
    /// One receive into a free buffer, at once; `EAGAIN` completes the arm (buffer returned).
    Try,
    /// Wait until the socket is readable, holding no buffer.
    Wait,
}

impl RecvMulti {
    /// Receives from `fd` into buffers of `ring`.
    pub fn new(fd: RawFd, ring: BufRing) -> Self {
        RecvMulti {
            fd,
            ring,
            user_buf: None,
            wait: None,
            next_arm: ReadyArm::Try,
            armed: None,
            again: false,
            queued: VecDeque::new(),
        }
    }

    /// Takes a free-list buffer for the next arm (fallback mode); `None` if none is free.
    pub(crate) fn take_user_buf(&mut self) -> Option<(u16, *mut u8)> {
        if self.user_buf.is_none() {
            self.user_buf = self.ring.take_user();
        }
        self.user_buf
    }
}

impl Drop for RecvMulti {
    /// A free-list buffer taken for an arm that never reached a driver (the stream was dropped
    /// while it waited for room) goes back to the ring, once. While an arm is in flight the
    /// op is owned by its slot, whose final CQE takes the buffer (`item`) before the op is
    /// dropped; a slot whose op is leaked on purpose never runs this.
    fn drop(&mut self) {
        if let Some((bid, _)) = self.user_buf.take() {
            self.ring.give_back(bid);
        }
        // Woken for a buffer and gone before taking it: the next waiter gets the wake-up.
        self.ring.leave_queue(&mut self.wait);
    }
}

impl MultishotCode for RecvMulti {
    fn waits_for_peer(&self) -> bool {
        true
    }

    type Item = io::Result<RingBuf>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        self.again = false;
        if c.flags & crate::bufring::book::F_REC != 0 {
            // An incremental ring's CQE, settled by the driver as it reaped it.
            let rec = (c.flags >> 16) as u16;
            if !self.ring.take_record(rec, &mut self.queued) {
                return Some(Err(out_of_step()));
            }
            return self.queued.pop_front().map(Ok);
        }
        let kernel_bid = crate::op::buffer_id(c.flags);
        let user = self.user_buf.take();
        match self.armed.take() {
            // Readable (epoll): the next arm tries a receive.
            Some(ReadyArm::Wait) if c.res >= 0 => {
                self.next_arm = ReadyArm::Try;
                self.again = true;
                return None;
            }
            // Nothing to read yet (epoll): the buffer goes back, the next arm waits with none.
            Some(ReadyArm::Try) if c.res == -libc::EAGAIN => {
                if let Some((bid, _)) = user {
                    self.ring.give_back(bid);
                }
                self.next_arm = ReadyArm::Wait;
                self.again = true;
                return None;
            }
            Some(_) => self.next_arm = ReadyArm::Try,
            None => {}
        }
        if c.res > 0 {
            return match (kernel_bid, user) {
                (Some(bid), _) => {
                    if !self.ring.take_kernel(bid, c.res as usize, &mut self.queued) {
                        return Some(Err(out_of_step()));
                    }
                    self.queued.pop_front().map(Ok)
                }
                (None, Some((bid, _))) => Some(Ok(self.ring.filled_user(bid, c.res as usize))),
                (None, None) => Some(Err(io::Error::other("receive completed without a buffer"))),
            };
        }
        // No data: any buffer the CQE names, or the one this arm took, goes straight back.
        if let Some(bid) = kernel_bid {
            self.ring.give_back_kernel(bid);
        }
        if let Some((bid, _)) = user {
            self.ring.give_back(bid);
        }
        match c.res {
            // End of stream, or out of buffers (re-armed later): nothing to yield. A cancel
            // nobody asked for is armed again by `MultiOp`; past `op::MAX_RESUBMITS` in a row
            // it is yielded as an error (then the stream ends): a peer's EOF and a cancel must
            // not look alike.
            0 => None,
            r if r == -libc::ENOBUFS => None,
            r => Some(Err(io::Error::from_raw_os_error(-r))),
        }
    }

    fn rearm(&self, last: &Completion) -> bool {
        last.res > 0 || last.res == -libc::ENOBUFS || self.again
    }

    fn queued_item(&mut self) -> Option<Self::Item> {
        self.queued.pop_front().map(Ok)
    }

    fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    fn poll_ready_to_arm(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        // A buffer in hand, or (epoll) an arm that waits for readability needs none.
        if self.user_buf.is_some() || self.next_arm == ReadyArm::Wait {
            return std::task::Poll::Ready(());
        }
        self.ring.poll_available_queued(cx, &mut self.wait)
    }
}
