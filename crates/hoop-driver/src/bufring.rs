//! Provided buffer rings (`IORING_REGISTER_PBUF_RING`, 5.19): a pool of equal buffers the kernel
//! picks from when data arrives, so an idle connection holds no buffer.
//!
//! A [`BufRing`] is registered with the current runtime's ring when the kernel supports it
//! (multishot recv needs 6.0); otherwise (older kernel, or the epoll driver) the same pool is a
//! user-space free list and each receive takes a buffer from it. Either way a received buffer is a
//! [`RingBuf`], which goes back to the pool exactly once, when it is dropped (a buffer id
//! returned twice would corrupt the ring).
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
//! So the driver settles each buffer CQE as it reaps it (`book::on_cqe`), in the kernel's order:
//! the bytes it covers become a record of segments (buffer, offset, length), each holding a
//! reference on its buffer, and the CQE carries the record's index instead of the buffer id
//! (`book::F_REC`). The receive turns the record into [`RingBuf`] views. A buffer goes back to the
//! ring once the kernel is done with it (its last CQE had no `BUF_MORE`) and every view of it
//! was dropped. The CQE's buffer id alone must name the ring: every kernel ring of a driver
//! gets its own range of buffer ids. (Ordinary rings are settled the same way: a bundle needs
//! it, see `book::on_cqe`.)
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
use std::task::Waker;

use io_uring::types::BufRingEntry;

use self::book::{Book, Segs};
pub(crate) use self::kernel::probe_inc;
use self::kernel::{register, RingMem, PAGE};
use crate::buf::IoBuf;
use crate::driver::Driver;

pub(crate) mod book;
mod kernel;
mod wait;

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
                (Some((kernel::ring_mem(entries)?, None)), book, 0)
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
        // (a received buffer returned by an orphan handler), so a waker that runs at once
        // finds nothing borrowed.
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            crate::deferred::wake(w);
        }
        // One queued waiter per returned buffer.
        self.wake_queued(1);
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
