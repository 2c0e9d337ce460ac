//! The state machine of one in-flight operation.
//!
//! ```text
//!             push SQE
//!   (free) ─────────────► Submitted ──poll──► Waiting(waker)
//!                             │  ╲               │    │
//!                 future      │   ╲ CQE      CQE │    │ future dropped
//!                 dropped     │    ╲             ▼    ▼
//!                             │     ╲──────► Completed  Ignored(data) ──CQE──► (free; data
//!                             ▼                  │                              finished as
//!                       Ignored(data)      poll or drop                         an orphan)
//!                                                ▼
//!                                             (free)
//! ```
//!
//! `Ignored` owns the operation's data (buffer, sockaddr, path, ...) from the moment its future is
//! dropped until the final CQE, and then hands both to the operation's completion handler, which
//! owns the result: an accepted or opened fd is closed, a buffer is freed.

use std::fmt;
use std::task::{Poll, Waker};

use std::collections::VecDeque;

/// The raw outcome of one CQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// `res`: the result, or `-errno`.
    pub res: i32,
    /// `flags`: `IORING_CQE_F_*`.
    pub flags: u32,
}

/// Type-erased data of an operation whose future is gone, kept until the final CQE
/// (every `OpCode` is one).
pub(crate) trait Orphan {
    /// The final completion arrived: release everything the result owns.
    fn finish(self: Box<Self>, c: Completion);
}

/// The data of a dropped multi-CQE operation, kept until its final CQE
/// (every `MultishotCode` is one).
pub(crate) trait StreamOrphan {
    /// One CQE arrived for nobody: release what it owns. It runs inside the drain, so the
    /// item it yields (an fd to close, a buffer to return) is dropped after the drain, outside
    /// the driver's borrow (`deferred`).
    fn orphan_item(&mut self, c: Completion);
}

/// Where an operation's slot stands.
pub(crate) enum Lifecycle {
    /// The SQE is queued or in the kernel; nobody has polled the future yet.
    Submitted,
    /// The future was polled and waits with this waker.
    Waiting(Waker),
    /// The future was polled by a task of this driver's runtime, which wakes it by this key
    /// (`task_key`): no waker is kept.
    WaitingTask(u64),
    /// The future was dropped before the final CQE; the slot owns the operation's data.
    Ignored(Box<dyn Orphan>),
    /// The final CQE arrived; the future has not yet taken it.
    Completed(Completion),
    /// A multi-CQE operation (multishot, zero-copy send): its CQEs, the final one included,
    /// queue here in order until the stream takes them.
    Streaming(Box<Stream>),
    /// A multi-CQE operation whose stream was dropped before the final CQE: each CQE that
    /// arrives goes to the data's orphan handler (an accepted fd is closed, a buffer returned
    /// to its ring), and the final one frees the slot.
    IgnoredStream(Box<dyn StreamOrphan>),
}

/// The queue of a multi-CQE operation.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    items: VecDeque<Completion>,
    waker: Option<Waker>,
    /// The final CQE (one without `IORING_CQE_F_MORE`) is in `items` or was taken.
    ended: bool,
    /// A multishot that waits for data (a receive, an accept): not counted against the
    /// in-flight cap (see `Lifecycle::counts_against_cap`).
    uncapped: bool,
}

impl Stream {
    pub(crate) fn new(waker: Option<&Waker>) -> Box<Stream> {
        Box::new(Stream {
            items: VecDeque::new(),
            waker: waker.cloned(),
            ended: false,
            uncapped: false,
        })
    }

    /// The same stream, counted against the in-flight cap or not (`uncapped`).
    pub(crate) fn uncapped(mut self: Box<Self>, uncapped: bool) -> Box<Stream> {
        self.uncapped = uncapped;
        self
    }

    /// A stream that ended at once with `c` (a readiness driver completing inline).
    pub(crate) fn ended_with(mut self: Box<Self>, c: Completion) -> Box<Stream> {
        self.items.push_back(c);
        self.ended = true;
        self.waker = None;
        self
    }
}

/// What the driver must do after a CQE of a multi-CQE operation.
#[must_use]
pub(crate) enum OnItem {
    /// Wake this waker after the drain.
    Wake(Waker),
    /// Nothing to do now.
    Nothing,
    /// The final CQE of a dropped stream: free the slot (its data was already given the CQE).
    Free,
}

/// What the driver must do when a stream is dropped.
#[must_use]
pub(crate) enum OnDropStream {
    /// Still armed: the slot now owns the data; cancel the operation.
    Cancel,
    /// It had ended: free the slot (every queued CQE went to the data's orphan handler).
    Free,
}

/// What the driver must do after a CQE for this slot.
#[must_use]
pub(crate) enum OnCqe {
    /// Wake this waker (after the drain) and keep the slot until the future takes the result.
    Wake(Waker),
    /// Queue the runtime's task with this key (after the drain); keep the slot likewise.
    WakeTask(u64),
    /// Nothing to wake; the result waits in the slot.
    Stored,
    /// The future is gone: free the slot and finish this data with the completion.
    Orphaned(Box<dyn Orphan>, Completion),
    /// The final CQE of a dropped stream was handled: free the slot.
    Freed,
}

/// What the driver must do when an operation's future is dropped.
#[must_use]
pub(crate) enum OnDrop {
    /// The operation is still in flight: the slot now owns the data; submit a cancel.
    Cancel,
    /// The result had already arrived: free the slot and finish the data now.
    Finished(Box<dyn Orphan>, Completion),
}

impl Lifecycle {
    /// Whether an operation pushed in this state counts against the in-flight cap. Every
    /// operation does but a multishot that waits for data (a receive, an accept): an idle
    /// connection's receive costs the CQ nothing until data comes, and counting it let idle
    /// connections hold the room the next accept needed. Its CQEs can overflow the CQ when
    /// many streams fire at once; the kernel keeps them (`FEAT_NODROP`) and the drain flushes
    /// them.
    #[inline]
    pub(crate) fn counts_against_cap(&self) -> bool {
        !matches!(self, Lifecycle::Streaming(s) if s.uncapped)
    }

    /// A final CQE arrived.
    #[inline]
    pub(crate) fn on_cqe(&mut self, c: Completion) -> OnCqe {
        if matches!(self, Lifecycle::Streaming(_) | Lifecycle::IgnoredStream(_)) {
            return match self.on_item(c, true) {
                OnItem::Wake(w) => OnCqe::Wake(w),
                OnItem::Nothing => OnCqe::Stored,
                OnItem::Free => OnCqe::Freed,
            };
        }
        match std::mem::replace(self, Lifecycle::Completed(c)) {
            Lifecycle::Submitted => OnCqe::Stored,
            Lifecycle::Waiting(waker) => OnCqe::Wake(waker),
            Lifecycle::WaitingTask(key) => OnCqe::WakeTask(key),
            Lifecycle::Ignored(data) => OnCqe::Orphaned(data, c),
            // A second final CQE for one slot cannot happen (generations in user_data reject
            // stale ones); keep the first result rather than lose it.
            Lifecycle::Completed(first) => {
                *self = Lifecycle::Completed(first);
                OnCqe::Stored
            }
            // Handled above.
            Lifecycle::Streaming(_) | Lifecycle::IgnoredStream(_) => OnCqe::Stored,
        }
    }

    /// A CQE of a multi-CQE operation; `last` when it is the final one.
    pub(crate) fn on_item(&mut self, c: Completion, last: bool) -> OnItem {
        match self {
            Lifecycle::Streaming(s) => {
                s.items.push_back(c);
                s.ended |= last;
                match s.waker.take() {
                    Some(w) => OnItem::Wake(w),
                    None => OnItem::Nothing,
                }
            }
            Lifecycle::IgnoredStream(data) => {
                data.orphan_item(c);
                if last {
                    OnItem::Free
                } else {
                    OnItem::Nothing
                }
            }
            // Not a multi-CQE slot: an F_MORE CQE for it carries nothing to keep.
            _ => OnItem::Nothing,
        }
    }

    /// The stream is polled: the next CQE and whether it was the final one (then the slot must
    /// be freed).
    pub(crate) fn poll_item(&mut self, waker: &Waker) -> Poll<(Completion, bool)> {
        let Lifecycle::Streaming(s) = self else {
            return Poll::Pending;
        };
        match s.items.pop_front() {
            Some(c) => Poll::Ready((c, s.ended && s.items.is_empty())),
            None => {
                match &mut s.waker {
                    Some(w) if w.will_wake(waker) => {}
                    w => *w = Some(waker.clone()),
                }
                Poll::Pending
            }
        }
    }

    /// The stream is dropped with its data.
    pub(crate) fn on_drop_stream(&mut self, mut data: Box<dyn StreamOrphan>) -> OnDropStream {
        let ended = match self {
            Lifecycle::Streaming(s) => {
                for c in s.items.drain(..) {
                    data.orphan_item(c);
                }
                s.ended
            }
            _ => false,
        };
        if ended {
            OnDropStream::Free
        } else {
            *self = Lifecycle::IgnoredStream(data);
            OnDropStream::Cancel
        }
    }

    /// The future is polled. `Ready` means the slot is done and must be freed.
    #[inline]
    pub(crate) fn poll(&mut self, waker: &Waker) -> Poll<Completion> {
        match self {
            Lifecycle::Completed(c) => Poll::Ready(*c),
            Lifecycle::Waiting(w) => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                Poll::Pending
            }
            // Polled again (by the same task or another): from now on the waker it was given
            // is kept, which is right whoever polls.
            Lifecycle::Submitted | Lifecycle::WaitingTask(_) => {
                *self = Lifecycle::Waiting(waker.clone());
                Poll::Pending
            }
            // A dropped future is never polled again; streams are polled with `poll_item`.
            Lifecycle::Ignored(_) | Lifecycle::Streaming(_) | Lifecycle::IgnoredStream(_) => {
                Poll::Pending
            }
        }
    }

    /// The future is dropped with the operation's data.
    pub(crate) fn on_drop(&mut self, data: Box<dyn Orphan>) -> OnDrop {
        match self {
            Lifecycle::Completed(c) => OnDrop::Finished(data, *c),
            _ => {
                *self = Lifecycle::Ignored(data);
                OnDrop::Cancel
            }
        }
    }

    /// Whether the future is gone (the slot owns the data).
    pub(crate) fn is_ignored(&self) -> bool {
        matches!(self, Lifecycle::Ignored(_) | Lifecycle::IgnoredStream(_))
    }

    /// Whether the final CQE arrived.
    pub(crate) fn is_completed(&self) -> bool {
        match self {
            Lifecycle::Completed(_) => true,
            Lifecycle::Streaming(s) => s.ended,
            _ => false,
        }
    }
}

impl fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lifecycle::Submitted => f.write_str("Submitted"),
            Lifecycle::Waiting(_) => f.write_str("Waiting"),
            Lifecycle::WaitingTask(k) => write!(f, "WaitingTask({k})"),
            Lifecycle::Ignored(_) => f.write_str("Ignored"),
            Lifecycle::Completed(c) => write!(f, "Completed({c:?})"),
            Lifecycle::Streaming(s) => write!(f, "Streaming({s:?})"),
            Lifecycle::IgnoredStream(_) => f.write_str("IgnoredStream"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Probe(Rc<RefCell<Vec<Completion>>>);
    impl Orphan for Probe {
        fn finish(self: Box<Self>, c: Completion) {
            self.0.borrow_mut().push(c);
        }
    }

    struct CountWake(AtomicUsize);
    impl Wake for CountWake {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Waker, Arc<CountWake>) {
        let c = Arc::new(CountWake(AtomicUsize::new(0)));
        (Waker::from(c.clone()), c)
    }

    const OK: Completion = Completion { res: 7, flags: 0 };

    #[test]
    fn completed_before_poll() {
        let (w, _) = waker();
        let mut l = Lifecycle::Submitted;
        assert!(matches!(l.on_cqe(OK), OnCqe::Stored));
        assert!(l.is_completed());
        assert_eq!(l.poll(&w), Poll::Ready(OK));
    }

    #[test]
    fn waiting_then_completed_wakes() {
        let (w, count) = waker();
        let mut l = Lifecycle::Submitted;
        assert_eq!(l.poll(&w), Poll::Pending);
        assert!(matches!(l, Lifecycle::Waiting(_)));
        match l.on_cqe(OK) {
            OnCqe::Wake(w) => w.wake(),
            _ => panic!("expected a wake"),
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(l.poll(&w), Poll::Ready(OK));
    }

    #[test]
    fn repoll_replaces_a_different_waker() {
        let (w1, c1) = waker();
        let (w2, c2) = waker();
        let mut l = Lifecycle::Submitted;
        let _ = l.poll(&w1);
        let _ = l.poll(&w2);
        if let OnCqe::Wake(w) = l.on_cqe(OK) {
            w.wake();
        }
        assert_eq!(c1.0.load(Ordering::SeqCst), 0);
        assert_eq!(c2.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dropped_in_flight_is_ignored_then_finished_by_cqe() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (w, _) = waker();
        let mut l = Lifecycle::Submitted;
        let _ = l.poll(&w);
        assert!(matches!(
            l.on_drop(Box::new(Probe(seen.clone()))),
            OnDrop::Cancel
        ));
        assert!(l.is_ignored());
        assert_eq!(l.poll(&w), Poll::Pending);
        match l.on_cqe(OK) {
            OnCqe::Orphaned(data, c) => data.finish(c),
            _ => panic!("expected the orphan"),
        }
        assert_eq!(*seen.borrow(), vec![OK]);
    }

    #[test]
    fn dropped_after_cqe_finishes_at_once() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let mut l = Lifecycle::Submitted;
        let _ = l.on_cqe(OK);
        match l.on_drop(Box::new(Probe(seen.clone()))) {
            OnDrop::Finished(data, c) => data.finish(c),
            OnDrop::Cancel => panic!("nothing to cancel"),
        }
        assert_eq!(*seen.borrow(), vec![OK]);
    }

    struct ItemProbe(Rc<RefCell<Vec<Completion>>>);
    impl StreamOrphan for ItemProbe {
        fn orphan_item(&mut self, c: Completion) {
            self.0.borrow_mut().push(c);
        }
    }

    fn item(res: i32) -> Completion {
        Completion { res, flags: 0 }
    }

    #[test]
    fn stream_delivers_items_in_order_then_ends() {
        let (w, count) = waker();
        let mut l = Lifecycle::Streaming(Stream::new(Some(&w)));
        assert!(matches!(l.on_item(item(1), false), OnItem::Wake(_)));
        let _ = l.on_item(item(2), false);
        assert!(!l.is_completed());
        assert_eq!(l.poll_item(&w), Poll::Ready((item(1), false)));
        assert_eq!(l.poll_item(&w), Poll::Ready((item(2), false)));
        assert_eq!(l.poll_item(&w), Poll::Pending);
        match l.on_cqe(item(3)) {
            OnCqe::Wake(w) => w.wake(),
            _ => panic!("the final CQE wakes the stream"),
        }
        assert!(l.is_completed());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(l.poll_item(&w), Poll::Ready((item(3), true)));
    }

    #[test]
    fn dropped_stream_hands_every_item_to_the_orphan() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (w, _) = waker();
        let mut l = Lifecycle::Streaming(Stream::new(Some(&w)));
        let _ = l.on_item(item(1), false);
        // Dropped with one item queued: it goes to the orphan at once; the op is cancelled.
        assert!(matches!(
            l.on_drop_stream(Box::new(ItemProbe(seen.clone()))),
            OnDropStream::Cancel
        ));
        assert!(l.is_ignored());
        assert!(matches!(l.on_item(item(2), false), OnItem::Nothing));
        assert!(matches!(l.on_cqe(item(-libc::ECANCELED)), OnCqe::Freed));
        assert_eq!(
            *seen.borrow(),
            vec![item(1), item(2), item(-libc::ECANCELED)]
        );
    }

    #[test]
    fn dropped_after_the_end_frees_without_cancel() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let mut l = Lifecycle::Streaming(Stream::new(None).ended_with(item(5)));
        assert!(l.is_completed());
        assert!(matches!(
            l.on_drop_stream(Box::new(ItemProbe(seen.clone()))),
            OnDropStream::Free
        ));
        assert_eq!(*seen.borrow(), vec![item(5)]);
    }

    #[test]
    fn duplicate_final_cqe_keeps_the_first() {
        let (w, _) = waker();
        let mut l = Lifecycle::Submitted;
        let _ = l.on_cqe(OK);
        let _ = l.on_cqe(Completion { res: -1, flags: 0 });
        assert_eq!(l.poll(&w), Poll::Ready(OK));
    }
}
