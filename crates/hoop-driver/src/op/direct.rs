//! Operations on direct descriptors: slots of the ring's registered file table.
//!
//! [`AcceptMultiDirect`] accepts connections straight into free slots of the table
//! (`IORING_FILE_INDEX_ALLOC`, 5.19), with no fd in the process's fd table. Each connection is
//! a [`DirectFd`], the owner of its slot: dropping it closes the slot through the ring
//! (`IORING_OP_CLOSE` on the slot, pushed at the start of the next driver turn), and
//! [`CloseDirect`] closes it and waits. The other operations here ([`RecvDirect`],
//! [`SendDirect`], [`RecvMultiDirect`], [`ShutdownDirect`]) name the slot with
//! `IOSQE_FIXED_FILE`. [`FilesUpdateAlloc`] puts an open file (a regular file, say) into a
//! free slot; the file operations ([`Read`](super::Read), [`Write`](super::Write),
//! [`Fsync`](super::Fsync), [`ReadFixed`](super::ReadFixed), [`WriteFixed`](super::WriteFixed))
//! then name the slot with a [`Target::Fixed`](super::Target). Only the io_uring driver has
//! direct descriptors: on the epoll driver [`AcceptMultiDirect::new`] and
//! [`FilesUpdateAlloc::new`] fail with `Unsupported`, and callers use plain fds instead.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::rc::Rc;

use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::bufring::{BufRing, RingBuf};
use crate::error::cvt;
use crate::fixedfile::FixedFiles;
use crate::lifecycle::Completion;
use crate::op::{AcceptMulti, MultishotCode, OpCode, RecvMulti};
use crate::Driver;

/// The owner of one occupied slot of a ring's registered file table (a direct descriptor).
/// Dropping it closes the slot through the ring; it must stay on the thread of the runtime
/// whose ring holds the slot.
#[derive(Debug)]
pub struct DirectFd {
    slot: u32,
    files: Option<Rc<FixedFiles>>,
}

impl DirectFd {
    /// The slot index in the ring's registered file table.
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

impl Drop for DirectFd {
    fn drop(&mut self) {
        if let Some(files) = self.files.take() {
            files.queue_close(self.slot);
        }
    }
}

/// Accepts connections into the ring's registered file table for as long as it is armed
/// (multishot accept with `IORING_FILE_INDEX_ALLOC`, 5.19). Each item owns its slot
/// ([`DirectFd`]), so connections accepted after the stream was dropped are closed.
#[derive(Debug)]
pub struct AcceptMultiDirect {
    inner: AcceptMulti,
    files: Rc<FixedFiles>,
}

impl AcceptMultiDirect {
    /// Accepts on the listening socket `fd` into the current runtime's fixed-file table,
    /// registering the table first if needed. `Unsupported` on the epoll driver, before 5.19,
    /// or without a current runtime; the error of the registration if the kernel refuses it.
    pub fn new(fd: RawFd) -> io::Result<Self> {
        let driver = Driver::current().ok_or_else(|| {
            io::Error::new(io::ErrorKind::Unsupported, "no hoop runtime on this thread")
        })?;
        if !driver.supports_direct_accept() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "direct accept needs the io_uring driver on Linux 5.19 or later",
            ));
        }
        let files = driver.direct_files()?;
        Ok(AcceptMultiDirect {
            inner: AcceptMulti::new(fd),
            files,
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.inner.fd
    }
}

impl MultishotCode for AcceptMultiDirect {
    fn waits_for_peer(&self) -> bool {
        true
    }

    type Item = io::Result<DirectFd>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        if c.res == -libc::ECANCELED {
            return None;
        }
        Some(cvt(c.res).map(|slot| {
            self.files.occupied();
            DirectFd {
                slot,
                files: Some(self.files.clone()),
            }
        }))
    }

    fn rearm(&self, last: &Completion) -> bool {
        // As for a plain multishot accept; a full table (ENFILE) ends the stream rather than
        // spinning on re-arms.
        last.res != -libc::ENFILE && self.inner.rearm(last)
    }
}

/// The `offset` of `IORING_OP_FILES_UPDATE` that asks the kernel to pick free slots
/// (`IORING_FILE_INDEX_ALLOC`, `~0U` in linux/io_uring.h; Linux 5.19).
pub(crate) const FILE_INDEX_ALLOC: i32 = -1;

/// Puts an open file into a free slot of the ring's registered file table
/// (`IORING_OP_FILES_UPDATE` with `IORING_FILE_INDEX_ALLOC`, Linux 5.19): the kernel picks the
/// slot, writes its index back into the fd array the op owns, and completes with the number of
/// files installed (1). The result owns the slot ([`DirectFd`]); the fd stays open (the slot
/// holds its own reference to the file) and is given back with the result, also on failure,
/// for the caller to close or to keep using.
///
/// If the future is dropped, the slot filled meanwhile is closed and the fd with `close(2)`
/// when the completion arrives.
#[derive(Debug)]
pub struct FilesUpdateAlloc {
    /// The fd to install, then the slot the kernel chose; boxed, the kernel reads and writes it.
    pub(crate) fds: Box<[RawFd; 1]>,
    /// The fd, owned until the completion so its number cannot be reused while the kernel may
    /// still look it up.
    fd: OwnedFd,
    files: Rc<FixedFiles>,
}

impl FilesUpdateAlloc {
    /// Installs `fd` into the current runtime's fixed-file table, registering the table first
    /// if needed. Fails, giving `fd` back, with `Unsupported` where
    /// [`Driver::supports_registered_files`] is false (the epoll driver, an IOPOLL ring, a
    /// kernel before 5.19 or without `IORING_OP_FILES_UPDATE`) or without a current runtime, and
    /// with the kernel's error if it refuses to register the table.
    pub fn new(fd: OwnedFd) -> Result<Self, (io::Error, OwnedFd)> {
        let files = match Driver::current() {
            None => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no hoop runtime on this thread",
            )),
            Some(d) if !d.supports_registered_files() => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "registered files need the io_uring driver (not IOPOLL) on Linux 5.19 or later",
            )),
            Some(d) => d.direct_files(),
        };
        match files {
            Ok(files) => {
                use std::os::fd::AsRawFd;
                Ok(FilesUpdateAlloc {
                    fds: Box::new([fd.as_raw_fd()]),
                    fd,
                    files,
                })
            }
            Err(e) => Err((e, fd)),
        }
    }
}

impl OpCode for FilesUpdateAlloc {
    type Output = (io::Result<DirectFd>, OwnedFd);
    fn complete(self, c: Completion) -> Self::Output {
        let res = match cvt(c.res) {
            Ok(1) => match u32::try_from(self.fds[0]) {
                Ok(slot) => {
                    self.files.occupied();
                    Ok(DirectFd {
                        slot,
                        files: Some(self.files),
                    })
                }
                Err(_) => Err(io::Error::other(format!(
                    "FILES_UPDATE returned an invalid slot {}",
                    self.fds[0]
                ))),
            },
            Ok(n) => Err(io::Error::other(format!(
                "FILES_UPDATE installed {n} files instead of 1"
            ))),
            Err(e) => Err(e),
        };
        (res, self.fd)
    }
}

/// Closes a direct descriptor's slot (`IORING_OP_CLOSE` with a fixed file) and waits.
#[derive(Debug)]
pub struct CloseDirect {
    pub(crate) slot: u32,
    /// `Some` until the close completed: if the op is dropped before it ran, the slot is queued
    /// for closing like a dropped [`DirectFd`].
    files: Option<Rc<FixedFiles>>,
}

impl CloseDirect {
    /// Closes the slot `fd` owns.
    pub fn new(mut fd: DirectFd) -> Self {
        CloseDirect {
            slot: fd.slot,
            files: fd.files.take(),
        }
    }

    pub(crate) fn owned(slot: u32, files: Rc<FixedFiles>) -> Self {
        CloseDirect {
            slot,
            files: Some(files),
        }
    }

    /// Forgets the slot (it was emptied another way).
    pub(crate) fn disarm(&mut self) {
        self.files = None;
    }
}

impl OpCode for CloseDirect {
    type Output = io::Result<()>;
    fn complete(mut self, c: Completion) -> Self::Output {
        if let Some(files) = self.files.take() {
            files.released();
        }
        cvt(c.res).map(drop)
    }
}

impl Drop for CloseDirect {
    fn drop(&mut self) {
        if let Some(files) = self.files.take() {
            files.queue_close(self.slot);
        }
    }
}

/// Installs a direct descriptor's file as an ordinary fd of the process
/// (`IORING_OP_FIXED_FD_INSTALL`, Linux 6.8; close-on-exec): another fd of the same open file,
/// its position included, the slot left as it is. A result nobody waits for is closed.
#[derive(Debug)]
pub struct FixedFdInstall {
    pub(crate) slot: u32,
}

impl FixedFdInstall {
    /// Installs the file of the slot `fd` owns.
    pub fn new(fd: &DirectFd) -> Self {
        FixedFdInstall { slot: fd.slot }
    }
}

impl OpCode for FixedFdInstall {
    type Output = io::Result<OwnedFd>;
    fn complete(self, c: Completion) -> Self::Output {
        let fd = cvt(c.res)?;
        // SAFETY: the kernel installed a new fd that nothing else owns.
        Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd) })
    }
}

/// Receives into `buf` (from its start, up to its capacity) from a direct descriptor.
#[derive(Debug)]
pub struct RecvDirect<B> {
    pub(crate) slot: u32,
    pub(crate) buf: B,
}

impl<B: IoBufMut> RecvDirect<B> {
    /// Receives from the slot `fd` owns.
    pub fn new(fd: &DirectFd, buf: B) -> Self {
        RecvDirect { slot: fd.slot, buf }
    }
}

impl<B: IoBufMut> OpCode for RecvDirect<B> {
    type Output = BufResult<usize, B>;
    fn complete(mut self, c: Completion) -> Self::Output {
        let res = super::read_into(&mut self.buf, c.res);
        (res, self.buf)
    }
}

/// Sends the initialized bytes of `buf` once on a direct descriptor (`MSG_NOSIGNAL`).
#[derive(Debug)]
pub struct SendDirect<B> {
    pub(crate) slot: u32,
    pub(crate) buf: B,
}

impl<B: IoBuf> SendDirect<B> {
    /// Sends on the slot `fd` owns.
    pub fn new(fd: &DirectFd, buf: B) -> Self {
        SendDirect { slot: fd.slot, buf }
    }
}

impl<B: IoBuf> OpCode for SendDirect<B> {
    type Output = BufResult<usize, B>;
    fn complete(self, c: Completion) -> Self::Output {
        (cvt(c.res).map(|n| n as usize), self.buf)
    }
}

/// Shuts down one or both directions of a direct descriptor's socket.
#[derive(Debug)]
pub struct ShutdownDirect {
    pub(crate) slot: u32,
    pub(crate) how: i32,
}

impl ShutdownDirect {
    /// Shuts down the socket in the slot `fd` owns (`how`: `libc::SHUT_RD`/`SHUT_WR`/`SHUT_RDWR`).
    pub fn new(fd: &DirectFd, how: i32) -> Self {
        ShutdownDirect { slot: fd.slot, how }
    }
}

impl OpCode for ShutdownDirect {
    type Output = io::Result<()>;
    fn complete(self, c: Completion) -> Self::Output {
        cvt(c.res).map(drop)
    }
}

/// [`RecvMulti`] on a direct descriptor: receives into buffers of a [`BufRing`] for as long as
/// it is armed, with the same items, re-arming and orphan handling.
#[derive(Debug)]
pub struct RecvMultiDirect {
    pub(crate) slot: u32,
    pub(crate) inner: RecvMulti,
}

impl RecvMultiDirect {
    /// Receives from the slot `fd` owns into buffers of `ring`.
    pub fn new(fd: &DirectFd, ring: BufRing) -> Self {
        RecvMultiDirect {
            slot: fd.slot,
            inner: RecvMulti::new(-1, ring),
        }
    }
}

impl MultishotCode for RecvMultiDirect {
    fn waits_for_peer(&self) -> bool {
        true
    }

    type Item = io::Result<RingBuf>;

    fn item(&mut self, c: Completion) -> Option<Self::Item> {
        self.inner.item(c)
    }

    fn rearm(&self, last: &Completion) -> bool {
        self.inner.rearm(last)
    }

    fn queued_item(&mut self) -> Option<Self::Item> {
        self.inner.queued_item()
    }

    fn has_queued(&self) -> bool {
        self.inner.has_queued()
    }

    fn poll_ready_to_arm(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.inner.poll_ready_to_arm(cx)
    }
}
