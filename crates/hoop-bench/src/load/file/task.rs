//! The loop every async engine's task runs ([`io_loop`]): one random block at a time, stamped
//! (a write) or poisoned (a read), timed, counted only when it is complete and, for a read,
//! when every sector carries its offset. The engines differ only in how one I/O reaches the
//! file ([`BlockIo`]) and where the counts go ([`Tally`]).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::Instant;

use hoop::{AlignedBuf, BufResult, FixedBuf};

use crate::load::file::content::{self, Picker};
use crate::record::file::Measured;

/// A task's buffer: its full capacity as bytes, and the length an I/O uses.
pub(crate) trait BlockBuf: Sized {
    /// Every byte of the buffer.
    fn full(&self) -> &[u8];
    /// Every byte of the buffer, writable.
    fn full_mut(&mut self) -> &mut [u8];
    /// Sets the initialized length (what a write writes).
    fn set_len(&mut self, len: usize);
    /// Empties it (a read fills it from the start).
    fn clear(&mut self);
    /// Its capacity: the block size.
    fn capacity(&self) -> usize;
}

/// [`BlockBuf`] for hoop's buffer types, which name these methods alike.
macro_rules! block_buf {
    ($($t:ty),*) => {$(
        impl BlockBuf for $t {
            fn full(&self) -> &[u8] {
                self.as_slice_full()
            }
            fn full_mut(&mut self) -> &mut [u8] {
                self.as_mut_slice_full()
            }
            fn set_len(&mut self, len: usize) {
                <$t>::set_len(self, len);
            }
            fn clear(&mut self) {
                <$t>::clear(self);
            }
            fn capacity(&self) -> usize {
                <$t>::capacity(self)
            }
        }
    )*};
}

block_buf!(AlignedBuf, FixedBuf);

/// How one engine reads or writes one block: the whole buffer at `off`; the buffer comes back
/// with the result, or `None` when the engine lost it (a blocking pool's task that failed), which
/// ends the task.
pub(crate) trait BlockIo<B> {
    /// Reads (`write` false) or writes one block of `buf` at byte `off`.
    async fn io(&mut self, buf: B, off: u64, write: bool) -> Block<B>;
}

/// What one block's I/O gives back: the bytes done, and the buffer unless it was lost.
pub(crate) type Block<B = AlignedBuf> = BufResult<usize, Option<B>>;

/// Where a task counts its I/O: hoop's thread-per-core engines share one
/// `Rc<RefCell<Measured>>`; the engines on a multi-thread tokio runtime give each task its own
/// [`Measured`], merged at the end.
pub(crate) trait Tally {
    /// Runs `f` on the counts.
    fn with(&mut self, f: impl FnOnce(&mut Measured));
}

impl Tally for Measured {
    fn with(&mut self, f: impl FnOnce(&mut Measured)) {
        f(self);
    }
}

impl Tally for Rc<RefCell<Measured>> {
    fn with(&mut self, f: impl FnOnce(&mut Measured)) {
        f(&mut self.borrow_mut());
    }
}

/// The loop of one task: until `deadline`, one random block of `buf`'s capacity at a time
/// through `io`, counted in `tally`; a lost buffer is counted as an error and ends the loop.
pub(crate) async fn io_loop<B: BlockBuf, I: BlockIo<B>, T: Tally>(
    io: &mut I,
    mut buf: B,
    mut picker: Picker,
    deadline: Instant,
    tally: &mut T,
) {
    let bs = buf.capacity();
    while Instant::now() < deadline {
        let (off, write) = picker.next();
        if write {
            content::stamp(buf.full_mut(), off);
            buf.set_len(bs);
        } else {
            content::poison(buf.full_mut());
            buf.clear();
        }
        let t0 = Instant::now();
        let (res, back) = io.io(buf, off, write).await;
        let lat = t0.elapsed().as_nanos();
        let Some(back) = back else {
            let e = res.err().unwrap_or_else(|| io::Error::other("buffer lost"));
            tally.with(|m| m.complete(write, Err(e), bs, off, || false, lat));
            return;
        };
        buf = back;
        tally.with(|m| {
            m.complete(
                write,
                res,
                bs,
                off,
                || content::verify(buf.full(), off),
                lat,
            )
        });
    }
}
