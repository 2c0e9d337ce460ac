//! Moving bytes between an fd and a pipe without a copy through user space (`splice`).

use std::io;
use std::os::fd::RawFd;

use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::OpCode;

/// Offset value meaning "no offset": the fd's own position (and the only valid one for a
/// pipe).
pub const NO_OFFSET: i64 = -1;

/// `splice(2)`: moves up to `len` bytes from `fd_in` (at `off_in`, or [`NO_OFFSET`]) to
/// `fd_out` (at `off_out`, or [`NO_OFFSET`]); one of them must be a pipe. Resolves to the
/// number of bytes moved (0: end of input). `IORING_OP_SPLICE` (5.7; the kernel runs it in an
/// io-wq worker) on io_uring, and on the epoll driver's blocking pool.
#[derive(Debug)]
pub struct Splice {
    pub(crate) fd_in: RawFd,
    pub(crate) fd_out: RawFd,
    /// `[off_in, off_out]`, on the heap: the epoll driver passes pointers to them.
    pub(crate) offsets: Box<[i64; 2]>,
    pub(crate) len: u32,
    pub(crate) flags: u32,
}

impl Splice {
    /// Its io_uring opcode, for `Driver::supports_opcode`.
    pub const OPCODE: u8 = io_uring::opcode::Splice::CODE;

    /// Moves up to `len` bytes from `fd_in` at `off_in` to `fd_out` at `off_out` (either
    /// offset [`NO_OFFSET`] for a pipe), with `SPLICE_F_MOVE`.
    pub fn new(fd_in: RawFd, off_in: i64, fd_out: RawFd, off_out: i64, len: u32) -> Self {
        Splice {
            fd_in,
            fd_out,
            offsets: Box::new([off_in, off_out]),
            len,
            flags: libc::SPLICE_F_MOVE,
        }
    }
}

impl OpCode for Splice {
    type Output = io::Result<usize>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(|n| n as usize)
    }
}
