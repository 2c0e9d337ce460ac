//! How each operation becomes an SQE.

use io_uring::{opcode, squeue::Entry, types::Fd};

use crate::buf::{IoBuf, IoBufMut};
use crate::op::*;

/// Builds an SQE on an operation's [`Target`]: `$build` runs with `$fd` bound to a
/// `types::Fd` or, for a registered file's slot, a `types::Fixed` (`IOSQE_FIXED_FILE`).
macro_rules! on_target {
    ($target:expr, |$fd:ident| $build:expr) => {
        match $target {
            Target::Fd(raw) => {
                let $fd = Fd(raw);
                $build
            }
            Target::Fixed(slot) => {
                let $fd = io_uring::types::Fixed(slot);
                $build
            }
        }
    };
}

/// An operation the io_uring driver can start.
///
/// # Safety
/// Every pointer in the returned entry must point into memory owned by `self` (heap or static
/// memory, never inline in `self`), valid until `self` is dropped, so that the value can move
/// (into the slot, when its future is dropped) while the kernel uses it.
pub unsafe trait UringOp: 'static {
    /// The SQE, without `user_data` (the driver sets it).
    fn create_entry(&mut self) -> Entry;

    /// A deadline to link to the SQE (`IORING_OP_LINK_TIMEOUT`), if the operation has one. The
    /// timespec must live as long as `self`.
    fn link_timeout(&self) -> Option<*const io_uring::types::Timespec> {
        None
    }

    /// The operation's result made here by a system call that never blocks, with no SQE, when
    /// `driver` (an io_uring one) lacks the operation's opcode: `socket(2)` before Linux 5.19
    /// (`IORING_OP_SOCKET`). `None`, the default, pushes the SQE. A result made here is final
    /// (a non-negative one is owned as the kernel's would be: `OpCode::complete` takes it).
    #[inline(always)]
    fn without_sqe(&mut self, driver: &crate::Driver) -> Option<i32> {
        let _ = driver;
        None
    }
}

/// `IORING_RECVSEND_POLL_FIRST` (linux/io_uring.h, 5.19), in a receive's `ioprio`.
const IORING_RECVSEND_POLL_FIRST: u16 = 1;

/// Whether this kernel (and `HOOP_KERNEL_LEVEL`) takes `IORING_RECVSEND_POLL_FIRST`: older
/// kernels refuse a receive with unknown `ioprio` bits.
fn recv_poll_first() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| crate::setup::kernel_at_least(5, 19))
}

// SAFETY: the inner op's pointers are its own; the timespec is boxed.
unsafe impl<T: UringOp> UringOp for Deadline<T> {
    fn create_entry(&mut self) -> Entry {
        self.inner.create_entry()
    }
    fn link_timeout(&self) -> Option<*const io_uring::types::Timespec> {
        Some(&*self.ts)
    }
    fn without_sqe(&mut self, driver: &crate::Driver) -> Option<i32> {
        self.inner.without_sqe(driver)
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Nop {
    fn create_entry(&mut self) -> Entry {
        opcode::Nop::new().build()
    }
}

// SAFETY: the timespec is boxed.
unsafe impl UringOp for Timeout {
    fn create_entry(&mut self) -> Entry {
        opcode::Timeout::new(&*self.ts).build()
    }
}

// SAFETY: the buffer's memory is stable by the IoBufMut contract.
unsafe impl<B: IoBufMut> UringOp for Read<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_total().min(u32::MAX as usize) as u32;
        let ptr = self.buf.stable_mut_ptr();
        on_target!(self.target, |fd| opcode::Read::new(fd, ptr, len)
            .offset(self.offset)
            .build())
    }
}

// SAFETY: the buffer's memory is stable by the IoBuf contract.
unsafe impl<B: IoBuf> UringOp for Write<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init().min(u32::MAX as usize) as u32;
        let ptr = self.buf.stable_ptr();
        on_target!(self.target, |fd| opcode::Write::new(fd, ptr, len)
            .offset(self.offset)
            .build())
    }
}

// SAFETY: the iovec array is a Vec that is never grown; the buffers are stable.
unsafe impl<B: IoBufMut> UringOp for Readv<B> {
    fn create_entry(&mut self) -> Entry {
        opcode::Readv::new(Fd(self.fd), self.iovecs.as_ptr(), self.iovecs.len() as u32)
            .offset(self.offset)
            .build()
    }
}

// SAFETY: as for Readv.
unsafe impl<B: IoBuf> UringOp for Writev<B> {
    fn create_entry(&mut self) -> Entry {
        opcode::Writev::new(Fd(self.fd), self.iovecs.as_ptr(), self.iovecs.len() as u32)
            .offset(self.offset)
            .build()
    }
}

// SAFETY: the CString's bytes are on the heap.
unsafe impl UringOp for OpenAt {
    fn create_entry(&mut self) -> Entry {
        opcode::OpenAt::new(Fd(self.dirfd), self.path.as_ptr())
            .flags(self.flags)
            .mode(self.mode)
            .build()
    }
}

// SAFETY: the CString's bytes and the open_how are on the heap.
unsafe impl UringOp for OpenAt2 {
    fn create_entry(&mut self) -> Entry {
        let how: *const libc::open_how = &*self.how;
        // `types::OpenHow` is a transparent wrapper of the kernel's open_how, as libc's is.
        opcode::OpenAt2::new(Fd(self.dirfd), self.path.as_ptr(), how.cast()).build()
    }
}

// SAFETY: no pointers (the offsets are passed by value).
unsafe impl UringOp for Splice {
    fn create_entry(&mut self) -> Entry {
        let (off_in, off_out, len) = (*self.off_in, *self.off_out, self.len);
        let flags = self.flags;
        match (self.fd_in, self.fd_out) {
            (Target::Fd(i), Target::Fd(o)) => {
                opcode::Splice::new(Fd(i), off_in, Fd(o), off_out, len)
            }
            (Target::Fd(i), Target::Fixed(o)) => {
                opcode::Splice::new(Fd(i), off_in, io_uring::types::Fixed(o), off_out, len)
            }
            (Target::Fixed(i), Target::Fd(o)) => {
                opcode::Splice::new(io_uring::types::Fixed(i), off_in, Fd(o), off_out, len)
            }
            (Target::Fixed(i), Target::Fixed(o)) => opcode::Splice::new(
                io_uring::types::Fixed(i),
                off_in,
                io_uring::types::Fixed(o),
                off_out,
                len,
            ),
        }
        .flags(flags)
        .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Close {
    fn create_entry(&mut self) -> Entry {
        opcode::Close::new(Fd(self.fd)).build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Fsync {
    fn create_entry(&mut self) -> Entry {
        let flags = if self.datasync {
            io_uring::types::FsyncFlags::DATASYNC
        } else {
            io_uring::types::FsyncFlags::empty()
        };
        on_target!(self.target, |fd| opcode::Fsync::new(fd)
            .flags(flags)
            .build())
    }
}

// SAFETY: the path and the statx buffer are on the heap.
unsafe impl UringOp for Statx {
    fn create_entry(&mut self) -> Entry {
        let buf: *mut libc::statx = &mut *self.statx;
        opcode::Statx::new(Fd(self.dirfd), self.path.as_ptr(), buf.cast())
            .flags(self.flags)
            .mask(self.mask)
            .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Fallocate {
    fn create_entry(&mut self) -> Entry {
        opcode::Fallocate::new(Fd(self.fd), self.len)
            .offset(self.offset)
            .mode(self.mode)
            .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Ftruncate {
    fn create_entry(&mut self) -> Entry {
        opcode::Ftruncate::new(Fd(self.fd), self.len).build()
    }
}

// SAFETY: the path is on the heap.
unsafe impl UringOp for UnlinkAt {
    fn create_entry(&mut self) -> Entry {
        opcode::UnlinkAt::new(Fd(self.dirfd), self.path.as_ptr())
            .flags(self.flags)
            .build()
    }
}

// SAFETY: both paths are on the heap.
unsafe impl UringOp for RenameAt {
    fn create_entry(&mut self) -> Entry {
        opcode::RenameAt::new(
            Fd(self.old_dirfd),
            self.old.as_ptr(),
            Fd(self.new_dirfd),
            self.new.as_ptr(),
        )
        .flags(self.flags)
        .build()
    }
}

// SAFETY: the path is on the heap.
unsafe impl UringOp for MkdirAt {
    fn create_entry(&mut self) -> Entry {
        opcode::MkDirAt::new(Fd(self.dirfd), self.path.as_ptr())
            .mode(self.mode)
            .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Socket {
    fn create_entry(&mut self) -> Entry {
        opcode::Socket::new(self.domain, self.ty, self.protocol).build()
    }

    /// Before 5.19 (no `IORING_OP_SOCKET`): `socket(2)` here, which never blocks, so the
    /// io_uring driver runs on 5.15 kernels (Ubuntu 22.04).
    fn without_sqe(&mut self, driver: &crate::Driver) -> Option<i32> {
        if driver.kind() != crate::DriverKind::Uring || driver.supports_opcode(opcode::Socket::CODE)
        {
            return None;
        }
        // SAFETY: socket(2) has no memory-safety preconditions; a new fd is owned by the
        // result (`Socket::complete`) as the CQE's would be.
        let fd = unsafe { libc::socket(self.domain, self.ty, self.protocol) };
        Some(if fd < 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            fd
        })
    }
}

// SAFETY: the address is boxed.
unsafe impl UringOp for Connect {
    fn create_entry(&mut self) -> Entry {
        opcode::Connect::new(Fd(self.fd), self.addr.as_ptr(), self.addr.len).build()
    }
}

// SAFETY: the address and its length are boxed.
unsafe impl UringOp for Accept {
    fn create_entry(&mut self) -> Entry {
        let addr = &mut *self.addr;
        opcode::Accept::new(Fd(self.fd), addr.as_mut_ptr(), &mut addr.len)
            .flags(libc::SOCK_CLOEXEC)
            .build()
    }
}

// SAFETY: the buffer is stable by the IoBufMut contract.
unsafe impl<B: IoBufMut> UringOp for Recv<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_total().min(u32::MAX as usize) as u32;
        let ioprio = if self.poll_first && recv_poll_first() {
            IORING_RECVSEND_POLL_FIRST
        } else {
            0
        };
        opcode::Recv::new(Fd(self.fd), self.buf.stable_mut_ptr(), len)
            .flags(self.flags)
            .ioprio(ioprio)
            .build()
    }
}

// SAFETY: the buffer is stable by the IoBuf contract.
unsafe impl<B: IoBuf> UringOp for Send<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init().min(u32::MAX as usize) as u32;
        opcode::Send::new(Fd(self.fd), self.buf.stable_ptr(), len)
            .flags(self.flags)
            .build()
    }
}

// SAFETY: the header (msghdr, iovec, address) is boxed and the buffer is stable.
unsafe impl<B: IoBuf> UringOp for SendMsg<B> {
    fn create_entry(&mut self) -> Entry {
        opcode::SendMsg::new(Fd(self.fd), &self.hdr.msg)
            .flags(self.flags as u32)
            .build()
    }
}

// SAFETY: as for SendMsg.
unsafe impl<B: IoBufMut> UringOp for RecvMsg<B> {
    fn create_entry(&mut self) -> Entry {
        opcode::RecvMsg::new(Fd(self.fd), &mut self.hdr.msg)
            .flags(self.flags as u32)
            .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for Shutdown {
    fn create_entry(&mut self) -> Entry {
        opcode::Shutdown::new(Fd(self.fd), self.how).build()
    }
}

// SAFETY: no pointers (the poll mask is passed by value).
unsafe impl UringOp for PollOnce {
    fn create_entry(&mut self) -> Entry {
        opcode::PollAdd::new(Fd(self.fd), self.events).build()
    }
}

// SAFETY: the events buffer is a Vec on the heap that the operation owns and never grows.
unsafe impl UringOp for EpollWait {
    fn create_entry(&mut self) -> Entry {
        let max = self.max_events();
        opcode::EpollWait::new(
            Fd(self.epfd),
            self.events
                .as_mut_ptr()
                .cast::<io_uring::types::epoll_event>(),
            max,
        )
        .build()
    }

    /// Before 6.15 (no `IORING_OP_EPOLL_WAIT`): a non-blocking `epoll_wait(2)` here; the
    /// caller waits for the set's fd to be readable when it finds nothing.
    fn without_sqe(&mut self, driver: &crate::Driver) -> Option<i32> {
        if driver.kind() != crate::DriverKind::Uring
            || driver.supports_opcode(opcode::EpollWait::CODE)
        {
            return None;
        }
        let max = i32::try_from(self.max_events()).unwrap_or(i32::MAX);
        // SAFETY: the kernel writes at most `max` events into the Vec's buffer, which holds
        // that many; the call does not block (timeout 0).
        let n = unsafe { libc::epoll_wait(self.epfd, self.events.as_mut_ptr(), max, 0) };
        Some(if n < 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            n
        })
    }
}

// SAFETY: no pointers (no address is asked of a multishot accept).
unsafe impl UringOp for AcceptMulti {
    fn create_entry(&mut self) -> Entry {
        if self.multishot {
            opcode::AcceptMulti::new(Fd(self.fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
        } else {
            // One accept per arm (its CQE has no F_MORE: the stream re-arms).
            opcode::Accept::new(Fd(self.fd), std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
        }
    }
}

// SAFETY: kernel mode: no pointers (the kernel picks a ring buffer); fallback: the pointer is into
// the ring's buffer memory, which the op keeps alive (it holds the ring) and which was taken from
// the free list for this arm only.
unsafe impl UringOp for RecvMulti {
    fn create_entry(&mut self) -> Entry {
        if self.ring.is_kernel() {
            if self.ring.bundles() {
                return opcode::RecvMultiBundle::new(Fd(self.fd), self.ring.bgid()).build();
            }
            return opcode::RecvMulti::new(Fd(self.fd), self.ring.bgid()).build();
        }
        match self.take_user_buf() {
            Some((_, ptr)) => {
                opcode::Recv::new(Fd(self.fd), ptr, self.ring.buf_len() as u32).build()
            }
            // No free buffer (the stream waits for one before arming, so only a race): a NOP
            // that fails with ENOBUFS would be ideal; a zero-length recv is harmless instead.
            None => opcode::Recv::new(Fd(self.fd), std::ptr::null_mut(), 0).build(),
        }
    }
}

// SAFETY: the buffer is stable by the IoBuf contract, and the op owns it until its final CQE
// (the notification, for SEND_ZC: `MultiOp` keeps the op, or the slot once the stream is dropped).
unsafe impl<B: IoBuf> UringOp for SendZc<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init().min(u32::MAX as usize) as u32;
        let ptr = self.buf.stable_ptr();
        if self.zero_copy {
            opcode::SendZc::new(Fd(self.fd), ptr, len)
                .flags(self.flags)
                .build()
        } else {
            // The fallback: one CQE, no notification.
            opcode::Send::new(Fd(self.fd), ptr, len)
                .flags(self.flags)
                .build()
        }
    }
}

// SAFETY: the buffer is stable by the IoBufMut contract; with an index, the kernel also checks
// that it lies inside registered buffer `index`, which the buffer's pool keeps registered and
// allocated while the buffer (owned by this op) lives.
unsafe impl<B: crate::FixedIoBuf + IoBufMut> UringOp for ReadFixed<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_total().min(u32::MAX as usize) as u32;
        let ptr = self.buf.stable_mut_ptr();
        let offset = self.offset;
        on_target!(self.target, |fd| match self.index {
            Some(index) => opcode::ReadFixed::new(fd, ptr, len, index)
                .offset(offset)
                .build(),
            None => opcode::Read::new(fd, ptr, len).offset(offset).build(),
        })
    }
}

// SAFETY: as for ReadFixed, with the IoBuf contract.
unsafe impl<B: crate::FixedIoBuf> UringOp for WriteFixed<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init().min(u32::MAX as usize) as u32;
        let ptr = self.buf.stable_ptr();
        let offset = self.offset;
        on_target!(self.target, |fd| match self.index {
            Some(index) => opcode::WriteFixed::new(fd, ptr, len, index)
                .offset(offset)
                .build(),
            None => opcode::Write::new(fd, ptr, len).offset(offset).build(),
        })
    }
}

// SAFETY: no pointers (no address is asked of a multishot accept).
unsafe impl UringOp for AcceptMultiDirect {
    fn create_entry(&mut self) -> Entry {
        // No SOCK_CLOEXEC: the kernel refuses it with a file slot (a slot is no fd to inherit).
        opcode::AcceptMulti::new(Fd(self.fd()))
            .allocate_file_index(true)
            .build()
    }
}

// SAFETY: the fd array is boxed (the kernel reads the fd from it and writes the slot index
// back into it, hence a pointer from `&mut`); the fd it names is owned by the op until its
// completion.
unsafe impl UringOp for FilesUpdateAlloc {
    fn create_entry(&mut self) -> Entry {
        opcode::FilesUpdate::new(self.fds.as_mut_ptr().cast_const(), 1)
            .offset(FILE_INDEX_ALLOC)
            .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for CloseDirect {
    fn create_entry(&mut self) -> Entry {
        opcode::Close::new(io_uring::types::Fixed(self.slot)).build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for FixedFdInstall {
    fn create_entry(&mut self) -> Entry {
        opcode::FixedFdInstall::new(io_uring::types::Fixed(self.slot), 0).build()
    }
}

// SAFETY: the buffer's memory is stable by the IoBufMut contract.
unsafe impl<B: IoBufMut> UringOp for RecvDirect<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_total().min(u32::MAX as usize) as u32;
        opcode::Recv::new(
            io_uring::types::Fixed(self.slot),
            self.buf.stable_mut_ptr(),
            len,
        )
        .build()
    }
}

// SAFETY: the buffer's memory is stable by the IoBuf contract.
unsafe impl<B: IoBuf> UringOp for SendDirect<B> {
    fn create_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init().min(u32::MAX as usize) as u32;
        opcode::Send::new(
            io_uring::types::Fixed(self.slot),
            self.buf.stable_ptr(),
            len,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
    }
}

// SAFETY: no pointers.
unsafe impl UringOp for ShutdownDirect {
    fn create_entry(&mut self) -> Entry {
        opcode::Shutdown::new(io_uring::types::Fixed(self.slot), self.how).build()
    }
}

// SAFETY: as for RecvMulti: kernel mode has no pointers; fallback mode points into the ring's
// buffer memory, kept alive by the op and taken from the free list for this arm only.
unsafe impl UringOp for RecvMultiDirect {
    fn create_entry(&mut self) -> Entry {
        let fd = io_uring::types::Fixed(self.slot);
        let ring = &self.inner.ring;
        if ring.is_kernel() {
            if ring.bundles() {
                return opcode::RecvMultiBundle::new(fd, ring.bgid()).build();
            }
            return opcode::RecvMulti::new(fd, ring.bgid()).build();
        }
        let len = ring.buf_len() as u32;
        match self.inner.take_user_buf() {
            Some((_, ptr)) => opcode::Recv::new(fd, ptr, len).build(),
            None => opcode::Recv::new(fd, std::ptr::null_mut(), 0).build(),
        }
    }
}
