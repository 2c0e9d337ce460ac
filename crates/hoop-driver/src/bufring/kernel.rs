//! The kernel's side of a provided buffer ring: its page-aligned ring memory, its registration
//! with a driver under a buffer id range of its own, and the probe for incremental rings.

use std::cell::Cell;
use std::io;
use std::ptr::NonNull;
use std::rc::Rc;

use io_uring::types::BufRingEntry;

use super::book::Book;
use crate::driver::Driver;

pub(super) const PAGE: usize = 4096;

/// Memory the kernel ring reads: `entries` ring entries, page-aligned.
pub(super) struct RingMem {
    pub(super) ptr: NonNull<BufRingEntry>,
    pub(super) layout: std::alloc::Layout,
    /// Our copy of the tail (the kernel only reads the shared one).
    pub(super) tail: Cell<u16>,
}

/// Ring memory for `entries` entries, zeroed (an empty ring).
pub(super) fn ring_mem(entries: u16) -> io::Result<RingMem> {
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
pub(super) fn register(
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
