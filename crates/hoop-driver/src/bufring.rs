//! Provided buffer rings (`IORING_REGISTER_PBUF_RING`, 5.19): a pool of equal buffers the kernel
//! picks from when data arrives, so an idle connection holds no buffer.
//!
//! A [`BufRing`] is registered with the current runtime's ring when the kernel supports it
//! (multishot recv needs 6.0); otherwise (older kernel, or the epoll driver) the same pool is a
//! user-space free list and each receive takes a buffer from it. Either way a received buffer is a
//! [`RingBuf`], which goes back to the pool exactly once, when it is dropped (invariant 15).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::ops::Deref;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll, Waker};

use io_uring::types::BufRingEntry;

use crate::buf::IoBuf;
use crate::driver::Driver;

const PAGE: usize = 4096;

/// Memory the kernel ring reads: `entries` ring entries, page-aligned.
struct RingMem {
    ptr: NonNull<BufRingEntry>,
    layout: std::alloc::Layout,
    /// Our copy of the tail (the kernel only reads the shared one).
    tail: Cell<u16>,
}

struct Inner {
    bgid: u16,
    entries: u16,
    buf_len: usize,
    /// `entries * buf_len` bytes, never moved or resized while the pool lives.
    bufs: NonNull<u8>,
    bufs_layout: std::alloc::Layout,
    /// Registered with this driver's ring (kernel mode); `None`: a user-space free list.
    kernel: Option<(RingMem, Driver)>,
    free: RefCell<Vec<u16>>,
    /// Buffers handed to the user and not yet returned.
    out: Cell<usize>,
    /// Receives waiting for a buffer ([`BufRing::poll_available_queued`]), oldest first: each
    /// returned buffer wakes one. A slot is `None` once its waiter left. Waiters are known by
    /// ticket (`queue_head` + index), so a waiter finds its own slot in O(1).
    queue: RefCell<VecDeque<Option<Waker>>>,
    /// The ticket of `queue[0]`.
    queue_head: Cell<u64>,
    /// Waiters of [`BufRing::poll_available`] (no ticket): all woken by each returned buffer.
    waiters: RefCell<Vec<Waker>>,
    /// Wake-ups and waiter polls, for tests of the cost (see `BufRing::wait_work`).
    work: Cell<u64>,
}

/// A receive's place in a [`BufRing`]'s queue of waiters for a buffer: `None` when not queued.
/// Kept by the waiter across polls and given back with [`BufRing::leave_queue`] when it stops
/// waiting.
pub type WaitTicket = Option<u64>;

/// A pool of `entries` buffers of `buf_len` bytes for receives. Cheap to clone (shared); not
/// `Send`. Create it inside a runtime.
#[derive(Clone)]
pub struct BufRing {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for BufRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufRing")
            .field("bgid", &self.inner.bgid)
            .field("entries", &self.inner.entries)
            .field("buf_len", &self.inner.buf_len)
            .field("kernel", &self.is_kernel())
            .field("available", &self.available())
            .finish()
    }
}

impl BufRing {
    /// A pool of `entries` (a power of two, at most 32768) buffers of `buf_len` bytes, registered
    /// as a provided buffer ring with the current runtime's io_uring when the kernel supports it.
    pub fn new(entries: u16, buf_len: usize) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, true)
    }

    /// The same pool as a user-space free list, never registered with the kernel (the fallback
    /// path, forced: for tests and comparisons).
    pub fn new_user(entries: u16, buf_len: usize) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, false)
    }

    fn with_mode(entries: u16, buf_len: usize, kernel: bool) -> io::Result<BufRing> {
        if entries == 0 || !entries.is_power_of_two() || entries > 32768 || buf_len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer ring needs a power-of-two number of entries (1..=32768) and buf_len > 0",
            ));
        }
        let size = entries as usize * buf_len;
        let bufs_layout = std::alloc::Layout::from_size_align(size, PAGE)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size.
        let bufs = NonNull::new(unsafe { std::alloc::alloc(bufs_layout) })
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let driver = Driver::current();
        let kernel = match (kernel, driver) {
            (true, Some(d)) if d.supports_buf_ring() => register(&d, entries).ok(),
            _ => None,
        };
        let bgid = kernel.as_ref().map_or(0, |(_, bgid, _)| *bgid);
        let inner = Inner {
            bgid,
            entries,
            buf_len,
            bufs,
            bufs_layout,
            kernel: kernel.map(|(mem, _, d)| (mem, d)),
            free: RefCell::new(Vec::new()),
            out: Cell::new(0),
            queue: RefCell::new(VecDeque::new()),
            queue_head: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
            work: Cell::new(0),
        };
        LIVE.with(|n| n.set(n.get() + 1));
        let ring = BufRing {
            inner: Rc::new(inner),
        };
        for bid in 0..entries {
            ring.inner.provide(bid);
        }
        Ok(ring)
    }

    /// Test hook: buffer rings made on this thread whose memory is not freed yet.
    #[doc(hidden)]
    pub fn live_on_this_thread() -> usize {
        LIVE.with(|n| n.get())
    }

    /// Whether the kernel picks buffers from this ring (else it is a user-space free list).
    pub fn is_kernel(&self) -> bool {
        self.inner.kernel.is_some()
    }

    /// The buffer group id the ring is registered under.
    pub fn bgid(&self) -> u16 {
        self.inner.bgid
    }

    /// Size of each buffer.
    pub fn buf_len(&self) -> usize {
        self.inner.buf_len
    }

    /// Buffers not handed out.
    pub fn available(&self) -> usize {
        self.inner.entries as usize - self.inner.out.get()
    }

    /// Number of buffers.
    pub fn entries(&self) -> u16 {
        self.inner.entries
    }

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
        if self.available() > 0 {
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

    /// The buffer the kernel filled with `len` bytes (from a CQE's buffer id).
    pub(crate) fn take_kernel(&self, bid: u16, len: usize) -> RingBuf {
        self.inner.out.set(self.inner.out.get() + 1);
        RingBuf {
            ring: self.clone(),
            bid,
            len: len.min(self.inner.buf_len),
        }
    }

    /// A free buffer from the user-space list: its id and address.
    pub(crate) fn take_user(&self) -> Option<(u16, *mut u8)> {
        let bid = self.inner.free.borrow_mut().pop()?;
        self.inner.out.set(self.inner.out.get() + 1);
        Some((bid, self.inner.buf_ptr(bid)))
    }

    /// A buffer taken with `take_user` that now holds `len` bytes.
    pub(crate) fn filled_user(&self, bid: u16, len: usize) -> RingBuf {
        RingBuf {
            ring: self.clone(),
            bid,
            len: len.min(self.inner.buf_len),
        }
    }

    /// Gives back a buffer the kernel picked for a CQE that carries no data.
    pub(crate) fn give_back_kernel(&self, bid: u16) {
        self.inner.provide(bid);
    }

    /// Gives back a buffer taken with `take_user` that carries no data.
    pub(crate) fn give_back(&self, bid: u16) {
        self.inner.out.set(self.inner.out.get().saturating_sub(1));
        self.inner.provide(bid);
    }
}

impl Inner {
    fn buf_ptr(&self, bid: u16) -> *mut u8 {
        // SAFETY: bid < entries, so the offset is inside the allocation.
        unsafe { self.bufs.as_ptr().add(bid as usize * self.buf_len) }
    }

    /// Puts buffer `bid` where the next receive can take it, and wakes who waits for one.
    fn provide(&self, bid: u16) {
        match &self.kernel {
            Some((mem, _)) => {
                let tail = mem.tail.get();
                let mask = self.entries - 1;
                // SAFETY: `tail & mask` < entries: inside the ring memory, which we own; the
                // kernel reads an entry only after the tail store below publishes it.
                let e = unsafe { &mut *mem.ptr.as_ptr().add((tail & mask) as usize) };
                e.set_addr(self.buf_ptr(bid) as u64);
                e.set_len(self.buf_len as u32);
                e.set_bid(bid);
                let new = tail.wrapping_add(1);
                mem.tail.set(new);
                // SAFETY: the ring base is page-aligned and initialized; `tail` points to the
                // shared tail field, a u16 the kernel reads atomically.
                unsafe {
                    let t = BufRingEntry::tail(mem.ptr.as_ptr()) as *const AtomicU16;
                    (*t).store(new, Ordering::Release);
                }
            }
            None => self.free.borrow_mut().push(bid),
        }
        // Woken outside the `waiters` borrow, and after the drain if this runs inside one
        // (a received buffer returned by an orphan handler): rule 11.
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            crate::deferred::wake(w);
        }
        // One queued waiter per returned buffer.
        self.wake_queued(1);
    }

    /// Wakes up to `n` queued waiters, oldest first (their places are freed: a woken waiter
    /// that finds no buffer queues again at the back).
    fn wake_queued(&self, n: usize) {
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
    fn forget(&self, ticket: u64) -> bool {
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

thread_local! {
    /// Rings made on this thread and not freed (a `BufRing` never leaves its thread).
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Every op using the ring holds a clone, so no receive is in flight: unregister, then
        // free. If the driver is busy (dropped from inside a drain) or gone, the registration
        // and the memory are leaked rather than freed under the kernel.
        if let Some((mem, driver)) = self.kernel.take() {
            if driver.unregister_buf_ring(self.bgid).is_err() {
                return;
            }
            // SAFETY: allocated with this layout in `register`, unregistered above.
            unsafe { std::alloc::dealloc(mem.ptr.as_ptr().cast(), mem.layout) };
        }
        // SAFETY: allocated with this layout in `with_mode`; no receive uses it any more.
        unsafe { std::alloc::dealloc(self.bufs.as_ptr(), self.bufs_layout) };
        LIVE.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

fn register(driver: &Driver, entries: u16) -> io::Result<(RingMem, u16, Driver)> {
    let layout = std::alloc::Layout::from_size_align(
        entries as usize * std::mem::size_of::<BufRingEntry>(),
        PAGE,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: non-zero size; zeroed memory is a valid (empty) ring.
    let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>())
        .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
    let mem = RingMem {
        ptr,
        layout,
        tail: Cell::new(0),
    };
    match driver.register_buf_ring(ptr.as_ptr() as u64, entries) {
        Ok(bgid) => Ok((mem, bgid, driver.clone())),
        Err(e) => {
            // SAFETY: allocated just above with this layout; the kernel refused it.
            unsafe { std::alloc::dealloc(ptr.as_ptr().cast(), layout) };
            Err(e)
        }
    }
}

/// A received buffer from a [`BufRing`]. Dereferences to the received bytes; dropping it gives
/// the buffer back to the ring (once). It is also an [`IoBuf`], so it can be sent as it is.
pub struct RingBuf {
    ring: BufRing,
    bid: u16,
    len: usize,
}

impl std::fmt::Debug for RingBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingBuf")
            .field("bid", &self.bid)
            .field("len", &self.len)
            .finish()
    }
}

impl RingBuf {
    /// The buffer id within its ring.
    pub fn bid(&self) -> u16 {
        self.bid
    }
}

impl Deref for RingBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the buffer is ours until dropped (the kernel or the free list handed it out),
        // and its first `len` bytes were written by the receive.
        unsafe { std::slice::from_raw_parts(self.ring.inner.buf_ptr(self.bid), self.len) }
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        self.ring.give_back(self.bid);
    }
}

// SAFETY: the bytes live in the ring's allocation, which the RingBuf keeps alive (it holds the
// ring) and which does not move; nobody else writes the buffer while the RingBuf exists.
unsafe impl IoBuf for RingBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ring.inner.buf_ptr(self.bid)
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    thread_local! {
        static RING: RefCell<Option<BufRing>> = const { RefCell::new(None) };
        static REENTERED: Cell<bool> = const { Cell::new(false) };
    }

    /// A waker that, when woken, takes the returned buffer and waits again on the same ring:
    /// it touches the ring's waiter list from inside `wake`.
    struct Reenter;
    impl Wake for Reenter {
        fn wake(self: Arc<Self>) {
            RING.with(|r| {
                let r = r.borrow();
                let ring = r.as_ref().expect("ring set");
                let _ = ring.take_user();
                let waker = Waker::from(self.clone());
                let mut cx = Context::from_waker(&waker);
                assert!(ring.poll_available(&mut cx).is_pending());
                REENTERED.with(|x| x.set(true));
            });
        }
    }

    /// Rule 11: a buffer's return wakes its waiters outside the ring's own borrow, so a waker
    /// that runs synchronously may use the ring.
    #[test]
    fn returning_a_buffer_wakes_outside_every_borrow() {
        let ring = BufRing::new_user(2, 64).unwrap();
        let (a, _) = ring.take_user().unwrap();
        let (_b, _) = ring.take_user().unwrap();
        RING.with(|r| *r.borrow_mut() = Some(ring.clone()));
        let waker = Waker::from(Arc::new(Reenter));
        let mut cx = Context::from_waker(&waker);
        assert!(ring.poll_available(&mut cx).is_pending());
        ring.give_back(a);
        assert!(REENTERED.with(|x| x.get()), "the waiter was woken");
        RING.with(|r| *r.borrow_mut() = None);
    }

    /// Counts its wake-ups.
    struct Count(std::sync::atomic::AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn woken(c: &Arc<Count>) -> usize {
        c.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Issue 24: N receives waiting for a buffer cost O(N) in all. Each returned buffer wakes
    /// one waiter (the oldest), polling again while queued keeps the place without a scan, and
    /// a woken waiter that leaves without its buffer hands the wake-up on. (The list it
    /// replaces was scanned on every poll and woken whole on every returned buffer: O(N^2).)
    #[test]
    fn n_waiters_cost_linear_work_and_each_buffer_wakes_one() {
        const N: usize = 2000;
        let ring = BufRing::new_user(1, 64).unwrap();
        let (mut bid, _) = ring.take_user().unwrap();
        let counts: Vec<Arc<Count>> = (0..N)
            .map(|_| Arc::new(Count(Default::default())))
            .collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        let mut tickets: Vec<WaitTicket> = vec![None; N];
        for round in 0..3 {
            for (w, t) in wakers.iter().zip(tickets.iter_mut()) {
                let mut cx = Context::from_waker(w);
                assert!(ring.poll_available_queued(&mut cx, t).is_pending());
            }
            assert_eq!(
                ring.queued(),
                N,
                "polled again (round {round}), queued once"
            );
        }
        let before = ring.wait_work();
        for i in 0..N {
            ring.give_back(bid);
            assert_eq!(woken(&counts[i]), 1, "waiter {i} woken, in order");
            if i + 1 < N {
                assert_eq!(woken(&counts[i + 1]), 0, "one waiter per buffer");
            }
            let mut cx = Context::from_waker(&wakers[i]);
            assert!(ring
                .poll_available_queued(&mut cx, &mut tickets[i])
                .is_ready());
            assert_eq!(tickets[i], None, "the ticket is used up");
            bid = ring.take_user().unwrap().0;
        }
        assert_eq!(ring.queued(), 0);
        let work = ring.wait_work() - before;
        assert!(work <= 3 * N as u64, "{work} steps for {N} waiters");

        // A woken waiter that leaves without the buffer wakes the next one; one that leaves
        // while queued wakes nobody.
        let mut t = [None, None, None];
        for (w, t) in wakers.iter().zip(t.iter_mut()) {
            let mut cx = Context::from_waker(w);
            assert!(ring.poll_available_queued(&mut cx, t).is_pending());
        }
        ring.leave_queue(&mut t[1]);
        assert_eq!(ring.queued(), 2);
        ring.give_back(bid);
        assert_eq!(woken(&counts[0]), 2);
        ring.leave_queue(&mut t[0]);
        assert_eq!(
            (woken(&counts[1]), woken(&counts[2])),
            (1, 2),
            "handed on to the third"
        );
        assert_eq!(ring.queued(), 0);
        let mut cx = Context::from_waker(&wakers[2]);
        assert!(ring.poll_available_queued(&mut cx, &mut t[2]).is_ready());
    }
}

/// A model test of the buffer ids (issue 14): random take / fill / give back / drop sequences on
/// a user-space ring, against a model of which ids are out. An id is never handed out twice
/// while out, every id comes back exactly once, and `available()` always says how many are in.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod model {
    use super::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    pub(crate) enum Action {
        /// A receive takes a free buffer.
        Take,
        /// The receive of taken buffer `i % n` delivered `len` bytes: a `RingBuf` now holds it.
        Fill(usize, usize),
        /// The receive of taken buffer `i % n` carried no data: the id goes straight back.
        GiveBack(usize),
        /// The user drops filled buffer `i % n`.
        DropBuf(usize),
        /// The user drops the ring handle (buffers out keep the ring alive).
        DropRing,
    }

    /// Decodes fuzz input: the first byte picks the ring size, then 3 bytes per action.
    pub(crate) fn decode(data: &[u8]) -> (u16, Vec<Action>) {
        let Some((&first, rest)) = data.split_first() else {
            return (1, Vec::new());
        };
        let entries = [1u16, 2, 8, 32][usize::from(first % 4)];
        let actions = rest
            .chunks_exact(3)
            .map(|b| {
                let i = usize::from(b[1]);
                match b[0] % 12 {
                    0..=3 => Action::Take,
                    4..=6 => Action::Fill(i, usize::from(b[2]) * 3),
                    7 => Action::GiveBack(i),
                    8..=10 => Action::DropBuf(i),
                    _ => Action::DropRing,
                }
            })
            .collect();
        (entries, actions)
    }

    pub(crate) fn run(entries: u16, actions: Vec<Action>) -> Result<(), String> {
        let ring = BufRing::new_user(entries, 512).expect("ring");
        let mut handle = Some(ring.clone());
        let watch = ring; // kept to observe `available()` after the user's handle is gone
        let mut taken: Vec<u16> = Vec::new();
        let mut filled: Vec<RingBuf> = Vec::new();
        let mut out: BTreeSet<u16> = BTreeSet::new();
        for a in actions {
            match a {
                Action::Take => match watch.take_user() {
                    Some((bid, _)) => {
                        check!(bid < entries);
                        check!(out.insert(bid), "id {} handed out twice", bid);
                        taken.push(bid);
                    }
                    None => check_eq!(out.len(), entries as usize, "no id while some are in"),
                },
                Action::Fill(i, len) if !taken.is_empty() => {
                    let bid = taken.swap_remove(i % taken.len());
                    let buf = watch.filled_user(bid, len);
                    check_eq!(buf.bytes_init(), len.min(512));
                    filled.push(buf);
                }
                Action::GiveBack(i) if !taken.is_empty() => {
                    let bid = taken.swap_remove(i % taken.len());
                    watch.give_back(bid);
                    check!(out.remove(&bid));
                }
                Action::DropBuf(i) if !filled.is_empty() => {
                    let buf = filled.swap_remove(i % filled.len());
                    let bid = buf.bid;
                    drop(buf);
                    check!(out.remove(&bid), "id {} returned twice", bid);
                }
                Action::DropRing => drop(handle.take()),
                _ => {}
            }
            check_eq!(watch.available(), entries as usize - out.len());
        }
        for bid in taken.drain(..) {
            watch.give_back(bid);
            check!(out.remove(&bid));
        }
        drop(filled);
        check_eq!(watch.available(), entries as usize, "every id came back");
        let mut free = watch.inner.free.borrow().clone();
        free.sort_unstable();
        check_eq!(
            free,
            (0..entries).collect::<Vec<u16>>(),
            "each id in the free list once"
        );
        Ok(())
    }

    #[cfg(test)]
    mod props {
        use super::*;
        use proptest::prelude::*;

        fn action() -> impl Strategy<Value = Action> {
            prop_oneof![
                4 => Just(Action::Take),
                3 => (any::<usize>(), 0..700usize).prop_map(|(i, l)| Action::Fill(i, l)),
                1 => any::<usize>().prop_map(Action::GiveBack),
                3 => any::<usize>().prop_map(Action::DropBuf),
                1 => Just(Action::DropRing),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn buffer_ids_match_the_model(
                entries in prop_oneof![Just(1u16), Just(2), Just(8), Just(32)],
                actions in proptest::collection::vec(action(), 1..200),
            ) {
                run(entries, actions).map_err(TestCaseError::fail)?;
            }
        }

        #[test]
        fn fuzz_decoding_runs_the_same_model() {
            let bytes: Vec<u8> = (0..3001u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
                .collect();
            let (entries, actions) = decode(&bytes);
            run(entries, actions).unwrap();
        }
    }
}
