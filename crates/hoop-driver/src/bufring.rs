//! Provided buffer rings (`IORING_REGISTER_PBUF_RING`, 5.19): a pool of equal buffers the kernel
//! picks from when data arrives, so an idle connection holds no buffer.
//!
//! A [`BufRing`] is registered with the current runtime's ring when the kernel supports it
//! (multishot recv needs 6.0); otherwise (older kernel, or the epoll driver) the same pool is a
//! user-space free list and each receive takes a buffer from it. Either way a received buffer is a
//! [`RingBuf`], which goes back to the pool exactly once, when it is dropped (invariant 15).
//!
//! # Incrementally consumed rings
//!
//! [`BufRing::new_incremental`] registers the ring with `IOU_PBUF_RING_INC` (6.12) where the
//! kernel takes it: a receive then uses only as much of the head buffer as it brings, and the
//! next receive (of any connection on the ring) goes on at the next byte of the same buffer. A
//! CQE with `IORING_CQE_F_BUF_MORE` says the kernel keeps the buffer; the bytes of a CQE start
//! at the buffer's consumed offset, which only user space can track. So large buffers serve
//! many small messages, and a burst fills one buffer with many of them.
//!
//! The offset depends on the order the kernel consumed the buffer in, which is the order it
//! posts the CQEs; the runtime's tasks see them in another order (each stream polls its own).
//! So the driver settles each buffer CQE as it reaps it ([`on_cqe`]), in the kernel's order:
//! the bytes it covers become a record of segments (buffer, offset, length), each holding a
//! reference on its buffer, and the CQE carries the record's index instead of the buffer id
//! ([`F_REC`]). The receive turns the record into [`RingBuf`] views. A buffer goes back to the
//! ring once the kernel is done with it (its last CQE had no `BUF_MORE`) and every view of it
//! was dropped. The CQE's buffer id alone must name the ring: every kernel ring of a driver
//! gets its own range of buffer ids. (Ordinary rings are settled the same way: a bundle needs
//! it, see [`on_cqe`].)
//!
//! # Bundles
//!
//! With bundles (`IORING_RECVSEND_BUNDLE`, 6.10) one CQE covers several buffers: the one its
//! buffer id names, then the next ones in the order they were provided (the ring's order,
//! which [`BufRing`] records per position). A receive stream yields them one by one, in order.

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

/// `IORING_CQE_F_BUFFER`: the CQE names a buffer (its id in the upper 16 bits).
pub(crate) const F_BUFFER: u32 = 1;
/// `IORING_CQE_F_BUF_MORE`: the kernel keeps the (incrementally consumed) buffer.
pub(crate) const F_BUF_MORE: u32 = 1 << 4;
/// Set by the driver (a bit the kernel does not use) on a CQE of an incrementally consumed ring
/// it settled at reaping: the upper 16 bits are then a record index, not a buffer id, and
/// `F_BUFFER` is cleared.
pub(crate) const F_REC: u32 = 1 << 14;
/// The record index of a CQE the driver could not settle (out of step, or no room for a
/// record): its bytes cannot be located.
const REC_LOST: u16 = u16::MAX;

/// Memory the kernel ring reads: `entries` ring entries, page-aligned.
struct RingMem {
    ptr: NonNull<BufRingEntry>,
    layout: std::alloc::Layout,
    /// Our copy of the tail (the kernel only reads the shared one).
    tail: Cell<u16>,
}

/// Where one buffer stands.
#[derive(Debug, Clone, Copy, Default)]
struct BufState {
    /// Views of it alive: [`RingBuf`]s, and segments of records not taken yet.
    refs: u32,
    /// The kernel may still fill it (incremental: partly consumed, it goes on at `off`).
    kernel: bool,
    /// Counted as handed out: the kernel put bytes in it, or a receive took it from the free
    /// list; until it is provided again.
    out: bool,
    /// Bytes of it consumed so far (incremental rings; 0 otherwise).
    off: u32,
    /// The ring position it was last provided at.
    pos: u16,
}

/// A run of received bytes: `len` bytes of buffer `idx` from `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    idx: u16,
    off: u32,
    len: u32,
}

/// The segments one CQE covers, in order (one, unless it was a bundle).
#[derive(Debug, Default)]
pub(crate) struct Segs {
    first: Option<Seg>,
    rest: Vec<Seg>,
}

impl Segs {
    fn push(&mut self, s: Seg) {
        if self.first.is_none() {
            self.first = Some(s);
        } else {
            self.rest.push(s);
        }
    }
}

/// The bookkeeping of a ring's buffers, shared with the driver (which settles the CQEs of an
/// incrementally consumed ring as it reaps them). Holds no driver handle, so the driver may
/// hold it.
pub(crate) struct Book {
    /// The buffer id of buffer 0 (every kernel ring of a driver has its own id range).
    base: u16,
    entries: u16,
    buf_len: u32,
    /// Registered with `IOU_PBUF_RING_INC`.
    inc: bool,
    bufs: RefCell<Vec<BufState>>,
    /// Ring position (masked) -> buffer index, as provided: the order a bundle takes them in.
    order: RefCell<Vec<u16>>,
    /// Records of settled CQEs not taken yet, by index; `free` lists the empty places.
    recs: RefCell<Vec<Option<Segs>>>,
    free_recs: RefCell<Vec<u16>>,
    /// Buffers handed out ([`BufState::out`]).
    out: Cell<usize>,
    /// Buffers handed out that the kernel still fills (incremental: partly consumed).
    partial: Cell<usize>,
    /// CQEs that covered more than one buffer (bundles), for tests.
    multi: Cell<u64>,
}

impl Book {
    fn new(base: u16, entries: u16, buf_len: u32, inc: bool) -> Book {
        Book {
            base,
            entries,
            buf_len,
            inc,
            bufs: RefCell::new(vec![BufState::default(); entries as usize]),
            order: RefCell::new(vec![0; entries as usize]),
            recs: RefCell::new(Vec::new()),
            free_recs: RefCell::new(Vec::new()),
            out: Cell::new(0),
            partial: Cell::new(0),
            multi: Cell::new(0),
        }
    }

    /// Sets whether the kernel still fills buffer `b` (handed out), keeping `partial`.
    fn set_kernel(&self, b: &mut BufState, kernel: bool) {
        if b.kernel != kernel {
            if kernel {
                self.partial.set(self.partial.get() + 1);
            } else {
                self.partial.set(self.partial.get().saturating_sub(1));
            }
        }
        b.kernel = kernel;
    }

    /// The kernel put `res` bytes in the buffers from index `idx` on (one, or several for a
    /// bundle), `more` when the CQE had `BUF_MORE`: the segments, each holding a reference on
    /// its buffer. Mirrors the kernel's consumption: a whole buffer per CQE (or per bundle
    /// step) for an ordinary ring; for an incremental one, as many bytes as arrived from the
    /// buffer's offset, the buffer kept by the kernel while it has room. `Err` when the CQE
    /// does not fit what was provided (its bytes cannot be located): the buffers touched stay
    /// out, never reused.
    fn consume(&self, idx: u16, res: u32, more: bool) -> Result<Segs, ()> {
        let mut bufs = self.bufs.borrow_mut();
        let order = self.order.borrow();
        let mask = self.entries - 1;
        let mut segs = Segs::default();
        let mut n = res;
        let mut idx = idx;
        let mut steps = 0u32;
        let mut last = None;
        while n > 0 {
            if idx >= self.entries || steps >= u32::from(self.entries) {
                return Err(());
            }
            let b = &mut bufs[usize::from(idx)];
            // The kernel can fill only a buffer it holds: provided and untouched, or partly
            // consumed (incremental).
            if b.out && !b.kernel {
                return Err(());
            }
            if !b.out {
                b.out = true;
                b.kernel = false;
                self.out.set(self.out.get() + 1);
            }
            let this = n.min(self.buf_len - b.off);
            if this == 0 {
                return Err(());
            }
            b.refs += 1;
            segs.push(Seg {
                idx,
                off: b.off,
                len: this,
            });
            n -= this;
            if self.inc {
                b.off += this;
                self.set_kernel(b, b.off < self.buf_len);
            } else {
                self.set_kernel(b, false);
            }
            last = Some(idx);
            if n > 0 {
                if b.kernel {
                    return Err(());
                }
                idx = order[usize::from(b.pos.wrapping_add(1) & mask)];
            }
            steps += 1;
        }
        if steps > 1 {
            self.multi.set(self.multi.get() + 1);
        }
        // The kernel says it keeps the last buffer: it does (a buffer given back while the
        // kernel may write it would be unsound; one kept too long is only idle).
        if let (true, true, Some(i)) = (self.inc, more, last) {
            self.set_kernel(&mut bufs[usize::from(i)], true);
        }
        Ok(segs)
    }

    /// Settles a CQE of this (incremental) ring in the kernel's order: its record's index.
    fn deliver(&self, idx: u16, res: u32, more: bool) -> u16 {
        let Ok(segs) = self.consume(idx, res, more) else {
            return REC_LOST;
        };
        let mut recs = self.recs.borrow_mut();
        if let Some(i) = self.free_recs.borrow_mut().pop() {
            recs[usize::from(i)] = Some(segs);
            return i;
        }
        if recs.len() >= usize::from(REC_LOST) {
            // No room for another record (65,535 CQEs settled and not received): its
            // buffers stay referenced, never reused.
            return REC_LOST;
        }
        recs.push(Some(segs));
        (recs.len() - 1) as u16
    }

    /// Takes record `i` (once).
    fn take_rec(&self, i: u16) -> Option<Segs> {
        if i == REC_LOST {
            return None;
        }
        let segs = self.recs.borrow_mut().get_mut(usize::from(i))?.take()?;
        self.free_recs.borrow_mut().push(i);
        Some(segs)
    }

    /// Drops one reference on buffer `idx`: whether it is now free to provide again (the
    /// kernel done with it, no view left); it is then no longer counted out.
    fn release(&self, idx: u16) -> bool {
        let mut bufs = self.bufs.borrow_mut();
        let Some(b) = bufs.get_mut(usize::from(idx)) else {
            return false;
        };
        b.refs = b.refs.saturating_sub(1);
        if b.refs == 0 && !b.kernel && b.out {
            b.out = false;
            b.off = 0;
            self.out.set(self.out.get().saturating_sub(1));
            return true;
        }
        false
    }
}

/// A kernel ring of a driver, as the driver tracks it: its group, its buffer id range and its
/// bookkeeping.
pub(crate) struct Tracked {
    pub(crate) bgid: u16,
    pub(crate) base: u16,
    pub(crate) entries: u16,
    pub(crate) book: Rc<Book>,
}

impl Tracked {
    /// The incremental flag the ring is registered with (`IOU_PBUF_RING_INC` or 0).
    pub(crate) fn flags(book: &Book) -> u16 {
        if book.inc {
            io_uring::types::IOU_PBUF_RING_INC as u16
        } else {
            0
        }
    }
}

/// The first buffer id of a free range of `entries` ids among the tracked rings' ranges, if
/// any.
pub(crate) fn free_base(tracked: &[Tracked], entries: u16) -> Option<u16> {
    let mut ranges: Vec<(u32, u32)> = tracked
        .iter()
        .map(|t| (u32::from(t.base), u32::from(t.base) + u32::from(t.entries)))
        .collect();
    ranges.sort_unstable();
    let mut start = 0u32;
    for (lo, hi) in ranges {
        if lo >= start + u32::from(entries) {
            break;
        }
        start = start.max(hi);
    }
    (start + u32::from(entries) <= 1 << 16).then_some(start as u16)
}

/// The driver's hook for a reaped CQE that names a buffer of one of its kernel rings: settles
/// it now, in the kernel's order, and returns the flags carrying its record ([`F_REC`]); other
/// CQEs' flags come back as they were. (A bundle's next buffers are the next ring positions,
/// which user space may fill again once those buffers come back: only at reaping, before any
/// later CQE's buffers can return, are they sure to be the ones the kernel took.)
pub(crate) fn on_cqe(tracked: &[Tracked], res: i32, flags: u32) -> u32 {
    let bid = (flags >> 16) as u16;
    let Some(t) = tracked
        .iter()
        .find(|t| bid.wrapping_sub(t.base) < t.entries)
    else {
        return flags;
    };
    if res <= 0 {
        // No bytes. An incremental ring's kernel keeps the buffer (the receive recycles it);
        // an ordinary ring's buffer named so goes back (`give_back_kernel`).
        return if t.book.inc {
            flags & !F_BUFFER & 0xffff
        } else {
            flags
        };
    }
    let rec = t
        .book
        .deliver(bid - t.base, res as u32, flags & F_BUF_MORE != 0);
    (flags & 0xffff & !F_BUFFER) | F_REC | (u32::from(rec) << 16)
}

struct Inner {
    bgid: u16,
    entries: u16,
    buf_len: usize,
    /// `entries * buf_len` bytes, never moved or resized while the pool lives.
    bufs: NonNull<u8>,
    bufs_layout: std::alloc::Layout,
    /// Registered with this driver's ring (kernel mode); `None`: a user-space free list. The
    /// driver is `None` only in the model test, whose kernel is simulated.
    kernel: Option<(RingMem, Option<Driver>)>,
    book: Rc<Book>,
    free: RefCell<Vec<u16>>,
    /// Receives on this ring use bundles where the kernel has them.
    bundles: Cell<bool>,
    /// The kernel ring's driver has receive bundles (known at creation: asking the driver
    /// while it pushes the receive would borrow it twice).
    bundle_ok: bool,
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
            .field("incremental", &self.is_incremental())
            .field("available", &self.available())
            .finish()
    }
}

/// How a ring is asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    User,
    Kernel,
    Incremental,
    /// Kernel-mode bookkeeping and ring memory with no driver: the model test's kernel is
    /// simulated (incremental or not).
    #[cfg(test)]
    Simulated(bool),
}

impl BufRing {
    /// A pool of `entries` (a power of two, at most 32768) buffers of `buf_len` bytes, registered
    /// as a provided buffer ring with the current runtime's io_uring when the kernel supports it.
    pub fn new(entries: u16, buf_len: usize) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, Mode::Kernel)
    }

    /// The same pool as a user-space free list, never registered with the kernel (the fallback
    /// path, forced: for tests and comparisons).
    pub fn new_user(entries: u16, buf_len: usize) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, Mode::User)
    }

    /// A pool registered as an incrementally consumed ring (`IOU_PBUF_RING_INC`, 6.12) where
    /// the kernel takes it: each receive uses only the bytes it brings of a buffer, the next
    /// one goes on in the same buffer (see the module docs), so large buffers hold many
    /// messages. Where the kernel refuses the flag (before 6.12: `EINVAL`) it is an ordinary
    /// ring ([`is_incremental`](Self::is_incremental) says which), and as [`new`](Self::new)
    /// on the epoll driver. `buf_len` must fit in a `u32`.
    pub fn new_incremental(entries: u16, buf_len: usize) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, Mode::Incremental)
    }

    /// Whether the current runtime's kernel takes incrementally consumed buffer rings (probed
    /// once per runtime by registering one; false on epoll or outside a runtime).
    pub fn incremental_supported() -> bool {
        Driver::current().is_some_and(|d| d.buf_ring_inc_supported())
    }

    /// A ring whose kernel the model test simulates: kernel-mode bookkeeping, no driver.
    #[cfg(test)]
    fn new_simulated(entries: u16, buf_len: usize, inc: bool) -> io::Result<BufRing> {
        Self::with_mode(entries, buf_len, Mode::Simulated(inc))
    }

    fn with_mode(entries: u16, buf_len: usize, mode: Mode) -> io::Result<BufRing> {
        if entries == 0
            || !entries.is_power_of_two()
            || entries > 32768
            || buf_len == 0
            || u32::try_from(buf_len).is_err()
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer ring needs a power-of-two number of entries (1..=32768) and \
                 0 < buf_len < 4 GiB",
            ));
        }
        let size = entries as usize * buf_len;
        let bufs_layout = std::alloc::Layout::from_size_align(size, PAGE)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size.
        let bufs = NonNull::new(unsafe { std::alloc::alloc(bufs_layout) })
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let driver = Driver::current();
        let kernel = match (mode, driver) {
            (Mode::Kernel | Mode::Incremental, Some(d)) if d.supports_buf_ring() => {
                register(&d, entries, buf_len as u32, mode == Mode::Incremental).ok()
            }
            _ => None,
        };
        let bundle_ok = kernel
            .as_ref()
            .is_some_and(|(_, _, d, _)| d.supports_recv_bundle());
        let (kernel, book, bgid) = match kernel {
            Some((mem, bgid, d, book)) => (Some((mem, Some(d))), book, bgid),
            #[cfg(test)]
            None if matches!(mode, Mode::Simulated(_)) => {
                let inc = mode == Mode::Simulated(true);
                let book = Rc::new(Book::new(0, entries, buf_len as u32, inc));
                (Some((ring_mem(entries)?, None)), book, 0)
            }
            None => (
                None,
                Rc::new(Book::new(0, entries, buf_len as u32, false)),
                0,
            ),
        };
        let inner = Inner {
            bgid,
            entries,
            buf_len,
            bufs,
            bufs_layout,
            kernel,
            book,
            free: RefCell::new(Vec::new()),
            bundles: Cell::new(false),
            bundle_ok,
            queue: RefCell::new(VecDeque::new()),
            queue_head: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
            work: Cell::new(0),
        };
        LIVE.with(|n| n.set(n.get() + 1));
        let ring = BufRing {
            inner: Rc::new(inner),
        };
        for idx in 0..entries {
            ring.inner.provide(idx);
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

    /// Whether the kernel consumes this ring's buffers incrementally (`IOU_PBUF_RING_INC`).
    pub fn is_incremental(&self) -> bool {
        self.inner.kernel.is_some() && self.inner.book.inc
    }

    /// Whether receives on this ring use bundles (`IORING_RECVSEND_BUNDLE`, 6.10: one CQE for
    /// several buffers) where the kernel has them; off by default (measured on the echo server,
    /// which sends each buffer back on its own: no gain over the noise, where incremental
    /// buffers halve the CPU per 16 KiB request; DESIGN.md, "The receive path per kernel
    /// level"). Takes effect at the next arm of each receive stream.
    pub fn set_bundles(&self, on: bool) {
        self.inner.bundles.set(on);
    }

    /// Whether receives on this ring arm with bundles: asked for, a kernel ring, and a kernel
    /// that has them.
    pub fn bundles(&self) -> bool {
        self.inner.bundles.get() && self.inner.bundle_ok
    }

    /// The buffer group id the ring is registered under.
    pub fn bgid(&self) -> u16 {
        self.inner.bgid
    }

    /// Size of each buffer.
    pub fn buf_len(&self) -> usize {
        self.inner.buf_len
    }

    /// Buffers not handed out (an incremental ring's partly filled buffer counts as out from
    /// its first bytes until it is given back).
    pub fn available(&self) -> usize {
        self.inner.entries as usize - self.inner.book.out.get()
    }

    /// Buffers handed out that the kernel still fills: an incremental ring's partly consumed
    /// buffer (at most one per ring in practice), out until the kernel filled it; 0 for an
    /// ordinary ring.
    pub fn filling(&self) -> usize {
        self.inner.book.partial.get()
    }

    /// Test hook: received CQEs that covered more than one buffer (bundles) so far.
    #[doc(hidden)]
    pub fn multi_buffer_receives(&self) -> u64 {
        self.inner.book.multi.get()
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

    /// The views of `segs`, in order.
    fn views(&self, segs: Segs) -> impl Iterator<Item = RingBuf> + '_ {
        segs.first
            .into_iter()
            .chain(segs.rest)
            .map(move |s| RingBuf {
                ring: self.clone(),
                idx: s.idx,
                off: s.off,
                len: s.len,
            })
    }

    /// The buffers the kernel filled with `len` bytes from buffer id `bid` (from a CQE of an
    /// ordinary ring: one buffer, or several for a bundle), in order; `None` when the CQE does
    /// not fit the ring (its bytes cannot be located).
    pub(crate) fn take_kernel(&self, bid: u16, len: usize, out: &mut VecDeque<RingBuf>) -> bool {
        let Some(idx) = bid.checked_sub(self.inner.book.base) else {
            return false;
        };
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        match self.inner.book.consume(idx, len, false) {
            Ok(segs) => {
                out.extend(self.views(segs));
                true
            }
            Err(()) => false,
        }
    }

    /// The buffers of record `rec` (a CQE of an incremental ring the driver settled), in
    /// order; false when the driver could not settle it.
    pub(crate) fn take_record(&self, rec: u16, out: &mut VecDeque<RingBuf>) -> bool {
        match self.inner.book.take_rec(rec) {
            Some(segs) => {
                out.extend(self.views(segs));
                true
            }
            None => false,
        }
    }

    /// A free buffer from the user-space list: its id and address.
    pub(crate) fn take_user(&self) -> Option<(u16, *mut u8)> {
        let idx = self.inner.free.borrow_mut().pop()?;
        let book = &self.inner.book;
        if let Some(b) = book.bufs.borrow_mut().get_mut(usize::from(idx)) {
            b.out = true;
        }
        book.out.set(book.out.get() + 1);
        Some((idx, self.inner.buf_ptr(idx)))
    }

    /// A buffer taken with `take_user` that now holds `len` bytes.
    pub(crate) fn filled_user(&self, bid: u16, len: usize) -> RingBuf {
        if let Some(b) = self.inner.book.bufs.borrow_mut().get_mut(usize::from(bid)) {
            b.refs += 1;
        }
        RingBuf {
            ring: self.clone(),
            idx: bid,
            off: 0,
            len: len.min(self.inner.buf_len) as u32,
        }
    }

    /// Gives back a buffer the kernel picked for a CQE that carries no data (an ordinary ring;
    /// an incremental ring's kernel keeps such a buffer).
    pub(crate) fn give_back_kernel(&self, bid: u16) {
        if self.inner.book.inc {
            return;
        }
        let Some(idx) = bid.checked_sub(self.inner.book.base) else {
            return;
        };
        let idle = matches!(
            self.inner.book.bufs.borrow().get(usize::from(idx)),
            Some(b) if !b.out
        );
        if idle {
            self.inner.provide(idx);
        }
    }

    /// Gives back a buffer taken with `take_user` that carries no data.
    pub(crate) fn give_back(&self, bid: u16) {
        let book = &self.inner.book;
        let was_out = match book.bufs.borrow_mut().get_mut(usize::from(bid)) {
            Some(b) if b.out && b.refs == 0 => {
                b.out = false;
                true
            }
            _ => false,
        };
        if was_out {
            book.out.set(book.out.get().saturating_sub(1));
            self.inner.provide(bid);
        }
    }
}

impl Inner {
    fn buf_ptr(&self, idx: u16) -> *mut u8 {
        // SAFETY: idx < entries, so the offset is inside the allocation.
        unsafe { self.bufs.as_ptr().add(idx as usize * self.buf_len) }
    }

    /// Puts buffer `idx` where the next receive can take it, and wakes who waits for one.
    fn provide(&self, idx: u16) {
        match &self.kernel {
            Some((mem, _)) => {
                let tail = mem.tail.get();
                let mask = self.entries - 1;
                // Recorded before the kernel can see the entry: a bundle's CQE names its
                // first buffer, the next ones are the next positions.
                self.book.order.borrow_mut()[usize::from(tail & mask)] = idx;
                if let Some(b) = self.book.bufs.borrow_mut().get_mut(usize::from(idx)) {
                    b.pos = tail;
                }
                // SAFETY: `tail & mask` < entries: inside the ring memory, which we own; the
                // kernel reads an entry only after the tail store below publishes it.
                let e = unsafe { &mut *mem.ptr.as_ptr().add((tail & mask) as usize) };
                e.set_addr(self.buf_ptr(idx) as u64);
                e.set_len(self.buf_len as u32);
                e.set_bid(self.book.base + idx);
                let new = tail.wrapping_add(1);
                mem.tail.set(new);
                // SAFETY: the ring base is page-aligned and initialized; `tail` points to the
                // shared tail field, a u16 the kernel reads atomically.
                unsafe {
                    let t = BufRingEntry::tail(mem.ptr.as_ptr()) as *const AtomicU16;
                    (*t).store(new, Ordering::Release);
                }
            }
            None => self.free.borrow_mut().push(idx),
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
            if let Some(driver) = driver {
                if driver.unregister_buf_ring(self.bgid).is_err() {
                    return;
                }
            }
            // SAFETY: allocated with this layout in `register`, unregistered above.
            unsafe { std::alloc::dealloc(mem.ptr.as_ptr().cast(), mem.layout) };
        }
        // SAFETY: allocated with this layout in `with_mode`; no receive uses it any more.
        unsafe { std::alloc::dealloc(self.bufs.as_ptr(), self.bufs_layout) };
        LIVE.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Ring memory for `entries` entries, zeroed (an empty ring).
fn ring_mem(entries: u16) -> io::Result<RingMem> {
    let layout = std::alloc::Layout::from_size_align(
        entries as usize * std::mem::size_of::<BufRingEntry>(),
        PAGE,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: non-zero size; zeroed memory is a valid (empty) ring.
    let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>())
        .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
    Ok(RingMem {
        ptr,
        layout,
        tail: Cell::new(0),
    })
}

/// Registers a ring of `entries` with `driver` (incrementally consumed if `inc` and the kernel
/// takes it, else ordinary), under a buffer id range of its own.
fn register(
    driver: &Driver,
    entries: u16,
    buf_len: u32,
    inc: bool,
) -> io::Result<(RingMem, u16, Driver, Rc<Book>)> {
    let mem = ring_mem(entries)?;
    let free = |mem: RingMem| {
        // SAFETY: allocated in `ring_mem` with this layout; the kernel does not hold it.
        unsafe { std::alloc::dealloc(mem.ptr.as_ptr().cast(), mem.layout) };
    };
    let Some(base) = driver.free_bid_base(entries) else {
        free(mem);
        return Err(io::Error::other("no buffer id range left on this driver"));
    };
    let addr = mem.ptr.as_ptr() as u64;
    let mut try_inc = inc && driver.buf_ring_inc_supported();
    loop {
        let book = Rc::new(Book::new(base, entries, buf_len, try_inc));
        match driver.register_buf_ring(addr, entries, book.clone(), base) {
            Ok(bgid) => return Ok((mem, bgid, driver.clone(), book)),
            Err(e) if try_inc && e.raw_os_error() == Some(libc::EINVAL) => try_inc = false,
            Err(e) => {
                free(mem);
                return Err(e);
            }
        }
    }
}

/// Whether `driver`'s kernel takes an incrementally consumed ring: registers a one-entry one
/// and unregisters it.
pub(crate) fn probe_inc(driver: &Driver) -> bool {
    let Ok(mem) = ring_mem(1) else {
        return false;
    };
    // A group id the driver never hands out (it counts up from 0).
    const PROBE_BGID: u16 = u16::MAX;
    let flags = io_uring::types::IOU_PBUF_RING_INC as u16;
    let ok = driver
        .register_buf_ring_raw(mem.ptr.as_ptr() as u64, 1, PROBE_BGID, flags)
        .is_ok();
    // Unregistered before it is freed; if that fails the memory is leaked, never freed under
    // the kernel.
    if !ok || driver.unregister_buf_ring_raw(PROBE_BGID).is_ok() {
        // SAFETY: allocated in `ring_mem` with this layout; unregistered (or never registered).
        unsafe { std::alloc::dealloc(mem.ptr.as_ptr().cast(), mem.layout) };
    }
    ok
}

/// A received buffer from a [`BufRing`]. Dereferences to the received bytes; dropping it gives
/// the buffer back to the ring (once). It is also an [`IoBuf`], so it can be sent as it is.
///
/// From an incrementally consumed ring it is a view of part of a buffer, which other views
/// (other receives, of this or other connections) share: the buffer goes back once the kernel
/// is done with it and every view of it was dropped.
pub struct RingBuf {
    ring: BufRing,
    idx: u16,
    off: u32,
    len: u32,
}

impl std::fmt::Debug for RingBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingBuf")
            .field("bid", &self.bid())
            .field("offset", &self.off)
            .field("len", &self.len)
            .finish()
    }
}

impl RingBuf {
    /// The buffer id within its ring.
    pub fn bid(&self) -> u16 {
        self.ring.inner.book.base + self.idx
    }

    /// Where the bytes start in the buffer (0 unless the ring is incrementally consumed).
    pub fn offset(&self) -> usize {
        self.off as usize
    }

    fn ptr(&self) -> *const u8 {
        // SAFETY: off + len <= buf_len (the bookkeeping never hands out more), so the offset
        // stays inside the buffer.
        unsafe { self.ring.inner.buf_ptr(self.idx).add(self.off as usize) }
    }
}

impl Deref for RingBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: these bytes are ours until the view is dropped: the kernel wrote them before
        // it posted the CQE, and writes no more there (an incremental ring's kernel fills only
        // bytes past every view's, and the buffer is provided again only when no view is
        // left); `off + len` is inside the buffer.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len as usize) }
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        if self.ring.inner.book.release(self.idx) {
            self.ring.inner.provide(self.idx);
        }
    }
}

// SAFETY: the bytes live in the ring's allocation, which the RingBuf keeps alive (it holds the
// ring) and which does not move; nobody else writes them while the RingBuf exists.
unsafe impl IoBuf for RingBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len as usize
    }
    fn bytes_total(&self) -> usize {
        self.len as usize
    }
}

#[cfg(test)]
mod tests;

/// A model test of the buffer ids: random take / fill / give back / drop sequences on
/// a user-space ring, against a model of which ids are out. An id is never handed out twice
/// while out, every id comes back exactly once, and `available()` always says how many are in.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod model;

/// A model test of kernel-mode bookkeeping (ordinary and incrementally consumed rings, with and
/// without bundles) against a simulated kernel that consumes the ring as the kernel does
/// (`io_kbuf_inc_commit`: an incremental buffer keeps its place at the head, its entry's
/// address and length moved on, until it is full). CQEs are settled as the driver settles them
/// (incremental: at reaping, in the kernel's order), then received in any order, as tasks
/// do; views are dropped in any order. Checks: every view holds exactly the bytes the kernel
/// wrote for it (so no buffer was provided again, and written, while a view of it lived); the
/// kernel's ring never holds a buffer twice or one with a view alive (the partly consumed head
/// aside); `available()` counts what is out; and everything comes back at the end.
#[cfg(test)]
mod inc_model;
