//! A page-aligned block buffer (O_DIRECT-safe) that every peer runtime takes as its own: each
//! runtime has its own owned-buffer traits, implemented here for the one type.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::pattern::{self, ALIGN};
use crate::Block;

/// `cap` bytes, page-aligned, zeroed at first; `len` of them initialized by the last read.
pub(crate) struct Aligned {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: the buffer owns its allocation; nothing else points into it.
unsafe impl Send for Aligned {}

impl Aligned {
    /// A zeroed buffer of `cap` bytes (`cap` > 0).
    pub(crate) fn new(cap: usize) -> io::Result<Aligned> {
        let layout = Layout::from_size_align(cap.max(1), ALIGN)
            .map_err(|e| io::Error::other(format!("buffer layout: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })
            .ok_or_else(|| io::Error::other("out of memory for a block buffer"))?;
        Ok(Aligned { ptr, cap, len: 0 })
    }

    /// Every byte of the buffer, writable.
    pub(crate) fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: `cap` bytes were allocated (and zeroed) at `ptr`, owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.cap.max(1), ALIGN).expect("checked in new")
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout()) }
    }
}

impl Block for Aligned {
    fn full(&self) -> &[u8] {
        // SAFETY: `cap` bytes were allocated (and zeroed) at `ptr`, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    fn reset(&mut self) {
        pattern::poison(self.full_mut());
        self.len = 0;
    }
}

// SAFETY: the pointer is stable (a heap allocation that never moves) and valid for `cap` bytes,
// `len` of them initialized.
unsafe impl monoio::buf::IoBuf for Aligned {
    fn read_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
}

// SAFETY: as above; the runtime writes at most `bytes_total` bytes.
unsafe impl monoio::buf::IoBufMut for Aligned {
    fn write_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn bytes_total(&mut self) -> usize {
        self.cap
    }
    unsafe fn set_init(&mut self, pos: usize) {
        self.len = pos.min(self.cap);
    }
}

// SAFETY: as for monoio.
unsafe impl tokio_uring::buf::IoBuf for Aligned {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.cap
    }
}

// SAFETY: as for monoio.
unsafe impl tokio_uring::buf::IoBufMut for Aligned {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    unsafe fn set_init(&mut self, pos: usize) {
        if pos > self.len {
            self.len = pos.min(self.cap);
        }
    }
}

impl compio::buf::IoBuf for Aligned {
    fn as_init(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are initialized (all are: the buffer was zeroed).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl compio::buf::SetLen for Aligned {
    unsafe fn set_len(&mut self, len: usize) {
        self.len = len.min(self.cap);
    }
}

impl compio::buf::IoBufMut for Aligned {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: `cap` bytes at `ptr` are owned by `self`; MaybeUninit<u8> has u8's layout.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.cap) }
    }
}
