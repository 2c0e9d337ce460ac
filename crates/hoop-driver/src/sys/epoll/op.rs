//! How each operation becomes a system call for the readiness driver: one [`Call`] per
//! operation, listed in one table.

use std::os::fd::RawFd;
use std::time::Duration;

use super::call::{Call, Mode};
use crate::buf::{IoBuf, IoBufMut};
use crate::op::*;

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

/// The readiness driver has no registered file table: direct-descriptor operations, and
/// operations on a [`Target::Fixed`], fail with `EOPNOTSUPP` (callers use plain fds on this
/// driver).
fn no_direct_descriptors() -> Call {
    Call::new(0, &[], Mode::Fail(libc::EOPNOTSUPP))
}

/// A read (`write` false) or write of `len` bytes at `ptr` on `target`, at `offset` or, for
/// [`CURRENT_POS`], at the file position (`read`/`write` rather than `pread64`/`pwrite64`).
fn file_call(target: Target, write: bool, ptr: libc::c_long, len: usize, offset: u64) -> Call {
    let Target::Fd(fd) = target else {
        return no_direct_descriptors();
    };
    let (nr, positioned) = if write {
        (libc::SYS_write, libc::SYS_pwrite64)
    } else {
        (libc::SYS_read, libc::SYS_pread64)
    };
    let len = len as libc::c_long;
    let mode = Mode::File {
        fd,
        write,
        stream_nr: nr,
    };
    if offset == CURRENT_POS {
        Call::new(nr, &[fd as _, ptr, len], mode)
    } else {
        Call::new(positioned, &[fd as _, ptr, len, off(offset)], mode)
    }
    .with_io_len(len as usize)
}

/// A vectored read (`write` false) or write through `iovecs` on `fd`, at `offset` or, for
/// [`CURRENT_POS`], at the file position (`readv`/`writev` rather than `preadv`/`pwritev`).
fn vectored_call(fd: RawFd, write: bool, iovecs: &[libc::iovec], offset: u64) -> Call {
    let (nr, positioned) = if write {
        (libc::SYS_writev, libc::SYS_pwritev)
    } else {
        (libc::SYS_readv, libc::SYS_preadv)
    };
    let (iov, n) = (
        iovecs.as_ptr() as libc::c_long,
        iovecs.len() as libc::c_long,
    );
    let mode = Mode::File {
        fd,
        write,
        stream_nr: nr,
    };
    if offset == CURRENT_POS {
        Call::new(nr, &[fd as _, iov, n], mode)
    } else {
        Call::new(positioned, &[fd as _, iov, n, off(offset), 0], mode)
    }
}

/// Implements [`EpollOp`] for every operation of the table below. An entry reads
/// `[generics] Operation => |op| body;`: `body` is the operation's `create_call`, with `op`
/// the `&mut Operation` (a `return` in it leaves `create_call`). The comment above each entry
/// says why the pointers its call carries meet `EpollOp`'s contract.
macro_rules! epoll_ops {
    ($( [$($generics:tt)*] $op_type:ty => |$op:pat_param| $body:expr; )*) => {$(
        // SAFETY: every pointer in the call an entry's body builds points into memory the
        // operation owns and keeps in place until it is dropped: a boxed field, a heap string
        // or a Vec it never grows, or a buffer whose `IoBuf`/`IoBufMut` contract keeps it
        // there (an inner operation's call is covered by that operation's own entry). Entries
        // whose comment says "no pointers", or that run no system call, pass plain integers.
        // The comment above each entry says which applies.
        unsafe impl<$($generics)*> EpollOp for $op_type {
            fn create_call(&mut self) -> Call {
                let $op = self;
                $body
            }
        }
    )*};
}

epoll_ops! {
    // The inner op's pointers are its own.
    [T: EpollOp] Deadline<T> => |op| {
        let mut call = op.inner.create_call();
        call.deadline = Some(op.duration);
        call
    };

    // No pointers.
    [] Nop => |_| Call::new(0, &[], Mode::Nop);

    // No pointers.
    [] Timeout => |op| {
        let d = Duration::new(op.ts_secs(), op.ts_nanos());
        Call::new(0, &[], Mode::Timer(d))
    };

    // The buffer is stable by the IoBufMut contract.
    [B: IoBufMut] Read<B> => |op| {
        let ptr = op.buf.stable_mut_ptr() as libc::c_long;
        file_call(op.target, false, ptr, op.buf.bytes_total(), op.offset)
    };

    // The buffer is stable by the IoBuf contract.
    [B: IoBuf] Write<B> => |op| {
        let ptr = op.buf.stable_ptr() as libc::c_long;
        file_call(op.target, true, ptr, op.buf.bytes_init(), op.offset)
    };

    // The iovec array is a Vec never grown; the buffers are stable.
    [B: IoBufMut] Readv<B> => |op| vectored_call(op.fd, false, &op.iovecs, op.offset);

    // As for Readv.
    [B: IoBuf] Writev<B> => |op| vectored_call(op.fd, true, &op.iovecs, op.offset);

    // The path is on the heap.
    [] OpenAt => |op| {
        Call::new(
            libc::SYS_openat,
            &[
                op.dirfd as _,
                op.path.as_ptr() as _,
                op.flags as _,
                op.mode as _,
            ],
            Mode::Blocking,
        )
    };

    // No pointers.
    [] Close => |op| Call::new(libc::SYS_close, &[op.fd as _], Mode::Close(op.fd));

    // No pointers.
    [] Fsync => |op| {
        let nr = if op.datasync {
            libc::SYS_fdatasync
        } else {
            libc::SYS_fsync
        };
        let Target::Fd(fd) = op.target else {
            return no_direct_descriptors();
        };
        Call::new(nr, &[fd as _], Mode::Blocking)
    };

    // The path and the open_how are on the heap.
    [] OpenAt2 => |op| {
        let how: *const libc::open_how = &*op.how;
        Call::new(
            libc::SYS_openat2,
            &[
                op.dirfd as _,
                op.path.as_ptr() as _,
                how as _,
                std::mem::size_of::<libc::open_how>() as _,
            ],
            Mode::Blocking,
        )
    };

    // The offsets are boxed; splice(2) reads and updates them there.
    [] Splice => |op| {
        let (Target::Fd(fd_in), Target::Fd(fd_out)) = (op.fd_in, op.fd_out) else {
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
        let (off_in, off_out) = (ptr(&mut op.off_in), ptr(&mut op.off_out));
        // Out of a pipe into a stream (a socket, a pipe: no offset), wait until it is
        // writable; anything else (a file on either side) runs on the blocking pool.
        let pipe_to_stream = *op.off_in < 0 && *op.off_out < 0;
        let (flags, mode) = if pipe_to_stream {
            (op.flags | libc::SPLICE_F_NONBLOCK, Mode::Writable(fd_out))
        } else {
            (op.flags, Mode::Blocking)
        };
        Call::new(
            libc::SYS_splice,
            &[
                fd_in as _,
                off_in,
                fd_out as _,
                off_out,
                op.len as _,
                flags as _,
            ],
            mode,
        )
    };

    // The path and the statx buffer are on the heap.
    [] Statx => |op| {
        let buf: *mut libc::statx = &mut *op.statx;
        Call::new(
            libc::SYS_statx,
            &[
                op.dirfd as _,
                op.path.as_ptr() as _,
                op.flags as _,
                op.mask as _,
                buf as _,
            ],
            Mode::Blocking,
        )
    };

    // No pointers.
    [] Ftruncate => |op| {
        Call::new(
            libc::SYS_ftruncate,
            &[op.fd as _, off(op.len)],
            Mode::Blocking,
        )
    };

    // No pointers.
    [] Fallocate => |op| {
        Call::new(
            libc::SYS_fallocate,
            &[
                op.fd as _,
                op.mode as _,
                off(op.offset),
                off(op.len),
            ],
            Mode::Blocking,
        )
    };

    // The path is on the heap.
    [] UnlinkAt => |op| {
        Call::new(
            libc::SYS_unlinkat,
            &[op.dirfd as _, op.path.as_ptr() as _, op.flags as _],
            Mode::Blocking,
        )
    };

    // Both paths are on the heap.
    [] RenameAt => |op| {
        Call::new(
            libc::SYS_renameat2,
            &[
                op.old_dirfd as _,
                op.old.as_ptr() as _,
                op.new_dirfd as _,
                op.new.as_ptr() as _,
                op.flags as _,
            ],
            Mode::Blocking,
        )
    };

    // The path is on the heap.
    [] MkdirAt => |op| {
        Call::new(
            libc::SYS_mkdirat,
            &[op.dirfd as _, op.path.as_ptr() as _, op.mode as _],
            Mode::Blocking,
        )
    };

    // No pointers.
    [] Socket => |op| {
        Call::new(
            libc::SYS_socket,
            &[
                op.domain as _,
                (op.ty | libc::SOCK_NONBLOCK) as _,
                op.protocol as _,
            ],
            Mode::Inline,
        )
    };

    // The address is boxed.
    [] Connect => |op| {
        Call::new(
            libc::SYS_connect,
            &[op.fd as _, op.addr.as_ptr() as _, op.addr.len() as _],
            Mode::Connect(op.fd),
        )
    };

    // The address and its length are boxed.
    [] Accept => |op| {
        let addr = &mut *op.addr;
        let len: *mut libc::socklen_t = &mut addr.len;
        Call::new(
            libc::SYS_accept4,
            &[
                op.fd as _,
                addr.as_mut_ptr() as _,
                len as _,
                (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as _,
            ],
            Mode::Accept(op.fd),
        )
    };

    // The buffer is stable by the IoBufMut contract.
    [B: IoBufMut] Recv<B> => |op| {
        Call::new(
            libc::SYS_recvfrom,
            &[
                op.fd as _,
                op.buf.stable_mut_ptr() as _,
                op.buf.bytes_total() as _,
                (op.flags | libc::MSG_DONTWAIT) as _,
                0,
                0,
            ],
            Mode::Readable(op.fd),
        )
        .with_io_len(op.buf.bytes_total())
    };

    // The buffer is stable by the IoBuf contract.
    [B: IoBuf] Send<B> => |op| {
        Call::new(
            libc::SYS_sendto,
            &[
                op.fd as _,
                op.buf.stable_ptr() as _,
                op.buf.bytes_init() as _,
                (op.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                0,
                0,
            ],
            Mode::Writable(op.fd),
        )
        .with_io_len(op.buf.bytes_init())
    };

    // The header is boxed and the buffer is stable.
    [B: IoBuf] SendMsg<B> => |op| {
        let msg: *const libc::msghdr = &op.hdr.msg;
        Call {
            addressed: true,
            ..Call::new(
                libc::SYS_sendmsg,
                &[
                    op.fd as _,
                    msg as _,
                    (op.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                ],
                Mode::Writable(op.fd),
            )
        }
    };

    // As for SendMsg.
    [B: IoBufMut] RecvMsg<B> => |op| {
        let msg: *mut libc::msghdr = &mut op.hdr.msg;
        Call::new(
            libc::SYS_recvmsg,
            &[
                op.fd as _,
                msg as _,
                (libc::MSG_DONTWAIT | op.flags) as _,
            ],
            Mode::Readable(op.fd),
        )
    };

    // No pointers.
    [] Shutdown => |op| {
        Call::new(
            libc::SYS_shutdown,
            &[op.fd as _, op.how as _],
            Mode::Inline,
        )
    };

    // The pollfd is boxed in the op, which outlives the call; poll(2) writes its revents.
    [] PollOnce => |op| {
        let mode = if op.events & libc::POLLOUT as u32 != 0 {
            Mode::Writable(op.fd)
        } else {
            Mode::Readable(op.fd)
        };
        let pfd: *mut libc::pollfd = &mut *op.pfd;
        Call {
            // `PollOnce::ready`: the driver's readiness record answers, no poll(2).
            ready_only: op.recorded,
            zero_is_eagain: true,
            ..Call::new(libc::SYS_poll, &[pfd as _, 1, 0], mode)
        }
    };

    // The events buffer is a Vec the operation owns and never grows. The set's fd is watched;
    // `epoll_wait(2)` with no timeout runs once it is readable (none found: wait again).
    [] EpollWait => |op| {
        let max = op.max_events();
        let events: *mut libc::epoll_event = op.events.as_mut_ptr();
        Call {
            zero_is_eagain: true,
            ..Call::new(
                libc::SYS_epoll_wait,
                &[op.epfd as _, events as _, max as _, 0],
                Mode::Readable(op.epfd),
            )
        }
    };

    // No pointers; the arm stays armed in the driver, one accept4 per connection.
    [] AcceptMulti => |op| {
        Call::new(
            libc::SYS_accept4,
            &[
                op.fd as _,
                0,
                0,
                (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as _,
            ],
            Mode::AcceptMulti(op.fd),
        )
    };

    // The pointer is into the ring's buffer memory, kept alive by the op (it holds the
    // ring), taken from the free list for this arm only.
    [] RecvMulti => |op| {
        if op.next_arm == ReadyArm::Wait && op.user_buf.is_none() {
            // Wait for data holding no buffer.
            op.armed = Some(ReadyArm::Wait);
            return Call {
                ready_only: true,
                ..Call::new(libc::SYS_recvfrom, &[op.fd as _], Mode::Readable(op.fd))
            };
        }
        let len = op.ring.buf_len();
        match op.take_user_buf() {
            Some((_, ptr)) => {
                op.armed = Some(ReadyArm::Try);
                Call {
                    try_once: true,
                    ..Call::new(
                        libc::SYS_recvfrom,
                        &[
                            op.fd as _,
                            ptr as _,
                            len as _,
                            libc::MSG_DONTWAIT as _,
                            0,
                            0,
                        ],
                        Mode::Readable(op.fd),
                    )
                    .with_io_len(len)
                }
            }
            None => Call::new(0, &[], Mode::Fail(libc::ENOBUFS)),
        }
    };

    // The buffer is stable by the IoBuf contract. No zero copy here: a plain send.
    [B: IoBuf] SendZc<B> => |op| {
        Call::new(
            libc::SYS_sendto,
            &[
                op.fd as _,
                op.buf.stable_ptr() as _,
                op.buf.bytes_init() as _,
                (op.flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as _,
                0,
                0,
            ],
            Mode::Writable(op.fd),
        )
        .with_io_len(op.buf.bytes_init())
    };

    // The buffer is stable by the IoBufMut contract. No registered table here: a plain
    // read into the buffer's memory, exactly as `Read`.
    [B: crate::FixedIoBuf + IoBufMut] ReadFixed<B> => |op| {
        let ptr = op.buf.stable_mut_ptr() as libc::c_long;
        file_call(op.target, false, ptr, op.buf.bytes_total(), op.offset)
    };

    // The buffer is stable by the IoBuf contract; a plain write, exactly as `Write`.
    [B: crate::FixedIoBuf] WriteFixed<B> => |op| {
        let ptr = op.buf.stable_ptr() as libc::c_long;
        file_call(op.target, true, ptr, op.buf.bytes_init(), op.offset)
    };

    // No system call runs.
    [] AcceptMultiDirect => |_| no_direct_descriptors();

    // No system call runs.
    [] FilesUpdateAlloc => |_| no_direct_descriptors();

    // No system call runs.
    [] CloseDirect => |_| no_direct_descriptors();

    // No system call runs.
    [] FixedFdInstall => |_| no_direct_descriptors();

    // No system call runs.
    [B: IoBufMut] RecvDirect<B> => |_| no_direct_descriptors();

    // No system call runs.
    [B: IoBuf] SendDirect<B> => |_| no_direct_descriptors();

    // No system call runs.
    [] ShutdownDirect => |_| no_direct_descriptors();

    // No system call runs.
    [] RecvMultiDirect => |_| no_direct_descriptors();
}
