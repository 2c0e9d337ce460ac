//! Reads and writes on registered buffers (`IORING_OP_READ_FIXED`/`WRITE_FIXED`).
//!
//! The buffer is a [`FixedBuf`](crate::FixedBuf) (or a [`Slice`](crate::Slice) of one). When
//! its pool is the registered buffer table of the ring the operation is created on, the
//! operation is `READ_FIXED`/`WRITE_FIXED` with the buffer's index; otherwise (an unregistered
//! pool, the epoll driver) it is a plain read or write into the same memory. Both work on files
//! (at an offset, or [`CURRENT_POS`](super::CURRENT_POS)) and on streams such as sockets and
//! pipes (with `CURRENT_POS`). Semantics are those of [`Read`](super::Read) and
//! [`Write`](super::Write): a read fills the buffer from its start up to its capacity and sets
//! its length to exactly the bytes read (see [`IoBufMut`]).

use crate::buf::{BufResult, IoBufMut};
use crate::error::cvt;
use crate::fixedbuf::FixedIoBuf;
use crate::lifecycle::Completion;
use crate::op::{OpCode, Target};

/// Reads into a registered buffer at `offset` (`READ_FIXED`, or a plain read; see the module
/// docs).
#[derive(Debug)]
pub struct ReadFixed<B> {
    pub(crate) target: Target,
    pub(crate) buf: B,
    pub(crate) offset: u64,
    /// The registered-table index, when the buffer's pool is registered with the current ring.
    pub(crate) index: Option<u16>,
}

impl<B: FixedIoBuf + IoBufMut> ReadFixed<B> {
    /// Reads from `target` (an fd, or a registered file's slot: see [`Target`]) at `offset`
    /// ([`CURRENT_POS`](super::CURRENT_POS) for the current position, and for streams) into
    /// `buf`. Create it on the thread of the runtime that will run it.
    pub fn new(target: impl Into<Target>, buf: B, offset: u64) -> Self {
        let index = buf.registered_index();
        ReadFixed {
            target: target.into(),
            buf,
            offset,
            index,
        }
    }

    /// Whether it runs as `READ_FIXED` (else as a plain read).
    pub fn is_fixed(&self) -> bool {
        self.index.is_some()
    }
}

impl<B: FixedIoBuf + IoBufMut> OpCode for ReadFixed<B> {
    type Output = BufResult<usize, B>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let res = super::read_into(&mut self.buf, c.res);
        (res, self.buf)
    }
}

/// Writes the initialized bytes of a registered buffer at `offset` (`WRITE_FIXED`, or a plain
/// write; see the module docs).
#[derive(Debug)]
pub struct WriteFixed<B> {
    pub(crate) target: Target,
    pub(crate) buf: B,
    pub(crate) offset: u64,
    /// The registered-table index, when the buffer's pool is registered with the current ring.
    pub(crate) index: Option<u16>,
}

impl<B: FixedIoBuf> WriteFixed<B> {
    /// Writes `buf`'s initialized bytes to `target` (an fd, or a registered file's slot: see
    /// [`Target`]) at `offset` ([`CURRENT_POS`](super::CURRENT_POS) for the current position,
    /// and for streams). Create it on the thread of the runtime that will run it.
    pub fn new(target: impl Into<Target>, buf: B, offset: u64) -> Self {
        let index = buf.registered_index();
        WriteFixed {
            target: target.into(),
            buf,
            offset,
            index,
        }
    }

    /// Whether it runs as `WRITE_FIXED` (else as a plain write).
    pub fn is_fixed(&self) -> bool {
        self.index.is_some()
    }
}

impl<B: FixedIoBuf> OpCode for WriteFixed<B> {
    type Output = BufResult<usize, B>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.buf)
    }
}
