//! Buffers handed to the kernel by ownership.
//!
//! An operation takes its buffer by value and gives it back with the result, so the caller can
//! never touch memory the kernel is writing. The traits are `unsafe` because the driver passes
//! the pointer they return to the kernel and relies on it staying valid, at the same address, for
//! as long as the operation owns the value, even when the value itself is moved.

use std::io;
use std::ops::{Bound, RangeBounds};

/// The result of an operation that owned a buffer: the outcome and the buffer, given back.
///
/// It is a tuple so that `let (res, buf) = stream.read(buf).await;` reads naturally; rustc's
/// `unused_must_use` lint still fires on it because its first element is an `io::Result`.
pub type BufResult<T, B> = (io::Result<T>, B);

/// A buffer the kernel may read from.
///
/// Owned: `Vec<u8>`, `String`, `Box<[u8]>`, [`StaticBuf`] (static bytes), a [`Slice`] of one,
/// and the driver's own buffers. No borrowed slice is one, whatever its lifetime: a
/// `&buf[..n]`, a `line.as_bytes()` or a `&mut [u8]` is refused by the type check with the
/// error that names the fix (call the `futures`/tokio trait method, or pass an owned buffer),
/// where an impl for `&'static [u8]` would make every shorter-lived slice a borrow-check error
/// ("`buf` does not live long enough") that names neither.
///
/// # Safety
/// `stable_ptr()` must point to `bytes_init()` initialized bytes that stay valid and at the same
/// address while the value exists and is not accessed through `&mut` — in particular when the
/// value is moved (so the bytes live on the heap or in static memory, never inline).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an owned buffer: hoop's I/O methods take the buffer by value and give it back",
    label = "borrowed bytes: the kernel needs memory the operation owns",
    note = "hoop's own `write`/`write_all` take precedence over `AsyncWriteExt`'s of the same name; for tokio's spelling call the trait: `AsyncWriteExt::write_all(&mut stream, bytes).await?`",
    note = "or pass an owned buffer: `let (res, buf) = stream.write_all(bytes.to_vec()).await;` (a `Vec<u8>`, `String`, `Box<[u8]>`, or static bytes as `StaticBuf(b\"...\")`)"
)]
pub unsafe trait IoBuf: 'static {
    /// Pointer to the first byte.
    fn stable_ptr(&self) -> *const u8;
    /// Number of initialized bytes (what a write sends).
    fn bytes_init(&self) -> usize;
    /// Total number of bytes the buffer can hold (what a read may fill).
    fn bytes_total(&self) -> usize;

    /// A view of `range` of this buffer that operations read from or write into.
    fn slice(self, range: impl RangeBounds<usize>) -> Slice<Self>
    where
        Self: Sized,
    {
        let begin = match range.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&n) => n + 1,
            Bound::Excluded(&n) => n,
            Bound::Unbounded => self.bytes_total(),
        };
        assert!(
            begin <= end && end <= self.bytes_total(),
            "slice {begin}..{end} out of a buffer of {} bytes",
            self.bytes_total()
        );
        Slice {
            buf: self,
            begin,
            end,
        }
    }
}

/// A buffer the kernel may write into.
///
/// **The read rule.** A read writes at the buffer's start, up to [`bytes_total`]
/// (`IoBuf::bytes_total`: a `Vec`'s capacity), and then the buffer's length is *exactly* the
/// number of bytes that read delivered ([`set_filled`](Self::set_filled)): bytes from an
/// earlier use are never inside the length, and an error leaves it empty. `read_exact` fills
/// exactly [`bytes_to_fill`](Self::bytes_to_fill) bytes: the buffer's length (`Vec::len`),
/// or the whole view of a [`Slice`].
///
/// [`bytes_total`]: IoBuf::bytes_total
///
/// # Safety
/// As for [`IoBuf`], and `stable_mut_ptr()` must be valid for writes of `bytes_total()` bytes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an owned buffer to read into: hoop's reads take the buffer by value and give it back",
    label = "borrowed memory: the kernel must never write into memory the caller still borrows",
    note = "hoop's own `read`/`read_exact` take precedence over `AsyncReadExt`'s of the same name; for tokio's spelling call the trait: `AsyncReadExt::read(&mut stream, &mut buf).await?`",
    note = "or pass an owned buffer: `let (res, buf) = stream.read(Vec::with_capacity(4096)).await;` (`read_exact` fills a `vec![0u8; n]`)"
)]
pub unsafe trait IoBufMut: IoBuf {
    /// Mutable pointer to the first byte.
    fn stable_mut_ptr(&mut self) -> *mut u8;

    /// Records that a read wrote `n` bytes at the buffer's start: the buffer's length
    /// (`bytes_init()`) becomes exactly `n`, whatever it was before (shorter or longer).
    ///
    /// # Safety
    /// The first `n` bytes must really be initialized, and `n <= bytes_total()`.
    unsafe fn set_filled(&mut self, n: usize);

    /// How many bytes `read_exact` (and `read_exact_at`) fill: the buffer's length
    /// (`bytes_init()`) for a whole buffer, as std's `read_exact(&mut buf)` does. A [`Slice`]
    /// overrides it with the whole view, so `buf.slice(..n)` asks for exactly `n` bytes
    /// whatever `buf`'s length is.
    fn bytes_to_fill(&self) -> usize {
        self.bytes_init()
    }
}

// SAFETY: a Vec's bytes are on the heap; moving the Vec does not move them, and the driver never
// grows it (no reallocation while the kernel holds the pointer).
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

// SAFETY: the spare capacity of a Vec is writable heap memory of `capacity()` bytes.
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_filled(&mut self, n: usize) {
        // SAFETY: the caller guarantees the first `n <= capacity` bytes are initialized.
        unsafe { self.set_len(n) };
    }
}

/// `IoBuf` for owned byte slices on the heap: the whole slice, all initialized. (No `IoBufMut`
/// for any of them: their length cannot change, so a short read would leave bytes of an earlier
/// use inside; `Rc` and `Arc` slices are immutable anyway.)
macro_rules! heap_slice_iobuf {
    ($($t:ty),*) => {$(
        // SAFETY: the bytes are in one heap allocation, all initialized, that never moves and
        // lives as long as the value (which the operation owns: for `Rc`/`Arc`, a clone), and
        // nothing writes them while the kernel reads (a boxed slice is owned by the operation;
        // shared slices are immutable). Shared ones send the same bytes to many sockets
        // without a copy.
        unsafe impl IoBuf for $t {
            fn stable_ptr(&self) -> *const u8 {
                self.as_ptr()
            }
            fn bytes_init(&self) -> usize {
                self.len()
            }
            fn bytes_total(&self) -> usize {
                self.len()
            }
        }
    )*};
}
heap_slice_iobuf!(Box<[u8]>, std::rc::Rc<[u8]>, std::sync::Arc<[u8]>);

/// Static bytes as a buffer to write: `StaticBuf(b"HTTP/1.1 200 OK\r\n")`,
/// `StaticBuf::from("text")`. No copy and no allocation: static memory never moves nor goes
/// away.
///
/// A wrapper rather than an impl of [`IoBuf`] for `&'static [u8]` and `&'static str`: with such
/// an impl, passing a borrowed slice of a shorter life (`&buf[..n]`, `line.as_bytes()`) would
/// fail in the borrow check ("does not live long enough"), whose error cannot say what to do;
/// without it, the type check refuses any borrowed slice with [`IoBuf`]'s error, which does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticBuf(pub &'static [u8]);

impl From<&'static [u8]> for StaticBuf {
    fn from(bytes: &'static [u8]) -> StaticBuf {
        StaticBuf(bytes)
    }
}

impl<const N: usize> From<&'static [u8; N]> for StaticBuf {
    fn from(bytes: &'static [u8; N]) -> StaticBuf {
        StaticBuf(bytes)
    }
}

impl From<&'static str> for StaticBuf {
    fn from(text: &'static str) -> StaticBuf {
        StaticBuf(text.as_bytes())
    }
}

impl std::ops::Deref for StaticBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0
    }
}

// SAFETY: static memory never moves nor goes away; the kernel only reads it.
unsafe impl IoBuf for StaticBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
    fn bytes_total(&self) -> usize {
        self.0.len()
    }
}

// SAFETY: a String's bytes are on the heap, as for Vec. (No `IoBufMut`: the kernel could write
// bytes that are not UTF-8.)
unsafe impl IoBuf for String {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

/// A range of a buffer, owned: operations on it read or write only `begin..end`.
///
/// A read into a slice writes at `begin` and then sets the underlying buffer's length to
/// exactly `begin + n` (bytes before `begin` that were not initialized yet are zeroed first);
/// `read_exact` fills the whole view. So `buf.slice(len..)` appends after a `Vec`'s `len`
/// bytes, and `Vec::with_capacity(4096).slice(..100)` reads exactly 100 bytes.
#[derive(Debug)]
pub struct Slice<T> {
    buf: T,
    begin: usize,
    end: usize,
}

impl<T> Slice<T> {
    /// Offset of the view's first byte in the underlying buffer.
    pub fn begin(&self) -> usize {
        self.begin
    }
    /// Offset one past the view's last byte in the underlying buffer.
    pub fn end(&self) -> usize {
        self.end
    }
    /// The underlying buffer.
    pub fn get_ref(&self) -> &T {
        &self.buf
    }
    /// Gives the underlying buffer back.
    pub fn into_inner(self) -> T {
        self.buf
    }
}

// SAFETY: the view is inside the underlying buffer, which is stable by its own contract; its
// initialized part is the part of `begin..end` the underlying buffer has initialized.
unsafe impl<T: IoBuf> IoBuf for Slice<T> {
    fn stable_ptr(&self) -> *const u8 {
        // SAFETY: `begin <= bytes_total`, checked when the slice was made.
        unsafe { self.buf.stable_ptr().add(self.begin) }
    }
    fn bytes_init(&self) -> usize {
        self.buf.bytes_init().clamp(self.begin, self.end) - self.begin
    }
    fn bytes_total(&self) -> usize {
        self.end - self.begin
    }
}

// SAFETY: writes stay within `begin..end` of the underlying writable buffer.
unsafe impl<T: IoBufMut> IoBufMut for Slice<T> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: `begin <= bytes_total`, checked when the slice was made.
        unsafe { self.buf.stable_mut_ptr().add(self.begin) }
    }
    unsafe fn set_filled(&mut self, n: usize) {
        let init = self.buf.bytes_init();
        if init < self.begin {
            // SAFETY: `init..begin` lies within the underlying buffer's `bytes_total()`
            // (checked when the slice was made), which is writable; no operation holds the
            // buffer while its owner calls this.
            unsafe {
                std::ptr::write_bytes(self.buf.stable_mut_ptr().add(init), 0, self.begin - init)
            };
        }
        // SAFETY: bytes before `begin` are initialized (they were, or were just zeroed), the
        // caller vouches for the `n` bytes at `begin`, and `begin + n <= end <= bytes_total`.
        unsafe { self.buf.set_filled(self.begin + n) };
    }
    fn bytes_to_fill(&self) -> usize {
        self.end - self.begin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_read_fills_spare_capacity() {
        let mut v = Vec::with_capacity(16);
        assert_eq!(v.bytes_init(), 0);
        assert!(v.bytes_total() >= 16);
        // SAFETY: the test writes 3 bytes into the capacity before declaring them initialized.
        unsafe {
            std::ptr::copy_nonoverlapping(b"abc".as_ptr(), v.stable_mut_ptr(), 3);
            v.set_filled(3);
        }
        assert_eq!(&v[..], b"abc");
    }

    /// The case that found it: "abc" read into a buffer that held "0123456789" reads back as "abc",
    /// never "abc3456789".
    #[test]
    fn a_read_sets_the_length_exactly() {
        let mut v = b"0123456789".to_vec();
        // SAFETY: writes 3 bytes at the start, within the capacity.
        unsafe {
            std::ptr::copy_nonoverlapping(b"abc".as_ptr(), v.stable_mut_ptr(), 3);
            v.set_filled(3);
        }
        assert_eq!(&v[..], b"abc");
        assert_eq!(v.bytes_to_fill(), 3);
    }

    #[test]
    fn shared_bytes_are_whole_buffers_at_their_heap_address() {
        let arc: std::sync::Arc<[u8]> = std::sync::Arc::from(&b"shared page"[..]);
        let rc: std::rc::Rc<[u8]> = std::rc::Rc::from(&b"cached"[..]);
        assert_eq!(
            (arc.stable_ptr(), arc.bytes_init(), arc.bytes_total()),
            (arc.as_ptr(), 11, 11)
        );
        assert_eq!(
            (rc.stable_ptr(), rc.bytes_init(), rc.bytes_total()),
            (rc.as_ptr(), 6, 6)
        );
        // A clone (what an operation owns) points at the same bytes.
        let clone = arc.clone();
        assert_eq!(clone.stable_ptr(), arc.stable_ptr());
        let part = rc.clone().slice(2..);
        assert_eq!((part.bytes_init(), part.bytes_total()), (4, 4));
    }

    #[test]
    fn a_slice_read_sets_begin_plus_n_and_zeroes_a_gap() {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(b"xy");
        let mut s = v.slice(4..10);
        assert_eq!(s.bytes_to_fill(), 6);
        // SAFETY: writes 2 bytes at the slice's start, within it.
        unsafe {
            std::ptr::copy_nonoverlapping(b"ab".as_ptr(), s.stable_mut_ptr(), 2);
            s.set_filled(2);
        }
        let v = s.into_inner();
        assert_eq!(&v[..], b"xy\0\0ab");
        // A later, shorter read through a slice cuts what was after it.
        let mut s = v.slice(1..);
        // SAFETY: declares 0 new bytes.
        unsafe { s.set_filled(0) };
        assert_eq!(&s.into_inner()[..], b"x");
        assert_eq!(
            Vec::<u8>::with_capacity(100).slice(..100).bytes_to_fill(),
            100
        );
    }

    #[test]
    fn slice_views_part_of_a_buffer() {
        let v = b"hello world".to_vec();
        let s = v.slice(6..);
        assert_eq!(s.bytes_init(), 5);
        assert_eq!(s.bytes_total(), s.end() - 6);
        let v = s.into_inner();
        let s = v.slice(..5);
        assert_eq!(s.bytes_init(), 5);
        assert_eq!(s.bytes_total(), 5);
    }

    #[test]
    #[should_panic(expected = "out of a buffer")]
    fn slice_out_of_range_panics() {
        let _ = vec![0u8; 4].into_boxed_slice().slice(2..8);
    }
}
