//! Registered buffers (`IORING_REGISTER_BUFFERS`): a pool of equal, page-aligned buffers the
//! kernel has pinned once, so `READ_FIXED`/`WRITE_FIXED` skip the per-operation page pinning
//! and mapping of a plain read or write.
//!
//! A [`FixedBufPool`] is registered with the current runtime's io_uring when it is created. A
//! ring holds one table of registered buffers, so one pool per ring is registered: a second
//! pool on the same ring gets `EBUSY` from the kernel and, like a pool on the epoll driver or
//! one the kernel refuses (`ENOMEM` when the pinned pages would pass `RLIMIT_MEMLOCK`, counted
//! per user over all rings, on every kernel unless the process has `CAP_IPC_LOCK`; `EINVAL` for
//! more than 16384 buffers or buffers over 1 GiB; and kernels before 5.13, whose registration
//! waits for every operation in flight), works unregistered: the same memory, used with plain reads and writes
//! ([`FixedBufPool::is_registered`] tells which). Operations on a [`FixedBuf`] are
//! [`op::ReadFixed`](crate::op::ReadFixed) and [`op::WriteFixed`](crate::op::WriteFixed).
//!
//! Every buffer starts on a 4096-byte boundary (the stride between buffers is `buf_len`
//! rounded up to 4096), so a buffer also serves `O_DIRECT` I/O; a `buf_len` that is a multiple
//! of 4096 wastes nothing. The memory is zeroed when the pool is made, so every byte of a
//! buffer is always initialized.
//!
//! Lifetime: a [`FixedBuf`] holds the pool's memory alive, and an operation owns
//! its `FixedBuf` until its final completion, also when its future is dropped. The memory is
//! unregistered and freed when the pool and the last buffer are gone; if the driver cannot be
//! reached at that moment (busy, or gone), it is leaked rather than freed.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::ptr::NonNull;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::buf::{IoBuf, IoBufMut, Slice};
use crate::driver::Driver;

const PAGE: usize = 4096;

struct Inner {
    count: u16,
    buf_len: usize,
    /// Distance between two buffers: `buf_len` rounded up to a page.
    stride: usize,
    /// `count * stride` zeroed bytes, page-aligned, never moved or resized while the pool lives.
    mem: NonNull<u8>,
    layout: std::alloc::Layout,
    /// The driver whose ring has this memory registered as its buffer table, if any.
    registered: Option<Driver>,
    /// Why the pool is not registered (`None` when it is).
    unregistered_because: Option<io::Error>,
    /// Indices of the buffers not handed out (a stack: the most recently used comes first).
    free: RefCell<Vec<u16>>,
    /// Tasks waiting in [`FixedBufPool::take`], first come first served.
    waiters: RefCell<VecDeque<(u64, Waker)>>,
    next_waiter: Cell<u64>,
}

impl Inner {
    fn buf_ptr(&self, index: u16) -> *mut u8 {
        // SAFETY: index < count, so the offset is inside the allocation.
        unsafe { self.mem.as_ptr().add(index as usize * self.stride) }
    }

    /// Buffer `index` is free again: the first waiter, if any, gets a chance to take it.
    fn give_back(&self, index: u16) {
        self.free.borrow_mut().push(index);
        self.wake_next();
    }

    fn wake_next(&self) {
        let next = self.waiters.borrow_mut().pop_front();
        if let Some((_, w)) = next {
            w.wake();
        }
    }

    /// Whether operations on this pool's buffers may use the registered table: the pool is
    /// registered with the current thread's driver.
    fn registered_here(&self) -> bool {
        self.registered.as_ref().is_some_and(Driver::is_current)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Every operation on a buffer holds the pool alive, so none is in flight: unregister,
        // then free. If the driver is busy (dropped from inside a drain) or refuses, the table
        // stays registered and the memory is leaked rather than freed under it.
        if let Some(driver) = self.registered.take() {
            if driver.unregister_buffers().is_err() {
                return;
            }
        }
        // SAFETY: allocated with this layout in `FixedBufPool::with_mode`; no buffer exists any
        // more and the kernel no longer has it registered.
        unsafe { std::alloc::dealloc(self.mem.as_ptr(), self.layout) };
    }
}

/// A pool of `count` page-aligned buffers of `buf_len` bytes, registered with the current
/// io_uring as its fixed-buffer table when possible (see the module docs). Cheap to clone
/// (shared); not `Send`. Create it inside a runtime.
#[derive(Clone)]
pub struct FixedBufPool {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for FixedBufPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedBufPool")
            .field("count", &self.inner.count)
            .field("buf_len", &self.inner.buf_len)
            .field("registered", &self.is_registered())
            .field("available", &self.available())
            .finish()
    }
}

impl FixedBufPool {
    /// A pool of `count` buffers of `buf_len` bytes, registered with the current runtime's
    /// io_uring (`IORING_REGISTER_BUFFERS`). On the epoll driver, outside a runtime, or if the
    /// kernel refuses the registration (see the module docs: one registered pool per ring),
    /// the pool works unregistered; [`is_registered`](Self::is_registered) tells which. Fails
    /// only for a zero `count` or `buf_len`, or when the memory cannot be allocated.
    pub fn new(count: u16, buf_len: usize) -> io::Result<FixedBufPool> {
        Self::with_mode(count, buf_len, true)
    }

    /// The same pool, never registered (the fallback, forced: for tests and comparisons).
    pub fn new_unregistered(count: u16, buf_len: usize) -> io::Result<FixedBufPool> {
        Self::with_mode(count, buf_len, false)
    }

    fn with_mode(count: u16, buf_len: usize, register: bool) -> io::Result<FixedBufPool> {
        if count == 0 || buf_len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a fixed buffer pool needs count > 0 and buf_len > 0",
            ));
        }
        let too_big = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "fixed buffer pool too large for the address space",
            )
        };
        let stride = buf_len.checked_next_multiple_of(PAGE).ok_or_else(too_big)?;
        let size = stride.checked_mul(count as usize).ok_or_else(too_big)?;
        let layout = std::alloc::Layout::from_size_align(size, PAGE).map_err(|_| too_big())?;
        // SAFETY: the layout has a non-zero size (count > 0, stride >= PAGE).
        let mem = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let mut inner = Inner {
            count,
            buf_len,
            stride,
            mem,
            layout,
            registered: None,
            unregistered_because: None,
            free: RefCell::new((0..count).rev().collect()),
            waiters: RefCell::new(VecDeque::new()),
            next_waiter: Cell::new(0),
        };
        let registered = if !register {
            Err(io::Error::other("unregistered on request"))
        } else if !crate::setup::kernel_at_least(5, 13) {
            // Before 5.13 registering quiesced the ring: it waited for every operation in
            // flight, which may never complete (a receive with no data).
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "registered buffers need Linux 5.13 here",
            ))
        } else if let Some(driver) = Driver::current() {
            let iovecs: Vec<libc::iovec> = (0..count)
                .map(|i| libc::iovec {
                    iov_base: inner.buf_ptr(i).cast(),
                    iov_len: buf_len,
                })
                .collect();
            // SAFETY: each iovec is one buffer inside `mem`, which `inner` frees only after
            // unregistering the table (or leaks), in its Drop.
            unsafe { driver.register_buffers(&iovecs) }.map(|()| driver)
        } else {
            Err(io::Error::other("no runtime on this thread"))
        };
        match registered {
            Ok(driver) => inner.registered = Some(driver),
            Err(e) => inner.unregistered_because = Some(e),
        }
        Ok(FixedBufPool {
            inner: Rc::new(inner),
        })
    }

    /// Whether the pool is the ring's registered buffer table, so operations on its buffers
    /// are `READ_FIXED`/`WRITE_FIXED` (else plain reads and writes into the same memory).
    pub fn is_registered(&self) -> bool {
        self.inner.registered.is_some()
    }

    /// Why the pool is not registered: `Unsupported` on the epoll driver, the kernel's error
    /// (`EBUSY`: the ring has a table already; `ENOMEM`: over `RLIMIT_MEMLOCK`), ...; `None`
    /// when it is registered.
    pub fn unregistered_reason(&self) -> Option<&io::Error> {
        self.inner.unregistered_because.as_ref()
    }

    /// Number of buffers.
    pub fn count(&self) -> u16 {
        self.inner.count
    }

    /// Size of each buffer (its capacity).
    pub fn buf_len(&self) -> usize {
        self.inner.buf_len
    }

    /// Buffers not handed out.
    pub fn available(&self) -> usize {
        self.inner.free.borrow().len()
    }

    /// A free buffer (empty: `len() == 0`), or `None` if all are out. Does not wait.
    pub fn try_take(&self) -> Option<FixedBuf> {
        let index = self.inner.free.borrow_mut().pop()?;
        Some(FixedBuf {
            pool: self.inner.clone(),
            index,
            len: 0,
        })
    }

    /// A free buffer (empty), waiting until one is returned if all are out. Waiters are
    /// served first come, first served.
    pub fn take(&self) -> Take<'_> {
        Take {
            pool: self,
            id: None,
        }
    }
}

/// The future of [`FixedBufPool::take`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct Take<'a> {
    pool: &'a FixedBufPool,
    /// Our place in the waiter queue, once we waited.
    id: Option<u64>,
}

impl Future for Take<'_> {
    type Output = FixedBuf;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FixedBuf> {
        let this = self.get_mut();
        let inner = &this.pool.inner;
        let woken = match this.id {
            Some(id) => {
                let mut q = inner.waiters.borrow_mut();
                if let Some((_, w)) = q.iter_mut().find(|(i, _)| *i == id) {
                    // Still queued: not our turn yet.
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                    return Poll::Pending;
                }
                // A returned buffer took us off the queue.
                true
            }
            None => false,
        };
        if woken || inner.waiters.borrow().is_empty() {
            if let Some(buf) = this.pool.try_take() {
                this.id = None;
                return Poll::Ready(buf);
            }
        }
        let mut q = inner.waiters.borrow_mut();
        match this.id {
            // Woken, but the buffer went to a `try_take`: keep our place at the front.
            Some(id) => q.push_front((id, cx.waker().clone())),
            None => {
                let id = inner.next_waiter.get();
                inner.next_waiter.set(id.wrapping_add(1));
                this.id = Some(id);
                q.push_back((id, cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl Drop for Take<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let inner = &self.pool.inner;
        let queued = {
            let mut q = inner.waiters.borrow_mut();
            let before = q.len();
            q.retain(|(i, _)| *i != id);
            q.len() != before
        };
        // Woken for a buffer we will never take: pass the turn on.
        if !queued && !inner.free.borrow().is_empty() {
            inner.wake_next();
        }
    }
}

/// A buffer of a [`FixedBufPool`]. Dereferences to its first [`len`](Self::len) bytes (the
/// data a read delivered or a write will send); dropping it returns it to the pool, once.
///
/// It is an [`IoBuf`]/[`IoBufMut`] of capacity `buf_len`, so it also works with the ordinary
/// operations; with [`op::ReadFixed`](crate::op::ReadFixed) and
/// [`op::WriteFixed`](crate::op::WriteFixed) it uses the registered table.
pub struct FixedBuf {
    pool: Rc<Inner>,
    index: u16,
    len: usize,
}

impl std::fmt::Debug for FixedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedBuf")
            .field("index", &self.index)
            .field("len", &self.len)
            .field("capacity", &self.pool.buf_len)
            .finish()
    }
}

impl FixedBuf {
    /// The buffer's index in its pool (and in the ring's registered table).
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Number of bytes in use: what a write sends, what [`Deref`] shows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `len()` is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the buffer (the pool's `buf_len`): what a read may fill.
    pub fn capacity(&self) -> usize {
        self.pool.buf_len
    }

    /// Sets the number of bytes in use (every byte is always initialized: the pool's memory
    /// is zeroed when made).
    ///
    /// # Panics
    /// If `len > capacity()`.
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "FixedBuf::set_len({len}) beyond its capacity {}",
            self.capacity()
        );
        self.len = len;
    }

    /// Sets `len()` to 0.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Copies as much of `src` as fits to the start of the buffer and sets `len()` to that
    /// amount, which it returns.
    pub fn copy_from(&mut self, src: &[u8]) -> usize {
        let n = src.len().min(self.capacity());
        self.as_mut_slice_full()[..n].copy_from_slice(&src[..n]);
        self.len = n;
        n
    }

    /// The whole buffer, `capacity()` bytes, regardless of `len()`.
    pub fn as_slice_full(&self) -> &[u8] {
        // SAFETY: the buffer's `buf_len` bytes are initialized (zeroed memory) and ours while
        // this value lives; no operation holds it (operations own the FixedBuf).
        unsafe { std::slice::from_raw_parts(self.pool.buf_ptr(self.index), self.pool.buf_len) }
    }

    /// The whole buffer, `capacity()` bytes, for writing; set [`len`](Self::len) afterwards.
    pub fn as_mut_slice_full(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice_full`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.pool.buf_ptr(self.index), self.pool.buf_len) }
    }
}

impl Deref for FixedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.as_slice_full()[..self.len]
    }
}

impl DerefMut for FixedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.as_mut_slice_full()[..len]
    }
}

impl Drop for FixedBuf {
    fn drop(&mut self) {
        self.pool.give_back(self.index);
    }
}

// SAFETY: the bytes live in the pool's allocation, which the FixedBuf keeps alive (it holds
// the pool's inner) and which never moves; the buffer is handed to one FixedBuf at a time, so
// nobody else touches it while the value exists. All `buf_len` bytes are initialized.
unsafe impl IoBuf for FixedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.pool.buf_ptr(self.index)
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.pool.buf_len
    }
}

// SAFETY: `buf_len` writable bytes at a stable address, as above.
unsafe impl IoBufMut for FixedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.pool.buf_ptr(self.index)
    }
    unsafe fn set_filled(&mut self, n: usize) {
        self.len = n.min(self.pool.buf_len);
    }
}

/// A buffer inside a [`FixedBufPool`]: a [`FixedBuf`], or a [`Slice`] of one (to write the
/// rest of a buffer after a short write, say). The fixed operations take it.
pub trait FixedIoBuf: IoBuf {
    /// The whole buffer this one is (part of).
    fn fixed_buf(&self) -> &FixedBuf;

    /// The index to give `READ_FIXED`/`WRITE_FIXED`: `Some` when the buffer's pool is the
    /// registered table of the current thread's ring, else `None` (use a plain read or write).
    fn registered_index(&self) -> Option<u16> {
        let b = self.fixed_buf();
        b.pool.registered_here().then_some(b.index)
    }
}

impl FixedIoBuf for FixedBuf {
    fn fixed_buf(&self) -> &FixedBuf {
        self
    }
}

impl<T: FixedIoBuf> FixedIoBuf for Slice<T> {
    fn fixed_buf(&self) -> &FixedBuf {
        self.get_ref().fixed_buf()
    }
}

#[cfg(test)]
mod tests;
