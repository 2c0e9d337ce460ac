//! How each operation becomes a system call for the readiness driver.
//!
//! A [`Call`] is the readiness driver's SQE: a system call number, its arguments (raw pointers
//! into memory the operation owns), and how to run it — at once, when the fd is ready, on the
//! blocking pool, or as a timer.

use std::os::fd::RawFd;
use std::time::Duration;

use crate::buf::{IoBuf, IoBufMut};
use crate::op::*;

/// When and where a [`Call`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Completes at once with result 0.
    Nop,
    /// Completes at once with `-errno`.
    Fail(i32),
    /// Runs at once on the driver's thread (cheap, never blocks).
    Inline,
    /// Runs at once; closes `fd`, so the driver forgets its registration first.
    Close(RawFd),
    /// Runs on the blocking pool.
    Blocking,
    /// Completes with `-ETIME` after the duration.
    Timer(Duration),
    /// Runs when `fd` is readable (retried on `EAGAIN`).
    Readable(RawFd),
    /// Runs when `fd` is writable (retried on `EAGAIN`).
    Writable(RawFd),
    /// Like `Readable`, on a socket that must be non-blocking (accept).
    Accept(RawFd),
    /// A non-blocking connect: `EINPROGRESS`, then writable, then `SO_ERROR` is the result.
    Connect(RawFd),
    /// A generic read or write: on the pool for regular files and block devices; otherwise
    /// readiness-driven with `stream_nr` (no offset) on a non-blocking fd.
    File {
        /// The fd.
        fd: RawFd,
        /// Whether it writes.
        write: bool,
        /// The system call for streams (`read`/`write`/`readv`/`writev`), same first three
        /// arguments.
        stream_nr: libc::c_long,
    },
}

/// One system call, described for later execution (possibly on another thread).
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub(crate) nr: libc::c_long,
    pub(crate) args: [libc::c_long; 6],
    pub(crate) mode: Mode,
    /// For stream reads and writes: the length asked. A shorter result means the socket was
    /// drained (or its buffer filled), so the driver waits for the next edge instead of trying
    /// the next call at once only to get `EAGAIN` (tokio's short-read rule).
    pub(crate) io_len: i64,
    /// Cancel the operation (`ECANCELED`) if it has not completed by then.
    pub(crate) deadline: Option<Duration>,
    /// A result of 0 means "not ready yet" (`poll(2)` with a zero timeout): read as `EAGAIN`.
    pub(crate) zero_is_eagain: bool,
    /// Tried once, never queued: `EAGAIN` (or an fd known not to be ready, or other
    /// operations queued before it) completes it with `-EAGAIN` (a receive into a ring buffer,
    /// which must not hold its buffer while it waits).
    pub(crate) try_once: bool,
    /// No system call: completes with 1 once the fd is ready in the call's direction (a
    /// receive waiting for data without a buffer).
    pub(crate) ready_only: bool,
    /// A send to an address: on a message socket its `EAGAIN` may be the target's full queue,
    /// which no edge reports, so it waits on a backoff timer instead (`FdState::note`).
    pub(crate) addressed: bool,
}

impl Call {
    fn new(nr: libc::c_long, args: &[libc::c_long], mode: Mode) -> Call {
        let mut a = [0; 6];
        a[..args.len()].copy_from_slice(args);
        Call {
            nr,
            args: a,
            mode,
            io_len: 0,
            deadline: None,
            zero_is_eagain: false,
            try_once: false,
            ready_only: false,
            addressed: false,
        }
    }

    /// Marks a stream read or write of `len` bytes (see `io_len`).
    fn with_io_len(mut self, len: usize) -> Call {
        self.io_len = len as i64;
        self
    }

    /// Runs the system call; returns its result or `-errno`, as a CQE's `res`.
    pub(crate) fn run(&self) -> i32 {
        self.run_nr(self.nr)
    }

    /// Runs system call `nr` with this call's arguments.
    pub(crate) fn run_nr(&self, nr: libc::c_long) -> i32 {
        if self.ready_only {
            return 1;
        }
        let a = self.args;
        // SAFETY: the arguments point into memory the operation owns until its completion is
        // delivered (EpollOp's contract), exactly as an SQE's would.
        let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if r == 0 && self.zero_is_eagain {
            // `PollOnce`: the fd is not ready after all (the driver's readiness was stale):
            // like EAGAIN, wait for its next edge.
            -libc::EAGAIN
        } else if r < 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            r as i32
        }
    }
}

// SAFETY: the inner op's pointers are its own.
unsafe impl<T: EpollOp> EpollOp for Deadline<T> {
    fn create_call(&mut self) -> Call {
        let mut call = self.inner.create_call();
        call.deadline = Some(self.duration);
        call
    }
}

/// An operation the readiness driver can run.
///
/// # Safety
/// Every pointer in the returned call's arguments must point into memory owned by `self` (heap
/// or static memory, never inline in `self`), valid until `self` is dropped.
pub unsafe trait EpollOp: 'static {
    /// The system call that performs the operation.
    fn create_call(&mut self) -> Call;
}

fn off(offset: u64) -> libc::c_long {
    offset as libc::c_long
}

// SAFETY: no pointers.
unsafe impl EpollOp for Nop {
    fn create_call(&mut self) -> Call {
        Call::new(0, &[], Mode::Nop)
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Timeout {
    fn create_call(&mut self) -> Call {
        let d = Duration::new(self.ts_secs(), self.ts_nanos());
        Call::new(0, &[], Mode::Timer(d))
    }
}

// SAFETY: the buffer is stable by the IoBufMut contract.
unsafe impl<B: IoBufMut> EpollOp for Read<B> {
    fn create_call(&mut self) -> Call {
        let ptr = self.buf.stable_mut_ptr() as libc::c_long;
        let len = self.buf.bytes_total() as libc::c_long;
        let Target::Fd(fd) = self.target else {
            return no_direct_descriptors();
        };
        let mode = Mode::File {
            fd,
            write: false,
            stream_nr: libc::SYS_read,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_read, &[fd as _, ptr, len], mode)
        } else {
            Call::new(
                libc::SYS_pread64,
                &[fd as _, ptr, len, off(self.offset)],
                mode,
            )
        }
        .with_io_len(len as usize)
    }
}

// SAFETY: the buffer is stable by the IoBuf contract.
unsafe impl<B: IoBuf> EpollOp for Write<B> {
    fn create_call(&mut self) -> Call {
        let ptr = self.buf.stable_ptr() as libc::c_long;
        let len = self.buf.bytes_init() as libc::c_long;
        let Target::Fd(fd) = self.target else {
            return no_direct_descriptors();
        };
        let mode = Mode::File {
            fd,
            write: true,
            stream_nr: libc::SYS_write,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_write, &[fd as _, ptr, len], mode)
        } else {
            Call::new(
                libc::SYS_pwrite64,
                &[fd as _, ptr, len, off(self.offset)],
                mode,
            )
        }
        .with_io_len(len as usize)
    }
}

// SAFETY: the iovec array is a Vec never grown; the buffers are stable.
unsafe impl<B: IoBufMut> EpollOp for Readv<B> {
    fn create_call(&mut self) -> Call {
        let (fd, iov, n) = (
            self.fd,
            self.iovecs.as_ptr() as libc::c_long,
            self.iovecs.len() as libc::c_long,
        );
        let mode = Mode::File {
            fd,
            write: false,
            stream_nr: libc::SYS_readv,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_readv, &[fd as _, iov, n], mode)
        } else {
            Call::new(
                libc::SYS_preadv,
                &[fd as _, iov, n, off(self.offset), 0],
                mode,
            )
        }
    }
}

// SAFETY: as for Readv.
unsafe impl<B: IoBuf> EpollOp for Writev<B> {
    fn create_call(&mut self) -> Call {
        let (fd, iov, n) = (
            self.fd,
            self.iovecs.as_ptr() as libc::c_long,
            self.iovecs.len() as libc::c_long,
        );
        let mode = Mode::File {
            fd,
            write: true,
            stream_nr: libc::SYS_writev,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_writev, &[fd as _, iov, n], mode)
        } else {
            Call::new(
                libc::SYS_pwritev,
                &[fd as _, iov, n, off(self.offset), 0],
                mode,
            )
        }
    }
}

// SAFETY: the path is on the heap.
unsafe impl EpollOp for OpenAt {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_openat,
            &[
                self.dirfd as _,
                self.path.as_ptr() as _,
                self.flags as _,
                self.mode as _,
            ],
            Mode::Blocking,
        )
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Close {
    fn create_call(&mut self) -> Call {
        Call::new(libc::SYS_close, &[self.fd as _], Mode::Close(self.fd))
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Fsync {
    fn create_call(&mut self) -> Call {
        let nr = if self.datasync {
            libc::SYS_fdatasync
        } else {
            libc::SYS_fsync
        };
        let Target::Fd(fd) = self.target else {
            return no_direct_descriptors();
        };
        Call::new(nr, &[fd as _], Mode::Blocking)
    }
}

// SAFETY: the path and the open_how are on the heap.
unsafe impl EpollOp for OpenAt2 {
    fn create_call(&mut self) -> Call {
        let how: *const libc::open_how = &*self.how;
        Call::new(
            libc::SYS_openat2,
            &[
                self.dirfd as _,
                self.path.as_ptr() as _,
                how as _,
                std::mem::size_of::<libc::open_how>() as _,
            ],
            Mode::Blocking,
        )
    }
}

// SAFETY: the offsets are boxed; splice(2) reads and updates them there.
unsafe impl EpollOp for Splice {
    fn create_call(&mut self) -> Call {
        let (Target::Fd(fd_in), Target::Fd(fd_out)) = (self.fd_in, self.fd_out) else {
            return no_direct_descriptors();
        };
        let ptr = |off: &mut Box<i64>| -> libc::c_long {
            if **off < 0 {
                0
            } else {
                let p: *mut i64 = &mut **off;
                p as _
            }
        };
        let (off_in, off_out) = (ptr(&mut self.off_in), ptr(&mut self.off_out));
        // Out of a pipe into a stream (a socket, a pipe: no offset), wait until it is
        // writable; anything else (a file on either side) runs on the blocking pool.
        let pipe_to_stream = *self.off_in < 0 && *self.off_out < 0;
        let (flags, mode) = if pipe_to_stream {
            (self.flags | libc::SPLICE_F_NONBLOCK, Mode::Writable(fd_out))
        } else {
            (self.flags, Mode::Blocking)
        };
        Call::new(
            libc::SYS_splice,
            &[
                fd_in as _,
                off_in,
                fd_out as _,
                off_out,
                self.len as _,
                flags as _,
            ],
            mode,
        )
    }
}

// SAFETY: the path and the statx buffer are on the heap.
unsafe impl EpollOp for Statx {
    fn create_call(&mut self) -> Call {
        let buf: *mut libc::statx = &mut *self.statx;
        Call::new(
            libc::SYS_statx,
            &[
                self.dirfd as _,
                self.path.as_ptr() as _,
                self.flags as _,
                self.mask as _,
                buf as _,
            ],
            Mode::Blocking,
        )
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Ftruncate {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_ftruncate,
            &[self.fd as _, off(self.len)],
            Mode::Blocking,
        )
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Fallocate {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_fallocate,
            &[
                self.fd as _,
                self.mode as _,
                off(self.offset),
                off(self.len),
            ],
            Mode::Blocking,
        )
    }
}

// SAFETY: the path is on the heap.
unsafe impl EpollOp for UnlinkAt {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_unlinkat,
            &[self.dirfd as _, self.path.as_ptr() as _, self.flags as _],
            Mode::Blocking,
        )
    }
}

// SAFETY: both paths are on the heap.
unsafe impl EpollOp for RenameAt {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_renameat2,
            &[
                self.old_dirfd as _,
                self.old.as_ptr() as _,
                self.new_dirfd as _,
                self.new.as_ptr() as _,
                self.flags as _,
            ],
            Mode::Blocking,
        )
    }
}

// SAFETY: the path is on the heap.
unsafe impl EpollOp for MkdirAt {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_mkdirat,
            &[self.dirfd as _, self.path.as_ptr() as _, self.mode as _],
            Mode::Blocking,
        )
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Socket {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_socket,
            &[
                self.domain as _,
                (self.ty | libc::SOCK_NONBLOCK) as _,
                self.protocol as _,
            ],
            Mode::Inline,
        )
    }
}

// SAFETY: the address is boxed.
unsafe impl EpollOp for Connect {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_connect,
            &[self.fd as _, self.addr.as_ptr() as _, self.addr.len() as _],
            Mode::Connect(self.fd),
        )
    }
}

// SAFETY: the address and its length are boxed.
unsafe impl EpollOp for Accept {
    fn create_call(&mut self) -> Call {
        let addr = &mut *self.addr;
        let len: *mut libc::socklen_t = &mut addr.len;
        Call::new(
            libc::SYS_accept4,
            &[
                self.fd as _,
                addr.as_mut_ptr() as _,
                len as _,
                (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as _,
            ],
            Mode::Accept(self.fd),
        )
    }
}

// SAFETY: the buffer is stable by the IoBufMut contract.
unsafe impl<B: IoBufMut> EpollOp for Recv<B> {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_recvfrom,
            &[
                self.fd as _,
                self.buf.stable_mut_ptr() as _,
                self.buf.bytes_total() as _,
                (self.flags | libc::MSG_DONTWAIT) as _,
                0,
                0,
            ],
            Mode::Readable(self.fd),
        )
        .with_io_len(self.buf.bytes_total())
    }
}

// SAFETY: the buffer is stable by the IoBuf contract.
unsafe impl<B: IoBuf> EpollOp for Send<B> {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_sendto,
            &[
                self.fd as _,
                self.buf.stable_ptr() as _,
                self.buf.bytes_init() as _,
                (self.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                0,
                0,
            ],
            Mode::Writable(self.fd),
        )
        .with_io_len(self.buf.bytes_init())
    }
}

// SAFETY: the header is boxed and the buffer is stable.
unsafe impl<B: IoBuf> EpollOp for SendMsg<B> {
    fn create_call(&mut self) -> Call {
        let msg: *const libc::msghdr = &self.hdr.msg;
        Call {
            addressed: true,
            ..Call::new(
                libc::SYS_sendmsg,
                &[
                    self.fd as _,
                    msg as _,
                    (self.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                ],
                Mode::Writable(self.fd),
            )
        }
    }
}

// SAFETY: as for SendMsg.
unsafe impl<B: IoBufMut> EpollOp for RecvMsg<B> {
    fn create_call(&mut self) -> Call {
        let msg: *mut libc::msghdr = &mut self.hdr.msg;
        Call::new(
            libc::SYS_recvmsg,
            &[
                self.fd as _,
                msg as _,
                (libc::MSG_DONTWAIT | self.flags) as _,
            ],
            Mode::Readable(self.fd),
        )
    }
}

// SAFETY: no pointers.
unsafe impl EpollOp for Shutdown {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_shutdown,
            &[self.fd as _, self.how as _],
            Mode::Inline,
        )
    }
}

// SAFETY: the pollfd is boxed in the op, which outlives the call; poll(2) writes its revents.
unsafe impl EpollOp for PollOnce {
    fn create_call(&mut self) -> Call {
        let mode = if self.events & libc::POLLOUT as u32 != 0 {
            Mode::Writable(self.fd)
        } else {
            Mode::Readable(self.fd)
        };
        let pfd: *mut libc::pollfd = &mut *self.pfd;
        Call {
            zero_is_eagain: true,
            ..Call::new(libc::SYS_poll, &[pfd as _, 1, 0], mode)
        }
    }
}

// SAFETY: no pointers; each arm is one accept4 (the fallback of multishot).
unsafe impl EpollOp for AcceptMulti {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_accept4,
            &[
                self.fd as _,
                0,
                0,
                (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as _,
            ],
            Mode::Accept(self.fd),
        )
    }
}

// SAFETY: the pointer is into the ring's buffer memory, kept alive by the op (it holds the
// ring), taken from the free list for this arm only.
unsafe impl EpollOp for RecvMulti {
    fn create_call(&mut self) -> Call {
        if self.next_arm == ReadyArm::Wait && self.user_buf.is_none() {
            // Wait for data holding no buffer.
            self.armed = Some(ReadyArm::Wait);
            return Call {
                ready_only: true,
                ..Call::new(libc::SYS_recvfrom, &[self.fd as _], Mode::Readable(self.fd))
            };
        }
        let len = self.ring.buf_len();
        match self.take_user_buf() {
            Some((_, ptr)) => {
                self.armed = Some(ReadyArm::Try);
                Call {
                    try_once: true,
                    ..Call::new(
                        libc::SYS_recvfrom,
                        &[
                            self.fd as _,
                            ptr as _,
                            len as _,
                            libc::MSG_DONTWAIT as _,
                            0,
                            0,
                        ],
                        Mode::Readable(self.fd),
                    )
                    .with_io_len(len)
                }
            }
            None => Call::new(0, &[], Mode::Fail(libc::ENOBUFS)),
        }
    }
}

// SAFETY: the buffer is stable by the IoBuf contract. No zero copy here: a plain send.
unsafe impl<B: IoBuf> EpollOp for SendZc<B> {
    fn create_call(&mut self) -> Call {
        Call::new(
            libc::SYS_sendto,
            &[
                self.fd as _,
                self.buf.stable_ptr() as _,
                self.buf.bytes_init() as _,
                (self.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                0,
                0,
            ],
            Mode::Writable(self.fd),
        )
        .with_io_len(self.buf.bytes_init())
    }
}

// SAFETY: the buffer is stable by the IoBufMut contract. No registered table here: a plain
// read into the buffer's memory, exactly as `Read`.
unsafe impl<B: crate::FixedIoBuf + IoBufMut> EpollOp for ReadFixed<B> {
    fn create_call(&mut self) -> Call {
        let ptr = self.buf.stable_mut_ptr() as libc::c_long;
        let len = self.buf.bytes_total() as libc::c_long;
        let Target::Fd(fd) = self.target else {
            return no_direct_descriptors();
        };
        let mode = Mode::File {
            fd,
            write: false,
            stream_nr: libc::SYS_read,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_read, &[fd as _, ptr, len], mode)
        } else {
            Call::new(
                libc::SYS_pread64,
                &[fd as _, ptr, len, off(self.offset)],
                mode,
            )
        }
        .with_io_len(len as usize)
    }
}

// SAFETY: the buffer is stable by the IoBuf contract; a plain write, exactly as `Write`.
unsafe impl<B: crate::FixedIoBuf> EpollOp for WriteFixed<B> {
    fn create_call(&mut self) -> Call {
        let ptr = self.buf.stable_ptr() as libc::c_long;
        let len = self.buf.bytes_init() as libc::c_long;
        let Target::Fd(fd) = self.target else {
            return no_direct_descriptors();
        };
        let mode = Mode::File {
            fd,
            write: true,
            stream_nr: libc::SYS_write,
        };
        if self.offset == CURRENT_POS {
            Call::new(libc::SYS_write, &[fd as _, ptr, len], mode)
        } else {
            Call::new(
                libc::SYS_pwrite64,
                &[fd as _, ptr, len, off(self.offset)],
                mode,
            )
        }
        .with_io_len(len as usize)
    }
}

/// The readiness driver has no registered file table: direct-descriptor operations, and
/// operations on a [`Target::Fixed`], fail with `EOPNOTSUPP` (callers use plain fds on this
/// driver).
fn no_direct_descriptors() -> Call {
    Call::new(0, &[], Mode::Fail(libc::EOPNOTSUPP))
}

// SAFETY: no system call runs.
unsafe impl EpollOp for AcceptMultiDirect {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl EpollOp for FilesUpdateAlloc {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl EpollOp for CloseDirect {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl<B: IoBufMut> EpollOp for RecvDirect<B> {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl<B: IoBuf> EpollOp for SendDirect<B> {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl EpollOp for ShutdownDirect {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}

// SAFETY: no system call runs.
unsafe impl EpollOp for RecvMultiDirect {
    fn create_call(&mut self) -> Call {
        no_direct_descriptors()
    }
}
