//! Heap buffers with a chosen alignment, for `O_DIRECT` I/O.
//!
//! A file opened with `O_DIRECT` moves data straight between the device and the caller's
//! memory, so the kernel requires the buffer's address, the length and the file offset to be
//! multiples of the file's logical block size (usually 512 or 4096 bytes); otherwise the read or
//! write fails with `EINVAL`. A `Vec<u8>` only guarantees an alignment of 1. An [`AlignedBuf`]
//! starts on a boundary of the alignment it was made with; keeping lengths and offsets aligned
//! is up to the caller.
//!
//! The memory is zeroed when the buffer is made, so every byte of the capacity is always
//! initialized: [`AlignedBuf::set_len`] is safe for any length up to the capacity.

use std::alloc::Layout;
use std::io;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::buf::{IoBuf, IoBufMut};

/// The alignment [`AlignedBuf::for_direct_io`] uses: 4096 bytes, a multiple of every logical
/// block size Linux file systems and block devices use (512 and 4096), so any file opened with
/// `O_DIRECT` accepts it.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// A heap buffer of a fixed capacity whose first byte is aligned to a power of two, for
/// `O_DIRECT` files (see the module docs). It dereferences to its first [`len`](Self::len)
/// bytes: what a write sends, what a read delivered.
///
/// It is an [`IoBuf`]/[`IoBufMut`] of `bytes_total() == capacity()`, so reads and writes take
/// it by value like a `Vec<u8>`; a [`slice`](IoBuf::slice) of it keeps the alignment only if
/// the slice starts at a multiple of it.
pub struct AlignedBuf {
    /// `layout.size()` zeroed bytes aligned to `layout.align()`, owned by this value.
    ptr: NonNull<u8>,
    layout: Layout,
    /// Bytes in use; `len <= layout.size()`.
    len: usize,
}

impl AlignedBuf {
    /// An empty buffer (`len() == 0`) of `capacity` bytes aligned to `align` bytes.
    ///
    /// Fails with `InvalidInput` if `align` is not a power of two, `capacity` is 0, or the
    /// size rounded up to the alignment overflows `isize`; with `OutOfMemory` if the allocation
    /// fails. Never panics.
    pub fn new(capacity: usize, align: usize) -> io::Result<AlignedBuf> {
        if !align.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("AlignedBuf alignment {align} is not a power of two"),
            ));
        }
        if capacity == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AlignedBuf capacity must be greater than 0",
            ));
        }
        let layout = Layout::from_size_align(capacity, align).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("AlignedBuf of {capacity} bytes aligned to {align} is too large"),
            )
        })?;
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf {
            ptr,
            layout,
            len: 0,
        })
    }

    /// An empty buffer of `capacity` bytes aligned to [`DIRECT_IO_ALIGN`] (4096 bytes), which
    /// every `O_DIRECT` file accepts (the logical block size is 512 or 4096). Lengths and
    /// offsets must still be multiples of the file's block size; a `capacity` that is a
    /// multiple of 4096 is always right.
    pub fn for_direct_io(capacity: usize) -> io::Result<AlignedBuf> {
        AlignedBuf::new(capacity, DIRECT_IO_ALIGN)
    }

    /// A buffer of `capacity` zero bytes, all in use (`len() == capacity`), aligned to `align`;
    /// errors as for [`new`](Self::new).
    pub fn zeroed(capacity: usize, align: usize) -> io::Result<AlignedBuf> {
        let mut b = AlignedBuf::new(capacity, align)?;
        b.len = capacity;
        Ok(b)
    }

    /// Number of bytes in use: what a write sends, what [`Deref`] shows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `len()` is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the buffer: what a read may fill.
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    /// The alignment of the first byte, in bytes (a power of two).
    pub fn align(&self) -> usize {
        self.layout.align()
    }

    /// Sets the number of bytes in use. Every byte of the capacity is initialized (zeroed at
    /// allocation), so any length up to the capacity is safe.
    ///
    /// # Panics
    /// If `len > capacity()`.
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "AlignedBuf::set_len({len}) beyond its capacity {}",
            self.capacity()
        );
        self.len = len;
    }

    /// Sets `len()` to 0 (the bytes stay as they are).
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
        // SAFETY: the allocation holds `capacity()` initialized bytes (zeroed, then written
        // only through this value or by an operation that owned it) and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity()) }
    }

    /// The whole buffer, `capacity()` bytes, for writing; set [`len`](Self::len) afterwards.
    pub fn as_mut_slice_full(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice_full`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout and not freed since; an operation that
        // lent the memory to the kernel owned this value until its final completion, so the
        // kernel no longer uses it.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("align", &self.align())
            .finish()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.as_slice_full()[..self.len]
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.as_mut_slice_full()[..len]
    }
}

// SAFETY: the buffer owns its allocation exclusively (no aliasing pointer exists outside the
// value), like a `Box<[u8]>`, so it may move to another thread and be shared by reference.
unsafe impl Send for AlignedBuf {}
// SAFETY: `&AlignedBuf` only gives read access to the bytes.
unsafe impl Sync for AlignedBuf {}

// SAFETY: the bytes are in a heap allocation that this value owns and frees only in Drop, so
// their address does not change when the value moves; the first `len` of them are initialized
// (all `capacity` are: the allocation is zeroed).
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

// SAFETY: as above; the allocation is writable for `capacity()` bytes.
unsafe impl IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    unsafe fn set_filled(&mut self, n: usize) {
        self.len = n.min(self.capacity());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_is_aligned_and_memory_zeroed() {
        for align in [1usize, 2, 512, 4096, 65536] {
            for cap in [1usize, 100, 4096, 3 * 4096 + 7] {
                let b = AlignedBuf::new(cap, align).unwrap();
                assert_eq!(
                    b.stable_ptr() as usize % align,
                    0,
                    "align {align} cap {cap}"
                );
                assert_eq!((b.len(), b.capacity(), b.align()), (0, cap, align));
                assert_eq!(b.bytes_total(), cap);
                assert!(b.as_slice_full().iter().all(|&x| x == 0));
            }
        }
        let d = AlignedBuf::for_direct_io(8192).unwrap();
        assert_eq!(d.align(), DIRECT_IO_ALIGN);
        assert_eq!(d.stable_ptr() as usize % 4096, 0);
    }

    #[test]
    fn len_rules() {
        let mut b = AlignedBuf::zeroed(4096, 512).unwrap();
        assert_eq!(b.len(), 4096);
        assert_eq!(b.bytes_init(), 4096);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(&b[..], b"");
        assert_eq!(b.copy_from(b"hello"), 5);
        assert_eq!(&b[..], b"hello");
        b[0] = b'j';
        assert_eq!(&b[..], b"jello");
        b.set_len(4096);
        assert_eq!(&b[..5], b"jello");
        assert!(b[5..].iter().all(|&x| x == 0));
        // A read into it sets len to exactly the bytes read, never past the capacity.
        b.set_len(10);
        // SAFETY: every byte of the buffer is initialized (zeroed allocation).
        unsafe { b.set_filled(3) };
        assert_eq!(b.len(), 3);
        // SAFETY: as above.
        unsafe { b.set_filled(100) };
        assert_eq!(b.len(), 100);
        // SAFETY: as above; the length is clamped to the capacity.
        unsafe { b.set_filled(1 << 20) };
        assert_eq!(b.len(), 4096);
        // copy_from keeps what fits.
        let big = vec![7u8; 5000];
        assert_eq!(b.copy_from(&big), 4096);
        assert!(b.iter().all(|&x| x == 7));
        // A slice of it is a view at the right address.
        let base = b.stable_ptr() as usize;
        let s = b.slice(512..1024);
        assert_eq!(s.stable_ptr() as usize, base + 512);
        assert_eq!(s.bytes_total(), 512);
    }

    #[test]
    #[should_panic(expected = "beyond its capacity")]
    fn set_len_past_capacity_panics() {
        AlignedBuf::new(16, 16).unwrap().set_len(17);
    }

    #[test]
    fn bad_arguments_are_invalid_input() {
        for (cap, align) in [
            (4096, 0),
            (4096, 3),
            (4096, 4097),
            (0, 4096),
            (usize::MAX, 4096),
            (isize::MAX as usize, 4096),
        ] {
            let e = AlignedBuf::new(cap, align).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{cap} {align}: {e}");
        }
        assert!(AlignedBuf::zeroed(0, 8).is_err());
        assert!(AlignedBuf::for_direct_io(0).is_err());
    }

    #[test]
    fn send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AlignedBuf>();
        let b = AlignedBuf::zeroed(64, 64).unwrap();
        let b = std::thread::spawn(move || b).join().unwrap();
        assert_eq!(b.len(), 64);
    }
}
