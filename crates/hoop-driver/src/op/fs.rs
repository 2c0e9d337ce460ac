//! File operations (and the generic fd reads and writes they share with sockets).

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::error::cvt;
use crate::lifecycle::Completion;
use crate::op::{OpCode, Target};

/// `offset` value meaning "the file's current position" (and the only valid one for pipes).
pub const CURRENT_POS: u64 = u64::MAX;

/// Reads into `buf` (from its start, up to its capacity) at `offset`; the buffer's length
/// becomes exactly the bytes read (see [`IoBufMut`]).
#[derive(Debug)]
pub struct Read<B> {
    pub(crate) target: Target,
    pub(crate) buf: B,
    pub(crate) offset: u64,
}

impl<B: IoBufMut> Read<B> {
    /// Reads from `target` (an fd, or a registered file's slot: see [`Target`]) at `offset`
    /// ([`CURRENT_POS`] for the current position).
    pub fn new(target: impl Into<Target>, buf: B, offset: u64) -> Self {
        Read {
            target: target.into(),
            buf,
            offset,
        }
    }
}

impl<B: IoBufMut> OpCode for Read<B> {
    type Output = BufResult<usize, B>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let res = super::read_into(&mut self.buf, c.res);
        (res, self.buf)
    }
}

/// Writes the initialized bytes of `buf` at `offset`.
#[derive(Debug)]
pub struct Write<B> {
    pub(crate) target: Target,
    pub(crate) buf: B,
    pub(crate) offset: u64,
}

impl<B: IoBuf> Write<B> {
    /// Writes to `target` (an fd, or a registered file's slot: see [`Target`]) at `offset`
    /// ([`CURRENT_POS`] for the current position).
    pub fn new(target: impl Into<Target>, buf: B, offset: u64) -> Self {
        Write {
            target: target.into(),
            buf,
            offset,
        }
    }
}

impl<B: IoBuf> OpCode for Write<B> {
    type Output = BufResult<usize, B>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.buf)
    }
}

/// Reads into several buffers in turn (`readv`).
#[derive(Debug)]
pub struct Readv<B> {
    pub(crate) fd: RawFd,
    pub(crate) bufs: Vec<B>,
    /// The iovec array the kernel reads; on the heap, built once, never grown.
    pub(crate) iovecs: Vec<libc::iovec>,
    pub(crate) offset: u64,
}

impl<B: IoBufMut> Readv<B> {
    /// Reads from `fd` at `offset` into `bufs`, filling each to its capacity before the next;
    /// each buffer's length becomes exactly the bytes it received (0 for those after the end,
    /// and for all of them on error).
    pub fn new(fd: RawFd, mut bufs: Vec<B>, offset: u64) -> Self {
        let iovecs = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.stable_mut_ptr().cast(),
                iov_len: b.bytes_total(),
            })
            .collect();
        Readv {
            fd,
            bufs,
            iovecs,
            offset,
        }
    }
}

impl<B: IoBufMut> OpCode for Readv<B> {
    type Output = BufResult<usize, Vec<B>>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let res = cvt(c.res).map(|n| n as usize);
        let mut left = *res.as_ref().unwrap_or(&0);
        for b in &mut self.bufs {
            let here = left.min(b.bytes_total());
            // SAFETY: the kernel filled the buffers in order; `here` bytes of this one (none
            // on error).
            unsafe { b.set_filled(here) };
            left -= here;
        }
        (res, self.bufs)
    }
}

/// Writes several buffers in turn (`writev`).
#[derive(Debug)]
pub struct Writev<B> {
    pub(crate) fd: RawFd,
    pub(crate) bufs: Vec<B>,
    pub(crate) iovecs: Vec<libc::iovec>,
    pub(crate) offset: u64,
}

impl<B: IoBuf> Writev<B> {
    /// Writes the initialized bytes of `bufs` to `fd` at `offset`.
    pub fn new(fd: RawFd, bufs: Vec<B>, offset: u64) -> Self {
        let iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.stable_ptr() as *mut _,
                iov_len: b.bytes_init(),
            })
            .collect();
        Writev {
            fd,
            bufs,
            iovecs,
            offset,
        }
    }
}

impl<B: IoBuf> OpCode for Writev<B> {
    type Output = BufResult<usize, Vec<B>>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.bufs)
    }
}

/// Opens a file (`openat`). The fd is owned by the result: if the future was dropped, it is
/// closed when the completion arrives.
#[derive(Debug)]
pub struct OpenAt {
    pub(crate) dirfd: RawFd,
    pub(crate) path: CString,
    pub(crate) flags: i32,
    pub(crate) mode: u32,
}

impl OpenAt {
    /// Opens `path` relative to `dirfd` (`libc::AT_FDCWD` for the working directory). `O_CLOEXEC`
    /// is always added.
    pub fn new(dirfd: RawFd, path: CString, flags: i32, mode: u32) -> Self {
        OpenAt {
            dirfd,
            path,
            flags: flags | libc::O_CLOEXEC,
            mode,
        }
    }
}

impl OpCode for OpenAt {
    type Output = io::Result<OwnedFd>;
    fn complete(self, c: Completion) -> Self::Output {
        // SAFETY: a non-negative result of openat is a new fd that nothing else owns.
        cvt(c.res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// Opens a file with `openat2(2)`: the flags of [`OpenAt`] plus `resolve` flags
/// (`RESOLVE_BENEATH`, `RESOLVE_IN_ROOT`, `RESOLVE_NO_SYMLINKS`, ...) that the kernel enforces
/// on every component of the path, symlinks included (Linux 5.6+; `IORING_OP_OPENAT2` on
/// io_uring, the system call on the epoll driver's blocking pool). The fd is owned by the
/// result, as for [`OpenAt`]. A kernel without openat2 completes it with `ENOSYS` (or
/// `EINVAL` for unknown resolve flags).
#[derive(Debug)]
pub struct OpenAt2 {
    pub(crate) dirfd: RawFd,
    pub(crate) path: CString,
    /// The `open_how` the kernel reads; boxed so its address survives moves.
    pub(crate) how: Box<libc::open_how>,
}

impl OpenAt2 {
    /// Opens `path` relative to `dirfd` with `flags` (`O_CLOEXEC` always added), `mode` (for
    /// `O_CREAT`) and `resolve` (`libc::RESOLVE_*`).
    pub fn new(dirfd: RawFd, path: CString, flags: i32, mode: u32, resolve: u64) -> Self {
        // SAFETY: open_how is plain old data; all-zero is a valid value (set below).
        let mut how: Box<libc::open_how> = Box::new(unsafe { std::mem::zeroed() });
        how.flags = (flags | libc::O_CLOEXEC) as u32 as u64;
        how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
            u64::from(mode)
        } else {
            // openat2 refuses a mode without O_CREAT/O_TMPFILE.
            0
        };
        how.resolve = resolve;
        OpenAt2 { dirfd, path, how }
    }
}

impl OpCode for OpenAt2 {
    type Output = io::Result<OwnedFd>;
    fn complete(self, c: Completion) -> Self::Output {
        // SAFETY: a non-negative result of openat2 is a new fd that nothing else owns.
        cvt(c.res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// Moves up to `len` bytes between two fds without copying through user space (`splice(2)`):
/// one of them must be a pipe. `off_in`/`off_out` are file offsets, or `None` for a pipe or a
/// socket (their current position). On io_uring this is `IORING_OP_SPLICE` and either fd may
/// be a registered slot ([`Target::Fixed`]); on the epoll driver a splice out of a pipe waits
/// for `fd_out` to be writable (with `SPLICE_F_NONBLOCK`, so `fd_out` must be non-blocking, as
/// the epoll driver's sockets are) and any other splice runs on the blocking pool.
#[derive(Debug)]
pub struct Splice {
    pub(crate) fd_in: Target,
    pub(crate) fd_out: Target,
    /// The offsets the kernel reads (and, for the epoll driver's splice(2), updates): boxed so
    /// their addresses survive moves.
    pub(crate) off_in: Box<i64>,
    pub(crate) off_out: Box<i64>,
    pub(crate) len: u32,
    pub(crate) flags: u32,
}

impl Splice {
    /// Its io_uring opcode, for `Driver::supports_opcode`.
    pub const OPCODE: u8 = io_uring::opcode::Splice::CODE;

    /// Moves up to `len` bytes from `fd_in` (at `off_in`) to `fd_out` (at `off_out`), with
    /// `SPLICE_F_*` `flags`.
    pub fn new(
        fd_in: impl Into<Target>,
        off_in: Option<u64>,
        fd_out: impl Into<Target>,
        off_out: Option<u64>,
        len: u32,
        flags: u32,
    ) -> Self {
        let off = |o: Option<u64>| Box::new(o.map_or(-1, |v| v.min(i64::MAX as u64) as i64));
        Splice {
            fd_in: fd_in.into(),
            fd_out: fd_out.into(),
            off_in: off(off_in),
            off_out: off(off_out),
            len,
            flags,
        }
    }
}

impl OpCode for Splice {
    type Output = io::Result<usize>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(|n| n as usize)
    }
}

/// Closes an fd (`IORING_OP_CLOSE`). The op owns the fd from its creation: a kernel's
/// completion consumes it, and an op dropped before it reached a kernel (never polled, or
/// dropped while waiting for room) closes it with `close(2)`, so the fd never leaks.
#[derive(Debug)]
pub struct Close {
    /// The fd; -1 once a completion has taken it.
    pub(crate) fd: RawFd,
}

impl Close {
    /// Closes `fd`, which the op now owns.
    pub fn new(fd: OwnedFd) -> Self {
        Close {
            fd: fd.into_raw_fd(),
        }
    }
}

impl Drop for Close {
    fn drop(&mut self) {
        if self.fd >= 0 {
            // SAFETY: the op owns `fd` (given up in `new`), no kernel took it (a completion
            // sets it to -1), and it is closed once.
            unsafe { libc::close(self.fd) };
        }
    }
}

impl OpCode for Close {
    type Output = io::Result<()>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let fd = std::mem::replace(&mut self.fd, -1);
        match -c.res {
            // The op never reached a kernel (no runtime, shut-down driver, or cancelled before
            // it was issued): the fd is still open and still ours. Not EBADR: a poisoned
            // driver also fails ops the kernel may have run, and a second close could hit a
            // reused fd number, so that rare case leaks the fd instead.
            libc::ENXIO | libc::ECANCELED => {
                // SAFETY: the op owned `fd` and nothing closed it; closed once.
                crate::error::cvt_libc(unsafe { libc::close(fd) }).map(drop)
            }
            // The kernel ran close(2) on it: whatever it says, the fd is gone.
            _ => cvt(c.res).map(drop),
        }
    }
}

/// Flushes a file to its device (`fsync`, or `fdatasync` when `datasync`).
#[derive(Debug)]
pub struct Fsync {
    pub(crate) target: Target,
    pub(crate) datasync: bool,
}

impl Fsync {
    /// Syncs `target` (an fd, or a registered file's slot: see [`Target`]); only data (and the
    /// metadata needed to read it) when `datasync`.
    pub fn new(target: impl Into<Target>, datasync: bool) -> Self {
        Fsync {
            target: target.into(),
            datasync,
        }
    }
}

impl OpCode for Fsync {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Reads a file's metadata (`statx`).
#[derive(Debug)]
pub struct Statx {
    pub(crate) dirfd: RawFd,
    pub(crate) path: CString,
    pub(crate) flags: i32,
    pub(crate) mask: u32,
    pub(crate) statx: Box<libc::statx>,
}

impl Statx {
    /// Stats `path` relative to `dirfd`; an empty path with `AT_EMPTY_PATH` stats `dirfd` itself.
    pub fn new(dirfd: RawFd, path: CString, flags: i32, mask: u32) -> Self {
        Statx {
            dirfd,
            path,
            flags,
            mask,
            // SAFETY: statx is plain old data; all-zero is a valid value.
            statx: Box::new(unsafe { std::mem::zeroed() }),
        }
    }
}

impl OpCode for Statx {
    type Output = io::Result<libc::statx>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(|_| *self.statx)
    }
}

/// Allocates or deallocates file space (`fallocate`).
#[derive(Debug)]
pub struct Fallocate {
    pub(crate) fd: RawFd,
    pub(crate) mode: i32,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl Fallocate {
    /// `fallocate(fd, mode, offset, len)`.
    pub fn new(fd: RawFd, mode: i32, offset: u64, len: u64) -> Self {
        Fallocate {
            fd,
            mode,
            offset,
            len,
        }
    }
}

impl OpCode for Fallocate {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Truncates or extends a file to `len` bytes (`IORING_OP_FTRUNCATE`, Linux 6.9; on the epoll
/// driver `ftruncate(2)` on the blocking pool). Check
/// `Driver::supports_opcode(Ftruncate::OPCODE)` before using it on io_uring.
#[derive(Debug)]
pub struct Ftruncate {
    pub(crate) fd: RawFd,
    pub(crate) len: u64,
}

impl Ftruncate {
    /// Its io_uring opcode, for `Driver::supports_opcode`.
    pub const OPCODE: u8 = io_uring::opcode::Ftruncate::CODE;

    /// `ftruncate(fd, len)`.
    pub fn new(fd: RawFd, len: u64) -> Self {
        Ftruncate { fd, len }
    }
}

impl OpCode for Ftruncate {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Removes a file, or an empty directory with `AT_REMOVEDIR` (`unlinkat`).
#[derive(Debug)]
pub struct UnlinkAt {
    pub(crate) dirfd: RawFd,
    pub(crate) path: CString,
    pub(crate) flags: i32,
}

impl UnlinkAt {
    /// `unlinkat(dirfd, path, flags)`.
    pub fn new(dirfd: RawFd, path: CString, flags: i32) -> Self {
        UnlinkAt { dirfd, path, flags }
    }
}

impl OpCode for UnlinkAt {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Renames a file (`renameat2`).
#[derive(Debug)]
pub struct RenameAt {
    pub(crate) old_dirfd: RawFd,
    pub(crate) old: CString,
    pub(crate) new_dirfd: RawFd,
    pub(crate) new: CString,
    pub(crate) flags: u32,
}

impl RenameAt {
    /// `renameat2(old_dirfd, old, new_dirfd, new, flags)`.
    pub fn new(old_dirfd: RawFd, old: CString, new_dirfd: RawFd, new: CString, flags: u32) -> Self {
        RenameAt {
            old_dirfd,
            old,
            new_dirfd,
            new,
            flags,
        }
    }
}

impl OpCode for RenameAt {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// Creates a directory (`mkdirat`).
#[derive(Debug)]
pub struct MkdirAt {
    pub(crate) dirfd: RawFd,
    pub(crate) path: CString,
    pub(crate) mode: u32,
}

impl MkdirAt {
    /// `mkdirat(dirfd, path, mode)`.
    pub fn new(dirfd: RawFd, path: CString, mode: u32) -> Self {
        MkdirAt { dirfd, path, mode }
    }
}

impl OpCode for MkdirAt {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}
