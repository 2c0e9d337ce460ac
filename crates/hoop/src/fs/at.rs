//! Whole-buffer reads and writes at a position, for [`File`](super::File) and
//! [`FixedFile`](super::FixedFile): as many operations as it takes, each at the cursor fixing
//! it after a short result (`fs::cursor`).

use std::io;
use std::os::fd::RawFd;

use hoop_driver::{op, BufResult, IoBuf, IoBufMut, Op};

use crate::io_util::{fill_exact, until_done};

/// Reads exactly `buf.bytes_to_fill()` bytes at `pos` from `target` (a [`File`]'s fd or a
/// [`FixedFile`](super::FixedFile)'s slot), in as many reads as it takes; at the cursor,
/// `cursor_fd` (an fd of the same open file) is where the cursor is read and fixed.
pub(crate) async fn read_exact_on<B: IoBufMut>(
    target: op::Target,
    cursor_fd: RawFd,
    buf: B,
    pos: u64,
) -> BufResult<(), B> {
    let msg = "end of file before the buffer was filled";
    // At the cursor, each read fixes the cursor after a short result (`fs::cursor`).
    let fd = cursor_fd;
    fill_exact(buf, msg, |s, done| {
        let len = s.bytes_total();
        let read = Op::new(op::Read::new(target, s, advance(pos, done)));
        super::cursor::at_cursor(fd, pos, len, read)
    })
    .await
}

/// Writes every initialized byte of `buf` at `pos` to `target`, in as many writes as it takes
/// (`cursor_fd` as for [`read_exact_on`]).
pub(crate) async fn write_all_on<B: IoBuf>(
    target: op::Target,
    cursor_fd: RawFd,
    buf: B,
    pos: u64,
) -> BufResult<(), B> {
    let total = buf.bytes_init();
    let msg = "failed to write the whole buffer";
    // At the cursor, each write fixes the cursor after a short result (`fs::cursor`).
    let fd = cursor_fd;
    until_done(buf, total, io::ErrorKind::WriteZero, msg, |s, done| {
        let len = s.bytes_init();
        let write = Op::new(op::Write::new(target, s, advance(pos, done)));
        super::cursor::at_cursor(fd, pos, len, write)
    })
    .await
}

/// The position `n` bytes after `pos`; [`op::CURRENT_POS`] (the file's current position, which
/// the kernel advances itself) stays as it is.
pub(crate) fn advance(pos: u64, n: usize) -> u64 {
    if pos == op::CURRENT_POS {
        pos
    } else {
        pos.saturating_add(n as u64)
    }
}
